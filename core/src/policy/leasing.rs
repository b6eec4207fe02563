//! Flows of leases: opening one on a grant, releasing, freeing slots, machines
//! deleted, `occupy`, and executors that leave when drained.

use crate::document::clone_name;
use crate::protocol::{Because, Level, Output};
use serde_json::{json, Value};

use super::events::EventName;
use super::keys::{shared, SharedName};
use super::leases::{Lease, Place};
use super::outputs::{released_detailed, Grant, Queued};
use super::requests::Request;
use super::Policy;

impl Policy {
    /// Opens a lease for `req` on `executor_id` (at `at`), queueing its grant: with
    /// `borrowing`, a borrowing grant (its `because`), without a slot when `slotless`.
    pub(super) fn open_lease(
        &mut self,
        req: Request,
        executor_id: SharedName,
        at: Option<usize>,
        hold: Option<Value>,
        passed: u32,
        borrowing: Option<Borrowing>,
    ) {
        let affinity = req.affinity().and_then(|key| self.remember_grant(key, at));
        let because = borrowing.map(|b| b.because);
        let borrowed = borrowing.is_some_and(|b| b.slotless);
        let lease = self.leases.allocate();
        let role = self.roster.roles.shared_name(req.role);
        let purpose = req.purpose().map(str::to_string);
        // A request that was announced waiting: how long it waited (typed events).
        let waited =
            (self.roster.typed && req.announced).then(|| self.now.saturating_sub(req.since));
        // A borrowed lease holds no slot, so no clone number either.
        let clone = match at {
            Some(e) if self.roster.numbered && !borrowed => {
                Some(self.roster.executors[e].take_clone())
            }
            _ => None,
        };
        let tenant = req.tenant().map(str::to_string);
        let label = req.label.map(String::from);
        let owner = req.owner.map(String::from);
        let id = String::from(req.id);
        // Queued as references to the lease (`outputs.rs`): built only when read.
        self.outputs.push_back(Queued::Granted { lease, passed });
        let event = self.wants_event(Level::Debug);
        if event && waited.is_none() {
            self.outputs
                .push_back(Queued::GrantedEvent { lease, passed });
        }
        self.leases.open(
            lease,
            Box::new(Lease {
                request: id,
                executor: executor_id,
                role: Some(role),
                label,
                purpose,
                clone,
                hold,
                since: self.now,
                occupied: false,
                counted: !borrowed,
                deleting: false,
                borrowed,
                because,
                owner,
                tenant,
                affinity,
                at: at.map_or_else(Place::default, Place::of),
            }),
            &mut self.queue.requests,
        );
        if let (true, Some(ms)) = (event, waited) {
            // Its `waitedMs` is not the lease's: the event is built now.
            if let Some(open) = self.leases.open.get(lease) {
                let built = Grant::waited(lease, open, passed, ms).event(Level::Debug);
                self.outputs.push_back(Queued::Built(built));
            }
        }
    }

    /// Frees one slot on `e` (and its role count), and offers it to the queue.
    pub(super) fn free_slot(&mut self, e: usize, r: Option<usize>) {
        let x = &mut self.roster.executors[e];
        debug_assert!(
            x.busy > 0,
            "freeing a slot on {}, which holds none",
            x.spec.id
        );
        x.busy = x.busy.saturating_sub(1);
        if let Some(r) = r {
            if let Some(role) = x.per_role.get_mut(r) {
                role.busy = role.busy.saturating_sub(1);
            }
        }
        self.roster.ready_up(e);
        self.roster.dirty.push(e);
    }

    /// A removed executor whose last slot was a machine creation that just ended
    /// leaves the roster, as it does when its last lease ends.
    pub(super) fn leave_if_drained(&mut self, e: usize) {
        let x = &self.roster.executors[e];
        if !(x.draining && x.busy == 0) {
            return;
        }
        let id = x.spec.id.clone();
        self.event(
            Level::Info,
            EventName::Left,
            format!(
                "the last slot on {id}, which a reload removed, was freed; it leaves the roster"
            ),
            vec![("executor", json!(id))],
        );
        self.remove_drained(e);
    }

