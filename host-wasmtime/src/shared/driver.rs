//! What the tasks of one instance share, and the driver: it appends the queued
//! entries in batches (one append in flight, one commit each) and folds the log in seq
//! order into the replica (on NOTIFY, at once after its own appends, on the timer).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rota_core::{Input, Level};
use serde_json::Value;
use tokio::sync::{broadcast, oneshot, Notify};
use tokio::task::AbortHandle;

use super::log::{LogError, LogStore, Subscription};
use super::replica::{
    copy_log_error, entry_of, genesis_entry, read_genesis, FenceKind, Mine, Queued, State,
};
use crate::clock::Clock;
use crate::engine::PolicyModule;
use crate::error::{HostError, Result};
use crate::event::Event;
use crate::probe::probe;
use crate::roster::Provisioner;
use crate::runtime::PolicyRuntime;
/// The timings of a shared roster (PROTOCOL.md, "Defaults").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedConfig {
    /// An instance silent this long is expired by the leader; one that could not
    /// heartbeat for this long fences itself. Heartbeats every `ttl / 4`.
    pub ttl: Duration,
    /// The leader lease's length; tried and renewed every `leader_ttl / 3`.
    pub leader_ttl: Duration,
    /// How often the leader looks for expired instances.
    pub sweep: Duration,
    /// The leader writes a snapshot every this many entries (and compacts).
    pub snapshot_every: u64,
    /// The reader's backstop timer (the notification is the fast path).
    pub poll: Duration,
}

impl Default for SharedConfig {
    fn default() -> Self {
        SharedConfig {
            ttl: Duration::from_secs(10),
            leader_ttl: Duration::from_secs(10),
            sweep: Duration::from_millis(250),
            snapshot_every: 1000,
            poll: Duration::from_secs(1),
        }
    }
}

/// What the tasks of one instance share.
pub(super) struct Shared<S> {
    pub(super) store: S,
    pub(super) state: Mutex<State>,
    pub(super) config: SharedConfig,
    /// The instance name (`<name>:<8 hex>` is the incarnation id).
    pub(super) name: String,
    pub(super) module: PolicyModule,
    pub(super) provisioner: Arc<dyn Provisioner>,
    pub(super) probe_timeout: Duration,
    /// An entry was queued.
    pub(super) queued: Notify,
    /// The driver should read the log now.
    pub(super) read_now: Notify,
    /// The leader task should look again (`wakeAt` changed, a probe answered).
    pub(super) leader_wake: Notify,
    pub(super) events: broadcast::Sender<Event>,
    /// The log's clock as this instance estimates it (from its appends and heartbeats).
    pub(super) db_clock: Mutex<Clock>,
    pub(super) tasks: Mutex<Vec<AbortHandle>>,
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A new incarnation id: `<name>:<8 hex>`, the hex random at start.
pub(super) fn incarnation(name: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u128(tokio::time::Instant::now().elapsed().as_nanos());
    format!("{name}:{:08x}", hasher.finish() as u32)
}

impl<S: LogStore + 'static> Shared<S> {
    pub(super) fn publish(&self, event: Event) {
        event.log();
        let _ = self.events.send(event);
    }

    /// The log's clock now, as estimated from the last `now` the store answered.
    pub(super) fn db_now(&self) -> u64 {
        lock(&self.db_clock).now_ms()
    }

    /// The store answered `now`: the estimate moves to it (never back).
    pub(super) fn saw_db_now(&self, now: u64) {
        let mut clock = lock(&self.db_clock);
        if now > clock.now_ms() {
            *clock = Clock::starting_at(now);
        }
    }

    /// A tick was stamped before `wakeAt`: the estimate ran ahead; take the store's.
    pub(super) fn reset_db_now(&self, now: u64) {
        *lock(&self.db_clock) = Clock::starting_at(now);
    }

    /// Queues one entry and wakes the driver.
    pub(super) fn push(&self, st: &mut State, queued: Queued) {
        st.queue(queued);
        self.queued.notify_one();
    }

