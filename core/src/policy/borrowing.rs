//! Borrowing (the upstream roster's `borrow`, 2083c508): a request made for a
//! context whose coder holds executor X names X as its `borrow`. When independence
//! cannot be had (nobody outside `avoid` can ever serve the role, every executor in
//! the round that takes it is held by coders, or every one is out of the round), X
//! takes it: on a free slot of its own (a real lease), else without a slot
//! (`borrowed`: it holds none and frees none). X out of the round itself is taken
//! only when nobody can ever serve. A waiting request that borrows is re-decided
//! after every input (`borrow_pass`), over the waiting requests that name a
//! `borrow` only (`Queue::borrowers`).

use crate::protocol::Because;

use super::avoid::Avoid;
use super::leasing::Borrowing;
use super::Policy;

impl Policy {
    /// Why a request for role `r` outside `avoid` cannot be served by a call ending:
    /// `Out` (no executor that takes it is in the round), `Held` (every one in the
    /// round has all its slots held by coders), or `None`.
    pub(super) fn blocked_outside(&self, r: usize, avoid: &Avoid) -> Option<Because> {
        let coder = self.document.roles.iter().position(|x| x == "coder");
        let mut in_round = false;
        for &e in &self.roster.roles.members[r] {
            let x = &self.roster.executors[e];
            if !x.in_round(r) || avoid.contains(&x.spec.id) {
                continue;
            }
            in_round = true;
            if coder.is_none_or(|c| x.busy_in(c) < x.spec.slots) {
                return None;
            }
        }
        Some(if in_round {
            Because::Held
        } else {
            Because::Out
        })
    }

    /// The executor request `s` borrows now, and why, if it does.
    fn borrows(&self, s: u32, r: usize) -> Option<(usize, Because)> {
        let req = self.queue.requests.at(s)?;
        let borrow = req.borrow()?;
        if req.pin().is_some() || !self.serving() {
            return None;
        }
        let e = self.roster.index.get(borrow)?;
        let x = &self.roster.executors[e];
        if !x.counts_for(r) {
            return None;
        }
        let because = if self.can_serve_request(req, r) {
            self.blocked_outside(r, req.avoid())?
        } else {
            Because::Nobody
        };
        // Out of the round itself, it is taken only when nobody can ever serve.
        if x.runtime.exclusion.is_some() && because != Because::Nobody {
            return None;
        }
        // A spent budget holds for a borrow too: it waits for the window's room.
        if x.spent() {
            return None;
        }
        Some((e, because))
    }

    /// Whether the waiting request in slot `s` (in no queue) borrows now.
    pub(super) fn would_borrow(&self, s: u32, r: usize) -> bool {
        self.borrows(s, r).is_some()
    }

    /// Serves the request in slot `s` (stored, in no queue) by its `borrow` if it
    /// borrows now: X's own free slot first, else X without a slot. True if it did.
    pub(super) fn try_borrow(&mut self, s: u32, r: usize) -> bool {
        let Some((e, because)) = self.borrows(s, r) else {
            return false;
        };
        if self.roster.executors[e].ready_for(r) {
            let Some(key) = self.queue.requests.at(s).map(|q| q.key) else {
                return false;
            };
            let passed = self.passed_by(e, &key);
            self.take_slot_at(s, e, r, passed, Some(because));
            return true;
        }
        let Some(req) = self.queue.requests.take_at(s) else {
            return false;
        };
        let x = &self.roster.executors[e];
        let name = x.shared_name();
        if x.spec.budget.is_some() || x.spec.account.is_some() {
            self.spend_budget(e);
        }
        let borrowing = Borrowing {
            because,
            slotless: true,
        };
        self.open_lease(req, name, Some(e), None, 0, Some(borrowing));
        true
    }

    /// Re-decides every waiting request that names a `borrow`, in lease order: the
    /// round may have changed this input (coders took every slot, an executor went
    /// out or came back). Costs nothing while none waits.
    #[inline]
    pub(super) fn borrow_pass(&mut self) {
        if self.queue.borrowers.is_empty() {
            return;
        }
        let waiting: Vec<u32> = self.queue.borrowers.values().copied().collect();
        for s in waiting {
            let Some(r) = self
                .queue
                .requests
                .at(s)
                .filter(|q| q.waiting())
                .and_then(|q| self.roster.request_role(q))
            else {
                continue;
            };
            if self.borrows(s, r).is_some() {
                self.dequeue_at(s);
                self.try_borrow(s, r);
            }
        }
    }
}
