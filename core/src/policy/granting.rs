//! Granting: admitting a request, choosing its executor, taking a slot, and the
//! grant pass that offers every freed slot to the queue in lease order.

use serde_json::json;

use crate::document::PreferRule;
use crate::error::Error;
use crate::protocol::{Because, LeaseRequest, Level, Output};
use crate::sorted;

use super::events::EventName;
use super::events::{for_label, with_label};
use super::keys::{order_key, OrderKey};
use super::leasing::Borrowing;
use super::queue::Ending;
use super::requests::{request_extra, Creating, Given, Request};
use super::Policy;

/// What one pass through an input decided to do with a lease request.
pub(super) enum Admission {
    Granted,
    Queued,
    Ended,
}

impl Policy {
    /// A lease or tryLease, its role `r` as `check` found it.
    pub(super) fn admit(&mut self, request: LeaseRequest, r: Option<usize>, try_only: bool) {
        let Some(r) = r else {
            debug_assert!(false, "admit: the role was checked");
            return;
        };
        let key = order_key((
            u8::from(request.rank.is_none()),
            request.rank.unwrap_or(0),
            request.event_time.unwrap_or(self.now),
            self.queue.next_arrival,
        ));
        self.queue.next_arrival += 1;
        // `timeoutMs` is relative to the log's time: this input's (clamped) `now`.
        let deadline = request.deadline.or_else(|| {
            request.timeout_ms.map(|t| {
                self.now
                    .saturating_add(t)
                    .min(crate::limits::MAX_SAFE_INTEGER)
            })
        });
        let req = Request {
            id: request.id.into_boxed_str(),
            key,
            since: self.now,
            role: self.roster.roles.ids.get(r).copied().unwrap_or(0),
            announced: false,
            try_only,
            has_event_time: request.event_time.is_some(),
            label: request.label.map(String::into_boxed_str),
            owner: request.owner.map(String::into_boxed_str),
            extra: request_extra(Given {
                avoid: request.avoid,
                prefer: request.prefer,
                pin: request.pin,
                deadline,
                purpose: request.purpose,
                // A `tryLease` never borrows (the upstream's `tryLease` takes a free slot or nothing).
                borrow: request.borrow.filter(|_| !try_only),
                tenant: request.tenant,
                affinity: request.affinity,
            }),
            creating: None,
        };
        // A free slot now: granted at once, without a trip through `requests`.
        if let Some(e) = self.choose(&req, r) {
            let passed = self.passed_by(e, &req.key);
            self.queue.serve_tenant(r, req.tenant_name());
            self.take_slot_with(req, e, r, passed, None);
            return;
        }
        // By slot from here: a lease that waits looks its id up no more. No slot
        // serves it now (`choose` just said so, and storing it changed nothing it reads).
        let s = self.queue.requests.insert(req);
        match self.place_unserved(s, r, !try_only) {
            Admission::Granted | Admission::Ended => {}
            Admission::Queued if try_only => {
                if let Some(id) = self.queue.requests.at(s).map(|q| String::from(&*q.id)) {
                    self.unavailable(&id, r);
                }
            }
            Admission::Queued => self.enqueue_at(s, r),
        }
    }

    /// A lease that would wait while the queue is full is refused (the queue's
    /// bound, `limits::MAX_WAITING_REQUESTS`, keeps its memory bounded); one a free
    /// slot serves now is not. A `tryLease` never waits, so it is never refused.
    #[inline]
    pub(super) fn check_room_to_wait(&self, request: &LeaseRequest, r: usize) -> Result<(), Error> {
        // Inlined: a queue with room (most inputs) costs one comparison.
        if self.queue.has_room() {
            return Ok(());
        }
        self.check_full_queue(request, r)
    }

    /// `check_room_to_wait` when the queue is full.
    #[inline(never)]
    fn check_full_queue(&self, request: &LeaseRequest, r: usize) -> Result<(), Error> {
        let hypothetical = Request {
            id: Box::from(request.id.as_str()),
            key: order_key((1, 0, self.now, self.queue.next_arrival)),
            since: self.now,
            role: self.roster.roles.ids.get(r).copied().unwrap_or(0),
            announced: false,
            try_only: false,
            has_event_time: false,
            label: None,
            owner: None,
            extra: request_extra(Given {
                avoid: request.avoid.clone(),
                prefer: request.prefer.clone(),
                pin: request.pin.clone(),
                borrow: request.borrow.clone(),
                affinity: request.affinity.clone(),
                ..Given::default()
            }),
            creating: None,
        };
        if self.choose(&hypothetical, r).is_some() {
            return Ok(());
        }
        Err(Error::input(format!(
            "lease '{}': {} requests already wait, the most the queue holds; it would wait, so it is refused (serve or cancel some first)",
            request.id, self.queue.capacity
        )))
    }

