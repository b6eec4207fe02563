#![cfg_attr(not(feature = "shared"), allow(dead_code))]
//! What a roster holds, and nothing that acts: the core's copy and this instance's
//! bookkeeping under one lock ([`State`]: the callers that wait, the running
//! document's specs, the wake-up, the probes in flight, and for a remote log the
//! membership: who this instance is, what it appended, whether it is fenced), and what
//! the roster's tasks share ([`Inner`]). The flows that change them are the modules
//! beside this one (`fold`, `requests`, `machines`, `probes`, `timers`, `writer`,
//! `fence`) and the remote log's tasks in `shared`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rota_core::{Document, ExecutorSpec, Input};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot, Notify};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::provisioner::Provisioner;
use crate::clock::Clock;
use crate::engine::HostEngine;
use crate::error::{HostError, Result};
use crate::event::Event;
use crate::probe::ProbeTls;
use crate::runtime::PolicyRuntime;
use crate::source::RosterSource;
use crate::telemetry;

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How one of this instance's requests ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    Granted {
        lease: u64,
        spec: Arc<ExecutorSpec>,
        role: String,
        hold: Option<Value>,
        /// Its clone number (`clones: "numbered"`).
        clone: Option<u32>,
        borrowed: bool,
        because: Option<rota_core::Because>,
    },
    Exhausted {
        role: String,
        reasons: Vec<String>,
    },
    TimedOut {
        reasons: Vec<String>,
    },
    Unavailable,
    Cancelled,
}

/// A request of this instance's that a caller awaits.
pub(crate) struct Waiter {
    pub tx: oneshot::Sender<Result<Outcome>>,
    pub role: String,
    pub requested_at: u64,
}

/// The startup preflight: the executors asked and not answered, and the builder
/// that waits for the outcome.
pub(crate) struct Starting {
    pub awaiting: BTreeSet<String>,
    pub done: Option<oneshot::Sender<Result<()>>>,
}

/// A message to the state-file writer.
pub(crate) enum WriterMsg {
    /// A `persist` output, as the core wrote it.
    Persist(Value),
    /// Answered once nothing is pending (`Ok`) or after a failed attempt (its error).
    Flush(oneshot::Sender<Result<()>>),
}

/// What one of this instance's appended entries is, for the fold to settle.
pub(crate) enum Mine {
    /// A request (`lease`, `tryLease`, `occupy`): settled by its outputs, or rejected.
    Request(String),
    /// A `report`, `exclude`, `resume`, `reload`: settled with its entry's outputs.
    Call(oneshot::Sender<Result<Vec<Value>>>),
    /// Anything else (`release`, `cancel`, machine results, leader entries).
    Plain,
}

/// What an append answers an entry's `on_append`: the log's `now`, or why not.
pub(crate) type AppendAnswer = std::result::Result<u64, String>;

/// An entry waiting for the remote log's next batch.
pub(crate) struct Queued {
    pub entry: String,
    /// A leader-only entry's epoch (a batch holds one epoch, or none).
    pub epoch: Option<u64>,
    pub mine: Mine,
    /// Told the append's `now` (or its error) once the batch is in the log.
    pub on_append: Option<oneshot::Sender<AppendAnswer>>,
}

/// Why an instance of a remote log fenced itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FenceKind {
    /// No heartbeat succeeded for the TTL.
    Lapsed,
    /// The log could not be read.
    Unreadable,
    /// The log expired this instance (an `expireOwner` of it that it did not append).
    Expired,
    /// A `version` entry this module does not fold: it never rejoins.
    Version,
}

#[derive(Debug, Clone)]
pub(crate) struct Fence {
    pub kind: FenceKind,
    pub reason: String,
    pub since_ms: u64,
}

impl Fence {
    pub fn error(&self) -> HostError {
        HostError::Fenced {
            reason: self.reason.clone(),
            since_ms: self.since_ms,
        }
    }
}

