//! Reload: a new document live, with preflights first where the host asks for them.

use serde_json::json;

use crate::document::Document;
use crate::protocol::{ExclusionKind, Level, Output};
use crate::sorted::{self, StrMap, StrSet};
use crate::status::PreflightRecord;
use crate::time::iso;

use super::events::plural;
use super::events::EventName;
use super::queue::Ending;
use super::roster::{Executor, Runtime};
use super::Policy;

#[derive(Debug, Clone)]
pub(super) struct PendingReload {
    pub(super) document: Document,
    pub(super) awaiting: StrSet,
    pub(super) since: u64,
}

/// Reloads: the one waiting for preflights, the preflights' records, and every
/// executor id a document of this run declared.
#[derive(Debug, Clone, Default)]
pub(super) struct Reloads {
    pub(super) pending: Option<PendingReload>,
    pub(super) preflights: StrMap<PreflightRecord>,
    /// Every executor id any document of this run declared. Persists no longer need
    /// it (`Persistence::last` names what the file holds); kept so that exports keep
    /// their shape for modules that read it.
    pub(super) known_ids: StrSet,
}

impl Reloads {
    pub(super) fn new(document: &Document) -> Reloads {
        Reloads {
            known_ids: sorted::set_from(document.executors.iter().map(|e| e.id.clone())),
            ..Reloads::default()
        }
    }
}

impl Policy {
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
                self.outputs.push_back(Output::Preflight {
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
        sorted::insert(
            &mut self.reloads.preflights,
            executor.clone(),
            PreflightRecord {
                at: self.now,
                ok,
                error: error.clone(),
            },
        );
        let Some(pending) = self.reloads.pending.as_mut() else {
            return;
        };
        if !sorted::set_remove(&mut pending.awaiting, &executor) {
            return;
        }
        if !ok {
            self.reloads.pending = None;
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
        if pending.awaiting.is_empty() {
            if let Some(pending) = self.reloads.pending.take() {
                self.apply_reload(pending.document);
            }
        }
    }

    pub(super) fn apply_reload(&mut self, document: Document) {
        let roles = document.roles.clone();
        // The running executors, taken out by index as the new document names them
        // (`exec_index` still indexes them).
        let mut old: Vec<Option<Executor>> = std::mem::take(&mut self.roster.executors)
            .into_iter()
            .map(Some)
            .collect();
        let running = |x: &Executor| x.busy;
        let mut execs = Vec::new();
        let mut events = Vec::new();
        for spec in &document.executors {
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
                        ));
                    }
                    let mut x = Executor::new(spec.clone(), prev.runtime, &roles);
                    if x.spec.health.is_none()
                        && x.runtime.exclusion.as_ref().map(|x| x.kind)
                            == Some(ExclusionKind::Health)
                    {
                        // Its health URL is gone: the outage cooldown decides, from now.
                        if let Some(exclusion) = x.runtime.exclusion.as_mut() {
                            exclusion.kind = ExclusionKind::Until;
                            exclusion.until =
                                Some(self.now.saturating_add(spec.cooldown.outage_ms));
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
                    ));
                    execs.push(Executor::new(spec.clone(), Runtime::default(), &roles));
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
            if running(&prev) > 0 {
                events.push((
                    EventName::Removed,
                    format!(
                        "{id} removed by a reload; it takes no new lease, and leaves when its running leases end ({} running)",
                        running(&prev)
                    ),
                ));
                prev.draining = true;
                execs.push(prev);
            } else {
                events.push((
                    EventName::Removed,
                    format!("{id} removed by a reload; it runs no lease, so it leaves now"),
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
        self.rebuild();
        for (name, message) in events {
            self.event(Level::Info, name, message, vec![]);
        }
        self.event(
            Level::Info,
            EventName::Reloaded,
            format!(
                "the roster reloaded: {}",
                plural(
                    self.document.executors.len() as u32,
                    "executor",
                    "executors"
                )
            ),
            vec![],
        );
        // Requests whose role is gone, and those nothing can serve any more, end.
        let orphaned: Vec<String> = self
            .queue
            .requests
            .values()
            .filter(|q| q.waiting() && self.roster.request_role(q).is_none())
            .map(|q| q.id.to_string())
            .collect();
        for id in orphaned {
            self.end_request(&id, Ending::Exhausted);
        }
        let all: Vec<usize> = (0..roles.len()).collect();
        self.recheck_exhaustion(&all);
        self.roster.dirty = (0..self.roster.executors.len()).collect();
    }
}
