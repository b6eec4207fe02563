//! Invariants: DESIGN.md's, and every index's agreement with what it indexes,
//! checked on the whole state.
//!
//! `verify` says which one broke; `check_invariants` panics on it (a broken
//! invariant after an input is a bug: it runs after every input in debug builds
//! and in every test), and `import_state` refuses a state that breaks one.

#[cfg(debug_assertions)]
use super::avoid::NO_AVOID;
use super::keys::{ready_key, Index};
use super::requests::{LEASED, TAKEN};
use super::Policy;
use crate::error::InvariantViolation;

/// `Err` naming `invariant` unless `holds`.
fn ensure(
    holds: bool,
    invariant: &'static str,
    detail: impl FnOnce() -> String,
) -> Result<(), InvariantViolation> {
    if holds {
        Ok(())
    } else {
        Err(InvariantViolation {
            invariant,
            detail: detail(),
        })
    }
}

impl Policy {
    /// Checks DESIGN.md's invariants on the current state; panics naming the broken
    /// one. Runs after every input in debug builds and in every test.
    pub fn check_invariants(&self) {
        if let Err(violation) = self.verify() {
            panic!("{violation}");
        }
    }

    /// Checks every invariant on the current state: `Err` names the first broken.
    pub fn verify(&self) -> Result<(), InvariantViolation> {
        // First: an import's contradiction of it is named as such, not by what follows.
        self.verify_recovery()?;
        self.verify_probes()?;
        self.verify_owners()?;
        self.verify_persistence()?;
        self.verify_slots()?;
        self.verify_round()?;
        self.verify_requests()?;
        self.verify_queues()?;
        self.verify_tenants()?;
        self.verify_budgets()?;
        let fault = self.weights_fault();
        ensure(fault.is_none(), "weights", || fault.unwrap_or_default())?;
        self.verify_affinity()?;
        // An import keeps no report (the rebuild forgets them): checked where inputs
        // are, the debug builds' check after every input.
        #[cfg(debug_assertions)]
        self.verify_reports()?;
        // The queue's references are made by inputs (an import holds none): checked
        // where inputs are checked, the debug builds' check after every input.
        #[cfg(debug_assertions)]
        if !self.queued_references_resolve() {
            return Err(InvariantViolation {
                invariant: "queued outputs",
                detail: "a queued output names a closed lease or a gone executor".to_string(),
            });
        }
        Ok(())
    }

    /// Budgets: every window in time order, none after now, at most its budget's
    /// `requests` (none without a budget); each executor's room time is what its
    /// windows give now, and the room timers hold exactly the spent executors.
    fn verify_budgets(&self) -> Result<(), InvariantViolation> {
        use super::budgets::window_fault;
        for (name, window) in &self.budgets.accounts {
            let fault = window_fault(window, self.document.accounts.get(name).copied(), self.now);
            ensure(fault.is_none(), "budget window", || {
                name.clone() + ": " + fault.unwrap_or_default()
            })?;
        }
        let mut spent = 0;
        for (e, x) in self.roster.executors.iter().enumerate() {
            let fault = window_fault(&x.runtime.grants, x.spec.budget, self.now);
            ensure(fault.is_none(), "budget window", || {
                x.spec.id.clone() + ": " + fault.unwrap_or_default()
            })?;
            let room = x.runtime.budget_room;
            ensure(room == self.budget_room(e), "budget room", || {
                x.spec.id.clone() + ": its room time is not what its windows give"
            })?;
            if let Some(t) = room {
                spent += 1;
                ensure(
                    self.budgets
                        .rooms
                        .contains_key(&super::keys::timer_key(t, e)),
                    "budget timer",
                    || x.spec.id.clone() + ": spent with no timer at its room",
                )?;
            }
        }
        ensure(self.budgets.rooms.len() == spent, "budget timer", || {
            "a room timer names an executor that is not spent".to_string()
        })
    }

