//! Inputs and outputs: the JSON shapes every host speaks (camelCase, a `type` tag).
//!
//! Every input carries `now` (epoch milliseconds). Effects the core wants done are
//! outputs (probe, create machine, persist ...); their results come back as inputs.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Error;
use crate::limits;
use crate::read::{self, object, unit_names, Read};

/// What a lease request asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaseRequest {
    pub now: u64,
    /// The host's name for this request, unique among live requests.
    pub id: String,
    pub role: String,
    /// Executors it must not use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub avoid: Vec<String>,
    /// Taken first while free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer: Option<String>,
    /// The one executor that must serve it (a reattached attempt); it waits even
    /// while that executor is undeclared, and creates no machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<String>,
    /// Pipeline position: lower first; unranked after ranked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i64>,
    /// When the work arrived (epoch ms); earlier first among equal ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_time: Option<u64>,
    /// Who asks, for events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// What the call is for beyond its role (a review lens): its lease carries it, and
    /// its events and lines say it ("… for story a · adversarial lens").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// Give up at this instant (epoch ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<u64>,
    /// Give up this long after the input's `now` (the log's time, clamped as every
    /// `now` is): the deadline is `now + timeoutMs`. Not with `deadline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Who issued the request (an instance of a shared roster): it and its lease
    /// carry it, every output about them names it, and `expireOwner` ends them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The executor that holds this context's coder (the upstream's `borrow`): when
    /// no other executor can serve the request, it takes that one's free slot, else
    /// that one without a slot (`borrowed`). A `tryLease` never borrows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrow: Option<String>,
    /// Who the work is for (a team, a customer): with the document's `fairness:
    /// "tenants"`, a role's waiting requests are served across tenants by their
    /// weights. None: the tenant `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// A cache key (a prompt or session): the roster remembers the executor that got
    /// the key's last grant (for the document's `affinityTtl` of idleness) and prefers
    /// it while it is free, in the round and no worse in priority than the best free one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<String>,
}

/// Why a request went to the executor it `borrow`s rather than an independent one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Because {
    /// No executor outside `avoid` can ever serve the role.
    Nobody,
    /// Every one in the round has all its slots held by coders.
    Held,
    /// Every other one is out of the round.
    Out,
}

impl Because {
    pub const NAMES: &'static [&'static str] = &["nobody", "held", "out"];

    pub fn as_str(self) -> &'static str {
        Because::NAMES[self as usize]
    }

    pub fn from_name(name: &str) -> Option<Because> {
        [Because::Nobody, Because::Held, Because::Out]
            .into_iter()
            .find(|b| b.as_str() == name)
    }

    pub(crate) fn from_json(value: &Value) -> Read<Because> {
        let name = read::string(value)?;
        Because::from_name(&name).ok_or_else(|| format!("unknown `because` '{name}'"))
    }
}

/// The kinds of exclusion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ExclusionKind {
    /// Until an instant.
    Until,
    /// Until its health URL answers.
    Health,
    /// For the rest of the run (never persisted).
    Run,
    /// An operator's pause, with an optional end, until resumed.
    Manual,
}

/// An exclusion as the seed's state file holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Exclusion {
    pub id: String,
    pub reason: String,
    pub kind: ExclusionKind,
    /// Epoch ms: the end for `until` and `manual`; for `health`, the next probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
}

/// The seed's state file: `{ "version": 1, "exclusions": [...] }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PersistedState {
    pub version: u32,
    pub exclusions: Vec<Exclusion>,
}

pub const STATE_VERSION: u32 = 1;

impl PersistedState {
    /// Applies a `persist` output as a state file does: the entries of `ids` are
    /// replaced by `exclusions` (never a `run` one), the other entries are kept.
    pub fn apply(&mut self, ids: &[String], exclusions: &[Exclusion]) {
        self.exclusions.retain(|x| !ids.contains(&x.id));
        self.exclusions.extend(
            exclusions
                .iter()
                .filter(|x| x.kind != ExclusionKind::Run)
                .cloned(),
        );
    }
}

