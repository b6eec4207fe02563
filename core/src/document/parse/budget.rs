//! Accounts and budgets in a document: the top-level `accounts` and an
//! executor's `budget`, read by the one-pass parser with their violations.

use serde_json::Value;

use crate::duration::parse_duration;
use crate::limits;
use crate::sorted::SortedMap;
use crate::write::to_text;

use super::super::Budget;
use super::{whole_number, Parser};

impl Parser {
    /// The top-level `accounts`: `{ name: { budget } }`, the budgets of those that give one.
    pub(super) fn accounts(&mut self, value: Option<&Value>) -> SortedMap<Budget> {
        let mut budgets = SortedMap::new();
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return budgets;
        };
        let Some(entries) = value.as_object() else {
            self.fail(
                "accounts",
                "`accounts` is a record of accounts by name, each `{ budget }`",
            );
            return budgets;
        };
        for (name, entry) in entries {
            let path = format!("accounts.{name}");
            let who = format!("account '{name}'");
            match entry.as_object() {
                Some(fields) if fields.keys().all(|k| k == "budget") => {
                    if let Some(budget) = fields
                        .get("budget")
                        .and_then(|v| self.budget(v, &format!("{path}.budget"), &who))
                    {
                        budgets.insert(name.clone(), budget);
                    }
                }
                _ => self.fail(path, format!("{who} is not a record `{{ budget }}`")),
            }
        }
        budgets
    }

    /// A `budget`: `{ requestsPerMinute: n }`, or `{ requests: n, per: "<duration>" }`
    /// (or `perMs`); whole numbers from 1 to `limits::MAX_BUDGET_REQUESTS`, a window of
    /// at least 1 ms. Anything else is one violation quoting it with the shapes.
    pub(super) fn budget(&mut self, value: &Value, path: &str, who: &str) -> Option<Budget> {
        let fields = value.as_object();
        let get = |k: &str| fields.and_then(|f| f.get(k));
        let known = fields.is_some_and(|f| {
            f.keys()
                .all(|k| ["requestsPerMinute", "requests", "per", "perMs"].contains(&k.as_str()))
        });
        let count =
            |v: &Value| whole_number(v).filter(|n| (1..=limits::MAX_BUDGET_REQUESTS).contains(n));
        let read = match (
            get("requestsPerMinute"),
            get("requests"),
            get("per"),
            get("perMs"),
        ) {
            (Some(n), None, None, None) => count(n).map(|n| (n, 60_000)),
            (None, Some(n), Some(per), None) => count(n).zip(per.as_str().and_then(parse_duration)),
            (None, Some(n), None, Some(ms)) => count(n).zip(whole_number(ms)),
            _ => None,
        };
        match read.filter(|(_, ms)| known && *ms >= 1) {
            Some((requests, per_ms)) => Some(Budget {
                requests: requests as u32,
                per_ms,
            }),
            None => {
                self.fail(
                    path,
                    format!(
                        "{who} has a budget {} that is not {{ requestsPerMinute: n }} or {{ requests: n, per: \"1 minute\" }} (or perMs: a whole number of ms, at least 1), n a whole number from 1 to 1000000",
                        to_text(value)
                    ),
                );
                None
            }
        }
    }
}
