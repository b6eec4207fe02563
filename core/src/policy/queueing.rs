//! Flows of the queue: requests enqueued, counted ahead, dequeued and ended.

use crate::protocol::{Level, Output};
use crate::sorted::{self};
use serde_json::{json, Value};

use super::avoid::NO_AVOID;
use super::events::EventName;
use super::events::{for_label, with_label};
use super::keys::{key_parts, OrderKey};
use super::queue::Ending;
use super::requests::Request;
use super::Policy;

impl Policy {
    pub(super) fn enqueue(&mut self, id: &str, r: usize) {
        let Some(s) = self.queue.requests.slot(id) else {
            debug_assert!(false, "enqueue: the request is stored");
            return;
        };
        self.enqueue_at(s, r);
    }

    /// `enqueue` of the request in slot `s`.
    pub(super) fn enqueue_at(&mut self, s: u32, r: usize) {
        let req_rank = |key: &OrderKey| (key[0] == 0).then(|| key_parts(key).1);
        let Some(req) = self.queue.requests.at_mut(s) else {
            debug_assert!(false, "enqueue: the slot holds the request");
            return;
        };
        req.creating = None;
        let key = req.key;
        let announce = !req.announced;
        req.announced = true;
        let id = String::from(&*req.id);
        let pin = req.pin().map(str::to_string);
        let owner = req.owner().map(str::to_string);
        self.queue.queue_waiting(s, r);
        if announce {
            let ahead = self.ahead_of(r, &key, pin.as_deref());
            let rank = req_rank(&key);
            // Read in place: an avoid list can be long.
            let request = self.queue.requests.at(s);
            debug_assert!(
                request.is_some(),
                "enqueue: the slot still holds the request"
            );
            let avoid = request.map_or(&NO_AVOID, Request::avoid);
            // With no avoid list and no pin, the roster's copy while nothing it names
            // changed (`Roster::reports`), else written (and kept).
            let plain = pin.is_none() && avoid.distinct_len() == 0;
            let kept = self.roster.reports.get(r).and_then(Option::as_ref);
            let report = match kept.filter(|_| plain) {
                Some(kept) => kept.clone(),
                None => self.waiting_report(r, avoid, pin.as_deref()),
            };
            let spent = self.spent_in_report(r, avoid, pin.as_deref());
            if plain && kept.is_none() {
                self.keep_report(r, &report);
            }
            let role = self.role_name(r).to_string();
            // A pin to an executor the roster does not declare waits at warn (both
            // seeds): one it never had, or one a reload removed (draining: the
            // scheduler seed's worker of capacity 0).
            let unknown_pin = pin
                .as_ref()
                .and_then(|pin| match self.roster.index.get(pin) {
                    None => Some((pin, false)),
                    Some(e) if self.roster.executors[e].draining => Some((pin, true)),
                    Some(_) => None,
                });
            let level = if unknown_pin.is_some() {
                Level::Warn
            } else {
                Level::Debug
            };
            // The event only when it is wanted (a lease that waits is a hot path).
            if !self.wants_event(level) {
                self.push_output(Output::Waiting {
                    request: id,
                    role,
                    report,
                    ahead,
                    spent,
                    owner,
                });
                return;
            }
            self.push_output(Output::Waiting {
                request: id.to_string(),
                role: role.clone(),
                report: report.clone(),
                ahead,
                spent,
                owner,
            });
            let waiter = self.queue.requests.at(s);
            let label = waiter.and_then(Request::label).map(str::to_string);
            let purpose = waiter.and_then(Request::purpose).map(str::to_string);
            let tenant = waiter.and_then(Request::tenant).map(str::to_string);
            let mut message = format!("waiting for an executor to take {role}");
            if let Some(label) = &label {
                message.push_str(&format!(" for {label}"));
            }
            if let Some(purpose) = &purpose {
                message.push_str(" · ");
                message.push_str(purpose);
            }
            if let Some(tenant) = &tenant {
                message.push_str(" (tenant ");
                message.push_str(tenant);
                message.push(')');
            }
            message.push_str(&format!(": {report}"));
            match unknown_pin {
                Some((pin, false)) => message.push_str(&format!(
                    " ({pin} is not in the roster; the request waits until a reload declares it or it is cancelled)"
                )),
                Some((pin, true)) => message.push_str(&format!(
                    " (the request waits until a reload declares {pin} again or it is cancelled)"
                )),
                None => {}
            }
            // The seed's position fields: the rank is rota's pipeline position.
            let mut fields = vec![
                ("ahead", json!(ahead)),
                (
                    "positionSource",
                    json!(if rank.is_some() { "rank" } else { "none" }),
                ),
                ("queued", json!(self.queued())),
                ("request", Value::String(id)),
                ("role", json!(role)),
            ];
            if let Some(rank) = rank {
                fields.push(("position", json!(rank)));
            }
            if let Some(pin) = &pin {
                fields.push(("pin", json!(pin)));
            }
            with_label(&mut fields, label.as_deref());
            if let Some(purpose) = purpose {
                fields.push(("purpose", json!(purpose)));
            }
            if let Some(tenant) = tenant {
                fields.push(("tenant", json!(tenant)));
            }
            self.event(level, EventName::Waiting, message, fields);
        }
    }

