//! A floor under every role: the top-level `maxExcluded`, read by the one-pass
//! parser with its violations.

use serde_json::Value;

use crate::sorted::SortedMap;

use super::Parser;

/// The violation of a `maxExcluded` value that is not a percentage.
const SHAPES: &str = "`maxExcluded` is a percentage from \"0%\" to \"100%\" (\"50%\"), or a record of them per role with `default`";

/// "50%" as 50; anything but a whole percentage from 0 to 100, none.
fn percent(value: &Value) -> Option<u8> {
    let digits = value.as_str()?.strip_suffix('%')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u8>().ok().filter(|n| *n <= 100)
}

impl Parser {
    /// The top-level `maxExcluded`: one percentage for every role (kept as
    /// `default`), or `{ role: "N%", default: "N%" }`.
    pub(super) fn max_excluded(
        &mut self,
        value: Option<&Value>,
        roles: &[String],
    ) -> SortedMap<u8> {
        let mut floor = SortedMap::new();
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return floor;
        };
        if let Some(entries) = value.as_object() {
            for (role, item) in entries {
                let path = ["maxExcluded.", role].concat();
                if role != "default" && !roles.contains(role) {
                    self.fail(
                        path,
                        "`maxExcluded` names a role the document does not have",
                    );
                } else if let Some(n) = percent(item) {
                    floor.insert(role.clone(), n);
                } else {
                    self.fail(path, SHAPES);
                }
            }
        } else if let Some(n) = percent(value) {
            floor.insert("default".to_string(), n);
        } else {
            self.fail("maxExcluded", SHAPES);
        }
        floor
    }
}
