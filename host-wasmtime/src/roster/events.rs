//! Events: every one to `tracing` and to subscribers, the host's kept for callers
//! that subscribe late (a remote log's core events carry the `seq` that caused them);
//! the events a build or a reload raises about the document; and the exclusion a
//! report put in force, read from its `excluded` event.

use rota_core::{Exclusion, Level, Output};
use serde_json::Value;

use super::state::{lock, Inner};
use crate::event::{Event, Source};
use crate::output;
use crate::runtime::PolicyRuntime;
use crate::telemetry;

const HOST_EVENTS_KEPT: usize = 256;

impl Inner {
    pub(crate) fn publish(&self, event: Event) {
        event.log();
        if event.source == Source::Host {
            let mut kept = lock(&self.host_events);
            if kept.len() == HOST_EVENTS_KEPT {
                kept.pop_front();
            }
            kept.push_back(event.clone());
        }
        let _ = self.events.send(event);
    }

    /// A core event (`seq`: the remote log's entry that caused it).
    pub(crate) fn publish_core(&self, event: Event, seq: Option<u64>) {
        if event.name == "excluded" {
            telemetry::excluded(event.text("kind").unwrap_or("?"));
        }
        self.publish(match seq {
            Some(seq) => event.with("seq", seq),
            None => event,
        })
    }
}

/// The exclusion a report put in force on `executor`, from its `excluded` event. (An
/// output that cannot be read was published as `outputUnreadable` when the step's
/// outputs were carried out; here it is passed over.)
pub(crate) fn exclusion_from(outputs: &[Value], executor: &str) -> Option<Exclusion> {
    let fields = outputs.iter().find_map(|raw| {
        let Output::Event { name, fields, .. } = output::read(raw).ok()? else {
            return None;
        };
        let on_executor = fields.get("executor").and_then(Value::as_str) == Some(executor);
        (name == "excluded" && on_executor).then_some(fields)
    })?;
    Some(Exclusion {
        id: executor.to_string(),
        reason: fields.get("reason")?.as_str()?.to_string(),
        kind: serde_json::from_value(fields.get("kind")?.clone()).ok()?,
        until: fields.get("until").and_then(Value::as_u64),
    })
}

/// The core's `check` warnings: a literal secret in an executor's `env` (naming its
/// place, never the value), a misspelt field ("did you mean"): a warning event each,
/// under the name the core gives it (`literalSecret`, `unknownField`, `unusedAccount`). The document
/// still runs.
pub(crate) fn secret_warnings(
    policy: &mut PolicyRuntime,
    document: &Value,
    options: &Value,
) -> Vec<Event> {
    let Ok(check) = policy.check(document, options) else {
        return Vec::new();
    };
    check
        .warnings
        .into_iter()
        .map(|w| {
            Event::host(Level::Warn, &w.event, format!("roster: {}", w.message))
                .with("path", w.path)
        })
        .collect()
}

/// `--executors` named ids the roster does not have: ignored, and said.
pub(crate) fn narrow_warning(warning: &rota_core::Violation) -> Event {
    Event::host(Level::Warn, "narrowIgnored", warning.message.clone())
}
