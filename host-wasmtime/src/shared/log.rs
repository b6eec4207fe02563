//! The log's contract: what a backend stores and guarantees ([`LogStore`], the
//! module docs of `shared` list the guarantees), its entries and answers, and what it
//! refuses ([`LogError`]). A leaf: the roster above it, the backends beside it.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// What a store refuses, with a stable [`code`](LogError::code).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// A leader-only append, renewal or step-down at an epoch that lost the lease.
    #[error("{0}")]
    StaleEpoch(String),
    /// A read from at or below the compaction point: start from the latest snapshot.
    #[error("{0}")]
    Compacted(String),
    /// A snapshot past the log's head, or a compaction with no snapshot at its seq.
    #[error("{0}")]
    NoSnapshot(String),
    /// The database has a newer schema than this host speaks (it is never downgraded).
    #[error(
        "the database's rota log schema is version {found}; this host speaks version {supported}"
    )]
    SchemaTooNew {
        /// The database's schema version.
        found: i32,
        /// The newest this host speaks.
        supported: i32,
    },
    /// A bad argument, refused before anything was sent.
    #[error("{0}")]
    InvalidInput(String),
    /// Anything else from the database or the connection.
    #[error("the log store failed: {0}")]
    Database(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl LogError {
    /// The same codes as the npm package's `LogStoreError`.
    pub fn code(&self) -> &'static str {
        match self {
            LogError::StaleEpoch(_) => "STALE_EPOCH",
            LogError::Compacted(_) => "COMPACTED",
            LogError::NoSnapshot(_) => "NO_SNAPSHOT",
            LogError::SchemaTooNew { .. } => "SCHEMA_TOO_NEW",
            LogError::InvalidInput(_) => "INVALID_INPUT",
            LogError::Database(_) => "DATABASE",
        }
    }
}

/// A log store's answer.
pub type LogResult<T> = std::result::Result<T, LogError>;

/// One entry of the log. `now` is the store's clock (epoch ms) at its append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// Its place in the log (from 1, no gaps).
    pub seq: u64,
    /// The store's clock at its append, epoch ms.
    pub now: u64,
    /// The instance that appended it.
    pub instance: String,
    /// The leader's epoch on a leader-only entry.
    pub epoch: Option<u64>,
    /// The entry itself (an input as JSON text).
    pub entry: String,
}

/// Where an appended batch went: seqs `first_seq..=last_seq`, all stamped `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The batch's first seq.
    pub first_seq: u64,
    /// The batch's last seq.
    pub last_seq: u64,
    /// The store's clock at the append, epoch ms.
    pub now: u64,
}

/// The log's head (zeros for a roster with no entry yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// The last entry's seq.
    pub last_seq: u64,
    /// The last entry's `now`.
    pub last_now: u64,
    /// The seq at or below which entries were compacted away.
    pub compacted_through: u64,
}

/// The leader lease as it stands after an acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderLease {
    /// Whether the asking instance holds it now.
    pub acquired: bool,
    /// The holder (none after a step-down).
    pub instance: Option<String>,
    /// The lease's epoch (it grows with each new holder).
    pub epoch: u64,
    /// The store's clock, epoch ms.
    pub expires_at: u64,
}

/// A stored snapshot of the folded state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The state after entries `1..=seq`.
    pub seq: u64,
    /// The state (the core's exported state as JSON text).
    pub state: String,
    /// The store's clock when it was written, epoch ms.
    pub created_at: u64,
}

/// An instance whose heartbeat lapsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceSeen {
    /// The instance.
    pub instance: String,
    /// Its last heartbeat on the store's clock, epoch ms.
    pub last_seen: u64,
}

/// Why a reader was woken: read from where it stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// An append committed; `seq` is its last.
    Notify {
        /// The append's last seq.
        seq: u64,
    },
    /// Notifications flow (again): what came before them must be read.
    Listen,
    /// The timer: the backstop for lost notifications.
    Poll,
}

/// How a subscription wakes its reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscribeOptions {
    /// The backstop timer: a [`Wake::Poll`] this often.
    pub poll: Duration,
    /// Whether to listen for notifications at all (false: poll only).
    pub listen: bool,
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        SubscribeOptions {
            poll: Duration::from_secs(1),
            listen: true,
        }
    }
}

/// A stream of [`Wake`]s; dropping it stops its tasks.
pub struct Subscription {
    wakes: mpsc::Receiver<Wake>,
    listener: Arc<AtomicU32>,
    tasks: Vec<AbortHandle>,
}

