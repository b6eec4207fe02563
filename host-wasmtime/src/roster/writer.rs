//! The state file's writer: persists queue up; each attempt writes all of them at
//! once (read, merge by the core's rule, write, under the file's lock), retried with
//! back-off; a flush waits for it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rota_core::Level;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::state::{lock, Inner, WriterMsg};
use crate::clock::Clock;
use crate::error::{HostError, Result};
use crate::event::Event;
use crate::state_file::{ModuleRule, StateFile, WriteError};
use crate::telemetry;

/// How the state-file writer retries a failed write: `first`, doubling up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateRetry {
    /// The wait after the first failed attempt.
    pub first: Duration,
    /// The longest wait, however many attempts failed.
    pub max: Duration,
}

impl Default for StateRetry {
    fn default() -> Self {
        StateRetry {
            first: Duration::from_millis(500),
            max: Duration::from_secs(30),
        }
    }
}

impl StateRetry {
    fn after(&self, failures: u32) -> Duration {
        let doubled = self
            .first
            .saturating_mul(1u32 << failures.saturating_sub(1).min(20));
        doubled.min(self.max)
    }
}

/// One read-merge-write of every pending persist, off the async threads.
async fn write_pending(
    file: &StateFile,
    rule: &Arc<Mutex<ModuleRule>>,
    pending: &[Value],
    now: u64,
) -> (std::result::Result<(), WriteError>, Vec<Event>) {
    let (file, rule, pending) = (file.clone(), rule.clone(), pending.to_vec());
    let written = tokio::task::spawn_blocking(move || {
        let mut events = Vec::new();
        let result = file.write(&mut *lock(&rule), &pending, now, &mut events);
        (result, events)
    })
    .await;
    written.unwrap_or_else(|e| {
        let source = std::io::Error::other(e.to_string());
        let path = PathBuf::new();
        (Err(WriteError::Io { path, source }), Vec::new())
    })
}

/// What [`Roster::flush`] answers for a failed attempt: `Read` when the file could not
/// be read, otherwise `Write` (the policy module's error as its source's text).
fn flush_error(error: &WriteError, file: &Path) -> HostError {
    // An io::Error is not Clone; the OS error (ENOSPC ...) carries over as it is.
    let copy = |source: &std::io::Error| match source.raw_os_error() {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::new(source.kind(), source.to_string()),
    };
    match error {
        WriteError::Unreadable { path, source } => HostError::Read {
            path: path.clone(),
            source: copy(source),
        },
        WriteError::Io { path, source } => HostError::Write {
            path: path.clone(),
            source: copy(source),
        },
        WriteError::Rule(error) => HostError::Write {
            path: file.to_path_buf(),
            source: std::io::Error::other(error.to_string()),
        },
    }
}