    pub(super) fn release(&mut self, lease_id: u64) {
        let Some(lease) = self.leases.open.get(lease_id) else {
            return; // released before: releasing is idempotent
        };
        if lease.deleting {
            return; // released before, its machine still being deleted
        }
        // Work on an executor the roster does not have holds no slot, and its machine
        // is not the pool's to delete (the seed's occupy adopts no machine there).
        if lease.counted {
            if let Some(hold) = lease.hold.clone() {
                // The seed deletes the machine before the slot frees: the slot stays
                // held until the host answers `machineDeleted`.
                let executor = lease.executor.clone();
                let owner = lease.owner.clone();
                self.leases
                    .start_deletion(lease_id, &mut self.queue.requests);
                self.push_output(Output::DeleteMachine {
                    executor: executor.to_string(),
                    hold: hold.clone(),
                    lease: Some(lease_id),
                    owner,
                });
                self.event(
                    Level::Debug,
                    EventName::DeletingMachine,
                    format!(
                        "deleting the machine of a released lease on {executor}; its slot frees once the machine is deleted"
                    ),
                    vec![
                        ("executor", json!(executor)),
                        ("hold", hold),
                        ("lease", json!(lease_id)),
                    ],
                );
                return;
            }
        }
        // Its queued grant, if the host has not read it yet, is built before it closes.
        self.settle_outputs();
        let Some(lease) = self.leases.close(lease_id, &mut self.queue.requests) else {
            debug_assert!(false, "release: the lease is open");
            return;
        };
        if lease.counted {
            self.free_lease_slot(lease_id, &lease);
        } else if lease.borrowed {
            self.event(
                Level::Debug,
                EventName::Released,
                format!("{}'s borrowed lease ends; it held no slot", lease.executor),
                vec![
                    ("borrowed", json!(true)),
                    ("executor", json!(lease.executor)),
                    ("lease", json!(lease_id)),
                ],
            );
        }
    }

    /// The host deleted (or failed to delete) the machine of released lease `lease_id`:
    /// its slot frees. A failed deletion is a warning naming the machine for a sweep.
    pub(super) fn machine_deleted(&mut self, lease_id: u64, ok: bool, error: Option<String>) {
        debug_assert!(
            self.leases.is_deleting(lease_id),
            "machineDeleted: the lease was checked"
        );
        self.settle_outputs();
        let Some(lease) = self.leases.close(lease_id, &mut self.queue.requests) else {
            return;
        };
        if !ok {
            let why = error.unwrap_or_else(|| "no reason given".into());
            self.event(
                Level::Warn,
                EventName::MachineDeleteFailed,
                format!(
                    "the machine of a released lease on {} could not be deleted ({why}); its slot frees, and the machine is left for a sweep",
                    lease.executor
                ),
                vec![
                    ("error", json!(why)),
                    ("executor", json!(lease.executor)),
                    ("hold", lease.hold.clone().unwrap_or(Value::Null)),
                    ("lease", json!(lease_id)),
                ],
            );
        }
        self.free_lease_slot(lease_id, &lease);
    }

    /// Frees the slot a closed, counted lease held, and says what became of it:
    /// released, retired (over capacity, or on a removed executor), or the last on a
    /// removed executor, which leaves.
    fn free_lease_slot(&mut self, lease_id: u64, lease: &Lease) {
        let Some(e) = self.roster.find_named(&lease.executor, lease.at.get()) else {
            debug_assert!(false, "a counted lease is on an executor of the roster");
            return;
        };
        let r = lease
            .role
            .as_ref()
            .and_then(|role| self.document.roles.iter().position(|x| **x == **role));
        let x = &mut self.roster.executors[e];
        if let Some(n) = lease.clone {
            x.free_clone(n);
        }
        let over = x.busy > x.spec.slots && !x.draining;
        self.free_slot(e, r);
        let x = &self.roster.executors[e];
        if !(x.draining || over) {
            // The common case: a plain release, whose event is built only when wanted.
            // Queued as a reference to the executor (`outputs.rs`): built only when read.
            let detailed = self.roster.typed || lease.clone.is_some() || lease.purpose.is_some();
            if detailed && self.wants_event(Level::Debug) {
                let built = released_detailed(Level::Debug, lease_id, lease, self.roster.typed);
                self.push_output(built);
            } else if self.wants_event(Level::Debug) {
                self.outputs.push_back(Queued::Released {
                    executor: e,
                    lease: lease_id,
                });
            }
            self.clean_release(e, lease_id);
            return;
        }
        let id = x.spec.id.clone();
        // The clone the lease ran as, where leases are numbered: named and a field.
        let on = lease
            .clone
            .map_or_else(|| id.clone(), |n| clone_name(&id, n));
        let mut fields = vec![("executor", json!(id))];
        if let Some(n) = lease.clone {
            fields.insert(0, ("clone", json!(n)));
        }
        if x.draining && x.busy == 0 {
            self.event(
                Level::Info,
                EventName::Left,
                format!(
                    "the last lease on {on}, which a reload removed, ended; it leaves the roster"
                ),
                fields,
            );
            self.remove_drained(e);
        } else {
            // A removed executor has no slots: each lease before its last retires one
            // (the seed: Retired, Retired, Dropped).
            let (busy, slots) = (x.busy, if x.draining { 0 } else { x.spec.slots });
            let message = if x.draining {
                format!(
                    "a lease ended on {on}, which a reload removed; its slot retires ({busy} running, {slots} slots)"
                )
            } else {
                format!(
                    "a lease ended on {on}, which runs more leases than it has slots; its slot retires ({busy} running, {slots} slots)"
                )
            };
            fields.extend([("running", json!(busy)), ("slots", json!(slots))]);
            self.event(Level::Info, EventName::Retired, message, fields);
            self.clean_release(e, lease_id);
        }
    }

