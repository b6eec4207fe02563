//! The state file: the roster seed's format, `{"version": 1, "exclusions": [...]}`,
//! shared between rosters.
//!
//! - Written atomically: a temporary file beside it, fsync, rename, fsync the folder.
//! - A `persist` output replaces the entries whose id is in its `ids` and keeps
//!   everyone else's (other rosters sharing the file) verbatim, except those that have
//!   expired, which are dropped as the seed drops them on load. `run` exclusions are
//!   never written.
//! - A corrupt file (not JSON, another version, entries without an id) is renamed
//!   aside (`NAME.corrupt-<epoch ms>`) with an event, and the roster starts clean:
//!   never a crash.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rota_core::{Exclusion, ExclusionKind, Level, PersistedState};
use serde_json::{json, Value};

use crate::event::Event;

/// The state file's format version.
pub const STATE_VERSION: u64 = 1;

/// Writes `bytes` to `path` so that readers see the old file or the new one, never a
/// part: temp file in the same folder, fsync, rename over, fsync the folder.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "state".into());
    let temp = dir.join(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, path)?;
        // The rename is durable once the folder is synced (best effort: not every
        // platform opens folders).
        if let Ok(folder) = std::fs::File::open(&dir) {
            let _ = folder.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// What a state file holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Contents {
    /// Every entry as written (objects with a string `id`).
    pub entries: Vec<Value>,
}

/// Why a file is not a state file.
#[derive(Debug, Clone, PartialEq)]
pub struct Corrupt(pub String);

impl Contents {
    /// Reads a state file's text.
    pub fn parse(text: &str) -> Result<Contents, Corrupt> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| Corrupt(format!("not JSON: {e}")))?;
        let version = value.get("version").and_then(Value::as_u64);
        if version != Some(STATE_VERSION) {
            return Err(Corrupt(format!(
                "version {} (this host reads version {STATE_VERSION})",
                value
                    .get("version")
                    .map_or("missing".into(), Value::to_string)
            )));
        }
        let entries = match value.get("exclusions") {
            None => Vec::new(),
            Some(Value::Array(entries)) => entries.clone(),
            Some(_) => return Err(Corrupt("`exclusions` is not an array".into())),
        };
        for (index, entry) in entries.iter().enumerate() {
            if entry.get("id").and_then(Value::as_str).is_none() {
                return Err(Corrupt(format!("exclusions[{index}] has no string `id`")));
            }
        }
        Ok(Contents { entries })
    }

    /// The entries this host can restore (the core skips run, expired and unknown ones).
    pub fn state(&self) -> PersistedState {
        PersistedState {
            version: STATE_VERSION as u32,
            exclusions: self
                .entries
                .iter()
                .filter_map(|entry| serde_json::from_value::<Exclusion>(entry.clone()).ok())
                .collect(),
        }
    }

    /// Applies one `persist` output: entries of `ids` replaced by `exclusions`
    /// (without `run` ones); others kept unless expired at `now_ms`.
    pub fn apply(&mut self, ids: &[String], exclusions: &[Exclusion], now_ms: u64) {
        let mut kept: Vec<Value> = std::mem::take(&mut self.entries)
            .into_iter()
            .filter(|entry| {
                let id = entry.get("id").and_then(Value::as_str).unwrap_or_default();
                !ids.iter().any(|i| i == id) && !expired(entry, now_ms)
            })
            .collect();
        kept.extend(
            exclusions
                .iter()
                .filter(|e| e.kind != ExclusionKind::Run)
                .filter_map(|e| serde_json::to_value(e).ok()),
        );
        self.entries = kept;
    }

    /// The file's text.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(&json!({
            "version": STATE_VERSION,
            "exclusions": self.entries,
        }))
        .unwrap_or_default();
        text.push('\n');
        text
    }
}

