//! The async roster on tokio: the policy module in wasmtime, and the IO it asks for.
//!
//! Every call becomes one input to the core (with `now` from the host's [`Clock`]);
//! the outputs are carried out at once: grants resolve the waiting `lease` futures,
//! `probe` starts an HTTP GET, `createMachine`/`deleteMachine`/`preflight` go to the
//! [`Provisioner`], `persist` goes to the state-file writer, `event` goes to `tracing`
//! and to subscribers. A timer task feeds a `tick` at the core's wake-up time.
//!
//! A [`Lease`] is released when dropped. A `lease` future dropped while it waits
//! cancels its request; a grant that races with that drop is released at once, so no
//! slot leaks either way.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use rota_core::{
    Document, Exclusion, ExclusionKind, ExecutorSpec, ExplainRequest, Explanation, Failure, Input,
    LeaseRequest, Level, Options, Output, PersistedState, Plan, Snapshot,
};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot, Notify};
use tracing::Instrument;

use crate::classify::{http_facts, io_facts};
use crate::clock::Clock;
use crate::engine::{HostEngine, PolicyModule};
use crate::error::{HostError, Result};
use crate::event::Event;
use crate::output;
use crate::probe::{probe, probe_with, ProbeOutcome, ProbeTls};
use crate::runtime::{PolicyRuntime, Step};
use crate::source::RosterSource;
use crate::state_file::{ModuleRule, StateFile, WriteError};
use crate::telemetry;

/// A boxed future, for the [`Provisioner`] trait.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Carries out the scheduler seed's machine work for executors with `provision`, and
/// preflights. The default one has no machines (creation fails, so the core pauses
/// that executor) and cannot preflight.
pub trait Provisioner: Send + Sync + 'static {
    /// Creates a machine for `request` on `executor`; its hold (any JSON) on success.
    fn create_machine(&self, executor: &str, request: &str) -> BoxFuture<Result<Value, String>>;
    /// Deletes a machine a released lease held. The lease's slot frees when this
    /// ends; an error frees it too, and the core names the machine for a sweep.
    fn delete_machine(&self, executor: &str, hold: Value) -> BoxFuture<Result<(), String>>;
    /// Checks an executor: every one before the roster serves, and those a reload
    /// adds or grows (the scheduler seed's preflight).
    fn preflight(&self, executor: &str) -> BoxFuture<Result<(), String>>;
    /// Whether `preflight` checks anything: then the roster preflights at start and
    /// on reloads unless the builder says otherwise (`RosterBuilder::preflight`).
    fn can_preflight(&self) -> bool {
        true
    }
}

/// No machines; no preflight (every one would pass).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProvisioner;

impl Provisioner for NoProvisioner {
    fn create_machine(&self, _executor: &str, _request: &str) -> BoxFuture<Result<Value, String>> {
        Box::pin(async { Err("this host has no machine provisioner".to_string()) })
    }
    fn delete_machine(&self, _executor: &str, _hold: Value) -> BoxFuture<Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
    fn preflight(&self, _executor: &str) -> BoxFuture<Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
    fn can_preflight(&self) -> bool {
        false
    }
}

/// What a lease request may carry besides its role (see DESIGN.md, "Requests").
#[derive(Debug, Clone, Default)]
pub struct LeaseOptions {
    /// Executors the request must not use.
    pub avoid: Vec<String>,
    /// The executor it would rather have.
    pub prefer: Option<String>,
    /// The only executor it may use.
    pub pin: Option<String>,
    /// Its place in the queue among requests of its role: lower first (default 0).
    pub rank: Option<i64>,
    /// When the work arrived (epoch ms).
    pub event_time: Option<u64>,
    /// A label for logs and events (`"job 605"`).
    pub label: Option<String>,
    /// Give up after this long (the core times the request out).
    pub timeout: Option<Duration>,
}

/// What to explain ([`Roster::explain`]): a role, and what a request for it would
/// carry; or a waiting request by its id.
///
/// ```
/// let request = rota_host::Explain::role("coder").avoid(["codex"]).prefer("claude-opus");
/// let request: rota_host::ExplainRequest = request.into();
/// assert_eq!(request.avoid, ["codex"]);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Explain(ExplainRequest);

impl Explain {
    /// A request for `role` with nothing else.
    pub fn role(role: impl Into<String>) -> Explain {
        Explain(ExplainRequest {
            role: role.into(),
            avoid: Vec::new(),
            prefer: None,
            pin: None,
            request: None,
        })
    }

    /// The waiting request `id` (its role, `avoid` and `pin`).
    pub fn waiting(id: impl Into<String>) -> Explain {
        let mut explain = Explain::role("");
        explain.0.request = Some(id.into());
        explain
    }

    /// Executors the request must not use.
    pub fn avoid<S: Into<String>>(mut self, ids: impl IntoIterator<Item = S>) -> Explain {
        self.0.avoid = ids.into_iter().map(Into::into).collect();
        self
    }

    /// The executor the request would rather have.
    pub fn prefer(mut self, id: impl Into<String>) -> Explain {
        self.0.prefer = Some(id.into());
        self
    }

    /// The only executor the request may use.
    pub fn pin(mut self, id: impl Into<String>) -> Explain {
        self.0.pin = Some(id.into());
        self
    }
}

impl From<Explain> for ExplainRequest {
    fn from(explain: Explain) -> ExplainRequest {
        explain.0
    }
}

