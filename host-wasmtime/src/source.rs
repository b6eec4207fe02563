//! Where a roster document comes from: a user roster file (JSON, or YAML when it is
//! named `.yaml`/`.yml`), a repository overlay merged over it (same id replaces,
//! `disabled: true` removes, new ids add), and an `--executors a,b` narrowing.

use std::path::{Path, PathBuf};

use rota_core::Violation;
use serde_json::Value;

use crate::error::{HostError, Result};

/// Roster files and a narrowing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RosterSource {
    /// The user's roster (absent: only the overlay).
    pub roster: Option<PathBuf>,
    /// A repository roster merged over it.
    pub repo: Option<PathBuf>,
    /// Only these executors (empty: all).
    pub executors: Vec<String>,
}

/// Reads a JSON file. Unreadable: `Read`; not JSON: `Invalid` at `$` of that file.
pub fn read_json(path: &Path) -> Result<Value> {
    let text = read_text(path)?;
    serde_json::from_str(&text).map_err(|e| not_readable(path, "JSON", &e))
}

/// Reads a roster file: YAML when its name ends in `.yaml` or `.yml`, else JSON.
/// Unreadable: `Read`; not JSON/YAML: `Invalid` at `$` of that file.
pub fn read_document(path: &Path) -> Result<Value> {
    let yaml = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
    if !yaml {
        return read_json(path);
    }
    let text = read_text(path)?;
    serde_norway::from_str(&text).map_err(|e| not_readable(path, "YAML", &e))
}

fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| HostError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn not_readable(path: &Path, format: &str, error: &dyn std::fmt::Display) -> HostError {
    HostError::Invalid {
        violations: vec![Violation {
            path: format!("{}: $", path.display()),
            message: format!("not {format}: {error}"),
        }],
    }
}

impl RosterSource {
    /// Only a user roster file.
    pub fn file(path: impl Into<PathBuf>) -> RosterSource {
        RosterSource {
            roster: Some(path.into()),
            ..RosterSource::default()
        }
    }

    /// The merged, narrowed document (not yet validated: the policy does that).
    pub fn load(&self) -> Result<Value> {
        self.load_with_warnings().map(|(document, _)| document)
    }

    /// The merged, narrowed document and the warnings narrowing raised (ids in
    /// `--executors` the roster does not have: ignored, as the seed does).
    pub fn load_with_warnings(&self) -> Result<(Value, Vec<Violation>)> {
        let user = match &self.roster {
            Some(path) => read_document(path)?,
            None => Value::Null,
        };
        self.load_over(user)
    }

    /// As [`RosterSource::load_with_warnings`], with `user` as the user's roster
    /// (read by the caller: `rota check -` reads standard input) instead of the
    /// `roster` file, which is not read.
    pub fn load_over(&self, user: Value) -> Result<(Value, Vec<Violation>)> {
        let repo = match &self.repo {
            Some(path) => read_document(path)?,
            None => Value::Null,
        };
        if user.is_null() && repo.is_null() {
            return Err(HostError::Invalid {
                violations: vec![Violation {
                    path: "$".into(),
                    message: "no roster file given".into(),
                }],
            });
        }
        let merged = if repo.is_null() {
            user
        } else {
            // Merging keeps one entry per id: an id listed twice in one file would
            // vanish silently. Refused, naming each, as every host does.
            let side = |path: &Option<PathBuf>| {
                path.as_ref()
                    .map_or_else(String::new, |p| p.display().to_string())
            };
            let mut twice = rota_core::duplicate_ids(&user, &side(&self.roster));
            twice.extend(rota_core::duplicate_ids(&repo, &side(&self.repo)));
            if !twice.is_empty() {
                return Err(HostError::Invalid { violations: twice });
            }
            rota_core::merge(&user, &repo)
                .map_err(|violations| HostError::Invalid { violations })?
        };
        if self.executors.is_empty() {
            return Ok((merged, Vec::new()));
        }
        let narrowed = rota_core::narrow(&merged, &self.executors).map_err(|mut violations| {
            // A roster that narrowing cannot read: say everything wrong with it too.
            for v in rota_core::validate(&merged, None) {
                if !violations.contains(&v) {
                    violations.push(v);
                }
            }
            HostError::Invalid { violations }
        })?;
        let warnings = narrowed.warning().into_iter().collect();
        Ok((narrowed.document, warnings))
    }
}

/// `a,b, c` → `["a","b","c"]`.
pub fn split_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}
