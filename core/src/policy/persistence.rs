//! Persistence: the lasting exclusions, one persist per input at most, restore.

use crate::protocol::{Exclusion, ExclusionKind, Output, PersistedState, STATE_VERSION};
use crate::sorted::{self, StrMap};

use super::Policy;

impl Policy {
    pub(super) fn restore(&mut self, state: PersistedState) {
        let now = self.now;
        for x in state.exclusions {
            let Some(e) = self.exec_index.get(&x.id) else {
                continue; // another roster's entry, or an executor since removed
            };
            let expired = match x.kind {
                ExclusionKind::Run => true,
                ExclusionKind::Until => x.until.is_none_or(|t| t <= now),
                ExclusionKind::Manual => x.until.is_some_and(|t| t <= now),
                ExclusionKind::Health => false,
            };
            if expired {
                continue;
            }
            let excl = self.exclusion_of_kind(e, x.kind, x.reason, x.until);
            self.exclude(e, excl);
        }
        // What was just read is what the file holds: no write for a restore.
        self.last_persisted = self.persisted_aligned();
        self.persist_touched.clear();
        self.persist_all = false;
    }

    /// The lasting exclusions of the declared executors. A draining executor's is
    /// left out: it leaves this run, and a restart would not know it.
    pub(super) fn persisted_exclusions(&self) -> Vec<Exclusion> {
        (0..self.execs.len())
            .filter_map(|e| self.persisted_entry(e))
            .collect()
    }

    /// The lasting entry of executor `e` as the state file would hold it.
    pub(super) fn persisted_entry(&self, e: usize) -> Option<Exclusion> {
        let x = self.execs.get(e)?;
        if x.draining {
            return None;
        }
        let excl = x.rt.exclusion.as_ref()?;
        (excl.kind != ExclusionKind::Run).then(|| Exclusion {
            id: x.spec.id.clone(),
            reason: excl.reason.clone(),
            kind: excl.kind,
            until: excl.end(),
        })
    }

    /// Every executor's lasting entry, by index.
    pub(super) fn persisted_aligned(&self) -> Vec<Option<Exclusion>> {
        (0..self.execs.len())
            .map(|e| self.persisted_entry(e))
            .collect()
    }

    /// One persist per input at most, carrying only the entries that changed: its
    /// `ids` are the executors whose entry differs from what the file holds, its
    /// exclusions their new entries (an id without one is cleared). In a failure
    /// storm on a large roster this costs what the touched executors cost, not the
    /// whole roster.
    pub(super) fn flush_persist(&mut self) {
        if self.persist_touched.is_empty() && !self.persist_all {
            return;
        }
        let mut ids = Vec::new();
        let mut exclusions = Vec::new();
        if std::mem::take(&mut self.persist_all) {
            self.persist_touched.clear();
            // Executor indexes may have moved since the entries were aligned: read
            // them by the ids they carry (one entry per executor: ids unique).
            let mut last: StrMap<Exclusion> = std::mem::take(&mut self.last_persisted)
                .into_iter()
                .flatten()
                .map(|x| (x.id.clone(), x))
                .collect();
            last.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            let current = self.persisted_exclusions().into_iter().map(|x| x.id);
            let mut candidates: Vec<String> = last
                .iter()
                .map(|(id, _)| id.clone())
                .chain(current)
                .collect();
            candidates.sort_unstable();
            candidates.dedup();
            for id in candidates {
                let current = self
                    .exec_index
                    .get(&id)
                    .and_then(|e| self.persisted_entry(e));
                if current.as_ref() == sorted::get(&last, &id) {
                    continue;
                }
                if let Some(entry) = current {
                    exclusions.push(entry);
                }
                ids.push(id);
            }
            // Every entry is now what the file holds.
            self.last_persisted = self.persisted_aligned();
        } else {
            // Indexes are stable within an input (a reload or a departure sets
            // `persist_all`); in id order, as the full comparison gives.
            let mut touched = std::mem::take(&mut self.persist_touched);
            touched.sort_unstable_by(|&a, &b| self.execs[a].spec.id.cmp(&self.execs[b].spec.id));
            touched.dedup();
            if self.last_persisted.len() < self.execs.len() {
                self.last_persisted.resize(self.execs.len(), None);
            }
            for &e in &touched {
                let current = self.persisted_entry(e);
                let last = &mut self.last_persisted[e];
                if current == *last {
                    continue;
                }
                if let Some(now) = &current {
                    exclusions.push(now.clone());
                }
                *last = current;
                ids.push(self.execs[e].spec.id.clone());
            }
            // Keep the allocation for the next input.
            touched.clear();
            self.persist_touched = touched;
        }
        if ids.is_empty() {
            return;
        }
        self.outputs.push_back(Output::Persist {
            ids,
            state: PersistedState {
                version: STATE_VERSION,
                exclusions,
            },
        });
    }

    /// The part of the state a persist decision carries (for restore tests).
    pub fn persisted_state(&self) -> PersistedState {
        PersistedState {
            version: STATE_VERSION,
            exclusions: self.persisted_exclusions(),
        }
    }
}
