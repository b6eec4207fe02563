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
//!   `reload`, `snapshot`, `explain`, `plan`, `swap_policy`. A roster folds one
//!   ordered input log with the core: in memory (`Roster::builder()...build()`), or
//!   shared by several processes on PostgreSQL (`.shared(url, roster)...connect()`).
//! - [`sim`] and [`trace`]: the `rota simulate` and `rota replay` engines.
//! - `shared` (feature `shared`): the roster over a log on PostgreSQL:
//!   `SharedRoster` (sql/PROTOCOL.md), over `LogStore` / `PgLogStore`.
//!
//! The guest answers JSON; the roster's one fold (for both logs) and the simulator
//! read each output into the core's typed [`rota_core::Output`] ([`output::read`]) and
//! match it without a wildcard arm. An output this host cannot read is an `outputUnreadable`
//! warning event naming it; the step's other outputs are still carried out.
//!
//! The modules, top first; imports run downwards only (`tests/layering.rs` fails on an
//! import upwards or a cycle):
//! - [`sim`], [`trace`], `shared` (its modules: `builder` joins; `roster` the calls
//!   and `leader` the membership's tasks; `driver` appends, reads and folds each entry
//!   through the roster's fold; `pg` the PostgreSQL backend; `log` the log's contract);
//! - [`roster`]: the API, then by concept: `builder`, `requests` (and leases), `fold`
//!   (the one output dispatcher), `machines`, `probes`, `timers`, `writer` (the state
//!   file), `fence`, `events`, `state` (what a roster holds), `provisioner`,
//!   `document`;
//! - [`runtime`] (one policy in its sandbox, checkpoint and journal) and
//!   [`state_file`] (the state file's lock, read, merge and atomic write);
//! - [`engine`]: the wasmtime engine, the module cache, loading and instantiating;
//! - [`guest`]: one instance, call by call through the plain ABI;
//! - leaves: [`output`], [`probe`], [`classify`] (failure facts from HTTP and IO
//!   errors), [`source`] (roster files), [`telemetry`] (metric names), `table`,
//!   [`clock`]; then [`error`]; then [`event`], and `atomic` (atomic file writes).
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

mod atomic;
pub mod classify;
pub mod clock;
pub mod engine;
pub mod error;
pub mod event;
pub mod guest;
pub mod output;
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
// Every core type this crate's public API takes or gives, and every type their public
// fields hold, so that a project names them all through `rota_host::` (tests/api.rs
// names each one so). `trace::NativeEngine` holds the core itself
// (`rota_host::core::Policy`, with the whole core API).
pub use rota_core::classify::Signals;
pub use rota_core::document::{Cooldowns, Form, Priority};
pub use rota_core::status::{
    CreatingRequest, ExclusionStatus, ExecutorExplanation, ExecutorStatus, LeaseStatus,
    PauseStatus, PendingReloadStatus, PlannedGrant, PreflightRecord, QueuedRequest, Resize,
};
pub use rota_core::{clone_name, ClonesRule, LeaseEventsRule};
pub use rota_core::{
    Because, Check, Choice, CoderSlotsDefault, Document, Effort, EffortLevel, Exclusion,
    ExclusionKind, ExecutorSpec, ExpiredOwnerLeases, ExplainRequest, Explanation, Failure,
    FailureKind, Fields, Level, Options, Output, PersistedState, Plan, PreferRule, ResetTime,
    Rules, Snapshot, SortedMap, Unservable, Violation,
};
/// The order a role's waiting requests are served in (the document's `fairness`), and
/// the tenant of a lease that names none.
pub use rota_core::{Fairness, DEFAULT_TENANT};
/// How an executor returns after a rate-limit or usage-limit cooldown.
pub use rota_core::{RecoveryMode, RecoveryRule};

pub use clock::Clock;
pub use engine::{CacheDir, EngineConfig, HostEngine, PolicyModule, BUNDLED_POLICY};
pub use error::{GuestFailure, HostError, PolicyCode, Result};
pub use event::Event;
pub use probe::ProbeTls;
pub use roster::{
    BoxFuture, Explain, IntoDocument, Lease, LeaseOptions, NoProvisioner, Provisioner, Roster,
    RosterBuilder, StateRetry,
};
pub use runtime::{PolicyRuntime, Step};
pub use source::RosterSource;
/// A DER certificate, as [`ProbeTls::new`] takes them (from rustls, which the probes use).
pub use tokio_rustls::rustls::pki_types::CertificateDer;