    /// Whether executor `e` takes new requests of role `r` (what makes two requests
    /// compete for it).
    pub(super) fn takes(&self, e: usize, r: usize) -> bool {
        let x = &self.roster.executors[e];
        !x.draining && x.cap(r) > 0
    }

    /// The earlier waiting pinned requests than `key`: each one's pin and role.
    fn pinned_before<'a>(
        &'a self,
        key: &'a OrderKey,
    ) -> impl Iterator<Item = (&'a str, Option<usize>)> + 'a {
        self.queue.pinned.iter().flat_map(move |(pin, queue)| {
            queue.range(..*key).filter_map(move |(_, &s)| {
                let q = self.queue.requests.at(s)?;
                Some((pin.as_str(), self.roster.request_role(q)))
            })
        })
    }

    /// Waiting requests ahead of `key` in lease order that compete with a request of
    /// role `r` (pinned to `pin`, if any) for an executor: unpinned ones of the roles
    /// some executor takes along with `r`, and pinned ones whose executor could serve
    /// it. A request pinned elsewhere competes for nothing it could take (the seed's
    /// `aheadCount`): three requests pinned to three executors each have 0 ahead.
    pub(super) fn ahead_of(&self, r: usize, key: &OrderKey, pin: Option<&str>) -> u32 {
        let unpinned_before = |roles: &mut dyn Iterator<Item = usize>| -> u32 {
            roles.map(|o| self.queue.count_before(o, key)).sum()
        };
        match pin {
            Some(pin) => {
                let same = sorted::get(&self.queue.pinned, pin)
                    .map_or(0, |queue| queue.range(..*key).count() as u32);
                let Some(e) = self.roster.index.get(pin) else {
                    return same; // undeclared: only requests pinned to it compete
                };
                let roles: Vec<usize> = self.roster.executors[e]
                    .role_indexes
                    .iter()
                    .copied()
                    .filter(|&o| self.takes(e, o))
                    .collect();
                // The role queues hold pinned requests too: those are counted apart.
                let pinned_in_roles = self
                    .pinned_before(key)
                    .filter(|(_, o)| o.is_some_and(|o| roles.contains(&o)))
                    .count() as u32;
                same + unpinned_before(&mut roles.iter().copied()) - pinned_in_roles
            }
            None => {
                let overlap: &[usize] = self
                    .roster
                    .roles
                    .overlap
                    .get(r)
                    .map_or(std::slice::from_ref(&r), Vec::as_slice);
                let mut ahead = unpinned_before(&mut overlap.iter().copied());
                for (pin, o) in self.pinned_before(key) {
                    let counted = o.is_some_and(|o| overlap.contains(&o));
                    let competes = self.roster.index.get(pin).is_some_and(|e| self.takes(e, r));
                    match (counted, competes) {
                        (true, false) => ahead -= 1,
                        (false, true) => ahead += 1,
                        _ => {}
                    }
                }
                ahead
            }
        }
    }

    /// Waiting requests ahead of `key` in lease order that executor `e` could have
    /// served: what a grant on `e` passed (requests pinned elsewhere it could not).
    pub(super) fn passed_by(&self, e: usize, key: &OrderKey) -> u32 {
        if self.queue.requests.len() == 0 {
            // Nothing waits (a lease granted at once): the executor's role tables are
            // not read (issue 15: at 10,000 executors each is a cache miss).
            return 0;
        }
        let x = &self.roster.executors[e];
        // The roles `e` takes, without collecting them (a grant's hot path: no allocation).
        let takes = |r: usize| x.cap(r) > 0 && x.has_role(r);
        let all: u32 = x
            .role_indexes
            .iter()
            .filter(|&&r| takes(r))
            .map(|&r| self.queue.count_before(r, key))
            .sum();
        if self.queue.pinned.is_empty() {
            return all; // nothing pinned: nothing pinned elsewhere to take out
        }
        let elsewhere = self
            .pinned_before(key)
            .filter(|&(pin, o)| pin != x.spec.id && o.is_some_and(takes))
            .count() as u32;
        all - elsewhere
    }

    /// Waiting requests, every role and pin.
    pub(super) fn queued(&self) -> usize {
        self.queue.by_role.iter().map(|queue| queue.len()).sum()
    }

    pub(super) fn dequeue(&mut self, id: &str) {
        let slot = self.queue.requests.slot(id);
        debug_assert!(slot.is_some(), "dequeue: request {id} is stored");
        if let Some(s) = slot {
            self.dequeue_at(s);
        }
    }

    /// Takes the request in slot `s` out of its queues and timers.
    pub(super) fn dequeue_at(&mut self, s: u32) {
        self.queue.unqueue(s, &self.roster.roles);
    }

    /// Ends a request that has no lease: cancelled, timed out or exhausted. A slot
    /// held for its machine is freed, and the machine deleted when it arrives.
    pub(super) fn end_request(&mut self, id: &str, ending: Ending) {
        self.dequeue(id);
        let Some(req) = self.queue.requests.remove(id) else {
            debug_assert!(false, "end_request: the request is stored");
            return;
        };
        if let Some(creating) = &req.creating {
            let executor = &creating.executor;
            sorted::insert(
                &mut self.provisioning.abandoned,
                id.to_string(),
                executor.clone(),
            );
            if let Some(owner) = req.owner() {
                sorted::insert(
                    &mut self.provisioning.abandoned_owners,
                    id.to_string(),
                    owner.to_string(),
                );
            }
            if let Some(e) = self.roster.index.get(executor) {
                let r = self.roster.request_role(&req);
                self.free_slot(e, r);
                self.leave_if_drained(e);
            }
        }
        let role = self.roster.request_role_name(&req).to_string();
        let mut fields = vec![("request", json!(id))];
        with_label(&mut fields, req.label());
        match ending {
            Ending::Cancelled => {
                self.push_output(Output::Cancelled {
                    request: id.to_string(),
                    owner: req.owner().map(str::to_string),
                });
                self.event(
                    Level::Debug,
                    EventName::Cancelled,
                    format!(
                        "the request for {role}{} stopped waiting",
                        for_label(req.label())
                    ),
                    fields,
                );
            }
            Ending::TimedOut => {
                let reasons = self.timed_out_reasons(&req);
                let message = format!(
                    "no executor took {role}{} before its deadline: {}",
                    for_label(req.label()),
                    reasons.join("; ")
                );
                fields.push(("reasons", json!(reasons)));
                self.push_output(Output::TimedOut {
                    request: id.to_string(),
                    reasons,
                    owner: req.owner().map(str::to_string),
                });
                self.event(Level::Warn, EventName::TimedOut, message, fields);
            }
            Ending::Exhausted => {
                let reasons = self.exhausted_reasons(&req);
                fields.push(("role", json!(role)));
                self.event(
                    Level::Warn,
                    EventName::Exhausted,
                    format!(
                        "no executor can ever take {role}{}: {}",
                        for_label(req.label()),
                        reasons.join("; ")
                    ),
                    fields,
                );
                self.push_output(Output::Exhausted {
                    request: id.to_string(),
                    role,
                    reasons,
                    owner: req.owner().map(str::to_string),
                });
            }
        }
    }
}
