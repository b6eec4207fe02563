//! Timers: the one answer to "when do you next need me?", and the time advance.
//!
//! Each sub-state answers for its own timers (`Exclusions::next_end`,
//! `Provisioning::next_pause_end`, `Queue::next_deadline`, `Policy::next_probe_due`);
//! `next_timer` combines them, and both `poll_timeout` and `advance_time` ask it.

use super::queue::Ending;
use super::Policy;

/// Why the next timer fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timer {
    /// An `until` or manual exclusion ends.
    ExclusionEnd,
    /// A machine-creation pause ends.
    PauseEnd,
    /// A request's deadline passes.
    Deadline,
    /// A spent budget's window makes room.
    BudgetRoom,
    /// A health-excluded executor is due a probe (only when the host can probe).
    ProbeDue,
}

/// Which timers `next_timer` considers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timers {
    /// Every timer: what `poll_timeout` answers.
    All,
    /// The timers the time advance ends (a due probe is scheduled after it).
    Expiries,
}

impl Policy {
    /// The next timer and why it fires; on a tie, the first in `Timer` order.
    pub(super) fn next_timer(&self, which: Timers) -> Option<(u64, Timer)> {
        let probe = match which {
            Timers::All if self.options.can_probe => self.next_probe_due(),
            _ => None,
        };
        // A plain fold (an iterator chain over the four cost a third of a quiet tick):
        // a later timer replaces the best only when strictly earlier, so a tie keeps
        // the first in `Timer` order.
        let [exclusion, pause, deadline, room] = self.expiries();
        let mut best: Option<(u64, Timer)> = None;
        for (at, timer) in [exclusion, pause, deadline, room, (probe, Timer::ProbeDue)] {
            if let Some(at) = at {
                if best.is_none_or(|(b, _)| at < b) {
                    best = Some((at, timer));
                }
            }
        }
        best
    }

    /// The next end of each timer the time advance ends (`Timers::Expiries`), in
    /// `Timer` order.
    fn expiries(&self) -> [(Option<u64>, Timer); 4] {
        [
            (self.exclusions.next_end(), Timer::ExclusionEnd),
            (self.provisioning.next_pause_end(), Timer::PauseEnd),
            (self.queue.next_deadline(), Timer::Deadline),
            (self.budgets.next_room(), Timer::BudgetRoom),
        ]
    }

    /// When the core wants a `tick` (epoch ms), if ever. Early or repeated ticks
    /// are harmless.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<u64> {
        self.next_timer(Timers::All).map(|(at, _)| at)
    }

    /// Ends what the passing of time ends, in time order, granting between steps so
    /// that a slot that came back before a deadline is offered before it passes.
    /// At each instant: exclusion ends, then pause ends, then budgets' room, then a
    /// grant pass, then the deadlines.
    #[inline]
    pub(super) fn advance_time(&mut self) {
        // Inlined, an input that ends nothing (most) pays three comparisons and no
        // call.
        if !self
            .expiries()
            .iter()
            .any(|&(at, _)| at.is_some_and(|at| at <= self.now))
        {
            return;
        }
        self.end_due();
    }

    /// `advance_time` with a timer due.
    #[inline(never)]
    fn end_due(&mut self) {
        while let Some((at, _)) = self
            .next_timer(Timers::Expiries)
            .filter(|&(at, _)| at <= self.now)
        {
            let mut ended = Vec::new();
            while let Some(e) = self.exclusions.pop_due(at) {
                ended.push(e);
            }
            self.end_exclusions(&ended, at, false);
            while let Some(e) = self.provisioning.pop_due_pause(at) {
                self.end_pause(e);
            }
            self.end_budget_rooms(at);
            self.grant_pass();
            while let Some(s) = self.queue.pop_due_deadline(at) {
                let id = self.queue.requests.at(s).map(|q| String::from(&*q.id));
                debug_assert!(id.is_some(), "the deadline names an empty slot {s}");
                if let Some(id) = id {
                    self.end_request(&id, Ending::TimedOut);
                }
            }
        }
    }
}
