//! What queries return: the snapshot, explanations and reload plans. Queries change
//! nothing; they describe the state as of the last input.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::document::Violation;
use crate::protocol::ExclusionKind;
use crate::read::{self, object, Read};
use crate::sorted::SortedMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// The last input's time (epoch ms).
    pub now: u64,
    pub roles: Vec<String>,
    pub executors: Vec<ExecutorStatus>,
    /// Waiting requests, in lease order.
    pub queue: Vec<QueuedRequest>,
    /// Requests whose machine is being created.
    pub creating: Vec<CreatingRequest>,
    /// A reload waiting for its preflights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_reload: Option<PendingReloadStatus>,
    /// The next wake-up the core wants (epoch ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_at: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorStatus {
    pub id: String,
    pub harness: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub roles: Vec<String>,
    /// Configured slots (0 for an executor a reload removed that still drains).
    pub slots: u32,
    /// Per-role caps in effect.
    pub role_caps: SortedMap<u32>,
    /// Priority per role.
    pub priority: SortedMap<f64>,
    /// Slots taken (leases, occupied work, machines being created).
    pub busy: u32,
    pub busy_by_role: SortedMap<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusion: Option<ExclusionStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<PauseStatus>,
    /// Removed by a reload; takes no new lease and leaves when its last lease ends.
    pub draining: bool,
    pub provision: bool,
    pub leases: Vec<LeaseStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight: Option<PreflightRecord>,
    pub probe_in_flight: bool,
    /// Rate limits counted inside the window.
    pub recent_rate_limits: u32,
    /// Back from a rate-limit or usage-limit cooldown on probation: one slot until a
    /// lease is released without a failure (`recovery: "probation"`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub probation: bool,
    /// The multiplier a failure on probation's cooldown starts from now, when above
    /// 1 (it doubles with each such failure, and halves after each quiet period).
    #[serde(default, skip_serializing_if = "below_two")]
    pub backoff: u32,
    /// `other` failures since the last release without one
    /// (`exclusion.consecutiveFailures`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures_in_a_row: u32,
}

fn below_two(n: &u32) -> bool {
    *n < 2
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExclusionStatus {
    pub kind: ExclusionKind,
    pub reason: String,
    /// End for `until`/`manual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
    pub since: u64,
    /// For `health`: when the next probe is due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_probe_at: Option<u64>,
    /// A timed exclusion that takes over when this one ends (the later end wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then_until: Option<u64>,
    /// The seed's description: "until 2026-...: usage limit (...)".
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PauseStatus {
    pub failures: u32,
    pub until: u64,
    pub message: String,
    /// False once the pause has ended (the failure count stays until a success).
    pub blocked: bool,
    /// The seed's pause record: the reason (`check` for a failed capability check),
    /// when the creation failed and when it is tried again (ISO 8601).
    pub reason: String,
    pub failed_at: String,
    pub retry_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseStatus {
    pub lease: u64,
    pub request: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// What the call is for beyond its role, when its request said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// Its clone number, when the document numbers clones (`clones: "numbered"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<Value>,
    pub since: u64,
    pub occupied: bool,
    /// Released: its machine is being deleted, and the slot frees after.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleting: bool,
    /// On its request's `borrow` executor without a slot (it holds none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub borrowed: bool,
    /// On its request's `borrow` executor (not independent), and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub because: Option<crate::protocol::Because>,
    /// Its owner (a shared roster's instance), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The tenant its request named, when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueuedRequest {
    pub request: String,
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_time: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// What the call is for beyond its role, when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub avoid: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<u64>,
    /// Earlier waiting requests (lease order) of the roles that compete with this
    /// one for an executor (some executor takes both).
    pub ahead: u32,
    pub waiting_since: u64,
    /// Its owner (a shared roster's instance), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The tenant it named, when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatingRequest {
    pub request: String,
    pub executor: String,
    pub role: String,
    pub since: u64,
    /// Its owner (a shared roster's instance), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreflightRecord {
    pub at: u64,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl PreflightRecord {
    pub(crate) fn from_json(value: &Value) -> Read<PreflightRecord> {
        let o = object(value, "struct PreflightRecord")?;
        Ok(PreflightRecord {
            at: o.req("at", read::u64)?,
            ok: o.req("ok", read::bool)?,
            error: o.opt("error", read::string)?,
        })
    }
}

crate::protocol::deserialize_from_json!(PreflightRecord);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingReloadStatus {
    pub since: u64,
    /// Executors whose preflight has not answered yet.
    pub awaiting: Vec<String>,
}

/// Why each executor can or cannot take a request now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub role: String,
    /// The executor the request would get now, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pick: Option<String>,
    /// Whether any executor outside `avoid` can ever serve it.
    pub can_ever_serve: bool,
    /// The explained waiting request's purpose, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// The explained waiting request's tenant, when it names one or the document
    /// serves tenants fairly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Where its tenant stands among the role's waiting tenants (`fairness:
    /// "tenants"`), in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    /// What the request's `affinity` key does now, in words, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<String>,
    pub executors: Vec<ExecutorExplanation>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorExplanation {
    pub id: String,
    /// It could take the request now.
    pub ok: bool,
    /// Why not (empty when ok): "lacks the role", "busy (2 of 2 slots)", ...
    pub reasons: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<f64>,
}

/// A dry run of a reload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub added: Vec<String>,
    /// Removed executors that still run leases: they drain.
    pub draining: Vec<String>,
    /// Removed executors with no lease: they leave at once.
    pub leaving: Vec<String>,
    pub resized: Vec<Resize>,
    /// Executors whose roles, priorities or caps change.
    pub changed: Vec<String>,
    /// Waiting requests the reload would grant: request → executor.
    pub granted: Vec<PlannedGrant>,
    /// Waiting requests it would end as exhausted.
    pub exhausted: Vec<String>,
    /// Executors that would need a preflight first.
    pub preflight: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resize {
    pub id: String,
    pub from: u32,
    pub to: u32,
    pub running: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedGrant {
    pub request: String,
    pub executor: String,
}

/// Violations, if any, for `validate`.
pub type Violations = Vec<Violation>;
