//! The state file's IO. What the file holds is the core's rule (`rota_core::state_file`,
//! called through the policy module: [`Rule`]); this module only locks, reads, writes
//! and sets aside, with the protocol the npm package's `state-file.js` follows too, so
//! writers of both kinds can share one file:
//!
//! - **Lock**: the directory `<file>.lock`, made with `mkdir` (atomic), with a file
//!   `owner` in it holding `<pid> <hostname>`; held for one read-merge-write (or one
//!   load) and removed after. A lock is a dead writer's, removed and taken, when its
//!   owner is on this host and no longer runs, or when its mtime is older than
//!   [`LOCK_STALE`] (npm `proper-lockfile`'s convention). A writer waits for a held
//!   lock up to [`LOCK_WAIT`], polling with back-off.
//! - **Atomic write**: a temporary file `.<file name>.tmp-<pid>-<n>` in the same
//!   directory, fsync, rename over the file, fsync the directory. Temporary files are
//!   made only under the lock, so one found while holding it is a killed writer's:
//!   removed when a roster starts.
//! - **A file that cannot be parsed** is renamed (under the lock) to the core's
//!   `<file>.corrupt-<ISO time without colons>` with a `stateFileCorrupt` event,
//!   never written over.
//! - **A file that cannot be read** (permissions, a directory in its place) is left
//!   alone: [`WriteError::Unreadable`]; the roster's writer reports
//!   `stateFileUnreadable` and retries with back-off.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use rota_core::Level;
use serde_json::{json, Value};

use crate::atomic;
pub use crate::atomic::write_atomic;
use crate::engine::PolicyModule;
use crate::error::{HostError, Result};
use crate::event::Event;
use crate::guest::Guest;

/// A lock whose directory is older than this is a dead writer's.
pub const LOCK_STALE: Duration = Duration::from_secs(10);
/// How long a writer waits for a held lock before the attempt fails.
pub const LOCK_WAIT: Duration = Duration::from_secs(30);

/// The core's state-file rule, as a host reaches it (the policy module).
pub trait Rule {
    /// The `state` of a `restore` input from the file's text.
    fn restore(&mut self, text: &str, now: u64) -> Result<Value>;
    /// The text to write: `existing` (`None`: no file) after `persists`.
    fn merge(&mut self, existing: Option<&str>, persists: &[Value], now: u64) -> Result<String>;
    /// Where a corrupt file goes (a file name beside it).
    fn aside_name(&mut self, name: &str, now: u64, attempt: u32) -> Result<String>;
}

/// The rule from a policy module: an instance of its own (no policy in it), so the
/// writer neither waits for the roster's lock nor needs the roster to be alive. A
/// failed call drops the instance; the next call makes a new one.
pub struct ModuleRule {
    module: PolicyModule,
    guest: Option<Guest>,
}

impl ModuleRule {
    /// The rule of `module` (instantiated at the first call).
    pub fn new(module: PolicyModule) -> ModuleRule {
        ModuleRule {
            module,
            guest: None,
        }
    }

    fn call(&mut self, request: &Value) -> Result<Value> {
        let guest = match &mut self.guest {
            Some(guest) => guest,
            none => none.insert(self.module.instantiate()?),
        };
        let text = match guest.state_file(request.to_string().as_bytes()) {
            Ok(text) => text,
            Err(error) => {
                self.guest = None;
                return Err(error.into_host("rota_state_file"));
            }
        };
        let mut answer: Value = serde_json::from_str(&text)
            .map_err(|e| HostError::Abi(format!("rota_state_file: not JSON: {e}")))?;
        if let Some(error) = answer.get("error") {
            return Err(HostError::from_policy_json(error));
        }
        answer
            .get_mut("ok")
            .map(Value::take)
            .ok_or_else(|| HostError::Abi("rota_state_file: neither `ok` nor `error`".into()))
    }

    fn text(&mut self, request: &Value) -> Result<String> {
        match self.call(request)? {
            Value::String(text) => Ok(text),
            other => Err(HostError::Abi(format!("rota_state_file answered {other}"))),
        }
    }
}

