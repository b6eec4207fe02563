//! The replica's state: one instance's copy of the core and the bookkeeping of this
//! instance's calls that the fold settles (`fold.rs`), and the log entries' shapes
//! (`sql/PROTOCOL.md`: the bytes the fold feeds). Nothing here acts: the flows that
//! touch the log, the tasks and the state together are in `driver.rs` and `fold.rs`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use rota_core::{Document, ExecutorSpec, Input};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::log::LogError;
use crate::error::{HostError, Result};
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
    TimedOut {
        reasons: Vec<String>,
    },
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

    /// Settles one of this instance's requests with an outcome other than a grant.
    pub(super) fn settle(&mut self, request: &str, outcome: Outcome) {
        self.orphans.remove(request);
        if let Some(tx) = self.requests.remove(request) {
            let _ = tx.send(Ok(outcome));
        }
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
pub(super) fn entry_kind(entry: &str) -> Option<(String, Option<String>)> {
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

impl State {
    pub(super) fn invalidate_specs(&mut self) {
        self.specs = None;
    }
}