/// An `until` exclusion, or a `manual` one with an end, that has ended.
fn expired(entry: &Value, now_ms: u64) -> bool {
    let kind = entry.get("kind").and_then(Value::as_str);
    let until = entry.get("until").and_then(Value::as_u64);
    match (kind, until) {
        (Some("until"), Some(until)) | (Some("manual"), Some(until)) => until <= now_ms,
        (Some("until"), None) => true,
        _ => false,
    }
}

/// A state file at a path.
#[derive(Debug, Clone)]
pub struct StateFile {
    path: PathBuf,
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

    /// Reads the file. Missing: empty. Corrupt: renamed aside with an event, empty.
    /// Unreadable (permissions ...): an event, empty; the next write will say too.
    pub fn load(&self, now_ms: u64, events: &mut Vec<Event>) -> Contents {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Contents::default(),
            Err(e) => {
                events.push(
                    Event::host(
                        Level::Warn,
                        "stateFileUnreadable",
                        format!("cannot read the state file {}: {e}", self.path.display()),
                    )
                    .with("path", self.path.display().to_string()),
                );
                return Contents::default();
            }
        };
        match Contents::parse(&text) {
            Ok(contents) => contents,
            Err(Corrupt(reason)) => {
                let aside = self.quarantine(now_ms);
                let message = match &aside {
                    Ok(aside) => format!(
                        "the state file {} is corrupt ({reason}); moved aside to {}",
                        self.path.display(),
                        aside.display()
                    ),
                    Err(e) => format!(
                        "the state file {} is corrupt ({reason}) and cannot be moved aside: {e}",
                        self.path.display()
                    ),
                };
                let mut event = Event::host(Level::Warn, "stateFileCorrupt", message)
                    .with("path", self.path.display().to_string())
                    .with("reason", reason);
                if let Ok(aside) = aside {
                    event = event.with("movedTo", aside.display().to_string());
                }
                events.push(event);
                Contents::default()
            }
        }
    }

    fn quarantine(&self, now_ms: u64) -> std::io::Result<PathBuf> {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "state".into());
        let aside = self.path.with_file_name(format!("{name}.corrupt-{now_ms}"));
        std::fs::rename(&self.path, &aside)?;
        Ok(aside)
    }

    /// Applies `persist` outputs in order with one read and one atomic write.
    pub fn persist(
        &self,
        persists: &[(Vec<String>, Vec<Exclusion>)],
        now_ms: u64,
        events: &mut Vec<Event>,
    ) -> std::io::Result<()> {
        let mut contents = self.load(now_ms, events);
        for (ids, exclusions) in persists {
            contents.apply(ids, exclusions, now_ms);
        }
        write_atomic(&self.path, contents.to_json().as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exclusion(id: &str, kind: ExclusionKind, until: Option<u64>) -> Exclusion {
        Exclusion {
            id: id.into(),
            reason: "r".into(),
            kind,
            until,
        }
    }

    #[test]
    fn apply_replaces_ids_keeps_others_drops_run_and_expired() {
        let mut contents = Contents::parse(
            r#"{"version":1,"exclusions":[
                {"id":"a","reason":"x","kind":"health"},
                {"id":"other","reason":"y","kind":"manual","extra":1},
                {"id":"old","reason":"z","kind":"until","until":5}]}"#,
        )
        .unwrap();
        contents.apply(
            &["a".into(), "b".into()],
            &[
                exclusion("b", ExclusionKind::Until, Some(100)),
                exclusion("c", ExclusionKind::Run, None),
            ],
            10,
        );
        let ids: Vec<&str> = contents
            .entries
            .iter()
            .map(|e| e["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["other", "b"]);
        assert_eq!(contents.entries[0]["extra"], 1);
    }

    #[test]
    fn corrupt_files_are_named() {
        assert!(Contents::parse("{").is_err());
        assert!(Contents::parse(r#"{"version":2,"exclusions":[]}"#).is_err());
        assert!(Contents::parse(r#"{"version":1,"exclusions":[{}]}"#).is_err());
        assert!(Contents::parse(r#"{"version":1}"#).is_ok());
    }
}
