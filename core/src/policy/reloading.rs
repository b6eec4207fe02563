//! Flows of reload and the roster's derived state: preflights, a reload applied,
//! the indexes rebuilt, drained executors removed.

use crate::document::{ClonesRule, Document, Fairness, LeaseEventsRule};
use crate::protocol::{Choice, ExclusionKind};
use crate::protocol::{Level, Output};
use crate::sorted::{self, StrSet};
use crate::status::PreflightRecord;
use crate::time::iso;
use serde_json::json;

use super::events::plural;
use super::events::EventName;
use super::exclusions::ActiveExclusion;
use super::queue::Ending;
use super::ready::ReadySet;
use super::reload::{PendingReload, Startup};
use super::roster::{Executor, Runtime};
use super::Policy;

impl Policy {
    /// Whether the roster serves (its startup preflight, if any, passed).
    pub(super) fn serving(&self) -> bool {
        self.reloads.startup == Startup::Serving
    }

    /// Asks the host to preflight every executor before the roster serves (at
    /// construction, when the host can preflight).
    pub(super) fn start_preflight(&mut self) {
        let all = sorted::set_from(self.roster.executors.iter().map(|x| x.spec.id.clone()));
        if all.is_empty() {
            return;
        }
        for id in &all {
            self.push_output(Output::Preflight {
                executor: id.clone(),
            });
        }
        self.event(
            Level::Info,
            EventName::Preflighting,
            format!("preflighting {} before the roster serves", all.join(", ")),
            vec![("executors", json!(all))],
        );
        self.reloads.startup = Startup::Preflighting(all);
        self.roster.forget_reports();
    }

    /// Records an executor's preflight (a preflight answer, or what a machine
    /// creation checked).
    pub(super) fn record_preflight(&mut self, executor: &str, ok: bool, error: Option<String>) {
        sorted::insert(
            &mut self.reloads.preflights,
            executor.to_string(),
            PreflightRecord {
                at: self.now,
                ok,
                error,
            },
        );
    }

    pub(super) fn reload(&mut self, document: Document) {
        if let Some(pending) = self.reloads.pending.take() {
            self.event(
                Level::Info,
                EventName::ReloadSuperseded,
                format!(
                    "a newer reload replaces the one waiting for preflights since {}",
                    iso(pending.since)
                ),
                vec![],
            );
        }
        let needs = self.needs_preflight(&document);
        if self.options.preflight_reloads && !needs.is_empty() {
            for id in &needs {
                self.push_output(Output::Preflight {
                    executor: id.clone(),
                });
            }
            self.event(
                Level::Info,
                EventName::Preflighting,
                format!(
                    "preflighting {} before the reload applies",
                    needs.join(", ")
                ),
                vec![("executors", json!(needs))],
            );
            self.reloads.pending = Some(PendingReload {
                document,
                awaiting: needs,
                since: self.now,
            });
            return;
        }
        self.apply_reload(document);
    }

    /// Executors a reload adds or grows.
    pub(super) fn needs_preflight(&self, document: &Document) -> StrSet {
        sorted::set_from(
            document
                .executors
                .iter()
                .filter(|spec| match self.roster.index.get(&spec.id) {
                    Some(e) => {
                        self.roster.executors[e].draining
                            || spec.slots > self.roster.executors[e].spec.slots
                    }
                    None => true,
                })
                .map(|spec| spec.id.clone()),
        )
    }