/// How a request ended.
#[derive(Debug)]
enum Outcome {
    Granted {
        lease: u64,
        spec: Arc<ExecutorSpec>,
        role: String,
        hold: Option<Value>,
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

enum WriterMsg {
    /// A `persist` output, as the core wrote it.
    Persist(Value),
    /// Answered once nothing is pending (`Ok`) or after a failed attempt (its error).
    Flush(oneshot::Sender<Result<()>>),
}

/// A request of this host's that waits for its outcome.
struct Waiter {
    tx: oneshot::Sender<Outcome>,
    role: String,
    requested_at: u64,
}

/// The startup preflight while the roster starts: the executors whose preflight was
/// asked and not answered, and the builder that waits for the outcome.
struct Starting {
    awaiting: BTreeSet<String>,
    done: Option<oneshot::Sender<Result<()>>>,
}

struct Core {
    policy: PolicyRuntime,
    starting: Option<Starting>,
    waiters: BTreeMap<String, Waiter>,
    /// How many of `waiters` ask for each role (the queue-length gauge).
    waiting: BTreeMap<String, usize>,
    /// The running document's executors; `None` after an input that may change it
    /// (a reload, a preflight result) until the next grant asks.
    specs: Option<BTreeMap<String, Arc<ExecutorSpec>>>,
    next_request: u64,
    wake_at: Option<u64>,
    /// Executors with a probe in flight (one at a time each).
    probing: BTreeSet<String>,
    /// Executors whose unsupported health URL was already reported.
    unsupported_reported: BTreeSet<String>,
}

struct Inner {
    core: Mutex<Core>,
    clock: Clock,
    notify: Arc<Notify>,
    events: broadcast::Sender<Event>,
    /// The most recent host events (for callers that subscribe late).
    host_events: Mutex<VecDeque<Event>>,
    writer: Option<mpsc::UnboundedSender<WriterMsg>>,
    provisioner: Arc<dyn Provisioner>,
    probe_timeout: Duration,
    /// Whom `https://` probes trust; `None`: the Mozilla roots.
    probe_tls: Option<ProbeTls>,
    source: Option<RosterSource>,
    engine: HostEngine,
    runtime: tokio::runtime::Handle,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The timer task holds only a Weak: wake it so that it sees the end.
        self.notify.notify_one();
    }
}

const HOST_EVENTS_KEPT: usize = 256;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Core {
    fn add_waiter(&mut self, request: String, waiter: Waiter) {
        let waiting = self.waiting.entry(waiter.role.clone()).or_default();
        *waiting += 1;
        if !waiter.role.is_empty() {
            telemetry::queue_length(&waiter.role, *waiting);
        }
        self.waiters.insert(request, waiter);
    }

    fn take_waiter(&mut self, request: &str) -> Option<Waiter> {
        let waiter = self.waiters.remove(request)?;
        if let Some(waiting) = self.waiting.get_mut(&waiter.role) {
            *waiting = waiting.saturating_sub(1);
            if !waiter.role.is_empty() {
                telemetry::queue_length(&waiter.role, *waiting);
            }
        }
        Some(waiter)
    }

    /// Hands a request of this host's its outcome (nobody waits for it any more:
    /// nothing to do).
    fn settle(&mut self, request: &str, outcome: Outcome) {
        if let Some(waiter) = self.take_waiter(request) {
            let _ = waiter.tx.send(outcome);
        }
    }

    /// The running document's entry for `executor` (asked of the policy again after
    /// a change). Only a core that granted an executor it does not have would leave
    /// the id alone: then a spec with the id and the role.
    fn spec(&mut self, executor: &str, role: &str) -> Arc<ExecutorSpec> {
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
}

fn specs_of(document: Document) -> BTreeMap<String, Arc<ExecutorSpec>> {
    document
        .executors
        .into_iter()
        .map(|spec| (spec.id.clone(), Arc::new(spec)))
        .collect()
}

pub(crate) fn bare_spec(executor: &str, role: &str) -> ExecutorSpec {
    ExecutorSpec {
        id: executor.to_string(),
        harness: String::new(),
        model: None,
        roles: vec![role.to_string()],
        slots: 1,
        role_caps: Default::default(),
        priority: rota_core::document::Priority::All(1.0),
        health: None,
        cooldown: Default::default(),
        disabled: false,
        provision: false,
        kind: None,
        raw: Default::default(),
    }
}

impl Inner {
    fn publish(&self, event: Event) {
        event.log();
        if event.source == crate::event::Source::Host {
            let mut kept = lock(&self.host_events);
            if kept.len() == HOST_EVENTS_KEPT {
                kept.pop_front();
            }
            kept.push_back(event.clone());
        }
        let _ = self.events.send(event);
    }

    /// Feeds one input and carries out its outputs (and those of any follow-up input
    /// they cause); the first input's step.
    fn feed(self: &Arc<Inner>, input: Input) -> Result<Step> {
        let mut core = lock(&self.core);
        self.feed_locked(&mut core, input)
    }

    fn feed_locked(self: &Arc<Inner>, core: &mut Core, input: Input) -> Result<Step> {
        let mut pending = VecDeque::from([input]);
        let mut first: Option<Result<Step>> = None;
        while let Some(input) = pending.pop_front() {
            if matches!(input, Input::Reload { .. } | Input::PreflightResult { .. }) {
                core.specs = None;
            }
            let value = serde_json::to_value(&input)
                .map_err(|e| HostError::Abi(format!("cannot encode an input: {e}")))?;
            let result = core.policy.step(&value);
            for event in core.policy.take_events() {
                self.publish(event);
            }
            match &result {
                Ok(step) => {
                    core.wake_at = step.wake_at;
                    for raw in &step.outputs {
                        match output::read(raw) {
                            Ok(output) => self.dispatch(core, output, raw, &mut pending),
                            Err(unreadable) => self.publish(unreadable),
                        }
                    }
                }
                Err(error) if first.is_some() => {
                    // A follow-up (an orphaned grant's release) failed: say so.
                    self.publish(
                        Event::host(Level::Warn, "followUpFailed", error.to_string())
                            .with("input", input.kind()),
                    );
                }
                Err(_) => {}
            }
            if first.is_none() {
                first = Some(result);
            }
        }
        self.notify.notify_one();
        first.unwrap_or(Err(HostError::Closed))
    }

    /// Carries out one output (`raw`: as the guest wrote it, for what passes through).
    fn dispatch(
        self: &Arc<Inner>,
        core: &mut Core,
        output: Output,
        raw: &Value,
        pending: &mut VecDeque<Input>,
    ) {
        let now = self.clock.now_ms();
        match output {
            Output::Granted {
                request,
                lease,
                executor,
                role,
                hold,
                ..
            } => {
                let waiter = core.take_waiter(&request);
                telemetry::granted(
                    &role,
                    &executor,
                    waiter.as_ref().map(|w| now.saturating_sub(w.requested_at)),
                );
                let outcome = Outcome::Granted {
                    lease,
                    spec: core.spec(&executor, &role),
                    role,
                    hold,
                };
                let delivered = match waiter {
                    Some(waiter) => waiter.tx.send(outcome).is_ok(),
                    None => false,
                };
                if !delivered {
                    // Nobody waits any more (the caller gave up): give it back.
                    pending.push_back(Input::Release { now, lease });
                }
            }
            Output::Exhausted {
                request,
                role,
                reasons,
                ..
            } => core.settle(&request, Outcome::Exhausted { role, reasons }),
            Output::TimedOut {
                request, reasons, ..
            } => core.settle(&request, Outcome::TimedOut { reasons }),
            Output::Unavailable { request, .. } => core.settle(&request, Outcome::Unavailable),
            Output::Cancelled { request, .. } => core.settle(&request, Outcome::Cancelled),
            // The report is for people (`Roster::explain`); nothing to do.
            Output::Waiting { .. } => {}
            Output::Probe { executor, url } => {
                if core.probing.insert(executor.clone()) {
                    self.spawn_probe(executor, url);
                }
            }
            Output::CreateMachine {
                request, executor, ..
            } => self.spawn_create(executor, request),
            Output::DeleteMachine {
                executor,
                hold,
                lease,
                ..
            } => self.spawn_delete(executor, Some(hold), lease),
            Output::Preflight { executor } => {
                if let Some(starting) = core.starting.as_mut() {
                    starting.awaiting.insert(executor.clone());
                }
                self.spawn_preflight(executor);
            }
            Output::StartFailed { executor, error } => {
                if let Some(done) = core.starting.take().and_then(|s| s.done) {
                    let _ = done.send(Err(HostError::StartFailed { executor, error }));
                }
            }
            Output::Persist { .. } => {
                // The state-file rule (in the guest) merges it as the core wrote it.
                if let Some(writer) = &self.writer {
                    let _ = writer.send(WriterMsg::Persist(raw.clone()));
                }
            }
            Output::Event {
                level,
                name,
                message,
                fields,
            } => {
                let event = Event::core(level, &name, message, &fields);
                if event.name == "excluded" {
                    telemetry::excluded(event.text("kind").unwrap_or("?"));
                }
                self.publish(event);
            }
        }
    }

    fn spawn_probe(self: &Arc<Inner>, executor: String, url: String) {
        let weak = Arc::downgrade(self);
        let timeout = self.probe_timeout;
        let tls = self.probe_tls.clone();
        self.runtime.spawn(async move {
            let outcome = match &tls {
                Some(tls) => probe_with(&url, timeout, tls).await,
                None => probe(&url, timeout).await,
            };
            let Some(inner) = weak.upgrade() else { return };
            let mut core = lock(&inner.core);
            core.probing.remove(&executor);
            if let ProbeOutcome::Unsupported(reason) = &outcome {
                if core.unsupported_reported.insert(executor.clone()) {
                    inner.publish(
                        Event::host(
                            Level::Warn,
                            "probeUnsupported",
                            format!("cannot probe {executor}'s health URL {url}: {reason}; it counts as down"),
                        )
                        .with("executor", executor.clone())
                        .with("url", url.clone()),
                    );
                }
            }
            telemetry::probed(&executor, outcome.is_up());
            let input = Input::ProbeResult {
                now: inner.clock.now_ms(),
                executor,
                up: outcome.is_up(),
            };
            if let Err(error) = inner.feed_locked(&mut core, input) {
                inner.publish(Event::host(Level::Warn, "probeResultRejected", error.to_string()));
            }
        });
    }

    fn spawn_create(self: &Arc<Inner>, executor: String, request: String) {
        let weak = Arc::downgrade(self);
        let provisioner = self.provisioner.clone();
        self.runtime.spawn(async move {
            let result = provisioner.create_machine(&executor, &request).await;
            let Some(inner) = weak.upgrade() else { return };
            let now = inner.clock.now_ms();
            let input = match result {
                Ok(hold) => Input::MachineCreated {
                    now,
                    id: request,
                    hold,
                    checked: None,
                },
                Err(message) => Input::MachineFailed {
                    now,
                    id: request,
                    message,
                    reason: None,
                },
            };
            if let Err(error) = inner.feed(input) {
                inner.publish(Event::host(
                    Level::Warn,
                    "machineResultRejected",
                    error.to_string(),
                ));
            }
        });
    }

    /// Deletes a released lease's machine; with a `lease`, the core holds its slot
    /// until the answer (`machineDeleted`).
    fn spawn_delete(self: &Arc<Inner>, executor: String, hold: Option<Value>, lease: Option<u64>) {
        let weak = Arc::downgrade(self);
        let provisioner = self.provisioner.clone();
        self.runtime.spawn(async move {
            let result = provisioner
                .delete_machine(&executor, hold.unwrap_or(Value::Null))
                .await;
            let (Some(lease), Some(inner)) = (lease, weak.upgrade()) else {
                return;
            };
            let input = Input::MachineDeleted {
                now: inner.clock.now_ms(),
                lease,
                ok: result.is_ok(),
                error: result.err(),
            };
            if let Err(error) = inner.feed(input) {
                inner.publish(Event::host(
                    Level::Warn,
                    "machineDeletedRejected",
                    error.to_string(),
                ));
            }
        });
    }

    fn spawn_preflight(self: &Arc<Inner>, executor: String) {
        let weak = Arc::downgrade(self);
        let provisioner = self.provisioner.clone();
        self.runtime.spawn(async move {
            let result = provisioner.preflight(&executor).await;
            let Some(inner) = weak.upgrade() else { return };
            let input = Input::PreflightResult {
                now: inner.clock.now_ms(),
                executor: executor.clone(),
                ok: result.is_ok(),
                error: result.err(),
            };
            let mut core = lock(&inner.core);
            if let Err(error) = inner.feed_locked(&mut core, input) {
                inner.publish(Event::host(
                    Level::Warn,
                    "preflightResultRejected",
                    error.to_string(),
                ));
            }
            // The start's last preflight passed (a failure ended the start already).
            if let Some(starting) = core.starting.as_mut() {
                starting.awaiting.remove(&executor);
                if starting.awaiting.is_empty() {
                    if let Some(done) = core.starting.take().and_then(|s| s.done) {
                        let _ = done.send(Ok(()));
                    }
                }
            }
        });
    }

    fn query<T>(&self, f: impl FnOnce(&mut PolicyRuntime) -> Result<T>) -> Result<T> {
        let mut core = lock(&self.core);
        let result = f(&mut core.policy);
        for event in core.policy.take_events() {
            self.publish(event);
        }
        result
    }
}

/// The timer: a `tick` at every wake-up time the core asks for.
async fn timer(weak: Weak<Inner>, notify: Arc<Notify>, clock: Clock) {
    loop {
        let wake_at = match weak.upgrade() {
            Some(inner) => lock(&inner.core).wake_at,
            None => return,
        };
        match wake_at {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(clock.instant_at(at)) => {
                        let Some(inner) = weak.upgrade() else { return };
                        let now = clock.now_ms().max(at);
                        if let Err(error) = inner.feed(Input::Tick { now }) {
                            inner.publish(Event::host(Level::Warn, "tickFailed", error.to_string()));
                        }
                    }
                    () = notify.notified() => {}
                }
            }
            None => notify.notified().await,
        }
    }
}