/// One input to the policy. Each carries `now`. Unknown fields are refused, so a
/// misspelt option is an error, not a silent default.
///
/// Deserialized by hand (`wire.rs`): the same inputs, values and error messages as
/// serde's internally tagged derive, without buffering the object first.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum Input {
    /// Ask for a lease; wait in the queue when none is free.
    Lease(LeaseRequest),
    /// A slot now, or `unavailable`.
    TryLease(LeaseRequest),
    /// Stop waiting (or stop a machine creation).
    #[serde(rename_all = "camelCase")]
    Cancel { now: u64, id: String },
    /// Give a lease back; releasing twice is harmless.
    #[serde(rename_all = "camelCase")]
    Release { now: u64, lease: u64 },
    /// Work already running on an executor after a restart takes a slot, even beyond
    /// capacity. `id` names the request, as for a lease.
    #[serde(rename_all = "camelCase")]
    Occupy {
        now: u64,
        id: String,
        executor: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hold: Option<Value>,
        /// The instance the work belongs to, as a lease's `owner`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
    },
    /// A call on an executor failed.
    #[serde(rename_all = "camelCase")]
    Report {
        now: u64,
        executor: String,
        failure: Failure,
    },
    /// An operator (or the host) takes an executor out of the round.
    #[serde(rename_all = "camelCase")]
    Exclude {
        now: u64,
        executor: String,
        /// `manual` when absent.
        kind: ExclusionKind,
        #[serde(default)]
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<u64>,
    },
    /// End an executor's exclusion, whatever its kind.
    #[serde(rename_all = "camelCase")]
    Resume { now: u64, executor: String },
    /// The answer to a `probe` output.
    #[serde(rename_all = "camelCase")]
    ProbeResult {
        now: u64,
        executor: String,
        up: bool,
    },
    /// The answer to a `createMachine` output: the machine's hold. `checked` (any
    /// JSON: what the creation checked) records a passed preflight of the executor.
    #[serde(rename_all = "camelCase")]
    MachineCreated {
        now: u64,
        id: String,
        hold: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        checked: Option<Value>,
    },
    /// The answer to a `createMachine` output: it failed. `reason` is the pause
    /// record's (the seed's `MachineUnavailableError.reason`; `unavailable` when
    /// absent); `check` is a failed capability check, recorded as a failed preflight.
    #[serde(rename_all = "camelCase")]
    MachineFailed {
        now: u64,
        id: String,
        #[serde(default)]
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The answer to a `deleteMachine` output that names a `lease`: the slot it held
    /// frees now. A failed deletion frees it too, with a warning naming the machine.
    #[serde(rename_all = "camelCase")]
    MachineDeleted {
        now: u64,
        lease: u64,
        ok: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// Replace the document live.
    #[serde(rename_all = "camelCase")]
    Reload { now: u64, document: Value },
    /// The answer to a `preflight` output.
    #[serde(rename_all = "camelCase")]
    PreflightResult {
        now: u64,
        executor: String,
        ok: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// Load exclusions from a state file (run ones, expired ones and unknown ids skipped).
    #[serde(rename_all = "camelCase")]
    Restore { now: u64, state: PersistedState },
    /// Time passes.
    #[serde(rename_all = "camelCase")]
    Tick { now: u64 },
    /// An owner (an instance of a shared roster) is gone: its waiting requests are
    /// cancelled, its machine creations dropped, and its leases released or kept as
    /// `Options::expired_owner_leases` says.
    #[serde(rename_all = "camelCase")]
    ExpireOwner { now: u64, owner: String },
    /// A machine creation that will never be answered (its owner is gone) is dropped
    /// without pausing the executor: an abandoned one is forgotten; a live one frees
    /// its slot and its request waits again in its place.
    #[serde(rename_all = "camelCase")]
    DropCreation { now: u64, id: String },
    /// A log's version marker: refused (`UNSUPPORTED_VERSION`) unless this core folds
    /// log version `log` ([`LOG_VERSION`]); otherwise nothing changes, time included.
    #[serde(rename_all = "camelCase")]
    Version { now: u64, log: u64 },
}

/// The version of the input log this core folds (the `version` marker's `log`).
pub const LOG_VERSION: u64 = 1;

impl Input {
    pub fn now(&self) -> u64 {
        match self {
            Input::Lease(r) | Input::TryLease(r) => r.now,
            Input::Cancel { now, .. }
            | Input::Release { now, .. }
            | Input::Occupy { now, .. }
            | Input::Report { now, .. }
            | Input::Exclude { now, .. }
            | Input::Resume { now, .. }
            | Input::ProbeResult { now, .. }
            | Input::MachineCreated { now, .. }
            | Input::MachineFailed { now, .. }
            | Input::MachineDeleted { now, .. }
            | Input::Reload { now, .. }
            | Input::PreflightResult { now, .. }
            | Input::Restore { now, .. }
            | Input::ExpireOwner { now, .. }
            | Input::DropCreation { now, .. }
            | Input::Version { now, .. }
            | Input::Tick { now } => *now,
        }
    }

    /// The input's `type` tag.
    pub fn kind(&self) -> &'static str {
        wire::Kind::of(self).name()
    }

    /// The input checked against the bounds of [`crate::limits`]: `INVALID_INPUT`
    /// naming the field and its bound. Every JSON reader and the binary step check it;
    /// an input built in Rust is checked here.
    #[inline]
    pub fn check_limits(&self) -> Result<(), Error> {
        match self.limit_violation() {
            Some(message) => Err(self.limit_error(message)),
            None => Ok(()),
        }
    }

    #[cold]
    #[inline(never)]
    fn limit_error(&self, message: String) -> Error {
        Error::input(format!("{}: {message}", self.kind()))
    }

    /// What [`Input::check_limits`] refuses, without the input's tag. Inlined: an
    /// input with nothing to bound (a tick) pays a branch, and every message is built
    /// out of line, only for an input out of bounds.
    #[inline]
    pub(crate) fn limit_violation(&self) -> Option<String> {
        match self {
            Input::Lease(request) | Input::TryLease(request) => request.limit_violation(),
            Input::Occupy {
                id,
                role,
                executor,
                owner,
                ..
            } => id_too_long("id", id)
                .or_else(|| id_too_long("executor", executor))
                .or_else(|| role.as_deref().and_then(|r| id_too_long("role", r)))
                .or_else(|| owner.as_deref().and_then(owner_violation)),
            Input::ExpireOwner { owner, .. } => owner_violation(owner),
            Input::DropCreation { id, .. } => id_too_long("id", id),
            Input::Release { lease, .. } | Input::MachineDeleted { lease, .. } => {
                beyond_json("lease", Some(*lease))
            }
            Input::Report { failure, .. } => beyond_json("failure.resetAt", failure.reset_at)
                .or_else(|| beyond_json("failure.retryAfterMs", failure.retry_after_ms)),
            Input::Exclude { until, .. } => beyond_json("until", *until),
            _ => None,
        }
    }
}

impl LeaseRequest {
    fn limit_violation(&self) -> Option<String> {
        let too_long = |field: &str, text: Option<&str>| text.and_then(|t| id_too_long(field, t));
        if let Some(rank) = self.rank {
            if rank.unsigned_abs() > limits::MAX_SAFE_INTEGER {
                return Some(beyond_json_message("rank"));
            }
        }
        id_too_long("id", &self.id)
            .or_else(|| id_too_long("role", &self.role))
            .or_else(|| too_long("borrow", self.borrow.as_deref()))
            .or_else(|| {
                (self.avoid.len() > limits::MAX_AVOID).then(|| {
                    format!(
                        "`avoid` names {} executors; the most is {}",
                        self.avoid.len(),
                        limits::MAX_AVOID
                    )
                })
            })
            .or_else(|| self.avoid.iter().find_map(|id| id_too_long("avoid", id)))
            .or_else(|| too_long("prefer", self.prefer.as_deref()))
            .or_else(|| too_long("pin", self.pin.as_deref()))
            .or_else(|| beyond_json("eventTime", self.event_time))
            .or_else(|| text_too_long("label", &self.label, limits::MAX_LABEL_BYTES))
            .or_else(|| text_too_long("purpose", &self.purpose, limits::MAX_PURPOSE_BYTES))
            .or_else(|| match self.affinity.as_deref() {
                Some("") => {
                    Some("`affinity` is empty; an affinity key is a non-empty string".into())
                }
                _ => text_too_long("affinity", &self.affinity, limits::MAX_AFFINITY_KEY_BYTES),
            })
            .or_else(|| beyond_json("deadline", self.deadline))
            .or_else(|| beyond_json("timeoutMs", self.timeout_ms))
            .or_else(|| self.owner.as_deref().and_then(owner_violation))
            .or_else(|| self.tenant.as_deref().and_then(tenant_violation))
            .or_else(|| {
                (self.deadline.is_some() && self.timeout_ms.is_some())
                    .then(|| "give `deadline` or `timeoutMs`, not both".to_string())
            })
    }
}

/// "`label` is 4097 bytes long; the most is 4096", when it is.
fn text_too_long(field: &str, text: &Option<String>, most: usize) -> Option<String> {
    let len = text.as_deref().map_or(0, str::len);
    (len > most).then(|| format!("`{field}` is {len} bytes long; the most is {most}"))
}

/// A tenant is a name: non-empty, and no longer than `limits::MAX_TENANT_BYTES`.
pub(crate) fn tenant_violation(tenant: &str) -> Option<String> {
    if tenant.is_empty() {
        return Some("`tenant` is empty; a tenant is a non-empty string".to_string());
    }
    let len = tenant.len();
    (len > limits::MAX_TENANT_BYTES).then(|| {
        format!(
            "`tenant` is {len} bytes long; the most is {}",
            limits::MAX_TENANT_BYTES
        )
    })
}

/// An owner is an id: non-empty, and no longer than one.
pub(crate) fn owner_violation(owner: &str) -> Option<String> {
    if owner.is_empty() {
        return Some("`owner` is empty; an owner is a non-empty string".to_string());
    }
    id_too_long("owner", owner)
}

/// "`id` is 1025 bytes long; the most is 1024", when it is.
#[inline]
pub(super) fn id_too_long(field: &str, id: &str) -> Option<String> {
    (id.len() > limits::MAX_ID_BYTES).then(|| too_long_message(field, id.len()))
}

#[cold]
#[inline(never)]
fn too_long_message(field: &str, len: usize) -> String {
    format!(
        "`{field}` is {len} bytes long; the most is {}",
        limits::MAX_ID_BYTES
    )
}

/// A number beyond 2^53 − 1: a JS host could not send it or read it back exactly.
fn beyond_json(field: &str, value: Option<u64>) -> Option<String> {
    value
        .filter(|v| *v > limits::MAX_SAFE_INTEGER)
        .map(|_| beyond_json_message(field))
}

#[cold]
#[inline(never)]
fn beyond_json_message(field: &str) -> String {
    format!("`{field}` is beyond what a JSON number holds exactly")
}

/// Event severity, least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Level {
    Debug,
    Info,
    Warn,
}

