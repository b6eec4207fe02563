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

mod affinity;
mod avoid;
mod blocks;
mod borrowing;
mod budgeting;
mod budgets;
mod emitting;
mod events;
mod excluding;
mod exclusions;
mod exhaustion;
mod export;
mod flooring;
mod granting;
mod import;
mod invariants;
mod keys;
mod leases;
mod leasing;
mod machines;
mod outputs;
mod owners;
mod persistence;
mod persisting;
mod probes;
mod probing;
mod provisioning;
mod queries;
mod queue;
mod queueing;
mod ready;
mod recovering;
mod recovery;
mod reload;
mod reloading;
mod remembering;
mod requests;
mod role_queue;
mod roster;
mod spreading;
mod tenanting;
mod tenants;
mod timers;

pub use crate::error::InvariantViolation;
pub use outputs::{Grant, OutputRef};

use std::collections::VecDeque;

use serde_json::Value;

use crate::document::Document;
use crate::error::Error;
use crate::protocol::{ExclusionKind, Input, Level, Options, Output, LOG_VERSION, STATE_VERSION};
use crate::sorted;
use crate::time::iso;

use affinity::Affinity;
use budgets::Budgets;
use exclusions::Exclusions;
use leases::Leases;
use outputs::Queued;
use persistence::Persistence;
use probes::Probes;
use provisioning::Provisioning;
use queue::{Ending, Queue};
use reload::Reloads;
use roster::Roster;

/// The roster policy. See the crate docs for the run loop.
///
/// Its state is a handful of sub-states, each in the module of its concept and
/// each owning the indexes kept in step with it: the roster (executors, role
/// tables, ready sets), the queue (requests, per-role and pinned queues,
/// deadlines), the open leases, the exclusion timers, the probe schedule,
/// provisioning (pause timers, abandoned creations), reloads and persistence.
/// What needs several of them is a method of `Policy` in a flow file (`granting.rs`,
/// `excluding.rs`, `leasing.rs`, ...), which imports the sub-states' files; those
/// never import `Policy` (`tests/layering.rs` checks it).
#[derive(Debug, Clone)]
pub struct Policy {
    options: Options,
    /// The running document, without its `executors`: their specs live in the roster
    /// (`Roster::executors`, one copy each: issue 15's memory at 10,000 executors).
    document: Document,
    now: u64,
    roster: Roster,
    queue: Queue,
    leases: Leases,
    exclusions: Exclusions,
    probes: Probes,
    provisioning: Provisioning,
    reloads: Reloads,
    persistence: Persistence,
    budgets: Budgets,
    /// The affinity keys' memory (key -> the executor of its last grant).
    affinity: Affinity,
    /// Decided, not yet read (`outputs.rs`: the hot ones as references into the state).
    outputs: VecDeque<Queued>,
    /// The host's floor for events (`set_event_floor`): not state, only what is built.
    event_floor: Level,
}

/// An input checked against the state, carrying what checking it produced.
enum Checked {
    Plain,
    Reload(Box<Document>),
    /// A `version` marker of the log version this core folds: a no-op.
    Marker,
    /// The index of the executor the input names, as `check` found it.
    Executor(usize),
    /// The index of the role a lease or tryLease asks for, as `check` found it.
    Role(usize),
}

impl Checked {
    fn role(&self) -> Option<usize> {
        match *self {
            Checked::Role(r) => Some(r),
            _ => None,
        }
    }
}

impl Policy {
    /// Builds a policy from a roster document, validated against `options.kinds`:
    /// a bad one is refused with every violation listed.
    pub fn new(document: &Value, options: Options) -> Result<Policy, Error> {
        // JSON hosts checked them as they read them; a Rust caller's struct is checked here.
        options.check()?;
        let document = Document::from_json(document, options.kinds.as_deref())
            .map_err(|violations| Error::InvalidDocument { violations })?;
        Policy::from_document(document, options)
    }

    /// As `new`, taking the document value rather than copying it: a host that read
    /// it only to build the policy holds a large roster once, not twice.
    pub fn from_value(document: Value, options: Options) -> Result<Policy, Error> {
        options.check()?;
        let document = Document::from_owned_json(document, options.kinds.as_deref())
            .map_err(|violations| Error::InvalidDocument { violations })?;
        Policy::from_document(document, options)
    }

