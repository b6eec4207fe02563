//! Health probes: the schedule of health-excluded executors due a probe (the flows
//! are `probing.rs`'s).

use super::keys::Index;

/// The probe schedule: which executors are out with a health exclusion, and
/// which of them wait for a probe, by the earliest time one can be due.
#[derive(Debug, Clone, Default)]
pub(super) struct Probes {
    /// Per executor: out with a health exclusion (a list, not a set: one map type
    /// fewer in the WebAssembly module).
    pub(super) health: Vec<bool>,
    /// Health-excluded executors with no probe in flight, keyed by the earliest time
    /// their next probe can be due (exact before the first probe; after one, the last
    /// probe plus the shorter interval): the probe scan visits only those due.
    pub(super) waits: Index,
}