/// An instance's membership of a remote log (sql/PROTOCOL.md). The memory log has
/// none: its one instance owns every request and leads.
pub(crate) struct Member {
    /// This incarnation's id (`<name>:<8 hex>`): the owner of its requests.
    pub instance: String,
    pub folded_seq: u64,
    /// Its requests whose call failed while fenced: cancelled on rejoining.
    pub orphans: BTreeSet<String>,
    pub queue: VecDeque<Queued>,
    /// What this instance's appended entries are, by seq, until folded.
    pub sent: BTreeMap<u64, Mine>,
    /// The driver's append is in flight: an entry of this instance's that `sent`
    /// does not know yet waits for it (another reader must not fold it unsettled).
    pub appending: bool,
    pub fence: Option<Fence>,
    /// When the last heartbeat that succeeded was sent: the log cannot expire this
    /// instance before `beat_sent + ttl`, and may after (PROTOCOL.md, "Fenced").
    pub beat_sent: Instant,
    /// The log expired this incarnation: it takes a new id on rejoining.
    pub expired: bool,
    pub closed: bool,
    /// The leader epoch this instance holds (duties only while `Some`).
    pub epoch: Option<u64>,
    /// The seq of the last snapshot this instance wrote or started from.
    pub last_snapshot: u64,
    /// `(seq, stateHash)` after every entry, when the builder asked (tests).
    pub hashes: Option<Vec<(u64, String)>>,
    /// The `wakeAt` a tick was appended for (cleared when it arms again).
    pub tick_sent: Option<u64>,
}

impl Member {
    pub fn new(instance: String, folded_seq: u64) -> Member {
        Member {
            instance,
            folded_seq,
            orphans: BTreeSet::new(),
            queue: VecDeque::new(),
            sent: BTreeMap::new(),
            appending: false,
            fence: None,
            beat_sent: Instant::now(),
            expired: false,
            closed: false,
            epoch: None,
            last_snapshot: folded_seq,
            hashes: None,
            tick_sent: None,
        }
    }
}

/// The core's copy and this instance's bookkeeping, under one lock.
pub(crate) struct State {
    pub policy: PolicyRuntime,
    pub waiters: BTreeMap<String, Waiter>,
    /// How many of `waiters` ask for each role (the queue-length gauge).
    waiting: BTreeMap<String, usize>,
    /// The running document's executors; `None` after an input that may change it.
    specs: Option<BTreeMap<String, Arc<ExecutorSpec>>>,
    pub next_request: u64,
    pub wake_at: Option<u64>,
    /// Executors with a probe in flight here (one at a time each).
    pub probing: BTreeSet<String>,
    /// Executors whose unsupported health URL was already reported.
    pub unsupported_reported: BTreeSet<String>,
    pub starting: Option<Starting>,
    /// Inputs the fold's outputs call for (the release of a grant nobody awaits).
    pub follow_ups: Vec<Input>,
    /// `None` on the memory log.
    pub member: Option<Member>,
}

impl State {
    pub fn new(policy: PolicyRuntime, member: Option<Member>) -> State {
        State {
            policy,
            waiters: BTreeMap::new(),
            waiting: BTreeMap::new(),
            specs: None,
            next_request: 0,
            wake_at: None,
            probing: BTreeSet::new(),
            unsupported_reported: BTreeSet::new(),
            starting: None,
            follow_ups: Vec::new(),
            member,
        }
    }

    /// A new call may go in: not closed, not fenced.
    pub fn usable(&self) -> Result<()> {
        match &self.member {
            Some(member) if member.closed => Err(HostError::Closed),
            Some(Member {
                fence: Some(fence), ..
            }) => Err(fence.error()),
            _ => Ok(()),
        }
    }

    pub fn add_waiter(&mut self, request: String, waiter: Waiter) {
        let waiting = self.waiting.entry(waiter.role.clone()).or_default();
        *waiting += 1;
        if !waiter.role.is_empty() {
            telemetry::queue_length(&waiter.role, *waiting);
        }
        self.waiters.insert(request, waiter);
    }

    pub fn take_waiter(&mut self, request: &str) -> Option<Waiter> {
        let waiter = self.waiters.remove(request)?;
        if let Some(waiting) = self.waiting.get_mut(&waiter.role) {
            *waiting = waiting.saturating_sub(1);
            if !waiter.role.is_empty() {
                telemetry::queue_length(&waiter.role, *waiting);
            }
        }
        Some(waiter)
    }

    /// Ends every awaited request with `error` (a fence, a close): their ids.
    pub fn end_waiters(&mut self, error: impl Fn() -> HostError) -> Vec<String> {
        let ids: Vec<String> = self.waiters.keys().cloned().collect();
        for id in &ids {
            if let Some(waiter) = self.take_waiter(id) {
                let _ = waiter.tx.send(Err(error()));
            }
        }
        ids
    }

