//! Flows of persistence: the lasting exclusions restored, rendered and flushed once
//! per input.

use crate::protocol::{Exclusion, ExclusionKind, Output, PersistedState, STATE_VERSION};
use crate::sorted::{self, StrMap};

use super::Policy;

impl Policy {
    pub(super) fn restore(&mut self, state: PersistedState) {
        let now = self.now;
        for x in state.exclusions {
            let Some(e) = self.roster.index.get(&x.id) else {
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
            let mut exclusion = self.exclusion_of_kind(e, x.kind, x.reason, x.until);
            if exclusion.kind == ExclusionKind::Health {
                // The seed's `until` of a health entry is when it was reported.
                exclusion.since = x.until.map_or(now, |t| t.min(now));
            }
            self.exclude(e, exclusion);
        }
        // What was just read is what the file holds: no write for a restore.
        self.persistence.last = self.persisted_aligned();
        self.persistence.touched.clear();
        self.persistence.all = false;
    }

    /// The lasting exclusions of the declared executors. A draining executor's is
    /// left out: it leaves this run, and a restart would not know it.
    pub(super) fn persisted_exclusions(&self) -> Vec<Exclusion> {
        (0..self.roster.executors.len())
            .filter_map(|e| self.persisted_entry(e))
            .collect()
    }

    /// The lasting entry of executor `e` as the state file would hold it.
    pub(super) fn persisted_entry(&self, e: usize) -> Option<Exclusion> {
        let x = self.roster.executors.get(e)?;
        if x.draining {
            return None;
        }
        let exclusion = x.runtime.exclusion.as_ref()?;
        let until = match exclusion.kind {
            // As the seed writes it: `until` is the report's time (its first probe).
            ExclusionKind::Health => Some(exclusion.since),
            _ => exclusion.end(),
        };
        (exclusion.kind != ExclusionKind::Run).then(|| Exclusion {
            id: x.spec.id.clone(),
            reason: exclusion.reason.clone(),
            kind: exclusion.kind,
            until,
        })
    }

    /// Every executor's lasting entry, by index.
    pub(super) fn persisted_aligned(&self) -> Vec<Option<Exclusion>> {
        (0..self.roster.executors.len())
            .map(|e| self.persisted_entry(e))
            .collect()
    }

    /// One persist per input at most, carrying only the entries that changed: its
    /// `ids` are the executors whose entry differs from what the file holds, its
    /// exclusions their new entries (an id without one is cleared). In a failure
    /// storm on a large roster this costs what the touched executors cost, not the
    /// whole roster.
    #[inline]
    pub(super) fn flush_persist(&mut self) {
        // Most inputs touch no lasting exclusion: inlined, they pay one comparison.
        if !self.persistence.settled() {
            self.write_persist();
        }
    }

    #[inline(never)]
    fn write_persist(&mut self) {
        let mut ids = Vec::new();
        let mut exclusions = Vec::new();
        if std::mem::take(&mut self.persistence.all) {
            self.persistence.touched.clear();
            // Executor indexes may have moved since the entries were aligned: read
            // them by the ids they carry (one entry per executor: ids unique).
            let mut last: StrMap<Exclusion> = std::mem::take(&mut self.persistence.last)
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
                    .roster
                    .index
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
            self.persistence.last = self.persisted_aligned();
        } else {
            // Indexes are stable within an input (a reload or a departure sets
            // `persist_all`); in id order, as the full comparison gives.
            let mut touched = std::mem::take(&mut self.persistence.touched);
            touched.sort_unstable_by(|&a, &b| {
                self.roster.executors[a]
                    .spec
                    .id
                    .cmp(&self.roster.executors[b].spec.id)
            });
            touched.dedup();
            if self.persistence.last.len() < self.roster.executors.len() {
                self.persistence
                    .last
                    .resize(self.roster.executors.len(), None);
            }
            for &e in &touched {
                let current = self.persisted_entry(e);
                let last = &mut self.persistence.last[e];
                if current == *last {
                    continue;
                }
                if let Some(now) = &current {
                    exclusions.push(now.clone());
                }
                *last = current;
                ids.push(self.roster.executors[e].spec.id.clone());
            }
            // Keep the allocation for the next input.
            touched.clear();
            self.persistence.touched = touched;
        }
        if ids.is_empty() {
            return;
        }
        self.push_output(Output::Persist {
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