/// How the state-file writer retries a failed write: `first`, doubling up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateRetry {
    /// The wait after the first failed attempt.
    pub first: Duration,
    /// The longest wait, however many attempts failed.
    pub max: Duration,
}

impl Default for StateRetry {
    fn default() -> Self {
        StateRetry {
            first: Duration::from_millis(500),
            max: Duration::from_secs(30),
        }
    }
}

impl StateRetry {
    fn after(&self, failures: u32) -> Duration {
        let doubled = self
            .first
            .saturating_mul(1u32 << failures.saturating_sub(1).min(20));
        doubled.min(self.max)
    }
}

/// One read-merge-write of every pending persist, off the async threads.
async fn write_pending(
    file: &StateFile,
    rule: &Arc<Mutex<ModuleRule>>,
    pending: &[Value],
    now: u64,
) -> (std::result::Result<(), WriteError>, Vec<Event>) {
    let (file, rule, pending) = (file.clone(), rule.clone(), pending.to_vec());
    let written = tokio::task::spawn_blocking(move || {
        let mut events = Vec::new();
        let result = file.write(&mut *lock(&rule), &pending, now, &mut events);
        (result, events)
    })
    .await;
    written.unwrap_or_else(|e| {
        let source = std::io::Error::other(e.to_string());
        let path = PathBuf::new();
        (Err(WriteError::Io { path, source }), Vec::new())
    })
}

