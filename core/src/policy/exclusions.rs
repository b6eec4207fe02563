//! Exclusions: the active exclusions and their end timers, the strength rules
//! between two, and how one is described (the flows are `excluding.rs`'s).

use serde::Serialize;

use crate::protocol::ExclusionKind;
use crate::time::push_iso;

use super::keys::{timer_key, Index};

/// An exclusion in force, with the timed one that takes over when it ends.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ActiveExclusion {
    pub(super) kind: ExclusionKind,
    pub(super) reason: String,
    pub(super) until: Option<u64>,
    pub(super) since: u64,
    /// A timed exclusion a stronger one shadows: `(end, reason)`.
    pub(super) then: Option<(u64, String)>,
}

impl ActiveExclusion {
    /// The instant a timer must end it, if any.
    pub(super) fn end(&self) -> Option<u64> {
        match self.kind {
            ExclusionKind::Until | ExclusionKind::Manual => self.until,
            _ => None,
        }
    }
}

/// The exclusion timers: executors whose exclusion ends at an instant, keyed
/// (end, executor). The exclusions themselves are the executors' (`Runtime`).
#[derive(Debug, Clone, Default)]
pub(super) struct Exclusions {
    pub(super) ends: Index,
}

impl Exclusions {
    /// When an exclusion next ends.
    pub(super) fn next_end(&self) -> Option<u64> {
        self.ends.first_key_value().map(|(k, _)| k[0])
    }

    /// Takes the first exclusion timer due at `at` or earlier: its executor.
    pub(super) fn pop_due(&mut self, at: u64) -> Option<usize> {
        let (&[t, e, ..], _) = self.ends.first_key_value()?;
        if t > at {
            return None;
        }
        self.ends.pop_first();
        Some(e as usize)
    }

    /// Moves executor `e`'s timer from the end of its old exclusion to the end of
    /// its new one (either may have none).
    pub(super) fn retime(&mut self, e: usize, old: Option<u64>, new: Option<u64>) {
        if let Some(end) = old {
            // Gone already when the time advance took it (`pop_due`).
            self.ends.remove(&timer_key(end, e));
        }
        if let Some(end) = new {
            self.ends.insert(timer_key(end, e), 0);
        }
    }
}

/// The strength rules, for an executor already out with `old`.
pub(super) fn merge_exclusions(old: ActiveExclusion, new: ActiveExclusion) -> ActiveExclusion {
    use ExclusionKind::*;
    // The timed end a shadow keeps: the later of the old shadow and a new timed end.
    let later = |shadow: Option<(u64, String)>, timed: Option<(u64, String)>| match (shadow, timed)
    {
        (Some(a), Some(b)) => Some(if b.0 > a.0 { b } else { a }),
        (a, b) => a.or(b),
    };
    let timed = |x: &ActiveExclusion| match x.kind {
        Until => x.until.map(|t| (t, x.reason.clone())),
        _ => None,
    };
    match (old.kind, new.kind) {
        (Run, _) => old,
        (_, Run) => ActiveExclusion { then: None, ..new },
        (Manual, Manual) => ActiveExclusion {
            then: old.then.clone(),
            ..new
        },
        (Manual, Until) | (Health, Until) => {
            let then = later(old.then.clone(), timed(&new));
            ActiveExclusion { then, ..old }
        }
        (Manual, Health) | (Health, Health) => old,
        (Health, Manual) | (Until, Manual) => {
            let then = later(old.then.clone(), timed(&old));
            ActiveExclusion { then, ..new }
        }
        (Until, Health) => {
            let then = later(old.then.clone(), timed(&old));
            ActiveExclusion { then, ..new }
        }
        (Until, Until) => {
            if new.until > old.until {
                new
            } else {
                old
            }
        }
    }
}

pub(super) fn kind_name(kind: ExclusionKind) -> &'static str {
    match kind {
        ExclusionKind::Until => "timed",
        ExclusionKind::Health => "health",
        ExclusionKind::Run => "run",
        ExclusionKind::Manual => "manual",
    }
}

/// The seed's `describeExclusion`.
pub(super) fn describe(exclusion: &ActiveExclusion) -> String {
    let mut text = String::with_capacity(exclusion.reason.len() + 40);
    Described(exclusion).push_to(&mut text);
    text
}

/// How an exclusion reads in messages ("until <instant>: <reason>" ...), written
/// straight into the message being built.
pub(super) struct Described<'a>(pub(super) &'a ActiveExclusion);

impl Described<'_> {
    /// Appended to `out` (every report of a rate-limit storm writes one: no
    /// formatting machinery on the way).
    pub(super) fn push_to(&self, out: &mut String) {
        let exclusion = self.0;
        match (exclusion.kind, exclusion.until) {
            (ExclusionKind::Until, Some(t)) => {
                out.push_str("until ");
                push_iso(out, t);
            }
            (ExclusionKind::Until, None) => out.push_str("until ?"),
            (ExclusionKind::Health, _) => out.push_str("until its health check answers"),
            (ExclusionKind::Run, _) => out.push_str("for this run"),
            (ExclusionKind::Manual, Some(t)) => {
                out.push_str("paused until ");
                push_iso(out, t);
            }
            (ExclusionKind::Manual, None) => out.push_str("paused"),
        }
        out.push_str(": ");
        out.push_str(&exclusion.reason);
    }
}

/// For the `format!`s of the rarer messages.
impl std::fmt::Display for Described<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&describe(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_as_the_seed_describes_it() {
        let of = |kind, until| ActiveExclusion {
            kind,
            reason: "why".into(),
            until,
            since: 0,
            then: None,
        };
        let t = Some(1_795_000_000_123);
        for (exclusion, text) in [
            (
                of(ExclusionKind::Until, t),
                "until 2026-11-18T11:06:40.123Z: why",
            ),
            (of(ExclusionKind::Until, None), "until ?: why"),
            (
                of(ExclusionKind::Health, None),
                "until its health check answers: why",
            ),
            (of(ExclusionKind::Run, None), "for this run: why"),
            (
                of(ExclusionKind::Manual, t),
                "paused until 2026-11-18T11:06:40.123Z: why",
            ),
            (of(ExclusionKind::Manual, None), "paused: why"),
        ] {
            let mut pushed = String::from("x ");
            Described(&exclusion).push_to(&mut pushed);
            assert_eq!(pushed, format!("x {text}"));
            assert_eq!(describe(&exclusion), text, "Display agrees with push_to");
        }
    }
}
