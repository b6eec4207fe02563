//! Requests and their settlement: what a lease request carries ([`LeaseOptions`], and
//! [`Explain`] for asking why), appending one for a caller who waits, turning its
//! outcome into a [`Lease`] or an error, and ending it when the caller gives up
//! (dropped: cancelled, or released when the grant raced). A [`Lease`] gives its slot
//! back when released or dropped.

use std::sync::Arc;
use std::time::Duration;

use rota_core::{Exclusion, ExecutorSpec, ExplainRequest, Failure, Input, LeaseRequest, Level};
use serde_json::Value;
use tokio::sync::oneshot;
use tracing::Instrument;

use super::events::exclusion_from;
use super::state::{lock, Inner, Mine, Outcome, Waiter};
use crate::error::{HostError, Result};
use crate::event::Event;

/// What a lease request may carry besides its role (see DESIGN.md, "Requests").
#[derive(Debug, Clone, Default)]
pub struct LeaseOptions {
    /// Executors the request must not use.
    pub avoid: Vec<String>,
    /// The executor it would rather have.
    pub prefer: Option<String>,
    /// The only executor it may use.
    pub pin: Option<String>,
    /// Its place in the queue among requests of its role: lower first (default 0).
    pub rank: Option<i64>,
    /// When the work arrived (epoch ms).
    pub event_time: Option<u64>,
    /// A label for logs and events (`"job 605"`).
    pub label: Option<String>,
    /// What the call is for beyond its role (a review lens): the lease carries it, and
    /// its events say it ("… for story a · adversarial lens").
    pub purpose: Option<String>,
    /// Give up after this long (the core times the request out).
    pub timeout: Option<Duration>,
    /// The executor holding this context's coder: taken (its free slot, else
    /// without a slot) when no other executor can serve the request. `try_lease`
    /// never borrows.
    pub borrow: Option<String>,
    /// Who the work is for (a team, a customer): with the document's `fairness:
    /// "tenants"`, a role's waiting requests are served across tenants by their
    /// weights. None: the tenant `default`.
    pub tenant: Option<String>,
    /// A cache key (a prompt or session): the roster remembers the executor of the
    /// key's last grant for the document's `affinityTtl` (default 10 minutes) of
    /// idleness and prefers it while it is free, in the round and no worse in
    /// priority than the best free executor.
    pub affinity: Option<String>,
}

/// What to explain ([`Roster::explain`]): a role, and what a request for it would
/// carry; or a waiting request by its id.
///
/// ```
/// let request = rota_host::Explain::role("coder").avoid(["codex"]).prefer("claude-opus");
/// let request: rota_host::ExplainRequest = request.into();
/// assert_eq!(request.avoid, ["codex"]);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Explain(ExplainRequest);

impl Explain {
    /// A request for `role` with nothing else.
    pub fn role(role: impl Into<String>) -> Explain {
        Explain(ExplainRequest {
            role: role.into(),
            avoid: Vec::new(),
            prefer: None,
            pin: None,
            request: None,
            affinity: None,
        })
    }

    /// The waiting request `id` (its role, `avoid` and `pin`).
    pub fn waiting(id: impl Into<String>) -> Explain {
        let mut explain = Explain::role("");
        explain.0.request = Some(id.into());
        explain
    }

    /// Executors the request must not use.
    pub fn avoid<S: Into<String>>(mut self, ids: impl IntoIterator<Item = S>) -> Explain {
        self.0.avoid = ids.into_iter().map(Into::into).collect();
        self
    }

    /// The executor the request would rather have.
    pub fn prefer(mut self, id: impl Into<String>) -> Explain {
        self.0.prefer = Some(id.into());
        self
    }

    /// The only executor the request may use.
    pub fn pin(mut self, id: impl Into<String>) -> Explain {
        self.0.pin = Some(id.into());
        self
    }

    /// The request's affinity key (the explanation's `affinity` says what it does).
    pub fn affinity(mut self, key: impl Into<String>) -> Explain {
        self.0.affinity = Some(key.into());
        self
    }
}

impl From<Explain> for ExplainRequest {
    fn from(explain: Explain) -> ExplainRequest {
        explain.0
    }
}

/// What a caller asks for.
pub(crate) enum Ask {
    Lease,
    TryLease,
    Occupy {
        executor: String,
        role: Option<String>,
        hold: Option<Value>,
    },
}

