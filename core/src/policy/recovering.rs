//! Flows of recovery: probation after a rate-limit or usage-limit
//! cooldown (`recovery: "probation"`), a failure on probation excluded for a longer
//! cooldown, and `other` failures in a row excluded as an outage
//! (`exclusion.consecutiveFailures`). The state is `recovery.rs`'s.
//!
//! Deterministic: the time is the inputs', and "no failure since a lease's grant" is
//! told by lease numbers, which are handed out in grant order.

use serde_json::json;

use crate::classify::excerpt;
use crate::document::RecoveryMode;
use crate::duration::write_seed_duration;
use crate::protocol::{ExclusionKind, Failure, FailureKind, Level};
use crate::write::push_u64;

use super::events::EventName;
use super::exclusions::ActiveExclusion;
use super::Policy;

/// What the recovery rules made of a failure report.
pub(super) enum Recovered {
    /// They do not apply: the seed's rules decide.
    No,
    /// Counted towards `consecutiveFailures`, short of an exclusion (its event said so).
    Counted,
    /// They exclude the executor.
    Excluded(ActiveExclusion),
}

/// What `explain` says of an executor on probation whose one slot is held.
pub(super) const ON_PROBATION: &str =
    "on probation: one slot until a lease is released without a failure";

impl Policy {
    /// A failure on executor `e`, classified `kind`, before the seed's rules: the
    /// executor's next clean release must come after it; on probation a rate or usage
    /// limit excludes it at once, for the cooldown times a doubled multiplier; an
    /// `other` failure counts towards `consecutiveFailures`.
    pub(super) fn recover_on_report(
        &mut self,
        e: usize,
        kind: FailureKind,
        failure: &Failure,
    ) -> Recovered {
        let next_lease = self.leases.next_id;
        let now = self.now;
        let x = &mut self.roster.executors[e];
        let (rule, threshold) = (x.spec.recovery, x.spec.consecutive_failures);
        if rule.mode == RecoveryMode::All && threshold == 0 {
            return Recovered::No;
        }
        let recovery = &mut x.runtime.recovery;
        recovery.clean_from = next_lease;
        let base = match kind {
            FailureKind::UsageLimit => x.spec.cooldown.usage_limit_ms,
            FailureKind::RateLimit => x.spec.cooldown.rate_limit_ms,
            FailureKind::Other if threshold > 0 => return self.count_failure(e, failure),
            _ => return Recovered::No,
        };
        if !recovery.probation {
            return Recovered::No;
        }
        let last = recovery.factor(now);
        let factor = last.saturating_mul(2).min(rule.max_backoff);
        recovery.backoff = factor;
        recovery.calm_since = None;
        recovery.quiet_ms = rule.quiet_ms.unwrap_or(base).max(1);
        x.runtime.rate_limits.clear();
        let cooldown = base.saturating_mul(u64::from(factor));
        // The report's own end (a reset time, a Retry-After) when it is later.
        let reported = match kind {
            FailureKind::UsageLimit => failure.reset_at.filter(|t| *t > now),
            _ => None,
        }
        .or(failure.retry_after_ms.map(|ms| now.saturating_add(ms)));
        let until = now.saturating_add(cooldown).max(reported.unwrap_or(0));
        let mut reason = String::with_capacity(96);
        reason.push_str(if kind == FailureKind::UsageLimit {
            "usage limit on probation: cooldown "
        } else {
            "rate limit on probation: cooldown "
        });
        if factor > last {
            reason.push_str("doubled to ");
        }
        write_seed_duration(&mut reason, cooldown);
        reason.push_str(" (");
        push_u64(&mut reason, u64::from(factor));
        reason.push_str("× ");
        write_seed_duration(&mut reason, base);
        reason.push_str(", at most ");
        push_u64(&mut reason, u64::from(rule.max_backoff));
        reason.push_str("×; ");
        reason.push_str(excerpt(&failure.message, 160));
        reason.push(')');
        Recovered::Excluded(self.new_exclusion(ExclusionKind::Until, reason, Some(until)))
    }

