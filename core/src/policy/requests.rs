//! The request store: the requests without a lease (waiting, or holding a slot while
//! their machine is created), each once in a slab, and the one map of every live
//! request id (a stored request's slot, or a leased request's lease).

use super::avoid::{Avoid, NO_AVOID};
use super::keys::{key_parts, ByName, OrderKey};

/// A request that has no lease yet: waiting, or holding a slot while its machine is
/// created. Every waiting request holds one, so it is kept small (issue 3: under
/// 300 bytes per waiting request, indexes included): rank and event time are read
/// back from its key, the role is interned, and what few requests carry lives
/// behind one optional box.
#[derive(Debug, Clone)]
pub(super) struct Request {
    pub(super) id: Box<str>,
    pub(super) key: OrderKey,
    pub(super) since: u64,
    /// Index into `Policy::role_names` (the role may leave the document on reload).
    pub(super) role: u32,
    pub(super) announced: bool,
    /// A `tryLease`: it never waits, even after a failed machine creation.
    pub(super) try_only: bool,
    /// `key.2` is the request's `eventTime` (else its arrival time).
    pub(super) has_event_time: bool,
    /// Many callers name themselves, so the label stays out of the box.
    pub(super) label: Option<Box<str>>,
    /// The instance that issued it (a shared roster's): on every request there, so
    /// it stays out of the box too.
    pub(super) owner: Option<Box<str>>,
    pub(super) extra: Option<Box<RequestExtra>>,
    /// Set while a slot is held on an executor for its machine.
    pub(super) creating: Option<Box<Creating>>,
}

/// The fields of a request that most requests leave empty.
#[derive(Debug, Clone, Default)]
pub(super) struct RequestExtra {
    pub(super) avoid: Avoid,
    pub(super) prefer: Option<Box<str>>,
    pub(super) pin: Option<Box<str>>,
    pub(super) deadline: Option<u64>,
    pub(super) purpose: Option<Box<str>>,
    /// The executor holding its context's coder (`LeaseRequest::borrow`).
    pub(super) borrow: Option<Box<str>>,
    /// Who the work is for (`LeaseRequest::tenant`; none: the default tenant).
    pub(super) tenant: Option<Box<str>>,
    /// Its cache key (`LeaseRequest::affinity`, `affinity.rs`).
    pub(super) affinity: Option<Box<str>>,
}

#[derive(Debug, Clone)]
pub(super) struct Creating {
    pub(super) executor: String,
    pub(super) passed: u32,
}

impl Request {
    pub(super) fn avoid(&self) -> &Avoid {
        self.extra.as_ref().map_or(&NO_AVOID, |x| &x.avoid)
    }

    pub(super) fn avoids(&self, executor: &str) -> bool {
        self.avoid().contains(executor)
    }

    pub(super) fn prefer(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|x| x.prefer.as_deref())
    }

    pub(super) fn pin(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|x| x.pin.as_deref())
    }

    pub(super) fn borrow(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|x| x.borrow.as_deref())
    }

    pub(super) fn affinity(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|x| x.affinity.as_deref())
    }

    /// The tenant it names, if any (`tenant_name` gives the default's name otherwise).
    pub(super) fn tenant(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|x| x.tenant.as_deref())
    }

    /// The tenant it is served as: its own, else the default tenant.
    pub(super) fn tenant_name(&self) -> &str {
        self.tenant().unwrap_or(crate::document::DEFAULT_TENANT)
    }

    pub(super) fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    pub(super) fn purpose(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|x| x.purpose.as_deref())
    }

    pub(super) fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    pub(super) fn deadline(&self) -> Option<u64> {
        self.extra.as_ref().and_then(|x| x.deadline)
    }

    pub(super) fn rank(&self) -> Option<i64> {
        (self.key[0] == 0).then_some(key_parts(&self.key).1)
    }

    pub(super) fn event_time(&self) -> Option<u64> {
        self.has_event_time.then_some(self.key[2])
    }

    pub(super) fn waiting(&self) -> bool {
        self.creating.is_none()
    }
}

