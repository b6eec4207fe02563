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