    /// Ends a `tryLease` that found no free slot.
    pub(super) fn unavailable(&mut self, id: &str, r: usize) {
        let req = self.queue.requests.remove(id);
        self.push_output(Output::Unavailable {
            request: id.to_string(),
            owner: req.as_ref().and_then(Request::owner).map(str::to_string),
        });
        let mut fields = vec![("request", json!(id))];
        with_label(&mut fields, req.as_ref().and_then(Request::label));
        self.event(
            Level::Debug,
            EventName::Unavailable,
            format!("no free executor takes {} now", self.role_name(r)),
            fields,
        );
    }

    /// Grants a request now if a free slot serves it, ends it if nothing ever can,
    /// or says it must wait. The request is in `requests` and in no queue.
    pub(super) fn try_place(&mut self, id: &str, r: usize, may_wait: bool) -> Admission {
        let Some(s) = self.queue.requests.slot(id) else {
            debug_assert!(false, "try_place: the request is stored");
            return Admission::Ended;
        };
        self.try_place_at(s, r, may_wait)
    }

    /// `try_place` of the request in slot `s`.
    pub(super) fn try_place_at(&mut self, s: u32, r: usize, may_wait: bool) -> Admission {
        let Some(req) = self.queue.requests.at(s) else {
            debug_assert!(false, "try_place: the slot holds a request");
            return Admission::Ended;
        };
        if let Some(e) = self.choose(req, r) {
            let passed = self.passed_by(e, &req.key);
            self.take_slot_at(s, e, r, passed, None);
            return Admission::Granted;
        }
        self.place_unserved(s, r, may_wait)
    }

    /// `try_place_at` of a request no free slot serves now: it ends if nothing ever
    /// can or its deadline has passed, else it must wait.
    fn place_unserved(&mut self, s: u32, r: usize, may_wait: bool) -> Admission {
        if !may_wait {
            return Admission::Queued;
        }
        if self.try_borrow(s, r) {
            return Admission::Granted;
        }
        let Some(req) = self.queue.requests.at(s) else {
            debug_assert!(false, "try_place: the slot holds a request");
            return Admission::Ended;
        };
        let ending = if self.ends_unservable() && !self.can_serve_request(req, r) {
            Ending::Exhausted
        } else if req.deadline().is_some_and(|d| d <= self.now) {
            Ending::TimedOut
        } else {
            return Admission::Queued;
        };
        let id = String::from(&*req.id);
        self.end_request(&id, ending);
        Admission::Ended
    }

    /// The executor that serves `req` now, if any: its pin, or the pick.
    pub(super) fn choose(&self, req: &Request, r: usize) -> Option<usize> {
        if !self.serving() {
            return None; // the startup preflight has not passed
        }
        match req.pin() {
            Some(pin) => self
                .roster
                .index
                .get(pin)
                .filter(|&e| self.pin_ready(e, r) && !req.avoids(pin)),
            None => self.pick(req, r),
        }
    }

    pub(super) fn pin_ready(&self, e: usize, r: usize) -> bool {
        let x = &self.roster.executors[e];
        x.has_role(r) && x.free_for(r) && x.runtime.exclusion.is_none() && !x.spent()
    }

    /// Among the free executors for a request: `prefer` first (with the document's
    /// `prefer: "tieBreak"`, only while its priority for the role is no worse than
    /// the best free one's); else the executor its `affinity` key is remembered on,
    /// while its priority is no worse than the best free one's; else the lowest
    /// priority for the role; ties to the one leased least recently (or the first
    /// declared), or as `leastBusy` and the weights spread them (`spreading.rs`).
    pub(super) fn pick(&self, req: &Request, r: usize) -> Option<usize> {
        let best = || {
            if self.spreads() {
                return self.spread_pick(req, r);
            }
            self.roster.ready[r]
                .find_first(|k| !req.avoids(&self.roster.executors[k[2] as usize].spec.id))
                .map(|k| k[2] as usize)
        };
        if let Some(prefer) = req.prefer() {
            if let Some(e) = self.roster.index.get(prefer) {
                let x = &self.roster.executors[e];
                if x.has_role(r) && x.ready_for(r) && !req.avoids(prefer) {
                    if self.roster.prefer == PreferRule::First {
                        return Some(e);
                    }
                    // It is free and not avoided, so there is a best free one.
                    let best = best()?;
                    let ranks = x.priority(r) <= self.roster.executors[best].priority(r);
                    return Some(if ranks { e } else { best });
                }
            }
        }
        // Affinity: the executor of the key's last grant, while it ranks with the best.
        if let Some(e) = self.affine(req, r) {
            let best = best()?;
            let x = &self.roster.executors;
            return Some(if x[e].priority(r) <= x[best].priority(r) {
                e
            } else {
                best
            });
        }
        best()
    }

