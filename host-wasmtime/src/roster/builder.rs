//! [`RosterBuilder`]: where the document comes from, the options, the state file,
//! the module and engine, the provisioner, probes and clock; `build` makes the
//! roster on the memory log; `inner` makes what every roster's calls and tasks share,
//! on either log.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rota_core::{Document, Input, Options};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot, Notify};

use super::document::IntoDocument;
use super::events::{narrow_warning, secret_warnings};
use super::provisioner::{NoProvisioner, Provisioner};
use super::state::{lock, Inner, Link, Starting, State, WriterMsg};
use super::timers::timer;
use super::writer::{self, StateRetry};
use crate::clock::Clock;
use crate::engine::{HostEngine, PolicyModule};
use crate::error::{HostError, Result};
use crate::probe::ProbeTls;
use crate::runtime::PolicyRuntime;
use crate::source::RosterSource;
use crate::state_file::StateFile;
use crate::telemetry;

/// Builds a [`Roster`].
#[must_use]
pub struct RosterBuilder {
    pub(crate) document: Option<Result<Value>>,
    source: RosterSource,
    pub(crate) options: Options,
    state_file: Option<PathBuf>,
    state_retry: StateRetry,
    module: Option<PathBuf>,
    loaded: Option<PolicyModule>,
    engine: Option<HostEngine>,
    pub(crate) provisioner: Arc<dyn Provisioner>,
    pub(crate) probe_timeout: Duration,
    pub(crate) probe_tls: Option<ProbeTls>,
    clock: Option<Clock>,
    checkpoint_every: Option<usize>,
    preflight: Option<bool>,
    preflight_reloads: Option<bool>,
}

impl RosterBuilder {
    pub(crate) fn new() -> RosterBuilder {
        RosterBuilder {
            document: None,
            source: RosterSource::default(),
            options: Options::default(),
            state_file: None,
            state_retry: StateRetry::default(),
            module: None,
            loaded: None,
            engine: None,
            provisioner: Arc::new(NoProvisioner),
            probe_timeout: Duration::from_secs(5),
            probe_tls: None,
            clock: None,
            checkpoint_every: None,
            preflight: None,
            preflight_reloads: None,
        }
    }

    /// Whether every executor is preflighted before the roster serves (a failure
    /// fails `build`). Default: when the provisioner can preflight, or the options
    /// say `preflight`.
    pub fn preflight(mut self, on: bool) -> Self {
        self.preflight = Some(on);
        self
    }

    /// Whether executors a reload adds or grows are preflighted first. Default: the
    /// options' `preflightReloads`, or whenever the roster preflights.
    pub fn preflight_reloads(mut self, on: bool) -> Self {
        self.preflight_reloads = Some(on);
        self
    }

    /// The roster document itself (instead of files): a `serde_json::Value`, text of
    /// JSON or YAML, or a typed [`Document`] ([`IntoDocument`]). Text that cannot be
    /// read fails `build` with what is wrong and where.
    pub fn document(mut self, document: impl IntoDocument) -> Self {
        self.document = Some(document.into_document());
        self
    }