impl Level {
    /// The default of [`Options::min_event_level`].
    pub fn is_debug(&self) -> bool {
        *self == Level::Debug
    }
}

/// One output of the policy: a decision, an effect to carry out, or an event.
///
/// Deserialized by hand (`wire.rs`), through one flat record of every field.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Output {
    /// A request got its lease.
    #[serde(rename_all = "camelCase")]
    Granted {
        request: String,
        lease: u64,
        executor: String,
        /// Its clone number on the executor, when the document numbers clones
        /// (`clones: "numbered"`): `clone_name(executor, clone)` is `codex#2`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        clone: Option<u32>,
        role: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hold: Option<Value>,
        /// Earlier waiting requests (lease order) that this executor could serve, by
        /// role, and that still wait: the requests this grant passed.
        passed: u32,
        /// True for an `occupy`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        occupied: bool,
        /// It holds no slot: the request's `borrow` executor, taken without one.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        borrowed: bool,
        /// Set when the executor is the request's `borrow` (not independent), and why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        because: Option<Because>,
        /// The request's owner, when it has one: the instance that acts on this.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
    },
    /// No executor outside the request's `avoid` can ever serve it.
    #[serde(rename_all = "camelCase")]
    Exhausted {
        request: String,
        role: String,
        /// One reason per executor (the seed's `RosterExhausted`).
        reasons: Vec<String>,
        /// The request's owner, when it has one: the instance that acts on this.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
    },
    /// The request's deadline passed.
    #[serde(rename_all = "camelCase")]
    TimedOut {
        request: String,
        /// Why, one per executor its waiting report names ("a busy", "b until ...").
        reasons: Vec<String>,
        /// The request's owner, when it has one: the instance that acts on this.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
    },
    /// A `tryLease` found no free slot.
    #[serde(rename_all = "camelCase")]
    Unavailable {
        request: String,
        /// The request's owner, when it has one: the instance that acts on this.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
    },
    /// A waiting request was cancelled.
    #[serde(rename_all = "camelCase")]
    Cancelled {
        request: String,
        /// The request's owner, when it has one: the instance that acts on this.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
    },
    /// A request starts to wait (announced once).
    #[serde(rename_all = "camelCase")]
    Waiting {
        request: String,
        role: String,
        /// The seed's report: "a busy; b until ...".
        report: String,
        /// Earlier waiting requests (lease order) of the roles that compete with this
        /// one for an executor (some executor takes both).
        ahead: u32,
        /// The executors among those the report names whose budget is spent: the
        /// request waits for their room (the hosts' budget-wait metric).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        spent: Vec<String>,
        /// The request's owner, when it has one: the instance that acts on this.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
    },
    /// Probe this health URL; answer with `probeResult`.
    #[serde(rename_all = "camelCase")]
    Probe { executor: String, url: String },
    /// Create a machine for this request on this executor; answer with
    /// `machineCreated` or `machineFailed`.
    #[serde(rename_all = "camelCase")]
    CreateMachine {
        request: String,
        executor: String,
        /// The request's owner, when it has one: the instance that acts on this.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
    },
    /// Delete this machine. With a `lease`, the slot stays held until the host
    /// answers `machineDeleted` (the seed deletes the machine before the slot frees).
    #[serde(rename_all = "camelCase")]
    DeleteMachine {
        executor: String,
        hold: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lease: Option<u64>,
        /// The owner of the lease (or of the abandoned creation) the machine was for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
    },
    /// Preflight this executor (at start, or before a reload applies); answer with
    /// `preflightResult`.
    #[serde(rename_all = "camelCase")]
    Preflight { executor: String },
    /// The startup preflight of `executor` failed: the roster does not start.
    #[serde(rename_all = "camelCase")]
    StartFailed { executor: String, error: String },
    /// Write the state: replace the entries of `ids` in the state file with
    /// `state.exclusions`, keeping other rosters' entries.
    #[serde(rename_all = "camelCase")]
    Persist {
        ids: Vec<String>,
        state: PersistedState,
    },
    /// Something to log.
    #[serde(rename_all = "camelCase")]
    Event {
        level: Level,
        /// A stable name for the kind of event: `granted`, `excluded`, `back` ...
        /// (The core's own are static: no copy of the name per event.)
        name: Cow<'static, str>,
        message: String,
        fields: Fields,
    },
}