/// What [`Roster::flush`] answers for a failed attempt: `Read` when the file could not
/// be read, otherwise `Write` (the policy module's error as its source's text).
fn flush_error(error: &WriteError, file: &Path) -> HostError {
    // An io::Error is not Clone; the OS error (ENOSPC ...) carries over as it is.
    let copy = |source: &std::io::Error| match source.raw_os_error() {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::new(source.kind(), source.to_string()),
    };
    match error {
        WriteError::Unreadable { path, source } => HostError::Read {
            path: path.clone(),
            source: copy(source),
        },
        WriteError::Io { path, source } => HostError::Write {
            path: path.clone(),
            source: copy(source),
        },
        WriteError::Rule(error) => HostError::Write {
            path: file.to_path_buf(),
            source: std::io::Error::other(error.to_string()),
        },
    }
}

/// The state-file writer. Persists queue up; each attempt writes all of them at once
/// (read, merge by the core's rule, write, under the file's lock). A failed attempt
/// keeps them and tries again after a back-off (`stateFileUnreadable` or
/// `stateFileWriteFailed`), merging again what came since, until the file holds
/// every pending entry (`stateFileRecovered`). Never writes over what it could not
/// read. A flush is answered once nothing is pending (`Ok`) or after an attempt that
/// failed (that attempt's error; the entries stay pending and are retried).
async fn writer(
    file: StateFile,
    rule: Arc<Mutex<ModuleRule>>,
    mut rx: mpsc::UnboundedReceiver<WriterMsg>,
    weak: Weak<Inner>,
    clock: Clock,
    retry: StateRetry,
) {
    let mut pending: Vec<Value> = Vec::new();
    let mut flushes: Vec<oneshot::Sender<Result<()>>> = Vec::new();
    let mut failures = 0u32;
    let mut retry_at = tokio::time::Instant::now();
    let mut open = true;
    while open || !pending.is_empty() {
        let message = if !open {
            None
        } else if failures > 0 && !pending.is_empty() {
            tokio::select! {
                message = rx.recv() => Some(message),
                () = tokio::time::sleep_until(retry_at) => None,
            }
        } else {
            Some(rx.recv().await)
        };
        let mut messages = Vec::new();
        match message {
            Some(Some(message)) => messages.push(message),
            Some(None) => open = false,
            None => {}
        }
        while let Ok(more) = rx.try_recv() {
            messages.push(more);
        }
        for message in messages {
            match message {
                WriterMsg::Persist(persist) => pending.push(persist),
                WriterMsg::Flush(done) => flushes.push(done),
            }
        }
        let due = failures == 0 || !open || tokio::time::Instant::now() >= retry_at;
        // This round's attempt, if it failed: what waiting flushes answer.
        let mut failed: Option<WriteError> = None;
        if !pending.is_empty() && due {
            let (result, mut events) = write_pending(&file, &rule, &pending, clock.now_ms()).await;
            telemetry::state_written(result.is_ok());
            let path = file.path().display().to_string();
            match result {
                Ok(()) => {
                    if failures > 0 {
                        events.push(
                            Event::host(
                                Level::Info,
                                "stateFileRecovered",
                                format!("the state file {path} is written again after {failures} failed attempts"),
                            )
                            .with("path", path)
                            .with("attempts", failures),
                        );
                    }
                    pending.clear();
                    failures = 0;
                }
                Err(error) => {
                    failures += 1;
                    let wait = retry.after(failures);
                    retry_at = tokio::time::Instant::now() + wait;
                    let name = match error {
                        WriteError::Unreadable { .. } => "stateFileUnreadable",
                        _ => "stateFileWriteFailed",
                    };
                    let again = if open {
                        format!(
                            "; retrying in {}",
                            rota_core::format_duration(wait.as_millis() as u64)
                        )
                    } else {
                        "; the roster has closed, not retrying".to_string()
                    };
                    events.push(
                        Event::host(
                            Level::Warn,
                            name,
                            format!("{error}: {} pending changes kept{again}", pending.len()),
                        )
                        .with("path", path)
                        .with("error", error.to_string())
                        .with("retryInMs", if open { wait.as_millis() as u64 } else { 0 }),
                    );
                    failed = Some(error);
                    if !open {
                        pending.clear();
                    }
                }
            }
            match weak.upgrade() {
                Some(inner) => events.into_iter().for_each(|e| inner.publish(e)),
                None => events.iter().for_each(Event::log),
            }
        }
        if let Some(error) = failed {
            for done in flushes.drain(..) {
                let _ = done.send(Err(flush_error(&error, file.path())));
            }
        } else if pending.is_empty() {
            for done in flushes.drain(..) {
                let _ = done.send(Ok(()));
            }
        }
    }
    for done in flushes {
        let _ = done.send(Ok(()));
    }
}

/// Builds a [`Roster`].
#[must_use]
pub struct RosterBuilder {
    document: Option<Value>,
    source: RosterSource,
    options: Options,
    state_file: Option<PathBuf>,
    state_retry: StateRetry,
    module: Option<PathBuf>,
    loaded: Option<PolicyModule>,
    engine: Option<HostEngine>,
    provisioner: Arc<dyn Provisioner>,
    probe_timeout: Duration,
    probe_tls: Option<ProbeTls>,
    clock: Option<Clock>,
    checkpoint_every: Option<usize>,
    preflight: Option<bool>,
    preflight_reloads: Option<bool>,
}

impl RosterBuilder {
    /// Whether every executor is preflighted before the roster serves (a failure
    /// fails `build`). Default: when the provisioner can preflight, or the options
    /// say `preflight`.
    pub fn preflight(mut self, on: bool) -> Self {
        self.preflight = Some(on);
        self
    }