    /// Hands a request of this instance's its outcome (nobody waits: nothing to do).
    pub fn settle(&mut self, request: &str, outcome: Result<Outcome>) {
        if let Some(member) = self.member.as_mut() {
            member.orphans.remove(request);
        }
        if let Some(waiter) = self.take_waiter(request) {
            let _ = waiter.tx.send(outcome);
        }
    }

    /// The running document may have changed (a reload, a preflight, a snapshot).
    pub fn invalidate_specs(&mut self) {
        self.specs = None;
    }

    /// The running document's entry for `executor` (asked of the policy again after
    /// a change). Only a core that granted an executor it does not have would leave
    /// the id alone: then a spec with the id and the role.
    pub fn spec(&mut self, executor: &str, role: &str) -> Arc<ExecutorSpec> {
        if self.specs.is_none() {
            self.specs = self
                .policy
                .document()
                .ok()
                .and_then(|document| Document::from_json(&document, None).ok())
                .map(specs_of);
        }
        self.specs
            .as_ref()
            .and_then(|specs| specs.get(executor).cloned())
            .unwrap_or_else(|| Arc::new(bare_spec(executor, role)))
    }

    /// Specs already parsed (the builder's document).
    pub fn set_specs(&mut self, document: Document) {
        self.specs = Some(specs_of(document));
    }
}

fn specs_of(document: Document) -> BTreeMap<String, Arc<ExecutorSpec>> {
    document
        .executors
        .into_iter()
        .map(|spec| (spec.id.clone(), Arc::new(spec)))
        .collect()
}

fn bare_spec(executor: &str, role: &str) -> ExecutorSpec {
    ExecutorSpec {
        id: executor.to_string(),
        harness: String::new(),
        model: None,
        roles: vec![role.to_string()],
        slots: 1,
        role_caps: Default::default(),
        priority: rota_core::document::Priority::All(1.0),
        effort: None,
        health: None,
        cooldown: Default::default(),
        recovery: Default::default(),
        consecutive_failures: 0,
        disabled: false,
        provision: false,
        kind: None,
        account: None,
        budget: None,
        weight: 1,
        raw: Default::default(),
    }
}

/// What the remote log's instance adds to [`Inner`]: its timings, the log's clock as
/// estimated, the driver's wake-ups and the tasks that end with the instance.
pub(crate) struct Link {
    /// The instance TTL: fenced once no heartbeat succeeded for this long.
    pub ttl: Duration,
    /// The log's clock as this instance estimates it (from its appends and heartbeats).
    pub db_clock: Mutex<Clock>,
    /// An entry was queued.
    pub queued: Notify,
    /// The driver should read the log now.
    pub read_now: Notify,
    pub tasks: Mutex<Vec<AbortHandle>>,
}

/// What a roster's calls and tasks share.
pub(crate) struct Inner {
    pub state: Mutex<State>,
    /// The host's clock (the memory log's `now`).
    pub clock: Clock,
    /// The wake-up or the leader changed (the timer looks again).
    pub wake: Arc<Notify>,
    /// An entry was folded (`Roster::capacity_changed` looks again).
    pub folded: Notify,
    pub events: broadcast::Sender<Event>,
    /// The most recent host events (for callers that subscribe late).
    pub host_events: Mutex<VecDeque<Event>>,
    pub writer: Option<mpsc::UnboundedSender<WriterMsg>>,
    pub provisioner: Arc<dyn Provisioner>,
    pub probe_timeout: Duration,
    /// Whom `https://` probes trust; `None`: the Mozilla roots.
    pub probe_tls: Option<ProbeTls>,
    pub source: Option<RosterSource>,
    pub engine: HostEngine,
    pub runtime: tokio::runtime::Handle,
    /// `None` on the memory log.
    pub link: Option<Link>,
    /// The labelled metrics this roster counted (`Roster::metrics`).
    pub metrics: Mutex<super::metrics::Labelled>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The timer task holds only a Weak: wake it so that it sees the end.
        self.wake.notify_one();
    }
}

impl Inner {
    /// The log's clock: the host's, or the remote log's as estimated.
    pub fn now_ms(&self) -> u64 {
        match &self.link {
            None => self.clock.now_ms(),
            Some(link) => lock(&link.db_clock).now_ms(),
        }
    }

    /// Spawns a task; a remote log's instance ends its tasks when it ends.
    pub fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let handle = self.runtime.spawn(task);
        if let Some(link) = &self.link {
            let mut tasks = lock(&link.tasks);
            tasks.retain(|t| !t.is_finished());
            tasks.push(handle.abort_handle());
        }
    }
}
