//! Invariants: DESIGN.md's, checked on the whole state.

use super::keys::{ready_key, Index};
use super::Policy;

impl Policy {
    /// Checks DESIGN.md's invariants on the current state; panics naming the broken
    /// one. Runs after every input in debug builds and in every test.
    pub fn check_invariants(&self) {
        let roles = &self.document.roles;
        // Probes: the wait index holds exactly the health-excluded executors with no
        // probe in flight, under their current keys.
        let waits: Index = (0..self.execs.len())
            .filter_map(|e| Some((self.probe_floor(e)?, 0)))
            .collect();
        assert_eq!(self.probe_waits, waits, "invariant: the probe wait index");
        // Persists: what they said is the lasting state (no change went unwritten).
        assert!(
            self.persist_touched.is_empty() && !self.persist_all,
            "invariant: a persist is pending after the input"
        );
        assert_eq!(
            self.last_persisted,
            self.persisted_aligned(),
            "invariant: the persisted entries equal the lasting exclusions"
        );
        // Slots: busy counts equal what holds them.
        let mut busy = vec![0u32; self.execs.len()];
        let mut by_role = vec![vec![0u32; roles.len()]; self.execs.len()];
        assert!(
            self.leases.slots.windows(2).all(|w| w[0].0 < w[1].0)
                && self.leases.live == self.leases.values().count(),
            "invariant: leases in id order, their count kept"
        );
        for lease in self.leases.values().filter(|l| l.counted) {
            let e = self.exec_index.get(&lease.executor).unwrap_or_else(|| {
                panic!("invariant: lease on unknown executor {}", lease.executor)
            });
            busy[e] += 1;
            if let Some(r) = lease
                .role
                .as_ref()
                .and_then(|x| roles.iter().position(|y| y == x))
            {
                if self.execs[e].has_role(r) {
                    by_role[e][r] += 1;
                }
            }
        }
        for q in self.requests.values() {
            if let Some(creating) = &q.creating {
                let e = self
                    .exec_index
                    .get(&creating.executor)
                    .unwrap_or_else(|| panic!("invariant: {} is not indexed", creating.executor));
                busy[e] += 1;
                if let Some(r) = roles.iter().position(|y| y == self.req_role_name(q)) {
                    by_role[e][r] += 1;
                }
            }
        }
        for (e, x) in self.execs.iter().enumerate() {
            assert_eq!(x.busy, busy[e], "invariant: busy count of {}", x.spec.id);
            for &r in &x.role_idx {
                assert_eq!(
                    x.busy_by_role[r], by_role[e][r],
                    "invariant: {} count of {}",
                    roles[r], x.spec.id
                );
                let want = x.ready_for(r);
                let has = self.ready[r].contains_key(&ready_key(x.prios[r], x.ready_stamp, e));
                assert_eq!(
                    want, has,
                    "invariant: ready index of {} for {}",
                    x.spec.id, roles[r]
                );
            }
            if x.draining {
                assert!(
                    x.busy > 0,
                    "invariant: drained executor {} still listed",
                    x.spec.id
                );
            }
        }
        // The request store: each id names the slot that holds it, and nothing else
        // is stored.
        for (id, &s) in &self.requests.by_id {
            let q = self
                .requests
                .at(s as u32)
                .unwrap_or_else(|| panic!("invariant: request {id} names an empty slot"));
            assert_eq!(&q.id, id, "invariant: request {id} is stored under its id");
        }
        assert_eq!(
            self.requests.occupied(),
            self.requests.len(),
            "invariant: every stored request is known by its id"
        );
        // Timers and pin queues name stored requests by slot: no stale slot (it
        // could name a later request that reused it).
        for (t, key, s) in self.deadlines.iter() {
            assert!(
                self.requests
                    .at(s)
                    .is_some_and(|q| q.deadline() == Some(t) && q.key == key),
                "invariant: the deadline at {t} names its request"
            );
        }
        let with_deadline = self.requests.values().filter(|q| q.deadline().is_some());
        assert_eq!(
            self.deadlines.len(),
            with_deadline.count(),
            "invariant: every request with a deadline has its timer, once"
        );
        for (pin, queue) in &self.pin_queues {
            for (key, &s) in queue {
                assert!(
                    self.requests
                        .at(s)
                        .is_some_and(|q| q.waiting() && q.key == *key && q.pin() == Some(pin)),
                    "invariant: the queue pinned to {pin} names its requests"
                );
            }
        }
        let pinned: usize = self.pin_queues.iter().map(|(_, q)| q.len()).sum();
        let waiting_pinned = self
            .requests
            .values()
            .filter(|q| q.waiting() && q.pin().is_some());
        assert_eq!(
            pinned,
            waiting_pinned.count(),
            "invariant: every waiting pinned request is in its pin's queue"
        );
        // The queue: every waiting request is queued once, under its role.
        let queued: usize = self.role_queues.iter().map(Index::len).sum();
        let waiting = self.requests.values().filter(|q| q.waiting()).count();
        assert_eq!(
            queued, waiting,
            "invariant: queued requests equal waiting requests"
        );
        // No waiting request that a free slot can serve (the grant pass is complete).
        for (r, queue) in self.role_queues.iter().enumerate() {
            for (key, &s) in queue {
                let q = self.requests.at(s).unwrap_or_else(|| {
                    panic!("invariant: queue of {} names an empty slot", roles[r])
                });
                let id = &q.id;
                assert!(
                    q.waiting() && q.key == *key && self.req_role(q) == Some(r),
                    "invariant: {id} is queued under its role and key"
                );
                let servable_now = match q.pin() {
                    Some(pin) => self
                        .exec_index
                        .get(pin)
                        .is_some_and(|e| self.pin_ready(e, r) && !q.avoids(pin)),
                    None => self.pick(q, r).is_some(),
                };
                assert!(
                    !servable_now,
                    "invariant: waiting request {id} could be served by a free slot"
                );
            }
        }
    }
}
