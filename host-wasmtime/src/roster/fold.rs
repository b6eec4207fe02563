//! The fold: one input into the core, and the one output dispatcher. Both logs go
//! through it: the memory log folds an input the moment it is appended (one
//! instance: it owns every request and leads); a remote log's driver folds each entry
//! in seq order (`shared`), and this instance acts only on what is its own
//! (sql/PROTOCOL.md, "Who acts on an output").

use std::sync::Arc;

use rota_core::{Input, Level, Output};
use serde_json::Value;

use super::state::{lock, Duty, Inner, Outcome, Queued, State, WriterMsg};
use crate::error::{HostError, Result};
use crate::event::Event;
use crate::output;
use crate::runtime::{PolicyRuntime, Step};
use crate::telemetry;

/// Where an input comes from: the memory log's append, or a remote log's entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct At {
    /// The remote log's seq (events carry it).
    pub seq: Option<u64>,
    /// This instance appended it.
    pub by_me: bool,
    /// It is an `expireOwner` (its machines' deletions are the appender's).
    pub expiry: bool,
}

impl Inner {
    /// Memory log: appends `input` and folds it now, with the follow-ups its outputs
    /// call for; the first input's step.
    pub(crate) fn feed(self: &Arc<Inner>, input: Input) -> Result<Step> {
        let mut st = lock(&self.state);
        if st.member.is_some() {
            // (A remote log's calls append and wait: the shared roster's API.)
            return Err(HostError::Abi(format!(
                "`{}` on a shared roster goes through its log: use SharedRoster's async call",
                input.kind()
            )));
        }
        self.feed_locked(&mut st, input)
    }

    pub(crate) fn feed_locked(self: &Arc<Inner>, st: &mut State, input: Input) -> Result<Step> {
        let mut pending = vec![input];
        let mut first: Option<Result<Step>> = None;
        while !pending.is_empty() {
            let input = pending.remove(0);
            let at = At {
                seq: None,
                by_me: true,
                expiry: false,
            };
            let result = serde_json::to_vec(&input)
                .map_err(|e| HostError::Abi(format!("cannot encode an input: {e}")))
                .and_then(|bytes| self.fold(st, input.kind(), &bytes, at));
            if let (Err(error), Some(_)) = (&result, &first) {
                // A follow-up (an orphaned grant's release) failed: say so.
                self.publish(
                    Event::host(Level::Warn, "followUpFailed", error.to_string())
                        .with("input", input.kind()),
                );
            }
            pending.append(&mut st.follow_ups);
            first.get_or_insert(result);
        }
        first.unwrap_or(Err(HostError::Closed))
    }

    /// An input of this instance's that no caller awaits (a release, a cancel, a
    /// machine's result): folded now on the memory log (its error, said as `what`),
    /// queued for a remote log.
    pub(crate) fn append(self: &Arc<Inner>, st: &mut State, input: Input, what: Option<&str>) {
        match st.member.as_mut() {
            None => {
                let result = self.feed_locked(st, input);
                if let (Err(error), Some(what)) = (result, what) {
                    self.publish(Event::host(Level::Warn, what, error.to_string()));
                }
            }
            Some(member) => match super::entry::entry_of(&input) {
                Ok(entry) => {
                    member.queue.push_back(Queued::plain(entry));
                    if let Some(link) = &self.link {
                        link.queued.notify_one();
                    }
                }
                Err(error) => {
                    self.publish(Event::host(Level::Warn, "entryFailed", error.to_string()))
                }
            },
        }
    }

    /// Folds one input (`bytes`, of kind `kind`) and carries out its outputs.
    pub(crate) fn fold(
        self: &Arc<Inner>,
        st: &mut State,
        kind: &str,
        bytes: &[u8],
        at: At,
    ) -> Result<Step> {
        if matches!(kind, "reload" | "preflightResult") {
            st.invalidate_specs();
        }
        let result = st.policy.step_value(bytes).and_then(|result| {
            if let Some(error) = result.get("error") {
                return Err(HostError::from_policy_json(error));
            }
            let outputs = match result.get("outputs") {
                Some(Value::Array(outputs)) => outputs.clone(),
                _ => return Err(HostError::Abi("a step result without `outputs`".into())),
            };
            let wake_at = result.get("wakeAt").and_then(Value::as_u64);
            Ok(Step { outputs, wake_at })
        });
        for event in st.policy.take_events() {
            self.publish(match at.seq {
                Some(seq) => event.with("seq", seq),
                None => event,
            });
        }
        let step = result?;
        if st.wake_at != step.wake_at {
            st.wake_at = step.wake_at;
            if let Some(member) = st.member.as_mut() {
                member.tick_sent = None;
            }
            self.wake.notify_one();
        }
        for raw in &step.outputs {
            match output::read(raw) {
                Ok(output) => self.act(st, output, raw, at),
                Err(unreadable) => self.publish_core(unreadable, at.seq),
            }
        }
        Ok(step)
    }

