//! Recovery: an executor's probation after a rate-limit or usage-limit
//! cooldown, the multiplier of the cooldowns of failures on probation, and its
//! `other` failures in a row (the flows are `recovering.rs`'s).
//!
//! An executor whose rule is `probation` and that a rate or usage limit took out is
//! `armed`: when that exclusion ends (by its time, or its health check), it comes back
//! on probation, with one slot. A lease numbered `clean_from` or above (granted after
//! its return and after the last failure reported on it) released ends the probation.
//! Leases are numbered in grant order, so "no failure reported since its grant" is a
//! comparison of numbers, the same on every host.

use serde::Serialize;
use serde_json::Value;

use crate::document::ExecutorSpec;
use crate::read::{self, object, Read};

/// An executor's recovery state. All zero (the default, not written in an export)
/// unless one of its rules is on.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Recovery {
    /// On probation: in the round with one slot.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) probation: bool,
    /// Out of the round after a rate or usage limit (or while on probation): back on
    /// probation when the exclusion ends.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) armed: bool,
    /// The multiplier of the last failure on probation (0: none), at most its rule's
    /// `maxBackoff`.
    #[serde(skip_serializing_if = "is_zero")]
    pub(super) backoff: u32,
    /// When it came back in the round with that multiplier: it halves after each
    /// quiet period from here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) calm_since: Option<u64>,
    /// The quiet period (ms): the rule's `quietPeriod`, else the cooldown of the last
    /// failure on probation's kind.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub(super) quiet_ms: u64,
    /// `other` failures since the last clean release (`consecutiveFailures`).
    #[serde(skip_serializing_if = "is_zero")]
    pub(super) failures: u32,
    /// The first lease number whose release is clean: leases granted before the last
    /// failure reported on the executor, or before its probation began, are not.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub(super) clean_from: u64,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

impl Recovery {
    pub(super) fn is_default(&self) -> bool {
        *self == Recovery::default()
    }

    /// The multiplier a failure on probation starts from at `now`: the last one,
    /// halved for each whole quiet period since the executor came back (1 at least).
    pub(super) fn factor(&self, now: u64) -> u32 {
        let last = self.backoff.max(1);
        match self.calm_since {
            Some(since) if self.quiet_ms > 0 => {
                let halvings = (now.saturating_sub(since) / self.quiet_ms).min(31) as u32;
                (last >> halvings).max(1)
            }
            _ => last,
        }
    }

    /// Out of the round at `now`: the multiplier stops decaying (as it stands now),
    /// and a probation ends, to come back when the exclusion does.
    pub(super) fn suspend(&mut self, now: u64) {
        if self.calm_since.is_some() {
            self.backoff = self.factor(now);
            self.calm_since = None;
        }
        if self.probation {
            self.probation = false;
            self.armed = true;
        }
    }

    /// Back in the round at `at` (`probation`: on probation): the multiplier decays
    /// from here.
    pub(super) fn back(&mut self, at: u64, probation: bool) {
        self.armed = false;
        if probation {
            self.probation = true;
        }
        if self.backoff > 1 {
            self.calm_since = Some(at);
        }
    }

    /// Fits the state to `spec`'s rules (a reload changed them): no probation without
    /// the rule, the multiplier within its cap, fewer failures counted than exclude.
    pub(super) fn fit(&mut self, spec: &ExecutorSpec) {
        if spec.recovery.mode != crate::document::RecoveryMode::Probation {
            self.probation = false;
            self.armed = false;
        }
        self.backoff = self.backoff.min(spec.recovery.max_backoff);
        if self.backoff <= 1 {
            self.calm_since = None;
        }
        self.failures = match spec.consecutive_failures {
            0 => 0,
            n => self.failures.min(n - 1),
        };
    }

    /// What `spec`'s rules allow this state to be, or what contradicts them: the
    /// invariants' and an import's check (the slots and the round are `verify`'s).
    pub(super) fn contradiction(&self, spec: &ExecutorSpec) -> Option<&'static str> {
        let probation = spec.recovery.mode == crate::document::RecoveryMode::Probation;
        if (self.probation || self.armed) && !probation {
            Some("recovery.probation: on probation (or armed for it) without `recovery: probation`")
        } else if self.probation && self.armed {
            Some("recovery.armed: on probation and armed for it at once")
        } else if self.backoff > spec.recovery.max_backoff {
            Some("recovery.backoff: above the executor's maxBackoff")
        } else if self.calm_since.is_some() && self.backoff <= 1 {
            Some("recovery.calmSince: set without a backoff above 1")
        } else if (self.backoff > 0) != (self.quiet_ms > 0) {
            Some("recovery.quietMs: a backoff and its quiet period go together")
        } else if spec.consecutive_failures == 0 && self.failures > 0 {
            Some("recovery.failures: counted without `exclusion.consecutiveFailures`")
        } else if spec.consecutive_failures > 0 && self.failures >= spec.consecutive_failures {
            Some("recovery.failures: as many as exclude the executor, yet it was not excluded")
        } else {
            None
        }
    }

    /// What the rest of the state allows this to be: on probation only in the round
    /// (`out`: excluded), and taking a new lease only with no slot held (`busy_ready`:
    /// ready with a slot held); armed only out of the round; `clean_from` a lease number
    /// handed out (`next_lease`); `calm_since` not after `now`.
    pub(super) fn against(
        &self,
        out: bool,
        busy_ready: bool,
        next_lease: u64,
        now: u64,
    ) -> Option<&'static str> {
        if self.probation && out {
            Some("recovery.probation: on probation while out of the round")
        } else if self.armed && !out {
            Some("recovery.armed: armed for probation while in the round")
        } else if self.probation && busy_ready {
            Some("recovery.probation: on probation, it takes a new lease with a slot held")
        } else if self.clean_from > next_lease {
            Some("recovery.cleanFrom: above the next lease id")
        } else if self.calm_since.is_some_and(|t| t > now) {
            Some("recovery.calmSince: after now")
        } else {
            None
        }
    }

    pub(super) fn from_json(value: &Value) -> Read<Recovery> {
        let o = object(value, "struct Recovery")?;
        Ok(Recovery {
            probation: o.or("probation", read::bool, false)?,
            armed: o.or("armed", read::bool, false)?,
            backoff: o.or("backoff", read::u32, 0)?,
            calm_since: o.opt("calmSince", read::u64)?,
            quiet_ms: o.or("quietMs", read::u64, 0)?,
            failures: o.or("failures", read::u32, 0)?,
            clean_from: o.or("cleanFrom", read::u64, 0)?,
        })
    }
}