/// The state-file writer. Persists queue up; each attempt writes all of them at once
/// (read, merge by the core's rule, write, under the file's lock). A failed attempt
/// keeps them and tries again after a back-off (`stateFileUnreadable` or
/// `stateFileWriteFailed`), merging again what came since, until the file holds
/// every pending entry (`stateFileRecovered`). Never writes over what it could not
/// read. A flush is answered once nothing is pending (`Ok`) or after an attempt that
/// failed (that attempt's error; the entries stay pending and are retried).
pub(crate) async fn writer(
    file: StateFile,
    rule: Arc<Mutex<ModuleRule>>,
    mut rx: mpsc::UnboundedReceiver<WriterMsg>,
    weak: Weak<Inner>,
    clock: Clock,
    retry: StateRetry,
) {
    let mut pending: Vec<Value> = Vec::new();
    let mut flushes: Vec<oneshot::Sender<Result<()>>> = Vec::new();
    let mut failures = 0u32;
    let mut retry_at = tokio::time::Instant::now();
    let mut open = true;
    while open || !pending.is_empty() {
        let message = if !open {
            None
        } else if failures > 0 && !pending.is_empty() {
            tokio::select! {
                message = rx.recv() => Some(message),
                () = tokio::time::sleep_until(retry_at) => None,
            }
        } else {
            Some(rx.recv().await)
        };
        let mut messages = Vec::new();
        match message {
            Some(Some(message)) => messages.push(message),
            Some(None) => open = false,
            None => {}
        }
        while let Ok(more) = rx.try_recv() {
            messages.push(more);
        }
        for message in messages {
            match message {
                WriterMsg::Persist(persist) => pending.push(persist),
                WriterMsg::Flush(done) => flushes.push(done),
            }
        }
        let due = failures == 0 || !open || tokio::time::Instant::now() >= retry_at;
        // This round's attempt, if it failed: what waiting flushes answer.
        let mut failed: Option<WriteError> = None;
        if !pending.is_empty() && due {
            let (result, mut events) = write_pending(&file, &rule, &pending, clock.now_ms()).await;
            telemetry::state_written(result.is_ok());
            let path = file.path().display().to_string();
            match result {
                Ok(()) => {
                    if failures > 0 {
                        events.push(
                            Event::host(
                                Level::Info,
                                "stateFileRecovered",
                                format!("the state file {path} is written again after {failures} failed attempts"),
                            )
                            .with("path", path)
                            .with("attempts", failures),
                        );
                    }
                    pending.clear();
                    failures = 0;
                }
                Err(error) => {
                    failures += 1;
                    let wait = retry.after(failures);
                    retry_at = tokio::time::Instant::now() + wait;
                    let name = match error {
                        WriteError::Unreadable { .. } => "stateFileUnreadable",
                        _ => "stateFileWriteFailed",
                    };
                    let again = if open {
                        format!(
                            "; retrying in {}",
                            rota_core::format_duration(wait.as_millis() as u64)
                        )
                    } else {
                        "; the roster has closed, not retrying".to_string()
                    };
                    events.push(
                        Event::host(
                            Level::Warn,
                            name,
                            format!("{error}: {} pending changes kept{again}", pending.len()),
                        )
                        .with("path", path)
                        .with("error", error.to_string())
                        .with("retryInMs", if open { wait.as_millis() as u64 } else { 0 }),
                    );
                    failed = Some(error);
                    if !open {
                        pending.clear();
                    }
                }
            }
            match weak.upgrade() {
                Some(inner) => events.into_iter().for_each(|e| inner.publish(e)),
                None => events.iter().for_each(Event::log),
            }
        }
        if let Some(error) = failed {
            for done in flushes.drain(..) {
                let _ = done.send(Err(flush_error(&error, file.path())));
            }
        } else if pending.is_empty() {
            for done in flushes.drain(..) {
                let _ = done.send(Ok(()));
            }
        }
    }
    for done in flushes {
        let _ = done.send(Ok(()));
    }
}

impl Inner {
    /// Waits until every state-file write asked for so far is on disk (see
    /// [`Roster::flush`](crate::Roster::flush)); without a state file, `Ok` at once.
    pub(crate) async fn flush_state(&self) -> Result<()> {
        let Some(writer) = &self.writer else {
            return Ok(());
        };
        let (tx, rx) = oneshot::channel();
        writer
            .send(WriterMsg::Flush(tx))
            .map_err(|_| HostError::Closed)?;
        rx.await.map_err(|_| HostError::Closed)?
    }
}

/// Reads the state file and restores its exclusions (a file that cannot be read is
/// said, and the roster starts without them), then starts the writer.
pub(crate) async fn start(
    inner: &Arc<Inner>,
    file: StateFile,
    rx: mpsc::UnboundedReceiver<WriterMsg>,
    retry: StateRetry,
) -> Result<()> {
    let rule = Arc::new(Mutex::new(ModuleRule::new(
        lock(&inner.state).policy.module().clone(),
    )));
    let now = inner.clock.now_ms();
    let (reader, reader_rule) = (file.clone(), rule.clone());
    let (loaded, events) = tokio::task::spawn_blocking(move || {
        let mut events = Vec::new();
        let loaded = reader.load(&mut *lock(&reader_rule), now, &mut events);
        (loaded, events)
    })
    .await
    .map_err(|e| HostError::Abi(format!("the state-file reader failed: {e}")))?;
    events.into_iter().for_each(|e| inner.publish(e));
    match loaded {
        Ok(Some(state)) => {
            let state = serde_json::from_value(state)
                .map_err(|e| HostError::Abi(format!("a restore state: {e}")))?;
            inner.feed(rota_core::Input::Restore { now, state })?;
        }
        Ok(None) => {}
        Err(error) => {
            let name = match error {
                WriteError::Unreadable { .. } => "stateFileUnreadable",
                _ => "stateFileWriteFailed",
            };
            let path = file.path().display().to_string();
            inner.publish(
                Event::host(
                    Level::Warn,
                    name,
                    format!("{error}: starting without its exclusions; writes wait until it can be read"),
                )
                .with("path", path)
                .with("error", error.to_string()),
            );
        }
    }
    let (weak, clock) = (Arc::downgrade(inner), inner.clock);
    inner.spawn(writer(file, rule, rx, weak, clock, retry));
    Ok(())
}