    /// Tenants: fair queues exactly while the document serves tenants fairly, one per
    /// role; each holds every waiting request of its role once, under its tenant and
    /// key; each waiting tenant is in the serving order once under its tag and turn,
    /// its turn below the next, its tag within a turn of the virtual time; a role
    /// nobody waits for has its times at 0.
    fn verify_tenants(&self) -> Result<(), InvariantViolation> {
        use crate::document::Fairness;
        use crate::limits::TENANT_TURN;
        let fair = &self.queue.fair;
        let on = self.document.fairness() == Fairness::Tenants;
        let roles = &self.roster.roles.ids;
        ensure(
            fair.len() == if on { roles.len() } else { 0 }
                && fair.iter().zip(roles).all(|(f, &id)| f.role == id),
            "fair queues",
            || "the fair queues are not one per role of a document that serves tenants".into(),
        )?;
        for (r, f) in fair.iter().enumerate() {
            let role = self.role_name(r);
            let mut held = 0;
            for t in f.in_order() {
                held += t.queue.len();
                let own = t.queue.iter().all(|&(key, s)| {
                    self.queue.requests.at(s).is_some_and(|q| {
                        q.waiting()
                            && q.key == key
                            && q.tenant_name() == &*t.name
                            && self.roster.request_role(q) == Some(r)
                    })
                });
                ensure(
                    own && t.queue.len() > 0
                        && f.get(&t.name).is_some_and(|x| x.turn == t.turn)
                        && t.turn < f.next_turn
                        && t.tag <= f.vtime + TENANT_TURN,
                    "fair queues",
                    || {
                        role.to_string() + ": a tenant is empty, unnamed, holds another's request, or its tag or turn is out of bounds"
                    },
                )?;
            }
            ensure(
                held == self.queue.by_role[r].len()
                    && f.order.len() == f.len()
                    && f.vtime < super::tenants::REBASE_AT
                    && (f.len() > 0 || (f.vtime == 0 && f.next_turn == 0)),
                "fair queues",
                || {
                    role.to_string() + ": the fair queue does not hold its waiting requests once, or its times are off"
                },
            )?;
        }
        Ok(())
    }

    /// Affinity: at most `MAX_AFFINITY_KEYS` keys, each live, used no later than now,
    /// in use order, naming an executor of the running document (not draining), its
    /// indexes in step.
    fn verify_affinity(&self) -> Result<(), InvariantViolation> {
        let ttl = self.document.affinity_ttl();
        let fault = self
            .affinity
            .fault(self.now, ttl, &|id| self.rememberable(id));
        ensure(fault.is_none(), "affinity", || {
            let (n, fault) = fault.unwrap_or_default();
            format!("affinity[{n}]: {fault}")
        })
    }

    /// Probes: the wait index holds exactly the health-excluded executors with no
    /// probe in flight, under their current keys.
    /// Owners: every abandoned creation's owner belongs to an abandoned creation, and
    /// an owner is never empty (`expireOwner` matches them by value).
    fn verify_owners(&self) -> Result<(), InvariantViolation> {
        for (id, owner) in self.provisioning.abandoned_owners.iter() {
            ensure(
                crate::sorted::contains_key(&self.provisioning.abandoned, id),
                "abandoned owner",
                || format!("'{id}' has an owner ({owner}) but no abandoned creation"),
            )?;
            ensure(!owner.is_empty(), "owner", || {
                format!("abandoned creation '{id}' has an empty owner")
            })?;
        }
        for q in self.queue.requests.values() {
            ensure(q.owner() != Some(""), "owner", || {
                format!("request '{}' has an empty owner", q.id)
            })?;
        }
        for (id, lease) in self.leases.open.iter() {
            ensure(lease.owner.as_deref() != Some(""), "owner", || {
                format!("lease {id} has an empty owner")
            })?;
        }
        Ok(())
    }

    fn verify_probes(&self) -> Result<(), InvariantViolation> {
        let waits: Index = (0..self.roster.executors.len())
            .filter_map(|e| Some((self.probe_floor(e)?, 0)))
            .collect();
        ensure(self.probes.waits == waits, "probe waits", || {
            "the probe wait index differs from the health-excluded executors awaiting a probe"
                .to_string()
        })
    }

    /// Persists: what they said is the lasting state (no change went unwritten).
    fn verify_persistence(&self) -> Result<(), InvariantViolation> {
        ensure(self.persistence.settled(), "persist pending", || {
            "a persist is pending after the input".to_string()
        })?;
        let lasting = self.persisted_aligned();
        ensure(self.persistence.last == lasting, "persisted", || {
            let differs = |(e, last): (usize, &Option<_>)| lasting.get(e) != Some(last);
            let at = self.persistence.last.iter().enumerate().position(differs);
            match at.and_then(|e| self.roster.executors.get(e)) {
                Some(x) => format!(
                    "the persisted entry of {} differs from its lasting exclusion",
                    x.spec.id
                ),
                None => "a persisted entry names no executor of the roster".to_string(),
            }
        })
    }