impl Rule for ModuleRule {
    fn restore(&mut self, text: &str, now: u64) -> Result<Value> {
        self.call(&json!({ "op": "restore", "text": text, "now": now }))
    }
    fn merge(&mut self, existing: Option<&str>, persists: &[Value], now: u64) -> Result<String> {
        self.text(&json!({ "op": "merge", "existing": existing, "persists": persists, "now": now }))
    }
    fn aside_name(&mut self, name: &str, now: u64, attempt: u32) -> Result<String> {
        self.text(&json!({ "op": "asideName", "name": name, "now": now, "attempt": attempt }))
    }
}

/// Whether a rule's error says the text is not a state file.
fn corrupt_reason(error: &HostError) -> Option<String> {
    match error {
        HostError::Policy { code, message, .. } if code == "STATE_FILE_CORRUPT" => {
            Some(message.clone())
        }
        _ => None,
    }
}

/// Why a write did not happen. Nothing was written over in any case.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The file is there but cannot be read: it is left as it is.
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        /// The state file.
        path: PathBuf,
        /// Why it cannot be read.
        source: std::io::Error,
    },
    /// The lock, the temporary file, the rename ...
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The state file.
        path: PathBuf,
        /// The failed operation's error.
        source: std::io::Error,
    },
    /// The policy module failed.
    #[error("{0}")]
    Rule(HostError),
}

/// A state file at a path.
#[derive(Debug, Clone)]
pub struct StateFile {
    path: PathBuf,
}

/// The lock directory, removed on drop.
pub struct FileLock {
    path: PathBuf,
}

impl Drop for FileLock {
    fn drop(&mut self) {
        remove_lock(&self.path);
    }
}

fn remove_lock(lock: &Path) {
    let _ = std::fs::remove_file(lock.join("owner"));
    let _ = std::fs::remove_dir(lock);
}

/// This host's name as Node's `os.hostname()` gives it (Linux; elsewhere none).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_default()
}

/// Whether the lock is a dead writer's (see the module docs).
#[allow(clippy::disallowed_methods)] // the host does IO: the lock's file time
fn stale(lock: &Path) -> bool {
    let owner = std::fs::read_to_string(lock.join("owner")).unwrap_or_default();
    let mut parts = owner.split_whitespace();
    let pid = parts.next().and_then(|p| p.parse::<u32>().ok());
    let host = parts.next().unwrap_or_default();
    let procfs = Path::new("/proc/self").exists();
    if let Some(pid) = pid {
        if procfs
            && !host.is_empty()
            && host == hostname()
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            return true;
        }
    }
    std::fs::metadata(lock)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age > LOCK_STALE)
}

/// What reading found.
enum Contents {
    Missing,
    Text(String),
    /// Bytes that are not UTF-8: corrupt.
    NotText,
}

