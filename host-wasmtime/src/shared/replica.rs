//! The replica: one instance's copy of the core, folding the log exactly as
//! `sql/PROTOCOL.md` says (the bytes it feeds, who acts on which output), and the
//! bookkeeping of this instance's calls that the fold settles.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use rota_core::{Document, ExecutorSpec, Input, Level};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::driver::Shared;
use super::{LogEntry, LogError, LogStore};
use crate::error::{HostError, Result};
use crate::event::Event;
use crate::runtime::PolicyRuntime;

/// How one of this instance's requests ended (or the error that ended its call).
#[derive(Debug)]
pub(super) enum Outcome {
    Granted {
        lease: u64,
        executor: String,
        role: String,
        hold: Option<Value>,
    },
    Exhausted {
        role: String,
        reasons: Vec<String>,
    },
    TimedOut,
    Unavailable,
    Cancelled,
}

/// What one of this instance's entries is, for the fold to settle.
pub(super) enum Mine {
    /// A request (`lease`, `tryLease`, `occupy`): settled by its outputs, or rejected.
    Request(String),
    /// A `report`, `exclude`, `resume`, `reload`: settled with its entry's outputs.
    Call(oneshot::Sender<Result<Vec<Value>>>),
    /// Anything else (`release`, `cancel`, machine results, leader entries).
    Plain,
}

/// An entry waiting for the next batch.
pub(super) struct Queued {
    pub entry: String,
    /// A leader-only entry's epoch (a batch holds one epoch, or none).
    pub epoch: Option<u64>,
    pub mine: Mine,
    /// Told the append's `now` (or its error) once the batch is in the log.
    pub on_append: Option<oneshot::Sender<std::result::Result<u64, String>>>,
}

impl Queued {
    pub fn plain(entry: String) -> Queued {
        Queued {
            entry,
            epoch: None,
            mine: Mine::Plain,
            on_append: None,
        }
    }
}

/// Why an instance fenced itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FenceKind {
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
pub(super) struct Fence {
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

/// Everything the fold and the calls share, under one lock.
pub(super) struct State {
    pub policy: PolicyRuntime,
    pub folded_seq: u64,
    pub wake_at: Option<u64>,
    /// This incarnation's id (`<name>:<8 hex>`).
    pub instance: String,
    pub next_request: u64,
    /// This instance's requests that a caller awaits, by id.
    pub requests: BTreeMap<String, oneshot::Sender<Result<Outcome>>>,
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
    specs: Option<BTreeMap<String, Arc<ExecutorSpec>>>,
    /// Executors whose probe this instance runs (one at a time each).
    pub probing: BTreeSet<String>,
    /// The `wakeAt` a tick was appended for (cleared when it arms again).
    pub tick_sent: Option<u64>,
}

impl State {
    pub fn new(policy: PolicyRuntime, folded_seq: u64, instance: String) -> State {
        State {
            policy,
            folded_seq,
            wake_at: None,
            instance,
            next_request: 0,
            requests: BTreeMap::new(),
            orphans: BTreeSet::new(),
            queue: VecDeque::new(),
            sent: BTreeMap::new(),
            appending: false,
            fence: None,
            beat_sent: Instant::now(),
            expired: false,
            closed: false,
            epoch: None,
            last_snapshot: 0,
            hashes: None,
            specs: None,
            probing: BTreeSet::new(),
            tick_sent: None,
        }
    }

    /// A new call may go in: not closed, not fenced.
    pub fn usable(&self) -> Result<()> {
        if self.closed {
            return Err(HostError::Closed);
        }
        match &self.fence {
            Some(fence) => Err(fence.error()),
            None => Ok(()),
        }
    }

    /// A replica rebuilt (from a snapshot): the document may differ.
    pub fn replace_policy(&mut self, policy: PolicyRuntime, folded_seq: u64) {
        self.policy = policy;
        self.folded_seq = folded_seq;
        self.specs = None;
        self.tick_sent = None;
        self.wake_at = self.policy.snapshot().ok().and_then(|s| s.wake_at);
    }

    /// The running document's entry for `executor`.
    pub fn spec(&mut self, executor: &str, role: &str) -> Arc<ExecutorSpec> {
        if self.specs.is_none() {
            self.specs = self
                .policy
                .document()
                .ok()
                .and_then(|document| Document::from_json(&document, None).ok())
                .map(|document| {
                    document
                        .executors
                        .into_iter()
                        .map(|spec| (spec.id.clone(), Arc::new(spec)))
                        .collect()
                });
        }
        self.specs
            .as_ref()
            .and_then(|specs| specs.get(executor).cloned())
            .unwrap_or_else(|| Arc::new(crate::roster::bare_spec(executor, role)))
    }

