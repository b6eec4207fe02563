//! The roster: executors leased by role, on tokio, the policy module in wasmtime.
//!
//! A roster folds one ordered input log with the unchanged core (DESIGN.md). The
//! [`Roster`] built by [`Roster::builder`] keeps its log in memory: one instance,
//! always the leader, nobody to fence; appending an input folds it at once. A roster
//! shared by several processes folds a log on PostgreSQL (`shared`, feature
//! `shared`): the same state, fold and output dispatcher, with the log's membership
//! (heartbeats, fencing, the leader's duties) beside them.
//!
//! Every call becomes one input to the core (with `now` from the host's [`Clock`]);
//! the outputs are carried out by one dispatcher (`fold`): grants resolve the waiting
//! `lease` futures, `probe` starts an HTTP GET, `createMachine`/`deleteMachine`/
//! `preflight` go to the [`Provisioner`], `persist` goes to the state-file writer,
//! `event` goes to `tracing` and to subscribers. A timer feeds a `tick` at the core's
//! wake-up time.
//!
//! A [`Lease`] is released when dropped. A `lease` future dropped while it waits
//! cancels its request; a grant that races with that drop is released at once, so no
//! slot leaks either way.
//!
//! The modules, one concept each: `builder` (what a roster is made of), `requests`
//! (requests, their settlement, leases), `fold` (the fold and the output dispatcher),
//! `machines` and `probes` (the work outputs ask for), `timers` (wake-ups), `writer`
//! (the state file), `fence` (a remote log's fencing), `state` (what a roster holds),
//! `events` (events and what they carry), `provisioner` and `document` (what the
//! caller gives). A remote log's entries are the core's (`rota_core::log`).

use std::path::Path;
use std::sync::Arc;

use rota_core::{
    Because, Document, Exclusion, ExclusionKind, ExecutorSpec, ExplainRequest, Explanation,
    Failure, Input, Level, Plan, Snapshot,
};
use serde_json::Value;
use tokio::sync::broadcast;

use crate::classify::{http_facts, io_facts};
use crate::engine::PolicyModule;
use crate::error::{HostError, Result};
use crate::event::Event;

pub(crate) mod builder;
mod document;
pub(crate) mod events;
pub(crate) mod fence;
pub(crate) mod fold;
pub(crate) mod machines;
pub(crate) mod metrics;
pub(crate) mod probes;
mod provisioner;
pub(crate) mod requests;
pub(crate) mod state;
pub(crate) mod timers;
pub(crate) mod writer;

pub use builder::RosterBuilder;
pub use document::IntoDocument;
pub use provisioner::{BoxFuture, NoProvisioner, Provisioner};
pub use requests::{Explain, Lease, LeaseOptions};
pub use writer::StateRetry;

use builder::load_module;
use events::{exclusion_from, narrow_warning, secret_warnings};
use requests::Ask;
use state::{lock, Inner};

/// A roster of executors leased by role. Cheap to clone.
#[derive(Clone)]
pub struct Roster {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Roster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Roster").finish_non_exhaustive()
    }
}

impl RosterBuilder {
    /// Loads the module, builds the policy, restores the state file, starts the tasks.
    pub async fn build(self) -> Result<Roster> {
        self.build_inner().await.map(|inner| Roster { inner })
    }
}

impl Roster {
    /// A builder: say where the roster comes from, then `build().await`.
    pub fn builder() -> RosterBuilder {
        RosterBuilder::new()
    }

    /// The host's clock (epoch ms).
    pub fn now_ms(&self) -> u64 {
        self.inner.now_ms()
    }