    /// Takes a slot on `e` for the request in slot `s`: a lease, or a machine creation first.
    pub(super) fn take_slot_at(
        &mut self,
        s: u32,
        e: usize,
        r: usize,
        passed: u32,
        because: Option<Because>,
    ) {
        if !self.queue.fair.is_empty() {
            // The tenant's turn is taken while its request still waits in its queue.
            let tenant = self
                .queue
                .requests
                .at(s)
                .map(|q| q.tenant_name().to_string());
            if let Some(tenant) = tenant {
                self.queue.serve_tenant(r, &tenant);
            }
        }
        self.dequeue_at(s);
        // Its id stays in use: the lease (or the store again) takes the entry over.
        let Some(req) = self.queue.requests.take_at(s) else {
            debug_assert!(false, "take_slot_at: the slot holds a request");
            return;
        };
        self.take_slot_with(req, e, r, passed, because);
    }

    /// Takes a slot on `e` for `req`, which is in no queue and not in `requests`
    /// (`because`: `e` is its `borrow`, on a slot of its own).
    pub(super) fn take_slot_with(
        &mut self,
        mut req: Request,
        e: usize,
        r: usize,
        passed: u32,
        because: Option<Because>,
    ) {
        debug_assert!(
            self.roster.executors[e].free_for(r),
            "invariant: a grant takes a free slot"
        );
        if self.spreads() && because.is_none() && req.pin().is_none() {
            self.spread_grant(&req, r, e);
        }
        self.roster.lease_clock += 1;
        let x = &mut self.roster.executors[e];
        x.busy += 1;
        x.per_role[r].busy += 1;
        x.runtime.last_leased = self.roster.lease_clock;
        debug_assert!(
            x.busy <= x.spec.slots && x.busy_in(r) <= x.cap(r),
            "a grant stays within {}'s slots and its cap",
            x.spec.id
        );
        let (provision, budgeted) = (
            x.spec.provision,
            x.spec.budget.is_some() || x.spec.account.is_some(),
        );
        let executor_id = x.shared_name();
        if budgeted {
            self.spend_budget(e);
        }
        self.roster.ready_up(e);
        if provision && req.pin().is_none() {
            req.creating = Some(Box::new(Creating {
                executor: executor_id.to_string(),
                passed,
            }));
            let label = req.label.clone();
            let owner = req.owner().map(str::to_string);
            let id = String::from(&*req.id);
            let (deadline, key) = (req.deadline(), req.key);
            let s = self.queue.requests.insert(req);
            if let Some(deadline) = deadline {
                // The deadline still applies while the machine is created.
                self.queue.deadlines.insert(deadline, &key, s);
            }
            self.push_output(Output::CreateMachine {
                request: id.to_string(),
                executor: executor_id.to_string(),
                owner,
            });
            let role = self.role_name(r).to_string();
            let mut fields = vec![
                ("executor", json!(executor_id)),
                ("passed", json!(passed)),
                ("request", json!(id)),
                ("role", json!(role)),
            ];
            with_label(&mut fields, label.as_deref());
            self.event(
                Level::Debug,
                EventName::CreatingMachine,
                format!(
                    "{executor_id} takes {role}{} in lease order; creating its machine",
                    for_label(label.as_deref())
                ),
                fields,
            );
            return;
        }
        let borrowing = because.map(|because| Borrowing {
            because,
            slotless: false,
        });
        self.open_lease(req, executor_id, Some(e), None, passed, borrowing);
    }