    /// Queues an entry of this instance's for the next batch.
    pub fn queue(&mut self, queued: Queued) {
        self.queue.push_back(queued);
    }
}

/// An input as a log entry: its JSON with `type` first and without `now` (the log's
/// `now` goes in at the fold). The core writes `{"type":"<kind>","now":<n>...`.
pub(super) fn entry_of(input: &Input) -> Result<String> {
    let text = serde_json::to_string(input)
        .map_err(|e| HostError::Abi(format!("cannot encode an input: {e}")))?;
    let kind = input.kind();
    let head = format!("{{\"type\":\"{kind}\",\"now\":{}", input.now());
    match text.strip_prefix(&head) {
        Some(rest) => Ok(format!("{{\"type\":\"{kind}\"{rest}")),
        None => Err(HostError::Abi(format!(
            "an input that does not start with its type and now: {text}"
        ))),
    }
}

/// The bytes the fold feeds the core for an entry: `{"now":<now>,` + the entry's
/// bytes after its first, as text (PROTOCOL.md, "Entries").
pub(super) fn fold_bytes(now: u64, entry: &str) -> String {
    let rest = entry.get(1..).unwrap_or_default();
    format!("{{\"now\":{now},{rest}")
}

/// The genesis entry, for an instance that finds the log empty.
pub(super) fn genesis_entry(document: &Value, options: &Value) -> String {
    format!("{{\"type\":\"genesis\",\"log\":1,\"document\":{document},\"options\":{options}}}")
}

/// The document and options of a genesis entry (seq 1), or why the log is refused.
pub(super) fn read_genesis(entry: &str) -> Result<(Value, Value)> {
    let invalid = |message: String| HostError::Policy {
        code: crate::error::PolicyCode::Other("INVALID_LOG".into()),
        message,
        violations: Vec::new(),
    };
    let value: Value = serde_json::from_str(entry)
        .map_err(|e| invalid(format!("the log's first entry is not JSON: {e}")))?;
    if value.get("type").and_then(Value::as_str) != Some("genesis") {
        return Err(invalid(format!(
            "the log's first entry is not a genesis: {}",
            short(entry)
        )));
    }
    if value.get("log").and_then(Value::as_u64) != Some(1) {
        return Err(HostError::Policy {
            code: crate::error::PolicyCode::Other("UNSUPPORTED_VERSION".into()),
            message: format!(
                "the log is version {}; this host folds log version 1",
                value.get("log").cloned().unwrap_or(Value::Null)
            ),
            violations: Vec::new(),
        });
    }
    let document = value.get("document").cloned().unwrap_or(Value::Null);
    let options = value.get("options").cloned().unwrap_or(Value::Null);
    Ok((document, options))
}

fn short(text: &str) -> &str {
    let end = text
        .char_indices()
        .nth(120)
        .map_or(text.len(), |(index, _)| index);
    &text[..end]
}

/// The entry's `type` and, for `expireOwner`, its `owner`: read only where the fold
/// must know (a later genesis is skipped; an expiry of this instance fences it).
fn entry_kind(entry: &str) -> Option<(String, Option<String>)> {
    if !entry.contains("genesis") && !entry.contains("expireOwner") && !entry.contains("version") {
        return None;
    }
    let value: Value = serde_json::from_str(entry).ok()?;
    let kind = value.get("type")?.as_str()?.to_string();
    let owner = value
        .get("owner")
        .and_then(Value::as_str)
        .map(str::to_string);
    Some((kind, owner))
}

fn text(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A copy of a log error (they are not `Clone`), for every call a failed append ends.
pub(super) fn copy_log_error(error: &LogError) -> LogError {
    match error {
        LogError::StaleEpoch(m) => LogError::StaleEpoch(m.clone()),
        LogError::Compacted(m) => LogError::Compacted(m.clone()),
        LogError::NoSnapshot(m) => LogError::NoSnapshot(m.clone()),
        LogError::SchemaTooNew { found, supported } => LogError::SchemaTooNew {
            found: *found,
            supported: *supported,
        },
        LogError::InvalidInput(m) => LogError::InvalidInput(m.clone()),
        other => LogError::Database(other.to_string().into()),
    }
}

impl<S: LogStore + 'static> Shared<S> {
    /// Folds one entry (the next seq) and acts on what is this instance's to act on.
    pub(super) fn fold_entry(self: &Arc<Self>, st: &mut State, e: &LogEntry) {
        // A paused process's timers run late: past the TTL, the log may have expired
        // this instance further on, so nothing folded now may settle a caller.
        self.fence_if_lapsed(st, "checked before folding the next entry");
        let mine = st.sent.remove(&e.seq).unwrap_or(Mine::Plain);
        st.folded_seq = e.seq;
        let by_me = e.instance == st.instance;
        let kind = entry_kind(&e.entry);
        let kind_name = kind.as_ref().map(|(k, _)| k.as_str());
        if kind_name == Some("genesis") {
            // Only seq 1 counts; a racing instance's later genesis is skipped.
            self.record_hash(st, e.seq);
            return;
        }
        if kind_name == Some("expireOwner") && !by_me {
            let owner = kind.as_ref().and_then(|(_, o)| o.as_deref());
            if owner == Some(st.instance.as_str()) {
                st.expired = true;
                let reason = format!(
                    "the log expired this instance ({}) at seq {} (appended by {})",
                    st.instance, e.seq, e.instance
                );
                self.fence(st, FenceKind::Expired, reason);
            }
        }
        let bytes = fold_bytes(e.now, &e.entry);
        let result = st.policy.step_value(bytes.as_bytes());
        for event in st.policy.take_events() {
            self.publish(event.with("seq", e.seq));
        }
        let result = match result {
            Ok(result) => result,
            Err(error) => {
                // The guest failed and was restored to before this entry: as rejected.
                self.rejected(st, e, mine, error);
                self.record_hash(st, e.seq);
                return;
            }
        };
        if let Some(error) = result.get("error") {
            let error = HostError::from_policy_json(error);
            if kind_name == Some("version") && error.code() == Some("UNSUPPORTED_VERSION") {
                let reason = format!(
                    "the log's version entry at seq {} needs a newer policy module: {error}",
                    e.seq
                );
                self.fence(st, FenceKind::Version, reason);
            }
            self.rejected(st, e, mine, error);
            self.record_hash(st, e.seq);
            return;
        }
        let before = st.wake_at;
        st.wake_at = result.get("wakeAt").and_then(Value::as_u64);
        if st.wake_at != before {
            st.tick_sent = None;
            self.leader_wake.notify_one();
        }
        if kind_name == Some("reload") {
            st.invalidate_specs();
        }
        let outputs = result
            .get("outputs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let expiry = kind_name == Some("expireOwner");
        for output in &outputs {
            self.act(st, e, by_me, expiry, output);
        }
        if let Mine::Call(tx) = mine {
            self.fence_if_lapsed(st, "checked before settling a call");
            let _ = match &st.fence {
                Some(fence) => tx.send(Err(fence.error())),
                None => tx.send(Ok(outputs)),
            };
        }
        self.record_hash(st, e.seq);
    }

    fn record_hash(&self, st: &mut State, seq: u64) {
        if st.hashes.is_some() {
            let hash = st
                .policy
                .state_hash()
                .unwrap_or_else(|e| format!("error: {e}"));
            if let Some(hashes) = st.hashes.as_mut() {
                hashes.push((seq, hash));
            }
        }
    }

    fn rejected(&self, st: &mut State, e: &LogEntry, mine: Mine, error: HostError) {
        match mine {
            Mine::Request(id) => {
                st.orphans.remove(&id);
                match st.requests.remove(&id) {
                    Some(tx) => {
                        let _ = tx.send(Err(error));
                    }
                    None => self.input_rejected(e, &error),
                }
            }
            Mine::Call(tx) => {
                let _ = tx.send(Err(error));
            }
            Mine::Plain => self.input_rejected(e, &error),
        }
    }

    fn input_rejected(&self, e: &LogEntry, error: &HostError) {
        self.publish(
            Event::host(Level::Debug, "inputRejected", error.to_string())
                .with("seq", e.seq)
                .with("instance", e.instance.clone()),
        );
    }

    /// One output of entry `e`: acted on when it is this instance's (PROTOCOL.md,
    /// "Who acts on an output").
    fn act(self: &Arc<Self>, st: &mut State, e: &LogEntry, by_me: bool, expiry: bool, o: &Value) {
        let kind = o.get("type").and_then(Value::as_str).unwrap_or_default();
        let owner = o.get("owner").and_then(Value::as_str);
        let owned = owner == Some(st.instance.as_str());
        let request = text(o, "request");
        match kind {
            "granted" if owned => {
                // (A fence moves every awaited request to `orphans`: released below.)
                self.fence_if_lapsed(st, "checked before settling a grant");
                let lease = o.get("lease").and_then(Value::as_u64).unwrap_or(0);
                st.orphans.remove(&request);
                let outcome = Outcome::Granted {
                    lease,
                    executor: text(o, "executor"),
                    role: text(o, "role"),
                    hold: o.get("hold").cloned(),
                };
                let delivered = match st.requests.remove(&request) {
                    Some(tx) => tx.send(Ok(outcome)).is_ok(),
                    None => false,
                };
                if !delivered {
                    // Nobody awaits it (given up, or fenced meanwhile): give it back.
                    if let Ok(entry) = entry_of(&Input::Release { now: 0, lease }) {
                        st.queue(Queued::plain(entry));
                        self.queued.notify_one();
                    }
                }
            }
            "exhausted" | "timedOut" | "unavailable" | "cancelled" if owned => {
                st.orphans.remove(&request);
                let outcome = match kind {
                    "exhausted" => Outcome::Exhausted {
                        role: text(o, "role"),
                        reasons: o
                            .get("reasons")
                            .cloned()
                            .and_then(|r| serde_json::from_value(r).ok())
                            .unwrap_or_default(),
                    },
                    "timedOut" => Outcome::TimedOut,
                    "unavailable" => Outcome::Unavailable,
                    _ => Outcome::Cancelled,
                };
                if let Some(tx) = st.requests.remove(&request) {
                    let _ = tx.send(Ok(outcome));
                }
            }
            "createMachine" if owned || (owner.is_none() && by_me) => {
                self.spawn_create(text(o, "executor"), request);
            }
            "deleteMachine" => {
                let acts = if expiry || owner.is_none() {
                    by_me
                } else {
                    owned
                };
                if acts {
                    let lease = o.get("lease").and_then(Value::as_u64);
                    self.spawn_delete(text(o, "executor"), o.get("hold").cloned(), lease);
                }
            }
            "probe" => {
                if let Some(epoch) = st.epoch {
                    let executor = text(o, "executor");
                    if st.probing.insert(executor.clone()) {
                        self.spawn_probe(executor, text(o, "url"), epoch);
                    }
                }
            }
            "event" => {
                if let Some(event) = Event::from_output(o) {
                    self.publish(event.with("seq", e.seq));
                }
            }
            // `persist`: the log is the persistence. Caller outputs of others: theirs.
            _ => {}
        }
    }

    /// Fences this instance when the TTL has passed since its last good heartbeat was
    /// sent (the log may have expired it since): checked before every fold and every
    /// settle, and when a heartbeat answers. True when it is fenced (now or before).
    pub(super) fn fence_if_lapsed(&self, st: &mut State, why: &str) -> bool {
        let ttl = self.config.ttl;
        let silent = st.beat_sent.elapsed();
        if st.fence.is_none() && silent >= ttl {
            let reason = format!(
                "no heartbeat succeeded for {} ms (the last good one was sent {} ms ago; {why}, folded through seq {})",
                ttl.as_millis(),
                silent.as_millis(),
                st.folded_seq
            );
            self.fence(st, FenceKind::Lapsed, reason);
        }
        st.fence.is_some()
    }

    /// Fences this instance: every pending call fails `FENCED`, new ones too.
    pub(super) fn fence(&self, st: &mut State, kind: FenceKind, reason: String) {
        if let Some(fence) = st.fence.as_mut() {
            // An expiry or a version refusal outranks a lapse: rejoining must know.
            if matches!(kind, FenceKind::Expired | FenceKind::Version) {
                fence.kind = kind;
            }
            return;
        }
        let fence = Fence {
            kind,
            reason,
            since_ms: self.db_now(),
        };
        for (id, tx) in std::mem::take(&mut st.requests) {
            st.orphans.insert(id);
            let _ = tx.send(Err(fence.error()));
        }
        for mine in st.sent.values_mut() {
            if let Mine::Call(_) = mine {
                if let Mine::Call(tx) = std::mem::replace(mine, Mine::Plain) {
                    let _ = tx.send(Err(fence.error()));
                }
            }
        }
        let queue = std::mem::take(&mut st.queue);
        for queued in queue {
            match queued.mine {
                Mine::Call(tx) => {
                    let _ = tx.send(Err(fence.error()));
                }
                // Its call failed above; it never reaches the log.
                Mine::Request(id) => {
                    st.orphans.remove(&id);
                }
                Mine::Plain if queued.epoch.is_some() => {
                    if let Some(tx) = queued.on_append {
                        let _ = tx.send(Err("fenced".into()));
                    }
                }
                Mine::Plain => st.queue.push_back(queued),
            }
        }
        st.epoch = None;
        self.publish(
            Event::host(Level::Warn, "fenced", fence.error().to_string())
                .with("instance", st.instance.clone())
                .with("reason", fence.reason.clone()),
        );
        st.fence = Some(fence);
    }
}

impl State {
    fn invalidate_specs(&mut self) {
        self.specs = None;
    }
}
