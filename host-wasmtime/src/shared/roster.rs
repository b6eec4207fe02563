//! [`SharedRoster`]: the embedded roster's API over a shared log (sql/PROTOCOL.md).
//!
//! Every call queues an entry; the driver ([`super::driver`]) appends it and folds the
//! log into the replica ([`super::replica`]), which settles the call when its outputs
//! are folded. Heartbeats and the leader's duties run beside it ([`super::leader`]).

use std::sync::Arc;
use std::time::Duration;

use rota_core::{
    Exclusion, ExclusionKind, ExecutorSpec, ExplainRequest, Explanation, Failure, Input,
    LeaseRequest, Snapshot,
};
use serde_json::Value;
use tokio::sync::{broadcast, oneshot};

use super::driver::{lock, Shared};
use super::log::{LogError, LogStore};
use super::pg::PgLogStore;
use super::replica::{entry_of, Mine, Outcome, Queued};
use crate::classify::{http_facts, io_facts};
use crate::error::{HostError, Result};
use crate::event::Event;
use crate::roster::{exclusion_from, LeaseOptions};
use crate::runtime::PolicyRuntime;

/// Ends the instance's tasks when the last handle goes (as a crash would: call
/// [`SharedRoster::close`] to leave cleanly).
pub(super) struct Owner;

/// One instance of a roster shared through a log. Cheap to clone.
pub struct SharedRoster<S: LogStore + 'static = PgLogStore> {
    pub(super) shared: Arc<Shared<S>>,
    pub(super) _owner: Arc<Owner>,
}

impl<S: LogStore + 'static> Clone for SharedRoster<S> {
    fn clone(&self) -> Self {
        SharedRoster {
            shared: Arc::clone(&self.shared),
            _owner: Arc::clone(&self._owner),
        }
    }
}

impl<S: LogStore + 'static> Drop for SharedRoster<S> {
    fn drop(&mut self) {
        if Arc::strong_count(&self._owner) == 1 {
            self.shared.abort_tasks();
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

/// Ends a request whose future is dropped before it settles: a grant that already
/// arrived is released, a waiting request is cancelled (both through the log).
struct CancelGuard<S: LogStore + 'static> {
    shared: Arc<Shared<S>>,
    request: String,
    rx: Option<oneshot::Receiver<Result<Outcome>>>,
}

impl<S: LogStore + 'static> Drop for CancelGuard<S> {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else { return };
        // Outcomes are sent under the state lock: holding it, `try_recv` is definitive.
        let mut st = lock(&self.shared.state);
        let input = match rx.try_recv() {
            Ok(Ok(Outcome::Granted { lease, .. })) => Input::Release { now: 0, lease },
            Ok(_) => return,
            Err(_) => {
                st.requests.remove(&self.request);
                Input::Cancel {
                    now: 0,
                    id: self.request.clone(),
                }
            }
        };
        if let Ok(entry) = entry_of(&input) {
            self.shared.push(&mut st, Queued::plain(entry));
        }
    }
}

enum Ask {
    Lease,
    TryLease,
    Occupy {
        executor: String,
        role: Option<String>,
        hold: Option<Value>,
    },
}

