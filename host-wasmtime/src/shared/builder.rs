//! [`SharedRosterBuilder`]: which log, the document and options for its genesis, the
//! timings; `connect` joins (from the latest snapshot or the genesis) and starts the
//! instance's tasks.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rota_core::{Level, Options};
use serde_json::Value;
use tokio::sync::Notify;

use super::driver::{drive, incarnation, start_replica, Remote, SharedConfig};
use super::log::{LogError, LogStore, SubscribeOptions};
use super::pg::PgLogStore;
use super::roster::{Owner, SharedRoster};
use crate::clock::Clock;
use crate::engine::{HostEngine, PolicyModule};
use crate::error::{HostError, Result};
use crate::event::Event;
use crate::roster::builder::Parts;
use crate::roster::state::{Link, State};
use crate::roster::{IntoDocument, NoProvisioner, Provisioner};

impl SharedRoster<PgLogStore> {
    /// A builder: `url`, `roster`, `document`, ... then `connect().await`.
    pub fn builder() -> SharedRosterBuilder {
        SharedRosterBuilder::new()
    }
}

impl crate::roster::RosterBuilder {
    /// The shared form: a roster whose log is the PostgreSQL log `roster` at `url`,
    /// shared with every instance that joins it (`connect().await`). It keeps the
    /// builder's document and options (for the genesis, when the log is empty),
    /// module, provisioner and probe timeout; a shared roster has no state file (the
    /// log is its persistence) and no roster files.
    pub fn shared(self, url: impl Into<String>, roster: impl Into<String>) -> SharedRosterBuilder {
        let mut shared = SharedRosterBuilder::new().url(url).roster(roster);
        if let Some(document) = self.document {
            shared.document = document;
        }
        shared.options = self.options;
        shared.module = self.loaded;
        shared.provisioner = self.provisioner;
        shared.probe_timeout = self.probe_timeout;
        shared
    }
}

/// Builds a [`SharedRoster`]: `url` and `roster` (which log), the `document` and
/// `options` (used only when this instance writes the genesis), timings, then
/// `connect().await`.
#[must_use]
pub struct SharedRosterBuilder {
    url: Option<String>,
    roster: Option<String>,
    name: Option<String>,
    document: Result<Value>,
    options: Options,
    config: SharedConfig,
    module: Option<PolicyModule>,
    provisioner: Arc<dyn Provisioner>,
    probe_timeout: Duration,
    record_hashes: bool,
}

impl SharedRosterBuilder {
    pub(super) fn new() -> SharedRosterBuilder {
        SharedRosterBuilder {
            url: None,
            roster: None,
            name: None,
            document: Ok(Value::Null),
            options: Options::default(),
            config: SharedConfig::default(),
            module: None,
            provisioner: Arc::new(NoProvisioner),
            probe_timeout: Duration::from_secs(5),
            record_hashes: false,
        }
    }
    /// The PostgreSQL connection string.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// The roster's name: one log per name.
    pub fn roster(mut self, roster: impl Into<String>) -> Self {
        self.roster = Some(roster.into());
        self
    }

    /// This process's name in instance ids (default `<hostname>-<pid>`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The roster document, written into the genesis when the log is empty: a
    /// `serde_json::Value`, text of JSON or YAML, or a typed document
    /// ([`IntoDocument`]).
    pub fn document(mut self, document: impl IntoDocument) -> Self {
        self.document = document.into_document();
        self
    }

    /// The policy's options, written into the genesis (`preflight` is off: a shared
    /// roster does not preflight in log version 1).
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// All timings at once.
    pub fn config(mut self, config: SharedConfig) -> Self {
        self.config = config;
        self
    }

