//! Flows of health probes: when each is due, starting them, and their results.

use crate::protocol::{ExclusionKind, Level, Output};
use crate::sorted;
use serde_json::json;

use super::events::EventName;
use super::keys::{timer_key, Key};
use super::Policy;

impl Policy {
    /// `e`'s key in `probe_waits`, if it waits for a probe.
    pub(super) fn probe_floor(&self, e: usize) -> Option<Key> {
        let x = &self.roster.executors[e];
        if !self.probes.health.get(e).copied().unwrap_or(false) || x.runtime.probe_in_flight {
            return None;
        }
        let floor = match x.runtime.last_probe_at {
            None => x.runtime.exclusion.as_ref().map_or(self.now, |x| x.since),
            Some(at) => at.saturating_add(
                self.options
                    .health_probe_interval_ms
                    .min(self.options.idle_probe_interval_ms),
            ),
        };
        Some(timer_key(floor, e))
    }

    /// Call before changing what `probe_floor` reads; `probe_wait` after.
    pub(super) fn set_health(&mut self, e: usize, on: bool) {
        if self.probes.health.len() <= e {
            self.probes.health.resize(e + 1, false);
        }
        self.probes.health[e] = on;
    }

    pub(super) fn probe_unwait(&mut self, e: usize) {
        if let Some(key) = self.probe_floor(e) {
            self.probes.waits.remove(&key);
        }
    }

    pub(super) fn probe_wait(&mut self, e: usize) {
        if let Some(key) = self.probe_floor(e) {
            self.probes.waits.insert(key, 0);
        }
    }

    /// When the next probe is due, over the executors waiting for one.
    pub(super) fn next_probe_due(&self) -> Option<u64> {
        // In floor order: once a floor passes the best due time, none is earlier.
        let mut best: Option<u64> = None;
        for &[floor, e, ..] in self.probes.waits.keys() {
            if best.is_some_and(|b| floor >= b) {
                break;
            }
            let due = self.probe_due(e as usize);
            best = Some(best.map_or(due, |b| b.min(due)));
        }
        best
    }

    /// When executor `e`'s next probe is due (its exclusion's start before the
    /// first, then the last probe plus the interval for its demand).
    pub(super) fn probe_due(&self, e: usize) -> u64 {
        let x = &self.roster.executors[e];
        let since = x.runtime.exclusion.as_ref().map_or(self.now, |x| x.since);
        match x.runtime.last_probe_at {
            None => since,
            Some(at) => {
                let interval = if self.demand(e) {
                    self.options.health_probe_interval_ms
                } else {
                    self.options.idle_probe_interval_ms
                };
                at.saturating_add(interval)
            }
        }
    }

    /// Whether a waiting request could use `e` once it is back.
    pub(super) fn demand(&self, e: usize) -> bool {
        let x = &self.roster.executors[e];
        x.role_indexes.iter().any(|&r| {
            self.queue.by_role[r].iter().take(16).any(|&(_, s)| {
                self.queue
                    .requests
                    .at(s)
                    .is_some_and(|q| q.pin().is_none() && !q.avoids(&x.spec.id))
            })
        }) || sorted::contains_key(&self.queue.pinned, &x.spec.id)
    }

    #[inline]
    pub(super) fn schedule_probes(&mut self) {
        // The waits are in floor order: when the first floor is to come, no probe is
        // due (most inputs), and the scan below is not built.
        if self
            .probes
            .waits
            .first_key_value()
            .is_none_or(|(k, _)| k[0] > self.now)
        {
            return;
        }
        self.start_due_probes();
    }

    #[inline(never)]
    fn start_due_probes(&mut self) {
        let due: Vec<usize> = self
            .probes
            .waits
            .keys()
            .take_while(|k| k[0] <= self.now)
            .map(|k| k[1] as usize)
            .filter(|&e| self.probe_due(e) <= self.now)
            .collect();
        for e in due {
            let spec = &self.roster.executors[e].spec;
            match (&spec.health, self.options.can_probe) {
                (Some(url), true) => {
                    let (id, url) = (spec.id.clone(), url.clone());
                    self.probe_unwait(e);
                    self.roster.executors[e].runtime.probe_in_flight = true;
                    self.push_output(Output::Probe { executor: id, url });
                }
                _ => {
                    // Nothing to probe: the outage cooldown decides, from now.
                    let reason = self.roster.executors[e]
                        .runtime
                        .exclusion
                        .as_ref()
                        .map(|x| x.reason.clone())
                        .unwrap_or_default();
                    let until = self.now.saturating_add(spec.cooldown.outage_ms);
                    let exclusion = self.new_exclusion(ExclusionKind::Until, reason, Some(until));
                    self.set_exclusion(e, Some(exclusion));
                }
            }
        }
    }

    pub(super) fn probe_result(&mut self, executor: &str, up: bool) {
        let Some(e) = self.roster.index.get(executor) else {
            debug_assert!(false, "probe_result: the executor was checked");
            return;
        };
        let health = self.roster.executors[e]
            .runtime
            .exclusion
            .as_ref()
            .is_some_and(|x| x.kind == ExclusionKind::Health);
        if !health || !self.roster.executors[e].runtime.probe_in_flight {
            self.event(
                Level::Debug,
                EventName::ProbeIgnored,
                format!("a probe result for {executor}, which awaits none, is ignored"),
                vec![("executor", json!(executor))],
            );
            return;
        }
        self.roster.executors[e].runtime.probe_in_flight = false;
        if up {
            self.end_exclusions(&[e], self.now, true);
        } else {
            self.roster.executors[e].runtime.last_probe_at = Some(self.now);
            self.probe_wait(e);
            self.event(
                Level::Debug,
                EventName::ProbeDown,
                format!("{executor} does not answer its health check yet"),
                vec![("executor", json!(executor))],
            );
        }
    }
}
