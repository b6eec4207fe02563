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
use crate::engine::PolicyModule;
use crate::error::{HostError, Result};
use crate::event::Event;
use crate::roster::state::{Link, State};
use crate::roster::timers::timer;
use crate::roster::{IntoDocument, Provisioner, Roster, RosterBuilder};

impl SharedRoster<PgLogStore> {
    /// A builder: `url`, `roster`, `document`, ... then `connect().await`.
    pub fn builder() -> SharedRosterBuilder {
        Roster::builder().shared("", "")
    }
}

impl RosterBuilder {
    /// The shared form: a roster whose log is the PostgreSQL log `roster` at `url`,
    /// shared with every instance that joins it (`connect().await`). It keeps the
    /// builder's document and options (for the genesis, when the log is empty),
    /// module, provisioner and probe timeout; a shared roster has no state file (the
    /// log is its persistence) and no roster files.
    pub fn shared(self, url: impl Into<String>, roster: impl Into<String>) -> SharedRosterBuilder {
        SharedRosterBuilder {
            base: self,
            url: url.into(),
            roster: roster.into(),
            name: None,
            config: SharedConfig::default(),
            record_hashes: false,
        }
    }
}

/// Builds a [`SharedRoster`]: `url` and `roster` (which log), the `document` and
/// `options` (used only when this instance writes the genesis), timings, then
/// `connect().await`. The roster's settings are a [`RosterBuilder`]'s.
#[must_use]
pub struct SharedRosterBuilder {
    base: RosterBuilder,
    url: String,
    roster: String,
    name: Option<String>,
    config: SharedConfig,
    record_hashes: bool,
}

impl SharedRosterBuilder {
    /// The PostgreSQL connection string.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = url.into();
        self
    }

    /// The roster's name: one log per name.
    pub fn roster(mut self, roster: impl Into<String>) -> Self {
        self.roster = roster.into();
        self
    }

    /// This process's name in instance ids (default `<hostname>-<pid>`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The roster document, written into the genesis when the log is empty
    /// ([`RosterBuilder::document`]).
    pub fn document(mut self, document: impl IntoDocument) -> Self {
        self.base = self.base.document(document);
        self
    }

    /// The policy's options, written into the genesis (which fixes `preflight` off:
    /// a shared roster does not preflight in log version 1).
    pub fn options(mut self, options: Options) -> Self {
        self.base = self.base.options(options);
        self
    }

    /// A policy module already loaded (default: the bundled one).
    pub fn module(mut self, module: PolicyModule) -> Self {
        self.base = self.base.module(module);
        self
    }

    /// Who creates and deletes machines (default: [`NoProvisioner`](crate::NoProvisioner)).
    pub fn provisioner(mut self, provisioner: Arc<dyn Provisioner>) -> Self {
        self.base = self.base.provisioner(provisioner);
        self
    }

    /// How long the leader's health probe may take (default 5 s).
    pub fn probe_timeout(mut self, timeout: Duration) -> Self {
        self.base = self.base.probe_timeout(timeout);
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

    #[doc(hidden)]
    /// Tests: keep `(seq, stateHash)` after every entry ([`SharedRoster::hashes`]).
    pub fn record_hashes(mut self, on: bool) -> Self {
        self.record_hashes = on;
        self
    }

    /// Connects to PostgreSQL (`url`, `roster`) and joins.
    pub async fn connect(self) -> Result<SharedRoster<PgLogStore>> {
        for (what, value) in [("url", &self.url), ("roster", &self.roster)] {
            if value.is_empty() {
                return Err(missing(what));
            }
        }
        let store = PgLogStore::connect(&self.url, &self.roster).await?;
        self.connect_with(store).await
    }

    /// Joins over a store of your own.
    pub async fn connect_with<S: LogStore + 'static>(self, store: S) -> Result<SharedRoster<S>> {
        let mut base = self.base;
        let document = base.document.take().unwrap_or(Ok(Value::Null))?;
        let (engine, module) = base.engine_and_module().await?;
        let name = self.name.unwrap_or_else(default_name);
        let instance = incarnation(&name);
        let options = serde_json::to_value(&base.options)
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
        let inner = base.inner(state, Clock::system(), engine, None, Some(link), None);
        let remote = Arc::new(Remote {
            store,
            inner: Arc::clone(&inner),
            config: self.config,
            name,
            module,
        });
        if folded_document.as_ref() != Some(&document) && !document.is_null() {
            inner.publish(Event::host(
                Level::Warn,
                "sharedDocumentDiffers",
                "the roster document given differs from the log's: this instance folds the log's (reload to change it for all)",
            ));
        }
        // Beating from here on: catching up with a long log may take longer than the TTL.
        inner.spawn(super::leader::heartbeats(Arc::clone(&remote)));
        remote.catch_up(None).await;
        inner.spawn(drive(Arc::clone(&remote), subscription));
        inner.spawn(super::leader::leader(Arc::clone(&remote)));
        inner.spawn(timer(Arc::downgrade(&inner), inner.wake.clone()));
        Ok(SharedRoster {
            roster: Roster { inner },
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