impl Subscription {
    /// For backends: wakes arrive on `wakes`; `listener` holds the id of the
    /// notification connection (0: none); `tasks` are aborted on drop.
    pub fn from_parts(
        wakes: mpsc::Receiver<Wake>,
        listener: Arc<AtomicU32>,
        tasks: Vec<AbortHandle>,
    ) -> Self {
        Subscription {
            wakes,
            listener,
            tasks,
        }
    }

    /// The next wake (None only when the backend's tasks ended).
    pub async fn next(&mut self) -> Option<Wake> {
        self.wakes.recv().await
    }

    /// The database backend's pid of the notification connection, while there is one.
    pub fn listener_pid(&self) -> Option<u32> {
        match self.listener.load(Ordering::Acquire) {
            0 => None,
            pid => Some(pid),
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The storage of a shared roster's log, for one roster. See the module docs for
/// what every method guarantees; [`PgLogStore`](super::PgLogStore) is the PostgreSQL implementation.
pub trait LogStore: Send + Sync {
    /// The roster this store reads and writes.
    fn roster(&self) -> &str;

    /// Appends a batch in one commit; with `epoch`, a leader-only batch.
    fn append(
        &self,
        entries: &[String],
        instance: &str,
        epoch: Option<u64>,
    ) -> impl Future<Output = LogResult<Appended>> + Send;

    /// Entries with seq >= `seq`, in order, at most `limit`.
    fn read_from(
        &self,
        seq: u64,
        limit: u32,
    ) -> impl Future<Output = LogResult<Vec<LogEntry>>> + Send;

    /// The log's head.
    fn head(&self) -> impl Future<Output = LogResult<Head>> + Send;

    /// The store's clock, epoch ms.
    fn now(&self) -> impl Future<Output = LogResult<u64>> + Send;

    /// Wakes when entries may have been appended.
    fn subscribe(
        &self,
        options: SubscribeOptions,
    ) -> impl Future<Output = LogResult<Subscription>> + Send;

    /// Records `instance`'s heartbeat; returns the store's time of it.
    fn heartbeat(&self, instance: &str) -> impl Future<Output = LogResult<u64>> + Send;

    /// Instances whose last heartbeat is `ttl_ms` or more ago (after an outage of the
    /// store itself, each gets a full TTL from its return).
    fn expired_instances(
        &self,
        ttl_ms: u64,
    ) -> impl Future<Output = LogResult<Vec<InstanceSeen>>> + Send;

    /// The leader's expiry of `instance`, in one commit: only while its heartbeat is
    /// still lapsed (`ttl_ms`, counted as [`expired_instances`](LogStore::expired_instances)
    /// does), appends `entry` (its `expireOwner`) as `leader`'s entry at `epoch`
    /// ([`LogError::StaleEpoch`] when stale) and forgets the instance. `Some(seq)` of
    /// the entry when it expired it; `None` when its heartbeat is fresh (or it is gone).
    fn expire_instance(
        &self,
        instance: &str,
        ttl_ms: u64,
        leader: &str,
        epoch: u64,
        entry: &str,
    ) -> impl Future<Output = LogResult<Option<u64>>> + Send;

    /// Forgets an instance once its expiry is in the log. True when it was there.
    fn forget_instance(&self, instance: &str) -> impl Future<Output = LogResult<bool>> + Send;

    /// Takes the leader lease when free (at the next epoch); the holder extends it.
    fn acquire_leader(
        &self,
        instance: &str,
        ttl_ms: u64,
    ) -> impl Future<Output = LogResult<LeaderLease>> + Send;

    /// Extends the lease held at `epoch`; [`LogError::StaleEpoch`] once it was lost.
    fn renew_leader(
        &self,
        instance: &str,
        epoch: u64,
        ttl_ms: u64,
    ) -> impl Future<Output = LogResult<u64>> + Send;

    /// Ends the lease held at `epoch` now. True when it was held.
    /// Gives up the leader lease `instance` holds at `epoch` (`false`: it did not).
    fn step_down(&self, instance: &str, epoch: u64)
        -> impl Future<Output = LogResult<bool>> + Send;

    /// Stores the state after entries `1..=seq`.
    fn write_snapshot(&self, seq: u64, state: &str) -> impl Future<Output = LogResult<()>> + Send;

    /// The newest snapshot, if any.
    fn latest_snapshot(&self) -> impl Future<Output = LogResult<Option<Snapshot>>> + Send;

    /// Deletes the entries at or below `through` (a snapshot there must exist) and
    /// the older snapshots; returns how many entries went.
    fn compact(&self, through: u64) -> impl Future<Output = LogResult<u64>> + Send;
}
