//! The remote log's driver: it appends this instance's queued entries in batches (one
//! append in flight, one commit each) and folds the log in seq order into the roster's
//! state (on NOTIFY, at once after its own appends, on the timer) through the roster's
//! one fold, settling this instance's calls; the leader's snapshots; and where a new
//! instance starts from (the latest snapshot, or the genesis).

use std::sync::Arc;
use std::time::Duration;

use rota_core::log::{fold_text, genesis_entry, read_genesis, EntryFacts};
use rota_core::Level;
use serde_json::Value;

use super::log::{LogEntry, LogError, LogStore, Snapshot, Subscription};
use crate::clock::Clock;
use crate::engine::PolicyModule;
use crate::error::{HostError, Result};
use crate::event::Event;
use crate::roster::fold::At;
use crate::roster::state::{lock, FenceKind, Inner, Member, Mine, Queued, State};
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

/// One instance of a remote log: the roster it folds into and the log's store.
pub(super) struct Remote<S> {
    pub store: S,
    pub inner: Arc<Inner>,
    pub config: SharedConfig,
    /// The instance name (`<name>:<8 hex>` is the incarnation id).
    pub name: String,
    pub module: PolicyModule,
}

/// A new incarnation id: `<name>:<8 hex>`, the hex random at start.
pub(super) fn incarnation(name: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u128(tokio::time::Instant::now().elapsed().as_nanos());
    format!("{name}:{:08x}", hasher.finish() as u32)
}

/// A copy of a log error (they are not `Clone`), for every call a failed append ends.
fn copy_log_error(error: &LogError) -> LogError {
    match error {
        LogError::StaleEpoch(m) => LogError::StaleEpoch(m.clone()),
        LogError::Compacted(m) => LogError::Compacted(m.clone()),
        LogError::NoSnapshot(m) => LogError::NoSnapshot(m.clone()),
        LogError::SchemaTooNew { found, supported } => LogError::SchemaTooNew {
            found: *found,
            supported: *supported,
        },
        LogError::InvalidInput(m) => LogError::InvalidInput(m.clone()),
        other => LogError::Database(other.to_string().into()),
    }
}