    /// Queues a leader-only entry; the receiver gets the append's `now`.
    pub(super) fn push_leader(
        &self,
        entry: String,
        epoch: u64,
    ) -> oneshot::Receiver<std::result::Result<u64, String>> {
        let (tx, rx) = oneshot::channel();
        let mut st = lock(&self.state);
        self.push(
            &mut st,
            Queued {
                entry,
                epoch: Some(epoch),
                mine: Mine::Plain,
                on_append: Some(tx),
            },
        );
        rx
    }

    /// The next batch: queued entries with the first one's epoch, in order.
    fn take_batch(&self) -> Option<(Vec<Queued>, Option<u64>, String)> {
        let mut st = lock(&self.state);
        let epoch = st.queue.front()?.epoch;
        let mut batch = Vec::new();
        while batch.len() < 500 && st.queue.front().is_some_and(|q| q.epoch == epoch) {
            if let Some(queued) = st.queue.pop_front() {
                batch.push(queued);
            }
        }
        st.appending = true;
        Some((batch, epoch, st.instance.clone()))
    }

    async fn append_batch(
        self: &Arc<Self>,
        batch: Vec<Queued>,
        epoch: Option<u64>,
        instance: String,
    ) {
        let entries: Vec<String> = batch.iter().map(|q| q.entry.clone()).collect();
        match self.store.append(&entries, &instance, epoch).await {
            Ok(appended) => {
                self.saw_db_now(appended.now);
                {
                    let mut st = lock(&self.state);
                    st.appending = false;
                    for (seq, queued) in (appended.first_seq..).zip(batch) {
                        if let Some(tx) = queued.on_append {
                            let _ = tx.send(Ok(appended.now));
                        }
                        st.sent.insert(seq, queued.mine);
                    }
                }
                self.catch_up(Some(appended.last_seq)).await;
            }
            Err(error) => {
                let retry = matches!(error, LogError::Database(_));
                {
                    let mut st = lock(&self.state);
                    st.appending = false;
                    if matches!(error, LogError::StaleEpoch(_)) {
                        st.epoch = None;
                    }
                    // Releases, cancels and machine results must reach the log: again.
                    let mut again = Vec::new();
                    for queued in batch {
                        if let Some(tx) = queued.on_append {
                            let _ = tx.send(Err(error.to_string()));
                        }
                        match queued.mine {
                            Mine::Request(id) => {
                                if let Some(tx) = st.requests.remove(&id) {
                                    let _ = tx.send(Err(HostError::Log(copy_log_error(&error))));
                                }
                            }
                            Mine::Call(tx) => {
                                let _ = tx.send(Err(HostError::Log(copy_log_error(&error))));
                            }
                            Mine::Plain if retry && epoch.is_none() => {
                                again.push(Queued::plain(queued.entry))
                            }
                            Mine::Plain => {}
                        }
                    }
                    for queued in again.into_iter().rev() {
                        st.queue.push_front(queued);
                    }
                }
                self.publish(
                    Event::host(Level::Warn, "appendFailed", error.to_string())
                        .with("code", error.code()),
                );
                if retry {
                    tokio::time::sleep(self.config.poll / 4).await;
                }
            }
        }
    }

