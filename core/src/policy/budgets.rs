//! Budgets: at most `requests` grants in any window of `per_ms`, on an
//! executor (`budget`) or on its account (`accounts.<name>.budget`). A window is the
//! grant times, oldest first, at most `requests` of them: a grant counts at its grant
//! time, a release refunds nothing. A full window makes room when its oldest time is
//! `per_ms` old; until then the executor (every executor of the account) takes no
//! lease, as a busy one takes none.

use std::collections::VecDeque;

use crate::document::Budget;
use crate::sorted::StrMap;

use super::keys::{timer_key, Index};

/// The account windows and the room timers.
#[derive(Debug, Clone, Default)]
pub(super) struct Budgets {
    /// Per account with a budget that has granted: its grant times, oldest first.
    pub(super) accounts: StrMap<VecDeque<u64>>,
    /// Every spent executor keyed (when its budget makes room, its index): the
    /// timers' one index type (`keys.rs`: another B-tree type is more code).
    pub(super) rooms: Index,
}

impl Budgets {
    /// The next instant a spent executor's budget makes room.
    pub(super) fn next_room(&self) -> Option<u64> {
        self.rooms.first_key_value().map(|(k, _)| k[0])
    }

    /// A spent executor whose budget makes room at `at` or before.
    pub(super) fn pop_due(&mut self, at: u64) -> Option<usize> {
        let (&[t, e, ..], _) = self.rooms.first_key_value()?;
        if t > at {
            return None;
        }
        self.rooms.pop_first();
        Some(e as usize)
    }

    /// `e`'s room time changed from `old` to `new`.
    pub(super) fn retime(&mut self, e: usize, old: Option<u64>, new: Option<u64>) {
        if let Some(t) = old {
            self.rooms.remove(&timer_key(t, e));
        }
        if let Some(t) = new {
            self.rooms.insert(timer_key(t, e), 0);
        }
    }
}

/// Records a grant at `now` in `window`, keeping the `budget.requests` latest.
pub(super) fn spend(window: &mut VecDeque<u64>, budget: Budget, now: u64) {
    window.push_back(now);
    while window.len() > budget.requests as usize {
        window.pop_front();
    }
}

/// When a full `window` makes room, if it is full at `now`.
pub(super) fn room_at(window: &VecDeque<u64>, budget: Budget, now: u64) -> Option<u64> {
    if window.len() < budget.requests as usize {
        return None;
    }
    let at = window.front()?.saturating_add(budget.per_ms);
    (at > now).then_some(at)
}

/// A window as the budget keeps it: at most `requests` times, the latest.
pub(super) fn trim(window: &mut VecDeque<u64>, budget: Option<Budget>) {
    let keep = budget.map_or(0, |b| b.requests as usize);
    while window.len() > keep {
        window.pop_front();
    }
}

/// What is wrong with a window kept under `budget` at `now`: longer than the
/// budget's `requests` (none kept without a budget), out of time order, or after now.
pub(super) fn window_fault(
    window: &VecDeque<u64>,
    budget: Option<Budget>,
    now: u64,
) -> Option<&'static str> {
    if window.len() > budget.map_or(0, |b| b.requests as usize) {
        Some("more grant times than the budget's requests (none without a budget)")
    } else if window.iter().zip(window.iter().skip(1)).any(|(a, b)| a > b) {
        Some("grant times out of time order")
    } else if window.back().is_some_and(|&t| t > now) {
        Some("a grant time after now")
    } else {
        None
    }
}
