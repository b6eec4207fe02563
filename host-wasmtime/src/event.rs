//! Events: the core's (`event` outputs) and the host's own (a guest trap, a restore,
//! a corrupt state file, a probe that cannot run ...), one shape for both, logged
//! through `tracing` (targets `rota::core` and `rota::host`) and broadcast to
//! subscribers.

use std::collections::BTreeMap;

use rota_core::{Fields, Level};
use serde::Serialize;
use serde_json::Value;

/// Who said it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// The core (an `event` output).
    Core,
    /// The host itself.
    Host,
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Who said it.
    pub source: Source,
    /// How much it matters.
    pub level: Level,
    /// A stable name: the core's (`granted`, `excluded`, `back` ...) or the host's
    /// (`guestFailed`, `guestRestored`, `stateFileCorrupt`, `probeUnsupported`,
    /// `stateFileWriteFailed`, `stateFileUnreadable`, `policySwapped`, `policySwapRefused`,
    /// `outputUnreadable` ...).
    pub name: String,
    /// What happened, for people.
    pub message: String,
    /// The details, by the core's names (`executor`, `lease`, `until` ...).
    pub fields: BTreeMap<String, Value>,
}

impl Event {
    /// A host event.
    pub fn host(level: Level, name: &str, message: impl Into<String>) -> Event {
        Event {
            source: Source::Host,
            level,
            name: name.to_string(),
            message: message.into(),
            fields: BTreeMap::new(),
        }
    }

    /// The event with one more field.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Event {
        self.fields.insert(key.to_string(), value.into());
        self
    }

    /// The core's `event` output (`Output::Event`'s parts) as an event.
    pub fn core(level: Level, name: &str, message: String, fields: &Fields) -> Event {
        Event {
            source: Source::Core,
            level,
            name: name.to_string(),
            message,
            fields: fields
                .iter()
                .map(|(key, value)| (key.to_string(), value.clone()))
                .collect(),
        }
    }

    /// A field as text, when it is one.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.fields.get(key).and_then(Value::as_str)
    }

    /// A field as a whole number, when it is one.
    pub fn number(&self, key: &str) -> Option<u64> {
        self.fields.get(key).and_then(Value::as_u64)
    }

    /// Logs it through `tracing` (targets `rota::core` and `rota::host`): the name as
    /// `name`, the message, and each field as its own key with the core's name
    /// (`executor`, `lease`, `until` ...). Text fields are recorded as `&str`, numbers
    /// as `u64`; any other field (a list, say) goes into `extra`, as JSON.
    pub fn log(&self) {
        let extra = self.extra();
        let extra = extra.as_deref();
        macro_rules! emit {
            ($target:literal, $level:expr) => {
                tracing::event!(
                    target: $target,
                    $level,
                    name = %self.name,
                    executor = self.text("executor"),
                    request = self.text("request"),
                    role = self.text("role"),
                    label = self.text("label"),
                    kind = self.text("kind"),
                    reason = self.text("reason"),
                    error = self.text("error"),
                    path = self.text("path"),
                    url = self.text("url"),
                    call = self.text("call"),
                    input = self.text("input"),
                    source = self.text("source"),
                    module = self.text("module"),
                    from = self.text("from"),
                    to = self.text("to"),
                    "movedTo" = self.text("movedTo"),
                    lease = self.number("lease"),
                    until = self.number("until"),
                    since = self.number("since"),
                    count = self.number("count"),
                    passed = self.number("passed"),
                    ahead = self.number("ahead"),
                    running = self.number("running"),
                    slots = self.number("slots"),
                    failures = self.number("failures"),
                    replayed = self.number("replayed"),
                    "retryAt" = self.number("retryAt"),
                    "thenUntil" = self.number("thenUntil"),
                    extra,
                    "{}",
                    self.message
                )
            };
        }
        match (self.source, self.level) {
            (Source::Core, Level::Debug) => emit!("rota::core", tracing::Level::DEBUG),
            (Source::Core, Level::Info) => emit!("rota::core", tracing::Level::INFO),
            (Source::Core, Level::Warn) => emit!("rota::core", tracing::Level::WARN),
            (Source::Host, Level::Debug) => emit!("rota::host", tracing::Level::DEBUG),
            (Source::Host, Level::Info) => emit!("rota::host", tracing::Level::INFO),
            (Source::Host, Level::Warn) => emit!("rota::host", tracing::Level::WARN),
        }
    }

    /// The fields [`Event::log`] has no key of their own for, as JSON (`None`: none).
    fn extra(&self) -> Option<String> {
        let rest: BTreeMap<&str, &Value> = self
            .fields
            .iter()
            .filter(|(key, value)| {
                let keyed = if TEXT_KEYS.contains(&key.as_str()) {
                    value.is_string()
                } else if NUMBER_KEYS.contains(&key.as_str()) {
                    value.is_u64()
                } else {
                    false
                };
                !keyed
            })
            .map(|(key, value)| (key.as_str(), value))
            .collect();
        (!rest.is_empty()).then(|| serde_json::to_string(&rest).unwrap_or_default())
    }
}

/// The fields [`Event::log`] records as text under their own key.
const TEXT_KEYS: [&str; 16] = [
    "executor", "request", "role", "label", "kind", "reason", "error", "path", "url", "call",
    "input", "source", "module", "from", "to", "movedTo",
];

/// The fields [`Event::log`] records as numbers under their own key.
const NUMBER_KEYS: [&str; 12] = [
    "lease",
    "until",
    "since",
    "count",
    "passed",
    "ahead",
    "running",
    "slots",
    "failures",
    "replayed",
    "retryAt",
    "thenUntil",
];
