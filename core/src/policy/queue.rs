//! The queue: the per-role and pinned queues in lease order over the request store
//! (`requests.rs`), deadlines, and how a request without a lease ends (the flows are
//! `queueing.rs`'s).

use std::cmp::Ordering;

use crate::limits;
use crate::sorted::{self, SortedMap, StrMap};

use super::keys::{Index, Key, OrderKey};
use super::requests::Requests;
use super::role_queue::RoleQueue;
use super::roster::RoleTable;
use super::tenants::FairRole;

/// The request deadlines in (deadline, lease order) order, each with its request's
/// slot: one `Index` per value of the order key's first word (the unranked flag),
/// keyed `[deadline, rank, time, arrival]` (issue 4: a `BTreeSet<(u64, OrderKey,
/// u32)>` was another copy of the B-tree code in the WebAssembly module). The first
/// deadline is the least of the indexes' first entries, the lower flag first on a
/// tie: the order of the tuples `(deadline, order key)` exactly. Order keys are
/// unique (arrival), so a key maps to one slot.
#[derive(Debug, Clone)]
pub(super) struct Deadlines(pub(super) Vec<Index>);

impl Default for Deadlines {
    fn default() -> Deadlines {
        // Ranked and unranked (an imported key may name other flags: more indexes).
        Deadlines(vec![Index::new(), Index::new()])
    }
}

impl Deadlines {
    pub(super) fn split(deadline: u64, key: &OrderKey) -> (usize, Key) {
        (key[0] as usize, [deadline, key[1], key[2], key[3]])
    }

    pub(super) fn insert(&mut self, deadline: u64, key: &OrderKey, s: u32) {
        let (flag, k) = Self::split(deadline, key);
        if self.0.len() <= flag {
            self.0.resize(flag + 1, Index::new());
        }
        self.0[flag].insert(k, s);
    }

    pub(super) fn remove(&mut self, deadline: u64, key: &OrderKey) {
        let (flag, k) = Self::split(deadline, key);
        if let Some(index) = self.0.get_mut(flag) {
            index.remove(&k);
        }
    }

    /// The index holding the first deadline.
    pub(super) fn first_index(&self) -> Option<usize> {
        let mut best: Option<(u64, usize)> = None;
        for (flag, index) in self.0.iter().enumerate() {
            if let Some((k, _)) = index.first_key_value() {
                // Strictly earlier only: on a tie the lower flag (seen first) wins.
                if best.is_none_or(|(t, _)| k[0] < t) {
                    best = Some((k[0], flag));
                }
            }
        }
        best.map(|(_, flag)| flag)
    }

    /// The first deadline and its request's slot.
    pub(super) fn first(&self) -> Option<(u64, u32)> {
        let (k, &s) = self.0[self.first_index()?].first_key_value()?;
        Some((k[0], s))
    }

    pub(super) fn pop_first(&mut self) {
        if let Some(flag) = self.first_index() {
            self.0[flag].pop_first();
        }
    }

    pub(super) fn clear(&mut self) {
        self.0.iter_mut().for_each(Index::clear);
    }

    pub(super) fn len(&self) -> usize {
        self.0.iter().map(Index::len).sum()
    }

    /// Every entry as (deadline, order key, slot).
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, OrderKey, u32)> + '_ {
        self.0.iter().enumerate().flat_map(|(flag, index)| {
            index
                .iter()
                .map(move |(k, &s)| (k[0], [flag as u64, k[1], k[2], k[3]], s))
        })
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Ending {
    Cancelled,
    TimedOut,
    Exhausted,
}

/// The requests without a lease and every index over them: one queue per role and
/// one per pinned executor, in lease order, and the deadlines. Queues and timers
/// hold request slots (`requests`), not ids.
#[derive(Debug, Clone)]
pub(super) struct Queue {
    pub(super) requests: Requests,
    /// The most requests without a lease (waiting, or creating a machine) it holds:
    /// `limits::MAX_WAITING_REQUESTS` (a field so that tests can reach it cheaply).
    pub(super) capacity: usize,
    /// Per document role: its waiting unpinned and pinned requests, by order key.
    pub(super) by_role: Vec<RoleQueue>,
    /// Per pinned executor id: its waiting requests, by order key.
    pub(super) pinned: StrMap<Index>,
    pub(super) deadlines: Deadlines,
    /// The arrival number of the next request (the last word of its order key).
    pub(super) next_arrival: u64,
    /// Requests put back in the queue this input that may find a slot elsewhere.
    pub(super) retry: Vec<String>,
    /// The waiting requests that name a `borrow`, by order key (`borrowing.rs`).
    pub(super) borrowers: Index,
    /// Per document role, its fair queue across tenants (`tenants.rs`), while the
    /// document's `fairness` is `tenants`; empty otherwise.
    pub(super) fair: Vec<FairRole>,
    /// The document's tenant weights (a tenant not listed weighs 1).
    pub(super) weights: SortedMap<u32>,
}

impl Default for Queue {
    fn default() -> Queue {
        Queue {
            requests: Requests::default(),
            capacity: limits::MAX_WAITING_REQUESTS,
            by_role: Vec::new(),
            pinned: StrMap::new(),
            deadlines: Deadlines::default(),
            next_arrival: 0,
            retry: Vec::new(),
            borrowers: Index::new(),
            fair: Vec::new(),
            weights: SortedMap::new(),
        }
    }
}

impl Queue {
    /// Whether one more request can wait.
    pub(super) fn has_room(&self) -> bool {
        self.requests.len() < self.capacity
    }

