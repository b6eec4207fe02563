//! Budgets (issue 45): at most `requests` grants in any window of `per_ms`, on an
//! executor (`budget`) or on its account (`accounts.<name>.budget`). A window is the
//! grant times, oldest first, at most `requests` of them: a grant counts at its grant
//! time, a release refunds nothing. A full window makes room when its oldest time is
//! `per_ms` old; until then the executor (every executor of the account) takes no
//! lease, as a busy one takes none.

use std::collections::{BTreeSet, VecDeque};

use crate::document::Budget;
use crate::sorted::StrMap;

/// The account windows and the room timers.
#[derive(Debug, Clone, Default)]
pub(super) struct Budgets {
    /// Per account with a budget that has granted: its grant times, oldest first.
    pub(super) accounts: StrMap<VecDeque<u64>>,
    /// (when its budget makes room, executor index) of every spent executor.
    pub(super) rooms: BTreeSet<(u64, usize)>,
}

impl Budgets {
    /// The next instant a spent executor's budget makes room.
    pub(super) fn next_room(&self) -> Option<u64> {
        self.rooms.first().map(|&(at, _)| at)
    }

    /// A spent executor whose budget makes room at `at` or before.
    pub(super) fn pop_due(&mut self, at: u64) -> Option<usize> {
        let &(t, e) = self.rooms.first()?;
        (t <= at).then(|| {
            self.rooms.remove(&(t, e));
            e
        })
    }

    /// `e`'s room time changed from `old` to `new`.
    pub(super) fn retime(&mut self, e: usize, old: Option<u64>, new: Option<u64>) {
        if let Some(t) = old {
            self.rooms.remove(&(t, e));
        }
        if let Some(t) = new {
            self.rooms.insert((t, e));
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

/// What is wrong with a window kept under `budget` at `now`: out of time order,
/// after now, or longer than the budget's `requests` (none kept without a budget).
pub(super) fn window_fault(
    window: &VecDeque<u64>,
    budget: Option<Budget>,
    now: u64,
) -> Option<String> {
    let keep = budget.map_or(0, |b| b.requests as usize);
    if window.len() > keep {
        return Some(match budget {
            Some(b) => format!(
                "{} grant times kept; the budget allows {} per window",
                window.len(),
                b.requests
            ),
            None => format!("{} grant times kept without a budget", window.len()),
        });
    }
    if window.iter().zip(window.iter().skip(1)).any(|(a, b)| a > b) {
        return Some("grant times out of time order".into());
    }
    window
        .back()
        .filter(|&&t| t > now)
        .map(|t| format!("a grant time {t} after now {now}"))
}