    /// Whether executors a reload adds or grows are preflighted first. Default: the
    /// options' `preflightReloads`, or whenever the roster preflights.
    pub fn preflight_reloads(mut self, on: bool) -> Self {
        self.preflight_reloads = Some(on);
        self
    }

    /// The roster document itself (instead of files).
    pub fn document(mut self, document: Value) -> Self {
        self.document = Some(document);
        self
    }

    /// The user's roster file.
    pub fn roster_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.source.roster = Some(path.into());
        self
    }

    /// A repository roster merged over the user's.
    pub fn repo_overlay(mut self, path: impl Into<PathBuf>) -> Self {
        self.source.repo = Some(path.into());
        self
    }

    /// Only these executors (`--executors a,b`).
    pub fn executors(mut self, ids: Vec<String>) -> Self {
        self.source.executors = ids;
        self
    }

    /// The policy's options (event level, kinds, ...).
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Exclusions that outlive a run: read at start, written on every persist.
    pub fn state_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.state_file = Some(path.into());
        self
    }

    /// How a failed state-file write is retried (default: 500 ms, doubling to 30 s).
    pub fn state_retry(mut self, retry: StateRetry) -> Self {
        self.state_retry = retry;
        self
    }

    /// A policy module file instead of the bundled one.
    pub fn module_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.module = Some(path.into());
        self
    }

    /// A module already loaded (and compiled): rosters can share one.
    pub fn module(mut self, module: PolicyModule) -> Self {
        self.loaded = Some(module);
        self
    }

    /// An engine of your own (default: [`HostEngine::shared`]).
    pub fn engine(mut self, engine: HostEngine) -> Self {
        self.engine = Some(engine);
        self
    }

    /// Who creates and deletes machines and runs preflights (default: [`NoProvisioner`]).
    pub fn provisioner(mut self, provisioner: Arc<dyn Provisioner>) -> Self {
        self.provisioner = provisioner;
        self
    }

    /// How long a health probe may take before it counts as down (default 5 s).
    pub fn probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = timeout;
        self
    }

    /// Whom `https://` health probes trust (default: the Mozilla roots), e.g.
    /// `ProbeTls::with_roots_pem` for a private CA or a self-signed engine.
    pub fn probe_tls(mut self, tls: ProbeTls) -> Self {
        self.probe_tls = Some(tls);
        self
    }

    /// The clock the host reads (default: the system's; tests start one at a fixed time).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Accepted inputs between checkpoints of the guest's state.
    pub fn checkpoint_every(mut self, inputs: usize) -> Self {
        self.checkpoint_every = Some(inputs);
        self
    }

    /// Loads the module, builds the policy, restores the state file, starts the tasks.
    pub async fn build(self) -> Result<Roster> {
        telemetry::describe();
        let runtime = tokio::runtime::Handle::current();
        let source = self.document.is_none().then(|| self.source.clone());
        let (document, warnings) = match (&self.document, &source) {
            (Some(document), _) => (document.clone(), Vec::new()),
            (None, Some(source)) => source.load_with_warnings()?,
            (None, None) => return Err(HostError::Closed),
        };
        let engine = match (&self.engine, &self.loaded) {
            (Some(engine), _) => engine.clone(),
            (None, Some(module)) => module.engine().clone(),
            (None, None) => HostEngine::shared()?,
        };
        let module = match self.loaded {
            Some(module) => module,
            None => load_module(&engine, self.module.as_deref()).await?,
        };
        // The seed preflights whenever it can: at start and on reloads.
        let mut core_options = self.options.clone();
        core_options.preflight = self
            .preflight
            .unwrap_or(core_options.preflight || self.provisioner.can_preflight());
        core_options.preflight_reloads = self
            .preflight_reloads
            .unwrap_or(core_options.preflight_reloads || core_options.preflight);
        let preflight = core_options.preflight;
        let options = serde_json::to_value(&core_options)
            .map_err(|e| HostError::Abi(format!("cannot encode the options: {e}")))?;
        let mut policy = PolicyRuntime::new(module, &document, &options)?;
        let secrets = secret_warnings(&mut policy, &document, &options);
        if let Some(every) = self.checkpoint_every {
            policy.set_checkpoint_every(every);
        }
        let clock = self.clock.unwrap_or_else(Clock::system);
        let notify = Arc::new(Notify::new());
        let (events, _) = broadcast::channel(1024);
        let state_file = self.state_file.map(StateFile::new);
        let (writer_tx, writer_rx) = match &state_file {
            Some(_) => {
                let (tx, rx) = mpsc::unbounded_channel();
                (Some(tx), Some(rx))
            }
            None => (None, None),
        };
        let inner = Arc::new(Inner {
            core: Mutex::new(Core {
                policy,
                starting: None,
                waiters: BTreeMap::new(),
                waiting: BTreeMap::new(),
                specs: Document::from_json(&document, None).ok().map(specs_of),
                next_request: 0,
                wake_at: None,
                probing: BTreeSet::new(),
                unsupported_reported: BTreeSet::new(),
            }),
            clock,
            notify: notify.clone(),
            events,
            host_events: Mutex::new(VecDeque::new()),
            writer: writer_tx,
            provisioner: self.provisioner,
            probe_timeout: self.probe_timeout,
            probe_tls: self.probe_tls,
            source,
            engine,
            runtime: runtime.clone(),
        });
        for warning in warnings {
            inner.publish(narrow_warning(&warning));
        }
        secrets.into_iter().for_each(|e| inner.publish(e));
        if let (Some(file), Some(rx)) = (state_file, writer_rx) {
            let rule = Arc::new(Mutex::new(ModuleRule::new(
                lock(&inner.core).policy.module().clone(),
            )));
            let now = clock.now_ms();
            let (reader, reader_rule) = (file.clone(), rule.clone());
            let (loaded, events) = tokio::task::spawn_blocking(move || {
                let mut events = Vec::new();
                let loaded = reader.load(&mut *lock(&reader_rule), now, &mut events);
                (loaded, events)
            })
            .await
            .map_err(|e| HostError::Abi(format!("the state-file reader failed: {e}")))?;
            events.into_iter().for_each(|e| inner.publish(e));
            match loaded {
                Ok(Some(state)) => {
                    let state: PersistedState = serde_json::from_value(state)
                        .map_err(|e| HostError::Abi(format!("a restore state: {e}")))?;
                    inner.feed(Input::Restore { now, state })?;
                }
                Ok(None) => {}
                Err(error) => {
                    let name = match error {
                        WriteError::Unreadable { .. } => "stateFileUnreadable",
                        _ => "stateFileWriteFailed",
                    };
                    let path = file.path().display().to_string();
                    inner.publish(
                        Event::host(
                            Level::Warn,
                            name,
                            format!("{error}: starting without its exclusions; writes wait until it can be read"),
                        )
                        .with("path", path)
                        .with("error", error.to_string()),
                    );
                }
            }
            runtime.spawn(writer(
                file,
                rule,
                rx,
                Arc::downgrade(&inner),
                clock,
                self.state_retry,
            ));
        }
        runtime.spawn(timer(Arc::downgrade(&inner), notify, clock));
        if preflight {
            // The core asked for every executor's preflight when it was built: a tick
            // carries those outputs out, and the roster serves once they all pass.
            let (done, started) = oneshot::channel();
            lock(&inner.core).starting = Some(Starting {
                awaiting: BTreeSet::new(),
                done: Some(done),
            });
            inner.feed(Input::Tick {
                now: clock.now_ms(),
            })?;
            let nothing_asked = {
                let mut core = lock(&inner.core);
                let empty = core
                    .starting
                    .as_ref()
                    .is_some_and(|s| s.awaiting.is_empty());
                if empty {
                    core.starting = None;
                }
                empty
            };
            if !nothing_asked {
                started.await.map_err(|_| HostError::Closed)??;
            }
        }
        Ok(Roster { inner })
    }
}

