//! Inputs and outputs: the JSON shapes every host speaks (camelCase, a `type` tag).
//!
//! Every input carries `now` (epoch milliseconds). Effects the core wants done are
//! outputs (probe, create machine, persist ...); their results come back as inputs.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::read::{self, object, variant, Read};

/// Options a host gives with the document. Defaults are the seeds'.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Options {
    /// Whether the host can probe health URLs. When it cannot, an outage on an
    /// executor with a health URL waits out the outage cooldown (the seed's fallback).
    pub can_probe: bool,
    /// How often a health exclusion is probed while a request waits that it could serve.
    pub health_probe_interval_ms: u64,
    /// How often it is probed while nobody waits for it.
    pub idle_probe_interval_ms: u64,
    /// Rate limits inside this window count towards an exclusion.
    pub rate_limit_window_ms: u64,
    /// Rate limits within the window that exclude an executor.
    pub rate_limits_to_exclude: u32,
    /// The first pause after a failed machine creation; it doubles per failure.
    pub provision_first_pause_ms: u64,
    /// The longest pause after failed machine creations.
    pub provision_max_pause_ms: u64,
    /// Executors that a reload adds or grows must pass a host preflight first.
    pub preflight_reloads: bool,
    /// The executor kinds the host can run; `None` accepts any.
    pub kinds: Option<Vec<String>>,
    /// The least severe `event` output emitted: `debug` (every event, the default),
    /// `info` or `warn`. Only events are left out: every decision and effect is an
    /// output whatever the level. Not written while it is the default (so an exported
    /// state reads as before).
    #[serde(skip_serializing_if = "Level::is_debug")]
    pub min_event_level: Level,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            can_probe: true,
            health_probe_interval_ms: 15_000,
            idle_probe_interval_ms: 60_000,
            rate_limit_window_ms: 10 * 60_000,
            rate_limits_to_exclude: 3,
            provision_first_pause_ms: 30_000,
            provision_max_pause_ms: 10 * 60_000,
            preflight_reloads: false,
            kinds: None,
            min_event_level: Level::Debug,
        }
    }
}

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
    /// Give up at this instant (epoch ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<u64>,
}

/// The kind of a failure, which decides the exclusion it earns. The core decides it
/// from a failure's facts ([`crate::classify::classify`]); a host may also give it
/// outright.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FailureKind {
    UsageLimit,
    RateLimit,
    Authentication,
    Outage,
    ModelUnavailable,
    Other,
}

/// A failed call on an executor, as the host saw it: the facts it could extract from
/// what its caller threw (`{ tag?, status?, code?, message, resetAt?, retryAfterMs? }`),
/// or an already-classified failure (`{ kind, message, ... }`). The core classifies it
/// ([`crate::classify`]); an explicit `kind` wins over the other facts.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// The kind, when the host already decided it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FailureKind>,
    /// An @llm4ts/core error's `_tag`: `UsageLimitError`, `RateLimitError`,
    /// `AuthenticationError`, `ProviderError`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The HTTP status of the failed call (100–599).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// An error code: `ECONNREFUSED`, `UND_ERR_SOCKET`, `ConnectionRefused`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default)]
    pub message: String,
    /// A usage limit's reset instant (epoch ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_at: Option<u64>,
    /// A `Retry-After` (milliseconds from `now`) on a rate or usage limit: it sets
    /// the exclusion's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl Failure {
    /// Facts with only a message.
    pub fn new(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            ..Failure::default()
        }
    }

    /// An already-classified failure.
    pub fn of_kind(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind: Some(kind),
            ..Failure::new(message)
        }
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
    /// The answer to a `createMachine` output: the machine's hold.
    #[serde(rename_all = "camelCase")]
    MachineCreated { now: u64, id: String, hold: Value },
    /// The answer to a `createMachine` output: it failed.
    #[serde(rename_all = "camelCase")]
    MachineFailed {
        now: u64,
        id: String,
        #[serde(default)]
        message: String,
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
}

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
            | Input::Reload { now, .. }
            | Input::PreflightResult { now, .. }
            | Input::Restore { now, .. }
            | Input::Tick { now } => *now,
        }
    }

    /// The input's `type` tag.
    pub fn kind(&self) -> &'static str {
        match self {
            Input::Lease(_) => "lease",
            Input::TryLease(_) => "tryLease",
            Input::Cancel { .. } => "cancel",
            Input::Release { .. } => "release",
            Input::Occupy { .. } => "occupy",
            Input::Report { .. } => "report",
            Input::Exclude { .. } => "exclude",
            Input::Resume { .. } => "resume",
            Input::ProbeResult { .. } => "probeResult",
            Input::MachineCreated { .. } => "machineCreated",
            Input::MachineFailed { .. } => "machineFailed",
            Input::Reload { .. } => "reload",
            Input::PreflightResult { .. } => "preflightResult",
            Input::Restore { .. } => "restore",
            Input::Tick { .. } => "tick",
        }
    }
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
        role: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hold: Option<Value>,
        /// Earlier waiting requests (lease order) that this executor could serve, by
        /// role, and that still wait: the requests this grant passed.
        passed: u32,
        /// True for an `occupy`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        occupied: bool,
    },
    /// No executor outside the request's `avoid` can ever serve it.
    #[serde(rename_all = "camelCase")]
    Exhausted {
        request: String,
        role: String,
        /// One reason per executor (the seed's `RosterExhausted`).
        reasons: Vec<String>,
    },
    /// The request's deadline passed.
    #[serde(rename_all = "camelCase")]
    TimedOut {
        request: String,
        /// Why, one per executor its waiting report names ("a busy", "b until ...").
        reasons: Vec<String>,
    },
    /// A `tryLease` found no free slot.
    #[serde(rename_all = "camelCase")]
    Unavailable { request: String },
    /// A waiting request was cancelled.
    #[serde(rename_all = "camelCase")]
    Cancelled { request: String },
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
    },
    /// Probe this health URL; answer with `probeResult`.
    #[serde(rename_all = "camelCase")]
    Probe { executor: String, url: String },
    /// Create a machine for this request on this executor; answer with
    /// `machineCreated` or `machineFailed`.
    #[serde(rename_all = "camelCase")]
    CreateMachine { request: String, executor: String },
    /// Delete this machine.
    #[serde(rename_all = "camelCase")]
    DeleteMachine { executor: String, hold: Value },
    /// Preflight this executor before a reload applies; answer with `preflightResult`.
    #[serde(rename_all = "camelCase")]
    Preflight { executor: String },
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
        name: String,
        message: String,
        fields: Fields,
    },
}

