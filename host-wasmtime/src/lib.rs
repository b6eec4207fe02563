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
//! - `shared` (feature `shared`): the log of a roster shared by several processes,
//!   on PostgreSQL (`LogStore`, `PgLogStore`).
//!
//! ```no_run
//! # async fn demo() -> rota_host::Result<()> {
//! use rota_host::{LeaseOptions, Roster};
//! let roster = Roster::builder()
//!     .roster_file("roster.json")
//!     .state_file("rota-state.json")
//!     .build()
//!     .await?;
//! let lease = roster.lease("coder", LeaseOptions::default()).await?;
//! println!("coding on {}", lease.executor());
//! // ... on a 429 from the executor:
//! roster.report_http(lease.executor(), 429, &[("retry-after", "30")], "")?;
//! drop(lease); // released
//! # Ok(()) }
//! ```

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
pub mod trace;

pub use clock::Clock;
pub use engine::{CacheDir, EngineConfig, HostEngine, PolicyModule, BUNDLED_POLICY};
pub use error::{GuestFailure, HostError, Result};
pub use event::Event;
pub use probe::ProbeTls;
pub use roster::{
    BoxFuture, Lease, LeaseOptions, NoProvisioner, Provisioner, Roster, RosterBuilder, StateRetry,
};
pub use runtime::{PolicyRuntime, Step};
pub use source::RosterSource;
