//! The roster: executors, what each carries from input to input, and the tables
//! derived from them (caps and priorities per role, role members, the ready sets).

use std::collections::VecDeque;

use serde::Serialize;

use crate::document::{ExecutorSpec, PreferRule};
use crate::protocol::{Choice, ExclusionKind, Unservable};

use super::exclusions::ActiveExclusion;
use super::keys::{ready_key, ByName, Priority, SharedName};
use super::provisioning::Pause;
use super::ready::ReadySet;
use super::recovery::Recovery;
use super::requests::Request;

/// What an executor carries from input to input (and across a live swap).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Runtime {
    pub(super) last_leased: u64,
    pub(super) exclusion: Option<ActiveExclusion>,
    pub(super) rate_limits: VecDeque<u64>,
    pub(super) pause: Option<Pause>,
    pub(super) probe_in_flight: bool,
    pub(super) last_probe_at: Option<u64>,
    /// Probation, its backoff and the failures in a row (not written while unused).
    #[serde(skip_serializing_if = "Recovery::is_default")]
    pub(super) recovery: Recovery,
    /// Its own budget's grant times, oldest first (`budgets.rs`); none without one.
    #[serde(rename = "budgetGrants", skip_serializing_if = "VecDeque::is_empty")]
    pub(super) grants: VecDeque<u64>,
    /// Its smooth weighted round-robin's current weight per role (`spreading.rs`):
    /// kept while not 0.
    #[serde(
        rename = "weightCurrent",
        serialize_with = "super::keys::as_map",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(super) weight_current: crate::sorted::StrMap<i64>,
    /// When its budgets (its own, its account's) make room, while one is full:
    /// derived from the windows and the time (`Policy::budget_room`), not written.
    #[serde(skip)]
    pub(super) budget_room: Option<u64>,
}

#[derive(Debug, Clone)]
pub(super) struct Executor {
    pub(super) spec: ExecutorSpec,
    /// `spec.id`, shared with the executor's leases (see `SharedName`).
    pub(super) name: SharedName,
    /// Removed by a reload; leaves when its last lease ends.
    pub(super) draining: bool,
    pub(super) runtime: Runtime,
    // Derived (rebuilt on reload and import):
    pub(super) busy: u32,
    /// Per role index of the document: what it is in that role.
    pub(super) per_role: Vec<InRole>,
    /// The role indexes it declares, in order.
    pub(super) role_indexes: Vec<usize>,
    /// The stamp its ready-set entries were keyed by.
    pub(super) ready_stamp: u64,
    /// The clone numbers its open leases hold, ascending (`clones: "numbered"`).
    pub(super) clones: Vec<u32>,
}

/// An executor in one role of the document: what a grant or a release of the role
/// reads and writes, kept in one place (four vectors of one field each were four
/// cache misses a cycle on a large roster, where each cycle meets another executor).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct InRole {
    /// Its slots held for the role.
    pub(super) busy: u32,
    /// Its cap for the role: 0 when it lacks the role.
    pub(super) cap: u32,
    pub(super) priority: Priority,
    /// It has an entry in the role's ready set now (keyed by `ready_stamp`).
    pub(super) ready: bool,
}

impl Executor {
    pub(super) fn new(spec: ExecutorSpec, runtime: Runtime, roles: &[String]) -> Executor {
        let mut exec = Executor {
            name: spec.id.as_str().into(),
            spec,
            draining: false,
            runtime,
            busy: 0,
            per_role: Vec::new(),
            role_indexes: Vec::new(),
            ready_stamp: 0,
            clones: Vec::new(),
        };
        exec.derive(roles);
        exec
    }

    /// Its id as a lease holds it: shared with the executor.
    pub(super) fn shared_name(&self) -> SharedName {
        self.name.clone()
    }

    pub(super) fn derive(&mut self, roles: &[String]) {
        self.busy = 0;
        self.clones.clear();
        self.per_role = roles
            .iter()
            .map(|r| InRole {
                busy: 0,
                cap: if self.spec.has_role(r) {
                    self.spec.cap_for(r)
                } else {
                    0
                },
                priority: Priority(self.spec.priority_for(r)),
                ready: false,
            })
            .collect();
        self.role_indexes = (0..roles.len())
            .filter(|&i| self.spec.has_role(&roles[i]))
            .collect();
    }

    /// Takes the lowest clone number none of its open leases holds, from 1.
    pub(super) fn take_clone(&mut self) -> u32 {
        let mut n = 1;
        for &held in &self.clones {
            if held != n {
                break;
            }
            n += 1;
        }
        let at = self.clones.partition_point(|&held| held < n);
        self.clones.insert(at, n);
        n
    }