/// The exclusion a report put in force on `executor`, from its `excluded` event. (An
/// output that cannot be read was published as `outputUnreadable` when the step's
/// outputs were carried out; here it is passed over.)
pub(crate) fn exclusion_from(outputs: &[Value], executor: &str) -> Option<Exclusion> {
    let fields = outputs.iter().find_map(|raw| {
        let Output::Event { name, fields, .. } = output::read(raw).ok()? else {
            return None;
        };
        let on_executor = fields.get("executor").and_then(Value::as_str) == Some(executor);
        (name == "excluded" && on_executor).then_some(fields)
    })?;
    Some(Exclusion {
        id: executor.to_string(),
        reason: fields.get("reason")?.as_str()?.to_string(),
        kind: serde_json::from_value(fields.get("kind")?.clone()).ok()?,
        until: fields.get("until").and_then(Value::as_u64),
    })
}

/// A literal secret in an executor's `env` (the core's `check` finds it): a warning
/// event per value, naming its place, never the value. The document still runs.
fn secret_warnings(policy: &mut PolicyRuntime, document: &Value, options: &Value) -> Vec<Event> {
    let Ok(check) = policy.check(document, options) else {
        return Vec::new();
    };
    check
        .warnings
        .into_iter()
        .map(|w| {
            Event::host(
                Level::Warn,
                "literalSecret",
                format!("roster: {}", w.message),
            )
            .with("path", w.path)
        })
        .collect()
}

/// `--executors` named ids the roster does not have: ignored, and said.
fn narrow_warning(warning: &rota_core::Violation) -> Event {
    Event::host(Level::Warn, "narrowIgnored", warning.message.clone())
}

async fn load_module(engine: &HostEngine, path: Option<&Path>) -> Result<PolicyModule> {
    let engine = engine.clone();
    let path = path.map(Path::to_path_buf);
    tokio::task::spawn_blocking(move || engine.load(path.as_deref()))
        .await
        .map_err(|e| HostError::Abi(format!("the module loader failed: {e}")))?
}

/// A roster of executors leased by role. Cheap to clone.
#[derive(Clone)]
pub struct Roster {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Roster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Roster").finish_non_exhaustive()
    }
}

/// Ends a request whose `lease` future is dropped before it resolves: a grant that
/// already arrived is released, a waiting request is cancelled.
struct CancelGuard {
    inner: Arc<Inner>,
    request: String,
    /// `None` once the outcome has been taken.
    rx: Option<oneshot::Receiver<Outcome>>,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else { return };
        // Outcomes are sent under the core lock: holding it, `try_recv` is definitive.
        let mut core = lock(&self.inner.core);
        let now = self.inner.clock.now_ms();
        let input = match rx.try_recv() {
            Ok(Outcome::Granted { lease, .. }) => Input::Release { now, lease },
            Ok(_) => return,
            Err(_) => {
                core.take_waiter(&self.request);
                Input::Cancel {
                    now,
                    id: self.request.clone(),
                }
            }
        };
        // A cancel of a request that has just ended is rejected, harmlessly.
        let _ = self.inner.feed_locked(&mut core, input);
    }
}

impl Roster {
    /// A builder: say where the roster comes from, then `build().await`.
    pub fn builder() -> RosterBuilder {
        RosterBuilder {
            document: None,
            source: RosterSource::default(),
            options: Options::default(),
            state_file: None,
            state_retry: StateRetry::default(),
            module: None,
            loaded: None,
            engine: None,
            provisioner: Arc::new(NoProvisioner),
            probe_timeout: Duration::from_secs(5),
            probe_tls: None,
            clock: None,
            checkpoint_every: None,
            preflight: None,
            preflight_reloads: None,
        }
    }

    /// The host's clock (epoch ms).
    pub fn now_ms(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    /// Every event from now on (core and host).
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.inner.events.subscribe()
    }

    /// The most recent host events (startup ones included).
    pub fn host_events(&self) -> Vec<Event> {
        lock(&self.inner.host_events).iter().cloned().collect()
    }

    fn request(
        &self,
        role: &str,
        options: LeaseOptions,
    ) -> (LeaseRequest, oneshot::Receiver<Outcome>) {
        let mut core = lock(&self.inner.core);
        core.next_request += 1;
        let id = format!("r{}", core.next_request);
        let (tx, rx) = oneshot::channel();
        let now = self.inner.clock.now_ms();
        core.add_waiter(
            id.clone(),
            Waiter {
                tx,
                role: role.to_string(),
                requested_at: now,
            },
        );
        let deadline = options
            .timeout
            .map(|t| now.saturating_add(u64::try_from(t.as_millis()).unwrap_or(u64::MAX)));
        let request = LeaseRequest {
            now,
            id,
            role: role.to_string(),
            avoid: options.avoid,
            prefer: options.prefer,
            pin: options.pin,
            rank: options.rank,
            event_time: options.event_time,
            label: options.label,
            deadline,
            timeout_ms: None,
            owner: None,
        };
        (request, rx)
    }