/// An event's fields: a small map written as a JSON object in key order. The core's
/// keys are static names, so an event costs no allocation per key.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Fields(Vec<(Cow<'static, str>, Value)>);

impl Fields {
    /// Sets `key` (a repeated key keeps its last value).
    pub fn insert(&mut self, key: impl Into<Cow<'static, str>>, value: Value) {
        let key = key.into();
        match self
            .0
            .binary_search_by(|(k, _)| k.as_ref().cmp(key.as_ref()))
        {
            Ok(i) => self.0[i].1 = value,
            Err(i) => self.0.insert(i, (key, value)),
        }
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|i| &self.0[i].1)
    }

    /// The fields in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Fields {
    /// Fields from static keys: taken in one go with exact capacity when the keys
    /// are already in strictly increasing order (as the core writes them), else
    /// inserted one by one (a repeated key keeps its last value).
    pub(crate) fn from_static(pairs: Vec<(&'static str, Value)>) -> Fields {
        if pairs.windows(2).all(|w| w[0].0 < w[1].0) {
            let mut v = Vec::with_capacity(pairs.len());
            v.extend(pairs.into_iter().map(|(k, v)| (Cow::Borrowed(k), v)));
            return Fields(v);
        }
        pairs.into_iter().collect()
    }
}

impl<K: Into<Cow<'static, str>>> FromIterator<(K, Value)> for Fields {
    fn from_iter<I: IntoIterator<Item = (K, Value)>>(iter: I) -> Fields {
        let mut fields = Fields(Vec::new());
        for (k, v) in iter {
            fields.insert(k, v);
        }
        fields
    }
}

/// `fields["key"]`, `null` when absent (as `serde_json::Value` indexing does).
impl std::ops::Index<&str> for Fields {
    type Output = Value;
    fn index(&self, key: &str) -> &Value {
        static NULL: Value = Value::Null;
        self.get(key).unwrap_or(&NULL)
    }
}