    /// A lease that held clone `n` ended: the number is free again.
    pub(super) fn free_clone(&mut self, n: u32) {
        if let Ok(at) = self.clones.binary_search(&n) {
            self.clones.remove(at);
        }
    }

    /// Whether a lease's executor name is this executor's: the shared pointer first
    /// (a release then does not read the id's text, a cache miss per release on a
    /// large roster), the text otherwise.
    pub(super) fn is_named(&self, name: &SharedName) -> bool {
        if std::sync::Arc::ptr_eq(&self.name, name) {
            return true;
        }
        self.spec.id.as_str() == &**name
    }

    pub(super) fn has_role(&self, r: usize) -> bool {
        self.role_indexes.contains(&r)
    }

    /// Its cap for role `r`: 0 when it lacks the role (or `r` is no role).
    pub(super) fn cap(&self, r: usize) -> u32 {
        self.per_role.get(r).map_or(0, |x| x.cap)
    }

    /// Its slots held for role `r`.
    pub(super) fn busy_in(&self, r: usize) -> u32 {
        self.per_role.get(r).map_or(0, |x| x.busy)
    }

    /// Its priority for role `r`, a role of the document (its default priority when
    /// it lacks the role).
    pub(super) fn priority(&self, r: usize) -> Priority {
        self.per_role[r].priority
    }

    /// The slots it may fill with new leases now: one on probation.
    pub(super) fn slots_now(&self) -> u32 {
        if self.runtime.recovery.probation {
            self.spec.slots.min(1)
        } else {
            self.spec.slots
        }
    }

    pub(super) fn free_for(&self, r: usize) -> bool {
        !self.draining
            && self.busy < self.slots_now()
            && self.per_role.get(r).is_some_and(|x| x.busy < x.cap)
    }

    pub(super) fn blocked(&self) -> bool {
        self.runtime.pause.as_ref().is_some_and(|p| p.blocked)
    }

    /// It can take an unpinned request for role `r` now.
    pub(super) fn ready_for(&self, r: usize) -> bool {
        self.free_for(r) && self.runtime.exclusion.is_none() && !self.blocked() && !self.spent()
    }

    /// Its budget (or its account's) is spent until its window makes room.
    pub(super) fn spent(&self) -> bool {
        self.runtime.budget_room.is_some()
    }

    /// It can ever serve role `r` (in this run, as declared now).
    pub(super) fn servable(&self, r: usize) -> bool {
        !self.draining
            && self.cap(r) > 0
            && self
                .runtime
                .exclusion
                .as_ref()
                .is_none_or(|x| x.kind != ExclusionKind::Run)
    }

    /// It takes role `r` and is not out of the round (busy or not).
    pub(super) fn in_round(&self, r: usize) -> bool {
        self.counts_for(r) && self.runtime.exclusion.is_none()
    }

    /// It counts among the executors of role `r` at all: declared (not draining)
    /// and with a slot for it.
    pub(super) fn counts_for(&self, r: usize) -> bool {
        !self.draining && self.cap(r) > 0
    }
}

/// Executor ids to their index in `Roster::executors`.
#[derive(Debug, Clone, Default)]
pub(super) struct ExecutorIndex(pub(super) ByName);

impl ExecutorIndex {
    pub(super) fn get(&self, id: &str) -> Option<usize> {
        self.0.get(id).map(|&e| e as usize)
    }

    pub(super) fn contains_key(&self, id: &str) -> bool {
        self.0.contains_key(id)
    }
}

/// The roles of this run: interned names (requests keep their role as an index
/// here, since a reload may drop it) and, per role of the running document, who
/// takes it.
#[derive(Debug, Clone, Default)]
pub(super) struct RoleTable {
    /// Every role name a document of this run declared (append-only); shared with
    /// the leases of each role (a grant copies no text).
    pub(super) names: Vec<SharedName>,
    /// Per interned role: its index among the document's roles, if it is there.
    pub(super) at: Vec<Option<usize>>,
    /// Per document role: its index in `names`.
    pub(super) ids: Vec<u32>,
    /// Per document role: the executors that have it, in declaration order.
    pub(super) members: Vec<Vec<usize>>,
    /// For each role, the roles whose requests compete with it for an executor (some
    /// executor in the round takes both; a role always competes with itself).
    pub(super) overlap: Vec<Vec<usize>>,
    /// Per document role: executors that can ever serve it (`Executor::servable`).
    pub(super) servable: Vec<u32>,
    /// Per document role: executors in the round for it (`Executor::in_round`); a
    /// role whose count falls to 0 is out (`roleOut`) until one comes back.
    pub(super) in_round: Vec<u32>,
}

