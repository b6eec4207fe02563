//! Events: the core's (`event` outputs) and the host's own (a guest trap, a restore,
//! a corrupt state file, a probe that cannot run ...), one shape for both, logged
//! through `tracing` (targets `rota::core` and `rota::host`) and broadcast to
//! subscribers.

use std::collections::BTreeMap;

use rota_core::Level;
use serde::Serialize;
use serde_json::Value;

/// Who said it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    Core,
    Host,
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub source: Source,
    pub level: Level,
    /// A stable name: the core's (`granted`, `excluded`, `back` ...) or the host's
    /// (`guestFailed`, `guestRestored`, `stateFileCorrupt`, `probeUnsupported`,
    /// `stateFileWriteFailed`, `stateFileUnreadable`, `policySwapped`, `policySwapRefused` ...).
    pub name: String,
    pub message: String,
    pub fields: BTreeMap<String, Value>,
}

impl Event {
    pub fn host(level: Level, name: &str, message: impl Into<String>) -> Event {
        Event {
            source: Source::Host,
            level,
            name: name.to_string(),
            message: message.into(),
            fields: BTreeMap::new(),
        }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Event {
        self.fields.insert(key.to_string(), value.into());
        self
    }

    /// An `event` output of the core, if `output` is one.
    pub fn from_output(output: &Value) -> Option<Event> {
        if output.get("type").and_then(Value::as_str) != Some("event") {
            return None;
        }
        let level = output
            .get("level")
            .cloned()
            .and_then(|l| serde_json::from_value(l).ok())
            .unwrap_or(Level::Info);
        let text = |key: &str| {
            output
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let fields = output
            .get("fields")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        Some(Event {
            source: Source::Core,
            level,
            name: text("name"),
            message: text("message"),
            fields,
        })
    }

    /// Logs it through `tracing`.
    pub fn log(&self) {
        let fields = serde_json::to_string(&self.fields).unwrap_or_default();
        macro_rules! emit {
            ($target:literal) => {
                match self.level {
                    Level::Debug => tracing::debug!(target: $target, name = %self.name, fields = %fields, "{}", self.message),
                    Level::Info => tracing::info!(target: $target, name = %self.name, fields = %fields, "{}", self.message),
                    Level::Warn => tracing::warn!(target: $target, name = %self.name, fields = %fields, "{}", self.message),
                }
            };
        }
        match self.source {
            Source::Core => emit!("rota::core"),
            Source::Host => emit!("rota::host"),
        }
    }
}