/// A request's rarely used fields as given (`request_extra` boxes them).
#[derive(Debug, Default)]
pub(super) struct Given {
    pub(super) avoid: Vec<String>,
    pub(super) prefer: Option<String>,
    pub(super) pin: Option<String>,
    pub(super) deadline: Option<u64>,
    pub(super) purpose: Option<String>,
    pub(super) borrow: Option<String>,
    pub(super) tenant: Option<String>,
    pub(super) affinity: Option<String>,
}

/// Boxes the rarely used fields, or nothing when all are empty.
pub(super) fn request_extra(given: Given) -> Option<Box<RequestExtra>> {
    let Given {
        avoid,
        prefer,
        pin,
        deadline,
        purpose,
        borrow,
        tenant,
        affinity,
    } = given;
    let empty = avoid.is_empty()
        && prefer.is_none()
        && pin.is_none()
        && deadline.is_none()
        && purpose.is_none()
        && borrow.is_none()
        && tenant.is_none()
        && affinity.is_none();
    (!empty).then(|| {
        Box::new(RequestExtra {
            avoid: Avoid::new(avoid),
            prefer: prefer.map(String::into_boxed_str),
            pin: pin.map(String::into_boxed_str),
            deadline,
            purpose: purpose.map(String::into_boxed_str),
            borrow: borrow.map(String::into_boxed_str),
            tenant: tenant.map(String::into_boxed_str),
            affinity: affinity.map(String::into_boxed_str),
        })
    })
}

#[derive(Debug, Clone, Default)]
pub(super) struct Requests {
    pub(super) chunks: Vec<Vec<Option<Request>>>,
    pub(super) free: Vec<u32>,
    /// Every live request id: a stored request's slot, or `LEASED` and the open
    /// lease it was granted (a request id stays in use while its lease runs). One
    /// map for both, so a wait, its grant and its release search it three times (a
    /// grant rewrites the entry in place), and a new id is checked by one search.
    pub(super) by_id: ByName,
    /// The stored requests (`by_id` holds the leased ones too).
    pub(super) stored: usize,
}

/// The mark of a leased request's entry in `Requests::by_id` (lease ids stay below
/// 2^53, slots below 2^32).
pub(super) const LEASED: u64 = 1 << 63;

/// The entry of a request a grant took out of the store (`Requests::take_at`),
/// until the grant names its lease or stores it again, within the same input.
pub(super) const TAKEN: u64 = u64::MAX;

pub(super) const CHUNK: usize = 256;

impl Requests {
    pub(super) fn len(&self) -> usize {
        self.stored
    }

    pub(super) fn slot(&self, id: &str) -> Option<u32> {
        self.by_id
            .get(id)
            .filter(|&&v| v & LEASED == 0)
            .map(|&s| s as u32)
    }

    /// A stored request has this id.
    pub(super) fn contains_key(&self, id: &str) -> bool {
        self.slot(id).is_some()
    }