impl RoleTable {
    /// The interned index of a role name, added if new.
    pub(super) fn intern(&mut self, name: &str) -> u32 {
        match self.names.iter().position(|n| **n == *name) {
            Some(i) => i as u32,
            None => {
                self.names.push(name.into());
                (self.names.len() - 1) as u32
            }
        }
    }

    /// An interned role among the document's roles (none if a reload dropped it).
    pub(super) fn of(&self, interned: u32) -> Option<usize> {
        self.at.get(interned as usize).copied().flatten()
    }

    /// An interned role's name.
    pub(super) fn name(&self, interned: u32) -> &str {
        self.names.get(interned as usize).map_or("?", |n| n)
    }

    /// The same, shared.
    pub(super) fn shared_name(&self, interned: u32) -> SharedName {
        self.names
            .get(interned as usize)
            .map_or_else(|| "?".into(), Clone::clone)
    }

    /// Re-interns the document's roles (after creation, a reload, an import).
    fn align(&mut self, roles: &[String]) {
        self.ids = roles.iter().map(|r| self.intern(r)).collect();
        self.at = vec![None; self.names.len()];
        for (r, &i) in self.ids.iter().enumerate() {
            self.at[i as usize] = Some(r);
        }
    }

    /// The members, servable counts and overlaps of the roles, from the executors.
    pub(super) fn derive(&mut self, executors: &[Executor], roles: usize) {
        self.members = vec![Vec::new(); roles];
        self.servable = vec![0; roles];
        self.in_round = vec![0; roles];
        for (e, x) in executors.iter().enumerate() {
            for &r in &x.role_indexes {
                self.members[r].push(e);
                if x.servable(r) {
                    self.servable[r] += 1;
                }
                if x.in_round(r) {
                    self.in_round[r] += 1;
                }
            }
        }
        let mut overlap = vec![vec![false; roles]; roles];
        for x in executors.iter().filter(|x| !x.draining) {
            let takes: Vec<usize> = x
                .role_indexes
                .iter()
                .copied()
                .filter(|&r| x.cap(r) > 0)
                .collect();
            for &a in &takes {
                for &b in &takes {
                    overlap[a][b] = true;
                }
            }
        }
        self.overlap = overlap
            .iter()
            .enumerate()
            .map(|(r, row)| (0..row.len()).filter(|&o| o == r || row[o]).collect())
            .collect();
    }

    /// An executor left or joined the ones that can ever serve its roles.
    pub(super) fn count_servable(&mut self, x: &Executor, joined: bool) {
        for &r in &x.role_indexes {
            if x.cap(r) > 0 && !x.draining {
                if joined {
                    self.servable[r] += 1;
                } else {
                    debug_assert!(self.servable[r] > 0, "servable count of role {r}");
                    self.servable[r] -= 1;
                }
            }
        }
    }
}

/// The executors and every table derived from them.
#[derive(Debug, Clone, Default)]
pub(super) struct Roster {
    /// In document order (draining ones after a reload stay where they were).
    pub(super) executors: Vec<Executor>,
    pub(super) index: ExecutorIndex,
    pub(super) roles: RoleTable,
    /// Per document role: the executors that can take an unpinned request of it
    /// now, keyed (priority, stamp, executor): the first is the pick.
    pub(super) ready: Vec<ReadySet>,
    /// Counts grants; an executor's `last_leased` stamp is its value at its last.
    pub(super) lease_clock: u64,
    /// Executors that may have gained a usable slot during this input.
    /// (A list, cleared without freeing: a repeat is harmless.)
    pub(super) dirty: Vec<usize>,
    /// The running document's choice among equal free executors, and what becomes
    /// of a request nothing can serve (resolved with the options on every rebuild).
    pub(super) choice: Choice,
    /// `choice: "leastBusy"`; some executor has a weight other than 1 (`spreading.rs`).
    pub(super) least_busy: bool,
    pub(super) weighted: bool,
    pub(super) unservable: Unservable,
    /// What a request's `prefer` does (the document's, resolved on every rebuild).
    pub(super) prefer: PreferRule,
    /// Leases take clone numbers (the document's `clones`, resolved on every rebuild).
    pub(super) numbered: bool,
    /// The lease events are typed (the document's `leaseEvents`, likewise).
    pub(super) typed: bool,
    /// Per document role, the waiting report of a request with no avoid list and no
    /// pin, as last written (a lease that waits is a hot path). It names each member's
    /// state: removed, cap 0, excluded, paused, waiting for the startup preflight, or
    /// busy. A lease or a release changes none of these, so most waits reuse it;
    /// `forget_reports` clears it wherever one changes, and the invariants compare it
    /// with a report written afresh.
    pub(super) reports: Vec<Option<String>>,
}

