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

/// The executor ids listed twice in one side of a merge (`side` names it: a file's
/// path, `document`), each a violation at `<side>: executors[<i>].id`. Merging keeps
/// one entry per id, so an id listed twice in one roster would vanish silently: every
/// host refuses it, naming it, before it merges ([`merge`] itself keeps the seed's
/// rule, the later entry replacing the earlier).
pub fn duplicate_ids(document: &Value, side: &str) -> Vec<Violation> {
    let Some(executors) = document.get("executors").and_then(Value::as_array) else {
        return Vec::new();
    };
    // The policy's name map, whose code the module has already (as `merge_owned`).
    let mut seen = crate::names::ByName::new();
    let mut found = Vec::new();
    for (index, id) in executors.iter().enumerate() {
        let Some(id) = id.get("id").and_then(Value::as_str) else {
            continue;
        };
        if seen.insert(id.into(), index as u64).is_some() {
            found.push(Violation {
                path: format!("{side}: executors[{index}].id"),
                message: format!("executor '{id}' is listed twice"),
            });
        }
    }
    found
}

/// A repository roster over the user's: an entry replaces the user entry with the
/// same id, `disabled: true` removes it, a new id is added (after the user's).
/// Either side may be absent (`null`). Unknown fields pass through. Documents in the
/// scheduler's form merge their `workers` by `name` the same way (a map of workers
/// becomes a list); the two sides must use the same form.
pub fn merge(user: &Value, repo: &Value) -> Result<Value, Vec<Violation>> {
    merge_owned(user.clone(), repo.clone())
}

/// As [`merge`], taking the two documents: their entries move into the result, so a
/// large roster is in memory once while it merges (issue 15: `Roster.create` at
/// 10,000 executors).
pub fn merge_owned(user: Value, repo: Value) -> Result<Value, Vec<Violation>> {
    let mut violations = Vec::new();
    let (user_top, user_entries) = executor_objects(user, "user", &mut violations);
    let (repo_top, repo_entries) = executor_objects(repo, "repo", &mut violations);
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
    // position of each id by the policy's name map (a scan per entry is O(n²) at
    // 10,000), whose code the module has already.
    let mut merged: Vec<Value> = Vec::new();
    let mut position = crate::names::ByName::new();
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
    drop(position);
    merged.retain(|entry| entry.get("disabled") != Some(&Value::Bool(true)));
    // Top-level fields (a declared role list) come from the user's, then the repo's.
    let mut top = Map::new();
    for (key, value) in user_top.into_iter().chain(repo_top) {
        if key != EXECUTORS && key != WORKERS {
            top.insert(key, value);
        }
    }
    top.insert(form.into(), Value::Array(merged));
    Ok(Value::Object(top))
}

/// Only the named executors (`--executors a,b`); an empty list keeps all. A name
/// the document does not have is ignored, as the seed's `narrowRoster` does, and
/// named in the result (`Narrowed::warning`) so a typo does not pass in silence.
/// Only a document without an `executors` array (or an entry without an id) is
/// refused.
pub fn narrow(document: &Value, ids: &[String]) -> Result<Narrowed, Vec<Violation>> {
    let mut violations = Vec::new();
    let (mut top, entries) = executor_objects(document.clone(), "document", &mut violations);
    let (form, entries) = entries.unwrap_or((EXECUTORS, Vec::new()));
    if !violations.is_empty() {
        return Err(violations);
    }
    let mut unknown: Vec<String> = Vec::new();
    for id in ids {
        if !entries.iter().any(|(have, _)| have == id) && !unknown.contains(id) {
            unknown.push(id.clone());
        }
    }
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

/// A document taken apart for merge and narrow: its top-level fields, and the list
/// it declares its executors in (`executors`, or the scheduler's `workers`) with its
/// `(id, object)` pairs (`None` for `null`). A map of workers becomes a list, each
/// with its `name`. The list stays among the top-level fields.
type Parts = (
    Map<String, Value>,
    Option<(&'static str, Vec<(String, Value)>)>,
);

fn executor_objects(value: Value, side: &str, violations: &mut Vec<Violation>) -> Parts {
    let mut top = match value {
        Value::Null => return (Map::new(), None),
        Value::Object(top) => top,
        _ => Map::new(),
    };
    let form = match top.get(EXECUTORS) {
        None if top.get(WORKERS).is_some() => WORKERS,
        _ => EXECUTORS,
    };
    let id_field = if form == WORKERS { "name" } else { "id" };
    // (where it was, for a violation: an index in a list or a name in a map; entry)
    let items: Vec<(Result<usize, String>, Value)> = match top.get_mut(form).map(Value::take) {
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, v)| (Ok(i), v))
            .collect(),
        Some(Value::Object(map)) if form == WORKERS => map
            .into_iter()
            .map(|(name, mut entry)| {
                if let Some(object) = entry.as_object_mut() {
                    object
                        .entry("name")
                        .or_insert_with(|| Value::String(name.clone()));
                }
                (Err(name), entry)
            })
            .collect(),
        _ => {
            violations.push(Violation {
                path: format!("{side}.executors"),
                message: format!("the {side} roster needs an `executors` array"),
            });
            return (top, Some((form, Vec::new())));
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for (place, entry) in items {
        match entry.get(id_field).and_then(Value::as_str) {
            Some(id) => out.push((id.to_string(), entry)),
            None => {
                let place = match place {
                    Ok(i) => format!("{side}.{form}[{i}]"),
                    Err(name) => format!("{side}.{form}.{name}"),
                };
                violations.push(Violation {
                    path: format!("{place}.{id_field}"),
                    message: format!("an executor has no {id_field}"),
                });
            }
        }
    }
    (top, Some((form, out)))
}