    /// Slots: busy counts equal what holds them; the ready sets hold exactly the
    /// executors that can take an unpinned request now; a draining executor holds
    /// a slot.
    fn verify_slots(&self) -> Result<(), InvariantViolation> {
        let roles = &self.document.roles;
        let executors = &self.roster.executors;
        let mut busy = vec![0u32; executors.len()];
        let mut by_role = vec![vec![0u32; roles.len()]; executors.len()];
        let mut clones = vec![Vec::new(); executors.len()];
        let table = &self.leases.open;
        ensure(
            table.slots.windows(2).all(|w| w[0].0 < w[1].0) && table.live == table.values().count(),
            "lease order",
            || "the leases are out of id order or miscounted".to_string(),
        )?;
        for (id, lease) in table.iter() {
            ensure(id > 0 && id < self.leases.next_id, "lease ids", || {
                format!(
                    "lease {id} is not below the next lease id {}",
                    self.leases.next_id
                )
            })?;
            // A lease whose machine is being deleted freed its request id.
            let indexed = self.queue.requests.lease_of(&lease.request) == Some(id);
            ensure(indexed != lease.deleting, "lease requests", || {
                format!(
                    "lease {id} is{} indexed by its request {}",
                    if indexed { "" } else { " not" },
                    lease.request
                )
            })?;
            ensure(
                !lease.deleting || (lease.counted && lease.hold.is_some()),
                "lease deletions",
                || format!("lease {id} waits for a deletion, without a machine of the pool"),
            )?;
            ensure(
                !lease.borrowed || (!lease.counted && lease.because.is_some()),
                "borrowed leases",
                || format!("lease {id} is borrowed, yet holds a slot or says no why"),
            )?;
            if !lease.counted {
                continue;
            }
            let Some(e) = self.roster.index.get(&lease.executor) else {
                return Err(InvariantViolation {
                    invariant: "lease executor",
                    detail: format!(
                        "lease {id} holds a slot on {}, which the roster does not have",
                        lease.executor
                    ),
                });
            };
            busy[e] += 1;
            clones[e].extend(lease.clone);
            if let Some(r) = lease
                .role
                .as_ref()
                .and_then(|x| roles.iter().position(|y| **y == **x))
            {
                if executors[e].has_role(r) {
                    by_role[e][r] += 1;
                }
            }
        }
        ensure(
            self.queue.requests.leased() == table.values().filter(|l| !l.deleting).count(),
            "lease requests",
            || "a request id names a lease that is not open".to_string(),
        )?;
        for q in self.queue.requests.values() {
            if let Some(creating) = &q.creating {
                let Some(e) = self.roster.index.get(&creating.executor) else {
                    return Err(InvariantViolation {
                        invariant: "creating executor",
                        detail: format!(
                            "request {} creates a machine on {}, which the roster does not have",
                            q.id, creating.executor
                        ),
                    });
                };
                busy[e] += 1;
                if let Some(r) = roles
                    .iter()
                    .position(|y| y == self.roster.request_role_name(q))
                {
                    by_role[e][r] += 1;
                }
            }
        }
        for (e, x) in executors.iter().enumerate() {
            let id = &x.spec.id;
            // Clone numbers: from 1, one lease each, as the executor counts them.
            clones[e].sort_unstable();
            let distinct = clones[e].windows(2).all(|w| w[0] < w[1]);
            let held = &clones[e];
            ensure(
                distinct && held.first() != Some(&0) && x.clones == *held,
                "clones",
                || {
                    format!("executor {id}: its leases' clone numbers repeat, include 0 or are miscounted")
                },
            )?;
            ensure(x.busy == busy[e], "busy", || {
                format!(
                    "executor {id} counts {} busy slots where {} are held",
                    x.busy, busy[e]
                )
            })?;
            for &r in &x.role_indexes {
                ensure(x.busy_in(r) == by_role[e][r], "role busy", || {
                    format!(
                        "executor {id} counts {} busy {} slots where {} are held",
                        x.busy_in(r),
                        roles[r],
                        by_role[e][r]
                    )
                })?;
                let want = x.ready_for(r);
                let key = ready_key(x.priority(r), x.ready_stamp, e);
                let has = self.roster.ready[r].contains(&key);
                ensure(x.per_role[r].ready == has, "ready mark", || {
                    format!(
                        "executor {id} is marked {} the ready set of {} and is {}",
                        if x.per_role[r].ready { "in" } else { "out of" },
                        roles[r],
                        if has { "in" } else { "not" }
                    )
                })?;
                ensure(want == has, "ready", || {
                    format!(
                        "executor {id} is {} the ready set of {} and should {}be",
                        if has { "in" } else { "not in" },
                        roles[r],
                        if want { "" } else { "not " }
                    )
                })?;
            }
            ensure(!x.draining || x.busy > 0, "drained", || {
                format!("executor {id} was removed by a reload, holds no slot and is still listed")
            })?;
        }
        Ok(())
    }

