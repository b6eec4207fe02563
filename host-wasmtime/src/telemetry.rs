//! Metrics through the [`metrics`] facade: the host records them, whatever recorder
//! the application installs (Prometheus, OpenTelemetry ...) exports them; without a
//! recorder they cost a branch. The names are the package's contract, listed in the
//! README for every host to match.

use std::sync::Once;

/// Counter: leases granted, labels `role` and `executor`.
pub const LEASES_GRANTED: &str = "rota_leases_granted_total";
/// Histogram: seconds from a lease request to its grant, label `role`.
pub const LEASE_WAIT: &str = "rota_lease_wait_seconds";
/// Counter: executors taken out of the round, label `kind`, the exclusion's (`until`,
/// `health`, `run`, `manual`).
pub const EXCLUSIONS: &str = "rota_exclusions_total";
/// Counter: health probes answered, labels `executor` and `up` (`true`/`false`).
pub const PROBES: &str = "rota_probes_total";
/// Gauge: this host's requests waiting for a lease, label `role`.
pub const QUEUE_LENGTH: &str = "rota_queue_length";
/// Counter: state-file writes, label `result` (`ok`/`failed`).
pub const STATE_WRITES: &str = "rota_state_writes_total";

/// Gauge: slots held, labels `executor` and `role` (set by `Roster::metrics`).
pub const SLOTS_IN_USE: &str = "rota_slots_in_use";
/// Gauge: slots for the role on the executors in the round, held or not (the core's
/// `capacity`), label `role` (set by `Roster::metrics`).
pub const CAPACITY: &str = "rota_capacity";
/// Gauge: 1 while the executor is out of the round with that kind of exclusion, else
/// 0, labels `executor` and `kind` (`until`, `health`, `run`, `manual`; set by
/// `Roster::metrics`).
pub const EXCLUDED: &str = "rota_excluded";
/// Counter: failures reported, labels `executor` and `kind` (the core's:
/// `usageLimit`, `rateLimit`, `authentication`, `outage`, `modelUnavailable`, `other`).
pub const FAILURES: &str = "rota_failures_total";
/// Counter: lease requests that waited for an executor's budget, labels `executor` and
/// `role` (the executors a `waiting` output names as `spent`).
pub const BUDGET_WAITS: &str = "rota_budget_waits_total";

/// Describes every metric to the installed recorder (once per process).
pub(crate) fn describe() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        metrics::describe_counter!(LEASES_GRANTED, "leases granted");
        metrics::describe_histogram!(
            LEASE_WAIT,
            metrics::Unit::Seconds,
            "time from a lease request to its grant"
        );
        metrics::describe_counter!(EXCLUSIONS, "executors taken out of the round");
        metrics::describe_counter!(PROBES, "health probes answered");
        metrics::describe_gauge!(QUEUE_LENGTH, "requests waiting for a lease");
        metrics::describe_counter!(STATE_WRITES, "state-file writes");
        metrics::describe_gauge!(SLOTS_IN_USE, "slots held, per executor and role");
        metrics::describe_gauge!(CAPACITY, "slots for the role on the executors in the round");
        metrics::describe_gauge!(
            EXCLUDED,
            "whether the executor is out of the round, per kind"
        );
        metrics::describe_counter!(FAILURES, "failures reported, per executor and kind");
        metrics::describe_counter!(BUDGET_WAITS, "lease requests that waited for a budget");
    });
}

pub(crate) fn granted(role: &str, executor: &str, wait_ms: Option<u64>) {
    metrics::counter!(LEASES_GRANTED, "role" => role.to_string(), "executor" => executor.to_string())
        .increment(1);
    if let Some(wait) = wait_ms {
        metrics::histogram!(LEASE_WAIT, "role" => role.to_string()).record(wait as f64 / 1000.0);
    }
}

pub(crate) fn excluded(kind: &str) {
    metrics::counter!(EXCLUSIONS, "kind" => kind.to_string()).increment(1);
}

pub(crate) fn probed(executor: &str, up: bool) {
    metrics::counter!(PROBES, "executor" => executor.to_string(), "up" => up.to_string())
        .increment(1);
}

pub(crate) fn queue_length(role: &str, waiting: usize) {
    metrics::gauge!(QUEUE_LENGTH, "role" => role.to_string()).set(waiting as f64);
}

pub(crate) fn state_written(ok: bool) {
    metrics::counter!(STATE_WRITES, "result" => if ok { "ok" } else { "failed" }).increment(1);
}

pub(crate) fn failed(executor: &str, kind: &str) {
    metrics::counter!(FAILURES, "executor" => executor.to_string(), "kind" => kind.to_string())
        .increment(1);
}

pub(crate) fn budget_waited(executor: &str, role: &str) {
    metrics::counter!(BUDGET_WAITS, "executor" => executor.to_string(), "role" => role.to_string())
        .increment(1);
}

pub(crate) fn slots_in_use(executor: &str, role: &str, held: u32) {
    metrics::gauge!(SLOTS_IN_USE, "executor" => executor.to_string(), "role" => role.to_string())
        .set(f64::from(held));
}

pub(crate) fn capacity(role: &str, slots: u32) {
    metrics::gauge!(CAPACITY, "role" => role.to_string()).set(f64::from(slots));
}

pub(crate) fn excluded_now(executor: &str, kind: &'static str, out: bool) {
    metrics::gauge!(EXCLUDED, "executor" => executor.to_string(), "kind" => kind).set(if out {
        1.0
    } else {
        0.0
    });
}