impl<S: LogStore + 'static> Remote<S> {
    /// The store answered `now`: the estimate of its clock moves to it (never back).
    pub(super) fn saw_db_now(&self, now: u64) {
        if let Some(link) = &self.inner.link {
            let mut clock = lock(&link.db_clock);
            if now > clock.now_ms() {
                *clock = Clock::starting_at(now);
            }
        }
    }

    /// The next batch: queued entries with the first one's epoch, in order.
    fn take_batch(&self) -> Option<(Vec<Queued>, Option<u64>, String)> {
        let mut st = lock(&self.inner.state);
        let member = st.member.as_mut()?;
        let epoch = member.queue.front()?.epoch;
        let mut batch = Vec::new();
        while batch.len() < 500 && member.queue.front().is_some_and(|q| q.epoch == epoch) {
            if let Some(queued) = member.queue.pop_front() {
                batch.push(queued);
            }
        }
        member.appending = true;
        Some((batch, epoch, member.instance.clone()))
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
                if let Some(member) = lock(&self.inner.state).member.as_mut() {
                    member.appending = false;
                    for (seq, queued) in (appended.first_seq..).zip(batch) {
                        if let Some(tx) = queued.on_append {
                            let _ = tx.send(Ok(appended.now));
                        }
                        member.sent.insert(seq, queued.mine);
                    }
                }
                self.saw_db_now(appended.now);
                self.catch_up(Some(appended.last_seq)).await;
            }
            Err(error) => {
                let retry = matches!(error, LogError::Database(_));
                self.append_failed(batch, epoch.is_some(), &error, retry);
                if retry {
                    tokio::time::sleep(self.config.poll / 4).await;
                }
            }
        }
    }

    /// Ends the calls of a batch the log refused; what must reach the log (releases,
    /// cancels, machine results) is queued again when the failure may pass (`retry`).
    fn append_failed(&self, batch: Vec<Queued>, leader: bool, error: &LogError, retry: bool) {
        let mut st = lock(&self.inner.state);
        let Some(member) = st.member.as_mut() else {
            return;
        };
        member.appending = false;
        if matches!(error, LogError::StaleEpoch(_)) {
            member.epoch = None;
        }
        let mut again = Vec::new();
        let mut failed = Vec::new();
        for queued in batch {
            if let Some(tx) = queued.on_append {
                let _ = tx.send(Err(error.to_string()));
            }
            match queued.mine {
                Mine::Request(id) => failed.push(id),
                Mine::Call(tx) => {
                    let _ = tx.send(Err(HostError::Log(copy_log_error(error))));
                }
                Mine::Plain if retry && !leader => again.push(Queued {
                    on_append: None,
                    ..queued
                }),
                Mine::Plain => {}
            }
        }
        for queued in again.into_iter().rev() {
            member.queue.push_front(queued);
        }
        for id in failed {
            st.settle(&id, Err(HostError::Log(copy_log_error(error))));
        }
        drop(st);
        self.inner.publish(
            Event::host(Level::Warn, "appendFailed", error.to_string()).with("code", error.code()),
        );
    }

    /// Reads and folds what the log has after `foldedSeq` (at least through `until`).
    pub(super) async fn catch_up(self: &Arc<Self>, until: Option<u64>) {
        const PAGE: u32 = 512;
        loop {
            let from = match &lock(&self.inner.state).member {
                Some(member) => member.folded_seq + 1,
                None => return,
            };
            let read = self.store.read_from(from, PAGE).await;
            let mut st = lock(&self.inner.state);
            match read {
                Ok(entries) => {
                    let count = entries.len();
                    for entry in &entries {
                        let Some(member) = st.member.as_ref() else {
                            return;
                        };
                        if entry.seq <= member.folded_seq {
                            continue; // another reader folded it meanwhile
                        }
                        let unsettled = member.appending
                            && entry.instance == member.instance
                            && !member.sent.contains_key(&entry.seq);
                        let version_fenced = member
                            .fence
                            .as_ref()
                            .is_some_and(|f| f.kind == FenceKind::Version);
                        if unsettled || version_fenced {
                            return; // the driver folds it once its append returns
                        }
                        if entry.seq != member.folded_seq + 1 {
                            break;
                        }
                        self.fold_entry(&mut st, entry);
                    }
                    self.maybe_snapshot(&mut st);
                    let folded = st.member.as_ref().map_or(0, |m| m.folded_seq);
                    let reached = until.is_none_or(|u| folded >= u);
                    if count < PAGE as usize && (reached || count == 0) {
                        return;
                    }
                }
                Err(LogError::Compacted(_)) => {
                    drop(st);
                    if let Err(error) = self.restart_from_snapshot().await {
                        let reason = format!("the log cannot be read: {error}");
                        let mut st = lock(&self.inner.state);
                        self.inner.fence(&mut st, FenceKind::Unreadable, reason);
                        return;
                    }
                }
                Err(error) => {
                    let reason = format!("the log cannot be read: {error}");
                    self.inner.fence(&mut st, FenceKind::Unreadable, reason);
                    return;
                }
            }
        }
    }

    /// Folds one entry (the next seq) through the roster's fold, which acts on what is
    /// this instance's; settles its call; fences when the log expired this instance or
    /// its version needs a newer module.
    fn fold_entry(&self, st: &mut State, e: &LogEntry) {
        // A paused process's timers run late: past the TTL, the log may have expired
        // this instance further on, so nothing folded now may settle a caller.
        self.inner
            .fence_if_lapsed(st, "checked before folding the next entry");
        let Some(member) = st.member.as_mut() else {
            return;
        };
        let mine = member.sent.remove(&e.seq).unwrap_or(Mine::Plain);
        member.folded_seq = e.seq;
        let facts = EntryFacts::of(&e.entry);
        if facts.skipped() {
            // Only seq 1 counts; a racing instance's later genesis is skipped.
            return record_hash(st, e.seq);
        }
        if facts.expires(&member.instance, &e.instance) {
            member.expired = true;
            let reason = format!(
                "the log expired this instance ({}) at seq {} (appended by {})",
                member.instance, e.seq, e.instance
            );
            self.inner.fence(st, FenceKind::Expired, reason);
        }
        let at = At {
            seq: Some(e.seq),
            appender: &e.instance,
            facts,
        };
        let inner = Arc::clone(&self.inner);
        let kind = at.facts.kind.as_deref().unwrap_or_default();
        match inner.fold(st, kind, fold_text(e.now, &e.entry).as_bytes(), &at) {
            Ok(step) => {
                if let Mine::Call(tx) = mine {
                    self.inner
                        .fence_if_lapsed(st, "checked before settling a call");
                    let fence = st.member.as_ref().and_then(|m| m.fence.as_ref());
                    let _ = match fence {
                        Some(fence) => tx.send(Err(fence.error())),
                        None => tx.send(Ok(step.outputs)),
                    };
                }
            }
            Err(error) => {
                if at.facts.halts(error.code().unwrap_or_default()) {
                    let reason = format!(
                        "the log's version entry at seq {} needs a newer policy module: {error}",
                        e.seq
                    );
                    self.inner.fence(st, FenceKind::Version, reason);
                }
                // (A guest that failed was restored to before this entry: as rejected.)
                match mine {
                    Mine::Request(id) if st.waiters.contains_key(&id) => st.settle(&id, Err(error)),
                    Mine::Call(tx) => {
                        let _ = tx.send(Err(error));
                    }
                    other => {
                        if let (Mine::Request(id), Some(member)) = (other, st.member.as_mut()) {
                            member.orphans.remove(&id);
                        }
                        self.inner.publish(
                            Event::host(Level::Debug, "inputRejected", error.to_string())
                                .with("seq", e.seq)
                                .with("instance", e.instance.clone()),
                        )
                    }
                }
            }
        }
        // Follow-ups (a grant nobody awaits: its release) go to the log.
        for input in std::mem::take(&mut st.follow_ups) {
            self.inner.append(st, input, None);
        }
        record_hash(st, e.seq);
    }

    /// The replica fell behind the compaction point: start again from the latest
    /// snapshot (pending calls stay: they are keyed by request id).
    async fn restart_from_snapshot(&self) -> Result<()> {
        let snapshot = self.store.latest_snapshot().await?.ok_or_else(|| {
            HostError::Log(LogError::NoSnapshot("no snapshot to restart from".into()))
        })?;
        let policy = replica_of(&self.module, &snapshot)?;
        let mut st = lock(&self.inner.state);
        st.policy = policy;
        st.invalidate_specs();
        st.wake_at = st.policy.snapshot().ok().and_then(|s| s.wake_at);
        if let Some(member) = st.member.as_mut() {
            member.folded_seq = snapshot.seq;
            member.last_snapshot = snapshot.seq;
            member.tick_sent = None;
        }
        Ok(())
    }

    /// The leader's snapshot every `snapshot_every` entries: the export at `foldedSeq`,
    /// then a compaction through the previous snapshot.
    fn maybe_snapshot(self: &Arc<Self>, st: &mut State) {
        let Some(member) = st.member.as_ref() else {
            return;
        };
        if member.epoch.is_none()
            || member.fence.is_some()
            || member.folded_seq < member.last_snapshot + self.config.snapshot_every.max(1)
        {
            return;
        }
        let seq = member.folded_seq;
        let state = match st.policy.export_state() {
            Ok(state) => state.to_string(),
            Err(error) => {
                let error = error.to_string();
                return self
                    .inner
                    .publish(Event::host(Level::Warn, "snapshotFailed", error));
            }
        };
        if let Some(member) = st.member.as_mut() {
            member.last_snapshot = seq;
        }
        let remote = Arc::clone(self);
        self.inner.spawn(async move {
            let previous = remote.store.latest_snapshot().await.ok().flatten();
            if let Err(error) = remote.store.write_snapshot(seq, &state).await {
                let error = error.to_string();
                return remote
                    .inner
                    .publish(Event::host(Level::Warn, "snapshotFailed", error));
            }
            if let Some(previous) = previous.filter(|p| p.seq < seq) {
                if let Err(error) = remote.store.compact(previous.seq).await {
                    let error = error.to_string();
                    remote
                        .inner
                        .publish(Event::host(Level::Warn, "compactFailed", error));
                }
            }
        });
    }
}

