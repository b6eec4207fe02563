//! The policy: one deterministic, sans-IO state machine.
//!
//! The run loop is `handle(input)`, then `poll_output()` until `None`, then
//! `poll_timeout()`. Internally every input goes through the same steps:
//! validate (nothing changes on error), advance time (expiries, pause ends,
//! deadlines, in time order), apply the input, grant every waiting request a free
//! slot can serve (in lease order), schedule probes, persist once if the lasting
//! exclusions changed.
//!
//! Indexes keep the cost of a decision independent of the number of waiters and
//! nearly independent of the number of executors: a per-role ordered set of the
//! executors that can take that role now (priority, then least recently leased),
//! per-role queues in lease order, and timer sets for exclusion ends, pause ends
//! and deadlines.

use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;
use serde_json::{json, Value};

use crate::classify::{classify, excerpt, Classification};
use crate::document::{Document, ExecutorSpec};
use crate::duration::format_duration;
use crate::error::Error;
use crate::protocol::{
    Exclusion, ExclusionKind, ExplainRequest, Failure, FailureKind, Input, LeaseRequest, Level,
    Options, Output, PersistedState, STATE_VERSION,
};
use crate::read::{self, at, list_in, map_in, object, Read};
use crate::sorted::{self, StrMap, StrSet};
use crate::status::{
    CreatingRequest, ExclusionStatus, ExecutorExplanation, ExecutorStatus, Explanation,
    LeaseStatus, PauseStatus, PendingReloadStatus, Plan, PlannedGrant, PreflightRecord,
    QueuedRequest, Resize, Snapshot,
};
use crate::time::{iso, Iso};
use crate::write::{Obj, WriteJson};

/// Lease order: ranked before unranked, then rank, then event time, then arrival.
/// The parts as requests are exported and imported; kept encoded as a `Key`.
type KeyParts = (u8, i64, u64, u64);

/// The one key shape of every ordered index (issue 4: each distinct `BTreeMap`/
/// `BTreeSet` type is another copy of the B-tree code in the WebAssembly module, so
/// the queues, the ready sets and the timers all use `Index`).
///
/// Every key is a tuple of at most four parts encoded word by word, each part by a
/// map that is strictly increasing (and so one-to-one) from the part's own order
/// into `u64`'s: `u64` as itself, `u8` and `usize` widened, `i64` with its sign bit
/// flipped, a priority `f64` by the bits `f64::total_cmp` compares (`Prio::code`);
/// unused words are 0. Arrays compare word by word like tuples part by part, so two
/// keys compare exactly as the tuples they encode (equal only when the tuples are):
/// every iteration order, `first`, and range is the one the tuple sets had.
type Key = [u64; 4];

/// Ordered keys, each with a request slot (queues) or 0 (sets).
type Index = BTreeMap<Key, u32>;

/// A request's lease order (`KeyParts`) as a `Key`.
type OrderKey = Key;

const SIGN: u64 = 1 << 63;

fn order_key((unranked, rank, time, arrival): KeyParts) -> OrderKey {
    [u64::from(unranked), rank as u64 ^ SIGN, time, arrival]
}

fn key_parts(key: &OrderKey) -> KeyParts {
    // `order_key` wrote the first word from a `u8`.
    (key[0] as u8, (key[1] ^ SIGN) as i64, key[2], key[3])
}

/// A timer entry: `(time, executor)`.
fn timer_key(t: u64, e: usize) -> Key {
    [t, e as u64, 0, 0]
}

/// A ready-set entry: `(priority, stamp, executor)`.
fn ready_key(prio: Prio, stamp: u64, e: usize) -> Key {
    [prio.code(), stamp, e as u64, 0]
}

/// A priority with a total order, so it can key an ordered set.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Prio(f64);

