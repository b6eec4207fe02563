//! An executor's `effort` in a document: one effort, or per role with a `default`,
//! read by the one-pass parser with its violations.

use serde_json::Value;

use crate::sorted::SortedMap;

use super::super::{Effort, EffortLevel};
use super::Parser;

impl Parser {
    /// An executor's `effort`: one effort, or per role with a `default` (as
    /// `priority`). A wrong word or type names the field and the allowed efforts; a
    /// role the document does not have names it and the roles.
    pub(super) fn effort(
        &mut self,
        value: &Value,
        path: &str,
        who: &str,
        roles: &[String],
    ) -> Option<Effort> {
        const EFFORTS: &str = "one of \"low\", \"medium\", \"high\", \"max\"";
        match value {
            Value::Object(entries) => {
                let mut per_role = SortedMap::new();
                let mut default = None;
                for (key, item) in entries {
                    let at = format!("{path}.{key}");
                    if key != "default" && !roles.iter().any(|r| r == key) {
                        self.fail(
                            at,
                            format!(
                                "{who} has an effort for unknown role '{key}' (roles: {}, or default)",
                                roles.join(", ")
                            ),
                        );
                        continue;
                    }
                    let Ok(effort) = EffortLevel::from_json(item) else {
                        self.fail(at, format!("{who} has effort.{key} that is not {EFFORTS}"));
                        continue;
                    };
                    if key == "default" {
                        default = Some(effort);
                    } else {
                        per_role.insert(key.clone(), effort);
                    }
                }
                Some(Effort::PerRole {
                    roles: per_role,
                    default,
                })
            }
            _ => match EffortLevel::from_json(value) {
                Ok(effort) => Some(Effort::All(effort)),
                Err(_) => {
                    self.fail(
                        path,
                        format!("{who} has an effort that is not {EFFORTS}, nor a per-role record of them"),
                    );
                    None
                }
            },
        }
    }
}