    pub(super) fn occupy(
        &mut self,
        id: String,
        executor: String,
        role: Option<String>,
        hold: Option<Value>,
        owner: Option<String>,
    ) {
        let r = role.as_ref().and_then(|role| self.role_index(role).ok());
        let lease = self.leases.allocate();
        let place = self.roster.index.get(&executor);
        let clone = match place {
            Some(e) if self.roster.numbered => Some(self.roster.executors[e].take_clone()),
            _ => None,
        };
        let counted = match place {
            Some(e) => {
                self.roster.unready(e);
                let x = &mut self.roster.executors[e];
                x.busy += 1;
                if let Some(r) = r.filter(|&r| x.has_role(r)) {
                    x.per_role[r].busy += 1;
                }
                // A removed executor has no slots left (its snapshot says 0).
                let (busy, slots) = (x.busy, if x.draining { 0 } else { x.spec.slots });
                self.roster.ready_up(e);
                let mut fields = vec![
                    ("executor", json!(executor)),
                    ("running", json!(busy)),
                    ("slots", json!(slots)),
                    ("lease", json!(lease)),
                ];
                // The clone the work runs as, where leases are numbered.
                let on = clone.map_or_else(|| executor.clone(), |n| clone_name(&executor, n));
                if let Some(n) = clone {
                    fields.insert(0, ("clone", json!(n)));
                }
                if busy <= slots {
                    self.event(
                        Level::Debug,
                        EventName::Occupied,
                        format!(
                            "work that already runs on {on} occupies a slot ({busy} of {slots})"
                        ),
                        fields,
                    );
                } else {
                    self.event(
                        Level::Warn,
                        EventName::OccupiedBeyondCapacity,
                        format!(
                            "work that already runs on {on} occupies a slot beyond its {slots} slots; {executor} takes no new lease until enough of its leases end"
                        ),
                        fields,
                    );
                }
                true
            }
            None => {
                self.event(
                    Level::Warn,
                    EventName::OccupiedUnknown,
                    format!(
                        "work already runs on {executor}, which the roster does not have; it occupies no slot"
                    ),
                    vec![("executor", json!(executor)), ("lease", json!(lease))],
                );
                false
            }
        };
        self.leases.open(
            lease,
            Box::new(Lease {
                request: id,
                executor: shared(executor),
                role: role.map(shared),
                label: None,
                purpose: None,
                clone,
                hold,
                since: self.now,
                occupied: true,
                counted,
                deleting: false,
                borrowed: false,
                because: None,
                owner,
                tenant: None,
                affinity: None,
                at: place.map_or_else(Place::default, Place::of),
            }),
            &mut self.queue.requests,
        );
        // Its grant: a reference to the lease (`outputs.rs`), `occupied` from it.
        self.outputs.push_back(Queued::Granted { lease, passed: 0 });
    }
}

/// Why a grant borrows its request's `borrow` executor, and whether
/// it does so without a slot (`borrowed`: the lease is not counted and frees none).
#[derive(Debug, Clone, Copy)]
pub(super) struct Borrowing {
    pub(super) because: Because,
    pub(super) slotless: bool,
}
