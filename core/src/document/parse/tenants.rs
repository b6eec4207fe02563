//! Tenants in a document: the top-level `tenants` (`{ name: { weight } }`), read by
//! the one-pass parser with their violations.

use serde_json::Value;

use crate::limits;
use crate::sorted::SortedMap;
use crate::write::to_text;

use super::{whole_number, Parser};

impl Parser {
    /// The top-level `tenants`: each listed tenant's weight (a whole number from 1 to
    /// `limits::MAX_TENANT_WEIGHT`; 1 when it gives none).
    pub(super) fn tenants(&mut self, value: Option<&Value>) -> SortedMap<u32> {
        let mut weights = SortedMap::new();
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return weights;
        };
        let Some(entries) = value.as_object() else {
            self.fail(
                "tenants",
                "`tenants` is a record of tenants by name, each `{ weight }`",
            );
            return weights;
        };
        if entries.len() > limits::MAX_TENANTS {
            self.fail(
                "tenants",
                format!(
                    "the document lists {} tenants; the most is {}",
                    entries.len(),
                    limits::MAX_TENANTS
                ),
            );
            return weights;
        }
        for (name, entry) in entries {
            let path = format!("tenants.{name}");
            if name.is_empty() || name.len() > limits::MAX_TENANT_BYTES {
                self.fail(
                    path,
                    "a tenant's name is a non-empty string of at most 1024 bytes",
                );
                continue;
            }
            let Some(fields) = entry
                .as_object()
                .filter(|f| f.keys().all(|k| k == "weight"))
            else {
                self.fail(
                    path,
                    format!("tenant '{name}' is not a record `{{ weight }}`"),
                );
                continue;
            };
            let weight = match fields.get("weight") {
                None => 1,
                Some(v) => match whole_number(v)
                    .filter(|w| (1..=u64::from(limits::MAX_TENANT_WEIGHT)).contains(w))
                {
                    Some(w) => w as u32,
                    None => {
                        self.fail(
                            format!("{path}.weight"),
                            format!(
                                "tenant '{name}' has a weight {} that is not a whole number from 1 to 20",
                                to_text(v)
                            ),
                        );
                        continue;
                    }
                },
            };
            weights.insert(name.clone(), weight);
        }
        weights
    }
}