impl StateFile {
    /// The state file at `path`.
    pub fn new(path: impl Into<PathBuf>) -> StateFile {
        StateFile { path: path.into() }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn dir(&self) -> PathBuf {
        atomic::dir_of(&self.path)
    }

    fn name(&self) -> String {
        atomic::name_of(&self.path)
    }

    fn temp_prefix(&self) -> String {
        atomic::temp_prefix(&self.path)
    }

    /// `<file>.lock`.
    pub fn lock_path(&self) -> PathBuf {
        self.dir().join(format!("{}.lock", self.name()))
    }

    /// Takes the lock (see the module docs), waiting up to `wait`.
    #[allow(clippy::disallowed_methods)] // the host does IO: how long it has waited
    pub fn lock(&self, wait: Duration) -> std::io::Result<FileLock> {
        let lock = self.lock_path();
        std::fs::create_dir_all(self.dir())?;
        let start = Instant::now();
        let mut pause = Duration::from_millis(5);
        loop {
            match std::fs::create_dir(&lock) {
                Ok(()) => {
                    let owner = format!("{} {}\n", std::process::id(), hostname());
                    let _ = std::fs::write(lock.join("owner"), owner);
                    return Ok(FileLock { path: lock });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
            if stale(&lock) {
                // A dead writer's: take it over (a live one would have removed it).
                remove_lock(&lock);
                continue;
            }
            if start.elapsed() >= wait {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    format!("{} is held by another writer", lock.display()),
                ));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// Removes the temporary files killed writers left (call with the lock held).
    pub fn remove_stale_temps(&self) -> usize {
        let prefix = self.temp_prefix();
        let Ok(entries) = std::fs::read_dir(self.dir()) else {
            return 0;
        };
        entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .filter(|e| std::fs::remove_file(e.path()).is_ok())
            .count()
    }

    fn read(&self) -> std::io::Result<Contents> {
        match std::fs::read(&self.path) {
            Ok(bytes) => Ok(String::from_utf8(bytes).map_or(Contents::NotText, Contents::Text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Contents::Missing),
            Err(e) => Err(e),
        }
    }

    /// Renames the file aside (lock held) and says so.
    fn set_aside(
        &self,
        rule: &mut dyn Rule,
        reason: &str,
        now: u64,
        events: &mut Vec<Event>,
    ) -> std::result::Result<(), WriteError> {
        let name = self.name();
        let mut attempt = 0;
        let aside = loop {
            let candidate = self.dir().join(
                rule.aside_name(&name, now, attempt)
                    .map_err(WriteError::Rule)?,
            );
            if std::fs::symlink_metadata(&candidate).is_err() || attempt >= 1000 {
                break candidate;
            }
            attempt += 1;
        };
        std::fs::rename(&self.path, &aside).map_err(|source| WriteError::Io {
            path: self.path.clone(),
            source,
        })?;
        events.push(
            Event::host(
                Level::Warn,
                "stateFileCorrupt",
                format!(
                    "the state file {} is not one rota reads ({reason}); set aside as {}",
                    self.path.display(),
                    aside.display()
                ),
            )
            .with("path", self.path.display().to_string())
            .with("reason", reason.to_string())
            .with("movedTo", aside.display().to_string()),
        );
        Ok(())
    }

    /// At start, under the lock: removes stale temporary files, reads the file, sets a
    /// corrupt one aside. The `state` to restore (`None`: nothing to restore).
    pub fn load(
        &self,
        rule: &mut dyn Rule,
        now: u64,
        events: &mut Vec<Event>,
    ) -> std::result::Result<Option<Value>, WriteError> {
        let io = |source| WriteError::Io {
            path: self.path.clone(),
            source,
        };
        let _lock = self.lock(LOCK_WAIT).map_err(io)?;
        self.remove_stale_temps();
        let text = match self.read() {
            Ok(Contents::Missing) => return Ok(None),
            Ok(Contents::Text(text)) => text,
            Ok(Contents::NotText) => {
                self.set_aside(rule, "the file is not UTF-8 text", now, events)?;
                return Ok(None);
            }
            Err(source) => {
                return Err(WriteError::Unreadable {
                    path: self.path.clone(),
                    source,
                })
            }
        };
        match rule.restore(&text, now) {
            Ok(state) => Ok(Some(state)),
            Err(error) => match corrupt_reason(&error) {
                Some(reason) => {
                    self.set_aside(rule, &reason, now, events)?;
                    Ok(None)
                }
                None => Err(WriteError::Rule(error)),
            },
        }
    }

    /// One read-merge-write under the lock: the file after `persists`.
    pub fn write(
        &self,
        rule: &mut dyn Rule,
        persists: &[Value],
        now: u64,
        events: &mut Vec<Event>,
    ) -> std::result::Result<(), WriteError> {
        let io = |source| WriteError::Io {
            path: self.path.clone(),
            source,
        };
        let _lock = self.lock(LOCK_WAIT).map_err(io)?;
        let existing = match self.read() {
            Ok(Contents::Missing) => None,
            Ok(Contents::Text(text)) => Some(text),
            Ok(Contents::NotText) => {
                self.set_aside(rule, "the file is not UTF-8 text", now, events)?;
                None
            }
            Err(source) => {
                return Err(WriteError::Unreadable {
                    path: self.path.clone(),
                    source,
                })
            }
        };
        let text = match rule.merge(existing.as_deref(), persists, now) {
            Ok(text) => text,
            Err(error) => match corrupt_reason(&error) {
                Some(reason) => {
                    self.set_aside(rule, &reason, now, events)?;
                    rule.merge(None, persists, now).map_err(WriteError::Rule)?
                }
                None => return Err(WriteError::Rule(error)),
            },
        };
        write_atomic(&self.path, text.as_bytes()).map_err(io)
    }
}
