//! The rules after failures in a document, on the document and on an executor:
//! `cooldown` (how long each kind of failure keeps an executor out), `recovery`
//! (probation after a cooldown) and `exclusion.consecutiveFailures`, read by the
//! one-pass parser with their violations.

use serde_json::Value;

use crate::duration::parse_duration;
use crate::write::to_text;

use super::super::{Cooldowns, RecoveryMode, RecoveryRule, MAX_BACKOFF, MAX_CONSECUTIVE_FAILURES};
use super::{whole_number, Parser};

impl Parser {
    /// A `recovery` at `path` over `base` (the document's, for an executor): a mode
    /// (`"all"`, `"probation"`), or `{ mode, maxBackoff, quietPeriod }`, whose fields
    /// replace `base`'s one by one. (Static messages: the path says where.)
    pub(super) fn recovery(
        &mut self,
        value: Option<&Value>,
        path: &str,
        base: RecoveryRule,
    ) -> RecoveryRule {
        const MODES: &str = "is \"all\" or \"probation\"";
        let mut rule = base;
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return rule;
        };
        let Some(fields) = value.as_object() else {
            match RecoveryMode::from_json(value) {
                Ok(mode) => rule.mode = mode,
                Err(_) => self.fail(
                    path,
                    "`recovery` is \"all\" or \"probation\", or a record of mode, maxBackoff and quietPeriod",
                ),
            }
            return rule;
        };
        for (key, item) in fields {
            let at = format!("{path}.{key}");
            match key.as_str() {
                "mode" => match RecoveryMode::from_json(item) {
                    Ok(mode) => rule.mode = mode,
                    Err(_) => self.fail(at, ["`mode` ", MODES].concat()),
                },
                "maxBackoff" => match whole_number(item) {
                    Some(n) if n >= 1 && n <= u64::from(MAX_BACKOFF) => rule.max_backoff = n as u32,
                    _ => self.fail(at, "`maxBackoff` is a whole number from 1 to 1024"),
                },
                "quietPeriod" => match item.as_str().and_then(parse_duration) {
                    Some(ms) if ms > 0 => rule.quiet_ms = Some(ms),
                    _ => self.fail(
                        at,
                        "`quietPeriod` is a duration longer than 0, such as \"10 minutes\"",
                    ),
                },
                _ => self.fail(
                    at,
                    format!("unknown field '{key}' of `recovery` (mode, maxBackoff, quietPeriod)"),
                ),
            }
        }
        rule
    }

    /// An `exclusion` at `path`: `{ consecutiveFailures }`, over `base` (the
    /// document's, for an executor).
    pub(super) fn exclusion(&mut self, value: Option<&Value>, path: &str, base: u32) -> u32 {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return base;
        };
        let Some(fields) = value.as_object() else {
            self.fail(path, "`exclusion` is a record: { consecutiveFailures }");
            return base;
        };
        let mut count = base;
        for (key, item) in fields {
            let at = format!("{path}.{key}");
            match (key.as_str(), whole_number(item)) {
                ("consecutiveFailures", Some(n)) if n <= u64::from(MAX_CONSECUTIVE_FAILURES) => {
                    count = n as u32
                }
                ("consecutiveFailures", _) => self.fail(
                    at,
                    "`consecutiveFailures` is a whole number from 0 (never) to 1000",
                ),
                _ => self.fail(
                    at,
                    format!("unknown field '{key}' of `exclusion` (consecutiveFailures)"),
                ),
            }
        }
        count
    }

    pub(super) fn cooldown(&mut self, value: Option<&Value>, place: &str, who: &str) -> Cooldowns {
        let mut cooldown = Cooldowns::default();
        let Some(value) = value else {
            return cooldown;
        };
        let Some(entries) = value.as_object() else {
            self.fail(
                format!("{place}.cooldown"),
                format!("{who} has a cooldown that is not a record of durations"),
            );
            return cooldown;
        };
        for (name, text) in entries {
            let path = format!("{place}.cooldown.{name}");
            let target = match name.as_str() {
                "usageLimit" => &mut cooldown.usage_limit_ms,
                "rateLimit" => &mut cooldown.rate_limit_ms,
                "outage" => &mut cooldown.outage_ms,
                _ => {
                    self.fail(
                        path,
                        format!("{who} has an unknown cooldown '{name}' (usageLimit, rateLimit, outage)"),
                    );
                    continue;
                }
            };
            match text.as_str().and_then(parse_duration) {
                Some(ms) => *target = ms,
                None => {
                    // The seed's wording quotes the text: `cooldown '30 parsecs'`.
                    let shown = match text.as_str() {
                        Some(s) => format!("'{s}'"),
                        None => to_text(text),
                    };
                    self.fail(
                        path,
                        format!("{who} has an unreadable {name} cooldown {shown}"),
                    )
                }
            }
        }
        cooldown
    }
}