    /// Reads and folds what the log has after `foldedSeq` (at least through `until`).
    pub(super) async fn catch_up(self: &Arc<Self>, until: Option<u64>) {
        const PAGE: u32 = 512;
        loop {
            let from = lock(&self.state).folded_seq + 1;
            match self.store.read_from(from, PAGE).await {
                Ok(entries) => {
                    let count = entries.len();
                    let mut st = lock(&self.state);
                    for entry in &entries {
                        if entry.seq <= st.folded_seq {
                            continue; // another reader folded it meanwhile
                        }
                        let unsettled = st.appending
                            && entry.instance == st.instance
                            && !st.sent.contains_key(&entry.seq);
                        if unsettled {
                            return; // the driver folds it once its append returns
                        }
                        if entry.seq != st.folded_seq + 1 {
                            break;
                        }
                        if st
                            .fence
                            .as_ref()
                            .is_some_and(|f| f.kind == FenceKind::Version)
                        {
                            return;
                        }
                        self.fold_entry(&mut st, entry);
                    }
                    self.maybe_snapshot(&mut st);
                    let reached = until.is_none_or(|u| st.folded_seq >= u);
                    if count < PAGE as usize && (reached || count == 0) {
                        return;
                    }
                }
                Err(LogError::Compacted(_)) => {
                    if let Err(error) = self.restart_from_snapshot().await {
                        let mut st = lock(&self.state);
                        let reason = format!("the log cannot be read: {error}");
                        self.fence(&mut st, FenceKind::Unreadable, reason);
                        return;
                    }
                }
                Err(error) => {
                    let mut st = lock(&self.state);
                    let reason = format!("the log cannot be read: {error}");
                    self.fence(&mut st, FenceKind::Unreadable, reason);
                    return;
                }
            }
        }
    }

    /// The replica fell behind the compaction point: start again from the latest
    /// snapshot (pending calls stay: they are keyed by request id).
    async fn restart_from_snapshot(&self) -> Result<()> {
        let snapshot = self.store.latest_snapshot().await?.ok_or_else(|| {
            HostError::Log(LogError::NoSnapshot("no snapshot to restart from".into()))
        })?;
        let state: Value = serde_json::from_str(&snapshot.state)
            .map_err(|e| HostError::Abi(format!("a snapshot that is not JSON: {e}")))?;
        let policy = PolicyRuntime::from_state(self.module.clone(), &state)?;
        let mut st = lock(&self.state);
        st.replace_policy(policy, snapshot.seq);
        st.last_snapshot = snapshot.seq;
        Ok(())
    }

    /// The leader's snapshot every `snapshot_every` entries: the export at `foldedSeq`,
    /// then a compaction through the previous snapshot.
    fn maybe_snapshot(self: &Arc<Self>, st: &mut State) {
        if st.epoch.is_none()
            || st.fence.is_some()
            || st.folded_seq < st.last_snapshot + self.config.snapshot_every.max(1)
        {
            return;
        }
        let seq = st.folded_seq;
        let state = match st.policy.export_state() {
            Ok(state) => state.to_string(),
            Err(error) => {
                self.publish(Event::host(
                    Level::Warn,
                    "snapshotFailed",
                    error.to_string(),
                ));
                return;
            }
        };
        st.last_snapshot = seq;
        let shared = Arc::clone(self);
        self.spawn(async move {
            let previous = shared.store.latest_snapshot().await.ok().flatten();
            if let Err(error) = shared.store.write_snapshot(seq, &state).await {
                shared.publish(Event::host(
                    Level::Warn,
                    "snapshotFailed",
                    error.to_string(),
                ));
                return;
            }
            if let Some(previous) = previous.filter(|p| p.seq < seq) {
                if let Err(error) = shared.store.compact(previous.seq).await {
                    shared.publish(Event::host(Level::Warn, "compactFailed", error.to_string()));
                }
            }
        });
    }