    /// The round: each role's in-round count is the number of its executors in the
    /// round for it (`Executor::in_round`); `roleOut` and `roleBack` are told from it.
    /// The kept waiting reports: each one is the report written afresh now (a change
    /// to what a report names that did not call `forget_reports` shows here).
    #[cfg(debug_assertions)]
    fn verify_reports(&self) -> Result<(), InvariantViolation> {
        for (r, kept) in self.roster.reports.iter().enumerate() {
            let Some(kept) = kept else { continue };
            ensure(r < self.document.roles.len(), "waiting reports", || {
                format!(
                    "a report kept for role {r} of {}",
                    self.document.roles.len()
                )
            })?;
            let fresh = self.waiting_report(r, &NO_AVOID, None);
            ensure(*kept == fresh, "waiting reports", || {
                format!(
                    "the report kept for {} is {kept:?}, not {fresh:?}",
                    self.role_name(r)
                )
            })?;
        }
        Ok(())
    }

    fn verify_round(&self) -> Result<(), InvariantViolation> {
        let roles = &self.document.roles;
        let counts = &self.roster.roles.in_round;
        ensure(counts.len() == roles.len(), "in round", || {
            format!("{} in-round counts for {} roles", counts.len(), roles.len())
        })?;
        for (r, members) in self.roster.roles.members.iter().enumerate() {
            let executors = &self.roster.executors;
            let count = members
                .iter()
                .filter(|&&e| executors[e].in_round(r))
                .count();
            let counted = counts.get(r).copied().unwrap_or(0);
            ensure(counted as usize == count, "in round", || {
                format!(
                    "role {} counts {counted} executors in the round where {count} are",
                    roles[r]
                )
            })?;
        }
        Ok(())
    }

    /// Recovery: an executor on probation is in the round and takes a new
    /// lease only with no slot held; one armed for probation is out of the round; the
    /// state agrees with its rules (the backoff within its cap, fewer failures in a
    /// row than exclude); a clean release's lease number has been reached.
    fn verify_recovery(&self) -> Result<(), InvariantViolation> {
        for x in &self.roster.executors {
            let ready = x.role_indexes.iter().any(|&r| x.per_role[r].ready);
            let problem = x.runtime.recovery.contradiction(&x.spec).or_else(|| {
                x.runtime.recovery.against(
                    x.runtime.exclusion.is_some(),
                    ready && x.busy > 0,
                    self.leases.next_id,
                    self.now,
                )
            });
            if let Some(problem) = problem {
                return Err(InvariantViolation {
                    invariant: "recovery",
                    detail: format!("executor {}: {problem}", x.spec.id),
                });
            }
        }
        Ok(())
    }

    /// The request store: each id names the slot that holds it, and nothing else
    /// is stored; timers and pin queues name stored requests by slot (no stale
    /// slot: it could name a later request that reused it).
    fn verify_requests(&self) -> Result<(), InvariantViolation> {
        let requests = &self.queue.requests;
        for (id, &v) in requests.by_id.iter() {
            ensure(v != TAKEN, "request store", || {
                format!("request {id} was taken out for a grant that never named it")
            })?;
            if v & LEASED != 0 {
                continue; // checked with the leases
            }
            let s = v as u32;
            let stored = requests.at(s);
            ensure(
                stored.is_some_and(|q| &*q.id == id),
                "request store",
                || format!("request {id} is not stored under its id"),
            )?;
        }
        ensure(
            requests.occupied() == requests.len() && requests.slots().count() == requests.len(),
            "request store",
            || "a stored request is not known by its id".to_string(),
        )?;
        for (t, key, s) in self.queue.deadlines.iter() {
            let named = requests.at(s);
            ensure(
                named.is_some_and(|q| q.deadline() == Some(t) && q.key == key),
                "deadlines",
                || format!("the deadline at {t} does not name its request"),
            )?;
        }
        let with_deadline = requests.values().filter(|q| q.deadline().is_some());
        ensure(
            self.queue.deadlines.len() == with_deadline.count(),
            "deadlines",
            || "a request with a deadline has no timer, or two".to_string(),
        )?;
        for (pin, queue) in &self.queue.pinned {
            for (key, &s) in queue {
                let named = requests.at(s);
                ensure(
                    named.is_some_and(|q| q.waiting() && q.key == *key && q.pin() == Some(pin)),
                    "pin queues",
                    || format!("the queue pinned to {pin} names a request not pinned to it"),
                )?;
            }
        }
        let pinned: usize = self.queue.pinned.iter().map(|(_, q)| q.len()).sum();
        let waiting_pinned = requests
            .values()
            .filter(|q| q.waiting() && q.pin().is_some());
        ensure(pinned == waiting_pinned.count(), "pin queues", || {
            "a waiting pinned request is not in its pin's queue".to_string()
        })
    }

