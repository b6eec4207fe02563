//! Timers: the one answer to "when do you next need me?", and the time advance.

use super::queue::Ending;
use super::Policy;

impl Policy {
    /// When the core wants a `tick` (epoch ms), if ever. Early or repeated ticks
    /// are harmless.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut consider = |t: Option<u64>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        consider(self.exclusion_ends.first_key_value().map(|(k, _)| k[0]));
        consider(self.pause_ends.first_key_value().map(|(k, _)| k[0]));
        consider(self.deadlines.first().map(|(t, _)| t));
        if self.options.can_probe {
            // In floor order: once a floor passes the best due time, none is earlier.
            let mut best: Option<u64> = None;
            for &[floor, e, ..] in self.probe_waits.keys() {
                let e = e as usize;
                if best.is_some_and(|b| floor >= b) {
                    break;
                }
                let due = self.probe_due(e);
                best = Some(best.map_or(due, |b| b.min(due)));
            }
            consider(best);
        }
        next
    }

    /// Ends what the passing of time ends, in time order, granting between steps so
    /// that a slot that came back before a deadline is offered before it passes.
    pub(super) fn advance_time(&mut self) {
        loop {
            let next = [
                self.exclusion_ends.first_key_value().map(|(k, _)| k[0]),
                self.pause_ends.first_key_value().map(|(k, _)| k[0]),
                self.deadlines.first().map(|(t, _)| t),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(at) = next.filter(|t| *t <= self.now) else {
                break;
            };
            while let Some((&[t, e, ..], _)) = self.exclusion_ends.first_key_value() {
                if t > at {
                    break;
                }
                self.exclusion_ends.pop_first();
                let e = e as usize;
                self.end_exclusion(e, at, false);
            }
            while let Some((&[t, e, ..], _)) = self.pause_ends.first_key_value() {
                if t > at {
                    break;
                }
                self.pause_ends.pop_first();
                let e = e as usize;
                self.end_pause(e);
            }
            self.grant_pass();
            while let Some((t, s)) = self.deadlines.first() {
                if t > at {
                    break;
                }
                self.deadlines.pop_first();
                if let Some(id) = self.requests.at(s).map(|q| q.id.to_string()) {
                    self.end_request(&id, Ending::TimedOut);
                }
            }
        }
    }
}
