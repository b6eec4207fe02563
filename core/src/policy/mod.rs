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

mod events;
mod exclusions;
mod exhaustion;
mod export;
mod granting;
mod invariants;
mod keys;
mod leases;
mod persistence;
mod probes;
mod provisioning;
mod queries;
mod queue;
mod reload;
mod roster;
mod timers;

use std::collections::VecDeque;

use serde_json::Value;

use crate::document::Document;
use crate::error::Error;
use crate::protocol::{Exclusion, ExclusionKind, Input, Options, Output, STATE_VERSION};
use crate::sorted::{self, StrMap, StrSet};
use crate::status::PreflightRecord;
use crate::time::iso;

use keys::{ByName, Index};
use leases::LeaseTable;
use queue::{Deadlines, Ending, Requests};
use reload::PendingReload;
use roster::{Executor, ExecutorIndex, Runtime};

/// The roster policy. See the crate docs for the run loop.
#[derive(Debug, Clone)]
pub struct Policy {
    options: Options,
    document: Document,
    now: u64,
    execs: Vec<Executor>,
    requests: Requests,
    /// Every role name a document of this run declared (append-only): a request
    /// keeps its role as an index here.
    role_names: Vec<String>,
    leases: LeaseTable,
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
    exec_index: ExecutorIndex,
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
            .map(|spec| Executor::new(spec.clone(), Runtime::default(), &roles))
            .collect();
        let known_ids = sorted::set_from(document.executors.iter().map(|e| e.id.clone()));
        let mut policy = Policy {
            options,
            document,
            now: 0,
            execs,
            requests: Requests::default(),
            role_names: Vec::new(),
            leases: LeaseTable::default(),
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
            exec_index: ExecutorIndex::default(),
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
}