    pub(super) fn preflight_result(&mut self, executor: String, ok: bool, error: Option<String>) {
        if let Startup::Preflighting(awaiting) = &mut self.reloads.startup {
            if sorted::set_remove(awaiting, &executor) {
                let done = awaiting.is_empty();
                let rest = std::mem::take(awaiting);
                self.record_preflight(&executor, ok, error.clone());
                if !ok {
                    let why = error.unwrap_or_else(|| "no reason given".into());
                    self.reloads.startup = Startup::Failed;
                    self.roster.forget_reports();
                    self.reloads.cut_short = rest;
                    self.push_output(Output::StartFailed {
                        executor: executor.clone(),
                        error: why.clone(),
                    });
                    self.event(
                        Level::Warn,
                        EventName::StartFailed,
                        format!(
                            "the roster does not start: the preflight of {executor} failed ({why})"
                        ),
                        vec![("error", json!(why)), ("executor", json!(executor))],
                    );
                } else if done {
                    self.reloads.startup = Startup::Serving;
                    self.roster.forget_reports();
                    self.event(
                        Level::Info,
                        EventName::Started,
                        format!(
                            "every executor passed its preflight; the roster serves ({})",
                            plural(self.roster.executors.len() as u32, "executor", "executors")
                        ),
                        vec![],
                    );
                    self.roster.dirty = (0..self.roster.executors.len()).collect();
                    self.recheck_all_exhaustion();
                } else {
                    self.reloads.startup = Startup::Preflighting(rest);
                    self.roster.forget_reports();
                }
                return;
            }
        }
        let awaited = self
            .reloads
            .pending
            .as_mut()
            .is_some_and(|pending| sorted::set_remove(&mut pending.awaiting, &executor));
        if !awaited {
            // A late answer after a failure cut the preflights short, or one nothing
            // waits for: the seed never sees it, so it is not recorded.
            sorted::set_remove(&mut self.reloads.cut_short, &executor);
            self.event(
                Level::Debug,
                EventName::PreflightIgnored,
                format!("the preflight answer of {executor} is ignored: no start or reload waits for it"),
                vec![("executor", json!(executor)), ("ok", json!(ok))],
            );
            return;
        }
        self.record_preflight(&executor, ok, error.clone());
        if !ok {
            let rest = self
                .reloads
                .pending
                .take()
                .map(|pending| pending.awaiting)
                .unwrap_or_default();
            for id in rest {
                sorted::set_insert(&mut self.reloads.cut_short, id);
            }
            let why = error.unwrap_or_else(|| "no reason given".into());
            self.event(
                Level::Warn,
                EventName::ReloadRefused,
                format!(
                    "the reload is refused: the preflight of {executor} failed ({why}); the running roster stays as it was"
                ),
                vec![("executor", json!(executor)), ("error", json!(why))],
            );
            return;
        }
        if self
            .reloads
            .pending
            .as_ref()
            .is_some_and(|pending| pending.awaiting.is_empty())
        {
            if let Some(pending) = self.reloads.pending.take() {
                self.apply_reload(pending.document);
            }
        }
    }

    pub(super) fn apply_reload(&mut self, mut document: Document) {
        // Queued outputs name executors by index: built before the indexes move.
        self.settle_outputs();
        let roles = document.roles.clone();
        let declared = document.executors.len() as u32;
        // The running executors, taken out by index as the new document names them
        // (`exec_index` still indexes them).
        let mut old: Vec<Option<Executor>> = std::mem::take(&mut self.roster.executors)
            .into_iter()
            .map(Some)
            .collect();
        let running = |x: &Executor| x.busy;
        let mut execs = Vec::new();
        let mut events = Vec::new();
        // The specs move into the roster (the running document keeps none).
        for spec in std::mem::take(&mut document.executors) {
            sorted::set_insert(&mut self.reloads.known_ids, spec.id.clone());
            let prev = self
                .roster
                .index
                .get(&spec.id)
                .and_then(|e| old.get_mut(e))
                .and_then(Option::take);
            match prev {
                Some(prev) => {
                    if prev.draining {
                        events.push((
                            EventName::Added,
                            format!(
                                "{} declared again by a reload; it takes leases now",
                                spec.id
                            ),
                            vec![
                                ("executor", json!(spec.id)),
                                ("running", json!(running(&prev))),
                                ("slots", json!(spec.slots)),
                            ],
                        ));
                    } else if prev.spec.slots != spec.slots {
                        events.push((
                            EventName::Resized,
                            format!(
                                "{} resized by a reload from {} to {} slots; running leases continue ({} running)",
                                spec.id,
                                prev.spec.slots,
                                spec.slots,
                                running(&prev)
                            ),
                            vec![
                                ("executor", json!(spec.id)),
                                ("running", json!(running(&prev))),
                                ("slotsAfter", json!(spec.slots)),
                                ("slotsBefore", json!(prev.spec.slots)),
                            ],
                        ));
                    }
                    let mut x = Executor::new(spec, prev.runtime, &roles);
                    x.runtime.recovery.fit(&x.spec);
                    if x.spec.health.is_none()
                        && x.runtime.exclusion.as_ref().map(|x| x.kind)
                            == Some(ExclusionKind::Health)
                    {
                        // Its health URL is gone: the outage cooldown decides, from now.
                        if let Some(exclusion) = x.runtime.exclusion.as_mut() {
                            exclusion.kind = ExclusionKind::Until;
                            exclusion.until =
                                Some(self.now.saturating_add(x.spec.cooldown.outage_ms));
                        }
                        x.runtime.probe_in_flight = false;
                        x.runtime.last_probe_at = None;
                        self.persistence.all = true;
                    }
                    execs.push(x);
                }
                None => {
                    events.push((
                        EventName::Added,
                        format!("{} added by a reload; it takes leases now", spec.id),
                        vec![("executor", json!(spec.id)), ("slots", json!(spec.slots))],
                    ));
                    execs.push(Executor::new(spec, Runtime::default(), &roles));
                }
            }
        }
        // The executors the new document leaves out, in id order.
        let mut left: Vec<Executor> = old.into_iter().flatten().collect();
        left.sort_unstable_by(|a, b| a.spec.id.cmp(&b.spec.id));
        for mut prev in left {
            let id = prev.spec.id.clone();
            if prev.runtime.exclusion.take().is_some() {
                self.persistence.all = true;
            }
            // Out of the document, out of probation and its counts.
            prev.runtime.recovery = Default::default();
            if running(&prev) > 0 {
                events.push((
                    EventName::Removed,
                    format!(
                        "{id} removed by a reload; it takes no new lease, and leaves when its running leases end ({} running)",
                        running(&prev)
                    ),
                    vec![("executor", json!(id)), ("running", json!(running(&prev)))],
                ));
                prev.draining = true;
                execs.push(prev);
            } else {
                events.push((
                    EventName::Removed,
                    format!("{id} removed by a reload; it runs no lease, so it leaves now"),
                    vec![("executor", json!(id)), ("running", json!(0))],
                ));
            }
        }
        self.document = document;
        self.roster.executors = execs;
        // Executor indexes moved: the next persist compares every entry.
        self.persistence.all = true;
        for x in &mut self.roster.executors {
            if x.draining {
                x.runtime.pause = None;
            }
        }
        self.forget_weights();
        self.rebuild();
        self.forget_removed_keys();
        for (name, message, fields) in events {
            self.event(Level::Info, name, message, fields);
        }
        self.event(
            Level::Info,
            EventName::Reloaded,
            format!(
                "the roster reloaded: {}",
                plural(declared, "executor", "executors")
            ),
            vec![],
        );
        // Requests whose role is gone, and those nothing can serve any more, end.
        let orphaned: Vec<String> = self
            .queue
            .requests
            .values()
            .filter(|q| q.waiting() && self.roster.request_role(q).is_none())
            .map(|q| String::from(&*q.id))
            .collect();
        for id in orphaned {
            self.end_request(&id, Ending::Exhausted);
        }
        self.recheck_all_exhaustion();
        self.roster.dirty = (0..self.roster.executors.len()).collect();
    }
}