    /// Spawns a task that ends with the instance.
    pub(super) fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let handle = tokio::spawn(task).abort_handle();
        let mut tasks = lock(&self.tasks);
        tasks.retain(|t| !t.is_finished());
        tasks.push(handle);
    }

    pub(super) fn spawn_create(self: &Arc<Self>, executor: String, request: String) {
        let shared = Arc::clone(self);
        self.spawn(async move {
            let result = shared.provisioner.create_machine(&executor, &request).await;
            let input = match result {
                Ok(hold) => Input::MachineCreated {
                    now: 0,
                    id: request,
                    hold,
                    checked: None,
                },
                Err(message) => Input::MachineFailed {
                    now: 0,
                    id: request,
                    message,
                    reason: None,
                },
            };
            shared.push_plain(&input);
        });
    }

    pub(super) fn spawn_delete(
        self: &Arc<Self>,
        executor: String,
        hold: Option<Value>,
        lease: Option<u64>,
    ) {
        let shared = Arc::clone(self);
        self.spawn(async move {
            let result = shared
                .provisioner
                .delete_machine(&executor, hold.unwrap_or(Value::Null))
                .await;
            if let Some(lease) = lease {
                shared.push_plain(&Input::MachineDeleted {
                    now: 0,
                    lease,
                    ok: result.is_ok(),
                    error: result.err(),
                });
            }
        });
    }

    pub(super) fn spawn_probe(self: &Arc<Self>, executor: String, url: String, epoch: u64) {
        let shared = Arc::clone(self);
        self.spawn(async move {
            let up = probe(&url, shared.probe_timeout).await.is_up();
            let entry = entry_of(&Input::ProbeResult {
                now: 0,
                executor: executor.clone(),
                up,
            });
            let appended = match entry {
                Ok(entry) => Some(shared.push_leader(entry, epoch)),
                Err(_) => None,
            };
            if let Some(appended) = appended {
                let _ = appended.await;
            }
            lock(&shared.state).probing.remove(&executor);
        });
    }

    pub(super) fn push_plain(&self, input: &Input) {
        match entry_of(input) {
            Ok(entry) => {
                let mut st = lock(&self.state);
                self.push(&mut st, Queued::plain(entry));
            }
            Err(error) => self.publish(Event::host(Level::Warn, "entryFailed", error.to_string())),
        }
    }

    pub(super) fn abort_tasks(&self) {
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
    }
}

/// The driver: appends the queued entries (one batch in flight) and folds the log.
pub(super) async fn drive<S: LogStore + 'static>(
    shared: Arc<Shared<S>>,
    mut subscription: Subscription,
) {
    loop {
        if let Some((batch, epoch, instance)) = shared.take_batch() {
            shared.append_batch(batch, epoch, instance).await;
            continue;
        }
        tokio::select! {
            () = shared.queued.notified() => {}
            () = shared.read_now.notified() => shared.catch_up(None).await,
            wake = subscription.next() => {
                if wake.is_none() {
                    tokio::time::sleep(shared.config.poll).await;
                }
                shared.catch_up(None).await;
            }
        }
    }
}

/// The replica to start from: the latest snapshot, or the genesis (written by this
/// instance when the log is empty). Returns it, its seq and the log's document.
pub(super) async fn start_replica<S: LogStore>(
    store: &S,
    module: &PolicyModule,
    instance: &str,
    document: &Value,
    options: &Value,
) -> Result<(PolicyRuntime, u64, Option<Value>)> {
    for _ in 0..3 {
        if let Some(snapshot) = store.latest_snapshot().await? {
            let state: Value = serde_json::from_str(&snapshot.state)
                .map_err(|e| HostError::Abi(format!("a snapshot that is not JSON: {e}")))?;
            let mut policy = PolicyRuntime::from_state(module.clone(), &state)?;
            let folded = policy.document().ok();
            return Ok((policy, snapshot.seq, folded));
        }
        if store.head().await?.last_seq == 0 {
            // Alone in its batch; when two race, seq 1 counts.
            store
                .append(&[genesis_entry(document, options)], instance, None)
                .await?;
        }
        match store.read_from(1, 1).await {
            Ok(entries) => {
                let first = entries
                    .first()
                    .ok_or_else(|| HostError::Abi("the log has no seq 1".into()))?;
                let (document, options) = read_genesis(&first.entry)?;
                let policy = PolicyRuntime::new(module.clone(), &document, &options)?;
                return Ok((policy, 1, Some(document)));
            }
            // Compacted meanwhile: a snapshot is there now.
            Err(LogError::Compacted(_)) => continue,
            Err(error) => return Err(error.into()),
        }
    }
    Err(HostError::Log(LogError::NoSnapshot(
        "the log is compacted but has no snapshot".into(),
    )))
}