impl Serialize for Fields {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl Fields {
    /// An event's fields from a JSON object.
    pub(crate) fn from_json(value: &Value) -> Read<Fields> {
        let map = object(value, "a map")?.0;
        // The object's keys are already in order.
        Ok(Fields(
            map.iter()
                .map(|(k, v)| (Cow::Owned(k.clone()), v.clone()))
                .collect(),
        ))
    }
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

const OPTIONS_FIELDS: &[&str] = &[
    "canProbe",
    "healthProbeIntervalMs",
    "idleProbeIntervalMs",
    "rateLimitWindowMs",
    "rateLimitsToExclude",
    "provisionFirstPauseMs",
    "provisionMaxPauseMs",
    "preflightReloads",
    "kinds",
    "minEventLevel",
];

impl Options {
    /// Options from JSON: absent fields take the defaults, unknown ones are refused.
    /// Fields are read in the object's key order, so the first problem named is the
    /// one serde's derive named.
    pub fn from_json(value: &Value) -> Read<Options> {
        let o = object(value, "struct Options")?;
        let mut options = Options::default();
        for (key, v) in o.0 {
            match key.as_str() {
                "canProbe" => options.can_probe = read::bool(v)?,
                "healthProbeIntervalMs" => options.health_probe_interval_ms = read::u64(v)?,
                "idleProbeIntervalMs" => options.idle_probe_interval_ms = read::u64(v)?,
                "rateLimitWindowMs" => options.rate_limit_window_ms = read::u64(v)?,
                "rateLimitsToExclude" => options.rate_limits_to_exclude = read::u32(v)?,
                "provisionFirstPauseMs" => options.provision_first_pause_ms = read::u64(v)?,
                "provisionMaxPauseMs" => options.provision_max_pause_ms = read::u64(v)?,
                "preflightReloads" => options.preflight_reloads = read::bool(v)?,
                "kinds" if v.is_null() => options.kinds = None,
                "kinds" => options.kinds = Some(read::strings(v)?),
                "minEventLevel" => options.min_event_level = Level::from_json(v)?,
                _ => return Err(read::unknown_field(key, OPTIONS_FIELDS)),
            }
        }
        Ok(options)
    }
}

impl FailureKind {
    const NAMES: &'static [&'static str] = &[
        "usageLimit",
        "rateLimit",
        "authentication",
        "outage",
        "modelUnavailable",
        "other",
    ];
    const ALL: [FailureKind; 6] = [
        FailureKind::UsageLimit,
        FailureKind::RateLimit,
        FailureKind::Authentication,
        FailureKind::Outage,
        FailureKind::ModelUnavailable,
        FailureKind::Other,
    ];

    pub fn from_json(value: &Value) -> Read<FailureKind> {
        variant(value, Self::NAMES).map(|i| Self::ALL[i])
    }

    /// The JSON name: `usageLimit`, `rateLimit`, …
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

impl Failure {
    pub fn from_json(value: &Value) -> Read<Failure> {
        const FIELDS: &[&str] = &[
            "kind",
            "tag",
            "status",
            "code",
            "message",
            "resetAt",
            "retryAfterMs",
        ];
        let o = object(value, "struct Failure")?;
        // In key order, as serde's derive read them: the first problem is named.
        for (key, v) in o.0 {
            match key.as_str() {
                _ if v.is_null() && key != "message" && FIELDS.contains(&key.as_str()) => {}
                "kind" => FailureKind::from_json(v).map(drop)?,
                "message" | "tag" | "code" => read::string(v).map(drop)?,
                "status" => http_status(v).map(drop)?,
                "resetAt" | "retryAfterMs" => read::u64(v).map(drop)?,
                _ => return Err(read::unknown_field(key, FIELDS)),
            }
        }
        Ok(Failure {
            kind: o.opt("kind", FailureKind::from_json)?,
            tag: o.opt("tag", read::string)?,
            status: o.opt("status", http_status)?,
            code: o.opt("code", read::string)?,
            message: o.or("message", read::string, String::new())?,
            reset_at: o.opt("resetAt", read::u64)?,
            retry_after_ms: o.opt("retryAfterMs", read::u64)?,
        })
    }
}

/// An HTTP status: a whole number from 100 to 599.
fn http_status(value: &Value) -> Read<u16> {
    read::u64(value)
        .ok()
        .filter(|s| (100..=599).contains(s))
        .map(|s| s as u16)
        .ok_or_else(|| {
            format!(
                "status: {} is not an HTTP status (100 to 599)",
                crate::json::to_text(value)
            )
        })
}

impl ExclusionKind {
    const NAMES: &'static [&'static str] = &["until", "health", "run", "manual"];
    const ALL: [ExclusionKind; 4] = [
        ExclusionKind::Until,
        ExclusionKind::Health,
        ExclusionKind::Run,
        ExclusionKind::Manual,
    ];

    pub fn from_json(value: &Value) -> Read<ExclusionKind> {
        variant(value, Self::NAMES).map(|i| Self::ALL[i])
    }

    /// The JSON name: `until`, `health`, `run`, `manual`.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

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

impl Level {
    const NAMES: &'static [&'static str] = &["debug", "info", "warn"];
    const ALL: [Level; 3] = [Level::Debug, Level::Info, Level::Warn];

    pub fn from_json(value: &Value) -> Read<Level> {
        variant(value, Self::NAMES).map(|i| Self::ALL[i])
    }

    /// The JSON name: `debug`, `info`, `warn`.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
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
        })
    }
}

#[path = "wire.rs"]
pub(crate) mod wire;
