//! Leases: the open leases, granting, releasing and occupying slots.

use serde::Serialize;
use serde_json::{json, Value};

use crate::protocol::{Level, Output};

use super::events::EventName;
use super::keys::{shared, SharedName};
use super::outputs::Queued;
use super::requests::{Request, Requests};
use super::Policy;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Lease {
    pub(super) request: String,
    /// Shared with the executor and the role table (see `SharedName`).
    pub(super) executor: SharedName,
    pub(super) role: Option<SharedName>,
    pub(super) label: Option<String>,
    pub(super) hold: Option<Value>,
    pub(super) since: u64,
    pub(super) occupied: bool,
    /// False for work occupying an executor the roster does not have.
    pub(super) counted: bool,
    /// Released, and its machine is being deleted: it still holds its slot (the seed
    /// deletes the machine before the slot frees) until `machineDeleted`. Its request
    /// id is free again.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) deleting: bool,
    /// The instance its request came from (a shared roster's). Not written when
    /// absent, so an export without owners reads as before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) owner: Option<String>,
    /// Where `executor` stood in the roster when the lease opened: a hint that saves
    /// the id lookup at release, checked against the id (a reload or a drained
    /// executor moves them). Not state: neither written nor compared.
    #[serde(skip)]
    pub(super) at: Place,
}

/// A place in `Roster::executors` kept as a hint (see `Lease::at`): equal to every
/// other, so two leases that differ only in it compare equal.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Place(Option<u32>);

impl Place {
    pub(super) fn of(e: usize) -> Place {
        Place(u32::try_from(e).ok())
    }

    pub(super) fn get(self) -> Option<usize> {
        self.0.map(|e| e as usize)
    }
}

impl PartialEq for Place {
    fn eq(&self, _: &Place) -> bool {
        true
    }
}

/// The open leases by id, in id order: a `Vec` sorted by id, where a released
/// lease leaves a hole until holes outnumber leases (issue 4: a `BTreeMap<u64,
/// Lease>` was another copy of the B-tree code in the WebAssembly module). Lease
/// ids are handed out in increasing order, so a new lease is pushed at the end; a
/// lookup is a binary search; holes are swept out in one pass, amortized O(1) per
/// release. Iteration order is id order, as the map's was.
#[derive(Debug, Clone, Default)]
pub(super) struct LeaseTable {
    /// Sorted by id, ids unique; `None` is a released lease's hole. Boxed: a search
    /// steps over 16-byte places, not over the leases themselves (issue 15: with
    /// 10,000 leases open, each over a hundred bytes, nearly every step missed the
    /// cache).
    pub(super) slots: Vec<(u64, Option<Box<Lease>>)>,
    /// The `Some` entries.
    pub(super) live: usize,
}

impl LeaseTable {
    /// From pairs in any order; of a repeated id the last stands (as collecting
    /// into a map does).
    pub(super) fn from_pairs(mut pairs: Vec<(u64, Lease)>) -> LeaseTable {
        // Stable: equal ids keep their order, and the last of each run is kept.
        pairs.sort_by_key(|&(id, _)| id);
        let mut leases = LeaseTable::default();
        for (id, lease) in pairs {
            leases.insert(id, Box::new(lease));
        }
        leases
    }

    pub(super) fn get(&self, id: u64) -> Option<&Lease> {
        let i = self.find(id).ok()?;
        self.slots[i].1.as_deref()
    }

    fn get_mut(&mut self, id: u64) -> Option<&mut Lease> {
        let i = self.find(id).ok()?;
        self.slots[i].1.as_deref_mut()
    }

    pub(super) fn find(&self, id: u64) -> Result<usize, usize> {
        self.slots.binary_search_by_key(&id, |&(k, _)| k)
    }

    pub(super) fn insert(&mut self, id: u64, lease: Box<Lease>) {
        if self.slots.last().is_none_or(|&(last, _)| last < id) {
            self.slots.push((id, Some(lease)));
            self.live += 1;
            return;
        }
        match self.find(id) {
            Ok(i) => {
                if self.slots[i].1.replace(lease).is_none() {
                    self.live += 1;
                }
            }
            Err(i) => {
                self.slots.insert(i, (id, Some(lease)));
                self.live += 1;
            }
        }
    }

    /// Closes lease `id`: the lease, still boxed (its fields are read and dropped,
    /// not moved again).
    pub(super) fn remove(&mut self, id: u64) -> Option<Box<Lease>> {
        let i = self.find(id).ok()?;
        let lease = self.slots[i].1.take()?;
        self.live -= 1;
        if self.live == 0 {
            // Drained: give back what a burst grew, but keep a small table (a steady
            // lease+release would otherwise free and allocate it every cycle).
            if self.slots.capacity() > 64 {
                self.slots = Vec::new();
            } else {
                self.slots.clear();
            }
        } else if self.slots.len() >= 2 * self.live + 16 {
            self.slots.retain(|(_, l)| l.is_some());
        }
        Some(lease)
    }

    /// In id order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &Lease)> {
        self.slots
            .iter()
            .filter_map(|(id, l)| l.as_deref().map(|l| (*id, l)))
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Lease> {
        self.iter().map(|(_, l)| l)
    }

    /// In id order, for the export.
    pub(super) fn to_pairs(&self) -> Vec<(u64, Lease)> {
        self.iter().map(|(id, l)| (id, l.clone())).collect()
    }
}