    /// The instance TTL (default 10 s); the leader lease follows it unless set.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        if self.config.leader_ttl == self.config.ttl {
            self.config.leader_ttl = ttl;
        }
        self.config.ttl = ttl;
        self
    }

    /// The leader lease's length (default: the TTL).
    pub fn leader_ttl(mut self, ttl: Duration) -> Self {
        self.config.leader_ttl = ttl;
        self
    }

    /// Entries between the leader's snapshots (default 1,000).
    pub fn snapshot_every(mut self, entries: u64) -> Self {
        self.config.snapshot_every = entries;
        self
    }

    /// A policy module already loaded (default: the bundled one).
    pub fn module(mut self, module: PolicyModule) -> Self {
        self.module = Some(module);
        self
    }

    /// Who creates and deletes machines (default: [`NoProvisioner`]).
    pub fn provisioner(mut self, provisioner: Arc<dyn Provisioner>) -> Self {
        self.provisioner = provisioner;
        self
    }

    /// How long the leader's health probe may take (default 5 s).
    pub fn probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = timeout;
        self
    }

    #[doc(hidden)]
    /// Tests: keep `(seq, stateHash)` after every entry ([`SharedRoster::hashes`]).
    pub fn record_hashes(mut self, on: bool) -> Self {
        self.record_hashes = on;
        self
    }

    /// Connects to PostgreSQL (`url`, `roster`) and joins.
    pub async fn connect(self) -> Result<SharedRoster<PgLogStore>> {
        let url = self.url.clone().ok_or_else(|| missing("url"))?;
        let roster = self.roster.clone().ok_or_else(|| missing("roster"))?;
        let store = PgLogStore::connect(&url, &roster).await?;
        self.connect_with(store).await
    }

    /// Joins over a store of your own.
    pub async fn connect_with<S: LogStore + 'static>(self, store: S) -> Result<SharedRoster<S>> {
        let document = self.document?;
        let module = match self.module {
            Some(module) => module,
            None => tokio::task::spawn_blocking(|| HostEngine::shared()?.load(None))
                .await
                .map_err(|e| HostError::Abi(format!("the module loader failed: {e}")))??,
        };
        let name = self.name.unwrap_or_else(default_name);
        let instance = incarnation(&name);
        let mut options = self.options;
        options.preflight = false;
        options.preflight_reloads = false;
        let options = serde_json::to_value(&options)
            .map_err(|e| HostError::Abi(format!("cannot encode the options: {e}")))?;
        let subscription = store
            .subscribe(SubscribeOptions {
                poll: self.config.poll,
                listen: true,
            })
            .await?;
        let (mut policy, mut member, folded_document) =
            start_replica(&store, &module, &instance, &document, &options).await?;
        if self.record_hashes {
            member.hashes = Some(vec![(member.folded_seq, policy.state_hash()?)]);
        }
        let sent = tokio::time::Instant::now();
        let now = store.heartbeat(&instance).await?;
        member.beat_sent = sent;
        let mut state = State::new(policy, Some(member));
        state.wake_at = state.policy.snapshot().ok().and_then(|s| s.wake_at);
        let link = Link {
            ttl: self.config.ttl,
            db_clock: Mutex::new(Clock::starting_at(now)),
            queued: Notify::new(),
            read_now: Notify::new(),
            tasks: Mutex::new(Vec::new()),
        };
        let parts = Parts {
            provisioner: self.provisioner,
            probe_timeout: self.probe_timeout,
            probe_tls: None,
            source: None,
            engine: module.engine().clone(),
            link: Some(link),
            writer: None,
        };
        let remote = Arc::new(Remote {
            store,
            inner: parts.inner(state, Clock::system()),
            config: self.config,
            name,
            module,
        });
        if folded_document.as_ref() != Some(&document) && !document.is_null() {
            remote.inner.publish(Event::host(
                Level::Warn,
                "sharedDocumentDiffers",
                "the roster document given differs from the log's: this instance folds the log's (reload to change it for all)",
            ));
        }
        // Beating from here on: catching up with a long log may take longer than the TTL.
        let inner = &remote.inner;
        inner.spawn(super::leader::heartbeats(Arc::clone(&remote)));
        remote.catch_up(None).await;
        inner.spawn(drive(Arc::clone(&remote), subscription));
        inner.spawn(super::leader::leader(Arc::clone(&remote)));
        Ok(SharedRoster {
            remote,
            _owner: Arc::new(Owner),
        })
    }
}

fn missing(what: &str) -> HostError {
    HostError::Log(LogError::InvalidInput(format!(
        "SharedRoster::builder() needs `{what}`"
    )))
}

fn default_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "rota".into());
    format!("{host}-{}", std::process::id())
}