fn record_hash(st: &mut State, seq: u64) {
    if st.member.as_ref().is_some_and(|m| m.hashes.is_some()) {
        let hash = st
            .policy
            .state_hash()
            .unwrap_or_else(|e| format!("error: {e}"));
        if let Some(hashes) = st.member.as_mut().and_then(|m| m.hashes.as_mut()) {
            hashes.push((seq, hash));
        }
    }
}

/// The driver: appends the queued entries (one batch in flight) and folds the log.
pub(super) async fn drive<S: LogStore + 'static>(
    remote: Arc<Remote<S>>,
    mut subscription: Subscription,
) {
    let Some(link) = &remote.inner.link else {
        return;
    };
    loop {
        if let Some((batch, epoch, instance)) = remote.take_batch() {
            remote.append_batch(batch, epoch, instance).await;
            continue;
        }
        tokio::select! {
            () = link.queued.notified() => {}
            () = link.read_now.notified() => remote.catch_up(None).await,
            wake = subscription.next() => {
                if wake.is_none() {
                    tokio::time::sleep(remote.config.poll).await;
                }
                remote.catch_up(None).await;
            }
        }
    }
}

/// The replica a snapshot holds.
fn replica_of(module: &PolicyModule, snapshot: &Snapshot) -> Result<PolicyRuntime> {
    let state: Value = serde_json::from_str(&snapshot.state)
        .map_err(|e| HostError::Abi(format!("a snapshot that is not JSON: {e}")))?;
    PolicyRuntime::from_state(module.clone(), &state)
}

/// The state to start from: the latest snapshot, or the genesis (written by this
/// instance when the log is empty). Returns it, its seq and the log's document.
pub(super) async fn start_replica<S: LogStore>(
    store: &S,
    module: &PolicyModule,
    instance: &str,
    document: &Value,
    options: &Value,
) -> Result<(PolicyRuntime, Member, Option<Value>)> {
    for _ in 0..3 {
        if let Some(snapshot) = store.latest_snapshot().await? {
            let mut policy = replica_of(module, &snapshot)?;
            let folded = policy.document().ok();
            return Ok((policy, Member::new(instance.into(), snapshot.seq), folded));
        }
        if store.head().await?.last_seq == 0 {
            // Alone in its batch; when two race, seq 1 counts.
            store
                .append(&[genesis_entry(document, options)?], instance, None)
                .await?;
        }
        match store.read_from(1, 1).await {
            Ok(entries) => {
                let first = entries
                    .first()
                    .ok_or_else(|| HostError::Abi("the log has no seq 1".into()))?;
                let genesis = read_genesis(&first.entry)?;
                let policy =
                    PolicyRuntime::new(module.clone(), &genesis.document, &genesis.options)?;
                let document = Some(genesis.document);
                return Ok((policy, Member::new(instance.into(), 1), document));
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
