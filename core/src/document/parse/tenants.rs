//! Tenants in a document: the top-level `tenants` (`{ name: { weight } }`), read by
//! the one-pass parser with their violations.

use serde_json::Value;

use crate::limits;
use crate::sorted::SortedMap;
use crate::write::to_text;

use super::{whole_number, Parser};

impl Parser {
    /// The top-level `tenants`: each listed tenant's weight (a whole number from 1 to
    /// `limits::MAX_TENANT_WEIGHT`; 1 when it gives none). A bad entry is one
    /// violation at its place, quoting it with the shape.
    pub(super) fn tenants(&mut self, value: Option<&Value>) -> SortedMap<u32> {
        let mut weights = SortedMap::new();
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return weights;
        };
        let entries = value
            .as_object()
            .filter(|entries| entries.len() <= limits::MAX_TENANTS);
        let Some(entries) = entries else {
            self.fail(
                "tenants",
                "`tenants` is a record of at most 10000 tenants by name, each `{ weight }`",
            );
            return weights;
        };
        for (name, entry) in entries {
            let fields = entry
                .as_object()
                .filter(|f| f.keys().all(|k| k == "weight"));
            let weight = fields.and_then(|f| match f.get("weight") {
                None => Some(1),
                Some(w) => whole_number(w)
                    .filter(|w| (1..=u64::from(limits::MAX_TENANT_WEIGHT)).contains(w)),
            });
            match weight {
                Some(w) if !name.is_empty() && name.len() <= limits::MAX_TENANT_BYTES => {
                    weights.insert(name.clone(), w as u32);
                }
                _ => self.fail(
                    format!("tenants.{name}"),
                    format!(
                        "tenant '{name}' is {} where a tenant (a name of 1 to 1024 bytes) is `{{ weight }}`, the weight a whole number from 1 to 20 (default 1)",
                        to_text(entry)
                    ),
                ),
            }
        }
        weights
    }
}