    /// When the queue next needs the time: its first deadline.
    pub(super) fn next_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|(t, _)| t)
    }

    /// Takes the first deadline due at `at` or earlier: its request's slot.
    pub(super) fn pop_due_deadline(&mut self, at: u64) -> Option<u32> {
        let (t, s) = self.deadlines.first()?;
        if t > at {
            return None;
        }
        self.deadlines.pop_first();
        Some(s)
    }

    /// Puts the waiting request in slot `s` in the queue of role `r`, its pin's
    /// queue, and its deadline's timer.
    pub(super) fn queue_waiting(&mut self, s: u32, r: usize) {
        let Some(request) = self.requests.at(s) else {
            debug_assert!(false, "queueing an empty slot {s}");
            return;
        };
        debug_assert!(
            request.waiting(),
            "{} is queued while it creates",
            request.id
        );
        let key = request.key;
        let fresh = self.by_role[r].insert((key, s));
        debug_assert!(fresh, "{} queued twice", request.id);
        if let Some(pin) = request.pin() {
            sorted::entry(&mut self.pinned, pin).insert(key, s);
        }
        if let Some(deadline) = request.deadline() {
            self.deadlines.insert(deadline, &key, s);
        }
        if request.borrow().is_some() {
            self.borrowers.insert(key, s);
        }
        if let Some(fair) = self.fair.get_mut(r) {
            let name = request.tenant_name();
            let weight = self.weights.get(name).copied().unwrap_or(1);
            fair.join(name, weight, key, s);
        }
    }

    /// A grant of role `r` to a request of `tenant`, before it leaves the queue (the
    /// fair queues' clock; nothing without them).
    pub(super) fn serve_tenant(&mut self, r: usize, tenant: &str) {
        if let Some(fair) = self.fair.get_mut(r) {
            fair.serve(tenant, self.weights.get(tenant).copied().unwrap_or(1));
        }
    }

    /// Takes the request in slot `s` out of its queues and timers.
    pub(super) fn unqueue(&mut self, s: u32, roles: &RoleTable) {
        let Some(request) = self.requests.at(s) else {
            debug_assert!(false, "unqueueing an empty slot {s}");
            return;
        };
        let key = request.key;
        if let Some(r) = roles.of(request.role) {
            self.by_role[r].remove(&key);
            if let Some(fair) = self.fair.get_mut(r) {
                fair.leave(request.tenant_name(), &key);
            }
        }
        if let Some(pin) = request.pin() {
            if let Some(queue) = sorted::get_mut(&mut self.pinned, pin) {
                queue.remove(&key);
                if queue.is_empty() {
                    sorted::remove(&mut self.pinned, pin);
                }
            }
        }
        if let Some(deadline) = request.deadline() {
            self.deadlines.remove(deadline, &key);
        }
        if request.borrow().is_some() {
            self.borrowers.remove(&key);
        }
    }

    /// Rebuilds the queues and timers from the stored requests (after a reload or
    /// an import; `roles` as aligned with the document of `role_count` roles; `fair`:
    /// the document serves tenants fairly). The fair queues keep their tenants' tags
    /// and turns, by role: a tenant that starts to wait here takes a fresh tag.
    pub(super) fn reindex(&mut self, roles: &RoleTable, role_count: usize, fair: bool) {
        let kept = std::mem::take(&mut self.fair);
        if fair {
            self.fair = (0..role_count)
                .map(|r| {
                    let id = roles.ids.get(r).copied().unwrap_or(0);
                    let mut f = kept
                        .iter()
                        .find(|f| f.role == id)
                        .cloned()
                        .unwrap_or_else(|| FairRole::new(id));
                    f.empty_queues();
                    f
                })
                .collect();
        }
        self.by_role = vec![RoleQueue::default(); role_count];
        self.pinned.clear();
        self.deadlines.clear();
        self.borrowers.clear();
        for s in self.requests.slots() {
            let Some(request) = self.requests.at(s) else {
                debug_assert!(false, "request id names an empty slot {s}");
                continue;
            };
            if let Some(deadline) = request.deadline() {
                self.deadlines.insert(deadline, &request.key, s);
            }
            if !request.waiting() {
                continue;
            }
            if let Some(r) = roles.of(request.role) {
                self.by_role[r].insert((request.key, s));
            }
            if let Some(pin) = request.pin() {
                sorted::entry(&mut self.pinned, pin).insert(request.key, s);
            }
            if request.borrow().is_some() {
                self.borrowers.insert(request.key, s);
            }
        }
        // The tenants join in lease order (a fresh tag's turn follows it).
        for (r, fair) in self.fair.iter_mut().enumerate() {
            for &(key, s) in self.by_role[r].iter() {
                if let Some(request) = self.requests.at(s) {
                    let name = request.tenant_name();
                    fair.join(name, self.weights.get(name).copied().unwrap_or(1), key, s);
                }
            }
            fair.prune();
        }
    }

    /// Waiting requests for role `r` earlier in lease order than `key`; the head (a
    /// grant) and the tail (a new waiter, queued before its place is counted) are
    /// answered without a search.
    pub(super) fn count_before(&self, r: usize, key: &OrderKey) -> u32 {
        let queue = &self.by_role[r];
        match (queue.first(), queue.last()) {
            (Some((first, _)), Some((last, _))) if key > first => match key.cmp(last) {
                Ordering::Greater => queue.len() as u32,
                Ordering::Equal => queue.len() as u32 - 1,
                Ordering::Less => queue.count_below(key) as u32,
            },
            // Nobody waits for this role (the common case of a grant), or the head.
            _ => 0,
        }
    }
}
