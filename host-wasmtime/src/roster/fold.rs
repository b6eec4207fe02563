//! The fold: one input into the core, and the one output dispatcher. Both logs go
//! through it: the memory log folds an input the moment it is appended (one
//! instance: it owns every request and leads); a remote log's driver folds each entry
//! in seq order (`shared`), and this instance acts only on what is its own
//! (sql/PROTOCOL.md, "Who acts on an output").

use std::sync::Arc;

use rota_core::log::{actor, entry_of, EntryFacts};
use rota_core::{Input, Level, Output};
use serde_json::Value;
use tokio::sync::oneshot;

use super::state::{lock, AppendAnswer, Inner, Mine, Outcome, Queued, State, WriterMsg};
use crate::error::{HostError, Result};
use crate::event::Event;
use crate::output;
use crate::runtime::{PolicyRuntime, Step};
use crate::telemetry;

/// Where an input comes from: the memory log's append (no seq, no facts: its one
/// instance acts on every output), or a remote log's entry.
#[derive(Debug, Default)]
pub(crate) struct At<'a> {
    /// The remote log's seq (events carry it).
    pub seq: Option<u64>,
    /// The instance that appended it.
    pub appender: &'a str,
    /// What the entry is, for [`actor`].
    pub facts: EntryFacts,
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
            let result = serde_json::to_vec(&input)
                .map_err(|e| HostError::Abi(format!("cannot encode an input: {e}")))
                .and_then(|bytes| self.fold(st, input.kind(), &bytes, &At::default()));
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
        let result = match st.member {
            None => self.feed_locked(st, input).map(drop),
            Some(_) => self.enqueue(st, &input, None, Mine::Plain, None),
        };
        if let (Err(error), Some(what)) = (result, what) {
            self.publish(Event::host(Level::Warn, what, error.to_string()));
        }
    }

    /// Queues `input` as an entry of this instance's for the remote log's next batch
    /// (`epoch`: a leader entry; `on_append`: told the append's `now`).
    pub(crate) fn enqueue(
        &self,
        st: &mut State,
        input: &Input,
        epoch: Option<u64>,
        mine: Mine,
        on_append: Option<oneshot::Sender<AppendAnswer>>,
    ) -> Result<()> {
        let entry = entry_of(input)?;
        if let (Some(member), Some(link)) = (st.member.as_mut(), &self.link) {
            member.queue.push_back(Queued {
                entry,
                epoch,
                mine,
                on_append,
            });
            link.queued.notify_one();
        }
        Ok(())
    }

    /// Folds one input (`bytes`, of kind `kind`) and carries out its outputs.
    pub(crate) fn fold(
        self: &Arc<Inner>,
        st: &mut State,
        kind: &str,
        bytes: &[u8],
        at: &At,
    ) -> Result<Step> {
        if matches!(kind, "reload" | "preflightResult") {
            st.invalidate_specs();
        }
        let result = (st.policy.step_value(bytes)).and_then(|result| Step::from_result(&result));
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
        self.folded.notify_waiters();
        Ok(step)
    }

    /// Carries out one output when it is this instance's to act on (the core's
    /// [`actor`]; the memory log's one instance acts on all), `raw` as the guest wrote
    /// it, for what passes through.
    fn act(self: &Arc<Inner>, st: &mut State, output: Output, raw: &Value, at: &At) {
        let mine = st.member.as_ref().is_none_or(|member| {
            actor(&output, &at.facts, at.appender).is(&member.instance, member.epoch.is_some())
        });
        if !mine {
            return;
        }
        match output {
            Output::Granted {
                request,
                lease,
                executor,
                clone,
                role,
                hold,
                borrowed,
                because,
                ..
            } => {
                // (A fence ends every awaited request: the grant is released below.)
                self.fence_if_lapsed(st, "checked before settling a grant");
                if let Some(member) = st.member.as_mut() {
                    member.orphans.remove(&request);
                }
                let waiter = st.take_waiter(&request);
                let now = self.now_ms();
                let waited = waiter.as_ref().map(|w| now.saturating_sub(w.requested_at));
                telemetry::granted(&role, &executor, waited);
                lock(&self.metrics).granted(&executor, &role);
                let outcome = Outcome::Granted {
                    lease,
                    spec: st.spec(&executor, &role),
                    role,
                    hold,
                    clone,
                    borrowed,
                    because,
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
                ..
            } => st.settle(&request, Ok(Outcome::Exhausted { role, reasons })),
            Output::TimedOut {
                request, reasons, ..
            } => st.settle(&request, Ok(Outcome::TimedOut { reasons })),
            Output::Unavailable { request, .. } => st.settle(&request, Ok(Outcome::Unavailable)),
            Output::Cancelled { request, .. } => st.settle(&request, Ok(Outcome::Cancelled)),
            // The report is for people (`explain`); the spent budgets are counted.
            Output::Waiting { role, spent, .. } => {
                if !spent.is_empty() {
                    let mut metrics = lock(&self.metrics);
                    for executor in &spent {
                        metrics.budget_waited(executor, &role);
                    }
                }
            }
            Output::Probe { executor, url } => {
                if st.probing.insert(executor.clone()) {
                    let epoch = st.member.as_ref().and_then(|m| m.epoch);
                    self.spawn_probe(executor, url, epoch);
                }
            }
            Output::CreateMachine {
                request, executor, ..
            } => self.spawn_create(executor, request),
            Output::DeleteMachine {
                executor,
                hold,
                lease,
                ..
            } => self.spawn_delete(executor, hold, lease),
            // (A remote log's: only a genesis from before `log::genesis_options` asks.)
            Output::Preflight { executor } => {
                if let Some(starting) = st.starting.as_mut() {
                    starting.awaiting.insert(executor.clone());
                }
                self.spawn_preflight(executor);
            }
            Output::StartFailed { executor, error } => {
                if let Some(done) = st.starting.take().and_then(|s| s.done) {
                    let _ = done.send(Err(HostError::StartFailed { executor, error }));
                }
            }
            Output::Persist { .. } => {
                // The state-file rule (in the guest) merges it as the core wrote it.
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
        epoch: Option<u64>,
        what: &str,
    ) {
        let rx = {
            let mut st = lock(&self.state);
            let Some(epoch) = epoch.filter(|_| st.member.is_some()) else {
                return self.append(&mut st, input, Some(what));
            };
            let (tx, rx) = oneshot::channel();
            if self
                .enqueue(&mut st, &input, Some(epoch), Mine::Plain, Some(tx))
                .is_err()
            {
                return;
            }
            rx
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
