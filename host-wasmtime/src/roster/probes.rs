//! Health probes: an HTTP GET for a `probe` output, on whoever leads (the memory
//! log's one instance, a remote log's leader), its result appended as the next
//! input; and what a new leader redoes: the probes its replica has in flight.

use std::sync::Arc;

use rota_core::{Input, Level};
use serde_json::Value;

use super::state::{lock, Duty, Inner, State};
use crate::event::Event;
use crate::probe::{probe, probe_with, ProbeOutcome};
use crate::telemetry;

impl Inner {
    pub(crate) fn spawn_probe(self: &Arc<Inner>, executor: String, url: String, duty: Duty) {
        let weak = Arc::downgrade(self);
        let timeout = self.probe_timeout;
        let tls = self.probe_tls.clone();
        self.spawn(async move {
            let outcome = match &tls {
                Some(tls) => probe_with(&url, timeout, tls).await,
                None => probe(&url, timeout).await,
            };
            let Some(inner) = weak.upgrade() else { return };
            if let ProbeOutcome::Unsupported(reason) = &outcome {
                if lock(&inner.state).unsupported_reported.insert(executor.clone()) {
                    inner.publish(
                        Event::host(
                            Level::Warn,
                            "probeUnsupported",
                            format!("cannot probe {executor}'s health URL {url}: {reason}; it counts as down"),
                        )
                        .with("executor", executor.clone())
                        .with("url", url.clone()),
                    );
                }
            }
            telemetry::probed(&executor, outcome.is_up());
            if duty == Duty::Local {
                lock(&inner.state).probing.remove(&executor);
            }
            let input = Input::ProbeResult {
                now: inner.now_ms(),
                executor: executor.clone(),
                up: outcome.is_up(),
            };
            inner
                .submit_result(input, Some(duty), "probeResultRejected")
                .await;
            if duty != Duty::Local {
                lock(&inner.state).probing.remove(&executor);
            }
        });
    }

    /// A new leader's first duty: the probes its replica has in flight (their results
    /// are not in the log), run again.
    #[cfg_attr(not(feature = "shared"), allow(dead_code))]
    pub(crate) fn redo_probes(self: &Arc<Inner>, st: &mut State, duty: Duty) {
        let Ok(state) = st.policy.export_state() else {
            return;
        };
        let in_flight: Vec<String> = match state.get("runtime") {
            Some(Value::Array(pairs)) => pairs
                .iter()
                .filter_map(|pair| {
                    let id = pair.get(0)?.as_str()?;
                    let flying = pair.get(1)?.get("probeInFlight")?.as_bool()?;
                    flying.then(|| id.to_string())
                })
                .collect(),
            Some(Value::Object(map)) => map
                .iter()
                .filter(|(_, r)| r.get("probeInFlight").and_then(Value::as_bool) == Some(true))
                .map(|(id, _)| id.clone())
                .collect(),
            _ => Vec::new(),
        };
        for executor in in_flight {
            if let Some(url) = st.spec(&executor, "").health.clone() {
                if st.probing.insert(executor.clone()) {
                    self.spawn_probe(executor, url, duty);
                }
            }
        }
    }
}