    /// Carries out one output when it is this instance's to act on (`raw`: as the
    /// guest wrote it, for what passes through).
    fn act(self: &Arc<Inner>, st: &mut State, output: Output, raw: &Value, at: At) {
        match output {
            Output::Granted {
                request,
                lease,
                executor,
                role,
                hold,
                owner,
                ..
            } if st.owns(owner.as_deref()) => {
                // (A fence ends every awaited request: the grant is released below.)
                self.fence_if_lapsed(st, "checked before settling a grant");
                if let Some(member) = st.member.as_mut() {
                    member.orphans.remove(&request);
                }
                let waiter = st.take_waiter(&request);
                let now = self.now_ms();
                let waited = waiter.as_ref().map(|w| now.saturating_sub(w.requested_at));
                telemetry::granted(&role, &executor, waited);
                let outcome = Outcome::Granted {
                    lease,
                    spec: st.spec(&executor, &role),
                    role,
                    hold,
                };
                let delivered = waiter.is_some_and(|w| w.tx.send(Ok(outcome)).is_ok());
                if !delivered {
                    // Nobody waits any more (the caller gave up): give it back.
                    st.follow_ups.push(Input::Release { now, lease });
                }
            }
            Output::Exhausted {
                request,
                role,
                reasons,
                owner,
            } if st.owns(owner.as_deref()) => {
                st.settle(&request, Ok(Outcome::Exhausted { role, reasons }))
            }
            Output::TimedOut {
                request,
                reasons,
                owner,
            } if st.owns(owner.as_deref()) => {
                st.settle(&request, Ok(Outcome::TimedOut { reasons }))
            }
            Output::Unavailable { request, owner } if st.owns(owner.as_deref()) => {
                st.settle(&request, Ok(Outcome::Unavailable))
            }
            Output::Cancelled { request, owner } if st.owns(owner.as_deref()) => {
                st.settle(&request, Ok(Outcome::Cancelled))
            }
            // Another instance's caller's.
            Output::Granted { .. }
            | Output::Exhausted { .. }
            | Output::TimedOut { .. }
            | Output::Unavailable { .. }
            | Output::Cancelled { .. } => {}
            // The report is for people (`explain`); nothing to do.
            Output::Waiting { .. } => {}
            Output::Probe { executor, url } => {
                if let Some(duty) = st.duty() {
                    if st.probing.insert(executor.clone()) {
                        self.spawn_probe(executor, url, duty);
                    }
                }
            }
            Output::CreateMachine {
                request,
                executor,
                owner,
            } => {
                if st.owns(owner.as_deref()) || (owner.is_none() && at.by_me) {
                    self.spawn_create(executor, request);
                }
            }
            Output::DeleteMachine {
                executor,
                hold,
                lease,
                owner,
            } => {
                let acts = if at.expiry || owner.is_none() {
                    at.by_me
                } else {
                    st.owns(owner.as_deref())
                };
                if acts {
                    self.spawn_delete(executor, hold, lease);
                }
            }
            Output::Preflight { executor } => {
                if let Some(duty) = st.duty() {
                    if let Some(starting) = st.starting.as_mut() {
                        starting.awaiting.insert(executor.clone());
                    }
                    self.spawn_preflight(executor, duty);
                }
            }
            Output::StartFailed { executor, error } => {
                if let Some(done) = st.starting.take().and_then(|s| s.done) {
                    let _ = done.send(Err(HostError::StartFailed { executor, error }));
                }
            }
            Output::Persist { .. } => {
                // The state-file rule (in the guest) merges it as the core wrote it;
                // a remote log is its own persistence (no writer).
                if let Some(writer) = &self.writer {
                    let _ = writer.send(WriterMsg::Persist(raw.clone()));
                }
            }
            Output::Event {
                level,
                name,
                message,
                fields,
            } => self.publish_core(Event::core(level, &name, message, &fields), at.seq),
        }
    }

    /// A result of work this instance did for the log (a machine's, a probe's, a
    /// preflight's): folded now on the memory log; for a remote log, appended, as a
    /// leader entry when it is a leader's duty (`epoch`). Answers once it is in.
    pub(crate) async fn submit_result(
        self: &Arc<Inner>,
        input: Input,
        duty: Option<Duty>,
        what: &str,
    ) {
        let rx = {
            let mut st = lock(&self.state);
            match (duty, st.member.as_mut()) {
                (Some(Duty::Epoch(epoch)), Some(member)) => {
                    let Ok(entry) = super::entry::entry_of(&input) else {
                        return;
                    };
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    member.queue.push_back(Queued {
                        entry,
                        epoch: Some(epoch),
                        mine: super::state::Mine::Plain,
                        on_append: Some(tx),
                    });
                    if let Some(link) = &self.link {
                        link.queued.notify_one();
                    }
                    rx
                }
                _ => return self.append(&mut st, input, Some(what)),
            }
        };
        let _ = rx.await;
    }
}

impl Inner {
    /// Asks the core something (no input): its answer, its events published.
    pub(crate) fn query<T>(&self, f: impl FnOnce(&mut PolicyRuntime) -> Result<T>) -> Result<T> {
        let mut st = lock(&self.state);
        let result = f(&mut st.policy);
        for event in st.policy.take_events() {
            self.publish(event);
        }
        result
    }
}