    fn from_document(mut document: Document, options: Options) -> Result<Policy, Error> {
        let reloads = Reloads::new(&document);
        // The specs move into the roster: one copy of each (see `Policy::document`).
        let roster = Roster::new(std::mem::take(&mut document.executors), &document.roles);
        let mut policy = Policy {
            options,
            document,
            now: 0,
            roster,
            queue: Queue::default(),
            leases: Leases::default(),
            exclusions: Exclusions::default(),
            probes: Probes::default(),
            provisioning: Provisioning::default(),
            reloads,
            persistence: Persistence::default(),
            budgets: Budgets::default(),
            affinity: Affinity::default(),
            outputs: VecDeque::new(),
            event_floor: Level::Debug,
        };
        policy.rebuild();
        policy.persistence.last = vec![None; policy.roster.executors.len()];
        if policy.options.preflight {
            policy.start_preflight();
        }
        Ok(policy)
    }

    // ---- The run loop ---------------------------------------------------------

    /// Feeds one input. On error nothing changed (time did not advance either).
    pub fn handle(&mut self, input: Input) -> Result<(), Error> {
        // Bounds (`limits.rs`): JSON readers apply them too, a built `Input` is checked here.
        input.check_limits()?;
        let checked = self.check(&input)?;
        if let Checked::Marker = checked {
            return Ok(()); // a version marker this core folds: nothing changes
        }
        // A host that did not drain: the queued references are built before this input
        // can close their leases or move the executors.
        self.settle_outputs();
        self.now = self.now.max(input.now());
        self.advance_time();
        self.apply(input, checked);
        self.grant_pass();
        self.borrow_pass();
        self.schedule_probes();
        self.flush_persist();
        self.forget_expired_keys();
        #[cfg(debug_assertions)]
        self.check_invariants();
        Ok(())
    }

