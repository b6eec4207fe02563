//! Machines and preflights: the [`Provisioner`](super::provisioner::Provisioner)'s
//! work for a `createMachine`, `deleteMachine` or `preflight` output, its answer
//! appended as the next input; and the startup preflight the builder waits for.

use std::sync::Arc;

use rota_core::Input;
use serde_json::Value;

use super::state::{lock, Inner};

impl Inner {
    pub(crate) fn spawn_create(self: &Arc<Inner>, executor: String, request: String) {
        let weak = Arc::downgrade(self);
        let provisioner = self.provisioner.clone();
        self.spawn(async move {
            let result = provisioner.create_machine(&executor, &request).await;
            let Some(inner) = weak.upgrade() else { return };
            let now = inner.now_ms();
            let input = match result {
                Ok(hold) => Input::MachineCreated {
                    now,
                    id: request,
                    hold,
                    checked: None,
                },
                Err(message) => Input::MachineFailed {
                    now,
                    id: request,
                    message,
                    reason: None,
                },
            };
            inner
                .submit_result(input, None, "machineResultRejected")
                .await;
        });
    }

    /// Deletes a released lease's machine; with a `lease`, the core holds its slot
    /// until the answer (`machineDeleted`).
    pub(crate) fn spawn_delete(
        self: &Arc<Inner>,
        executor: String,
        hold: Value,
        lease: Option<u64>,
    ) {
        let weak = Arc::downgrade(self);
        let provisioner = self.provisioner.clone();
        self.spawn(async move {
            let result = provisioner.delete_machine(&executor, hold).await;
            let (Some(lease), Some(inner)) = (lease, weak.upgrade()) else {
                return;
            };
            let input = Input::MachineDeleted {
                now: inner.now_ms(),
                lease,
                ok: result.is_ok(),
                error: result.err(),
            };
            inner
                .submit_result(input, None, "machineDeletedRejected")
                .await;
        });
    }

    pub(crate) fn spawn_preflight(self: &Arc<Inner>, executor: String) {
        let weak = Arc::downgrade(self);
        let provisioner = self.provisioner.clone();
        self.spawn(async move {
            let result = provisioner.preflight(&executor).await;
            let Some(inner) = weak.upgrade() else { return };
            let input = Input::PreflightResult {
                now: inner.now_ms(),
                executor: executor.clone(),
                ok: result.is_ok(),
                error: result.err(),
            };
            inner
                .submit_result(input, None, "preflightResultRejected")
                .await;
            // The start's last preflight passed (a failure ended the start already).
            let mut st = lock(&inner.state);
            if let Some(starting) = st.starting.as_mut() {
                starting.awaiting.remove(&executor);
                if starting.awaiting.is_empty() {
                    if let Some(done) = st.starting.take().and_then(|s| s.done) {
                        let _ = done.send(Ok(()));
                    }
                }
            }
        });
    }
}