    async fn wait(
        &self,
        request: &LeaseRequest,
        rx: oneshot::Receiver<Outcome>,
        span: tracing::Span,
    ) -> Result<Option<Lease>> {
        let mut guard = CancelGuard {
            inner: self.inner.clone(),
            request: request.id.clone(),
            rx: Some(rx),
        };
        let outcome = match guard.rx.as_mut() {
            Some(rx) => rx.await,
            None => return Err(HostError::Closed),
        };
        guard.rx = None;
        match outcome.map_err(|_| HostError::Closed)? {
            Outcome::Granted {
                lease,
                spec,
                role,
                hold,
            } => {
                let granted_at = self.inner.clock.now_ms();
                span.record("executor", spec.id.as_str());
                span.record("lease", lease);
                tracing::debug!(
                    target: "rota::host",
                    parent: &span,
                    wait_ms = granted_at.saturating_sub(request.now),
                    "lease granted"
                );
                Ok(Some(Lease {
                    inner: self.inner.clone(),
                    lease,
                    request: request.id.clone(),
                    spec,
                    role,
                    hold,
                    granted_at,
                    span,
                    released: false,
                }))
            }
            Outcome::Exhausted { role, reasons } => Err(HostError::Exhausted { role, reasons }),
            Outcome::TimedOut { reasons } => Err(HostError::TimedOut {
                request: request.id.clone(),
                role: request.role.clone(),
                label: request.label.clone(),
                reasons,
            }),
            Outcome::Cancelled => Err(HostError::Cancelled {
                request: request.id.clone(),
            }),
            Outcome::Unavailable => Ok(None),
        }
    }

    /// Feeds a request's input inside its span, which lives as long as the lease:
    /// requested, granted (or how it ended), released.
    fn submit(&self, request: &LeaseRequest, input: Input) -> Result<tracing::Span> {
        let span = tracing::info_span!(
            target: "rota::host",
            "lease",
            request = %request.id,
            role = %request.role,
            label = request.label.as_deref(),
            executor = tracing::field::Empty,
            lease = tracing::field::Empty,
        );
        span.in_scope(|| {
            tracing::debug!(target: "rota::host", kind = input.kind(), "lease requested");
            self.inner.feed(input).map(drop)
        })
        .inspect_err(|_| {
            lock(&self.inner.core).take_waiter(&request.id);
        })?;
        Ok(span)
    }

    /// Waits for a slot; fails `Exhausted` when none can ever come, `TimedOut` after
    /// `options.timeout`. Dropping the future cancels the request.
    pub async fn lease(&self, role: &str, options: LeaseOptions) -> Result<Lease> {
        let (request, rx) = self.request(role, options);
        let span = self.submit(&request, Input::Lease(request.clone()))?;
        match self
            .wait(&request, rx, span.clone())
            .instrument(span)
            .await?
        {
            Some(lease) => Ok(lease),
            None => Err(HostError::Cancelled {
                request: request.id,
            }),
        }
    }

    /// A slot now, or `None`. (On an executor with `provision`, waits for the machine.)
    pub async fn try_lease(&self, role: &str, options: LeaseOptions) -> Result<Option<Lease>> {
        let (request, rx) = self.request(role, options);
        let span = self.submit(&request, Input::TryLease(request.clone()))?;
        self.wait(&request, rx, span.clone()).instrument(span).await
    }

    /// Records work already running on `executor` after a restart: it takes a slot
    /// even beyond capacity. Released like any lease.
    pub async fn occupy(
        &self,
        executor: &str,
        role: Option<&str>,
        hold: Option<Value>,
    ) -> Result<Lease> {
        let (request, rx) = self.request(role.unwrap_or_default(), LeaseOptions::default());
        let input = Input::Occupy {
            now: request.now,
            id: request.id.clone(),
            executor: executor.to_string(),
            role: role.map(str::to_string),
            hold,
            owner: None,
        };
        let span = self.submit(&request, input)?;
        self.wait(&request, rx, span.clone())
            .instrument(span)
            .await?
            .ok_or(HostError::Cancelled {
                request: request.id,
            })
    }

    /// Reports a failed call on `executor`: the exclusion it put in force, as the
    /// seed's `report` returns it (`{ id, reason, kind, until? }`), read from the core's
    /// answer (its `excluded` event, emitted at every event level); `None` when it
    /// earned none or a stronger exclusion stays.
    pub fn report(&self, executor: &str, failure: Failure) -> Result<Option<Exclusion>> {
        let step = self.inner.feed(Input::Report {
            now: self.inner.clock.now_ms(),
            executor: executor.to_string(),
            failure,
        })?;
        Ok(exclusion_from(&step.outputs, executor))
    }

    /// Reports a failed HTTP call: its status, headers (`Retry-After`) and body are
    /// the facts the core classifies ([`crate::classify`]).
    pub fn report_http(
        &self,
        executor: &str,
        status: u16,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Option<Exclusion>> {
        let failure = http_facts(status, headers, body, self.inner.clock.now_ms());
        self.report(executor, failure)
    }

    /// Reports a call that failed without an HTTP answer (its kind as a code such as
    /// `ECONNREFUSED`, and its text).
    pub fn report_io(&self, executor: &str, error: &std::io::Error) -> Result<Option<Exclusion>> {
        self.report(executor, io_facts(error))
    }

    /// The kind the core gives `failure` with the running document's signals, without
    /// reporting it: `{"kind", "rule"}`.
    pub fn classify(&self, failure: &Failure) -> Result<Value> {
        self.inner.query(|p| p.classify(failure))
    }

    /// Takes an executor out of the round (`manual` is an operator's pause).
    pub fn exclude(
        &self,
        executor: &str,
        kind: ExclusionKind,
        reason: &str,
        until_ms: Option<u64>,
    ) -> Result<()> {
        self.inner
            .feed(Input::Exclude {
                now: self.inner.clock.now_ms(),
                executor: executor.to_string(),
                kind,
                reason: reason.to_string(),
                until: until_ms,
            })
            .map(drop)
    }

    /// Ends an executor's exclusion, whatever its kind.
    pub fn resume(&self, executor: &str) -> Result<()> {
        self.inner
            .feed(Input::Resume {
                now: self.inner.clock.now_ms(),
                executor: executor.to_string(),
            })
            .map(drop)
    }

    /// Replaces the document live (validated first: a bad one changes nothing).
    pub fn reload(&self, document: Value) -> Result<()> {
        let secrets = {
            let mut core = lock(&self.inner.core);
            // (The warnings do not depend on the options' kinds.)
            secret_warnings(&mut core.policy, &document, &Value::Null)
        };
        self.inner.feed(Input::Reload {
            now: self.inner.clock.now_ms(),
            document,
        })?;
        secrets.into_iter().for_each(|e| self.inner.publish(e));
        Ok(())
    }

    /// Reads the roster files again and reloads (a roster built from files only).
    pub fn reload_files(&self) -> Result<()> {
        let source = self
            .inner
            .source
            .clone()
            .ok_or_else(|| HostError::Invalid {
                violations: vec![rota_core::Violation {
                    path: "$".into(),
                    message: "this roster was built from a document, not from files".into(),
                }],
            })?;
        let (document, warnings) = source.load_with_warnings()?;
        for warning in warnings {
            self.inner.publish(narrow_warning(&warning));
        }
        self.reload(document)
    }

    /// Every executor, lease and waiting request now.
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.inner.query(|p| p.snapshot())
    }

