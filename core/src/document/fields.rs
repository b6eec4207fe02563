//! Misspelt fields: a document keeps the fields it does not use and passes
//! them to the host, so `priorty: 2` or `helth:` used to pass without a word. An
//! unknown field close to a known one is a warning of `check` naming both; a field
//! far from every known one is the user's own and passes as before.

use serde_json::{Map, Value};

use crate::error::Violation;

/// The top-level fields a document reads (`rules`: the switch of the
/// upstream's later rules; `$schema`: for editors).
const TOP: &[&str] = &[
    "executors",
    "workers",
    "roles",
    "signals",
    "choice",
    "unservable",
    "rules",
    "prefer",
    "coderSlotsDefault",
    "clones",
    "leaseEvents",
    "resetTime",
    "recovery",
    "exclusion",
    "accounts",
    "maxExcluded",
    "fairness",
    "tenants",
    "affinityTtl",
    "$schema",
];

/// The fields an executor (or a worker) reads.
const EXECUTOR: &[&str] = &[
    "id",
    "name",
    "harness",
    "model",
    "flags",
    "env",
    "baseUrl",
    "roles",
    "slots",
    "maxConcurrentAttempts",
    "max_concurrent_attempts",
    "coderSlots",
    "roleSlots",
    "priority",
    "effort",
    "health",
    "cooldown",
    "recovery",
    "exclusion",
    "disabled",
    "provision",
    "kind",
    "account",
    "budget",
    "weight",
];

/// Edit distance with adjacent transpositions (optimal string alignment, `strsim`),
/// ASCII case aside: `priorty`/`priority` 1, `coderslots`/`coderSlots` 0.
fn distance(a: &str, b: &str) -> usize {
    strsim::osa_distance(&a.to_ascii_lowercase(), &b.to_ascii_lowercase())
}

/// The known field `field` is a slip of: at most one edit away (two for a name of
/// eight letters or more), the nearest first in the list's order.
fn nearest<'a>(field: &str, known: &[&'a str]) -> Option<&'a str> {
    if known.contains(&field) {
        return None;
    }
    known
        .iter()
        .map(|k| (distance(field, k), *k))
        .filter(|(d, k)| *d <= if k.chars().count() >= 8 { 2 } else { 1 })
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn warn(out: &mut Vec<Violation>, place: &str, object: &Map<String, Value>, known: &[&str]) {
    for field in object.keys() {
        if let Some(meant) = nearest(field, known) {
            let path = if place.is_empty() {
                field.clone()
            } else {
                format!("{place}.{field}")
            };
            let at = if place.is_empty() {
                "the document"
            } else {
                place
            };
            out.push(Violation {
                path,
                message: format!("{at}: unknown field '{field}' — did you mean '{meant}'?"),
            });
        }
    }
}

/// A warning for every unknown field close to a known one: at the top level, and on
/// every entry of `executors` and `workers` (a list, or a map keyed by name).
pub fn misspelt(document: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    let Some(top) = document.as_object() else {
        return out;
    };
    warn(&mut out, "", top, TOP);
    for list in ["executors", "workers"] {
        match top.get(list) {
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    if let Some(entry) = item.as_object() {
                        warn(&mut out, &format!("{list}[{i}]"), entry, EXECUTOR);
                    }
                }
            }
            Some(Value::Object(map)) => {
                for (key, item) in map {
                    if let Some(entry) = item.as_object() {
                        warn(&mut out, &format!("{list}.{key}"), entry, EXECUTOR);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// A warning for every account listed under `accounts` that no executor names
/// (its budget binds nothing: a slip in a name, or a leftover).
pub fn unused_accounts(document: &Value) -> Vec<Violation> {
    let Some(accounts) = document.get("accounts").and_then(Value::as_object) else {
        return Vec::new();
    };
    let entries = super::entries(document);
    let named = |name: &str| {
        entries
            .iter()
            .any(|(_, x)| x.get("account").and_then(Value::as_str) == Some(name))
    };
    accounts
        .keys()
        .filter(|name| !named(name))
        .map(|name| Violation {
            path: format!("accounts.{name}"),
            message: format!("account '{name}' is listed, and no executor names it (`account`)"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("priorty", "priority"), 1);
        assert_eq!(distance("helth", "health"), 1);
        assert_eq!(distance("slot", "slots"), 1);
        assert_eq!(distance("signal", "signals"), 1);
        assert_eq!(distance("coderslots", "coderSlots"), 0);
        assert_eq!(distance("prioirty", "priority"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("notes", "roles"), 2);
    }

    #[test]
    fn near_misses_only() {
        assert_eq!(nearest("priorty", EXECUTOR), Some("priority"));
        assert_eq!(nearest("priority", EXECUTOR), None);
        assert_eq!(nearest("notes", EXECUTOR), None, "a user's own field");
        assert_eq!(nearest("image", EXECUTOR), None);
        assert_eq!(
            nearest("maxConcurentAttempts", EXECUTOR),
            Some("maxConcurrentAttempts")
        );
        assert_eq!(nearest("signal", TOP), Some("signals"));
        // Issue 43's fields (items 7 and 9).
        assert_eq!(nearest("efort", EXECUTOR), Some("effort"));
        assert_eq!(nearest("effort", EXECUTOR), None);
        assert_eq!(nearest("resetTim", TOP), Some("resetTime"));
        assert_eq!(nearest("resetTime", TOP), None);
        // Recovery and failures in a row.
        assert_eq!(nearest("recovry", TOP), Some("recovery"));
        assert_eq!(nearest("exclusions", TOP), Some("exclusion"));
        assert_eq!(nearest("recovery", EXECUTOR), None);
        assert_eq!(nearest("exlcusion", EXECUTOR), Some("exclusion"));
        // Accounts and budgets.
        assert_eq!(nearest("acount", EXECUTOR), Some("account"));
        assert_eq!(nearest("budgte", EXECUTOR), Some("budget"));
        assert_eq!(nearest("acounts", TOP), Some("accounts"));
        assert_eq!(nearest("accounts", TOP), None);
        // Tenants.
        assert_eq!(nearest("fairnes", TOP), Some("fairness"));
        assert_eq!(nearest("tenats", TOP), Some("tenants"));
        assert_eq!(nearest("tenants", TOP), None);
        // Affinity.
        assert_eq!(nearest("affinityTtl", TOP), None);
        assert_eq!(nearest("affinityTTL", TOP), Some("affinityTtl"));
        assert_eq!(nearest("afinityTtl", TOP), Some("affinityTtl"));
    }
}
