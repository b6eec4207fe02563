//! Flows of provisioning: machines created or failed, creations abandoned, and
//! pauses that end.

use crate::classify::excerpt;
use crate::duration::format_duration;
use crate::protocol::{Level, Output};
use crate::sorted::{self};
use crate::time::iso;
use serde_json::{json, Value};

use super::events::EventName;
use super::keys::shared;
use super::provisioning::{Pause, CHECK_REASON, DEFAULT_PAUSE_REASON, MAX_PAUSE_DOUBLINGS};
use super::requests::Creating;
use super::Policy;

impl Policy {
    pub(super) fn machine_created(&mut self, id: &str, hold: Value, checked: Option<Value>) {
        if let Some(executor) = sorted::remove(&mut self.provisioning.abandoned, id) {
            let owner = sorted::remove(&mut self.provisioning.abandoned_owners, id);
            self.push_output(Output::DeleteMachine {
                executor: executor.clone(),
                hold,
                lease: None,
                owner,
            });
            self.event(
                Level::Info,
                EventName::MachineDiscarded,
                format!(
                    "the request stopped waiting while its machine was created on {executor}; the machine is deleted"
                ),
                vec![("request", json!(id)), ("executor", json!(executor))],
            );
            return;
        }
        // Only a request whose machine is being created: it is in no queue.
        let Some(Creating { executor, passed }) = self
            .queue
            .requests
            .get(id)
            .and_then(|q| q.creating.as_deref())
            .cloned()
        else {
            debug_assert!(false, "machine_created: the request was checked");
            return;
        };
        self.dequeue(id);
        let Some(req) = self.queue.requests.remove(id) else {
            debug_assert!(false, "machine_created: the request is stored");
            return;
        };
        let place = self.roster.index.get(&executor);
        if let Some(e) = place {
            if self.roster.executors[e].runtime.pause.is_some() {
                self.roster.unready(e);
                if let Some(p) = self.roster.executors[e].runtime.pause.take() {
                    self.provisioning.untime_pause(e, p.until);
                }
                self.roster.forget_reports();
                self.roster.ready_up(e);
                self.roster.dirty.push(e);
            }
        }
        if checked.is_some() {
            // The creation checked the executor: the seed records a passed preflight.
            self.record_preflight(&executor, true, None);
        }
        self.open_lease(req, shared(executor), place, Some(hold), passed, None);
    }

    pub(super) fn machine_failed(&mut self, id: &str, message: &str, reason: Option<String>) {
        let executor = match sorted::remove(&mut self.provisioning.abandoned, id) {
            Some(executor) => {
                sorted::remove(&mut self.provisioning.abandoned_owners, id);
                // The request stopped waiting first: the seed interrupts the creation,
                // so it never sees this failure, and the executor does not pause.
                self.event(
                    Level::Info,
                    EventName::MachineFailedIgnored,
                    format!(
                        "a machine creation on {executor} failed after its request stopped waiting ({}); {executor} does not pause",
                        excerpt(message, 160)
                    ),
                    vec![("executor", json!(executor)), ("request", json!(id))],
                );
                return;
            }
            None => {
                let Some(executor) = self.creation_ends(id) else {
                    return;
                };
                executor
            }
        };
        let reason = reason.unwrap_or_else(|| DEFAULT_PAUSE_REASON.to_string());
        if reason == CHECK_REASON {
            // A failed capability check: the seed records it as a failed preflight.
            self.record_preflight(&executor, false, Some(message.to_string()));
        }
        let Some(e) = self.roster.index.get(&executor) else {
            return;
        };
        self.roster.unready(e);
        let failures = self.roster.executors[e]
            .runtime
            .pause
            .as_ref()
            .map_or(0, |p| p.failures)
            .saturating_add(1);
        let doubling = 1u64 << (failures - 1).min(MAX_PAUSE_DOUBLINGS);
        let delay = self
            .options
            .provision_first_pause_ms
            .saturating_mul(doubling)
            .min(self.options.provision_max_pause_ms);
        if let Some(p) = self.roster.executors[e].runtime.pause.take() {
            self.provisioning.untime_pause(e, p.until);
        }
        self.roster.forget_reports();
        let until = self.now.saturating_add(delay);
        self.roster.executors[e].runtime.pause = Some(Pause {
            failures,
            until,
            message: message.to_string(),
            blocked: true,
            reason: reason.clone(),
            failed_at: self.now,
        });
        self.provisioning.time_pause(e, until);
        self.roster.ready_up(e);
        self.event(
            Level::Warn,
            EventName::ProvisionPaused,
            format!(
                "{executor} could not create a machine ({}); its requests keep waiting, and it tries again after {} (failure {failures})",
                excerpt(message, 160),
                format_duration(delay)
            ),
            vec![
                ("executor", json!(executor)),
                ("failures", json!(failures)),
                ("message", json!(message)),
                ("reason", json!(reason)),
                ("retryAt", json!(iso(until))),
            ],
        );
    }