impl Roster {
    /// A lease's executor: as `find`, the place compared by the shared name.
    pub(super) fn find_named(&self, name: &SharedName, hint: Option<usize>) -> Option<usize> {
        hint.filter(|&e| self.executors.get(e).is_some_and(|x| x.is_named(name)))
            .or_else(|| self.index.get(name))
    }

    /// Executor `id`'s index: `hint` (a place found earlier) while that place still
    /// holds `id` (a reload or a drained executor moves them), else by the id index.
    pub(super) fn find(&self, id: &str, hint: Option<usize>) -> Option<usize> {
        hint.filter(|&e| self.executors.get(e).is_some_and(|x| x.spec.id == id))
            .or_else(|| self.index.get(id))
    }

    pub(super) fn new(specs: Vec<ExecutorSpec>, roles: &[String]) -> Roster {
        let executors = specs
            .into_iter()
            .map(|spec| Executor::new(spec, Runtime::default(), roles))
            .collect();
        Roster {
            executors,
            ..Roster::default()
        }
    }

    /// An executor's exclusion or pause, the members of a role, or the startup
    /// changed: the waiting reports are written again.
    pub(super) fn forget_reports(&mut self) {
        self.reports.clear();
    }

    /// Takes `e` out of every ready set (before a change to what keys or admits it).
    pub(super) fn unready(&mut self, e: usize) {
        let x = &mut self.executors[e];
        for &r in &x.role_indexes {
            let role = &mut x.per_role[r];
            if role.ready {
                let removed = self.ready[r]
                    .remove(&ready_key(role.priority, x.ready_stamp, e))
                    .is_some();
                debug_assert!(removed, "ready entry of {} for role {r}", x.spec.id);
                role.ready = false;
            }
        }
    }

    /// Puts `e` into the ready set of every role it can take now, and out of the
    /// others (after a change). Entries whose key did not change stay in place.
    pub(super) fn ready_up(&mut self, e: usize) {
        let declared = self.choice == Choice::Declared;
        let x = &mut self.executors[e];
        let old = x.ready_stamp;
        // Declared: every stamp is 0, so ties go to declaration order (the index).
        let stamp = if declared { 0 } else { x.runtime.last_leased };
        x.ready_stamp = stamp;
        for i in 0..x.role_indexes.len() {
            let r = x.role_indexes[i];
            let want = x.ready_for(r);
            let role = &mut x.per_role[r];
            let (has, priority) = (role.ready, role.priority);
            if has && (!want || old != stamp) {
                self.ready[r].remove(&ready_key(priority, old, e));
            }
            if want && (!has || old != stamp) {
                self.ready[r].insert(ready_key(priority, stamp, e));
            }
            role.ready = want;
        }
    }

    /// A request's role among the document's roles (none if a reload dropped it).
    pub(super) fn request_role(&self, request: &Request) -> Option<usize> {
        self.roles.of(request.role)
    }

    pub(super) fn request_role_name(&self, request: &Request) -> &str {
        self.roles.name(request.role)
    }

    /// Re-derives the executors' tables and counts, the id index and the role
    /// tables; every executor's busy count is 0 after it (the caller counts).
    pub(super) fn derive(&mut self, roles: &[String]) {
        self.roles.align(roles);
        self.index = ExecutorIndex(
            self.executors
                .iter()
                .enumerate()
                .map(|(i, x)| (x.spec.id.as_str().into(), i as u64))
                .collect(),
        );
        for x in &mut self.executors {
            x.derive(roles);
        }
    }

    /// A lease's clone number, counted on its executor (a rebuild).
    pub(super) fn count_clone(&mut self, id: &str, n: u32) {
        if let Some(e) = self.index.get(id) {
            let clones = &mut self.executors[e].clones;
            let at = clones.partition_point(|&held| held < n);
            clones.insert(at, n);
        }
    }

    /// One slot held on executor `id` for `role` (a lease or a machine creation),
    /// counted when the roster is rebuilt.
    pub(super) fn count_busy(&mut self, id: &str, role: Option<usize>) {
        if let Some(e) = self.index.get(id) {
            let x = &mut self.executors[e];
            x.busy += 1;
            if let Some(r) = role.filter(|&r| x.has_role(r)) {
                x.per_role[r].busy += 1;
            }
        }
    }
}