    /// The snapshot as the core's JSON.
    pub fn snapshot_json(&self) -> Result<Value> {
        self.inner.query(|p| p.snapshot_json())
    }

    /// Why each executor can or cannot take a request now: an [`Explain`] or an [`ExplainRequest`].
    pub fn explain(&self, request: impl Into<ExplainRequest>) -> Result<Explanation> {
        let request = request.into();
        self.inner.query(|p| p.explain(&request))
    }

    /// A dry run of a reload.
    pub fn plan(&self, document: &Value) -> Result<Plan> {
        self.inner.query(|p| p.plan(document))
    }

    /// Free slots for `role` now.
    pub fn available(&self, role: &str) -> Result<u32> {
        self.inner.query(|p| p.available(role))
    }

    /// Configured slots for `role`.
    pub fn slots(&self, role: &str) -> Result<u32> {
        self.inner.query(|p| p.slots(role))
    }

    /// Whether an executor outside `avoid` could ever serve `role`.
    pub fn can_ever_serve(&self, role: &str, avoid: &[String]) -> Result<bool> {
        self.inner.query(|p| p.can_ever_serve(role, avoid))
    }

    /// How many times the guest failed and was restored.
    pub fn recoveries(&self) -> u64 {
        lock(&self.inner.core).policy.recoveries()
    }

    /// The running module's SHA-256.
    pub fn module_hash(&self) -> String {
        lock(&self.inner.core).policy.module().hash().to_string()
    }

    /// Loads the module at `path` and moves the live state into it: no lease is lost.
    /// The running module stays when the new one fails a check (ABI version, import,
    /// equal snapshot).
    pub async fn swap_policy(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let module = match load_module(&self.inner.engine, Some(path)).await {
            Ok(module) => module,
            Err(error) => {
                let error = HostError::SwapRefused(error.to_string());
                self.inner.publish(
                    Event::host(Level::Warn, "policySwapRefused", error.to_string())
                        .with("path", path.display().to_string()),
                );
                return Err(error);
            }
        };
        self.swap_module(module)
    }

    /// As [`Roster::swap_policy`], with a module already loaded.
    pub fn swap_module(&self, module: PolicyModule) -> Result<()> {
        let result = self.inner.query(|p| p.swap(module));
        if let Err(error) = &result {
            self.inner.publish(Event::host(
                Level::Warn,
                "policySwapRefused",
                error.to_string(),
            ));
        }
        result
    }

    /// Waits until every state-file write asked for so far is on disk: `Ok`. When an
    /// attempt fails first, its error (`HostError::Write`, or `HostError::Read` when the
    /// file is there but cannot be read): the writes are not lost, the writer keeps them
    /// pending and retries with back-off (`RosterBuilder::state_retry`), so a later
    /// flush can answer `Ok`. Each failure is an event too (`stateFileWriteFailed` or
    /// `stateFileUnreadable`). Without a state file: `Ok` at once.
    pub async fn flush(&self) -> Result<()> {
        let Some(writer) = &self.inner.writer else {
            return Ok(());
        };
        let (tx, rx) = oneshot::channel();
        writer
            .send(WriterMsg::Flush(tx))
            .map_err(|_| HostError::Closed)?;
        rx.await.map_err(|_| HostError::Closed)?
    }

    /// The running roster document (as the policy holds it: the last accepted reload).
    pub fn document(&self) -> Result<Value> {
        self.inner.query(|p| p.document())
    }

    /// The running document's entry for `executor`, parsed (`None`: no such executor).
    pub fn executor_spec(&self, executor: &str) -> Result<Option<ExecutorSpec>> {
        let document = self.document()?;
        let parsed = Document::from_json(&document, None)
            .map_err(|violations| HostError::Invalid { violations })?;
        Ok(parsed.executor(executor).cloned())
    }
}

/// A granted lease; released when dropped (or by [`Lease::release`]).
pub struct Lease {
    inner: Arc<Inner>,
    lease: u64,
    request: String,
    spec: Arc<ExecutorSpec>,
    role: String,
    hold: Option<Value>,
    granted_at: u64,
    /// The request's span: open from the request to the release.
    span: tracing::Span,
    released: bool,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("lease", &self.lease)
            .field("executor", &self.spec.id)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl Lease {
    /// The core's lease id.
    pub fn id(&self) -> u64 {
        self.lease
    }

    /// The request id the host gave it.
    pub fn request(&self) -> &str {
        &self.request
    }

    /// The executor's id.
    pub fn executor(&self) -> &str {
        &self.spec.id
    }

    /// The executor's entry in the running roster document, parsed: `harness`,
    /// `model`, slots, roles ...; `spec().raw` is the entry as written, with every
    /// field the core does not read (`baseUrl`, `env`, `flags` ...).
    pub fn spec(&self) -> &ExecutorSpec {
        &self.spec
    }

    /// A field of the executor's entry as written (`"baseUrl"`, `"env"` ...).
    pub fn field(&self, key: &str) -> Option<&Value> {
        self.spec.raw.get(key)
    }

    /// The role it was granted for.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// The machine hold, for an executor with `provision`.
    pub fn hold(&self) -> Option<&Value> {
        self.hold.as_ref()
    }

    /// Reports a failed call on this lease's executor.
    pub fn report(&self, failure: Failure) -> Result<Option<Exclusion>> {
        Roster {
            inner: self.inner.clone(),
        }
        .report(&self.spec.id, failure)
    }

    /// Notes the release in the lease's span.
    fn log_release(&self) {
        tracing::debug!(
            target: "rota::host",
            parent: &self.span,
            held_ms = self.inner.clock.now_ms().saturating_sub(self.granted_at),
            "lease released"
        );
    }

    /// Gives the slot back now.
    pub fn release(mut self) -> Result<()> {
        self.released = true;
        self.log_release();
        self.inner
            .feed(Input::Release {
                now: self.inner.clock.now_ms(),
                lease: self.lease,
            })
            .map(drop)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.released {
            self.log_release();
            let input = Input::Release {
                now: self.inner.clock.now_ms(),
                lease: self.lease,
            };
            let mut result = self.inner.feed(input.clone());
            if matches!(&result, Err(e) if e.is_guest_failure()) {
                // The guest failed and was restored to before the release: once more.
                result = self.inner.feed(input);
            }
            if let Err(error) = result {
                self.inner.publish(
                    Event::host(Level::Warn, "releaseFailed", error.to_string())
                        .with("lease", self.lease),
                );
            }
        }
    }
}