/// Why a request (waiting or hypothetical) cannot use an executor now.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExplainRequest {
    pub role: String,
    #[serde(default)]
    pub avoid: Vec<String>,
    #[serde(default)]
    pub prefer: Option<String>,
    #[serde(default)]
    pub pin: Option<String>,
    /// A waiting request's id: explain that one (its role, avoid and pin).
    #[serde(default)]
    pub request: Option<String>,
    /// A hypothetical request's affinity key.
    #[serde(default)]
    pub affinity: Option<String>,
}

// ---- Readers ----------------------------------------------------------------------
//
// The types above that hosts send are read by hand from a `serde_json::Value`
// (`read.rs`: small shared helpers instead of a derived deserializer per type); their
// `Deserialize` goes through the `Value`, so every source reads them the same way.

/// `Deserialize` through a `serde_json::Value` and the type's `from_json`.
macro_rules! deserialize_from_json {
    ($($t:ty),*) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = Value::deserialize(deserializer)?;
                <$t>::from_json(&value).map_err(serde::de::Error::custom)
            }
        }
    )*};
}
pub(crate) use deserialize_from_json;

deserialize_from_json!(
    Options,
    FailureKind,
    Failure,
    ExclusionKind,
    Exclusion,
    PersistedState,
    Level,
    ExplainRequest,
    Fields
);