impl Eq for Prio {}
impl PartialOrd for Prio {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Prio {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl Prio {
    /// A `u64` in the order of `f64::total_cmp`: the same bit flips it makes (all
    /// but the sign bit of a negative, so a more negative value compares lower as
    /// an `i64`), then the sign bit flipped to carry `i64` order into `u64`'s.
    fn code(self) -> u64 {
        let bits = self.0.to_bits();
        let flipped = bits ^ ((((bits as i64) >> 63) as u64) >> 1);
        flipped ^ SIGN
    }
}

/// An exclusion in force, with the timed one that takes over when it ends.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Excl {
    kind: ExclusionKind,
    reason: String,
    until: Option<u64>,
    since: u64,
    /// A timed exclusion a stronger one shadows: `(end, reason)`.
    then: Option<(u64, String)>,
}

impl Excl {
    /// The instant a timer must end it, if any.
    fn end(&self) -> Option<u64> {
        match self.kind {
            ExclusionKind::Until | ExclusionKind::Manual => self.until,
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Pause {
    failures: u32,
    until: u64,
    message: String,
    blocked: bool,
}

/// What an executor carries from input to input (and across a live swap).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Runtime {
    last_leased: u64,
    exclusion: Option<Excl>,
    rate_limits: VecDeque<u64>,
    pause: Option<Pause>,
    probe_in_flight: bool,
    last_probe_at: Option<u64>,
}

#[derive(Debug, Clone)]
struct Exec {
    spec: ExecutorSpec,
    /// Removed by a reload; leaves when its last lease ends.
    draining: bool,
    rt: Runtime,
    // Derived (rebuilt on reload and import):
    busy: u32,
    busy_by_role: Vec<u32>,
    /// Per role index: cap (0 when it lacks the role) and priority.
    caps: Vec<u32>,
    prios: Vec<Prio>,
    role_idx: Vec<usize>,
    /// The ready-set entries it has now: per role, and the stamp they were keyed by.
    in_ready: Vec<bool>,
    ready_stamp: u64,
}

impl Exec {
    fn new(spec: ExecutorSpec, rt: Runtime, roles: &[String]) -> Exec {
        let mut exec = Exec {
            spec,
            draining: false,
            rt,
            busy: 0,
            busy_by_role: Vec::new(),
            caps: Vec::new(),
            prios: Vec::new(),
            role_idx: Vec::new(),
            in_ready: Vec::new(),
            ready_stamp: 0,
        };
        exec.derive(roles);
        exec
    }

    fn derive(&mut self, roles: &[String]) {
        self.busy = 0;
        self.busy_by_role = vec![0; roles.len()];
        self.in_ready = vec![false; roles.len()];
        self.caps = roles
            .iter()
            .map(|r| {
                if self.spec.has_role(r) {
                    self.spec.cap_for(r)
                } else {
                    0
                }
            })
            .collect();
        self.prios = roles
            .iter()
            .map(|r| Prio(self.spec.priority_for(r)))
            .collect();
        self.role_idx = (0..roles.len())
            .filter(|&i| self.spec.has_role(&roles[i]))
            .collect();
    }

    fn has_role(&self, r: usize) -> bool {
        self.role_idx.contains(&r)
    }

    fn free_for(&self, r: usize) -> bool {
        !self.draining
            && self.busy < self.spec.slots
            && self.busy_by_role.get(r).copied().unwrap_or(0)
                < self.caps.get(r).copied().unwrap_or(0)
    }

    fn blocked(&self) -> bool {
        self.rt.pause.as_ref().is_some_and(|p| p.blocked)
    }

    /// It can take an unpinned request for role `r` now.
    fn ready_for(&self, r: usize) -> bool {
        self.free_for(r) && self.rt.exclusion.is_none() && !self.blocked()
    }

    /// It can ever serve role `r` (in this run, as declared now).
    fn servable(&self, r: usize) -> bool {
        !self.draining
            && self.caps.get(r).copied().unwrap_or(0) > 0
            && self
                .rt
                .exclusion
                .as_ref()
                .is_none_or(|x| x.kind != ExclusionKind::Run)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
enum ReqState {
    Waiting,
    /// A slot is held on `executor` while its machine is created.
    Creating {
        executor: String,
        passed: u32,
    },
}

/// A request that has no lease yet: waiting, or holding a slot while its machine is
/// created. Every waiting request holds one, so it is kept small (issue 3: under
/// 300 bytes per waiting request, indexes included): rank and event time are read
/// back from its key, the role is interned, and what few requests carry lives
/// behind one optional box.
#[derive(Debug, Clone)]
struct Req {
    id: Box<str>,
    key: OrderKey,
    since: u64,
    /// Index into `Policy::role_names` (the role may leave the document on reload).
    role: u32,
    announced: bool,
    /// A `tryLease`: it never waits, even after a failed machine creation.
    try_only: bool,
    /// `key.2` is the request's `eventTime` (else its arrival time).
    has_event_time: bool,
    /// Many callers name themselves, so the label stays out of the box.
    label: Option<Box<str>>,
    extra: Option<Box<ReqExtra>>,
    /// Set while a slot is held on an executor for its machine.
    creating: Option<Box<Creating>>,
}

/// The fields of a request that most requests leave empty.
#[derive(Debug, Clone, Default)]
struct ReqExtra {
    avoid: Vec<String>,
    prefer: Option<Box<str>>,
    pin: Option<Box<str>>,
    deadline: Option<u64>,
}

#[derive(Debug, Clone)]
struct Creating {
    executor: String,
    passed: u32,
}

impl Req {
    fn avoid(&self) -> &[String] {
        self.extra.as_ref().map_or(&[], |x| &x.avoid)
    }

    fn avoids(&self, executor: &str) -> bool {
        self.avoid().iter().any(|a| a == executor)
    }

    fn prefer(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|x| x.prefer.as_deref())
    }

    fn pin(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|x| x.pin.as_deref())
    }

    fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    fn deadline(&self) -> Option<u64> {
        self.extra.as_ref().and_then(|x| x.deadline)
    }

    fn rank(&self) -> Option<i64> {
        (self.key[0] == 0).then_some(key_parts(&self.key).1)
    }

    fn event_time(&self) -> Option<u64> {
        self.has_event_time.then_some(self.key[2])
    }

    fn waiting(&self) -> bool {
        self.creating.is_none()
    }
}

/// Boxes the rarely used fields, or nothing when all are empty.
fn req_extra(
    avoid: Vec<String>,
    prefer: Option<String>,
    pin: Option<String>,
    deadline: Option<u64>,
) -> Option<Box<ReqExtra>> {
    let empty = avoid.is_empty() && prefer.is_none() && pin.is_none() && deadline.is_none();
    (!empty).then(|| {
        Box::new(ReqExtra {
            avoid,
            prefer: prefer.map(String::into_boxed_str),
            pin: pin.map(String::into_boxed_str),
            deadline,
        })
    })
}

/// The requests without a lease, each stored once in a slab; queues and timers
/// refer to them by slot. The slab grows in chunks of `CHUNK` so that it never
/// holds much more than it uses (a doubling `Vec` would hold up to twice).
/// Names to numbers: request ids to slots, request ids to leases, executor ids to
/// indexes. One map type for the three (each distinct map type is another copy of
/// the B-tree code in the WebAssembly module).
type ByName = BTreeMap<Box<str>, u64>;

/// Executor ids to their index in `Policy::execs`.
#[derive(Debug, Clone, Default)]
struct ExecIndex(ByName);

impl ExecIndex {
    fn get(&self, id: &str) -> Option<usize> {
        self.0.get(id).map(|&e| e as usize)
    }

    fn contains_key(&self, id: &str) -> bool {
        self.0.contains_key(id)
    }
}

#[derive(Debug, Clone, Default)]
struct Requests {
    chunks: Vec<Vec<Option<Req>>>,
    free: Vec<u32>,
    /// Slots by id.
    by_id: ByName,
}

const CHUNK: usize = 256;

impl Requests {
    fn len(&self) -> usize {
        self.by_id.len()
    }

    fn slot(&self, id: &str) -> Option<u32> {
        self.by_id.get(id).map(|&s| s as u32)
    }

    fn contains_key(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    fn at(&self, s: u32) -> Option<&Req> {
        let s = s as usize;
        self.chunks.get(s / CHUNK)?.get(s % CHUNK)?.as_ref()
    }

    fn at_mut(&mut self, s: u32) -> Option<&mut Req> {
        let s = s as usize;
        self.chunks.get_mut(s / CHUNK)?.get_mut(s % CHUNK)?.as_mut()
    }

    fn get(&self, id: &str) -> Option<&Req> {
        self.at(self.slot(id)?)
    }

    fn get_mut(&mut self, id: &str) -> Option<&mut Req> {
        let s = self.slot(id)?;
        self.at_mut(s)
    }

    /// Stores a request whose id is not stored yet; its slot.
    fn insert(&mut self, req: Req) -> u32 {
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
        self.by_id.insert(id, u64::from(s));
        s
    }

    fn remove_at(&mut self, s: u32) -> Option<Req> {
        let i = s as usize;
        let req = self.chunks.get_mut(i / CHUNK)?.get_mut(i % CHUNK)?.take()?;
        self.by_id.remove(&req.id);
        if self.by_id.is_empty() {
            // The queue drained: give back what a burst of waiters grew.
            self.chunks = Vec::new();
            self.free = Vec::new();
        } else {
            self.free.push(s);
        }
        Some(req)
    }

    fn remove(&mut self, id: &str) -> Option<Req> {
        let s = self.slot(id)?;
        self.remove_at(s)
    }

    /// In id order (as the map they replaced iterated).
    fn values(&self) -> impl Iterator<Item = &Req> {
        self.by_id.values().filter_map(|&s| self.at(s as u32))
    }

    /// Occupied slots (for the invariants).
    fn occupied(&self) -> usize {
        self.chunks.iter().flatten().filter(|q| q.is_some()).count()
    }
}

/// A request as `export_state` writes it (the shape other hosts and saved states
/// depend on; the internal `Req` is laid out for memory).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct ExportedRequest {
    id: String,
    role: String,
    avoid: Vec<String>,
    prefer: Option<String>,
    pin: Option<String>,
    rank: Option<i64>,
    event_time: Option<u64>,
    label: Option<String>,
    deadline: Option<u64>,
    key: KeyParts,
    since: u64,
    announced: bool,
    /// A `tryLease`: it never waits, even after a failed machine creation.
    #[serde(default)]
    try_only: bool,
    state: ReqState,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Lease {
    request: String,
    executor: String,
    role: Option<String>,
    label: Option<String>,
    hold: Option<Value>,
    since: u64,
    occupied: bool,
    /// False for work occupying an executor the roster does not have.
    counted: bool,
}

/// The request deadlines in (deadline, lease order) order, each with its request's
/// slot: one `Index` per value of the order key's first word (the unranked flag),
/// keyed `[deadline, rank, time, arrival]` (issue 4: a `BTreeSet<(u64, OrderKey,
/// u32)>` was another copy of the B-tree code in the WebAssembly module). The first
/// deadline is the least of the indexes' first entries, the lower flag first on a
/// tie: the order of the tuples `(deadline, order key)` exactly. Order keys are
/// unique (arrival), so a key maps to one slot.
#[derive(Debug, Clone)]
struct Deadlines(Vec<Index>);

impl Default for Deadlines {
    fn default() -> Deadlines {
        // Ranked and unranked (an imported key may name other flags: more indexes).
        Deadlines(vec![Index::new(), Index::new()])
    }
}

impl Deadlines {
    fn split(deadline: u64, key: &OrderKey) -> (usize, Key) {
        (key[0] as usize, [deadline, key[1], key[2], key[3]])
    }

    fn insert(&mut self, deadline: u64, key: &OrderKey, s: u32) {
        let (flag, k) = Self::split(deadline, key);
        if self.0.len() <= flag {
            self.0.resize(flag + 1, Index::new());
        }
        self.0[flag].insert(k, s);
    }

    fn remove(&mut self, deadline: u64, key: &OrderKey) {
        let (flag, k) = Self::split(deadline, key);
        if let Some(index) = self.0.get_mut(flag) {
            index.remove(&k);
        }
    }

    /// The index holding the first deadline.
    fn first_index(&self) -> Option<usize> {
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
    fn first(&self) -> Option<(u64, u32)> {
        let (k, &s) = self.0[self.first_index()?].first_key_value()?;
        Some((k[0], s))
    }

    fn pop_first(&mut self) {
        if let Some(flag) = self.first_index() {
            self.0[flag].pop_first();
        }
    }

    fn clear(&mut self) {
        self.0.iter_mut().for_each(Index::clear);
    }

    fn len(&self) -> usize {
        self.0.iter().map(Index::len).sum()
    }

    /// Every entry as (deadline, order key, slot).
    fn iter(&self) -> impl Iterator<Item = (u64, OrderKey, u32)> + '_ {
        self.0.iter().enumerate().flat_map(|(flag, index)| {
            index
                .iter()
                .map(move |(k, &s)| (k[0], [flag as u64, k[1], k[2], k[3]], s))
        })
    }
}

/// The open leases by id, in id order: a `Vec` sorted by id, where a released
/// lease leaves a hole until holes outnumber leases (issue 4: a `BTreeMap<u64,
/// Lease>` was another copy of the B-tree code in the WebAssembly module). Lease
/// ids are handed out in increasing order, so a new lease is pushed at the end; a
/// lookup is a binary search; holes are swept out in one pass, amortized O(1) per
/// release. Iteration order is id order, as the map's was.
#[derive(Debug, Clone, Default)]
struct Leases {
    /// Sorted by id, ids unique; `None` is a released lease's hole.
    slots: Vec<(u64, Option<Lease>)>,
    /// The `Some` entries.
    live: usize,
}

impl Leases {
    /// From pairs in any order; of a repeated id the last stands (as collecting
    /// into a map does).
    fn from_pairs(mut pairs: Vec<(u64, Lease)>) -> Leases {
        // Stable: equal ids keep their order, and the last of each run is kept.
        pairs.sort_by_key(|&(id, _)| id);
        let mut leases = Leases::default();
        for (id, lease) in pairs {
            leases.insert(id, lease);
        }
        leases
    }

    fn find(&self, id: u64) -> Result<usize, usize> {
        self.slots.binary_search_by_key(&id, |&(k, _)| k)
    }

    fn insert(&mut self, id: u64, lease: Lease) {
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

    fn remove(&mut self, id: u64) -> Option<Lease> {
        let i = self.find(id).ok()?;
        let lease = self.slots[i].1.take()?;
        self.live -= 1;
        if self.live == 0 {
            self.slots = Vec::new();
        } else if self.slots.len() >= 2 * self.live + 16 {
            self.slots.retain(|(_, l)| l.is_some());
        }
        Some(lease)
    }

    /// In id order.
    fn iter(&self) -> impl Iterator<Item = (u64, &Lease)> {
        self.slots
            .iter()
            .filter_map(|(id, l)| l.as_ref().map(|l| (*id, l)))
    }

    fn values(&self) -> impl Iterator<Item = &Lease> {
        self.iter().map(|(_, l)| l)
    }

    /// In id order, for the export.
    fn to_pairs(&self) -> Vec<(u64, Lease)> {
        self.iter().map(|(id, l)| (id, l.clone())).collect()
    }
}

#[derive(Debug, Clone)]
struct PendingReload {
    document: Document,
    awaiting: StrSet,
    since: u64,
}

/// What one pass through an input decided to do with a lease request.
enum Admission {
    Granted,
    Queued,
    Ended,
}

/// The roster policy. See the crate docs for the run loop.
#[derive(Debug, Clone)]
pub struct Policy {
    options: Options,
    document: Document,
    now: u64,
    execs: Vec<Exec>,
    requests: Requests,
    /// Every role name a document of this run declared (append-only): a request
    /// keeps its role as an index here.
    role_names: Vec<String>,
    leases: Leases,
    /// Requests cancelled while their machine was created: the machine is deleted
    /// when it arrives.
    abandoned: StrMap<String>,
    next_lease: u64,
    next_arrival: u64,
    lease_clock: u64,
    /// What the state file holds for this roster's ids, as far as our persists
    /// said: a persist carries only the entries that differ from it. Per executor,
    /// index-aligned with `execs` (issue 4: not a `BTreeMap<String, Exclusion>`);
    /// a reload or a departure moves indexes but also sets `persist_all`, whose
    /// full comparison reads the entries by the ids they carry and aligns them again.
    last_persisted: Vec<Option<Exclusion>>,
    /// Executors whose lasting exclusion may have changed during this input.
    persist_touched: Vec<usize>,
    /// Compare every entry at the next flush (a reload moved or removed executors).
    persist_all: bool,
    /// Every executor id any document of this run declared. Persists no longer need
    /// it (`last_persisted` names what the file holds); kept so that exports keep
    /// their shape for modules that read it.
    known_ids: StrSet,
    pending_reload: Option<PendingReload>,
    preflights: StrMap<PreflightRecord>,
    outputs: VecDeque<Output>,
    // Derived indexes:
    exec_index: ExecIndex,
    ready: Vec<Index>,
    role_members: Vec<Vec<usize>>,
    /// For each role, the roles whose requests compete with it for an executor (some
    /// executor in the round takes both; a role always competes with itself).
    role_overlap: Vec<Vec<usize>>,
    servable: Vec<u32>,
    /// Per interned role: its index among the document's roles, if it is there.
    role_at: Vec<Option<usize>>,
    /// Per document role: its index in `role_names`.
    role_ids: Vec<u32>,
    /// Queues and timers hold request slots (`requests`), not ids.
    role_queues: Vec<Index>,
    pin_queues: StrMap<Index>,
    deadlines: Deadlines,
    exclusion_ends: Index,
    pause_ends: Index,
    /// Per executor: out with a health exclusion (a list, not a set: one map type
    /// fewer in the WebAssembly module).
    health: Vec<bool>,
    /// Health-excluded executors with no probe in flight, keyed by the earliest time
    /// their next probe can be due (exact before the first probe; after one, the last
    /// probe plus the shorter interval): the probe scan visits only those due.
    probe_waits: Index,
    lease_by_request: ByName,
    /// Executors that may have gained a usable slot during this input.
    /// (A list, cleared without freeing: a repeat is harmless.)
    dirty: Vec<usize>,
    /// Requests put back in the queue this input that may find a slot elsewhere.
    retry: Vec<String>,
}

/// An input checked against the state, carrying what checking it produced.
enum Checked {
    Plain,
    Reload(Document),
}

impl Policy {
    /// Builds a policy from a roster document, validated against `options.kinds`:
    /// a bad one is refused with every violation listed.
    pub fn new(document: &Value, options: Options) -> Result<Policy, Error> {
        let document = Document::from_json(document, options.kinds.as_deref())
            .map_err(|violations| Error::InvalidDocument { violations })?;
        let roles = document.roles.clone();
        let execs = document
            .executors
            .iter()
            .map(|spec| Exec::new(spec.clone(), Runtime::default(), &roles))
            .collect();
        let known_ids = sorted::set_from(document.executors.iter().map(|e| e.id.clone()));
        let mut policy = Policy {
            options,
            document,
            now: 0,
            execs,
            requests: Requests::default(),
            role_names: Vec::new(),
            leases: Leases::default(),
            abandoned: Vec::new(),
            next_lease: 1,
            next_arrival: 0,
            lease_clock: 0,
            last_persisted: Vec::new(),
            persist_touched: Vec::new(),
            persist_all: false,
            known_ids,
            pending_reload: None,
            preflights: Vec::new(),
            outputs: VecDeque::new(),
            exec_index: ExecIndex::default(),
            ready: Vec::new(),
            role_members: Vec::new(),
            role_overlap: Vec::new(),
            servable: Vec::new(),
            role_at: Vec::new(),
            role_ids: Vec::new(),
            role_queues: Vec::new(),
            pin_queues: Vec::new(),
            deadlines: Deadlines::default(),
            exclusion_ends: Index::new(),
            pause_ends: Index::new(),
            health: Vec::new(),
            probe_waits: Index::new(),
            lease_by_request: ByName::new(),
            dirty: Vec::new(),
            retry: Vec::new(),
        };
        policy.rebuild();
        policy.last_persisted = vec![None; policy.execs.len()];
        Ok(policy)
    }

    // ---- The run loop ---------------------------------------------------------

    /// Feeds one input. On error nothing changed (time did not advance either).
    pub fn handle(&mut self, input: Input) -> Result<(), Error> {
        let checked = self.check(&input)?;
        self.now = self.now.max(input.now());
        self.advance_time();
        self.apply(input, checked);
        self.grant_pass();
        self.schedule_probes();
        self.flush_persist();
        #[cfg(debug_assertions)]
        self.check_invariants();
        Ok(())
    }

    /// The next output, until `None`. Drain completely after every input.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When the core wants a `tick` (epoch ms), if ever. Early or repeated ticks
    /// are harmless.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut consider = |t: Option<u64>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        consider(self.exclusion_ends.first_key_value().map(|(k, _)| k[0]));
        consider(self.pause_ends.first_key_value().map(|(k, _)| k[0]));
        consider(self.deadlines.first().map(|(t, _)| t));
        if self.options.can_probe {
            // In floor order: once a floor passes the best due time, none is earlier.
            let mut best: Option<u64> = None;
            for &[floor, e, ..] in self.probe_waits.keys() {
                let e = e as usize;
                if best.is_some_and(|b| floor >= b) {
                    break;
                }
                let due = self.probe_due(e);
                best = Some(best.map_or(due, |b| b.min(due)));
            }
            consider(best);
        }
        next
    }

    /// The time of the last input (epoch ms).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The running document as written.
    pub fn document(&self) -> &Value {
        &self.document.raw
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    // ---- Validation: nothing changes here ----------------------------------------

    fn role_index(&self, role: &str) -> Result<usize, Error> {
        self.document
            .roles
            .iter()
            .position(|r| r == role)
            .ok_or_else(|| Error::UnknownRole {
                role: role.to_string(),
                known: self.document.roles.join(", "),
            })
    }

    fn known_exec(&self, id: &str) -> Result<usize, Error> {
        self.exec_index
            .get(id)
            .ok_or_else(|| Error::UnknownExecutor { id: id.to_string() })
    }

    fn check_new_id(&self, id: &str) -> Result<(), Error> {
        if id.is_empty() {
            return Err(Error::input("a request id is a non-empty string"));
        }
        if self.requests.contains_key(id)
            || self.lease_by_request.contains_key(id)
            || sorted::contains_key(&self.abandoned, id)
        {
            return Err(Error::DuplicateRequest { id: id.to_string() });
        }
        Ok(())
    }

    fn check(&self, input: &Input) -> Result<Checked, Error> {
        let now = self.now.max(input.now());
        if input.now() > 9_007_199_254_740_991 {
            return Err(Error::input(
                "`now` is beyond what a JSON number holds exactly",
            ));
        }
        match input {
            Input::Lease(request) | Input::TryLease(request) => {
                self.check_new_id(&request.id)?;
                self.role_index(&request.role)?;
            }
            Input::Cancel { id, .. } => {
                if !self.requests.contains_key(id) {
                    return Err(Error::UnknownRequest { id: id.clone() });
                }
            }
            Input::Release { lease, .. } => {
                if *lease == 0 || *lease >= self.next_lease {
                    return Err(Error::UnknownLease { lease: *lease });
                }
            }
            Input::Occupy { id, role, .. } => {
                self.check_new_id(id)?;
                if let Some(role) = role {
                    self.role_index(role)?;
                }
            }
            Input::Report { executor, .. } | Input::Resume { executor, .. } => {
                self.known_exec(executor)?;
            }
            Input::Exclude {
                executor,
                kind,
                until,
                ..
            } => {
                self.known_exec(executor)?;
                match (kind, until) {
                    (ExclusionKind::Until, None) => {
                        return Err(Error::input("exclude: kind `until` needs `until`"))
                    }
                    (ExclusionKind::Until | ExclusionKind::Manual, Some(t)) if *t <= now => {
                        return Err(Error::input(format!(
                            "exclude: `until` {} is not after now {}",
                            iso(*t),
                            iso(now)
                        )))
                    }
                    _ => {}
                }
            }
            Input::ProbeResult { executor, .. } => {
                self.known_exec(executor)?;
            }
            Input::MachineCreated { id, .. } | Input::MachineFailed { id, .. } => {
                let creating = self.requests.get(id).is_some_and(|r| !r.waiting());
                if !creating && !sorted::contains_key(&self.abandoned, id) {
                    return Err(Error::UnknownRequest { id: id.clone() });
                }
            }
            Input::Reload { document, .. } => {
                let parsed = Document::from_json(document, self.options.kinds.as_deref())
                    .map_err(|violations| Error::InvalidDocument { violations })?;
                return Ok(Checked::Reload(parsed));
            }
            Input::PreflightResult { executor, .. } => {
                let pending = self
                    .pending_reload
                    .as_ref()
                    .is_some_and(|p| p.document.executor(executor).is_some());
                if !pending && !self.exec_index.contains_key(executor) {
                    return Err(Error::UnknownExecutor {
                        id: executor.clone(),
                    });
                }
            }
            Input::Restore { state, .. } => {
                if state.version != STATE_VERSION {
                    return Err(Error::InvalidState {
                        message: format!("state version {} is not {STATE_VERSION}", state.version),
                    });
                }
                for (i, x) in state.exclusions.iter().enumerate() {
                    if x.kind == ExclusionKind::Until && x.until.is_none() {
                        return Err(Error::InvalidState {
                            message: format!(
                                "exclusions[{i}] ('{}') is `until` without `until`",
                                x.id
                            ),
                        });
                    }
                }
            }
            Input::Tick { .. } => {}
        }
        Ok(Checked::Plain)
    }

    // ---- Time ------------------------------------------------------------------

    /// Ends what the passing of time ends, in time order, granting between steps so
    /// that a slot that came back before a deadline is offered before it passes.
    fn advance_time(&mut self) {
        loop {
            let next = [
                self.exclusion_ends.first_key_value().map(|(k, _)| k[0]),
                self.pause_ends.first_key_value().map(|(k, _)| k[0]),
                self.deadlines.first().map(|(t, _)| t),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(at) = next.filter(|t| *t <= self.now) else {
                break;
            };
            while let Some((&[t, e, ..], _)) = self.exclusion_ends.first_key_value() {
                if t > at {
                    break;
                }
                self.exclusion_ends.pop_first();
                let e = e as usize;
                self.end_exclusion(e, at, false);
            }
            while let Some((&[t, e, ..], _)) = self.pause_ends.first_key_value() {
                if t > at {
                    break;
                }
                self.pause_ends.pop_first();
                let e = e as usize;
                self.end_pause(e);
            }
            self.grant_pass();
            while let Some((t, s)) = self.deadlines.first() {
                if t > at {
                    break;
                }
                self.deadlines.pop_first();
                if let Some(id) = self.requests.at(s).map(|q| q.id.to_string()) {
                    self.end_request(&id, Ending::TimedOut);
                }
            }
        }
    }

    // ---- Applying inputs ----------------------------------------------------------

    fn apply(&mut self, input: Input, checked: Checked) {
        match input {
            Input::Lease(request) => self.admit(request, false),
            Input::TryLease(request) => self.admit(request, true),
            Input::Cancel { id, .. } => {
                if self.requests.contains_key(&id) {
                    self.end_request(&id, Ending::Cancelled);
                }
            }
            Input::Release { lease, .. } => self.release(lease),
            Input::Occupy {
                id,
                executor,
                role,
                hold,
                ..
            } => self.occupy(id, executor, role, hold),
            Input::Report {
                executor, failure, ..
            } => self.report(&executor, &failure),
            Input::Exclude {
                executor,
                kind,
                reason,
                until,
                ..
            } => {
                if let Some(e) = self.exec_index.get(&executor) {
                    let reason = if reason.is_empty() {
                        "excluded by an operator".to_string()
                    } else {
                        reason
                    };
                    let excl = self.exclusion_of_kind(e, kind, reason, until);
                    self.exclude(e, excl);
                }
            }
            Input::Resume { executor, .. } => self.resume(&executor),
            Input::ProbeResult { executor, up, .. } => self.probe_result(&executor, up),
            Input::MachineCreated { id, hold, .. } => self.machine_created(&id, hold),
            Input::MachineFailed { id, message, .. } => self.machine_failed(&id, &message),
            Input::Reload { .. } => {
                if let Checked::Reload(document) = checked {
                    self.reload(document);
                }
            }
            Input::PreflightResult {
                executor,
                ok,
                error,
                ..
            } => self.preflight_result(executor, ok, error),
            Input::Restore { state, .. } => self.restore(state),
            Input::Tick { .. } => {}
        }
    }

    fn admit(&mut self, request: LeaseRequest, try_only: bool) {
        let Ok(r) = self.role_index(&request.role) else {
            return;
        };
        let key = order_key((
            u8::from(request.rank.is_none()),
            request.rank.unwrap_or(0),
            request.event_time.unwrap_or(self.now),
            self.next_arrival,
        ));
        self.next_arrival += 1;
        let req = Req {
            id: request.id.into_boxed_str(),
            key,
            since: self.now,
            role: self.role_ids.get(r).copied().unwrap_or(0),
            announced: false,
            try_only,
            has_event_time: request.event_time.is_some(),
            label: request.label.map(String::into_boxed_str),
            extra: req_extra(request.avoid, request.prefer, request.pin, request.deadline),
            creating: None,
        };
        // A free slot now: granted at once, without a trip through `requests`.
        if let Some(e) = self.choose(&req, r) {
            let passed = self.passed_by(e, &req.key);
            self.take_slot_with(req, e, r, passed);
            return;
        }
        let id = req.id.to_string();
        self.requests.insert(req);
        match self.try_place(&id, r, !try_only) {
            Admission::Granted | Admission::Ended => {}
            Admission::Queued if try_only => self.unavailable(&id, r),
            Admission::Queued => self.enqueue(&id, r),
        }
    }

    /// Ends a `tryLease` that found no free slot.
    fn unavailable(&mut self, id: &str, r: usize) {
        self.requests.remove(id);
        self.outputs.push_back(Output::Unavailable {
            request: id.to_string(),
        });
        self.event(
            Level::Debug,
            "unavailable",
            format!("no free executor takes {} now", self.role_name(r)),
            vec![("request", json!(id))],
        );
    }

    /// Grants a request now if a free slot serves it, ends it if nothing ever can,
    /// or says it must wait. The request is in `requests` and in no queue.
    fn try_place(&mut self, id: &str, r: usize, may_wait: bool) -> Admission {
        let Some(req) = self.requests.get(id) else {
            return Admission::Ended;
        };
        if let Some(e) = self.choose(req, r) {
            let passed = self.passed_by(e, &req.key);
            self.take_slot(id, e, r, passed);
            return Admission::Granted;
        }
        if !may_wait {
            return Admission::Queued;
        }
        if !self.can_serve_request(req, r) {
            self.end_request(id, Ending::Exhausted);
            return Admission::Ended;
        }
        if req.deadline().is_some_and(|d| d <= self.now) {
            self.end_request(id, Ending::TimedOut);
            return Admission::Ended;
        }
        Admission::Queued
    }

    /// The executor that serves `req` now, if any: its pin, or the pick.
    fn choose(&self, req: &Req, r: usize) -> Option<usize> {
        match req.pin() {
            Some(pin) => self
                .exec_index
                .get(pin)
                .filter(|&e| self.pin_ready(e, r) && !req.avoids(pin)),
            None => self.pick(req, r),
        }
    }

    fn pin_ready(&self, e: usize, r: usize) -> bool {
        let x = &self.execs[e];
        x.has_role(r) && x.free_for(r) && x.rt.exclusion.is_none()
    }

    /// Among the free executors for a request: `prefer` first; else the lowest
    /// priority for the role; ties to the one leased least recently.
    fn pick(&self, req: &Req, r: usize) -> Option<usize> {
        let avoid = req.avoid();
        if let Some(prefer) = req.prefer() {
            if let Some(e) = self.exec_index.get(prefer) {
                if self.execs[e].has_role(r) && self.execs[e].ready_for(r) && !req.avoids(prefer) {
                    return Some(e);
                }
            }
        }
        self.ready[r]
            .keys()
            .map(|k| k[2] as usize)
            .find(|&e| avoid.is_empty() || !avoid.contains(&self.execs[e].spec.id))
    }

    fn enqueue(&mut self, id: &str, r: usize) {
        let Some(s) = self.requests.slot(id) else {
            return;
        };
        let Some(req) = self.requests.at_mut(s) else {
            return;
        };
        req.creating = None;
        let key = req.key;
        let announce = !req.announced;
        req.announced = true;
        let pin = req.pin().map(str::to_string);
        let deadline = req.deadline();
        let label = req.label().map(str::to_string);
        let avoid = req.avoid().to_vec();
        self.role_queues[r].insert(key, s);
        if let Some(pin) = &pin {
            sorted::entry(&mut self.pin_queues, pin).insert(key, s);
        }
        if let Some(deadline) = deadline {
            self.deadlines.insert(deadline, &key, s);
        }
        if announce {
            let ahead = self.ahead_of(r, &key);
            let report = self.waiting_report(r, &avoid, pin.as_deref());
            let role = self.role_name(r).to_string();
            self.outputs.push_back(Output::Waiting {
                request: id.to_string(),
                role: role.clone(),
                report: report.clone(),
                ahead,
            });
            let mut message = format!("waiting for an executor to take {role}");
            if let Some(label) = &label {
                message.push_str(&format!(" for {label}"));
            }
            message.push_str(&format!(": {report}"));
            if let Some(pin) = &pin {
                if !self.exec_index.contains_key(pin) {
                    message.push_str(&format!(
                        " ({pin} is not in the roster; the request waits until a reload declares it or it is cancelled)"
                    ));
                }
            }
            self.event(
                Level::Info,
                "waiting",
                message,
                vec![
                    ("request", json!(id)),
                    ("role", json!(role)),
                    ("ahead", json!(ahead)),
                ],
            );
        }
    }

    /// Waiting requests for role `r` earlier in lease order than `key`.
    ///
    /// Walks both sides of `key` in step and stops at the shorter one, so the head
    /// of the queue (a grant) and its tail (a new waiter) cost O(1), not O(waiters).
    /// Waiting requests ahead of `key` in lease order that compete with role `r` for
    /// an executor (requests of every role some executor takes along with `r`).
    fn ahead_of(&self, r: usize, key: &OrderKey) -> u32 {
        match self.role_overlap.get(r) {
            Some(roles) => roles.iter().map(|&o| self.count_before(o, key)).sum(),
            None => self.count_before(r, key),
        }
    }

    /// Waiting requests ahead of `key` in lease order that executor `e` could have
    /// served: what a grant on `e` passed.
    fn passed_by(&self, e: usize, key: &OrderKey) -> u32 {
        let x = &self.execs[e];
        x.role_idx
            .iter()
            .filter(|&&r| x.caps[r] > 0)
            .map(|&r| self.count_before(r, key))
            .sum()
    }

    fn count_before(&self, r: usize, key: &OrderKey) -> u32 {
        use std::ops::Bound::{Excluded, Unbounded};
        let queue = &self.role_queues[r];
        if queue.is_empty() {
            return 0; // nobody waits for this role: the common case of a grant
        }
        let at = usize::from(queue.contains_key(key));
        let mut before = queue.range(..*key);
        let mut after = queue.range((Excluded(*key), Unbounded));
        let mut i = 0;
        loop {
            if before.next().is_none() {
                return i as u32;
            }
            if after.next().is_none() {
                return (queue.len() - at - i) as u32;
            }
            i += 1;
        }
    }

    fn dequeue(&mut self, id: &str) {
        if let Some(s) = self.requests.slot(id) {
            self.dequeue_at(s);
        }
    }

    /// Takes the request in slot `s` out of its queues and timers.
    fn dequeue_at(&mut self, s: u32) {
        let Some(req) = self.requests.at(s) else {
            return;
        };
        let key = req.key;
        if let Some(r) = self.role_at.get(req.role as usize).copied().flatten() {
            self.role_queues[r].remove(&key);
        }
        if let Some(pin) = req.pin() {
            if let Some(queue) = sorted::get_mut(&mut self.pin_queues, pin) {
                queue.remove(&key);
                if queue.is_empty() {
                    sorted::remove(&mut self.pin_queues, pin);
                }
            }
        }
        if let Some(deadline) = req.deadline() {
            self.deadlines.remove(deadline, &key);
        }
    }

    /// Takes a slot on `e` for request `id`: a lease, or a machine creation first.
    fn take_slot(&mut self, id: &str, e: usize, r: usize, passed: u32) {
        if let Some(s) = self.requests.slot(id) {
            self.take_slot_at(s, e, r, passed);
        }
    }

    fn take_slot_at(&mut self, s: u32, e: usize, r: usize, passed: u32) {
        self.dequeue_at(s);
        let Some(req) = self.requests.remove_at(s) else {
            return;
        };
        self.take_slot_with(req, e, r, passed);
    }

    /// Takes a slot on `e` for `req`, which is in no queue and not in `requests`.
    fn take_slot_with(&mut self, mut req: Req, e: usize, r: usize, passed: u32) {
        debug_assert!(
            self.execs[e].free_for(r),
            "invariant: a grant takes a free slot"
        );
        self.lease_clock += 1;
        let x = &mut self.execs[e];
        x.busy += 1;
        x.busy_by_role[r] += 1;
        x.rt.last_leased = self.lease_clock;
        let provision = x.spec.provision;
        let exec_id = x.spec.id.clone();
        self.ready_up(e);
        if provision && req.pin().is_none() {
            req.creating = Some(Box::new(Creating {
                executor: exec_id.clone(),
                passed,
            }));
            let label = req.label.clone();
            let id = req.id.to_string();
            let (deadline, key) = (req.deadline(), req.key);
            let s = self.requests.insert(req);
            if let Some(deadline) = deadline {
                // The deadline still applies while the machine is created.
                self.deadlines.insert(deadline, &key, s);
            }
            self.outputs.push_back(Output::CreateMachine {
                request: id.to_string(),
                executor: exec_id.clone(),
            });
            let role = self.role_name(r).to_string();
            self.event(
                Level::Info,
                "creatingMachine",
                format!(
                    "{exec_id} takes {role}{} in lease order; creating its machine",
                    for_label(label.as_deref())
                ),
                vec![
                    ("request", json!(id)),
                    ("executor", json!(exec_id)),
                    ("role", json!(role)),
                    ("passed", json!(passed)),
                ],
            );
            return;
        }
        self.open_lease(req, exec_id, None, passed);
    }

    fn open_lease(&mut self, req: Req, exec_id: String, hold: Option<Value>, passed: u32) {
        let lease = self.next_lease;
        self.next_lease += 1;
        let role = self.req_role_name(&req).to_string();
        let label = req.label.map(String::from);
        let id = String::from(req.id);
        self.outputs.push_back(Output::Granted {
            request: id.clone(),
            lease,
            executor: exec_id.clone(),
            role: role.clone(),
            hold: hold.clone(),
            passed,
            occupied: false,
        });
        // The hot path of every grant: nothing is built for a filtered event, the
        // message without `format!`, the fields in key order.
        if Level::Info >= self.options.min_event_level {
            let mut message = String::with_capacity(
                exec_id.len() + role.len() + label.as_ref().map_or(0, |l| l.len() + 5) + 27,
            );
            message.push_str(&exec_id);
            message.push_str(" takes ");
            message.push_str(&role);
            if let Some(label) = &label {
                message.push_str(" for ");
                message.push_str(label);
            }
            if hold.is_some() {
                message.push_str(" with a new machine");
            }
            self.event(
                Level::Info,
                "granted",
                message,
                vec![
                    ("executor", Value::String(exec_id.clone())),
                    ("lease", Value::from(lease)),
                    ("passed", Value::from(passed)),
                    ("request", Value::String(id.clone())),
                    ("role", Value::String(role.clone())),
                ],
            );
        }
        self.lease_by_request.insert(id.as_str().into(), lease);
        self.leases.insert(
            lease,
            Lease {
                request: id,
                executor: exec_id,
                role: Some(role),
                label,
                hold,
                since: self.now,
                occupied: false,
                counted: true,
            },
        );
    }

    /// Ends a request that has no lease: cancelled, timed out or exhausted. A slot
    /// held for its machine is freed, and the machine deleted when it arrives.
    fn end_request(&mut self, id: &str, ending: Ending) {
        self.dequeue(id);
        let Some(req) = self.requests.remove(id) else {
            return;
        };
        if let Some(creating) = &req.creating {
            let executor = &creating.executor;
            sorted::insert(&mut self.abandoned, id.to_string(), executor.clone());
            if let Some(e) = self.exec_index.get(executor) {
                let r = self.req_role(&req);
                self.free_slot(e, r);
                self.leave_if_drained(e);
            }
        }
        let role = self.req_role_name(&req).to_string();
        match ending {
            Ending::Cancelled => {
                self.outputs.push_back(Output::Cancelled {
                    request: id.to_string(),
                });
                self.event(
                    Level::Info,
                    "cancelled",
                    format!(
                        "the request for {role}{} stopped waiting",
                        for_label(req.label())
                    ),
                    vec![("request", json!(id))],
                );
            }
            Ending::TimedOut => {
                self.outputs.push_back(Output::TimedOut {
                    request: id.to_string(),
                });
                self.event(
                    Level::Warn,
                    "timedOut",
                    format!(
                        "no executor took {role}{} before its deadline",
                        for_label(req.label())
                    ),
                    vec![("request", json!(id))],
                );
            }
            Ending::Exhausted => {
                let reasons = self.exhausted_reasons(&req);
                self.event(
                    Level::Warn,
                    "exhausted",
                    format!(
                        "no executor can ever take {role}{}: {}",
                        for_label(req.label()),
                        reasons.join("; ")
                    ),
                    vec![("request", json!(id)), ("role", json!(role))],
                );
                self.outputs.push_back(Output::Exhausted {
                    request: id.to_string(),
                    role,
                    reasons,
                });
            }
        }
    }

    /// Frees one slot on `e` (and its role count), and offers it to the queue.
    fn free_slot(&mut self, e: usize, r: Option<usize>) {
        let x = &mut self.execs[e];
        x.busy = x.busy.saturating_sub(1);
        if let Some(r) = r {
            if let Some(count) = x.busy_by_role.get_mut(r) {
                *count = count.saturating_sub(1);
            }
        }
        self.ready_up(e);
        self.dirty.push(e);
    }

    /// A removed executor whose last slot was a machine creation that just ended
    /// leaves the roster, as it does when its last lease ends.
    fn leave_if_drained(&mut self, e: usize) {
        let x = &self.execs[e];
        if !(x.draining && x.busy == 0) {
            return;
        }
        let id = x.spec.id.clone();
        self.event(
            Level::Info,
            "left",
            format!(
                "the last slot on {id}, which a reload removed, was freed; it leaves the roster"
            ),
            vec![("executor", json!(id))],
        );
        self.remove_drained(e);
    }

    fn release(&mut self, lease_id: u64) {
        let Some(lease) = self.leases.remove(lease_id) else {
            return; // released before: releasing is idempotent
        };
        self.lease_by_request.remove(lease.request.as_str());
        if let Some(hold) = &lease.hold {
            self.outputs.push_back(Output::DeleteMachine {
                executor: lease.executor.clone(),
                hold: hold.clone(),
            });
        }
        if !lease.counted {
            return;
        }
        let Some(e) = self.exec_index.get(&lease.executor) else {
            return;
        };
        let r = lease
            .role
            .as_ref()
            .and_then(|role| self.document.roles.iter().position(|x| x == role));
        let over = self.execs[e].busy > self.execs[e].spec.slots && !self.execs[e].draining;
        self.free_slot(e, r);
        let x = &self.execs[e];
        if x.draining && x.busy == 0 {
            let id = x.spec.id.clone();
            self.event(
                Level::Info,
                "left",
                format!(
                    "the last lease on {id}, which a reload removed, ended; it leaves the roster"
                ),
                vec![("executor", json!(id))],
            );
            self.remove_drained(e);
        } else if over {
            let (id, busy, slots) = (x.spec.id.clone(), x.busy, x.spec.slots);
            self.event(
                Level::Info,
                "retired",
                format!(
                    "a lease ended on {id}, which runs more leases than it has slots; its slot retires ({busy} running, {slots} slots)"
                ),
                vec![("executor", json!(id)), ("running", json!(busy)), ("slots", json!(slots))],
            );
        }
    }

    fn occupy(&mut self, id: String, executor: String, role: Option<String>, hold: Option<Value>) {
        let r = role.as_ref().and_then(|role| self.role_index(role).ok());
        let lease = self.next_lease;
        self.next_lease += 1;
        let counted = match self.exec_index.get(&executor) {
            Some(e) => {
                self.unready(e);
                let x = &mut self.execs[e];
                x.busy += 1;
                if let Some(r) = r.filter(|&r| x.has_role(r)) {
                    x.busy_by_role[r] += 1;
                }
                let (busy, slots) = (x.busy, x.spec.slots);
                self.ready_up(e);
                let fields = vec![
                    ("executor", json!(executor)),
                    ("running", json!(busy)),
                    ("slots", json!(slots)),
                    ("lease", json!(lease)),
                ];
                if busy <= slots {
                    self.event(
                        Level::Info,
                        "occupied",
                        format!("work that already runs on {executor} occupies a slot ({busy} of {slots})"),
                        fields,
                    );
                } else {
                    self.event(
                        Level::Warn,
                        "occupiedBeyondCapacity",
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
                    "occupiedUnknown",
                    format!(
                        "work already runs on {executor}, which the roster does not have; it occupies no slot"
                    ),
                    vec![("executor", json!(executor)), ("lease", json!(lease))],
                );
                false
            }
        };
        self.outputs.push_back(Output::Granted {
            request: id.clone(),
            lease,
            executor: executor.clone(),
            role: role.clone().unwrap_or_default(),
            hold: hold.clone(),
            passed: 0,
            occupied: true,
        });
        self.lease_by_request.insert(id.as_str().into(), lease);
        self.leases.insert(
            lease,
            Lease {
                request: id,
                executor,
                role,
                label: None,
                hold,
                since: self.now,
                occupied: true,
                counted,
            },
        );
    }

    // ---- Granting -----------------------------------------------------------------

    /// Grants, in lease order, every waiting request that a newly usable slot can
    /// serve. Only executors that gained a slot this input (`dirty`) are looked at,
    /// and only the heads of their roles' queues, so the cost does not grow with the
    /// number of waiters.
    fn grant_pass(&mut self) {
        for id in std::mem::take(&mut self.retry) {
            let Some(req) = self.requests.get(&id) else {
                continue;
            };
            if !req.waiting() {
                continue;
            }
            let Some(r) = self.req_role(req) else {
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
            let Some(req) = self.requests.at(s) else {
                break;
            };
            let Some(r) = self.req_role(req) else {
                break;
            };
            let choice = match pinned_to {
                Some(e) => Some(e),
                None => self.pick(req, r),
            };
            let Some(e) = choice else {
                break; // cannot happen: the candidate was found on a ready executor
            };
            let passed = self.passed_by(e, &req.key);
            self.take_slot_at(s, e, r, passed);
        }
        self.dirty.clear();
    }

    /// The earliest waiting request, in lease order, that one of the dirty
    /// executors can serve now.
    fn next_candidate(&self) -> Option<(u32, Option<usize>)> {
        let mut best: Option<(OrderKey, u32, Option<usize>)> = None;
        for &e in &self.dirty {
            let x = &self.execs[e];
            if x.draining || x.rt.exclusion.is_some() || x.busy >= x.spec.slots {
                continue;
            }
            if !x.blocked() {
                for &r in &x.role_idx {
                    if !x.free_for(r) {
                        continue;
                    }
                    for (key, &s) in &self.role_queues[r] {
                        if best.as_ref().is_some_and(|(b, _, _)| b <= key) {
                            break;
                        }
                        let Some(req) = self.requests.at(s) else {
                            continue;
                        };
                        if req.pin().is_some() || req.avoids(&x.spec.id) {
                            continue;
                        }
                        best = Some((*key, s, None));
                        break;
                    }
                }
            }
            if let Some(queue) = sorted::get(&self.pin_queues, &x.spec.id) {
                for (key, &s) in queue {
                    if best.as_ref().is_some_and(|(b, _, _)| b <= key) {
                        break;
                    }
                    let Some(req) = self.requests.at(s) else {
                        continue;
                    };
                    let Some(r) = self.req_role(req) else {
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

    // ---- The ready index ----------------------------------------------------------

    /// Takes `e` out of every ready set (before a change to what keys or admits it).
    fn unready(&mut self, e: usize) {
        let stamp = self.execs[e].ready_stamp;
        for i in 0..self.execs[e].role_idx.len() {
            let r = self.execs[e].role_idx[i];
            if self.execs[e].in_ready[r] {
                self.ready[r].remove(&ready_key(self.execs[e].prios[r], stamp, e));
                self.execs[e].in_ready[r] = false;
            }
        }
    }

    /// Puts `e` into the ready set of every role it can take now, and out of the
    /// others (after a change). Entries whose key did not change stay in place.
    fn ready_up(&mut self, e: usize) {
        let old = self.execs[e].ready_stamp;
        let stamp = self.execs[e].rt.last_leased;
        self.execs[e].ready_stamp = stamp;
        for i in 0..self.execs[e].role_idx.len() {
            let r = self.execs[e].role_idx[i];
            let x = &self.execs[e];
            let (want, has, prio) = (x.ready_for(r), x.in_ready[r], x.prios[r]);
            if has && (!want || old != stamp) {
                self.ready[r].remove(&ready_key(prio, old, e));
            }
            if want && (!has || old != stamp) {
                self.ready[r].insert(ready_key(prio, stamp, e), 0);
            }
            self.execs[e].in_ready[r] = want;
        }
    }

    /// A request's role among the document's roles (none if a reload dropped it).
    fn req_role(&self, req: &Req) -> Option<usize> {
        self.role_at.get(req.role as usize).copied().flatten()
    }

    fn req_role_name(&self, req: &Req) -> &str {
        self.role_names
            .get(req.role as usize)
            .map_or("?", String::as_str)
    }

    /// The interned index of a role name, added if new.
    fn intern_role(&mut self, name: &str) -> u32 {
        match self.role_names.iter().position(|n| n == name) {
            Some(i) => i as u32,
            None => {
                self.role_names.push(name.to_string());
                (self.role_names.len() - 1) as u32
            }
        }
    }

    /// Recomputes every derived index from the executors, leases and requests
    /// (after creation, a reload, a drained executor leaving, an import).
    fn rebuild(&mut self) {
        let roles = self.document.roles.clone();
        self.role_ids = roles.iter().map(|r| self.intern_role(r)).collect();
        self.role_at = vec![None; self.role_names.len()];
        for (r, &i) in self.role_ids.iter().enumerate() {
            self.role_at[i as usize] = Some(r);
        }
        self.exec_index = ExecIndex(
            self.execs
                .iter()
                .enumerate()
                .map(|(i, x)| (x.spec.id.as_str().into(), i as u64))
                .collect(),
        );
        for x in &mut self.execs {
            x.derive(&roles);
        }
        for lease in self.leases.values() {
            if !lease.counted {
                continue;
            }
            if let Some(e) = self.exec_index.get(&lease.executor) {
                let x = &mut self.execs[e];
                x.busy += 1;
                if let Some(r) = lease
                    .role
                    .as_ref()
                    .and_then(|role| roles.iter().position(|x| x == role))
                    .filter(|&r| x.has_role(r))
                {
                    x.busy_by_role[r] += 1;
                }
            }
        }
        for req in self.requests.values() {
            if let Some(creating) = &req.creating {
                if let Some(e) = self.exec_index.get(&creating.executor) {
                    let x = &mut self.execs[e];
                    x.busy += 1;
                    if let Some(r) = self.role_at.get(req.role as usize).copied().flatten() {
                        x.busy_by_role[r] += 1;
                    }
                }
            }
        }
        self.ready = vec![Index::new(); roles.len()];
        self.role_members = vec![Vec::new(); roles.len()];
        self.servable = vec![0; roles.len()];
        self.exclusion_ends.clear();
        self.pause_ends.clear();
        self.health = vec![false; self.execs.len()];
        self.probe_waits.clear();
        for e in 0..self.execs.len() {
            self.ready_up(e);
            let x = &self.execs[e];
            for &r in &x.role_idx {
                self.role_members[r].push(e);
                if x.servable(r) {
                    self.servable[r] += 1;
                }
            }
            if let Some(end) = x.rt.exclusion.as_ref().and_then(Excl::end) {
                self.exclusion_ends.insert(timer_key(end, e), 0);
            }
            if x.rt.exclusion.as_ref().map(|x| x.kind) == Some(ExclusionKind::Health) {
                self.health[e] = true;
            }
            self.probe_wait(e);
            let x = &self.execs[e];
            if let Some(p) = x.rt.pause.as_ref().filter(|p| p.blocked) {
                self.pause_ends.insert(timer_key(p.until, e), 0);
            }
        }
        let mut overlap = vec![vec![false; roles.len()]; roles.len()];
        for x in self.execs.iter().filter(|x| !x.draining) {
            let takes: Vec<usize> = x
                .role_idx
                .iter()
                .copied()
                .filter(|&r| x.caps[r] > 0)
                .collect();
            for &a in &takes {
                for &b in &takes {
                    overlap[a][b] = true;
                }
            }
        }
        self.role_overlap = overlap
            .iter()
            .enumerate()
            .map(|(r, row)| (0..row.len()).filter(|&o| o == r || row[o]).collect())
            .collect();
        self.role_queues = vec![Index::new(); roles.len()];
        self.pin_queues.clear();
        self.deadlines.clear();
        for s in self.requests.by_id.values().map(|&s| s as u32) {
            let Some(req) = self.requests.at(s) else {
                continue;
            };
            if let Some(deadline) = req.deadline() {
                self.deadlines.insert(deadline, &req.key, s);
            }
            if !req.waiting() {
                continue;
            }
            if let Some(r) = self.role_at.get(req.role as usize).copied().flatten() {
                self.role_queues[r].insert(req.key, s);
            }
            if let Some(pin) = req.pin() {
                sorted::entry(&mut self.pin_queues, pin).insert(req.key, s);
            }
        }
        self.lease_by_request = self
            .leases
            .iter()
            .map(|(id, lease)| (lease.request.as_str().into(), id))
            .collect();
    }

    fn remove_drained(&mut self, e: usize) {
        self.execs.remove(e);
        self.rebuild();
        // Indexes moved: every executor may be offered again, and the next persist
        // compares every entry (cheap: rare).
        self.dirty = (0..self.execs.len()).collect();
        self.persist_all = true;
    }

    // ---- Exhaustion ---------------------------------------------------------------

    fn can_serve_request(&self, req: &Req, r: usize) -> bool {
        self.can_serve(r, req.avoid(), req.pin())
    }

    fn can_serve(&self, r: usize, avoid: &[String], pin: Option<&str>) -> bool {
        if let Some(pin) = pin {
            if avoid.iter().any(|a| a == pin) {
                return false;
            }
            return match self.exec_index.get(pin) {
                None => true, // undeclared: it waits until a reload declares it
                Some(e) => self.execs[e].draining || self.execs[e].servable(r),
            };
        }
        // Each id once (an avoid list may repeat one).
        let avoided = avoid
            .iter()
            .enumerate()
            .filter(|&(i, id)| {
                !avoid[..i].contains(id)
                    && self
                        .exec_index
                        .get(id.as_str())
                        .is_some_and(|e| self.execs[e].servable(r))
            })
            .count() as u32;
        self.servable[r] > avoided
    }

    /// Ends every waiting request of these roles that nothing can ever serve now.
    fn recheck_exhaustion(&mut self, roles: &[usize]) {
        let mut ended = Vec::new();
        for &r in roles {
            for &s in self.role_queues[r].values() {
                if let Some(req) = self.requests.at(s) {
                    if !self.can_serve_request(req, r) {
                        ended.push(req.id.to_string());
                    }
                }
            }
        }
        for id in ended {
            self.end_request(&id, Ending::Exhausted);
        }
    }

    fn exhausted_reasons(&self, req: &Req) -> Vec<String> {
        let Some(r) = self.req_role(req) else {
            return vec![format!(
                "the roster no longer has the role {}",
                self.req_role_name(req)
            )];
        };
        if let Some(pin) = req.pin() {
            if req.avoids(pin) {
                return vec![format!("{pin} is both the pin and avoided")];
            }
            return match self.exec_index.get(pin) {
                Some(e) => vec![self.unavailable_reason(e, r)],
                None => vec![format!("{pin} is not in the roster")],
            };
        }
        let reasons: Vec<String> = self.role_members[r]
            .iter()
            .filter(|&&e| !req.avoids(&self.execs[e].spec.id))
            .map(|&e| self.unavailable_reason(e, r))
            .collect();
        if reasons.is_empty() {
            vec!["no executor in the roster takes this role".to_string()]
        } else {
            reasons
        }
    }

    fn unavailable_reason(&self, e: usize, r: usize) -> String {
        let x = &self.execs[e];
        let id = &x.spec.id;
        if !x.has_role(r) {
            format!("{id} does not take {}", self.role_name(r))
        } else if let Some(excl) = &x.rt.exclusion {
            format!("{id} {}", Described(excl))
        } else if x.caps[r] == 0 {
            format!("{id} takes no {} slot (its cap is 0)", self.role_name(r))
        } else if x.draining {
            format!("{id} was removed by a reload")
        } else {
            format!("{id} unavailable")
        }
    }

    /// The seed's waiting report: "a busy; b until ...: usage limit (...)".
    fn waiting_report(&self, r: usize, avoid: &[String], pin: Option<&str>) -> String {
        const SHOWN: usize = 10;
        if let Some(pin) = pin {
            return match self.exec_index.get(pin) {
                None => format!("{pin} not in the roster"),
                Some(e) => self.executor_state(e, r),
            };
        }
        let members: Vec<usize> = self.role_members[r]
            .iter()
            .copied()
            .filter(|&e| !avoid.contains(&self.execs[e].spec.id))
            .collect();
        let mut parts: Vec<String> = members
            .iter()
            .take(SHOWN)
            .map(|&e| self.executor_state(e, r))
            .collect();
        if members.len() > SHOWN {
            parts.push(format!("and {} more", members.len() - SHOWN));
        }
        parts.join("; ")
    }

    fn executor_state(&self, e: usize, r: usize) -> String {
        let x = &self.execs[e];
        if x.draining {
            return format!("{} removed by a reload (draining)", x.spec.id);
        }
        if x.caps.get(r) == Some(&0) {
            return format!(
                "{} takes no {} slot (its cap is 0)",
                x.spec.id,
                self.role_name(r)
            );
        }
        match &x.rt.exclusion {
            Some(excl) => format!("{} {}", x.spec.id, Described(excl)),
            None => match &x.rt.pause {
                Some(p) if p.blocked => format!(
                    "{} paused creating machines until {}",
                    x.spec.id,
                    iso(p.until)
                ),
                _ => format!("{} busy", x.spec.id),
            },
        }
    }

    // ---- Exclusions -----------------------------------------------------------------

    /// The kind a failure report would get, with this document's signal table.
    pub fn classify(&self, failure: &Failure) -> Classification {
        classify(failure, &self.document.signals)
    }

    fn report(&mut self, executor: &str, failure: &Failure) {
        let Some(e) = self.exec_index.get(executor) else {
            return;
        };
        let now = self.now;
        let spec = &self.execs[e].spec;
        let kind = classify(failure, &self.document.signals).kind;
        let excl = if kind == FailureKind::ModelUnavailable {
            Some(self.new_excl(
                ExclusionKind::Run,
                format!(
                    "its model{} is unavailable ({})",
                    spec.model
                        .as_ref()
                        .map(|m| format!(" '{m}'"))
                        .unwrap_or_default(),
                    excerpt(&failure.message, 200)
                ),
                None,
            ))
        } else {
            match kind {
                FailureKind::UsageLimit => {
                    let until = failure
                        .reset_at
                        .filter(|t| *t > now)
                        .or(failure.retry_after_ms.map(|ms| now.saturating_add(ms)))
                        .filter(|t| *t > now)
                        .unwrap_or(now + spec.cooldown.usage_limit_ms);
                    Some(self.new_excl(
                        ExclusionKind::Until,
                        format!("usage limit ({})", excerpt(&failure.message, 160)),
                        Some(until),
                    ))
                }
                FailureKind::RateLimit => self.count_rate_limit(e, failure),
                FailureKind::Authentication => Some(self.new_excl(
                    ExclusionKind::Run,
                    format!("not signed in ({})", excerpt(&failure.message, 160)),
                    None,
                )),
                FailureKind::Outage => {
                    let reason =
                        format!("serving engine down ({})", excerpt(&failure.message, 160));
                    Some(self.exclusion_of_kind(e, ExclusionKind::Health, reason, None))
                }
                FailureKind::ModelUnavailable | FailureKind::Other => None,
            }
        };
        match excl {
            Some(excl) => {
                if kind == FailureKind::RateLimit {
                    self.execs[e].rt.rate_limits.clear();
                }
                self.exclude(e, excl);
            }
            None if kind == FailureKind::RateLimit => {}
            None => self.event(
                Level::Debug,
                "failureIgnored",
                format!(
                    "{executor} failed ({}); that does not take it out of the round",
                    excerpt(&failure.message, 160)
                ),
                vec![("executor", json!(executor))],
            ),
        }
    }

    /// Counts a rate limit in the sliding window; the exclusion it earns, if any.
    fn count_rate_limit(&mut self, e: usize, failure: &Failure) -> Option<Excl> {
        let now = self.now;
        let window = self.options.rate_limit_window_ms;
        let threshold = self.options.rate_limits_to_exclude.max(1) as usize;
        let limits = &mut self.execs[e].rt.rate_limits;
        while limits.front().is_some_and(|&t| t + window <= now) {
            limits.pop_front();
        }
        limits.push_back(now);
        let count = limits.len();
        let id = self.execs[e].spec.id.clone();
        if let Some(ms) = failure.retry_after_ms.filter(|ms| *ms > 0) {
            return Some(self.new_excl(
                ExclusionKind::Until,
                format!("rate limited; retry after {}", format_duration(ms)),
                Some(now.saturating_add(ms)),
            ));
        }
        if count >= threshold {
            let until = now + self.execs[e].spec.cooldown.rate_limit_ms;
            return Some(self.new_excl(
                ExclusionKind::Until,
                format!("{count} rate limits within {}", format_duration(window)),
                Some(until),
            ));
        }
        self.event(
            Level::Info,
            "rateLimited",
            format!(
                "{id} hit a rate limit ({count} of {threshold} within {})",
                format_duration(window)
            ),
            vec![("executor", json!(id)), ("count", json!(count))],
        );
        None
    }

    fn new_excl(&self, kind: ExclusionKind, reason: String, until: Option<u64>) -> Excl {
        Excl {
            kind,
            reason,
            until,
            since: self.now,
            then: None,
        }
    }

    /// An exclusion of `kind` on `e`; a health one becomes the outage cooldown when
    /// the executor has no health URL or the host cannot probe.
    fn exclusion_of_kind(
        &self,
        e: usize,
        kind: ExclusionKind,
        reason: String,
        until: Option<u64>,
    ) -> Excl {
        let spec = &self.execs[e].spec;
        if kind == ExclusionKind::Health && (spec.health.is_none() || !self.options.can_probe) {
            return self.new_excl(
                ExclusionKind::Until,
                reason,
                Some(self.now + spec.cooldown.outage_ms),
            );
        }
        let until = match kind {
            ExclusionKind::Run | ExclusionKind::Health => None,
            _ => until,
        };
        self.new_excl(kind, reason, until)
    }

    /// Applies an exclusion under the strength rules: `run` lasts the run; a manual
    /// pause ends only by resume or its own end; between timed ends the later wins;
    /// a weaker exclusion never replaces a stronger one but may take over after it.
    fn exclude(&mut self, e: usize, new: Excl) {
        let old = self.execs[e].rt.exclusion.clone();
        let merged = match &old {
            None => new,
            Some(old) => merge_exclusions(old.clone(), new),
        };
        if Some(&merged) == old.as_ref() {
            let id = self.execs[e].spec.id.clone();
            self.event(
                Level::Debug,
                "exclusionKept",
                format!(
                    "{id} stays out of the round {} (a weaker or earlier-ending exclusion does not shorten it)",
                    Described(&merged)
                ),
                vec![("executor", json!(id))],
            );
            return;
        }
        let id = self.execs[e].spec.id.clone();
        if let Some(old) = old.as_ref().filter(|old| {
            old.kind == merged.kind && old.reason == merged.reason && old.until == merged.until
        }) {
            // Only the timed exclusion waiting under it changed: say so, quietly.
            let then = merged.then.as_ref().map_or(0, |(t, _)| *t);
            self.event(
                Level::Info,
                "exclusionQueued",
                format!(
                    "{id} stays out of the round {}; then until {} ({})",
                    Described(old),
                    iso(then),
                    merged.then.as_ref().map_or("", |(_, r)| r.as_str())
                ),
                vec![("executor", json!(id)), ("thenUntil", json!(then))],
            );
            self.set_exclusion(e, Some(merged));
            return;
        }
        let mut fields = vec![
            ("executor", json!(id)),
            ("kind", json!(merged.kind)),
            ("reason", json!(merged.reason)),
        ];
        if let Some(until) = merged.until {
            fields.push(("until", json!(until)));
        }
        self.event(
            Level::Warn,
            "excluded",
            format!("{id} out of the round {}", Described(&merged)),
            fields,
        );
        self.set_exclusion(e, Some(merged));
    }

    /// Sets or clears `e`'s exclusion and keeps every index in step with it.
    fn set_exclusion(&mut self, e: usize, excl: Option<Excl>) {
        self.unready(e);
        self.probe_unwait(e);
        let old = self.execs[e].rt.exclusion.take();
        if let Some(end) = old.as_ref().and_then(Excl::end) {
            self.exclusion_ends.remove(&timer_key(end, e));
        }
        self.set_health(e, false);
        let was_run = old.as_ref().is_some_and(|x| x.kind == ExclusionKind::Run);
        let is_run = excl.as_ref().is_some_and(|x| x.kind == ExclusionKind::Run);
        if let Some(end) = excl.as_ref().and_then(Excl::end) {
            self.exclusion_ends.insert(timer_key(end, e), 0);
        }
        if excl
            .as_ref()
            .is_some_and(|x| x.kind == ExclusionKind::Health)
        {
            self.set_health(e, true);
            let was_health = old
                .as_ref()
                .is_some_and(|x| x.kind == ExclusionKind::Health);
            if !was_health {
                self.execs[e].rt.last_probe_at = None;
                self.execs[e].rt.probe_in_flight = false;
            }
        }
        let persisted = |x: &Option<Excl>| x.as_ref().is_some_and(|x| x.kind != ExclusionKind::Run);
        if persisted(&old) || persisted(&excl) {
            self.persist_touched.push(e);
        }
        let back = excl.is_none();
        self.execs[e].rt.exclusion = excl;
        self.probe_wait(e);
        self.ready_up(e);
        if was_run != is_run {
            let roles = self.execs[e].role_idx.clone();
            for &r in &roles {
                if self.execs[e].caps[r] > 0 && !self.execs[e].draining {
                    if is_run {
                        self.servable[r] -= 1;
                    } else {
                        self.servable[r] += 1;
                    }
                }
            }
            if is_run {
                self.recheck_exhaustion(&roles);
                let id = self.execs[e].spec.id.clone();
                let pinned: Vec<String> = sorted::get(&self.pin_queues, &id)
                    .map(|q| {
                        q.values()
                            .filter_map(|&s| self.requests.at(s))
                            .map(|q| q.id.to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                for id in pinned {
                    self.end_request(&id, Ending::Exhausted);
                }
            }
        }
        if back {
            self.dirty.push(e);
        }
    }

    /// An exclusion's time has come (or its health check answered): the timed one
    /// it shadowed takes over if still in the future, else the executor is back.
    fn end_exclusion(&mut self, e: usize, at: u64, answered: bool) {
        let Some(excl) = self.execs[e].rt.exclusion.clone() else {
            return;
        };
        let id = self.execs[e].spec.id.clone();
        match excl.then.clone().filter(|(end, _)| *end > at) {
            Some((end, reason)) => {
                let next = Excl {
                    kind: ExclusionKind::Until,
                    reason,
                    until: Some(end),
                    since: excl.since,
                    then: None,
                };
                let message = format!(
                    "{id}'s {} exclusion ended; it stays out of the round {}",
                    kind_name(excl.kind),
                    Described(&next)
                );
                self.set_exclusion(e, Some(next));
                self.event(
                    Level::Info,
                    "exclusionChanged",
                    message,
                    vec![("executor", json!(id))],
                );
            }
            None => {
                self.set_exclusion(e, None);
                let message = if answered {
                    format!("{id} answers its health check again; back in the round")
                } else {
                    format!("{id} back in the round")
                };
                self.event(Level::Info, "back", message, vec![("executor", json!(id))]);
            }
        }
    }

    fn resume(&mut self, executor: &str) {
        let Some(e) = self.exec_index.get(executor) else {
            return;
        };
        if self.execs[e].rt.exclusion.is_none() {
            return;
        }
        self.set_exclusion(e, None);
        self.event(
            Level::Info,
            "resumed",
            format!("{executor} resumed"),
            vec![("executor", json!(executor))],
        );
    }

    fn restore(&mut self, state: PersistedState) {
        let now = self.now;
        for x in state.exclusions {
            let Some(e) = self.exec_index.get(&x.id) else {
                continue; // another roster's entry, or an executor since removed
            };
            let expired = match x.kind {
                ExclusionKind::Run => true,
                ExclusionKind::Until => x.until.is_none_or(|t| t <= now),
                ExclusionKind::Manual => x.until.is_some_and(|t| t <= now),
                ExclusionKind::Health => false,
            };
            if expired {
                continue;
            }
            let excl = self.exclusion_of_kind(e, x.kind, x.reason, x.until);
            self.exclude(e, excl);
        }
        // What was just read is what the file holds: no write for a restore.
        self.last_persisted = self.persisted_aligned();
        self.persist_touched.clear();
        self.persist_all = false;
    }

    // ---- Health probes --------------------------------------------------------------

    /// `e`'s key in `probe_waits`, if it waits for a probe.
    fn probe_floor(&self, e: usize) -> Option<Key> {
        let x = &self.execs[e];
        if !self.health.get(e).copied().unwrap_or(false) || x.rt.probe_in_flight {
            return None;
        }
        let floor = match x.rt.last_probe_at {
            None => x.rt.exclusion.as_ref().map_or(self.now, |x| x.since),
            Some(at) => {
                at + self
                    .options
                    .health_probe_interval_ms
                    .min(self.options.idle_probe_interval_ms)
            }
        };
        Some(timer_key(floor, e))
    }

    /// Call before changing what `probe_floor` reads; `probe_wait` after.
    fn set_health(&mut self, e: usize, on: bool) {
        if self.health.len() <= e {
            self.health.resize(e + 1, false);
        }
        self.health[e] = on;
    }

    fn probe_unwait(&mut self, e: usize) {
        if let Some(key) = self.probe_floor(e) {
            self.probe_waits.remove(&key);
        }
    }

    fn probe_wait(&mut self, e: usize) {
        if let Some(key) = self.probe_floor(e) {
            self.probe_waits.insert(key, 0);
        }
    }

    fn probe_due(&self, e: usize) -> u64 {
        let x = &self.execs[e];
        let since = x.rt.exclusion.as_ref().map_or(self.now, |x| x.since);
        match x.rt.last_probe_at {
            None => since,
            Some(at) => {
                let interval = if self.demand(e) {
                    self.options.health_probe_interval_ms
                } else {
                    self.options.idle_probe_interval_ms
                };
                at + interval
            }
        }
    }

    /// Whether a waiting request could use `e` once it is back.
    fn demand(&self, e: usize) -> bool {
        let x = &self.execs[e];
        x.role_idx.iter().any(|&r| {
            self.role_queues[r].values().take(16).any(|&s| {
                self.requests
                    .at(s)
                    .is_some_and(|q| q.pin().is_none() && !q.avoids(&x.spec.id))
            })
        }) || sorted::contains_key(&self.pin_queues, &x.spec.id)
    }

    fn schedule_probes(&mut self) {
        let due: Vec<usize> = self
            .probe_waits
            .keys()
            .take_while(|k| k[0] <= self.now)
            .map(|k| k[1] as usize)
            .filter(|&e| self.probe_due(e) <= self.now)
            .collect();
        for e in due {
            let spec = &self.execs[e].spec;
            match (&spec.health, self.options.can_probe) {
                (Some(url), true) => {
                    let (id, url) = (spec.id.clone(), url.clone());
                    self.probe_unwait(e);
                    self.execs[e].rt.probe_in_flight = true;
                    self.outputs.push_back(Output::Probe { executor: id, url });
                }
                _ => {
                    // Nothing to probe: the outage cooldown decides, from now.
                    let reason = self.execs[e]
                        .rt
                        .exclusion
                        .as_ref()
                        .map(|x| x.reason.clone())
                        .unwrap_or_default();
                    let until = self.now + spec.cooldown.outage_ms;
                    let excl = self.new_excl(ExclusionKind::Until, reason, Some(until));
                    self.set_exclusion(e, Some(excl));
                }
            }
        }
    }

    fn probe_result(&mut self, executor: &str, up: bool) {
        let Some(e) = self.exec_index.get(executor) else {
            return;
        };
        let health = self.execs[e]
            .rt
            .exclusion
            .as_ref()
            .is_some_and(|x| x.kind == ExclusionKind::Health);
        if !health || !self.execs[e].rt.probe_in_flight {
            self.event(
                Level::Debug,
                "probeIgnored",
                format!("a probe result for {executor}, which awaits none, is ignored"),
                vec![("executor", json!(executor))],
            );
            return;
        }
        self.execs[e].rt.probe_in_flight = false;
        if up {
            self.end_exclusion(e, self.now, true);
        } else {
            self.execs[e].rt.last_probe_at = Some(self.now);
            self.probe_wait(e);
            self.event(
                Level::Debug,
                "probeDown",
                format!("{executor} does not answer its health check yet"),
                vec![("executor", json!(executor))],
            );
        }
    }

    // ---- Provisioning ---------------------------------------------------------------

    fn machine_created(&mut self, id: &str, hold: Value) {
        if let Some(executor) = sorted::remove(&mut self.abandoned, id) {
            self.outputs.push_back(Output::DeleteMachine {
                executor: executor.clone(),
                hold,
            });
            self.event(
                Level::Info,
                "machineDiscarded",
                format!(
                    "the request stopped waiting while its machine was created on {executor}; the machine is deleted"
                ),
                vec![("request", json!(id)), ("executor", json!(executor))],
            );
            return;
        }
        // Only a request whose machine is being created: it is in no queue.
        let Some(Creating { executor, passed }) = self
            .requests
            .get(id)
            .and_then(|q| q.creating.as_deref())
            .cloned()
        else {
            return;
        };
        self.dequeue(id);
        let Some(req) = self.requests.remove(id) else {
            return;
        };
        if let Some(e) = self.exec_index.get(&executor) {
            if self.execs[e].rt.pause.is_some() {
                self.unready(e);
                if let Some(p) = self.execs[e].rt.pause.take() {
                    self.pause_ends.remove(&timer_key(p.until, e));
                }
                self.ready_up(e);
                self.dirty.push(e);
            }
        }
        self.open_lease(req, executor, Some(hold), passed);
    }

    fn machine_failed(&mut self, id: &str, message: &str) {
        let executor = match sorted::remove(&mut self.abandoned, id) {
            Some(executor) => executor,
            None => {
                let Some(req) = self.requests.get_mut(id) else {
                    return;
                };
                let Some(creating) = req.creating.take() else {
                    return;
                };
                let executor = creating.executor;
                // Back in its place in the queue: its key is unchanged.
                let role = req.role;
                let r = self.role_at.get(role as usize).copied().flatten();
                if let Some(e) = self.exec_index.get(&executor) {
                    self.free_slot(e, r);
                    self.leave_if_drained(e);
                }
                // The grant pass puts it back in its place, or grants it elsewhere.
                self.retry.push(id.to_string());
                executor
            }
        };
        let Some(e) = self.exec_index.get(&executor) else {
            return;
        };
        self.unready(e);
        let failures = self.execs[e].rt.pause.as_ref().map_or(0, |p| p.failures) + 1;
        let doubling = 1u64 << (failures - 1).min(20);
        let delay = self
            .options
            .provision_first_pause_ms
            .saturating_mul(doubling)
            .min(self.options.provision_max_pause_ms);
        if let Some(p) = self.execs[e].rt.pause.take() {
            self.pause_ends.remove(&timer_key(p.until, e));
        }
        let until = self.now + delay;
        self.execs[e].rt.pause = Some(Pause {
            failures,
            until,
            message: message.to_string(),
            blocked: true,
        });
        self.pause_ends.insert(timer_key(until, e), 0);
        self.ready_up(e);
        self.event(
            Level::Warn,
            "provisionPaused",
            format!(
                "{executor} could not create a machine ({}); its requests keep waiting, and it tries again after {} (failure {failures})",
                excerpt(message, 160),
                format_duration(delay)
            ),
            vec![
                ("executor", json!(executor)),
                ("failures", json!(failures)),
                ("retryAt", json!(until)),
            ],
        );
    }

    fn end_pause(&mut self, e: usize) {
        self.unready(e);
        let Some(p) = self.execs[e].rt.pause.as_mut() else {
            return;
        };
        p.blocked = false;
        let failures = p.failures;
        self.ready_up(e);
        self.dirty.push(e);
        let id = self.execs[e].spec.id.clone();
        self.event(
            Level::Info,
            "provisionResumed",
            format!("{id}'s pause ended; it creates machines again"),
            vec![("executor", json!(id)), ("failures", json!(failures))],
        );
    }

    // ---- Reload ---------------------------------------------------------------------

    fn reload(&mut self, document: Document) {
        if let Some(pending) = self.pending_reload.take() {
            self.event(
                Level::Info,
                "reloadSuperseded",
                format!(
                    "a newer reload replaces the one waiting for preflights since {}",
                    iso(pending.since)
                ),
                vec![],
            );
        }
        let needs = self.needs_preflight(&document);
        if self.options.preflight_reloads && !needs.is_empty() {
            for id in &needs {
                self.outputs.push_back(Output::Preflight {
                    executor: id.clone(),
                });
            }
            self.event(
                Level::Info,
                "preflighting",
                format!(
                    "preflighting {} before the reload applies",
                    needs.join(", ")
                ),
                vec![("executors", json!(needs))],
            );
            self.pending_reload = Some(PendingReload {
                document,
                awaiting: needs,
                since: self.now,
            });
            return;
        }
        self.apply_reload(document);
    }

    /// Executors a reload adds or grows.
    fn needs_preflight(&self, document: &Document) -> StrSet {
        sorted::set_from(
            document
                .executors
                .iter()
                .filter(|spec| match self.exec_index.get(&spec.id) {
                    Some(e) => self.execs[e].draining || spec.slots > self.execs[e].spec.slots,
                    None => true,
                })
                .map(|spec| spec.id.clone()),
        )
    }

    fn preflight_result(&mut self, executor: String, ok: bool, error: Option<String>) {
        sorted::insert(
            &mut self.preflights,
            executor.clone(),
            PreflightRecord {
                at: self.now,
                ok,
                error: error.clone(),
            },
        );
        let Some(pending) = self.pending_reload.as_mut() else {
            return;
        };
        if !sorted::set_remove(&mut pending.awaiting, &executor) {
            return;
        }
        if !ok {
            self.pending_reload = None;
            let why = error.unwrap_or_else(|| "no reason given".into());
            self.event(
                Level::Warn,
                "reloadRefused",
                format!(
                    "the reload is refused: the preflight of {executor} failed ({why}); the running roster stays as it was"
                ),
                vec![("executor", json!(executor)), ("error", json!(why))],
            );
            return;
        }
        if pending.awaiting.is_empty() {
            if let Some(pending) = self.pending_reload.take() {
                self.apply_reload(pending.document);
            }
        }
    }

    fn apply_reload(&mut self, document: Document) {
        let roles = document.roles.clone();
        // The running executors, taken out by index as the new document names them
        // (`exec_index` still indexes them).
        let mut old: Vec<Option<Exec>> = std::mem::take(&mut self.execs)
            .into_iter()
            .map(Some)
            .collect();
        let running = |x: &Exec| x.busy;
        let mut execs = Vec::new();
        let mut events = Vec::new();
        for spec in &document.executors {
            sorted::set_insert(&mut self.known_ids, spec.id.clone());
            let prev = self
                .exec_index
                .get(&spec.id)
                .and_then(|e| old.get_mut(e))
                .and_then(Option::take);
            match prev {
                Some(prev) => {
                    if prev.draining {
                        events.push((
                            "added",
                            format!(
                                "{} declared again by a reload; it takes leases now",
                                spec.id
                            ),
                        ));
                    } else if prev.spec.slots != spec.slots {
                        events.push((
                            "resized",
                            format!(
                                "{} resized by a reload from {} to {} slots; running leases continue ({} running)",
                                spec.id,
                                prev.spec.slots,
                                spec.slots,
                                running(&prev)
                            ),
                        ));
                    }
                    let mut x = Exec::new(spec.clone(), prev.rt, &roles);
                    if x.spec.health.is_none()
                        && x.rt.exclusion.as_ref().map(|x| x.kind) == Some(ExclusionKind::Health)
                    {
                        // Its health URL is gone: the outage cooldown decides, from now.
                        if let Some(excl) = x.rt.exclusion.as_mut() {
                            excl.kind = ExclusionKind::Until;
                            excl.until = Some(self.now + spec.cooldown.outage_ms);
                        }
                        x.rt.probe_in_flight = false;
                        x.rt.last_probe_at = None;
                        self.persist_all = true;
                    }
                    execs.push(x);
                }
                None => {
                    events.push((
                        "added",
                        format!("{} added by a reload; it takes leases now", spec.id),
                    ));
                    execs.push(Exec::new(spec.clone(), Runtime::default(), &roles));
                }
            }
        }
        // The executors the new document leaves out, in id order.
        let mut left: Vec<Exec> = old.into_iter().flatten().collect();
        left.sort_unstable_by(|a, b| a.spec.id.cmp(&b.spec.id));
        for mut prev in left {
            let id = prev.spec.id.clone();
            if prev.rt.exclusion.take().is_some() {
                self.persist_all = true;
            }
            if running(&prev) > 0 {
                events.push((
                    "removed",
                    format!(
                        "{id} removed by a reload; it takes no new lease, and leaves when its running leases end ({} running)",
                        running(&prev)
                    ),
                ));
                prev.draining = true;
                execs.push(prev);
            } else {
                events.push((
                    "removed",
                    format!("{id} removed by a reload; it runs no lease, so it leaves now"),
                ));
            }
        }
        self.document = document;
        self.execs = execs;
        // Executor indexes moved: the next persist compares every entry.
        self.persist_all = true;
        for x in &mut self.execs {
            if x.draining {
                x.rt.pause = None;
            }
        }
        self.rebuild();
        for (name, message) in events {
            self.event(Level::Info, name, message, vec![]);
        }
        self.event(
            Level::Info,
            "reloaded",
            format!(
                "the roster reloaded: {}",
                plural(
                    self.document.executors.len() as u32,
                    "executor",
                    "executors"
                )
            ),
            vec![],
        );
        // Requests whose role is gone, and those nothing can serve any more, end.
        let orphaned: Vec<String> = self
            .requests
            .values()
            .filter(|q| q.waiting() && self.req_role(q).is_none())
            .map(|q| q.id.to_string())
            .collect();
        for id in orphaned {
            self.end_request(&id, Ending::Exhausted);
        }
        let all: Vec<usize> = (0..roles.len()).collect();
        self.recheck_exhaustion(&all);
        self.dirty = (0..self.execs.len()).collect();
    }

    // ---- Persistence ----------------------------------------------------------------

    /// The lasting exclusions of the declared executors. A draining executor's is
    /// left out: it leaves this run, and a restart would not know it.
    fn persisted_exclusions(&self) -> Vec<Exclusion> {
        (0..self.execs.len())
            .filter_map(|e| self.persisted_entry(e))
            .collect()
    }

    /// The lasting entry of executor `e` as the state file would hold it.
    fn persisted_entry(&self, e: usize) -> Option<Exclusion> {
        let x = self.execs.get(e)?;
        if x.draining {
            return None;
        }
        let excl = x.rt.exclusion.as_ref()?;
        (excl.kind != ExclusionKind::Run).then(|| Exclusion {
            id: x.spec.id.clone(),
            reason: excl.reason.clone(),
            kind: excl.kind,
            until: excl.end(),
        })
    }

    /// Every executor's lasting entry, by index.
    fn persisted_aligned(&self) -> Vec<Option<Exclusion>> {
        (0..self.execs.len())
            .map(|e| self.persisted_entry(e))
            .collect()
    }

    /// One persist per input at most, carrying only the entries that changed: its
    /// `ids` are the executors whose entry differs from what the file holds, its
    /// exclusions their new entries (an id without one is cleared). In a failure
    /// storm on a large roster this costs what the touched executors cost, not the
    /// whole roster.
    fn flush_persist(&mut self) {
        if self.persist_touched.is_empty() && !self.persist_all {
            return;
        }
        let mut ids = Vec::new();
        let mut exclusions = Vec::new();
        if std::mem::take(&mut self.persist_all) {
            self.persist_touched.clear();
            // Executor indexes may have moved since the entries were aligned: read
            // them by the ids they carry (one entry per executor: ids unique).
            let mut last: StrMap<Exclusion> = std::mem::take(&mut self.last_persisted)
                .into_iter()
                .flatten()
                .map(|x| (x.id.clone(), x))
                .collect();
            last.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            let current = self.persisted_exclusions().into_iter().map(|x| x.id);
            let mut candidates: Vec<String> = last
                .iter()
                .map(|(id, _)| id.clone())
                .chain(current)
                .collect();
            candidates.sort_unstable();
            candidates.dedup();
            for id in candidates {
                let current = self
                    .exec_index
                    .get(&id)
                    .and_then(|e| self.persisted_entry(e));
                if current.as_ref() == sorted::get(&last, &id) {
                    continue;
                }
                if let Some(entry) = current {
                    exclusions.push(entry);
                }
                ids.push(id);
            }
            // Every entry is now what the file holds.
            self.last_persisted = self.persisted_aligned();
        } else {
            // Indexes are stable within an input (a reload or a departure sets
            // `persist_all`); in id order, as the full comparison gives.
            let mut touched = std::mem::take(&mut self.persist_touched);
            touched.sort_unstable_by(|&a, &b| self.execs[a].spec.id.cmp(&self.execs[b].spec.id));
            touched.dedup();
            if self.last_persisted.len() < self.execs.len() {
                self.last_persisted.resize(self.execs.len(), None);
            }
            for &e in &touched {
                let current = self.persisted_entry(e);
                let last = &mut self.last_persisted[e];
                if current == *last {
                    continue;
                }
                if let Some(now) = &current {
                    exclusions.push(now.clone());
                }
                *last = current;
                ids.push(self.execs[e].spec.id.clone());
            }
            // Keep the allocation for the next input.
            touched.clear();
            self.persist_touched = touched;
        }
        if ids.is_empty() {
            return;
        }
        self.outputs.push_back(Output::Persist {
            ids,
            state: PersistedState {
                version: STATE_VERSION,
                exclusions,
            },
        });
    }

    /// The part of the state a persist decision carries (for restore tests).
    pub fn persisted_state(&self) -> PersistedState {
        PersistedState {
            version: STATE_VERSION,
            exclusions: self.persisted_exclusions(),
        }
    }

    // ---- Events ---------------------------------------------------------------------

    fn event(
        &mut self,
        level: Level,
        name: &str,
        message: String,
        fields: Vec<(&'static str, Value)>,
    ) {
        if level < self.options.min_event_level {
            return;
        }
        self.outputs.push_back(Output::Event {
            level,
            name: name.to_string(),
            message,
            fields: crate::protocol::Fields::from_static(fields),
        });
    }

    fn role_name(&self, r: usize) -> &str {
        self.document.roles.get(r).map_or("?", String::as_str)
    }

    // ---- Queries (change nothing) ---------------------------------------------------

    /// Free slots for `role` now, across executors in the round (not excluded, not
    /// paused, not draining).
    pub fn available(&self, role: &str) -> Result<u32, Error> {
        let r = self.role_index(role)?;
        Ok(self.role_members[r]
            .iter()
            .map(|&e| {
                let x = &self.execs[e];
                if x.draining || x.rt.exclusion.is_some() || x.blocked() {
                    return 0;
                }
                let total = x.spec.slots.saturating_sub(x.busy);
                let for_role = x.caps[r].saturating_sub(x.busy_by_role[r]);
                total.min(for_role)
            })
            .sum())
    }

    /// Configured slots for `role` (role caps applied).
    pub fn slots(&self, role: &str) -> Result<u32, Error> {
        let r = self.role_index(role)?;
        Ok(self.role_members[r]
            .iter()
            .filter(|&&e| !self.execs[e].draining)
            .map(|&e| self.execs[e].caps[r])
            .sum())
    }

    /// Whether an executor outside `avoid` has the role and is not out for the run.
    pub fn can_ever_serve(&self, role: &str, avoid: &[String]) -> Result<bool, Error> {
        let r = self.role_index(role)?;
        Ok(self.can_serve(r, avoid, None))
    }

    pub fn snapshot(&self) -> Snapshot {
        let roles = &self.document.roles;
        // Each executor's leases, in lease order (by executor index; leases on an
        // executor the roster does not have are listed nowhere).
        let mut leases_of: Vec<Vec<LeaseStatus>> = vec![Vec::new(); self.execs.len()];
        for (id, lease) in self.leases.iter() {
            let Some(list) = self
                .exec_index
                .get(&lease.executor)
                .and_then(|e| leases_of.get_mut(e))
            else {
                continue;
            };
            list.push(LeaseStatus {
                lease: id,
                request: lease.request.clone(),
                role: lease.role.clone(),
                label: lease.label.clone(),
                hold: lease.hold.clone(),
                since: lease.since,
                occupied: lease.occupied,
            });
        }
        let executors = self
            .execs
            .iter()
            .enumerate()
            .map(|(e, x)| ExecutorStatus {
                id: x.spec.id.clone(),
                harness: x.spec.harness.clone(),
                model: x.spec.model.clone(),
                roles: x.spec.roles.clone(),
                slots: if x.draining { 0 } else { x.spec.slots },
                role_caps: x
                    .role_idx
                    .iter()
                    .map(|&r| (roles[r].clone(), x.caps[r]))
                    .collect(),
                priority: x
                    .role_idx
                    .iter()
                    .map(|&r| (roles[r].clone(), x.prios[r].0))
                    .collect(),
                busy: x.busy,
                busy_by_role: x
                    .role_idx
                    .iter()
                    .map(|&r| (roles[r].clone(), x.busy_by_role[r]))
                    .collect(),
                exclusion: x.rt.exclusion.as_ref().map(|excl| ExclusionStatus {
                    kind: excl.kind,
                    reason: excl.reason.clone(),
                    until: excl.end(),
                    since: excl.since,
                    next_probe_at: (excl.kind == ExclusionKind::Health && self.options.can_probe)
                        .then(|| self.probe_due(e)),
                    then_until: excl.then.as_ref().map(|(t, _)| *t),
                    description: describe(excl),
                }),
                pause: x.rt.pause.as_ref().map(|p| PauseStatus {
                    failures: p.failures,
                    until: p.until,
                    message: p.message.clone(),
                    blocked: p.blocked,
                }),
                draining: x.draining,
                provision: x.spec.provision,
                leases: std::mem::take(&mut leases_of[e]),
                preflight: sorted::get(&self.preflights, &x.spec.id).cloned(),
                probe_in_flight: x.rt.probe_in_flight,
                recent_rate_limits: x
                    .rt
                    .rate_limits
                    .iter()
                    .filter(|&&t| t + self.options.rate_limit_window_ms > self.now)
                    .count() as u32,
            })
            .collect();
        let mut queue: Vec<(OrderKey, usize, QueuedRequest)> = Vec::new();
        for (r, entries) in self.role_queues.iter().enumerate() {
            for &s in entries.values() {
                let Some(q) = self.requests.at(s) else {
                    continue;
                };
                queue.push((
                    q.key,
                    r,
                    QueuedRequest {
                        request: q.id.to_string(),
                        role: roles[r].clone(),
                        rank: q.rank(),
                        event_time: q.event_time(),
                        label: q.label().map(str::to_string),
                        pin: q.pin().map(str::to_string),
                        avoid: q.avoid().to_vec(),
                        prefer: q.prefer().map(str::to_string),
                        deadline: q.deadline(),
                        ahead: 0,
                        waiting_since: q.since,
                    },
                ));
            }
        }
        queue.sort_by_key(|a| a.0);
        // In lease order, with a running count per role: ahead of each request are the
        // earlier ones of the roles that compete with its own.
        let mut seen = vec![0u32; roles.len()];
        for (_, r, q) in &mut queue {
            q.ahead = self
                .role_overlap
                .get(*r)
                .map_or(seen[*r], |roles| roles.iter().map(|&o| seen[o]).sum());
            seen[*r] += 1;
        }
        let creating = self
            .requests
            .values()
            .filter_map(|q| {
                q.creating.as_ref().map(|c| CreatingRequest {
                    request: q.id.to_string(),
                    executor: c.executor.clone(),
                    role: self.req_role_name(q).to_string(),
                    since: q.since,
                })
            })
            .collect();
        Snapshot {
            now: self.now,
            roles: roles.clone(),
            executors,
            queue: queue.into_iter().map(|(_, _, q)| q).collect(),
            creating,
            pending_reload: self.pending_reload.as_ref().map(|p| PendingReloadStatus {
                since: p.since,
                awaiting: p.awaiting.clone(),
            }),
            wake_at: self.poll_timeout(),
        }
    }

    /// Why each executor can or cannot take a request (waiting or hypothetical) now.
    pub fn explain(&self, request: &ExplainRequest) -> Result<Explanation, Error> {
        let (role, avoid, prefer, pin) = match &request.request {
            Some(id) => {
                let q = self
                    .requests
                    .get(id)
                    .ok_or_else(|| Error::UnknownRequest { id: id.clone() })?;
                (
                    self.req_role_name(q).to_string(),
                    q.avoid().to_vec(),
                    q.prefer().map(str::to_string),
                    q.pin().map(str::to_string),
                )
            }
            None => (
                request.role.clone(),
                request.avoid.clone(),
                request.prefer.clone(),
                request.pin.clone(),
            ),
        };
        let r = self.role_index(&role)?;
        let executors = self
            .execs
            .iter()
            .map(|x| {
                let mut reasons = Vec::new();
                let id = &x.spec.id;
                if !x.has_role(r) {
                    reasons.push(format!("lacks the role {role}"));
                }
                if pin.as_ref().is_some_and(|p| p != id) {
                    reasons.push(format!(
                        "the request is pinned to {}",
                        pin.clone().unwrap_or_default()
                    ));
                }
                if avoid.contains(id) {
                    reasons.push("avoided by the request".to_string());
                }
                if x.draining {
                    reasons.push("removed by a reload; draining".to_string());
                }
                if let Some(excl) = &x.rt.exclusion {
                    reasons.push(format!("out of the round {}", Described(excl)));
                }
                if pin.is_none() && x.spec.provision {
                    if let Some(p) = x.rt.pause.as_ref().filter(|p| p.blocked) {
                        reasons.push(format!(
                            "paused creating machines until {} after {} failure(s)",
                            iso(p.until),
                            p.failures
                        ));
                    }
                }
                if x.has_role(r) && !x.draining {
                    if x.busy >= x.spec.slots {
                        reasons.push(format!("busy ({} of {} slots)", x.busy, x.spec.slots));
                    } else if x.busy_by_role[r] >= x.caps[r] {
                        reasons.push(format!(
                            "role cap reached ({role} {} of {})",
                            x.busy_by_role[r], x.caps[r]
                        ));
                    }
                }
                ExecutorExplanation {
                    id: id.clone(),
                    ok: reasons.is_empty(),
                    reasons,
                    priority: x.has_role(r).then_some(x.prios[r].0),
                }
            })
            .collect::<Vec<_>>();
        let hypothetical = Req {
            id: Box::from(""),
            key: order_key((0, 0, 0, 0)),
            since: self.now,
            role: self.role_ids.get(r).copied().unwrap_or(0),
            announced: true,
            try_only: false,
            has_event_time: false,
            label: None,
            extra: req_extra(avoid.clone(), prefer, pin.clone(), None),
            creating: None,
        };
        let pick = match &pin {
            Some(p) => self
                .exec_index
                .get(p)
                .filter(|&e| self.pin_ready(e, r) && !avoid.contains(p)),
            None => self.pick(&hypothetical, r),
        }
        .map(|e| self.execs[e].spec.id.clone());
        let mut explanation = Explanation {
            role,
            pick,
            can_ever_serve: self.can_serve(r, &avoid, pin.as_deref()),
            executors,
        };
        if let Some(p) = &pin {
            if !self.exec_index.contains_key(p) {
                explanation.executors.push(ExecutorExplanation {
                    id: p.clone(),
                    ok: false,
                    reasons: vec!["not in the roster (the pinned request waits for a reload that declares it)".into()],
                    priority: None,
                });
            }
        }
        Ok(explanation)
    }

    /// A dry run of a reload: which executors drain, which waiters would be granted
    /// or exhausted. Changes nothing.
    pub fn plan(&self, document: &Value) -> Result<Plan, Error> {
        let parsed = Document::from_json(document, self.options.kinds.as_deref())
            .map_err(|violations| Error::InvalidDocument { violations })?;
        let mut plan = Plan {
            added: Vec::new(),
            draining: Vec::new(),
            leaving: Vec::new(),
            resized: Vec::new(),
            changed: Vec::new(),
            granted: Vec::new(),
            exhausted: Vec::new(),
            preflight: if self.options.preflight_reloads {
                self.needs_preflight(&parsed).into_iter().collect()
            } else {
                Vec::new()
            },
        };
        for spec in &parsed.executors {
            match self.exec_index.get(&spec.id) {
                None => plan.added.push(spec.id.clone()),
                Some(e) => {
                    let x = &self.execs[e];
                    if x.draining {
                        plan.added.push(spec.id.clone());
                    } else if x.spec.slots != spec.slots {
                        plan.resized.push(Resize {
                            id: spec.id.clone(),
                            from: x.spec.slots,
                            to: spec.slots,
                            running: x.busy,
                        });
                    } else if x.spec.roles != spec.roles
                        || x.spec.role_caps != spec.role_caps
                        || x.spec.priority != spec.priority
                        || x.spec.raw != spec.raw
                    {
                        plan.changed.push(spec.id.clone());
                    }
                }
            }
        }
        for x in &self.execs {
            if parsed.executor(&x.spec.id).is_none() && !x.draining {
                if x.busy > 0 {
                    plan.draining.push(x.spec.id.clone());
                } else {
                    plan.leaving.push(x.spec.id.clone());
                }
            }
        }
        let mut trial = self.clone();
        trial.outputs.clear();
        trial.apply_reload(parsed);
        trial.grant_pass();
        for output in trial.outputs {
            match output {
                Output::Granted {
                    request, executor, ..
                }
                | Output::CreateMachine { request, executor } => {
                    plan.granted.push(PlannedGrant { request, executor })
                }
                Output::Exhausted { request, .. } => plan.exhausted.push(request),
                _ => {}
            }
        }
        Ok(plan)
    }

    // ---- Live swap --------------------------------------------------------------------

    /// Everything, as JSON, for a live swap to another module version. Drain the
    /// outputs first: pending outputs are carried but a host should not rely on it.
    pub fn export_state(&self) -> Value {
        crate::write::to_json_value(&self.exported())
    }

    /// The exported state's text as the hand-written writer (what hosts get) and as
    /// serde_json over the derived `Serialize` write it: the tests compare the two.
    #[doc(hidden)]
    pub fn export_texts(&self) -> (String, String) {
        let exported = self.exported();
        (
            crate::write::to_json_text(&exported),
            serde_json::to_string(&exported).unwrap_or_default(),
        )
    }

    fn exported(&self) -> Exported {
        Exported {
            version: EXPORT_VERSION,
            options: self.options.clone(),
            document: self.document.raw.clone(),
            draining: self
                .execs
                .iter()
                .filter(|x| x.draining)
                .map(|x| Value::Object(x.spec.raw.clone()))
                .collect(),
            runtime: {
                let mut runtime: Vec<(String, Runtime)> = self
                    .execs
                    .iter()
                    .map(|x| (x.spec.id.clone(), x.rt.clone()))
                    .collect();
                runtime.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                runtime
            },
            now: self.now,
            requests: self
                .requests
                .values()
                .map(|q| self.export_request(q))
                .collect(),
            leases: self.leases.to_pairs(),
            abandoned: self.abandoned.clone(),
            next_lease: self.next_lease,
            next_arrival: self.next_arrival,
            lease_clock: self.lease_clock,
            last_persisted: {
                let mut entries: Vec<Exclusion> =
                    self.last_persisted.iter().flatten().cloned().collect();
                entries.sort_unstable_by(|a, b| a.id.cmp(&b.id));
                entries
            },
            known_ids: self.known_ids.clone(),
            pending_reload: self.pending_reload.as_ref().map(|p| ExportedReload {
                document: p.document.raw.clone(),
                awaiting: p.awaiting.clone(),
                since: p.since,
            }),
            preflights: self.preflights.clone(),
            outputs: self.outputs.iter().cloned().collect(),
        }
    }

    /// Rebuilds a policy from `export_state` (of this or an earlier version).
    pub fn import_state(state: &Value) -> Result<Policy, Error> {
        let bad = |message: String| Error::InvalidState { message };
        let exported = Exported::from_json(state).map_err(bad)?;
        let mut policy = Policy::new(&exported.document, exported.options.clone())
            .map_err(|e| bad(format!("its document: {e}")))?;
        if !exported.draining.is_empty() {
            // A draining executor was declared under an earlier role list: read it
            // with the roles it names too (it keeps only the current ones, as it
            // did before the export).
            let mut roles = policy.document.roles.clone();
            for raw in &exported.draining {
                let named = raw
                    .get("roles")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .chain(
                        ["roleSlots", "priority"]
                            .into_iter()
                            .filter_map(|field| raw.get(field).and_then(Value::as_object))
                            .flat_map(|o| o.keys().map(String::as_str))
                            .filter(|k| *k != "default"),
                    );
                for role in named {
                    if !roles.iter().any(|r| r == role) {
                        roles.push(role.to_string());
                    }
                }
            }
            let mut doc = serde_json::Map::new();
            doc.insert("roles".into(), json!(roles));
            doc.insert("executors".into(), Value::Array(exported.draining.clone()));
            let drained = Document::from_json(&Value::Object(doc), None)
                .map_err(|v| bad(format!("its draining executors: {}", join_violations(&v))))?;
            for spec in drained.executors {
                let mut x = Exec::new(spec, Runtime::default(), &policy.document.roles);
                x.draining = true;
                policy.execs.push(x);
            }
        }
        for x in &mut policy.execs {
            if let Ok(i) = exported
                .runtime
                .binary_search_by(|(id, _)| id.as_str().cmp(&x.spec.id))
            {
                x.rt = exported.runtime[i].1.clone();
            }
        }
        policy.now = exported.now;
        for q in exported.requests {
            // Rank and event time are read back from the key: they must agree.
            let rank = (q.key.0 == 0).then_some(q.key.1);
            if q.rank != rank || q.event_time.is_some_and(|t| t != q.key.2) {
                return Err(bad(format!(
                    "request '{}': its rank or event time differs from its key",
                    q.id
                )));
            }
            let req = Req {
                role: policy.intern_role(&q.role),
                id: q.id.into_boxed_str(),
                key: order_key(q.key),
                since: q.since,
                announced: q.announced,
                try_only: q.try_only,
                has_event_time: q.event_time.is_some(),
                label: q.label.map(String::into_boxed_str),
                extra: req_extra(q.avoid, q.prefer, q.pin, q.deadline),
                creating: match q.state {
                    ReqState::Waiting => None,
                    ReqState::Creating { executor, passed } => {
                        Some(Box::new(Creating { executor, passed }))
                    }
                },
            };
            // A repeated id: the last one stands (as a map built from the list).
            policy.requests.remove(&req.id);
            policy.requests.insert(req);
        }
        policy.leases = Leases::from_pairs(exported.leases);
        policy.abandoned = exported.abandoned;
        policy.next_lease = exported.next_lease;
        policy.next_arrival = exported.next_arrival;
        policy.lease_clock = exported.lease_clock;
        policy.known_ids = exported.known_ids;
        policy.preflights = exported.preflights;
        policy.outputs = exported.outputs.into();
        if let Some(p) = exported.pending_reload {
            let document = Document::from_json(&p.document, policy.options.kinds.as_deref())
                .map_err(|v| bad(format!("its pending reload: {}", join_violations(&v))))?;
            policy.pending_reload = Some(PendingReload {
                document,
                awaiting: p.awaiting,
                since: p.since,
            });
        }
        policy.rebuild();
        // By executor index; an entry for an id the roster lacks stays beyond them
        // (the invariants refuse it, as they refused it in a map by id).
        let mut last_persisted = vec![None; policy.execs.len()];
        for x in exported.last_persisted {
            match policy.exec_index.get(&x.id) {
                Some(e) => last_persisted[e] = Some(x),
                None => last_persisted.push(Some(x)),
            }
        }
        policy.last_persisted = last_persisted;
        policy.check_invariants();
        Ok(policy)
    }

    /// A request in the shape `export_state` writes.
    fn export_request(&self, q: &Req) -> ExportedRequest {
        ExportedRequest {
            id: q.id.to_string(),
            role: self.req_role_name(q).to_string(),
            avoid: q.avoid().to_vec(),
            prefer: q.prefer().map(str::to_string),
            pin: q.pin().map(str::to_string),
            rank: q.rank(),
            event_time: q.event_time(),
            label: q.label().map(str::to_string),
            deadline: q.deadline(),
            key: key_parts(&q.key),
            since: q.since,
            announced: q.announced,
            try_only: q.try_only,
            state: match &q.creating {
                None => ReqState::Waiting,
                Some(c) => ReqState::Creating {
                    executor: c.executor.clone(),
                    passed: c.passed,
                },
            },
        }
    }

    // ---- Invariants -----------------------------------------------------------------

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

#[derive(Debug, Clone, Copy)]
enum Ending {
    Cancelled,
    TimedOut,
    Exhausted,
}

const EXPORT_VERSION: u32 = 1;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Exported {
    version: u32,
    options: Options,
    document: Value,
    draining: Vec<Value>,
    /// By executor id, in id order (written as an object).
    #[serde(serialize_with = "as_map")]
    runtime: Vec<(String, Runtime)>,
    now: u64,
    requests: Vec<ExportedRequest>,
    /// By lease id, in id order (written as an object).
    #[serde(serialize_with = "as_map")]
    leases: Vec<(u64, Lease)>,
    #[serde(serialize_with = "as_map")]
    abandoned: StrMap<String>,
    next_lease: u64,
    next_arrival: u64,
    lease_clock: u64,
    last_persisted: Vec<Exclusion>,
    known_ids: StrSet,
    pending_reload: Option<ExportedReload>,
    #[serde(serialize_with = "as_map")]
    preflights: StrMap<PreflightRecord>,
    outputs: Vec<Output>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExportedReload {
    document: Value,
    awaiting: StrSet,
    since: u64,
}

// ---- Writing an export ------------------------------------------------------------
//
// By hand (`write.rs`), the text of the derived `Serialize` byte for byte (the derives
// stay as the tests' reference).

impl WriteJson for Exported {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("version", &self.version)
            .field("options", &self.options)
            .field("document", &self.document)
            .field("draining", &self.draining)
            .pairs("runtime", &self.runtime)
            .field("now", &self.now)
            .field("requests", &self.requests)
            .pairs("leases", &self.leases)
            .pairs("abandoned", &self.abandoned)
            .field("nextLease", &self.next_lease)
            .field("nextArrival", &self.next_arrival)
            .field("leaseClock", &self.lease_clock)
            .field("lastPersisted", &self.last_persisted)
            .field("knownIds", &self.known_ids)
            .field("pendingReload", &self.pending_reload)
            .pairs("preflights", &self.preflights)
            .field("outputs", &self.outputs)
            .end();
    }
}

impl WriteJson for ExportedReload {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("document", &self.document)
            .field("awaiting", &self.awaiting)
            .field("since", &self.since)
            .end();
    }
}

impl WriteJson for ExportedRequest {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("id", &self.id)
            .field("role", &self.role)
            .field("avoid", &self.avoid)
            .field("prefer", &self.prefer)
            .field("pin", &self.pin)
            .field("rank", &self.rank)
            .field("eventTime", &self.event_time)
            .field("label", &self.label)
            .field("deadline", &self.deadline)
            .field("key", &self.key)
            .field("since", &self.since)
            .field("announced", &self.announced)
            .field("tryOnly", &self.try_only)
            .field("state", &self.state)
            .end();
    }
}

impl WriteJson for ReqState {
    fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            ReqState::Waiting => out.extend_from_slice(b"\"waiting\""),
            ReqState::Creating { executor, passed } => {
                out.extend_from_slice(b"{\"creating\":");
                Obj::new(out)
                    .field("executor", executor)
                    .field("passed", passed)
                    .end();
                out.push(b'}');
            }
        }
    }
}

impl WriteJson for Lease {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("request", &self.request)
            .field("executor", &self.executor)
            .field("role", &self.role)
            .field("label", &self.label)
            .field("hold", &self.hold)
            .field("since", &self.since)
            .field("occupied", &self.occupied)
            .field("counted", &self.counted)
            .end();
    }
}

impl WriteJson for Runtime {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("lastLeased", &self.last_leased)
            .field("exclusion", &self.exclusion)
            .field("rateLimits", &self.rate_limits)
            .field("pause", &self.pause)
            .field("probeInFlight", &self.probe_in_flight)
            .field("lastProbeAt", &self.last_probe_at)
            .end();
    }
}

impl WriteJson for Excl {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("kind", &self.kind)
            .field("reason", &self.reason)
            .field("until", &self.until)
            .field("since", &self.since)
            .field("then", &self.then)
            .end();
    }
}

impl WriteJson for Pause {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("failures", &self.failures)
            .field("until", &self.until)
            .field("message", &self.message)
            .field("blocked", &self.blocked)
            .end();
    }
}

// ---- Reading an export ------------------------------------------------------------
//
// By hand from the `Value` (`read.rs`): an export is read once per live swap, and a
// derived deserializer per type would cost more WebAssembly than the rest of the
// import. Errors name the place: "requests[2].state: ...".

/// A JSON array of exactly `N` items.
fn tuple<const N: usize>(value: &Value) -> Read<&[Value; N]> {
    let items = read::array(value)?;
    items.as_slice().try_into().map_err(|_| {
        format!(
            "invalid length {}, expected a tuple of size {N}",
            items.len()
        )
    })
}

impl Excl {
    fn from_json(value: &Value) -> Read<Excl> {
        let o = object(value, "struct Excl")?;
        Ok(Excl {
            kind: o.req("kind", ExclusionKind::from_json)?,
            reason: o.req("reason", read::string)?,
            until: o.opt("until", read::u64)?,
            since: o.req("since", read::u64)?,
            then: o.opt("then", |v| {
                let [end, reason] = tuple(v)?;
                Ok((read::u64(end)?, read::string(reason)?))
            })?,
        })
    }
}

impl Pause {
    fn from_json(value: &Value) -> Read<Pause> {
        let o = object(value, "struct Pause")?;
        Ok(Pause {
            failures: o.req("failures", read::u32)?,
            until: o.req("until", read::u64)?,
            message: o.req("message", read::string)?,
            blocked: o.req("blocked", read::bool)?,
        })
    }
}

impl Runtime {
    fn from_json(value: &Value) -> Read<Runtime> {
        let o = object(value, "struct Runtime")?;
        Ok(Runtime {
            last_leased: o.req("lastLeased", read::u64)?,
            exclusion: at("exclusion", o.opt("exclusion", Excl::from_json))?,
            rate_limits: o.req("rateLimits", |v| read::list(v, read::u64))?.into(),
            pause: at("pause", o.opt("pause", Pause::from_json))?,
            probe_in_flight: o.req("probeInFlight", read::bool)?,
            last_probe_at: o.opt("lastProbeAt", read::u64)?,
        })
    }
}

impl ReqState {
    fn from_json(value: &Value) -> Read<ReqState> {
        const NAMES: &[&str] = &["waiting", "creating"];
        if let Some((name, fields)) = value.as_object().and_then(|o| o.iter().next()) {
            if name == "creating" && value.as_object().is_some_and(|o| o.len() == 1) {
                let o = object(fields, "struct variant ReqState::Creating")?;
                return Ok(ReqState::Creating {
                    executor: o.req("executor", read::string)?,
                    passed: o.req("passed", read::u32)?,
                });
            }
        }
        match read::variant(value, NAMES)? {
            0 => Ok(ReqState::Waiting),
            _ => Err(read::invalid_type(
                value,
                "struct variant ReqState::Creating",
            )),
        }
    }
}

impl ExportedRequest {
    fn from_json(value: &Value) -> Read<ExportedRequest> {
        let o = object(value, "struct ExportedRequest")?;
        let key = at(
            "key",
            o.need("key")
                .and_then(tuple::<4>)
                .and_then(|[ranked, rank, time, arrival]| {
                    let ranked = read::u64(ranked)?;
                    Ok((
                        u8::try_from(ranked).map_err(|_| format!("{ranked} is not 0 or 1"))?,
                        read::i64(rank)?,
                        read::u64(time)?,
                        read::u64(arrival)?,
                    ))
                }),
        )?;
        Ok(ExportedRequest {
            id: o.req("id", read::string)?,
            role: o.req("role", read::string)?,
            avoid: o.req("avoid", read::strings)?,
            prefer: o.opt("prefer", read::string)?,
            pin: o.opt("pin", read::string)?,
            rank: o.opt("rank", read::i64)?,
            event_time: o.opt("eventTime", read::u64)?,
            label: o.opt("label", read::string)?,
            deadline: o.opt("deadline", read::u64)?,
            key,
            since: o.req("since", read::u64)?,
            announced: o.req("announced", read::bool)?,
            try_only: o.or("tryOnly", read::bool, false)?,
            state: at("state", o.req("state", ReqState::from_json))?,
        })
    }
}

impl Lease {
    fn from_json(value: &Value) -> Read<Lease> {
        let o = object(value, "struct Lease")?;
        Ok(Lease {
            request: o.req("request", read::string)?,
            executor: o.req("executor", read::string)?,
            role: o.opt("role", read::string)?,
            label: o.opt("label", read::string)?,
            hold: o.opt("hold", read::value)?,
            since: o.req("since", read::u64)?,
            occupied: o.req("occupied", read::bool)?,
            counted: o.req("counted", read::bool)?,
        })
    }
}

impl ExportedReload {
    fn from_json(value: &Value) -> Read<ExportedReload> {
        let o = object(value, "struct ExportedReload")?;
        Ok(ExportedReload {
            document: o.req("document", read::value)?,
            awaiting: sorted::set_from(o.req("awaiting", read::strings)?),
            since: o.req("since", read::u64)?,
        })
    }
}

impl Exported {
    fn from_json(value: &Value) -> Read<Exported> {
        let o = object(value, "struct Exported")?;
        let version = o.req("version", read::u32)?;
        if version != EXPORT_VERSION {
            return Err(format!("export version {version} is not {EXPORT_VERSION}"));
        }
        let leases = map_in(o, "leases", Lease::from_json)?
            .into_iter()
            .map(|(k, lease)| match k.parse::<u64>() {
                Ok(id) => Ok((id, lease)),
                Err(_) => Err(format!("leases: `{k}` is not a lease number")),
            })
            .collect::<Read<Vec<_>>>()?;
        Ok(Exported {
            version,
            options: at("options", o.req("options", Options::from_json))?,
            document: o.req("document", read::value)?,
            draining: at(
                "draining",
                o.req("draining", |v| read::list(v, read::value)),
            )?,
            runtime: map_in(o, "runtime", Runtime::from_json)?
                .into_iter()
                .collect(),
            now: at("now", o.req("now", read::u64))?,
            requests: list_in(o, "requests", ExportedRequest::from_json)?,
            leases,
            abandoned: sorted::map_from(map_in(o, "abandoned", read::string)?),
            next_lease: at("nextLease", o.req("nextLease", read::u64))?,
            next_arrival: at("nextArrival", o.req("nextArrival", read::u64))?,
            lease_clock: at("leaseClock", o.req("leaseClock", read::u64))?,
            last_persisted: list_in(o, "lastPersisted", Exclusion::from_json)?,
            known_ids: sorted::set_from(at("knownIds", o.req("knownIds", read::strings))?),
            pending_reload: at(
                "pendingReload",
                o.opt("pendingReload", ExportedReload::from_json),
            )?,
            preflights: sorted::map_from(map_in(o, "preflights", PreflightRecord::from_json)?),
            outputs: list_in(o, "outputs", Output::from_json)?,
        })
    }
}

/// Pairs in key order, written as a JSON object.
fn as_map<S: serde::Serializer, K: Serialize, V: Serialize>(
    pairs: &[(K, V)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}

/// The strength rules, for an executor already out with `old`.
fn merge_exclusions(old: Excl, new: Excl) -> Excl {
    use ExclusionKind::*;
    // The timed end a shadow keeps: the later of the old shadow and a new timed end.
    let later = |shadow: Option<(u64, String)>, timed: Option<(u64, String)>| match (shadow, timed)
    {
        (Some(a), Some(b)) => Some(if b.0 > a.0 { b } else { a }),
        (a, b) => a.or(b),
    };
    let timed = |x: &Excl| match x.kind {
        Until => x.until.map(|t| (t, x.reason.clone())),
        _ => None,
    };
    match (old.kind, new.kind) {
        (Run, _) => old,
        (_, Run) => Excl { then: None, ..new },
        (Manual, Manual) => Excl {
            then: old.then.clone(),
            ..new
        },
        (Manual, Until) | (Health, Until) => {
            let then = later(old.then.clone(), timed(&new));
            Excl { then, ..old }
        }
        (Manual, Health) | (Health, Health) => old,
        (Health, Manual) | (Until, Manual) => {
            let then = later(old.then.clone(), timed(&old));
            Excl { then, ..new }
        }
        (Until, Health) => {
            let then = later(old.then.clone(), timed(&old));
            Excl { then, ..new }
        }
        (Until, Until) => {
            if new.until > old.until {
                new
            } else {
                old
            }
        }
    }
}

fn kind_name(kind: ExclusionKind) -> &'static str {
    match kind {
        ExclusionKind::Until => "timed",
        ExclusionKind::Health => "health",
        ExclusionKind::Run => "run",
        ExclusionKind::Manual => "manual",
    }
}

/// The seed's `describeExclusion`.
fn describe(excl: &Excl) -> String {
    Described(excl).to_string()
}

/// How an exclusion reads in messages ("until <instant>: <reason>" ...), written
/// straight into the message being built.
struct Described<'a>(&'a Excl);

impl std::fmt::Display for Described<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let excl = self.0;
        match excl.kind {
            ExclusionKind::Until => match excl.until {
                Some(t) => write!(f, "until {}: {}", Iso(t), excl.reason),
                None => write!(f, "until ?: {}", excl.reason),
            },
            ExclusionKind::Health => write!(f, "until its health check answers: {}", excl.reason),
            ExclusionKind::Run => write!(f, "for this run: {}", excl.reason),
            ExclusionKind::Manual => match excl.until {
                Some(t) => write!(f, "paused until {}: {}", Iso(t), excl.reason),
                None => write!(f, "paused: {}", excl.reason),
            },
        }
    }
}

fn for_label(label: Option<&str>) -> String {
    label.map(|l| format!(" for {l}")).unwrap_or_default()
}

/// "1 running lease", "2 running leases".
fn plural(n: u32, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

fn join_violations(violations: &[crate::document::Violation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod key_tests {
    use super::*;

    /// The encodings keep the tuples' order exactly (see `Key`).
    #[test]
    fn keys_compare_as_the_tuples_they_encode() {
        let floats = [
            f64::NEG_INFINITY,
            -1e300,
            -1.5,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            0.5,
            1.0,
            1e300,
            f64::INFINITY,
            f64::NAN,
            -f64::NAN,
        ];
        for &a in &floats {
            for &b in &floats {
                assert_eq!(
                    Prio(a).code().cmp(&Prio(b).code()),
                    Prio(a).cmp(&Prio(b)),
                    "{a} vs {b}"
                );
            }
        }
        let parts: Vec<KeyParts> = [0u8, 1, 255]
            .iter()
            .flat_map(|&u| {
                [i64::MIN, -1, 0, 1, i64::MAX]
                    .into_iter()
                    .flat_map(move |r| [0, 7, u64::MAX].map(|t| (u, r, t, t / 2)))
            })
            .collect();
        for a in &parts {
            assert_eq!(key_parts(&order_key(*a)), *a);
            for b in &parts {
                assert_eq!(
                    order_key(*a).cmp(&order_key(*b)),
                    a.cmp(b),
                    "{a:?} vs {b:?}"
                );
            }
        }
        assert!(timer_key(5, 9) < timer_key(6, 0) && timer_key(6, 0) < timer_key(6, 1));
    }
}
