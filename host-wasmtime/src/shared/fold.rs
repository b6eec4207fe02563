//! The fold: one log entry at a time into the replica, exactly as `sql/PROTOCOL.md`
//! says (the bytes it feeds, who acts on which output), settling this instance's calls;
//! and the fence, which ends them when the instance may have been expired.

use std::sync::Arc;

use rota_core::{Input, Level, Output};
use serde_json::Value;

use super::driver::Shared;
use super::log::{LogEntry, LogStore};
use super::replica::{
    entry_kind, entry_of, fold_bytes, Fence, FenceKind, Mine, Outcome, Queued, State,
};
use crate::error::HostError;
use crate::event::Event;
use crate::output;

impl<S: LogStore + 'static> Shared<S> {
    /// Folds one entry (the next seq) and acts on what is this instance's to act on.
    pub(super) fn fold_entry(self: &Arc<Self>, st: &mut State, e: &LogEntry) {
        // A paused process's timers run late: past the TTL, the log may have expired
        // this instance further on, so nothing folded now may settle a caller.
        self.fence_if_lapsed(st, "checked before folding the next entry");
        let mine = st.sent.remove(&e.seq).unwrap_or(Mine::Plain);
        st.folded_seq = e.seq;
        let by_me = e.instance == st.instance;
        let kind = entry_kind(&e.entry);
        let kind_name = kind.as_ref().map(|(k, _)| k.as_str());
        if kind_name == Some("genesis") {
            // Only seq 1 counts; a racing instance's later genesis is skipped.
            self.record_hash(st, e.seq);
            return;
        }
        if kind_name == Some("expireOwner") && !by_me {
            let owner = kind.as_ref().and_then(|(_, o)| o.as_deref());
            if owner == Some(st.instance.as_str()) {
                st.expired = true;
                let reason = format!(
                    "the log expired this instance ({}) at seq {} (appended by {})",
                    st.instance, e.seq, e.instance
                );
                self.fence(st, FenceKind::Expired, reason);
            }
        }
        let bytes = fold_bytes(e.now, &e.entry);
        let result = st.policy.step_value(bytes.as_bytes());
        for event in st.policy.take_events() {
            self.publish(event.with("seq", e.seq));
        }
        let result = match result {
            Ok(result) => result,
            Err(error) => {
                // The guest failed and was restored to before this entry: as rejected.
                self.rejected(st, e, mine, error);
                self.record_hash(st, e.seq);
                return;
            }
        };
        if let Some(error) = result.get("error") {
            let error = HostError::from_policy_json(error);
            if kind_name == Some("version") && error.code() == Some("UNSUPPORTED_VERSION") {
                let reason = format!(
                    "the log's version entry at seq {} needs a newer policy module: {error}",
                    e.seq
                );
                self.fence(st, FenceKind::Version, reason);
            }
            self.rejected(st, e, mine, error);
            self.record_hash(st, e.seq);
            return;
        }
        let before = st.wake_at;
        st.wake_at = result.get("wakeAt").and_then(Value::as_u64);
        if st.wake_at != before {
            st.tick_sent = None;
            self.leader_wake.notify_one();
        }
        if kind_name == Some("reload") {
            st.invalidate_specs();
        }
        let outputs = result
            .get("outputs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let expiry = kind_name == Some("expireOwner");
        for output in &outputs {
            self.act(st, e, by_me, expiry, output);
        }
        if let Mine::Call(tx) = mine {
            self.fence_if_lapsed(st, "checked before settling a call");
            let _ = match &st.fence {
                Some(fence) => tx.send(Err(fence.error())),
                None => tx.send(Ok(outputs)),
            };
        }
        self.record_hash(st, e.seq);
    }

    fn record_hash(&self, st: &mut State, seq: u64) {
        if st.hashes.is_some() {
            let hash = st
                .policy
                .state_hash()
                .unwrap_or_else(|e| format!("error: {e}"));
            if let Some(hashes) = st.hashes.as_mut() {
                hashes.push((seq, hash));
            }
        }
    }

    fn rejected(&self, st: &mut State, e: &LogEntry, mine: Mine, error: HostError) {
        match mine {
            Mine::Request(id) => {
                st.orphans.remove(&id);
                match st.requests.remove(&id) {
                    Some(tx) => {
                        let _ = tx.send(Err(error));
                    }
                    None => self.input_rejected(e, &error),
                }
            }
            Mine::Call(tx) => {
                let _ = tx.send(Err(error));
            }
            Mine::Plain => self.input_rejected(e, &error),
        }
    }

    fn input_rejected(&self, e: &LogEntry, error: &HostError) {
        self.publish(
            Event::host(Level::Debug, "inputRejected", error.to_string())
                .with("seq", e.seq)
                .with("instance", e.instance.clone()),
        );
    }

    /// One output of entry `e`: acted on when it is this instance's (PROTOCOL.md,
    /// "Who acts on an output"). Caller outputs owned by other instances are theirs.
    fn act(self: &Arc<Self>, st: &mut State, e: &LogEntry, by_me: bool, expiry: bool, o: &Value) {
        let output = match output::read(o) {
            Ok(output) => output,
            Err(unreadable) => {
                self.publish(unreadable.with("seq", e.seq));
                return;
            }
        };
        let instance = st.instance.clone();
        let mine = |owner: &Option<String>| owner.as_deref() == Some(instance.as_str());
        match output {
            Output::Granted {
                request,
                lease,
                executor,
                role,
                hold,
                owner,
                ..
            } if mine(&owner) => {
                // (A fence moves every awaited request to `orphans`: released below.)
                self.fence_if_lapsed(st, "checked before settling a grant");
                st.orphans.remove(&request);
                let outcome = Outcome::Granted {
                    lease,
                    executor,
                    role,
                    hold,
                };
                let delivered = match st.requests.remove(&request) {
                    Some(tx) => tx.send(Ok(outcome)).is_ok(),
                    None => false,
                };
                if !delivered {
                    // Nobody awaits it (given up, or fenced meanwhile): give it back.
                    if let Ok(entry) = entry_of(&Input::Release { now: 0, lease }) {
                        st.queue(Queued::plain(entry));
                        self.queued.notify_one();
                    }
                }
            }
            Output::Exhausted {
                request,
                role,
                reasons,
                owner,
            } if mine(&owner) => st.settle(&request, Outcome::Exhausted { role, reasons }),
            Output::TimedOut {
                request,
                reasons,
                owner,
            } if mine(&owner) => st.settle(&request, Outcome::TimedOut { reasons }),
            Output::Unavailable { request, owner } if mine(&owner) => {
                st.settle(&request, Outcome::Unavailable)
            }
            Output::Cancelled { request, owner } if mine(&owner) => {
                st.settle(&request, Outcome::Cancelled)
            }
            Output::Granted { .. }
            | Output::Exhausted { .. }
            | Output::TimedOut { .. }
            | Output::Unavailable { .. }
            | Output::Cancelled { .. } => {}
            // For people (`explain`); nothing to act on.
            Output::Waiting { .. } => {}
            Output::CreateMachine {
                request,
                executor,
                owner,
            } => {
                if mine(&owner) || (owner.is_none() && by_me) {
                    self.spawn_create(executor, request);
                }
            }
            Output::DeleteMachine {
                executor,
                hold,
                lease,
                owner,
            } => {
                let acts = if expiry || owner.is_none() {
                    by_me
                } else {
                    mine(&owner)
                };
                if acts {
                    self.spawn_delete(executor, Some(hold), lease);
                }
            }
            Output::Probe { executor, url } => {
                if let Some(epoch) = st.epoch {
                    if st.probing.insert(executor.clone()) {
                        self.spawn_probe(executor, url, epoch);
                    }
                }
            }
            Output::Event {
                level,
                name,
                message,
                fields,
            } => self.publish(Event::core(level, &name, message, &fields).with("seq", e.seq)),
            // The log is the persistence.
            Output::Persist { .. } => {}
            // The genesis turns preflight off: a shared roster does not preflight.
            Output::Preflight { .. } | Output::StartFailed { .. } => {}
        }
    }

    /// Fences this instance when the TTL has passed since its last good heartbeat was
    /// sent (the log may have expired it since): checked before every fold and every
    /// settle, and when a heartbeat answers. True when it is fenced (now or before).
    pub(super) fn fence_if_lapsed(&self, st: &mut State, why: &str) -> bool {
        let ttl = self.config.ttl;
        let silent = st.beat_sent.elapsed();
        if st.fence.is_none() && silent >= ttl {
            let reason = format!(
                "no heartbeat succeeded for {} ms (the last good one was sent {} ms ago; {why}, folded through seq {})",
                ttl.as_millis(),
                silent.as_millis(),
                st.folded_seq
            );
            self.fence(st, FenceKind::Lapsed, reason);
        }
        st.fence.is_some()
    }

    /// Fences this instance: every pending call fails `FENCED`, new ones too.
    pub(super) fn fence(&self, st: &mut State, kind: FenceKind, reason: String) {
        if let Some(fence) = st.fence.as_mut() {
            // An expiry or a version refusal outranks a lapse: rejoining must know.
            if matches!(kind, FenceKind::Expired | FenceKind::Version) {
                fence.kind = kind;
            }
            return;
        }
        let fence = Fence {
            kind,
            reason,
            since_ms: self.db_now(),
        };
        for (id, tx) in std::mem::take(&mut st.requests) {
            st.orphans.insert(id);
            let _ = tx.send(Err(fence.error()));
        }
        for mine in st.sent.values_mut() {
            if let Mine::Call(_) = mine {
                if let Mine::Call(tx) = std::mem::replace(mine, Mine::Plain) {
                    let _ = tx.send(Err(fence.error()));
                }
            }
        }
        let queue = std::mem::take(&mut st.queue);
        for queued in queue {
            match queued.mine {
                Mine::Call(tx) => {
                    let _ = tx.send(Err(fence.error()));
                }
                // Its call failed above; it never reaches the log.
                Mine::Request(id) => {
                    st.orphans.remove(&id);
                }
                Mine::Plain if queued.epoch.is_some() => {
                    if let Some(tx) = queued.on_append {
                        let _ = tx.send(Err("fenced".into()));
                    }
                }
                Mine::Plain => st.queue.push_back(queued),
            }
        }
        st.epoch = None;
        self.publish(
            Event::host(Level::Warn, "fenced", fence.error().to_string())
                .with("instance", st.instance.clone())
                .with("reason", fence.reason.clone()),
        );
        st.fence = Some(fence);
    }
}