    /// The queue: every waiting request is queued once, under its role and key;
    /// none of them could be served by a free slot (the grant pass is complete).
    fn verify_queues(&self) -> Result<(), InvariantViolation> {
        let roles = &self.document.roles;
        let requests = &self.queue.requests;
        let queued: usize = self.queue.by_role.iter().map(|queue| queue.len()).sum();
        let waiting = requests.values().filter(|q| q.waiting()).count();
        ensure(queued == waiting, "queue", || {
            format!("{queued} requests are queued where {waiting} wait")
        })?;
        for (r, queue) in self.queue.by_role.iter().enumerate() {
            for &(key, s) in queue.iter() {
                let Some(q) = requests.at(s) else {
                    return Err(InvariantViolation {
                        invariant: "queue",
                        detail: format!("the queue of {} names an empty slot", roles[r]),
                    });
                };
                let id = &q.id;
                ensure(
                    q.waiting() && q.key == key && self.roster.request_role(q) == Some(r),
                    "queue",
                    || format!("request {id} is not queued under its role and key"),
                )?;
                // Before the startup preflight passed, every request waits.
                let servable_now = self.serving()
                    && match q.pin() {
                        Some(pin) => self
                            .roster
                            .index
                            .get(pin)
                            .is_some_and(|e| self.pin_ready(e, r) && !q.avoids(pin)),
                        None => self.pick(q, r).is_some(),
                    };
                ensure(!servable_now, "grant pass", || {
                    format!("waiting request {id} could be served by a free slot")
                })?;
                ensure(!self.would_borrow(s, r), "borrow pass", || {
                    format!("waiting request {id} borrows its executor now")
                })?;
            }
        }
        let borrowing = requests
            .values()
            .filter(|q| q.waiting() && q.borrow().is_some())
            .count();
        let indexed = self.queue.borrowers.iter().all(|(key, &s)| {
            requests
                .at(s)
                .is_some_and(|q| q.waiting() && q.key == *key && q.borrow().is_some())
        });
        ensure(
            indexed && self.queue.borrowers.len() == borrowing,
            "borrowers",
            || {
                format!(
                    "{} requests are indexed as borrowing where {borrowing} wait with a borrow",
                    self.queue.borrowers.len()
                )
            },
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::protocol::{ExclusionKind, Input, Options};

    use super::super::Policy;

    #[test]
    fn a_wrong_in_round_count_is_a_violation() {
        let doc = json!({ "executors": [
            { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 1 },
            { "id": "b", "harness": "pi", "roles": ["coder", "reviewer"], "slots": 1 },
        ]});
        let mut policy = Policy::new(&doc, Options::default()).expect("a roster");
        policy
            .handle(Input::Exclude {
                now: 1,
                executor: "b".into(),
                kind: ExclusionKind::Manual,
                reason: "paused".into(),
                until: None,
            })
            .expect("exclude");
        assert_eq!(policy.verify(), Ok(()));
        let coder = policy.document.roles.iter().position(|r| r == "coder");
        let coder = coder.expect("the coder role");
        // b is out: one coder in the round. Count it as still in.
        policy.roster.roles.in_round[coder] += 1;
        let violation = policy.verify().expect_err("the count is wrong");
        assert_eq!(violation.invariant, "in round");
        assert!(
            violation.detail.contains("role coder counts 2"),
            "{violation}"
        );
        policy.roster.roles.in_round[coder] -= 1;
        assert_eq!(policy.verify(), Ok(()));
        policy.roster.roles.in_round.pop();
        assert_eq!(policy.verify().map_err(|v| v.invariant), Err("in round"));
    }
}