    /// The user's roster file.
    pub fn roster_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.source.roster = Some(path.into());
        self
    }

    /// A repository roster merged over the user's.
    pub fn repo_overlay(mut self, path: impl Into<PathBuf>) -> Self {
        self.source.repo = Some(path.into());
        self
    }

    /// Only these executors (`--executors a,b`).
    pub fn executors(mut self, ids: Vec<String>) -> Self {
        self.source.executors = ids;
        self
    }

    /// The policy's options (event level, kinds, ...).
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Exclusions that outlive a run: read at start, written on every persist.
    pub fn state_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.state_file = Some(path.into());
        self
    }

    /// How a failed state-file write is retried (default: 500 ms, doubling to 30 s).
    pub fn state_retry(mut self, retry: StateRetry) -> Self {
        self.state_retry = retry;
        self
    }

    /// A policy module file instead of the bundled one.
    pub fn module_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.module = Some(path.into());
        self
    }

    /// A module already loaded (and compiled): rosters can share one.
    pub fn module(mut self, module: PolicyModule) -> Self {
        self.loaded = Some(module);
        self
    }

    /// An engine of your own (default: [`HostEngine::shared`]).
    pub fn engine(mut self, engine: HostEngine) -> Self {
        self.engine = Some(engine);
        self
    }

    /// Who creates and deletes machines and runs preflights (default: [`NoProvisioner`]).
    pub fn provisioner(mut self, provisioner: Arc<dyn Provisioner>) -> Self {
        self.provisioner = provisioner;
        self
    }

    /// How long a health probe may take before it counts as down (default 5 s).
    pub fn probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = timeout;
        self
    }

    /// Whom `https://` health probes trust (default: the Mozilla roots), e.g.
    /// `ProbeTls::with_roots_pem` for a private CA or a self-signed engine.
    pub fn probe_tls(mut self, tls: ProbeTls) -> Self {
        self.probe_tls = Some(tls);
        self
    }

    /// The clock the host reads (default: the system's; tests start one at a fixed time).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Accepted inputs between checkpoints of the guest's state.
    pub fn checkpoint_every(mut self, inputs: usize) -> Self {
        self.checkpoint_every = Some(inputs);
        self
    }

    /// The engine and the module: as given, else the shared engine and the bundled
    /// module (or `module_path`'s).
    pub(crate) async fn engine_and_module(&mut self) -> Result<(HostEngine, PolicyModule)> {
        let engine = match (&self.engine, &self.loaded) {
            (Some(engine), _) => engine.clone(),
            (None, Some(module)) => module.engine().clone(),
            (None, None) => HostEngine::shared()?,
        };
        let module = match self.loaded.take() {
            Some(module) => module,
            None => load_module(&engine, self.module.as_deref()).await?,
        };
        Ok((engine, module))
    }

    /// What a roster's calls and tasks share, over `state` on `clock`: this builder's
    /// provisioner and probe settings, and what its log adds (`link` for a remote log;
    /// the memory log's `source` and state-file `writer`).
    pub(crate) fn inner(
        &self,
        state: State,
        clock: Clock,
        engine: HostEngine,
        source: Option<RosterSource>,
        link: Option<Link>,
        writer: Option<mpsc::UnboundedSender<WriterMsg>>,
    ) -> Arc<Inner> {
        let (events, _) = broadcast::channel(1024);
        Arc::new(Inner {
            state: Mutex::new(state),
            clock,
            wake: Arc::new(Notify::new()),
            folded: Notify::new(),
            events,
            host_events: Mutex::new(Default::default()),
            writer,
            provisioner: self.provisioner.clone(),
            probe_timeout: self.probe_timeout,
            probe_tls: self.probe_tls.clone(),
            source,
            engine,
            runtime: tokio::runtime::Handle::current(),
            link,
            metrics: Mutex::new(Default::default()),
        })
    }

    /// Loads the module, builds the policy, restores the state file, starts the tasks.
    pub(crate) async fn build_inner(mut self) -> Result<Arc<Inner>> {
        telemetry::describe();
        let source = self.document.is_none().then(|| self.source.clone());
        let (document, warnings) = match (self.document.take(), &source) {
            (Some(document), _) => (document?, Vec::new()),
            (None, Some(source)) => source.load_with_warnings()?,
            (None, None) => return Err(HostError::Closed),
        };
        let (engine, module) = self.engine_and_module().await?;
        // The seed preflights whenever it can: at start and on reloads.
        let mut core_options = self.options.clone();
        core_options.preflight = self
            .preflight
            .unwrap_or(core_options.preflight || self.provisioner.can_preflight());
        core_options.preflight_reloads = self
            .preflight_reloads
            .unwrap_or(core_options.preflight_reloads || core_options.preflight);
        let preflight = core_options.preflight;
        let options = serde_json::to_value(&core_options)
            .map_err(|e| HostError::Abi(format!("cannot encode the options: {e}")))?;
        let mut policy = PolicyRuntime::new(module, &document, &options)?;
        let secrets = secret_warnings(&mut policy, &document, &options);
        if let Some(every) = self.checkpoint_every {
            policy.set_checkpoint_every(every);
        }
        let clock = self.clock.unwrap_or_else(Clock::system);
        let state_file = self.state_file.take().map(StateFile::new);
        let (writer_tx, writer_rx) = state_file
            .as_ref()
            .map(|_| mpsc::unbounded_channel())
            .unzip();
        let mut state = State::new(policy, None);
        if let Ok(parsed) = Document::from_json(&document, None) {
            state.set_specs(parsed);
        }
        let inner = self.inner(state, clock, engine, source, None, writer_tx);
        for warning in warnings {
            inner.publish(narrow_warning(&warning));
        }
        secrets.into_iter().for_each(|e| inner.publish(e));
        if let (Some(file), Some(rx)) = (state_file, writer_rx) {
            writer::start(&inner, file, rx, self.state_retry).await?;
        }
        inner.spawn(timer(Arc::downgrade(&inner), inner.wake.clone()));
        if preflight {
            // The core asked for every executor's preflight when it was built: a tick
            // carries those outputs out, and the roster serves once they all pass.
            let (done, started) = oneshot::channel();
            lock(&inner.state).starting = Some(Starting {
                awaiting: BTreeSet::new(),
                done: Some(done),
            });
            inner.feed(Input::Tick {
                now: clock.now_ms(),
            })?;
            let nothing_asked = {
                let mut st = lock(&inner.state);
                let empty = st.starting.as_ref().is_some_and(|s| s.awaiting.is_empty());
                if empty {
                    st.starting = None;
                }
                empty
            };
            if !nothing_asked {
                started.await.map_err(|_| HostError::Closed)??;
            }
        }
        Ok(inner)
    }
}

pub(crate) async fn load_module(engine: &HostEngine, path: Option<&Path>) -> Result<PolicyModule> {
    let engine = engine.clone();
    let path = path.map(Path::to_path_buf);
    tokio::task::spawn_blocking(move || engine.load(path.as_deref()))
        .await
        .map_err(|e| HostError::Abi(format!("the module loader failed: {e}")))?
}
