//! One small hand-written JSON writer for every shape the core hands to hosts (the
//! snapshot, explanations, plans, violations, options, exported states and outputs).
//!
//! Its text is, byte for byte, what serde_json writes over the types' derived
//! `Serialize` (fields in declaration order, the same `skip_serializing_if`s, numbers
//! and escapes as serde_json writes them): `core/tests/writer.rs` and the simulation
//! tests compare the two on many states. The hosts use this writer; the derives stay
//! for Rust callers (and as the tests' reference), and cost the WebAssembly modules
//! nothing unless something instantiates them.
//!
//! Why by hand: a derived `Serialize`, instantiated for serde_json's writer, is a few
//! hundred bytes of WebAssembly per type (one call per key, colon and comma, each with
//! its error path); here a field is one key write and one value write.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::Value;

/// A value the core writes as JSON text.
pub trait WriteJson {
    /// Appends the value's compact JSON text.
    fn write_json(&self, out: &mut Vec<u8>);
}

/// The value's compact JSON text.
pub fn to_json_text(value: &dyn WriteJson) -> String {
    let mut out = Vec::with_capacity(256);
    value.write_json(&mut out);
    // Only whole UTF-8 strings and ASCII went in.
    String::from_utf8(out).unwrap_or_default()
}

/// The value as a `serde_json::Value` (through its text).
pub fn to_json_value(value: &dyn WriteJson) -> Value {
    serde_json::from_str(&to_json_text(value)).unwrap_or(Value::Null)
}

/// A JSON object being written: `{"key":value,...}`.
pub(crate) struct Obj<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Obj<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Obj<'a> {
        out.push(b'{');
        Obj { out, first: true }
    }

    /// `"key":` (keys are plain ASCII names), after a comma unless it is the first.
    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    /// A field written always.
    pub(crate) fn field<T: WriteJson + ?Sized>(&mut self, key: &str, value: &T) -> &mut Self {
        value.write_json(self.key(key));
        self
    }

    /// A field left out while `None` (`skip_serializing_if = "Option::is_none"`).
    pub(crate) fn some<T: WriteJson>(&mut self, key: &str, value: &Option<T>) -> &mut Self {
        match value {
            Some(value) => self.field(key, value),
            None => self,
        }
    }

    /// A list left out while empty (`skip_serializing_if = "Vec::is_empty"`).
    pub(crate) fn nonempty<T: WriteJson>(&mut self, key: &str, value: &[T]) -> &mut Self {
        if value.is_empty() {
            return self;
        }
        self.field(key, &value)
    }

    /// A map written as an object: key/value pairs in the given order.
    pub(crate) fn pairs<'k, K, V, I>(&mut self, key: &str, pairs: I) -> &mut Self
    where
        K: MapKey + 'k,
        V: WriteJson + 'k,
        I: IntoIterator<Item = &'k (K, V)>,
    {
        write_map(self.key(key), pairs.into_iter().map(|(k, v)| (k, v)));
        self
    }

    pub(crate) fn end(&mut self) {
        self.out.push(b'}');
    }
}

/// A map key: serde_json writes string keys as strings and integer keys quoted.
pub(crate) trait MapKey {
    fn write_key(&self, out: &mut Vec<u8>);
}

impl MapKey for String {
    fn write_key(&self, out: &mut Vec<u8>) {
        write_str(out, self);
    }
}

impl MapKey for str {
    fn write_key(&self, out: &mut Vec<u8>) {
        write_str(out, self);
    }
}

impl MapKey for u64 {
    fn write_key(&self, out: &mut Vec<u8>) {
        out.push(b'"');
        write_u64(out, *self);
        out.push(b'"');
    }
}

/// Pairs as a JSON object.
fn write_map<'k, K: MapKey + 'k, V: WriteJson + 'k>(
    out: &mut Vec<u8>,
    pairs: impl Iterator<Item = (&'k K, &'k V)>,
) {
    out.push(b'{');
    for (i, (k, v)) in pairs.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        k.write_key(out);
        out.push(b':');
        v.write_json(out);
    }
    out.push(b'}');
}

/// Items as a JSON array.
fn write_seq<'t, T: WriteJson + 't>(out: &mut Vec<u8>, items: impl Iterator<Item = &'t T>) {
    out.push(b'[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        item.write_json(out);
    }
    out.push(b']');
}

// ---- Scalars ----------------------------------------------------------------------

/// A JSON string as serde_json writes it: plain bytes as they are; a string with a
/// quote, a backslash or a control character goes through serde_json's escaping.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else if serde_json::to_writer(&mut *out, s).is_err() {
        out.extend_from_slice(b"null");
    }
}

pub(crate) fn write_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// A JSON value as serde_json writes it (objects in the map's key order).
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::String(s) => write_str(out, s),
        Value::Number(n) if n.is_u64() => write_u64(out, n.as_u64().unwrap_or_default()),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Null => out.extend_from_slice(b"null"),
        other => {
            if serde_json::to_writer(&mut *out, other).is_err() {
                out.extend_from_slice(b"null");
            }
        }
    }
}