    /// A stored request or an open lease has this id.
    pub(super) fn id_in_use(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    /// The open lease request `id` was granted.
    pub(super) fn lease_of(&self, id: &str) -> Option<u64> {
        self.by_id
            .get(id)
            .filter(|&&v| v & LEASED != 0 && v != TAKEN)
            .map(|&v| v & !LEASED)
    }

    /// The ids of open leases.
    pub(super) fn leased(&self) -> usize {
        let leased = |&&v: &&u64| v & LEASED != 0 && v != TAKEN;
        self.by_id.values().filter(leased).count()
    }

    /// Request `id` holds open lease `lease` now: its entry rewritten in place if a
    /// grant took it from the store, else a new one (a grant at once).
    pub(super) fn name_lease(&mut self, id: &str, lease: u64) {
        debug_assert!(lease < LEASED, "lease id {lease} below the mark");
        match self.by_id.get_mut(id) {
            Some(entry) => {
                debug_assert_eq!(*entry, TAKEN, "request id {id} named twice");
                *entry = LEASED | lease;
            }
            None => {
                self.by_id.insert(id.into(), LEASED | lease);
            }
        }
    }

    /// Request `id`'s lease ended (or its machine is being deleted): the id is free.
    pub(super) fn unname_lease(&mut self, id: &str, lease: u64) {
        let named = self.by_id.remove(id);
        debug_assert_eq!(
            named,
            Some(LEASED | lease),
            "lease {lease} named by request {id}"
        );
    }

    /// Names the open leases of an import (whose stored requests are named already).
    pub(super) fn name_leases<'a>(&mut self, leases: impl Iterator<Item = (&'a str, u64)>) {
        debug_assert!(
            self.by_id.values().all(|&v| v & LEASED == 0),
            "an import names its leases once"
        );
        for (id, lease) in leases {
            // An id in use twice (a contradictory import) keeps its first entry: the
            // import's check reports the clash.
            if !self.by_id.contains_key(id) {
                self.by_id.insert(id.into(), LEASED | lease);
            }
        }
    }

    pub(super) fn at(&self, s: u32) -> Option<&Request> {
        let s = s as usize;
        self.chunks.get(s / CHUNK)?.get(s % CHUNK)?.as_ref()
    }

    pub(super) fn at_mut(&mut self, s: u32) -> Option<&mut Request> {
        let s = s as usize;
        self.chunks.get_mut(s / CHUNK)?.get_mut(s % CHUNK)?.as_mut()
    }

    pub(super) fn get(&self, id: &str) -> Option<&Request> {
        self.at(self.slot(id)?)
    }

    pub(super) fn get_mut(&mut self, id: &str) -> Option<&mut Request> {
        let s = self.slot(id)?;
        self.at_mut(s)
    }

    /// Stores a request whose id is not in use (or was taken by a grant); its slot.
    pub(super) fn insert(&mut self, req: Request) -> u32 {
        let id = req.id.clone();
        let free = self.free.pop().and_then(|s| {
            let i = s as usize;
            let place = self.chunks.get_mut(i / CHUNK)?.get_mut(i % CHUNK)?;
            Some((s, place))
        });
        let s = match free {
            Some((s, place)) => {
                *place = Some(req);
                s
            }
            None => {
                if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
                    self.chunks.push(Vec::new());
                }
                let n = self.chunks.len() - 1;
                let chunk = &mut self.chunks[n];
                chunk.push(Some(req));
                (n * CHUNK + chunk.len() - 1) as u32
            }
        };
        self.stored += 1;
        // One search: a new id, or the entry of one a grant took (`take_at`).
        let before = self.by_id.insert(id, u64::from(s));
        debug_assert!(
            before.is_none_or(|v| v == TAKEN),
            "a stored request's id was in use"
        );
        s
    }

    pub(super) fn remove_at(&mut self, s: u32) -> Option<Request> {
        let req = self.unstore(s)?;
        self.by_id.remove(&req.id);
        Some(req)
    }

    /// Takes the request in slot `s` out for a grant: its id stays in use, marked
    /// `TAKEN` until the grant names its lease (`name_lease`) or stores it again.
    pub(super) fn take_at(&mut self, s: u32) -> Option<Request> {
        let req = self.unstore(s)?;
        let entry = self.by_id.get_mut(&req.id);
        debug_assert!(entry.is_some(), "a stored request is named by its id");
        if let Some(entry) = entry {
            *entry = TAKEN;
        }
        Some(req)
    }

    fn unstore(&mut self, s: u32) -> Option<Request> {
        let i = s as usize;
        let req = self.chunks.get_mut(i / CHUNK)?.get_mut(i % CHUNK)?.take()?;
        self.stored -= 1;
        if self.stored == 0 {
            // The queue drained: give back what a burst of waiters grew.
            self.chunks = Vec::new();
            self.free = Vec::new();
        } else {
            self.free.push(s);
        }
        Some(req)
    }

    pub(super) fn remove(&mut self, id: &str) -> Option<Request> {
        let s = self.slot(id)?;
        self.remove_at(s)
    }

    /// In id order (as the map they replaced iterated).
    pub(super) fn values(&self) -> impl Iterator<Item = &Request> {
        self.slots().filter_map(|s| self.at(s))
    }

    /// The stored requests' slots, in id order.
    pub(super) fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        let slot = |&v: &u64| (v & LEASED == 0).then_some(v as u32);
        self.by_id.values().filter_map(slot)
    }

    /// Occupied slots (for the invariants).
    pub(super) fn occupied(&self) -> usize {
        self.chunks.iter().flatten().filter(|q| q.is_some()).count()
    }
}
