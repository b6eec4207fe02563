//! The roster: executors, what each carries from input to input, and the tables
//! derived from them (caps and priorities per role, role members, the ready sets).

use std::collections::VecDeque;

use serde::Serialize;

use crate::document::ExecutorSpec;
use crate::protocol::ExclusionKind;
use crate::sorted;

use super::exclusions::ActiveExclusion;
use super::keys::{ready_key, timer_key, ByName, Index, Priority};
use super::provisioning::Pause;
use super::queue::Request;
use super::Policy;

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
}

#[derive(Debug, Clone)]
pub(super) struct Executor {
    pub(super) spec: ExecutorSpec,
    /// Removed by a reload; leaves when its last lease ends.
    pub(super) draining: bool,
    pub(super) rt: Runtime,
    // Derived (rebuilt on reload and import):
    pub(super) busy: u32,
    pub(super) busy_by_role: Vec<u32>,
    /// Per role index: cap (0 when it lacks the role) and priority.
    pub(super) caps: Vec<u32>,
    pub(super) prios: Vec<Priority>,
    pub(super) role_idx: Vec<usize>,
    /// The ready-set entries it has now: per role, and the stamp they were keyed by.
    pub(super) in_ready: Vec<bool>,
    pub(super) ready_stamp: u64,
}

impl Executor {
    pub(super) fn new(spec: ExecutorSpec, rt: Runtime, roles: &[String]) -> Executor {
        let mut exec = Executor {
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

    pub(super) fn derive(&mut self, roles: &[String]) {
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
            .map(|r| Priority(self.spec.priority_for(r)))
            .collect();
        self.role_idx = (0..roles.len())
            .filter(|&i| self.spec.has_role(&roles[i]))
            .collect();
    }

    pub(super) fn has_role(&self, r: usize) -> bool {
        self.role_idx.contains(&r)
    }

    pub(super) fn free_for(&self, r: usize) -> bool {
        !self.draining
            && self.busy < self.spec.slots
            && self.busy_by_role.get(r).copied().unwrap_or(0)
                < self.caps.get(r).copied().unwrap_or(0)
    }

    pub(super) fn blocked(&self) -> bool {
        self.rt.pause.as_ref().is_some_and(|p| p.blocked)
    }

    /// It can take an unpinned request for role `r` now.
    pub(super) fn ready_for(&self, r: usize) -> bool {
        self.free_for(r) && self.rt.exclusion.is_none() && !self.blocked()
    }

    /// It can ever serve role `r` (in this run, as declared now).
    pub(super) fn servable(&self, r: usize) -> bool {
        !self.draining
            && self.caps.get(r).copied().unwrap_or(0) > 0
            && self
                .rt
                .exclusion
                .as_ref()
                .is_none_or(|x| x.kind != ExclusionKind::Run)
    }
}

/// Executor ids to their index in `Policy::execs`.
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

impl Policy {
    /// Takes `e` out of every ready set (before a change to what keys or admits it).
    pub(super) fn unready(&mut self, e: usize) {
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
    pub(super) fn ready_up(&mut self, e: usize) {
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
    pub(super) fn req_role(&self, req: &Request) -> Option<usize> {
        self.role_at.get(req.role as usize).copied().flatten()
    }

    pub(super) fn req_role_name(&self, req: &Request) -> &str {
        self.role_names
            .get(req.role as usize)
            .map_or("?", String::as_str)
    }

    /// The interned index of a role name, added if new.
    pub(super) fn intern_role(&mut self, name: &str) -> u32 {
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
    pub(super) fn rebuild(&mut self) {
        let roles = self.document.roles.clone();
        self.role_ids = roles.iter().map(|r| self.intern_role(r)).collect();
        self.role_at = vec![None; self.role_names.len()];
        for (r, &i) in self.role_ids.iter().enumerate() {
            self.role_at[i as usize] = Some(r);
        }
        self.exec_index = ExecutorIndex(
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
            if let Some(end) = x.rt.exclusion.as_ref().and_then(ActiveExclusion::end) {
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

    pub(super) fn remove_drained(&mut self, e: usize) {
        self.execs.remove(e);
        self.rebuild();
        // Indexes moved: every executor may be offered again, and the next persist
        // compares every entry (cheap: rare).
        self.dirty = (0..self.execs.len()).collect();
        self.persist_all = true;
    }

    pub(super) fn role_name(&self, r: usize) -> &str {
        self.document.roles.get(r).map_or("?", String::as_str)
    }
}