impl Policy {
    /// Recomputes every derived index from the executors, leases and requests
    /// (after creation, a reload, a drained executor leaving, an import).
    pub(super) fn rebuild(&mut self) {
        let roles = self.document.roles.clone();
        self.roster.choice = self.document.choice(&self.options);
        self.roster.least_busy = self.roster.choice == Choice::LeastBusy;
        self.roster.unservable = self.document.unservable(&self.options);
        self.roster.prefer = self.document.prefer_rule();
        self.roster.numbered = self.document.clones_rule() == ClonesRule::Numbered;
        self.roster.typed = self.document.lease_events_rule() == LeaseEventsRule::Typed;
        self.roster.derive(&roles);
        self.roster.weighted = self.roster.executors.iter().any(|x| x.spec.weight != 1);
        for lease in self.leases.open.values().filter(|lease| lease.counted) {
            let r = lease
                .role
                .as_ref()
                .and_then(|role| roles.iter().position(|x| **x == **role));
            self.roster.count_busy(&lease.executor, r);
            if let Some(n) = lease.clone {
                self.roster.count_clone(&lease.executor, n);
            }
        }
        for request in self.queue.requests.values() {
            if let Some(creating) = &request.creating {
                let r = self.roster.request_role(request);
                self.roster.count_busy(&creating.executor, r);
            }
        }
        self.roster.ready = vec![ReadySet::default(); roles.len()];
        self.roster.forget_reports();
        self.exclusions.ends.clear();
        self.provisioning.pause_ends.clear();
        self.probes.health = vec![false; self.roster.executors.len()];
        self.probes.waits.clear();
        self.rebuild_budgets();
        for e in 0..self.roster.executors.len() {
            self.roster.ready_up(e);
            let x = &self.roster.executors[e];
            if let Some(end) = x.runtime.exclusion.as_ref().and_then(ActiveExclusion::end) {
                self.exclusions.retime(e, None, Some(end));
            }
            if x.runtime.exclusion.as_ref().map(|x| x.kind) == Some(ExclusionKind::Health) {
                self.probes.health[e] = true;
            }
            self.probe_wait(e);
            let x = &self.roster.executors[e];
            if let Some(p) = x.runtime.pause.as_ref().filter(|p| p.blocked) {
                self.provisioning.time_pause(e, p.until);
            }
        }
        self.roster
            .roles
            .derive(&self.roster.executors, roles.len());
        self.queue.weights = self.document.tenants.clone();
        let fair = self.document.fairness() == Fairness::Tenants;
        self.queue.reindex(&self.roster.roles, roles.len(), fair);
    }

    pub(super) fn remove_drained(&mut self, e: usize) {
        // Queued outputs name executors by index: built before the indexes move (a
        // removed executor sits after the declared ones, but the queue need not know).
        self.settle_outputs();
        self.roster.executors.remove(e);
        self.rebuild();
        // Indexes moved: every executor may be offered again, and the next persist
        // compares every entry (cheap: rare).
        self.roster.dirty = (0..self.roster.executors.len()).collect();
        self.persistence.all = true;
    }

    pub(super) fn role_name(&self, r: usize) -> &str {
        self.document.roles.get(r).map_or("?", String::as_str)
    }
}