    /// Every event from now on (core and host).
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.inner.events.subscribe()
    }

    /// The most recent host events (startup ones included).
    pub fn host_events(&self) -> Vec<Event> {
        lock(&self.inner.host_events).iter().cloned().collect()
    }

    /// Waits for a slot; fails `Exhausted` when none can ever come, `TimedOut` after
    /// `options.timeout`. Dropping the future cancels the request.
    pub async fn lease(&self, role: &str, options: LeaseOptions) -> Result<Lease> {
        let lease = self.inner.ask(Ask::Lease, role, options).await?;
        lease.ok_or(HostError::Closed)
    }

    /// A slot now, or `None`. (On an executor with `provision`, waits for the machine.)
    pub async fn try_lease(&self, role: &str, options: LeaseOptions) -> Result<Option<Lease>> {
        self.inner.ask(Ask::TryLease, role, options).await
    }

    /// Records work already running on `executor` after a restart: it takes a slot
    /// even beyond capacity. Released like any lease.
    pub async fn occupy(
        &self,
        executor: &str,
        role: Option<&str>,
        hold: Option<Value>,
    ) -> Result<Lease> {
        let ask = Ask::Occupy {
            executor: executor.to_string(),
            role: role.map(str::to_string),
            hold,
        };
        let lease = self
            .inner
            .ask(ask, role.unwrap_or_default(), LeaseOptions::default());
        lease.await?.ok_or(HostError::Closed)
    }

    /// Reports a failed call on `executor`: the exclusion it put in force, as the
    /// seed's `report` returns it (`{ id, reason, kind, until? }`), read from the core's
    /// answer (its `excluded` event, emitted at every event level); `None` when it
    /// earned none or a stronger exclusion stays.
    pub fn report(&self, executor: &str, failure: Failure) -> Result<Option<Exclusion>> {
        let now = self.inner.now_ms();
        // The kind the core gives it, for `rota_failures_total` (counted once the core
        // took the report).
        let classified = self.inner.query(|p| p.classify_at(&failure, now)).ok();
        let step = self.inner.feed(Input::Report {
            now,
            executor: executor.to_string(),
            failure,
        })?;
        let exclusion = exclusion_from(&step.outputs, executor);
        let kind = metrics::failure_kind(classified.as_ref(), exclusion.as_ref());
        lock(&self.inner.metrics).failed(executor, kind);
        Ok(exclusion)
    }

    /// Reports a failed HTTP call: its status, headers (`Retry-After`) and body are
    /// the facts the core classifies ([`crate::classify`]).
    pub fn report_http(
        &self,
        executor: &str,
        status: u16,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Option<Exclusion>> {
        let failure = http_facts(status, headers, body, self.inner.now_ms());
        self.report(executor, failure)
    }

    /// Reports a call that failed without an HTTP answer (its kind as a code such as
    /// `ECONNREFUSED`, and its text).
    pub fn report_io(&self, executor: &str, error: &std::io::Error) -> Result<Option<Exclusion>> {
        self.report(executor, io_facts(error))
    }

    /// The kind the core gives `failure` with the running document's signals, without
    /// reporting it: `{"kind", "rule"}`, and `resetAt` when the document's `resetTime:
    /// "message"` reads one from its message (now).
    pub fn classify(&self, failure: &Failure) -> Result<Value> {
        let now = self.inner.now_ms();
        self.inner.query(|p| p.classify_at(failure, now))
    }

    /// Takes an executor out of the round (`manual` is an operator's pause).
    pub fn exclude(
        &self,
        executor: &str,
        kind: ExclusionKind,
        reason: &str,
        until_ms: Option<u64>,
    ) -> Result<()> {
        self.inner
            .feed(Input::Exclude {
                now: self.inner.now_ms(),
                executor: executor.to_string(),
                kind,
                reason: reason.to_string(),
                until: until_ms,
            })
            .map(drop)
    }

    /// Ends an executor's exclusion, whatever its kind.
    pub fn resume(&self, executor: &str) -> Result<()> {
        self.inner
            .feed(Input::Resume {
                now: self.inner.now_ms(),
                executor: executor.to_string(),
            })
            .map(drop)
    }

    /// Replaces the document live (validated first: a bad one changes nothing).
    pub fn reload(&self, document: Value) -> Result<()> {
        let secrets = {
            let mut st = lock(&self.inner.state);
            // (The warnings do not depend on the options' kinds.)
            secret_warnings(&mut st.policy, &document, &Value::Null)
        };
        self.inner.feed(Input::Reload {
            now: self.inner.now_ms(),
            document,
        })?;
        secrets.into_iter().for_each(|e| self.inner.publish(e));
        Ok(())
    }

    /// Reads the roster files again and reloads (a roster built from files only).
    pub fn reload_files(&self) -> Result<()> {
        let source = self
            .inner
            .source
            .clone()
            .ok_or_else(|| HostError::Invalid {
                violations: vec![rota_core::Violation {
                    path: "$".into(),
                    message: "this roster was built from a document, not from files".into(),
                }],
            })?;
        let (document, warnings) = source.load_with_warnings()?;
        for warning in warnings {
            self.inner.publish(narrow_warning(&warning));
        }
        self.reload(document)
    }

    /// The labelled metrics as Prometheus text (the npm package's `roster.metrics()`
    /// writes the same series): per executor and role, `rota_leases_granted_total`,
    /// `rota_failures_total` (by kind), `rota_budget_waits_total`, `rota_slots_in_use`,
    /// `rota_excluded` (by kind), and `rota_capacity` per role; read from the roster as
    /// folded. It also sets those gauges through the `metrics` facade (call it before
    /// the application's recorder exports them), and forgets every executor a reload
    /// removed once it has left.
    pub fn metrics(&self) -> Result<String> {
        let snapshot = self.snapshot()?;
        let capacity = snapshot
            .roles
            .iter()
            .map(|role| Ok((role.clone(), self.capacity(role)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(lock(&self.inner.metrics).render(&snapshot, &capacity))
    }

    /// Every executor, lease and waiting request now.
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.inner.query(|p| p.snapshot())
    }

    /// The snapshot as the core's JSON.
    pub fn snapshot_json(&self) -> Result<Value> {
        self.inner.query(|p| p.snapshot_json())
    }

    /// Why each executor can or cannot take a request now: an [`Explain`] or an [`ExplainRequest`].
    pub fn explain(&self, request: impl Into<ExplainRequest>) -> Result<Explanation> {
        let request = request.into();
        self.inner.query(|p| p.explain(&request))
    }

    /// A dry run of a reload.
    pub fn plan(&self, document: &Value) -> Result<Plan> {
        self.inner.query(|p| p.plan(document))
    }

    /// Free slots for `role` now.
    pub fn available(&self, role: &str) -> Result<u32> {
        self.inner.query(|p| p.available(role))
    }

    /// Configured slots for `role`.
    pub fn slots(&self, role: &str) -> Result<u32> {
        self.inner.query(|p| p.slots(role))
    }

    /// The effort `role` runs at on `executor` (its `effort`: one, or per role with a
    /// `default`), or `None` when it sets none: the harness keeps its own default.
    pub fn effort_of(&self, executor: &str, role: &str) -> Result<Option<String>> {
        self.inner.query(|p| p.effort_of(executor, role))
    }

    /// Whether an executor outside `avoid` could ever serve `role`.
    pub fn can_ever_serve(&self, role: &str, avoid: &[String]) -> Result<bool> {
        self.inner.query(|p| p.can_ever_serve(role, avoid))
    }

    /// Slots for `role` on the executors in the round, held or not: a lease does
    /// not lower it, an exclusion does.
    pub fn capacity(&self, role: &str) -> Result<u32> {
        self.inner.query(|p| p.capacity(role))
    }

    /// Resolves with `capacity(role)` once it is no longer `from` (at once when it
    /// already differs): looked at again after every input the roster folds, the
    /// wake-up tick at an exclusion's end, a probe that brings an executor back, a
    /// resume and a reload included.
    pub async fn capacity_changed(&self, role: &str, from: u32) -> Result<u32> {
        loop {
            // Registered before the count is read: a fold in between still wakes it.
            let folded = self.inner.folded.notified();
            tokio::pin!(folded);
            folded.as_mut().enable();
            let now = self.capacity(role)?;
            if now != from {
                return Ok(now);
            }
            folded.await;
        }
    }

    /// Why a lease for `role` outside `avoid` cannot be served by a call ending:
    /// [`Because::Held`] (every executor in the round is held by coders),
    /// [`Because::Out`] (none is in the round), or `None`.
    pub fn independence_blocked(&self, role: &str, avoid: &[String]) -> Result<Option<Because>> {
        self.inner.query(|p| p.independence_blocked(role, avoid))
    }

    /// Whether [`Roster::independence_blocked`] is `held`.
    pub fn coder_held(&self, role: &str, avoid: &[String]) -> Result<bool> {
        Ok(self.independence_blocked(role, avoid)? == Some(Because::Held))
    }

    /// How many times the guest failed and was restored.
    pub fn recoveries(&self) -> u64 {
        lock(&self.inner.state).policy.recoveries()
    }

    /// The running module's SHA-256.
    pub fn module_hash(&self) -> String {
        lock(&self.inner.state).policy.module().hash().to_string()
    }

    /// Loads the module at `path` and moves the live state into it: no lease is lost.
    /// The running module stays when the new one fails a check (ABI version, import,
    /// equal snapshot).
    pub async fn swap_policy(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let module = match load_module(&self.inner.engine, Some(path)).await {
            Ok(module) => module,
            Err(error) => {
                let error = HostError::SwapRefused(error.to_string());
                self.inner.publish(
                    Event::host(Level::Warn, "policySwapRefused", error.to_string())
                        .with("path", path.display().to_string()),
                );
                return Err(error);
            }
        };
        self.swap_module(module)
    }

    /// As [`Roster::swap_policy`], with a module already loaded. Refused on a shared
    /// roster: every replica of a log folds it with one module (a log moves to a newer
    /// module through its `version` entries, sql/PROTOCOL.md).
    pub fn swap_module(&self, module: PolicyModule) -> Result<()> {
        let result = if lock(&self.inner.state).member.is_some() {
            Err(HostError::SwapRefused(
                "a shared roster's replicas fold one module: swapping one replica's would split them"
                    .into(),
            ))
        } else {
            self.inner.query(|p| p.swap(module))
        };
        if let Err(error) = &result {
            self.inner.publish(Event::host(
                Level::Warn,
                "policySwapRefused",
                error.to_string(),
            ));
        }
        result
    }

    /// Waits until every state-file write asked for so far is on disk: `Ok`. When an
    /// attempt fails first, its error (`HostError::Write`, or `HostError::Read` when the
    /// file is there but cannot be read): the writes are not lost, the writer keeps them
    /// pending and retries with back-off (`RosterBuilder::state_retry`), so a later
    /// flush can answer `Ok`. Each failure is an event too (`stateFileWriteFailed` or
    /// `stateFileUnreadable`). Without a state file: `Ok` at once.
    pub async fn flush(&self) -> Result<()> {
        self.inner.flush_state().await
    }

    /// The running roster document (as the policy holds it: the last accepted reload).
    pub fn document(&self) -> Result<Value> {
        self.inner.query(|p| p.document())
    }

    /// The running document's entry for `executor`, parsed (`None`: no such executor).
    pub fn executor_spec(&self, executor: &str) -> Result<Option<ExecutorSpec>> {
        let document = self.document()?;
        let parsed = Document::from_json(&document, None)
            .map_err(|violations| HostError::Invalid { violations })?;
        Ok(parsed.executor(executor).cloned())
    }
}