    /// The machine creation of live request `id` ended without a machine: its slot
    /// frees and the request goes back to its place in the queue. Its executor.
    fn creation_ends(&mut self, id: &str) -> Option<String> {
        let Some(req) = self.queue.requests.get_mut(id) else {
            debug_assert!(false, "creation_ends: the request was checked");
            return None;
        };
        let Some(creating) = req.creating.take() else {
            debug_assert!(false, "creation_ends: the request creates a machine");
            return None;
        };
        let executor = creating.executor;
        // Back in its place in the queue: its key is unchanged.
        let role = req.role;
        let r = self.roster.roles.at.get(role as usize).copied().flatten();
        if let Some(e) = self.roster.index.get(&executor) {
            self.free_slot(e, r);
            self.leave_if_drained(e);
        }
        // The grant pass puts it back in its place, or grants it elsewhere.
        self.queue.retry.push(id.to_string());
        Some(executor)
    }

    /// `dropCreation`: a machine creation nobody will answer (its owner is gone) is
    /// dropped, and unlike `machineFailed` the executor does not pause. An abandoned
    /// creation is forgotten (a machine it made, if any, is left for a sweep); a live
    /// one frees its slot and its request waits again in its place.
    pub(super) fn drop_creation(&mut self, id: &str) {
        if sorted::contains_key(&self.provisioning.abandoned, id) {
            self.forget_abandoned(id);
            return;
        }
        let Some(executor) = self.creation_ends(id) else {
            return;
        };
        self.event(
            Level::Info,
            EventName::CreationDropped,
            format!(
                "the machine creation for request {id} on {executor} is dropped; the request waits again, and {executor} does not pause"
            ),
            vec![("executor", json!(executor)), ("request", json!(id))],
        );
    }

    /// Forgets abandoned creation `id`: its answer will never come.
    pub(super) fn forget_abandoned(&mut self, id: &str) {
        let Some(executor) = sorted::remove(&mut self.provisioning.abandoned, id) else {
            debug_assert!(false, "forget_abandoned: {id} is abandoned");
            return;
        };
        let owner = sorted::remove(&mut self.provisioning.abandoned_owners, id);
        let mut fields = vec![("executor", json!(executor)), ("request", json!(id))];
        if let Some(owner) = owner {
            fields.insert(1, ("owner", json!(owner)));
        }
        self.event(
            Level::Warn,
            EventName::CreationDropped,
            format!(
                "the abandoned machine creation for request {id} on {executor} is dropped; a machine it made, if any, is left for a sweep"
            ),
            fields,
        );
    }

    pub(super) fn end_pause(&mut self, e: usize) {
        let Some(p) = self.roster.executors[e].runtime.pause.as_mut() else {
            debug_assert!(false, "end_pause: a pause timer belongs to a pause");
            return;
        };
        debug_assert!(p.blocked, "end_pause: only a blocked pause has a timer");
        let failures = p.failures;
        self.roster.unready(e);
        if let Some(p) = self.roster.executors[e].runtime.pause.as_mut() {
            p.blocked = false;
        }
        self.roster.forget_reports();
        self.roster.ready_up(e);
        self.roster.dirty.push(e);
        let id = self.roster.executors[e].spec.id.clone();
        self.event(
            Level::Info,
            EventName::ProvisionResumed,
            format!("{id}'s pause ended; it creates machines again"),
            vec![("executor", json!(id)), ("failures", json!(failures))],
        );
    }
}