/// Ends a request whose future is dropped before it resolves: a grant that already
/// arrived is released, a waiting request is cancelled.
struct CancelGuard {
    inner: Arc<Inner>,
    request: String,
    /// `None` once the outcome has been taken.
    rx: Option<oneshot::Receiver<Result<Outcome>>>,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else { return };
        // Outcomes are sent under the state lock: holding it, `try_recv` is definitive.
        let mut st = lock(&self.inner.state);
        let now = self.inner.now_ms();
        let input = match rx.try_recv() {
            Ok(Ok(Outcome::Granted { lease, .. })) => Input::Release { now, lease },
            Ok(_) => return,
            Err(_) => {
                st.take_waiter(&self.request);
                Input::Cancel {
                    now,
                    id: self.request.clone(),
                }
            }
        };
        // A cancel of a request that has just ended is rejected, harmlessly.
        self.inner.append(&mut st, input, None);
    }
}

impl Inner {
    /// Appends a request for a caller who waits for its outcome: a lease, or how it
    /// ended (`None`: a `tryLease` found no slot).
    pub(crate) async fn ask(
        self: &Arc<Inner>,
        ask: Ask,
        role: &str,
        options: LeaseOptions,
    ) -> Result<Option<Lease>> {
        let waits = !matches!(ask, Ask::TryLease);
        let span = tracing::info_span!(
            target: "rota::host",
            "lease",
            request = tracing::field::Empty,
            role = %role,
            label = options.label.as_deref(),
            executor = tracing::field::Empty,
            lease = tracing::field::Empty,
        );
        let label = options.label.clone();
        let purpose = options.purpose.clone();
        let (id, now, rx) = span.in_scope(|| self.append_request(ask, role, options))?;
        span.record("request", id.as_str());
        let mut guard = CancelGuard {
            inner: self.clone(),
            request: id.clone(),
            rx: Some(rx),
        };
        let outcome = match guard.rx.as_mut() {
            Some(rx) => rx.instrument(span.clone()).await,
            None => return Err(HostError::Closed),
        };
        guard.rx = None;
        match outcome.map_err(|_| HostError::Closed)?? {
            Outcome::Granted {
                lease,
                spec,
                role,
                hold,
                clone,
                borrowed,
                because,
            } => {
                let granted_at = self.now_ms();
                span.record("executor", spec.id.as_str());
                span.record("lease", lease);
                tracing::debug!(
                    target: "rota::host",
                    parent: &span,
                    wait_ms = granted_at.saturating_sub(now),
                    "lease granted"
                );
                Ok(Some(Lease {
                    inner: self.clone(),
                    lease,
                    request: id,
                    spec,
                    role,
                    hold,
                    clone,
                    purpose,
                    borrowed,
                    because,
                    granted_at,
                    span,
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

    /// The request's input, its waiter registered, appended: folded now on the memory
    /// log (a rejection is the call's error), queued for a remote log. Its id, its
    /// `now` and where its outcome comes.
    fn append_request(
        self: &Arc<Inner>,
        ask: Ask,
        role: &str,
        options: LeaseOptions,
    ) -> Result<(String, u64, oneshot::Receiver<Result<Outcome>>)> {
        let mut st = lock(&self.state);
        st.usable()?;
        st.next_request += 1;
        let now = self.now_ms();
        let timeout = options
            .timeout
            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
        // The memory log's requests are r1, r2 ... with a deadline; a remote log's
        // are its instance's, with a timeout from the entry's `now`.
        let (id, owner, deadline, timeout_ms) = match &st.member {
            None => {
                let deadline = timeout.map(|t| now.saturating_add(t));
                (format!("r{}", st.next_request), None, deadline, None)
            }
            Some(member) => {
                let id = format!("{}/{}", member.instance, st.next_request);
                (id, Some(member.instance.clone()), None, timeout)
            }
        };
        let input = match ask {
            Ask::Occupy {
                executor,
                role,
                hold,
            } => Input::Occupy {
                now,
                id: id.clone(),
                executor,
                role,
                hold,
                owner,
            },
            ask => {
                let request = LeaseRequest {
                    now,
                    id: id.clone(),
                    role: role.to_string(),
                    avoid: options.avoid,
                    prefer: options.prefer,
                    pin: options.pin,
                    rank: options.rank,
                    event_time: options.event_time,
                    label: options.label,
                    purpose: options.purpose,
                    deadline,
                    timeout_ms,
                    owner,
                    borrow: options.borrow,
                    tenant: options.tenant,
                    affinity: options.affinity,
                };
                match ask {
                    Ask::TryLease => Input::TryLease(request),
                    _ => Input::Lease(request),
                }
            }
        };
        tracing::debug!(target: "rota::host", kind = input.kind(), "lease requested");
        let (tx, rx) = oneshot::channel();
        let waiter = Waiter {
            tx,
            role: role.to_string(),
            requested_at: now,
        };
        st.add_waiter(id.clone(), waiter);
        if st.member.is_some() {
            self.enqueue(&mut st, &input, None, Mine::Request(id.clone()), None)?;
        } else if let Err(error) = self.feed_locked(&mut st, input) {
            st.take_waiter(&id);
            return Err(error);
        }
        Ok((id, now, rx))
    }
}

/// A granted lease; released when dropped (or by [`Lease::release`]).
pub struct Lease {
    pub(crate) inner: Arc<Inner>,
    lease: u64,
    request: String,
    spec: Arc<ExecutorSpec>,
    role: String,
    hold: Option<Value>,
    clone: Option<u32>,
    purpose: Option<String>,
    borrowed: bool,
    because: Option<rota_core::Because>,
    granted_at: u64,
    /// The request's span: open from the request to the release.
    span: tracing::Span,
    released: bool,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("lease", &self.lease)
            .field("executor", &self.spec.id)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl Lease {
    /// The core's lease id.
    pub fn id(&self) -> u64 {
        self.lease
    }

    /// The request id the host gave it (`r<n>`; on a shared log `<instance>/<n>`).
    pub fn request(&self) -> &str {
        &self.request
    }

    /// The executor's id.
    pub fn executor(&self) -> &str {
        &self.spec.id
    }

    /// The executor's entry in the running roster document, parsed: `harness`,
    /// `model`, slots, roles ...; `spec().raw` is the entry as written, with every
    /// field the core does not read (`baseUrl`, `env`, `flags` ...).
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

    /// The effort its role runs at on its executor (the executor's `effort`, resolved
    /// by the core for the role), when it sets one.
    pub fn effort(&self) -> Option<&'static str> {
        self.spec
            .effort_for(&self.role)
            .map(rota_core::EffortLevel::name)
    }

    /// The machine hold, for an executor with `provision`.
    pub fn hold(&self) -> Option<&Value> {
        self.hold.as_ref()
    }

    /// Its clone number on the executor, when the document numbers clones
    /// (`clones: "numbered"`); [`crate::clone_name`] makes `codex#2` of it.
    pub fn clone_number(&self) -> Option<u32> {
        self.clone
    }

    /// What the call is for beyond its role, as its request said.
    pub fn purpose(&self) -> Option<&str> {
        self.purpose.as_deref()
    }

    /// On the request's `borrow` executor without a slot: it holds none, and its
    /// release frees none.
    pub fn borrowed(&self) -> bool {
        self.borrowed
    }

    /// Set when the executor is the request's `borrow` (not independent), and why.
    pub fn because(&self) -> Option<rota_core::Because> {
        self.because
    }

    /// Reports a failed call on this lease's executor (see `Roster::report`).
    pub fn report(&self, failure: Failure) -> Result<Option<Exclusion>> {
        let step = self.inner.feed(Input::Report {
            now: self.inner.now_ms(),
            executor: self.spec.id.clone(),
            failure,
        })?;
        Ok(exclusion_from(&step.outputs, &self.spec.id))
    }

    /// Gives the slot back now (on a shared log: appends the release, batched).
    pub fn release(mut self) -> Result<()> {
        self.released = true;
        self.give_back(false)
    }

    /// Notes the release in the lease's span and appends it; on the memory log a
    /// guest failure (restored to before the release) is tried once more when `retry`.
    fn give_back(&self, retry: bool) -> Result<()> {
        tracing::debug!(
            target: "rota::host",
            parent: &self.span,
            held_ms = self.inner.now_ms().saturating_sub(self.granted_at),
            "lease released"
        );
        let input = Input::Release {
            now: self.inner.now_ms(),
            lease: self.lease,
        };
        let mut st = lock(&self.inner.state);
        if st.member.is_some() {
            self.inner.append(&mut st, input, Some("releaseFailed"));
            return Ok(());
        }
        let mut result = self.inner.feed_locked(&mut st, input.clone());
        if retry && matches!(&result, Err(e) if e.is_guest_failure()) {
            result = self.inner.feed_locked(&mut st, input);
        }
        result.map(drop)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.released {
            if let Err(error) = self.give_back(true) {
                self.inner.publish(
                    Event::host(Level::Warn, "releaseFailed", error.to_string())
                        .with("lease", self.lease),
                );
            }
        }
    }
}

impl Inner {
    /// Appends a call (`report`, `exclude`, `resume`, `reload`) and answers its
    /// outputs once folded (or the core's rejection): at once on the memory log.
    #[cfg_attr(not(feature = "shared"), allow(dead_code))]
    pub(crate) async fn call(self: &Arc<Inner>, input: Input) -> Result<Vec<Value>> {
        let rx = {
            let mut st = lock(&self.state);
            st.usable()?;
            if st.member.is_none() {
                return self.feed_locked(&mut st, input).map(|step| step.outputs);
            }
            let (tx, rx) = oneshot::channel();
            self.enqueue(&mut st, &input, None, Mine::Call(tx), None)?;
            rx
        };
        rx.await.map_err(|_| HostError::Closed)?
    }
}