    /// An `other` failure on `e`, whose `consecutiveFailures` is on: counted, and at
    /// the threshold an outage (health-probed when it has a health URL).
    fn count_failure(&mut self, e: usize, failure: &Failure) -> Recovered {
        let x = &mut self.roster.executors[e];
        let threshold = x.spec.consecutive_failures;
        let recovery = &mut x.runtime.recovery;
        recovery.failures += 1;
        let count = recovery.failures;
        let mut text = String::with_capacity(64);
        push_u64(&mut text, u64::from(count));
        if count < threshold {
            text.push_str(" of ");
            push_u64(&mut text, u64::from(threshold));
            let id = x.spec.id.clone();
            self.event(
                Level::Info,
                EventName::FailureCounted,
                format!(
                    "{id} failed ({}): {text} failures in a row; a release without a failure resets the count",
                    excerpt(&failure.message, 160)
                ),
                vec![("count", json!(count)), ("executor", json!(id))],
            );
            return Recovered::Counted;
        }
        recovery.failures = 0;
        text.push_str(" failures in a row (");
        text.push_str(excerpt(&failure.message, 160));
        text.push(')');
        Recovered::Excluded(self.exclusion_of_kind(e, ExclusionKind::Health, text, None))
    }

    /// The multiplier a failure on probation on `e` would start from now, 0 when
    /// none was applied.
    pub(super) fn backoff_now(&self, e: usize) -> u32 {
        let recovery = &self.roster.executors[e].runtime.recovery;
        if recovery.backoff == 0 {
            return 0;
        }
        recovery.factor(self.now)
    }

    /// A rate or usage limit took `e` out: with `recovery: "probation"` it comes back
    /// on probation.
    pub(super) fn arm_probation(&mut self, e: usize, kind: FailureKind) {
        let x = &mut self.roster.executors[e];
        if x.spec.recovery.mode == RecoveryMode::Probation
            && matches!(kind, FailureKind::RateLimit | FailureKind::UsageLimit)
            && x.runtime.exclusion.is_some()
        {
            x.runtime.recovery.armed = true;
        }
    }

    /// Executors back in the round at `at` (their exclusion's time passed, or their
    /// health check answered): the armed ones start their probation, with one slot.
    pub(super) fn start_probation(&mut self, back: &[usize], at: u64) {
        for &e in back {
            let next_lease = self.leases.next_id;
            let x = &mut self.roster.executors[e];
            let recovery = &mut x.runtime.recovery;
            let armed = recovery.armed;
            recovery.back(at, armed);
            if !armed {
                continue;
            }
            recovery.clean_from = next_lease;
            let (id, slots) = (x.spec.id.clone(), x.spec.slots);
            self.roster.ready_up(e);
            self.roster.forget_reports();
            self.event(
                Level::Info,
                EventName::ProbationStarted,
                format!(
                    "{id} is on probation: one slot until a lease is released without a failure; then its {slots} slots"
                ),
                vec![("executor", json!(id)), ("slots", json!(slots))],
            );
        }
    }

    /// Lease `lease` on `e` was released, its slot freed: when no failure was
    /// reported on `e` since its grant, the failures in a row start over and a
    /// probation ends.
    pub(super) fn clean_release(&mut self, e: usize, lease: u64) {
        let x = &mut self.roster.executors[e];
        let recovery = &mut x.runtime.recovery;
        if !(recovery.probation || recovery.failures > 0) || lease < recovery.clean_from {
            return;
        }
        recovery.failures = 0;
        if !std::mem::take(&mut recovery.probation) {
            return;
        }
        let (id, slots) = (x.spec.id.clone(), x.spec.slots);
        self.roster.ready_up(e);
        self.roster.dirty.push(e);
        self.roster.forget_reports();
        self.event(
            Level::Info,
            EventName::ProbationEnded,
            format!(
                "{id}'s probation ends: lease {lease} was released without a failure; all its {slots} slots are back"
            ),
            vec![
                ("executor", json!(id)),
                ("lease", json!(lease)),
                ("slots", json!(slots)),
            ],
        );
    }
}