/// The open leases and the next lease id. (Their request ids are in the request
/// id map, `Requests::by_id`.)
#[derive(Debug, Clone)]
pub(super) struct Leases {
    pub(super) open: LeaseTable,
    /// The id the next grant gets; every id below it was granted once.
    pub(super) next_id: u64,
}

impl Default for Leases {
    fn default() -> Leases {
        Leases {
            open: LeaseTable::default(),
            next_id: 1,
        }
    }
}

impl Leases {
    /// The id of a new lease (ids are never reused).
    pub(super) fn allocate(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Opens lease `id` (from `allocate`), named by its request in `requests`.
    /// Boxed by the caller: a lease is built in its box, not moved into it.
    pub(super) fn open(&mut self, id: u64, lease: Box<Lease>, requests: &mut Requests) {
        debug_assert!(id < self.next_id, "lease {id} was not allocated");
        requests.name_lease(&lease.request, id);
        self.open.insert(id, lease);
    }

    /// Closes lease `id`; `None` if it is not open (released before).
    pub(super) fn close(&mut self, id: u64, requests: &mut Requests) -> Option<Box<Lease>> {
        let lease = self.open.remove(id)?;
        if !lease.deleting {
            requests.unname_lease(&lease.request, id);
        }
        Some(lease)
    }

    /// Marks lease `id` released while its machine is deleted: it keeps its slot, and
    /// its request id is free again. The lease as it was, if it was open and live.
    pub(super) fn start_deletion(&mut self, id: u64, requests: &mut Requests) -> Option<Lease> {
        let lease = self.open.get_mut(id).filter(|lease| !lease.deleting)?;
        lease.deleting = true;
        let lease = lease.clone();
        requests.unname_lease(&lease.request, id);
        Some(lease)
    }

    /// Whether lease `id` waits for its machine's deletion.
    pub(super) fn is_deleting(&self, id: u64) -> bool {
        self.open.get(id).is_some_and(|lease| lease.deleting)
    }

    /// Names the live open leases by their requests (after an import).
    pub(super) fn reindex(&self, requests: &mut Requests) {
        let live = self.open.iter().filter(|(_, lease)| !lease.deleting);
        requests.name_leases(live.map(|(id, lease)| (lease.request.as_str(), id)));
    }
}

impl Policy {
    pub(super) fn open_lease(
        &mut self,
        req: Request,
        executor_id: SharedName,
        at: Option<usize>,
        hold: Option<Value>,
        passed: u32,
    ) {
        let lease = self.leases.allocate();
        let role = self.roster.roles.shared_name(req.role);
        let label = req.label.map(String::from);
        let owner = req.owner.map(String::from);
        let id = String::from(req.id);
        // Queued as references to the lease (`outputs.rs`): built only when read.
        self.outputs.push_back(Queued::Granted { lease, passed });
        if self.wants_event(Level::Debug) {
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
                hold,
                since: self.now,
                occupied: false,
                counted: true,
                deleting: false,
                owner,
                at: at.map_or_else(Place::default, Place::of),
            }),
            &mut self.queue.requests,
        );
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
        let x = &self.roster.executors[e];
        let over = x.busy > x.spec.slots && !x.draining;
        self.free_slot(e, r);
        let x = &self.roster.executors[e];
        if !(x.draining || over) {
            // The common case: a plain release, whose event is built only when wanted.
            // Queued as a reference to the executor (`outputs.rs`): built only when read.
            if self.wants_event(Level::Debug) {
                self.outputs.push_back(Queued::Released {
                    executor: e,
                    lease: lease_id,
                });
            }
            return;
        }
        let id = x.spec.id.clone();
        if x.draining && x.busy == 0 {
            self.event(
                Level::Info,
                EventName::Left,
                format!(
                    "the last lease on {id}, which a reload removed, ended; it leaves the roster"
                ),
                vec![("executor", json!(id))],
            );
            self.remove_drained(e);
        } else {
            // A removed executor has no slots: each lease before its last retires one
            // (the seed: Retired, Retired, Dropped).
            let (busy, slots) = (x.busy, if x.draining { 0 } else { x.spec.slots });
            let message = if x.draining {
                format!(
                    "a lease ended on {id}, which a reload removed; its slot retires ({busy} running, {slots} slots)"
                )
            } else {
                format!(
                    "a lease ended on {id}, which runs more leases than it has slots; its slot retires ({busy} running, {slots} slots)"
                )
            };
            self.event(
                Level::Info,
                EventName::Retired,
                message,
                vec![
                    ("executor", json!(id)),
                    ("running", json!(busy)),
                    ("slots", json!(slots)),
                ],
            );
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
                let fields = vec![
                    ("executor", json!(executor)),
                    ("running", json!(busy)),
                    ("slots", json!(slots)),
                    ("lease", json!(lease)),
                ];
                if busy <= slots {
                    self.event(
                        Level::Debug,
                        EventName::Occupied,
                        format!("work that already runs on {executor} occupies a slot ({busy} of {slots})"),
                        fields,
                    );
                } else {
                    self.event(
                        Level::Warn,
                        EventName::OccupiedBeyondCapacity,
                        format!(
                            "work that already runs on {executor} occupies a slot beyond its {slots} slots; {executor} takes no new lease until enough of its leases end"
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
                hold,
                since: self.now,
                occupied: true,
                counted,
                deleting: false,
                owner,
                at: place.map_or_else(Place::default, Place::of),
            }),
            &mut self.queue.requests,
        );
        // Its grant: a reference to the lease (`outputs.rs`), `occupied` from it.
        self.outputs.push_back(Queued::Granted { lease, passed: 0 });
    }
}