impl WriteJson for str {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_str(out, self);
    }
}

impl WriteJson for String {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_str(out, self);
    }
}

impl WriteJson for u64 {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_u64(out, *self);
    }
}

impl WriteJson for u32 {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_u64(out, u64::from(*self));
    }
}

impl WriteJson for u8 {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_u64(out, u64::from(*self));
    }
}

impl WriteJson for i64 {
    fn write_json(&self, out: &mut Vec<u8>) {
        if *self < 0 {
            out.push(b'-');
        }
        write_u64(out, self.unsigned_abs());
    }
}

impl WriteJson for bool {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(if *self { b"true" } else { b"false" });
    }
}

impl WriteJson for f64 {
    fn write_json(&self, out: &mut Vec<u8>) {
        // serde_json's own float text (and `null` for a non-finite one).
        if serde_json::to_writer(&mut *out, self).is_err() {
            out.extend_from_slice(b"null");
        }
    }
}

impl WriteJson for Value {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_value(out, self);
    }
}

impl<T: WriteJson + ?Sized> WriteJson for &T {
    fn write_json(&self, out: &mut Vec<u8>) {
        (**self).write_json(out);
    }
}

impl<T: WriteJson> WriteJson for Option<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Some(value) => value.write_json(out),
            None => out.extend_from_slice(b"null"),
        }
    }
}

impl<T: WriteJson> WriteJson for [T] {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_seq(out, self.iter());
    }
}

impl<T: WriteJson> WriteJson for Vec<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_seq(out, self.iter());
    }
}

impl<T: WriteJson> WriteJson for VecDeque<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_seq(out, self.iter());
    }
}

impl<T: WriteJson> WriteJson for BTreeSet<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_seq(out, self.iter());
    }
}

impl<K: MapKey, V: WriteJson> WriteJson for BTreeMap<K, V> {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_map(out, self.iter());
    }
}

impl<V: WriteJson> WriteJson for crate::sorted::SortedMap<V> {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_map(out, self.iter());
    }
}

impl<A: WriteJson, B: WriteJson> WriteJson for (A, B) {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        self.0.write_json(out);
        out.push(b',');
        self.1.write_json(out);
        out.push(b']');
    }
}

impl<A: WriteJson, B: WriteJson, C: WriteJson, D: WriteJson> WriteJson for (A, B, C, D) {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        self.0.write_json(out);
        out.push(b',');
        self.1.write_json(out);
        out.push(b',');
        self.2.write_json(out);
        out.push(b',');
        self.3.write_json(out);
        out.push(b']');
    }
}

// ---- The core's shapes --------------------------------------------------------------

use crate::document::Violation;
use crate::protocol::{
    Choice, Exclusion, ExclusionKind, Level, Options, Output, PersistedState, Unservable,
};
use crate::status::{
    CreatingRequest, ExclusionStatus, ExecutorExplanation, ExecutorStatus, Explanation,
    LeaseStatus, PauseStatus, PendingReloadStatus, Plan, PlannedGrant, PreflightRecord,
    QueuedRequest, Resize, Snapshot,
};

impl WriteJson for Violation {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("path", &self.path)
            .field("message", &self.message)
            .end();
    }
}

impl WriteJson for ExclusionKind {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_str(out, self.name());
    }
}

impl WriteJson for Choice {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_str(out, self.name());
    }
}

impl WriteJson for Unservable {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_str(out, self.name());
    }
}

impl WriteJson for Level {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_str(out, self.name());
    }
}

impl WriteJson for Options {
    fn write_json(&self, out: &mut Vec<u8>) {
        let mut o = Obj::new(out);
        o.field("canProbe", &self.can_probe)
            .field("healthProbeIntervalMs", &self.health_probe_interval_ms)
            .field("idleProbeIntervalMs", &self.idle_probe_interval_ms)
            .field("rateLimitWindowMs", &self.rate_limit_window_ms)
            .field("rateLimitsToExclude", &self.rate_limits_to_exclude)
            .field("provisionFirstPauseMs", &self.provision_first_pause_ms)
            .field("provisionMaxPauseMs", &self.provision_max_pause_ms);
        if self.preflight {
            o.field("preflight", &self.preflight);
        }
        o.field("preflightReloads", &self.preflight_reloads)
            .some("choice", &self.choice)
            .some("unservable", &self.unservable)
            .field("kinds", &self.kinds);
        if !self.min_event_level.is_debug() {
            o.field("minEventLevel", &self.min_event_level);
        }
        o.end();
    }
}

impl WriteJson for Exclusion {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("id", &self.id)
            .field("reason", &self.reason)
            .field("kind", &self.kind)
            .some("until", &self.until)
            .end();
    }
}

impl WriteJson for PersistedState {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("version", &self.version)
            .field("exclusions", &self.exclusions)
            .end();
    }
}

