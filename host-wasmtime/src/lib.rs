//! rota-host: runs the rota policy module in wasmtime and does the IO it asks for.
//!
//! The policy (crate `rota-core`, compiled to WebAssembly with the plain ABI of
//! `rota-wasm`) decides; this crate carries out its decisions with tokio: timers at
//! its wake-up times, HTTP health probes, atomic state files, machine provisioning
//! through a [`Provisioner`], and events through `tracing`.
//!
//! - [`HostEngine`]: one wasmtime engine (epoch deadlines, optional fuel, a memory
//!   cap) and a disk cache of precompiled modules keyed by the module's SHA-256 and
//!   the engine's compatibility hash (which covers the wasmtime version).
//! - [`PolicyRuntime`]: one policy in its sandbox, synchronous; a trap or an overrun
//!   drops the instance and restores the last good state (checkpoint + journal).
//! - [`Roster`]: the async API: `lease`, `try_lease`, `report`, `exclude`, `resume`,
//!   `reload`, `snapshot`, `explain`, `plan`, `swap_policy`.
//! - [`sim`] and [`trace`]: the `rota simulate` and `rota replay` engines.
//! - `shared` (feature `shared`): a roster shared by several processes through a log
//!   on PostgreSQL: `SharedRoster` (sql/PROTOCOL.md), over `LogStore` / `PgLogStore`.
//!
//! The README's example, which `examples/lease.rs` runs (CI builds it, and a crate
//! outside the workspace runs it through a path dependency: `scripts/test-dependent.sh`):
//!
//! ```no_run
#![doc = include_str!("../examples/lease.rs")]
//! ```
//!
//! The core's types that the API takes and gives are re-exported here
//! ([`ExplainRequest`], [`Snapshot`], [`Failure`], [`ExecutorSpec`] ...), and the
//! whole crate as [`core`](mod@core).

#![warn(missing_docs)]

pub mod classify;
pub mod clock;
pub mod engine;
pub mod error;
pub mod event;
pub mod guest;
pub mod probe;
pub mod roster;
pub mod runtime;
#[cfg(feature = "shared")]
pub mod shared;
pub mod sim;
pub mod source;
pub mod state_file;
mod table;
pub mod telemetry;
pub mod trace;

/// The policy engine (crate `rota-core`), for every type the API uses.
pub use rota_core as core;
pub use rota_core::status::{ExclusionStatus, ExecutorStatus};
pub use rota_core::{
    Document, Exclusion, ExclusionKind, ExecutorSpec, ExplainRequest, Explanation, Failure,
    FailureKind, Level, Options, PersistedState, Plan, Snapshot, Violation,
};

pub use clock::Clock;
pub use engine::{CacheDir, EngineConfig, HostEngine, PolicyModule, BUNDLED_POLICY};
pub use error::{GuestFailure, HostError, PolicyCode, Result};
pub use event::Event;
pub use probe::ProbeTls;
pub use roster::{
    BoxFuture, Explain, Lease, LeaseOptions, NoProvisioner, Provisioner, Roster, RosterBuilder,
    StateRetry,
};
pub use runtime::{PolicyRuntime, Step};
pub use source::RosterSource;
