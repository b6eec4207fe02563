//! Health probes: an HTTP GET for a `probe` output, on whoever leads (the memory
//! log's one instance, a remote log's leader), its result appended as the next
//! input; and what a new leader redoes: the probes its replica has in flight (the
//! core's `probesInFlight`).

use std::sync::Arc;

use rota_core::{Input, Level};
use serde_json::json;

use super::state::{lock, Inner, State};
use crate::event::Event;
use crate::output;
use crate::probe::{probe, probe_with, ProbeOutcome};
use crate::telemetry;

impl Inner {
    /// Probes `executor`'s health URL; the result is a leader entry at `epoch` on a
    /// remote log.
    pub(crate) fn spawn_probe(
        self: &Arc<Inner>,
        executor: String,
        url: String,
        epoch: Option<u64>,
    ) {
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
            if epoch.is_none() {
                lock(&inner.state).probing.remove(&executor);
            }
            let input = Input::ProbeResult {
                now: inner.now_ms(),
                executor: executor.clone(),
                up: outcome.is_up(),
            };
            inner
                .submit_result(input, epoch, "probeResultRejected")
                .await;
            if epoch.is_some() {
                lock(&inner.state).probing.remove(&executor);
            }
        });
    }

    /// A new leader's first duty: the probes its replica has in flight (their results
    /// are not in the log), run again.
    #[cfg_attr(not(feature = "shared"), allow(dead_code))]
    pub(crate) fn redo_probes(self: &Arc<Inner>, st: &mut State, epoch: u64) {
        let Ok(outputs) = st.policy.query(&json!({ "query": "probesInFlight" })) else {
            return;
        };
        for raw in outputs.as_array().into_iter().flatten() {
            if let Ok(rota_core::Output::Probe { executor, url }) = output::read(raw) {
                if st.probing.insert(executor.clone()) {
                    self.spawn_probe(executor, url, Some(epoch));
                }
            }
        }
    }
}
