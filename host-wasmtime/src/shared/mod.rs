//! The input log of a roster shared by several processes (feature `shared`).
//!
//! Every instance appends its inputs to one totally ordered log and folds all of it
//! into its own copy of the core (DESIGN.md, "Several processes, one roster").
//! [`SharedRoster`] is the roster (`crate::roster`: its state, its one fold and output
//! dispatcher, its requests and leases) over that log, following the replica protocol
//! of `sql/PROTOCOL.md` (`builder`: joining, also as `RosterBuilder::shared`; `roster`:
//! the calls; `leader`: heartbeats, rejoining and the leader's duties; `driver`:
//! appending and reading, each entry folded through the roster's fold). Below it is the
//! log's storage (`log`): [`LogStore`] says what a backend must guarantee, and
//! [`PgLogStore`] is the PostgreSQL backend, on the schema `sql/rota-log-v1.sql` that
//! the npm package's `PgLogStore` applies too (the rules live in its functions, so the
//! two hosts cannot disagree on them).
//!
//! What a backend guarantees:
//! - `append`: one batch, one commit; the entries get the next sequence numbers with
//!   no gap (an aborted append's numbers are given again) and one `now` from the
//!   store's clock that never goes back. With an epoch the batch is leader-only and
//!   refused ([`LogError::StaleEpoch`]) unless the appender holds the leader lease at
//!   that epoch, still valid at the entries' `now`.
//! - `read_from`: the entries in order; what was appended before a read began and
//!   has a lower seq than one it returns is returned too (seqs become visible in
//!   order). Below the compaction point: [`LogError::Compacted`].
//! - `subscribe`: wakes readers soon after an append, and by a timer in any case,
//!   so a lost notification only delays a reader. Wakes carry no entries: the log is
//!   the truth.
//! - Leader lease and heartbeats on the store's clock, never an instance's.
//! - `expire_instance`: the leader's expiry is atomic with the heartbeat check: a
//!   heartbeat that lands before it refuses it; one that lands after it returns only
//!   once the expiry is in the log (a read after the heartbeat finds it).
//! - Snapshots for compaction and late joiners: compaction never deletes an entry no
//!   snapshot covers.

mod builder;
mod driver;
mod leader;
pub(crate) mod log;
mod pg;
mod roster;

pub use builder::SharedRosterBuilder;
pub use driver::SharedConfig;
pub use log::{
    Appended, Head, InstanceSeen, LeaderLease, LogEntry, LogError, LogResult, LogStore, Snapshot,
    SubscribeOptions, Subscription, Wake,
};
pub use pg::{PgLogStore, SCHEMA_SQL, SCHEMA_VERSION};
pub use roster::{Lease, LeaseOf, SharedRoster};