    /// The next output, until `None`. Drain completely after every input.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.poll_output_ref().map(OutputRef::into_output)
    }

    /// The time of the last input (epoch ms).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The running document as written (built anew: its executors' entries live in
    /// the roster's specs).
    pub fn document(&self) -> Value {
        self.document
            .written_with(self.roster.executors.iter().map(|x| &x.spec))
    }

    /// `document()` as compact JSON text, written without building it.
    pub fn document_text(&self) -> String {
        self.document
            .written_text_with(self.roster.executors.iter().map(|x| &x.spec))
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    // The checks below are inlined into `check`, their errors built out of line
    // (cold): an input that passes pays its comparisons only.

    #[inline]
    fn role_index(&self, role: &str) -> Result<usize, Error> {
        match self.document.roles.iter().position(|r| r == role) {
            Some(r) => Ok(r),
            None => Err(self.unknown_role(role)),
        }
    }

    #[cold]
    #[inline(never)]
    fn unknown_role(&self, role: &str) -> Error {
        Error::UnknownRole {
            role: role.to_string(),
            known: self.document.roles.join(", "),
        }
    }

    #[inline]
    fn known_exec(&self, id: &str) -> Result<usize, Error> {
        match self.roster.index.get(id) {
            Some(e) => Ok(e),
            None => Err(unknown_executor(id)),
        }
    }

    #[inline]
    fn check_new_id(&self, id: &str) -> Result<(), Error> {
        if id.is_empty() {
            return Err(Error::input("a request id is a non-empty string"));
        }
        if self.queue.requests.id_in_use(id)
            || sorted::contains_key(&self.provisioning.abandoned, id)
        {
            return Err(Error::DuplicateRequest { id: id.to_string() });
        }
        Ok(())
    }

    fn check(&self, input: &Input) -> Result<Checked, Error> {
        let now = self.now.max(input.now());
        if input.now() > crate::limits::MAX_SAFE_INTEGER {
            return Err(Error::input(
                "`now` is beyond what a JSON number holds exactly",
            ));
        }
        match input {
            Input::Lease(request) => {
                self.check_new_id(&request.id)?;
                let r = self.role_index(&request.role)?;
                self.check_room_to_wait(request, r)?;
                return Ok(Checked::Role(r));
            }
            Input::TryLease(request) => {
                self.check_new_id(&request.id)?;
                let r = self.role_index(&request.role)?;
                if self.queue.requests.len() >= crate::limits::MAX_WAITING_REQUESTS {
                    return Err(Error::input(format!(
                        "{} requests are open, the most the queue holds (limits::MAX_WAITING_REQUESTS); \
                         request `{}` is refused",
                        self.queue.requests.len(),
                        request.id
                    )));
                }
                return Ok(Checked::Role(r));
            }
            Input::Cancel { id, .. } => {
                if !self.queue.requests.contains_key(id) {
                    return Err(Error::UnknownRequest { id: id.clone() });
                }
            }
            Input::Release { lease, .. } => {
                if *lease == 0 || *lease >= self.leases.next_id {
                    return Err(Error::UnknownLease { lease: *lease });
                }
            }
            Input::Occupy { id, role, .. } => {
                self.check_new_id(id)?;
                if let Some(role) = role {
                    self.role_index(role)?;
                }
            }
            Input::Report { executor, .. } => {
                return Ok(Checked::Executor(self.known_exec(executor)?));
            }
            Input::Resume { executor, .. } => {
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
            Input::MachineCreated { id, .. }
            | Input::MachineFailed { id, .. }
            | Input::DropCreation { id, .. } => {
                let creating = self.queue.requests.get(id).is_some_and(|r| !r.waiting());
                if !creating && !sorted::contains_key(&self.provisioning.abandoned, id) {
                    return Err(Error::UnknownRequest { id: id.clone() });
                }
            }
            Input::MachineDeleted { lease, .. } => {
                if !self.leases.is_deleting(*lease) {
                    return Err(Error::UnknownLease { lease: *lease });
                }
            }
            Input::Reload { document, .. } => {
                if !self.serving() {
                    return Err(Error::input(
                        "reload: the roster has not started (its startup preflight has not passed)",
                    ));
                }
                let parsed = Document::from_json(document, self.options.kinds.as_deref())
                    .map_err(|violations| Error::InvalidDocument { violations })?;
                return Ok(Checked::Reload(Box::new(parsed)));
            }
            Input::PreflightResult { executor, .. } => {
                let pending = self
                    .reloads
                    .pending
                    .as_ref()
                    .is_some_and(|p| p.document.executor(executor).is_some());
                if !pending
                    && !self.roster.index.contains_key(executor)
                    && !sorted::set_contains(&self.reloads.cut_short, executor)
                {
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
            Input::Version { log, .. } => {
                if *log != LOG_VERSION {
                    return Err(Error::UnsupportedVersion {
                        version: *log,
                        supported: LOG_VERSION,
                    });
                }
                return Ok(Checked::Marker);
            }
            Input::ExpireOwner { .. } | Input::Tick { .. } => {}
        }
        Ok(Checked::Plain)
    }

    fn apply(&mut self, input: Input, checked: Checked) {
        match input {
            Input::Lease(request) => self.admit(request, checked.role(), false),
            Input::TryLease(request) => self.admit(request, checked.role(), true),
            Input::Cancel { id, .. } => {
                if self.queue.requests.contains_key(&id) {
                    self.end_request(&id, Ending::Cancelled);
                }
            }
            Input::Release { lease, .. } => self.release(lease),
            Input::Occupy {
                id,
                executor,
                role,
                hold,
                owner,
                ..
            } => self.occupy(id, executor, role, hold, owner),
            Input::Report {
                executor, failure, ..
            } => {
                let found = match checked {
                    Checked::Executor(e) => Some(e),
                    _ => None,
                };
                self.report(&executor, found, &failure)
            }
            Input::Exclude {
                executor,
                kind,
                reason,
                until,
                ..
            } => {
                let e = self.roster.index.get(&executor);
                debug_assert!(e.is_some(), "exclude: the executor was checked");
                if let Some(e) = e {
                    let reason = if reason.is_empty() {
                        "excluded by an operator".to_string()
                    } else {
                        reason
                    };
                    let exclusion = self.exclusion_of_kind(e, kind, reason, until);
                    self.exclude(e, exclusion);
                }
            }
            Input::Resume { executor, .. } => self.resume(&executor),
            Input::ProbeResult { executor, up, .. } => self.probe_result(&executor, up),
            Input::MachineCreated {
                id, hold, checked, ..
            } => self.machine_created(&id, hold, checked),
            Input::MachineFailed {
                id,
                message,
                reason,
                ..
            } => self.machine_failed(&id, &message, reason),
            Input::MachineDeleted {
                lease, ok, error, ..
            } => self.machine_deleted(lease, ok, error),
            Input::Reload { .. } => {
                if let Checked::Reload(document) = checked {
                    self.reload(*document);
                }
            }
            Input::PreflightResult {
                executor,
                ok,
                error,
                ..
            } => self.preflight_result(executor, ok, error),
            Input::Restore { state, .. } => self.restore(state),
            Input::ExpireOwner { owner, .. } => self.expire_owner(&owner),
            Input::DropCreation { id, .. } => self.drop_creation(&id),
            Input::Version { .. } | Input::Tick { .. } => {}
        }
    }
}

#[cold]
#[inline(never)]
pub(super) fn unknown_executor(id: &str) -> Error {
    Error::UnknownExecutor { id: id.to_string() }
}

#[cfg(test)]
mod tests;