impl WriteJson for Output {
    fn write_json(&self, out: &mut Vec<u8>) {
        crate::json::write_output(out, self);
    }
}

/// The `persist` output (the one `json::write_output` leaves to this module).
pub(crate) fn write_persist(out: &mut Vec<u8>, ids: &[String], state: &PersistedState) {
    out.extend_from_slice(b"{\"type\":\"persist\",\"ids\":");
    ids.write_json(out);
    out.extend_from_slice(b",\"state\":");
    state.write_json(out);
    out.push(b'}');
}

impl WriteJson for Snapshot {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("now", &self.now)
            .field("roles", &self.roles)
            .field("executors", &self.executors)
            .field("queue", &self.queue)
            .field("creating", &self.creating)
            .some("pendingReload", &self.pending_reload)
            .some("wakeAt", &self.wake_at)
            .end();
    }
}

impl WriteJson for ExecutorStatus {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("id", &self.id)
            .field("harness", &self.harness)
            .some("model", &self.model)
            .field("roles", &self.roles)
            .field("slots", &self.slots)
            .field("roleCaps", &self.role_caps)
            .field("priority", &self.priority)
            .field("busy", &self.busy)
            .field("busyByRole", &self.busy_by_role)
            .some("exclusion", &self.exclusion)
            .some("pause", &self.pause)
            .field("draining", &self.draining)
            .field("provision", &self.provision)
            .field("leases", &self.leases)
            .some("preflight", &self.preflight)
            .field("probeInFlight", &self.probe_in_flight)
            .field("recentRateLimits", &self.recent_rate_limits)
            .end();
    }
}

impl WriteJson for ExclusionStatus {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("kind", &self.kind)
            .field("reason", &self.reason)
            .some("until", &self.until)
            .field("since", &self.since)
            .some("nextProbeAt", &self.next_probe_at)
            .some("thenUntil", &self.then_until)
            .field("description", &self.description)
            .end();
    }
}

impl WriteJson for PauseStatus {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("failures", &self.failures)
            .field("until", &self.until)
            .field("message", &self.message)
            .field("blocked", &self.blocked)
            .field("reason", &self.reason)
            .field("failedAt", &self.failed_at)
            .field("retryAt", &self.retry_at)
            .end();
    }
}

impl WriteJson for LeaseStatus {
    fn write_json(&self, out: &mut Vec<u8>) {
        let mut o = Obj::new(out);
        o.field("lease", &self.lease)
            .field("request", &self.request)
            .some("role", &self.role)
            .some("label", &self.label)
            .some("hold", &self.hold)
            .field("since", &self.since)
            .field("occupied", &self.occupied);
        if self.deleting {
            o.field("deleting", &self.deleting);
        }
        o.end();
    }
}

impl WriteJson for QueuedRequest {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("request", &self.request)
            .field("role", &self.role)
            .some("rank", &self.rank)
            .some("eventTime", &self.event_time)
            .some("label", &self.label)
            .some("pin", &self.pin)
            .nonempty("avoid", &self.avoid)
            .some("prefer", &self.prefer)
            .some("deadline", &self.deadline)
            .field("ahead", &self.ahead)
            .field("waitingSince", &self.waiting_since)
            .end();
    }
}

impl WriteJson for CreatingRequest {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("request", &self.request)
            .field("executor", &self.executor)
            .field("role", &self.role)
            .field("since", &self.since)
            .end();
    }
}

impl WriteJson for PreflightRecord {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("at", &self.at)
            .field("ok", &self.ok)
            .some("error", &self.error)
            .end();
    }
}

impl WriteJson for PendingReloadStatus {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("since", &self.since)
            .field("awaiting", &self.awaiting)
            .end();
    }
}

impl WriteJson for Explanation {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("role", &self.role)
            .some("pick", &self.pick)
            .field("canEverServe", &self.can_ever_serve)
            .field("executors", &self.executors)
            .end();
    }
}

impl WriteJson for ExecutorExplanation {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("id", &self.id)
            .field("ok", &self.ok)
            .field("reasons", &self.reasons)
            .some("priority", &self.priority)
            .end();
    }
}

impl WriteJson for Plan {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("added", &self.added)
            .field("draining", &self.draining)
            .field("leaving", &self.leaving)
            .field("resized", &self.resized)
            .field("changed", &self.changed)
            .field("granted", &self.granted)
            .field("exhausted", &self.exhausted)
            .field("preflight", &self.preflight)
            .end();
    }
}

impl WriteJson for Resize {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("id", &self.id)
            .field("from", &self.from)
            .field("to", &self.to)
            .field("running", &self.running)
            .end();
    }
}

impl WriteJson for PlannedGrant {
    fn write_json(&self, out: &mut Vec<u8>) {
        Obj::new(out)
            .field("request", &self.request)
            .field("executor", &self.executor)
            .end();
    }
}
