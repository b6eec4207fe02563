//! [`SharedRoster`]: the roster's API over a remote log (sql/PROTOCOL.md). The
//! roster is the one the memory log has (its state, fold, dispatcher, requests and
//! leases: `crate::roster`); a call appends its entry and settles when the driver
//! ([`super::driver`]) folds it; heartbeats and the leader's duties run beside it
//! ([`super::leader`]). The calls that change the roster are async: they wait for the
//! log.

use std::sync::Arc;
use std::time::Duration;

use rota_core::{Exclusion, ExclusionKind, Failure, Input};
use serde_json::Value;
use tokio::sync::oneshot;

use super::driver::Remote;
use super::log::{LogError, LogStore};
use super::pg::PgLogStore;
use crate::classify::{http_facts, io_facts};
use crate::error::{HostError, Result};
use crate::roster::events::exclusion_from;
use crate::roster::state::{lock, Member, Mine};
use crate::roster::Roster;

/// Ends the instance's tasks when the last handle goes (as a crash would: call
/// [`SharedRoster::close`] to leave cleanly).
pub(super) struct Owner;

/// One instance of a roster shared through a log. Cheap to clone. It is the
/// [`Roster`] over a remote log, by `Deref`: `lease`, `try_lease` and `occupy` (across
/// every instance: `Exhausted`, `TimedOut` on the log's time, `FENCED`) and every query
/// (`snapshot`, `available`, `explain`, `document`, `subscribe`, `now_ms` on the log's
/// clock ...) are the roster's; the calls that change it are async here (they wait for
/// the log), and the membership's getters are its own.
pub struct SharedRoster<S: LogStore + 'static = PgLogStore> {
    pub(super) roster: Roster,
    pub(super) remote: Arc<Remote<S>>,
    pub(super) _owner: Arc<Owner>,
}

impl<S: LogStore + 'static> Clone for SharedRoster<S> {
    fn clone(&self) -> Self {
        SharedRoster {
            roster: self.roster.clone(),
            remote: Arc::clone(&self.remote),
            _owner: Arc::clone(&self._owner),
        }
    }
}

impl<S: LogStore + 'static> std::ops::Deref for SharedRoster<S> {
    type Target = Roster;
    fn deref(&self) -> &Roster {
        &self.roster
    }
}

impl<S: LogStore + 'static> Drop for SharedRoster<S> {
    fn drop(&mut self) {
        if Arc::strong_count(&self._owner) == 1 {
            self.abort_tasks();
        }
    }
}

impl<S: LogStore + 'static> std::fmt::Debug for SharedRoster<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedRoster")
            .field("instance", &self.instance())
            .finish_non_exhaustive()
    }
}

/// A lease granted through the log: the roster's [`crate::Lease`] itself (released
/// when dropped, or by `release()`, which appends the `release`, batched). An alias,
/// kept for the name users have; `S` names the log as in `SharedRoster<S>`.
pub type Lease<S = PgLogStore> = <S as LeaseOf>::Lease;

/// What a lease on a log store is: the roster's [`crate::Lease`], on every store
/// (for the [`Lease`] alias).
pub trait LeaseOf {
    /// The roster's lease.
    type Lease;
}

impl<S: LogStore> LeaseOf for S {
    type Lease = crate::roster::Lease;
}

