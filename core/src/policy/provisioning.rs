//! Provisioning: machine creation, its pauses after failures, abandoned creations.

use serde::Serialize;
use serde_json::{json, Value};

use crate::classify::excerpt;
use crate::duration::format_duration;
use crate::protocol::{Level, Output};
use crate::sorted;

use super::keys::timer_key;
use super::queue::Creating;
use super::Policy;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Pause {
    pub(super) failures: u32,
    pub(super) until: u64,
    pub(super) message: String,
    pub(super) blocked: bool,
}

impl Policy {
    pub(super) fn machine_created(&mut self, id: &str, hold: Value) {
        if let Some(executor) = sorted::remove(&mut self.abandoned, id) {
            self.outputs.push_back(Output::DeleteMachine {
                executor: executor.clone(),
                hold,
            });
            self.event(
                Level::Info,
                "machineDiscarded",
                format!(
                    "the request stopped waiting while its machine was created on {executor}; the machine is deleted"
                ),
                vec![("request", json!(id)), ("executor", json!(executor))],
            );
            return;
        }
        // Only a request whose machine is being created: it is in no queue.
        let Some(Creating { executor, passed }) = self
            .requests
            .get(id)
            .and_then(|q| q.creating.as_deref())
            .cloned()
        else {
            return;
        };
        self.dequeue(id);
        let Some(req) = self.requests.remove(id) else {
            return;
        };
        if let Some(e) = self.exec_index.get(&executor) {
            if self.execs[e].rt.pause.is_some() {
                self.unready(e);
                if let Some(p) = self.execs[e].rt.pause.take() {
                    self.pause_ends.remove(&timer_key(p.until, e));
                }
                self.ready_up(e);
                self.dirty.push(e);
            }
        }
        self.open_lease(req, executor, Some(hold), passed);
    }

    pub(super) fn machine_failed(&mut self, id: &str, message: &str) {
        let executor = match sorted::remove(&mut self.abandoned, id) {
            Some(executor) => executor,
            None => {
                let Some(req) = self.requests.get_mut(id) else {
                    return;
                };
                let Some(creating) = req.creating.take() else {
                    return;
                };
                let executor = creating.executor;
                // Back in its place in the queue: its key is unchanged.
                let role = req.role;
                let r = self.role_at.get(role as usize).copied().flatten();
                if let Some(e) = self.exec_index.get(&executor) {
                    self.free_slot(e, r);
                    self.leave_if_drained(e);
                }
                // The grant pass puts it back in its place, or grants it elsewhere.
                self.retry.push(id.to_string());
                executor
            }
        };
        let Some(e) = self.exec_index.get(&executor) else {
            return;
        };
        self.unready(e);
        let failures = self.execs[e].rt.pause.as_ref().map_or(0, |p| p.failures) + 1;
        let doubling = 1u64 << (failures - 1).min(20);
        let delay = self
            .options
            .provision_first_pause_ms
            .saturating_mul(doubling)
            .min(self.options.provision_max_pause_ms);
        if let Some(p) = self.execs[e].rt.pause.take() {
            self.pause_ends.remove(&timer_key(p.until, e));
        }
        let until = self.now + delay;
        self.execs[e].rt.pause = Some(Pause {
            failures,
            until,
            message: message.to_string(),
            blocked: true,
        });
        self.pause_ends.insert(timer_key(until, e), 0);
        self.ready_up(e);
        self.event(
            Level::Warn,
            "provisionPaused",
            format!(
                "{executor} could not create a machine ({}); its requests keep waiting, and it tries again after {} (failure {failures})",
                excerpt(message, 160),
                format_duration(delay)
            ),
            vec![
                ("executor", json!(executor)),
                ("failures", json!(failures)),
                ("retryAt", json!(until)),
            ],
        );
    }

    pub(super) fn end_pause(&mut self, e: usize) {
        self.unready(e);
        let Some(p) = self.execs[e].rt.pause.as_mut() else {
            return;
        };
        p.blocked = false;
        let failures = p.failures;
        self.ready_up(e);
        self.dirty.push(e);
        let id = self.execs[e].spec.id.clone();
        self.event(
            Level::Info,
            "provisionResumed",
            format!("{id}'s pause ended; it creates machines again"),
            vec![("executor", json!(id)), ("failures", json!(failures))],
        );
    }
}