unit_names!(ExclusionKind {
    Until = "until",
    Health = "health",
    Run = "run",
    Manual = "manual",
});

impl Exclusion {
    pub fn from_json(value: &Value) -> Read<Exclusion> {
        let o = object(value, "struct Exclusion")?;
        Ok(Exclusion {
            id: o.req("id", read::string)?,
            reason: o.req("reason", read::string)?,
            kind: o.req("kind", ExclusionKind::from_json)?,
            until: o.opt("until", read::u64)?,
        })
    }
}

impl PersistedState {
    pub fn from_json(value: &Value) -> Read<PersistedState> {
        let o = object(value, "struct PersistedState")?;
        Ok(PersistedState {
            version: o.or("version", read::u32, STATE_VERSION)?,
            exclusions: o.or(
                "exclusions",
                |v| read::list(v, Exclusion::from_json),
                Vec::new(),
            )?,
        })
    }
}

unit_names!(Level { Debug = "debug", Info = "info", Warn = "warn" });

/// Its JSON name (`debug`, `info`, `warn`), as events carry it.
impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl ExplainRequest {
    pub fn from_json(value: &Value) -> Read<ExplainRequest> {
        let o = object(value, "struct ExplainRequest")?;
        Ok(ExplainRequest {
            role: o.req("role", read::string)?,
            avoid: o.or("avoid", read::strings, Vec::new())?,
            prefer: o.opt("prefer", read::string)?,
            pin: o.opt("pin", read::string)?,
            request: o.opt("request", read::string)?,
            affinity: o.opt("affinity", read::string)?,
        })
    }
}

mod failure;
pub use failure::{Failure, FailureKind};

mod fields;
pub use fields::Fields;

mod options;
pub use options::{Choice, ExpiredOwnerLeases, Options, Unservable};

pub(crate) mod wire;
