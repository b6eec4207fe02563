//! A floor under every role (`maxExcluded`, like Envoy's max ejection percent): a
//! rate-limit, outage or failures-in-a-row exclusion that would take more than the
//! role's allowed share of its slots out of the round is held back. The failure is
//! counted as ever (the rate-limit window, the failures in a row), a warn event says
//! why, and the executor stays in the round. Usage-limit, authentication and
//! model-unavailable exclusions, an operator's, and restored ones always apply. A
//! held-back exclusion is dropped, not kept for later: when the floor has room again
//! (an executor returns), the next failure is judged afresh.

use serde_json::Value;

use crate::protocol::{FailureKind, Level};
use crate::write::push_u64;

use super::events::EventName;
use super::Policy;

impl Policy {
    /// Whether the floor holds back the exclusion of `e` for a failure of `kind`
    /// (`reason`: the exclusion's); if so, says so in an `exclusionHeldBack` event.
    pub(super) fn held_by_floor(&mut self, e: usize, kind: FailureKind, reason: &str) -> bool {
        if self.document.max_excluded.is_empty()
            || !matches!(
                kind,
                FailureKind::RateLimit | FailureKind::Outage | FailureKind::Other
            )
        {
            return false;
        }
        let floor = &self.document.max_excluded;
        let executors = &self.roster.executors;
        let x = &executors[e];
        for &r in &x.role_indexes {
            let role = self.role_name(r);
            let Some(&pct) = floor.get(role).or_else(|| floor.get("default")) else {
                continue;
            };
            if !x.in_round(r) {
                continue;
            }
            let (mut total, mut in_round) = (0u64, 0u64);
            for y in executors.iter().filter(|y| y.counts_for(r)) {
                total += u64::from(y.cap(r));
                if y.in_round(r) {
                    in_round += u64::from(y.cap(r));
                }
            }
            let left = in_round - u64::from(x.cap(r));
            if (total - left) * 100 <= total * u64::from(pct) {
                continue;
            }
            let role = role.to_string();
            let mut message = [
                x.spec.id.as_str(),
                " stays in the round (",
                reason,
                "): taking it out would leave ",
            ]
            .concat();
            push_u64(&mut message, left);
            message.push_str(" of ");
            push_u64(&mut message, total);
            message.push(' ');
            message.push_str(&role);
            message.push_str(" slots in the round; maxExcluded allows at most ");
            push_u64(&mut message, u64::from(pct));
            message.push_str("% out");
            let fields = vec![
                ("executor", Value::from(x.spec.id.as_str())),
                ("inRound", Value::from(in_round)),
                ("maxExcluded", Value::from(pct)),
                ("reason", Value::from(reason)),
                ("role", Value::from(role)),
                ("slots", Value::from(total)),
            ];
            self.event(Level::Warn, EventName::ExclusionHeldBack, message, fields);
            return true;
        }
        false
    }
}
