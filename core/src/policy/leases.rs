//! Leases: the open leases, their table by id, and the places of the requests they
//! served (the flows are `leasing.rs`'s).

use serde::Serialize;
use serde_json::Value;

use super::keys::SharedName;
use super::requests::Requests;
use crate::protocol::Because;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Lease {
    pub(super) request: String,
    /// Shared with the executor and the role table (see `SharedName`).
    pub(super) executor: SharedName,
    pub(super) role: Option<SharedName>,
    pub(super) label: Option<String>,
    /// What the call is for beyond its role (a review lens). Not written when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) purpose: Option<String>,
    /// Its clone number on its executor (the lowest free from 1), taken while the
    /// document numbers clones (`clones: "numbered"`). Not written when absent, so an
    /// export of a roster that does not number them reads as before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) clone: Option<u32>,
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
    /// On the request's `borrow` executor without a slot (never `counted`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) borrowed: bool,
    /// On the request's `borrow` executor (not independent), and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) because: Option<Because>,
    /// The instance its request came from (a shared roster's). Not written when
    /// absent, so an export without owners reads as before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) owner: Option<String>,
    /// The tenant its request named. Not written when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tenant: Option<String>,
    /// Its request's affinity key, when the key's memory chose its executor again
    /// (`affinity.rs`). Not written when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) affinity: Option<Box<str>>,
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