impl<S: LogStore + 'static> SharedRoster<S> {
    fn member<T>(&self, f: impl FnOnce(&Member) -> T) -> Option<T> {
        lock(&self.inner.state).member.as_ref().map(f)
    }

    /// This incarnation's id (`<name>:<8 hex>`): the owner of its requests.
    pub fn instance(&self) -> String {
        self.member(|m| m.instance.clone()).unwrap_or_default()
    }

    /// Whether this instance holds the leader lease (and does the leader's duties).
    pub fn is_leader(&self) -> bool {
        self.leader_epoch().is_some()
    }

    /// The leader epoch it holds, if it leads.
    pub fn leader_epoch(&self) -> Option<u64> {
        self.member(|m| m.epoch).flatten()
    }

    /// Whether it is fenced (it grants nothing until it rejoins).
    pub fn is_fenced(&self) -> bool {
        self.fence().is_some()
    }

    /// Why it is fenced, as the `FENCED` error its calls get.
    pub fn fence(&self) -> Option<HostError> {
        self.member(|m| m.fence.as_ref().map(|f| f.error()))
            .flatten()
    }

    /// The last seq folded into the replica.
    pub fn folded_seq(&self) -> u64 {
        self.member(|m| m.folded_seq).unwrap_or_default()
    }

    /// The replica's state hash (16 hex digits): equal on every replica at one seq.
    pub fn state_hash(&self) -> Result<String> {
        lock(&self.inner.state).policy.state_hash()
    }

    /// `(foldedSeq, stateHash)` read together.
    pub fn folded_hash(&self) -> Result<(u64, String)> {
        let mut st = lock(&self.inner.state);
        let seq = st.member.as_ref().map_or(0, |m| m.folded_seq);
        Ok((seq, st.policy.state_hash()?))
    }

    #[doc(hidden)]
    /// Tests: `(seq, stateHash)` after every entry folded (`record_hashes`).
    pub fn hashes(&self) -> Vec<(u64, String)> {
        self.member(|m| m.hashes.clone())
            .flatten()
            .unwrap_or_default()
    }

    /// The log store.
    pub fn store(&self) -> &S {
        &self.remote.store
    }

    /// Reads the log now and folds what is new (the notification does it anyway).
    pub async fn sync(&self) {
        self.remote.catch_up(None).await;
    }

    /// Waits until every entry queued so far (releases are fire and forget) is in the
    /// log and folded. `Closed` when the instance ends first; `Fenced` when fenced.
    pub async fn flush(&self) -> Result<()> {
        loop {
            let done = {
                let st = lock(&self.inner.state);
                st.usable()?;
                (st.member.as_ref()).is_none_or(|m| m.queue.is_empty() && !m.appending)
            };
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        self.sync().await;
        Ok(())
    }

    /// Reports a failed call on `executor`: the exclusion it put in force (as the
    /// embedded roster's `report`), once its entry is folded.
    pub async fn report(&self, executor: &str, failure: Failure) -> Result<Option<Exclusion>> {
        // The kind the core gives it, for `rota_failures_total` (this instance's reports).
        let now = self.now_ms();
        let classified = self.inner.query(|p| p.classify_at(&failure, now)).ok();
        let outputs = self
            .inner
            .call(Input::Report {
                now: 0,
                executor: executor.to_string(),
                failure,
            })
            .await?;
        let exclusion = exclusion_from(&outputs, executor);
        let kind = crate::roster::metrics::failure_kind(classified.as_ref(), exclusion.as_ref());
        lock(&self.inner.metrics).failed(executor, kind);
        Ok(exclusion)
    }

    /// Reports a failed HTTP call (status, headers, body: [`crate::classify`]).
    pub async fn report_http(
        &self,
        executor: &str,
        status: u16,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Option<Exclusion>> {
        let failure = http_facts(status, headers, body, self.now_ms());
        self.report(executor, failure).await
    }

    /// Reports a call that failed without an HTTP answer.
    pub async fn report_io(
        &self,
        executor: &str,
        error: &std::io::Error,
    ) -> Result<Option<Exclusion>> {
        self.report(executor, io_facts(error)).await
    }

    /// Takes an executor out of the round, for every instance.
    pub async fn exclude(
        &self,
        executor: &str,
        kind: ExclusionKind,
        reason: &str,
        until_ms: Option<u64>,
    ) -> Result<()> {
        let input = Input::Exclude {
            now: 0,
            executor: executor.to_string(),
            kind,
            reason: reason.to_string(),
            until: until_ms,
        };
        self.inner.call(input).await.map(drop)
    }

    /// Ends an executor's exclusion, for every instance.
    pub async fn resume(&self, executor: &str) -> Result<()> {
        let executor = executor.to_string();
        let input = Input::Resume { now: 0, executor };
        self.inner.call(input).await.map(drop)
    }

    /// Replaces the document for every instance (a bad one changes nothing).
    pub async fn reload(&self, document: Value) -> Result<()> {
        let input = Input::Reload { now: 0, document };
        self.inner.call(input).await.map(drop)
    }

    fn abort_tasks(&self) {
        if let Some(link) = &self.inner.link {
            for task in lock(&link.tasks).drain(..) {
                task.abort();
            }
        }
    }

    /// Leaves cleanly: cancels its waiting requests, steps down if leader, appends
    /// `expireOwner` of itself (no epoch), forgets its heartbeat row, ends its tasks.
    pub async fn close(self) -> Result<()> {
        let (instance, epoch, appended) = {
            let inner = &self.inner;
            let mut st = lock(&inner.state);
            for id in st.end_waiters(|| HostError::Closed) {
                let cancel = Input::Cancel { now: 0, id };
                inner.enqueue(&mut st, &cancel, None, Mine::Plain, None)?;
            }
            let Some(member) = st.member.as_mut() else {
                return Err(HostError::Closed);
            };
            member.closed = true;
            let instance = member.instance.clone();
            let epoch = member.epoch.take();
            let expiry = Input::ExpireOwner {
                now: 0,
                owner: instance.clone(),
            };
            let (tx, rx) = oneshot::channel();
            inner.enqueue(&mut st, &expiry, None, Mine::Plain, Some(tx))?;
            (instance, epoch, rx)
        };
        if let Some(epoch) = epoch {
            let _ = self.remote.store.step_down(&instance, epoch).await;
        }
        let appended = tokio::time::timeout(self.remote.config.ttl, appended).await;
        let forgotten = self.remote.store.forget_instance(&instance).await;
        self.abort_tasks();
        match appended {
            Ok(Ok(Ok(_))) => {}
            Ok(Ok(Err(error))) => {
                return Err(HostError::Log(LogError::Database(error.into())));
            }
            _ => return Err(HostError::Closed),
        }
        forgotten?;
        Ok(())
    }

    #[doc(hidden)]
    /// Tests: dies as a crash would (no cancel, no expiry, no step-down): the other
    /// instances expire it after the TTL.
    pub fn crash(&self) {
        if let Some(member) = lock(&self.inner.state).member.as_mut() {
            member.closed = true;
        }
        self.abort_tasks();
    }
}
