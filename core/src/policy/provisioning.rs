//! Provisioning: creation pauses after failures and abandoned creations (the flows
//! are `machines.rs`'s).

use serde::Serialize;

use crate::sorted::StrMap;

use super::keys::{timer_key, Index};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Pause {
    pub(super) failures: u32,
    /// When creation resumes (the seed's `retryAt`).
    pub(super) until: u64,
    pub(super) message: String,
    pub(super) blocked: bool,
    /// The seed's pause record: why (`MachineUnavailableError.reason`, or `check`)
    /// and when the creation failed.
    pub(super) reason: String,
    pub(super) failed_at: u64,
}

/// The doubling of the pause stops at 2^10 (the seed's `2 ** Math.min(failures - 1,
/// 10)`); the longest pause caps it sooner with the defaults.
pub(super) const MAX_PAUSE_DOUBLINGS: u32 = 10;

/// The pause reason of a failure that names none.
pub(super) const DEFAULT_PAUSE_REASON: &str = "unavailable";

/// The reason of a failed capability check (the seed's `WorkerCapabilityError`): it
/// is recorded as a failed preflight too.
pub(super) const CHECK_REASON: &str = "check";

/// Machine creation's own state: the pause timers of executors whose creations
/// failed, and the requests cancelled while their machine was created.
#[derive(Debug, Clone, Default)]
pub(super) struct Provisioning {
    /// Blocked pauses, keyed (until, executor).
    pub(super) pause_ends: Index,
    /// Requests cancelled while their machine was created, with the executor: the
    /// machine is deleted when it arrives.
    pub(super) abandoned: StrMap<String>,
    /// The owners of the abandoned creations that have one (a shared roster's).
    pub(super) abandoned_owners: StrMap<String>,
}

impl Provisioning {
    /// When a pause next ends.
    pub(super) fn next_pause_end(&self) -> Option<u64> {
        self.pause_ends.first_key_value().map(|(k, _)| k[0])
    }

    /// Takes the first pause timer due at `at` or earlier: its executor.
    pub(super) fn pop_due_pause(&mut self, at: u64) -> Option<usize> {
        let (&[t, e, ..], _) = self.pause_ends.first_key_value()?;
        if t > at {
            return None;
        }
        self.pause_ends.pop_first();
        Some(e as usize)
    }

    /// Starts executor `e`'s pause timer.
    pub(super) fn time_pause(&mut self, e: usize, until: u64) {
        self.pause_ends.insert(timer_key(until, e), 0);
    }

    /// Stops executor `e`'s pause timer (a pause that is no longer blocked has none).
    pub(super) fn untime_pause(&mut self, e: usize, until: u64) {
        self.pause_ends.remove(&timer_key(until, e));
    }
}
