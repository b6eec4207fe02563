//! Health probes: which health-excluded executors are due a probe, and results.

use serde_json::json;

use crate::protocol::{ExclusionKind, Level, Output};
use crate::sorted;

use super::keys::{timer_key, Key};
use super::Policy;

impl Policy {
    /// `e`'s key in `probe_waits`, if it waits for a probe.
    pub(super) fn probe_floor(&self, e: usize) -> Option<Key> {
        let x = &self.execs[e];
        if !self.health.get(e).copied().unwrap_or(false) || x.rt.probe_in_flight {
            return None;
        }
        let floor = match x.rt.last_probe_at {
            None => x.rt.exclusion.as_ref().map_or(self.now, |x| x.since),
            Some(at) => {
                at + self
                    .options
                    .health_probe_interval_ms
                    .min(self.options.idle_probe_interval_ms)
            }
        };
        Some(timer_key(floor, e))
    }

    /// Call before changing what `probe_floor` reads; `probe_wait` after.
    pub(super) fn set_health(&mut self, e: usize, on: bool) {
        if self.health.len() <= e {
            self.health.resize(e + 1, false);
        }
        self.health[e] = on;
    }

    pub(super) fn probe_unwait(&mut self, e: usize) {
        if let Some(key) = self.probe_floor(e) {
            self.probe_waits.remove(&key);
        }
    }

    pub(super) fn probe_wait(&mut self, e: usize) {
        if let Some(key) = self.probe_floor(e) {
            self.probe_waits.insert(key, 0);
        }
    }

    pub(super) fn probe_due(&self, e: usize) -> u64 {
        let x = &self.execs[e];
        let since = x.rt.exclusion.as_ref().map_or(self.now, |x| x.since);
        match x.rt.last_probe_at {
            None => since,
            Some(at) => {
                let interval = if self.demand(e) {
                    self.options.health_probe_interval_ms
                } else {
                    self.options.idle_probe_interval_ms
                };
                at + interval
            }
        }
    }

    /// Whether a waiting request could use `e` once it is back.
    pub(super) fn demand(&self, e: usize) -> bool {
        let x = &self.execs[e];
        x.role_idx.iter().any(|&r| {
            self.role_queues[r].values().take(16).any(|&s| {
                self.requests
                    .at(s)
                    .is_some_and(|q| q.pin().is_none() && !q.avoids(&x.spec.id))
            })
        }) || sorted::contains_key(&self.pin_queues, &x.spec.id)
    }

    pub(super) fn schedule_probes(&mut self) {
        let due: Vec<usize> = self
            .probe_waits
            .keys()
            .take_while(|k| k[0] <= self.now)
            .map(|k| k[1] as usize)
            .filter(|&e| self.probe_due(e) <= self.now)
            .collect();
        for e in due {
            let spec = &self.execs[e].spec;
            match (&spec.health, self.options.can_probe) {
                (Some(url), true) => {
                    let (id, url) = (spec.id.clone(), url.clone());
                    self.probe_unwait(e);
                    self.execs[e].rt.probe_in_flight = true;
                    self.outputs.push_back(Output::Probe { executor: id, url });
                }
                _ => {
                    // Nothing to probe: the outage cooldown decides, from now.
                    let reason = self.execs[e]
                        .rt
                        .exclusion
                        .as_ref()
                        .map(|x| x.reason.clone())
                        .unwrap_or_default();
                    let until = self.now + spec.cooldown.outage_ms;
                    let excl = self.new_exclusion(ExclusionKind::Until, reason, Some(until));
                    self.set_exclusion(e, Some(excl));
                }
            }
        }
    }

    pub(super) fn probe_result(&mut self, executor: &str, up: bool) {
        let Some(e) = self.exec_index.get(executor) else {
            return;
        };
        let health = self.execs[e]
            .rt
            .exclusion
            .as_ref()
            .is_some_and(|x| x.kind == ExclusionKind::Health);
        if !health || !self.execs[e].rt.probe_in_flight {
            self.event(
                Level::Debug,
                "probeIgnored",
                format!("a probe result for {executor}, which awaits none, is ignored"),
                vec![("executor", json!(executor))],
            );
            return;
        }
        self.execs[e].rt.probe_in_flight = false;
        if up {
            self.end_exclusion(e, self.now, true);
        } else {
            self.execs[e].rt.last_probe_at = Some(self.now);
            self.probe_wait(e);
            self.event(
                Level::Debug,
                "probeDown",
                format!("{executor} does not answer its health check yet"),
                vec![("executor", json!(executor))],
            );
        }
    }
}
