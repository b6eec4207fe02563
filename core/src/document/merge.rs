//! Merging a repository roster over the user's, and narrowing to named executors,
//! on documents as JSON (before they are parsed): the seed's `mergeRosters` and
//! `narrowRoster`, in either document form.

use serde_json::{Map, Value};

use super::Violation;

/// A narrowed document, and a warning naming the ids it ignored.
#[derive(Debug, Clone, PartialEq)]
pub struct Narrowed {
    pub document: Value,
    /// The ids the document does not have (ignored, as the seed does).
    pub unknown: Vec<String>,
    /// The list the document declares its executors in (`executors` or `workers`).
    pub list: &'static str,
}

impl Narrowed {
    /// "executors 'x', 'y' are not in the roster; narrowing ignores them".
    pub fn warning(&self) -> Option<Violation> {
        if self.unknown.is_empty() {
            return None;
        }
        let names: Vec<String> = self.unknown.iter().map(|id| format!("'{id}'")).collect();
        let (noun, verb) = if names.len() == 1 {
            ("executor", "is")
        } else {
            ("executors", "are")
        };
        Some(Violation {
            path: self.list.into(),
            message: format!(
                "{noun} {} {verb} not in the roster; narrowing ignores {}",
                names.join(", "),
                if names.len() == 1 { "it" } else { "them" }
            ),
        })
    }
}

/// A repository roster over the user's: an entry replaces the user entry with the
/// same id, `disabled: true` removes it, a new id is added (after the user's).
/// Either side may be absent (`null`). Unknown fields pass through. Documents in the
/// scheduler's form merge their `workers` by `name` the same way (a map of workers
/// becomes a list); the two sides must use the same form.
pub fn merge(user: &Value, repo: &Value) -> Result<Value, Vec<Violation>> {
    let mut violations = Vec::new();
    let user_entries = executor_objects(user, "user", &mut violations);
    let repo_entries = executor_objects(repo, "repo", &mut violations);
    let form = match (&user_entries, &repo_entries) {
        (Some((a, _)), Some((b, _))) if a != b => {
            violations.push(Violation {
                path: format!("repo.{b}"),
                message: format!(
                    "the repo roster declares `{b}` and the user's `{a}`; give one form"
                ),
            });
            *a
        }
        (Some((form, _)), _) | (None, Some((form, _))) => *form,
        (None, None) => EXECUTORS,
    };
    if !violations.is_empty() {
        return Err(violations);
    }
    // In first-seen order; a later entry with a seen id replaces it in place. The
    // position of each id by a sorted index (a scan per entry was O(n²) at 10,000).
    // (The map's key and value types are those of the lease index, whose code the
    // module has already: the web build's size budget.)
    let mut merged: Vec<Value> = Vec::new();
    let mut position: std::collections::BTreeMap<Box<str>, u64> = Default::default();
    let entries =
        |side: Option<(&str, Vec<(String, Value)>)>| side.map(|(_, e)| e).unwrap_or_default();
    for (id, entry) in entries(user_entries)
        .into_iter()
        .chain(entries(repo_entries))
    {
        match position.get(id.as_str()) {
            Some(&at) => {
                if let Some(slot) = merged.get_mut(at as usize) {
                    *slot = entry;
                }
            }
            None => {
                position.insert(id.into_boxed_str(), merged.len() as u64);
                merged.push(entry);
            }
        }
    }
    let executors: Vec<Value> = merged
        .into_iter()
        .filter(|entry| entry.get("disabled") != Some(&Value::Bool(true)))
        .collect();
    // Top-level fields (a declared role list) come from the user's, then the repo's.
    let mut top = Map::new();
    for side in [user, repo] {
        if let Some(object) = side.as_object() {
            for (key, value) in object {
                if key != EXECUTORS && key != WORKERS {
                    top.insert(key.clone(), value.clone());
                }
            }
        }
    }
    top.insert(form.into(), Value::Array(executors));
    Ok(Value::Object(top))
}

/// Only the named executors (`--executors a,b`); an empty list keeps all. A name
/// the document does not have is ignored, as the seed's `narrowRoster` does, and
/// named in the result (`Narrowed::warning`) so a typo does not pass in silence.
/// Only a document without an `executors` array (or an entry without an id) is
/// refused.
pub fn narrow(document: &Value, ids: &[String]) -> Result<Narrowed, Vec<Violation>> {
    let mut violations = Vec::new();
    let (form, entries) =
        executor_objects(document, "document", &mut violations).unwrap_or((EXECUTORS, Vec::new()));
    if !violations.is_empty() {
        return Err(violations);
    }
    let mut unknown: Vec<String> = Vec::new();
    for id in ids {
        if !entries.iter().any(|(have, _)| have == id) && !unknown.contains(id) {
            unknown.push(id.clone());
        }
    }
    let mut top = document.as_object().cloned().unwrap_or_default();
    let kept: Vec<Value> = entries
        .into_iter()
        .filter(|(id, _)| ids.is_empty() || ids.contains(id))
        .map(|(_, entry)| entry)
        .collect();
    top.insert(form.into(), Value::Array(kept));
    Ok(Narrowed {
        document: Value::Object(top),
        unknown,
        list: form,
    })
}

const EXECUTORS: &str = "executors";
const WORKERS: &str = "workers";

/// The list a document declares its executors in (`executors`, or the scheduler's
/// `workers`) and its `(id, object)` pairs, for merge and narrow; `None` for `null`.
/// A map of workers becomes a list, each with its `name`.
fn executor_objects(
    value: &Value,
    side: &str,
    violations: &mut Vec<Violation>,
) -> Option<(&'static str, Vec<(String, Value)>)> {
    if value.is_null() {
        return None;
    }
    let form = match value.get(EXECUTORS) {
        None if value.get(WORKERS).is_some() => WORKERS,
        _ => EXECUTORS,
    };
    let id_field = if form == WORKERS { "name" } else { "id" };
    let items: Vec<(String, Value)> = match value.get(form) {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("{side}.{form}[{i}]"), v.clone()))
            .collect(),
        Some(Value::Object(map)) if form == WORKERS => map
            .iter()
            .map(|(name, v)| {
                let mut entry = v.clone();
                if let Some(object) = entry.as_object_mut() {
                    object
                        .entry("name")
                        .or_insert_with(|| Value::String(name.clone()));
                }
                (format!("{side}.{form}.{name}"), entry)
            })
            .collect(),
        _ => {
            violations.push(Violation {
                path: format!("{side}.executors"),
                message: format!("the {side} roster needs an `executors` array"),
            });
            return Some((form, Vec::new()));
        }
    };
    let mut out = Vec::new();
    for (place, entry) in items {
        match entry.get(id_field).and_then(Value::as_str) {
            Some(id) => out.push((id.to_string(), entry)),
            None => violations.push(Violation {
                path: format!("{place}.{id_field}"),
                message: format!("an executor has no {id_field}"),
            }),
        }
    }
    Some((form, out))
}