impl<S: LogStore + 'static> SharedRoster<S> {
    /// This incarnation's id (`<name>:<8 hex>`): the owner of its requests.
    pub fn instance(&self) -> String {
        lock(&self.shared.state).instance.clone()
    }

    /// Whether this instance holds the leader lease (and does the leader's duties).
    pub fn is_leader(&self) -> bool {
        lock(&self.shared.state).epoch.is_some()
    }

    /// The leader epoch it holds, if it leads.
    pub fn leader_epoch(&self) -> Option<u64> {
        lock(&self.shared.state).epoch
    }

    /// Whether it is fenced (it grants nothing until it rejoins).
    pub fn is_fenced(&self) -> bool {
        lock(&self.shared.state).fence.is_some()
    }

    /// Why it is fenced, as the `FENCED` error its calls get.
    pub fn fence(&self) -> Option<HostError> {
        lock(&self.shared.state).fence.as_ref().map(|f| f.error())
    }

    /// The last seq folded into the replica.
    pub fn folded_seq(&self) -> u64 {
        lock(&self.shared.state).folded_seq
    }

    /// The replica's state hash (16 hex digits): equal on every replica at one seq.
    pub fn state_hash(&self) -> Result<String> {
        lock(&self.shared.state).policy.state_hash()
    }

    /// `(foldedSeq, stateHash)` read together.
    pub fn folded_hash(&self) -> Result<(u64, String)> {
        let mut st = lock(&self.shared.state);
        let hash = st.policy.state_hash()?;
        Ok((st.folded_seq, hash))
    }

    #[doc(hidden)]
    /// Tests: `(seq, stateHash)` after every entry folded (`record_hashes`).
    pub fn hashes(&self) -> Vec<(u64, String)> {
        lock(&self.shared.state).hashes.clone().unwrap_or_default()
    }

    /// The log's clock as this instance estimates it (epoch ms).
    pub fn now_ms(&self) -> u64 {
        self.shared.db_now()
    }

    /// Every event from now on (the core's, with the `seq` that caused it, and the host's).
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.shared.events.subscribe()
    }

    /// The log store.
    pub fn store(&self) -> &S {
        &self.shared.store
    }

    /// Reads the log now and folds what is new (the notification does it anyway).
    pub async fn sync(&self) {
        self.shared.catch_up(None).await;
    }

    /// Waits until every entry queued so far (releases are fire and forget) is in the
    /// log and folded. `Closed` when the instance ends first; `Fenced` when fenced.
    pub async fn flush(&self) -> Result<()> {
        loop {
            {
                let st = lock(&self.shared.state);
                if st.closed {
                    return Err(HostError::Closed);
                }
                if let Some(fence) = &st.fence {
                    return Err(fence.error());
                }
                if st.queue.is_empty() && !st.appending {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        self.sync().await;
        Ok(())
    }

    async fn ask(&self, ask: Ask, role: &str, options: LeaseOptions) -> Result<Option<Lease<S>>> {
        let waits = !matches!(ask, Ask::TryLease);
        let label = options.label.clone();
        let (id, rx) = {
            let mut st = lock(&self.shared.state);
            st.usable()?;
            st.next_request += 1;
            let id = format!("{}/{}", st.instance, st.next_request);
            let owner = Some(st.instance.clone());
            let input = match ask {
                Ask::Occupy {
                    executor,
                    role,
                    hold,
                } => Input::Occupy {
                    now: 0,
                    id: id.clone(),
                    executor,
                    role,
                    hold,
                    owner,
                },
                ask => {
                    let request = LeaseRequest {
                        now: 0,
                        id: id.clone(),
                        role: role.to_string(),
                        avoid: options.avoid,
                        prefer: options.prefer,
                        pin: options.pin,
                        rank: options.rank,
                        event_time: options.event_time,
                        label: options.label,
                        deadline: None,
                        timeout_ms: options
                            .timeout
                            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                        owner,
                    };
                    match ask {
                        Ask::TryLease => Input::TryLease(request),
                        _ => Input::Lease(request),
                    }
                }
            };
            let entry = entry_of(&input)?;
            let (tx, rx) = oneshot::channel();
            st.requests.insert(id.clone(), tx);
            self.shared.push(
                &mut st,
                Queued {
                    entry,
                    epoch: None,
                    mine: Mine::Request(id.clone()),
                    on_append: None,
                },
            );
            (id, rx)
        };
        let mut guard = CancelGuard {
            shared: Arc::clone(&self.shared),
            request: id.clone(),
            rx: Some(rx),
        };
        let outcome = match guard.rx.as_mut() {
            Some(rx) => rx.await,
            None => return Err(HostError::Closed),
        };
        guard.rx = None;
        match outcome.map_err(|_| HostError::Closed)?? {
            Outcome::Granted {
                lease,
                executor,
                role,
                hold,
            } => {
                let spec = lock(&self.shared.state).spec(&executor, &role);
                Ok(Some(Lease {
                    shared: Arc::clone(&self.shared),
                    lease,
                    request: id,
                    spec,
                    role,
                    hold,
                    released: false,
                }))
            }
            Outcome::Exhausted { role, reasons } => Err(HostError::Exhausted { role, reasons }),
            Outcome::TimedOut { reasons } => Err(HostError::TimedOut {
                request: id,
                role: role.to_string(),
                label,
                reasons,
            }),
            Outcome::Cancelled => Err(HostError::Cancelled { request: id }),
            // Only a `tryLease` is answered so; for the others, as cancelled.
            Outcome::Unavailable if waits => Err(HostError::Cancelled { request: id }),
            Outcome::Unavailable => Ok(None),
        }
    }

    /// Waits for a slot across every instance; `Exhausted`, `TimedOut` (the log's
    /// time), `FENCED`. Dropping the future cancels the request.
    pub async fn lease(&self, role: &str, options: LeaseOptions) -> Result<Lease<S>> {
        let lease = self.ask(Ask::Lease, role, options).await?;
        lease.ok_or(HostError::Closed)
    }

    /// A slot now (as the log orders it), or `None`.
    pub async fn try_lease(&self, role: &str, options: LeaseOptions) -> Result<Option<Lease<S>>> {
        self.ask(Ask::TryLease, role, options).await
    }

    /// Records work already running on `executor`: it takes a slot even beyond capacity.
    pub async fn occupy(
        &self,
        executor: &str,
        role: Option<&str>,
        hold: Option<Value>,
    ) -> Result<Lease<S>> {
        let ask = Ask::Occupy {
            executor: executor.to_string(),
            role: role.map(str::to_string),
            hold,
        };
        self.ask(ask, role.unwrap_or_default(), LeaseOptions::default())
            .await?
            .ok_or(HostError::Closed)
    }

    /// Appends `input` and waits for its entry's outputs (or the core's rejection).
    async fn call(&self, input: Input) -> Result<Vec<Value>> {
        let rx = {
            let mut st = lock(&self.shared.state);
            st.usable()?;
            let entry = entry_of(&input)?;
            let (tx, rx) = oneshot::channel();
            self.shared.push(
                &mut st,
                Queued {
                    entry,
                    epoch: None,
                    mine: Mine::Call(tx),
                    on_append: None,
                },
            );
            rx
        };
        rx.await.map_err(|_| HostError::Closed)?
    }

    /// Reports a failed call on `executor`: the exclusion it put in force (as the
    /// embedded roster's `report`), once its entry is folded.
    pub async fn report(&self, executor: &str, failure: Failure) -> Result<Option<Exclusion>> {
        let outputs = self
            .call(Input::Report {
                now: 0,
                executor: executor.to_string(),
                failure,
            })
            .await?;
        Ok(exclusion_from(&outputs, executor))
    }

    /// Reports a failed HTTP call (status, headers, body: [`crate::classify`]).
    pub async fn report_http(
        &self,
        executor: &str,
        status: u16,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Option<Exclusion>> {
        let failure = http_facts(status, headers, body, self.shared.db_now());
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
        self.call(Input::Exclude {
            now: 0,
            executor: executor.to_string(),
            kind,
            reason: reason.to_string(),
            until: until_ms,
        })
        .await
        .map(drop)
    }

    /// Ends an executor's exclusion, for every instance.
    pub async fn resume(&self, executor: &str) -> Result<()> {
        self.call(Input::Resume {
            now: 0,
            executor: executor.to_string(),
        })
        .await
        .map(drop)
    }

    /// Replaces the document for every instance (a bad one changes nothing).
    pub async fn reload(&self, document: Value) -> Result<()> {
        self.call(Input::Reload { now: 0, document })
            .await
            .map(drop)
    }

    fn query<T>(&self, f: impl FnOnce(&mut PolicyRuntime) -> Result<T>) -> Result<T> {
        f(&mut lock(&self.shared.state).policy)
    }

    /// Every executor, lease and waiting request, as folded.
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.query(|p| p.snapshot())
    }

    /// Free slots for `role`, as folded.
    pub fn available(&self, role: &str) -> Result<u32> {
        self.query(|p| p.available(role))
    }

    /// Configured slots for `role`.
    pub fn slots(&self, role: &str) -> Result<u32> {
        self.query(|p| p.slots(role))
    }

    /// Why each executor can or cannot take a request, as folded.
    pub fn explain(&self, request: impl Into<ExplainRequest>) -> Result<Explanation> {
        let request = request.into();
        self.query(|p| p.explain(&request))
    }

    /// The running document (the log's).
    pub fn document(&self) -> Result<Value> {
        self.query(|p| p.document())
    }

    /// The kind the core gives `failure`, without reporting it.
    pub fn classify(&self, failure: &Failure) -> Result<Value> {
        self.query(|p| p.classify(failure))
    }

    /// Leaves cleanly: cancels its waiting requests, steps down if leader, appends
    /// `expireOwner` of itself (no epoch), forgets its heartbeat row, ends its tasks.
    pub async fn close(self) -> Result<()> {
        let (instance, epoch, appended) = {
            let mut st = lock(&self.shared.state);
            st.closed = true;
            let instance = st.instance.clone();
            for (id, tx) in std::mem::take(&mut st.requests) {
                let _ = tx.send(Err(HostError::Closed));
                if let Ok(entry) = entry_of(&Input::Cancel { now: 0, id }) {
                    st.queue(Queued::plain(entry));
                }
            }
            let entry = entry_of(&Input::ExpireOwner {
                now: 0,
                owner: instance.clone(),
            })?;
            let (tx, rx) = oneshot::channel();
            self.shared.push(
                &mut st,
                Queued {
                    entry,
                    epoch: None,
                    mine: Mine::Plain,
                    on_append: Some(tx),
                },
            );
            (instance, st.epoch.take(), rx)
        };
        if let Some(epoch) = epoch {
            let _ = self.shared.store.step_down(&instance, epoch).await;
        }
        let appended = tokio::time::timeout(self.shared.config.ttl, appended).await;
        let forgotten = self.shared.store.forget_instance(&instance).await;
        self.shared.abort_tasks();
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
        lock(&self.shared.state).closed = true;
        self.shared.abort_tasks();
    }
}

/// A lease granted through the log; released when dropped (or by [`Lease::release`]).
pub struct Lease<S: LogStore + 'static = PgLogStore> {
    shared: Arc<Shared<S>>,
    lease: u64,
    request: String,
    spec: Arc<ExecutorSpec>,
    role: String,
    hold: Option<Value>,
    released: bool,
}

impl<S: LogStore + 'static> std::fmt::Debug for Lease<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("lease", &self.lease)
            .field("executor", &self.spec.id)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl<S: LogStore + 'static> Lease<S> {
    /// The core's lease id.
    pub fn id(&self) -> u64 {
        self.lease
    }

    /// Its request id (`<instance>/<n>`).
    pub fn request(&self) -> &str {
        &self.request
    }

    /// The executor's id.
    pub fn executor(&self) -> &str {
        &self.spec.id
    }

    /// The executor's entry in the running document, parsed.
    pub fn spec(&self) -> &ExecutorSpec {
        &self.spec
    }

    /// A field of the executor's entry as written (`"baseUrl"`, `"env"` ...).
    pub fn field(&self, key: &str) -> Option<&Value> {
        self.spec.raw.get(key)
    }

    /// The role it was granted for.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// The machine hold, for an executor with `provision`.
    pub fn hold(&self) -> Option<&Value> {
        self.hold.as_ref()
    }

    /// Gives the slot back: appends `release` (batched, fire and forget).
    pub fn release(mut self) -> Result<()> {
        self.released = true;
        self.append_release()
    }

    fn append_release(&self) -> Result<()> {
        let entry = entry_of(&Input::Release {
            now: 0,
            lease: self.lease,
        })?;
        let mut st = lock(&self.shared.state);
        self.shared.push(&mut st, Queued::plain(entry));
        Ok(())
    }
}

impl<S: LogStore + 'static> Drop for Lease<S> {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.append_release();
        }
    }
}