    /// Grants, in lease order, every waiting request that a newly usable slot can
    /// serve. Only executors that gained a slot this input (`dirty`) are looked at,
    /// and only the heads of their roles' queues, so the cost does not grow with the
    /// number of waiters.
    #[inline]
    pub(super) fn grant_pass(&mut self) {
        // No retried request, and no slot that came back or no request to offer it
        // to: nothing to offer (most inputs). Checked here, inlined, so that they pay
        // no call either.
        if self.queue.retry.is_empty()
            && (self.roster.dirty.is_empty() || self.queue.requests.len() == 0)
        {
            self.roster.dirty.clear();
            return;
        }
        self.offer_slots();
    }

    /// `grant_pass` with something to offer.
    #[inline(never)]
    fn offer_slots(&mut self) {
        for id in std::mem::take(&mut self.queue.retry) {
            let Some(req) = self.queue.requests.get(&id) else {
                debug_assert!(false, "a retried request is stored");
                continue;
            };
            if !req.waiting() {
                continue;
            }
            let Some(r) = self.roster.request_role(req) else {
                // Its machine failed after a reload removed its role: nothing can
                // ever serve it now.
                self.end_request(&id, Ending::Exhausted);
                continue;
            };
            let try_only = req.try_only;
            self.dequeue(&id);
            match self.try_place(&id, r, !try_only) {
                Admission::Queued if try_only => self.unavailable(&id, r),
                Admission::Queued => self.enqueue(&id, r),
                Admission::Granted | Admission::Ended => {}
            }
        }
        while let Some((s, pinned_to)) = self.next_candidate() {
            let Some(req) = self.queue.requests.at(s) else {
                debug_assert!(false, "a candidate is stored");
                break;
            };
            let Some(r) = self.roster.request_role(req) else {
                debug_assert!(false, "a candidate has a role");
                break;
            };
            let choice = match pinned_to {
                Some(e) => Some(e),
                None => self.pick(req, r),
            };
            let Some(e) = choice else {
                debug_assert!(false, "a candidate was found on a ready executor");
                break; // the assertion above: in release, stop rather than loop
            };
            let passed = self.passed_by(e, &req.key);
            self.take_slot_at(s, e, r, passed, None);
        }
        self.roster.dirty.clear();
    }

    /// The earliest waiting request, in lease order, that one of the dirty
    /// executors can serve now.
    pub(super) fn next_candidate(&self) -> Option<(u32, Option<usize>)> {
        // Nothing stored, nothing waits (most inputs of a roster that keeps up).
        if self.queue.requests.len() == 0 || !self.serving() {
            return None;
        }
        let mut best: Option<(OrderKey, u32, Option<usize>)> = None;
        for &e in &self.roster.dirty {
            let x = &self.roster.executors[e];
            if x.draining || x.runtime.exclusion.is_some() || x.busy >= x.slots_now() || x.spent() {
                continue;
            }
            if !x.blocked() {
                for &r in &x.role_indexes {
                    if !x.free_for(r) {
                        continue;
                    }
                    if let Some(fair) = self.queue.fair.get(r) {
                        // The role's turn across tenants; compared with the other
                        // roles' and the pinned candidates in lease order.
                        if let Some((key, s)) = self.fair_first(fair, &x.spec.id) {
                            if best.as_ref().is_none_or(|(b, _, _)| key < *b) {
                                best = Some((key, s, None));
                            }
                        }
                        continue;
                    }
                    for &(key, s) in self.queue.by_role[r].iter() {
                        if best.as_ref().is_some_and(|(b, _, _)| *b <= key) {
                            break;
                        }
                        let Some(req) = self.queue.requests.at(s) else {
                            debug_assert!(false, "a queued slot holds a request");
                            continue;
                        };
                        if req.pin().is_some() || req.avoids(&x.spec.id) {
                            continue;
                        }
                        best = Some((key, s, None));
                        break;
                    }
                }
            }
            if let Some(queue) = sorted::get(&self.queue.pinned, &x.spec.id) {
                for (key, &s) in queue {
                    if best.as_ref().is_some_and(|(b, _, _)| b <= key) {
                        break;
                    }
                    let Some(req) = self.queue.requests.at(s) else {
                        debug_assert!(false, "a pinned slot holds a request");
                        continue;
                    };
                    let Some(r) = self.roster.request_role(req) else {
                        debug_assert!(
                            false,
                            "a pinned request has a role (a reload ends those whose role it drops)"
                        );
                        continue;
                    };
                    if x.has_role(r) && x.free_for(r) && !req.avoids(&x.spec.id) {
                        best = Some((*key, s, Some(e)));
                        break;
                    }
                }
            }
        }
        best.map(|(_, s, e)| (s, e))
    }
}
