//! Queries: they change nothing (snapshot, explain, plan, available, slots).

use serde_json::Value;

use crate::document::Document;
use crate::error::Error;
use crate::protocol::{Because, ExclusionKind, ExplainRequest, Output};
use crate::sorted;
use crate::status::{
    CreatingRequest, ExclusionStatus, ExecutorExplanation, ExecutorStatus, Explanation,
    LeaseStatus, PauseStatus, PendingReloadStatus, Plan, PlannedGrant, QueuedRequest, Resize,
    Snapshot,
};
use crate::time::iso;

use super::avoid::Avoid;
use super::exclusions::{describe, Described};
use super::keys::{order_key, OrderKey};
use super::recovering::ON_PROBATION;
use super::requests::{request_extra, Given, Request};
use super::Policy;

impl Policy {
    /// Free slots for `role` now, across executors in the round (not excluded, not
    /// paused, not draining).
    pub fn available(&self, role: &str) -> Result<u32, Error> {
        let r = self.role_index(role)?;
        Ok(self.roster.roles.members[r]
            .iter()
            .map(|&e| {
                let x = &self.roster.executors[e];
                if x.draining || x.runtime.exclusion.is_some() || x.blocked() || x.spent() {
                    return 0;
                }
                let total = x.slots_now().saturating_sub(x.busy);
                let for_role = x.cap(r).saturating_sub(x.busy_in(r));
                total.min(for_role)
            })
            .sum())
    }

    /// Configured slots for `role` (role caps applied).
    pub fn slots(&self, role: &str) -> Result<u32, Error> {
        let r = self.role_index(role)?;
        Ok(self.roster.roles.members[r]
            .iter()
            .filter(|&&e| !self.roster.executors[e].draining)
            .map(|&e| self.roster.executors[e].cap(r))
            .sum())
    }

    /// Slots for `role` on the executors in the round (not excluded, not draining),
    /// held or not, role caps applied (one on probation): what the round could serve
    /// at once.
    pub fn capacity(&self, role: &str) -> Result<u32, Error> {
        let r = self.role_index(role)?;
        Ok(self.roster.roles.members[r]
            .iter()
            .map(|&e| &self.roster.executors[e])
            .filter(|x| x.in_round(r))
            .map(|x| x.cap(r).min(x.slots_now()))
            .sum())
    }

    /// Why a request for `role` outside `avoid` cannot be served by a call ending:
    /// `held` (every executor in the round that takes it has all its slots held by
    /// coders), `out` (none is in the round), or `None` (the upstream's
    /// `independenceBlocked`).
    pub fn independence_blocked(
        &self,
        role: &str,
        avoid: &[String],
    ) -> Result<Option<Because>, Error> {
        let r = self.role_index(role)?;
        Ok(self.blocked_outside(r, &Avoid::new(avoid.to_vec())))
    }

    /// Whether `independence_blocked` is `held` (the upstream's `coderHeld`).
    pub fn coder_held(&self, role: &str, avoid: &[String]) -> Result<bool, Error> {
        Ok(self.independence_blocked(role, avoid)? == Some(Because::Held))
    }

    /// The effort `role` runs at on `executor` (its `effort`, the upstream's ADR 0029
    /// `effortOf`): `None` when it sets none for the role (the harness keeps its own
    /// default). An executor a reload removed answers while its leases run.
    pub fn effort_of(&self, executor: &str, role: &str) -> Result<Option<&'static str>, Error> {
        self.role_index(role)?;
        let e = self
            .roster
            .find(executor, None)
            .ok_or_else(|| super::unknown_executor(executor))?;
        let effort = self.roster.executors[e].spec.effort_for(role);
        Ok(effort.map(crate::document::EffortLevel::name))
    }

    /// Whether an executor outside `avoid` has the role and is not out for the run.
    pub fn can_ever_serve(&self, role: &str, avoid: &[String]) -> Result<bool, Error> {
        let r = self.role_index(role)?;
        Ok(self.can_serve(r, &Avoid::new(avoid.to_vec()), None))
    }

    /// The probes in flight (asked, no result folded yet), as the `probe` outputs that
    /// started them, in roster order: what a shared roster's new leader redoes
    /// (`crate::log`; a result that arrives twice is ignored).
    pub fn probes_in_flight(&self) -> Vec<Output> {
        self.roster
            .executors
            .iter()
            .filter(|x| x.runtime.probe_in_flight)
            .filter_map(|x| {
                let url = x.spec.health.clone()?;
                Some(Output::Probe {
                    executor: x.spec.id.clone(),
                    url,
                })
            })
            .collect()
    }

    pub fn snapshot(&self) -> Snapshot {
        let roles = &self.document.roles;
        // Each executor's leases, in lease order (by executor index; leases on an
        // executor the roster does not have are listed nowhere).
        let mut leases_of: Vec<Vec<LeaseStatus>> = vec![Vec::new(); self.roster.executors.len()];
        for (id, lease) in self.leases.open.iter() {
            let Some(list) = self
                .roster
                .index
                .get(&lease.executor)
                .and_then(|e| leases_of.get_mut(e))
            else {
                continue;
            };
            list.push(LeaseStatus {
                lease: id,
                request: lease.request.clone(),
                role: lease.role.as_deref().map(str::to_string),
                label: lease.label.clone(),
                purpose: lease.purpose.clone(),
                clone: lease.clone,
                hold: lease.hold.clone(),
                since: lease.since,
                occupied: lease.occupied,
                deleting: lease.deleting,
                borrowed: lease.borrowed,
                because: lease.because,
                owner: lease.owner.clone(),
                tenant: lease.tenant.clone(),
            });
        }
        let executors = self
            .roster
            .executors
            .iter()
            .enumerate()
            .map(|(e, x)| ExecutorStatus {
                id: x.spec.id.clone(),
                harness: x.spec.harness.clone(),
                model: x.spec.model.clone(),
                roles: x.spec.roles.clone(),
                slots: if x.draining { 0 } else { x.spec.slots },
                role_caps: x
                    .role_indexes
                    .iter()
                    .map(|&r| (roles[r].clone(), x.cap(r)))
                    .collect(),
                priority: x
                    .role_indexes
                    .iter()
                    .map(|&r| (roles[r].clone(), x.priority(r).0))
                    .collect(),
                busy: x.busy,
                busy_by_role: x
                    .role_indexes
                    .iter()
                    .map(|&r| (roles[r].clone(), x.busy_in(r)))
                    .collect(),
                exclusion: x
                    .runtime
                    .exclusion
                    .as_ref()
                    .map(|exclusion| ExclusionStatus {
                        kind: exclusion.kind,
                        reason: exclusion.reason.clone(),
                        until: exclusion.end(),
                        since: exclusion.since,
                        next_probe_at: (exclusion.kind == ExclusionKind::Health
                            && self.options.can_probe)
                            .then(|| self.probe_due(e)),
                        then_until: exclusion.then.as_ref().map(|(t, _)| *t),
                        description: describe(exclusion),
                    }),
                pause: x.runtime.pause.as_ref().map(|p| PauseStatus {
                    failures: p.failures,
                    until: p.until,
                    message: p.message.clone(),
                    blocked: p.blocked,
                    reason: p.reason.clone(),
                    failed_at: iso(p.failed_at),
                    retry_at: iso(p.until),
                }),
                draining: x.draining,
                provision: x.spec.provision,
                leases: std::mem::take(&mut leases_of[e]),
                preflight: sorted::get(&self.reloads.preflights, &x.spec.id).cloned(),
                probe_in_flight: x.runtime.probe_in_flight,
                recent_rate_limits: x
                    .runtime
                    .rate_limits
                    .iter()
                    .filter(|&&t| t.saturating_add(self.options.rate_limit_window_ms) > self.now)
                    .count() as u32,
                probation: x.runtime.recovery.probation,
                backoff: self.backoff_now(e),
                failures_in_a_row: x.runtime.recovery.failures,
            })
            .collect();
        let mut queue: Vec<(OrderKey, usize, QueuedRequest)> = Vec::new();
        for (r, entries) in self.queue.by_role.iter().enumerate() {
            for &(_, s) in entries.iter() {
                let Some(q) = self.queue.requests.at(s) else {
                    debug_assert!(false, "a queued slot holds a request");
                    continue;
                };
                queue.push((
                    q.key,
                    r,
                    QueuedRequest {
                        request: String::from(&*q.id),
                        role: roles[r].clone(),
                        rank: q.rank(),
                        event_time: q.event_time(),
                        label: q.label().map(str::to_string),
                        purpose: q.purpose().map(str::to_string),
                        pin: q.pin().map(str::to_string),
                        avoid: q.avoid().as_given().to_vec(),
                        prefer: q.prefer().map(str::to_string),
                        deadline: q.deadline(),
                        ahead: 0,
                        waiting_since: q.since,
                        owner: q.owner().map(str::to_string),
                        tenant: q.tenant().map(str::to_string),
                    },
                ));
            }
        }
        queue.sort_by_key(|a| a.0);
        // In lease order, with a running count per role: ahead of each request are the
        // earlier ones of the roles that compete with its own.
        // Pinned requests are counted by pin (`ahead_of` says who competes).
        let mut seen = vec![0u32; roles.len()];
        let mut seen_pinned: sorted::StrMap<u32> = Vec::new();
        for (_, r, q) in &mut queue {
            let unpinned =
                |roles: &mut dyn Iterator<Item = usize>| -> u32 { roles.map(|o| seen[o]).sum() };
            q.ahead = match &q.pin {
                Some(pin) => {
                    let same = sorted::get(&seen_pinned, pin).copied().unwrap_or(0);
                    match self.roster.index.get(pin) {
                        None => same,
                        Some(e) => {
                            let x = &self.roster.executors[e];
                            same + unpinned(
                                &mut x.role_indexes.iter().copied().filter(|&o| self.takes(e, o)),
                            )
                        }
                    }
                }
                None => {
                    let overlap: &[usize] = self
                        .roster
                        .roles
                        .overlap
                        .get(*r)
                        .map_or(std::slice::from_ref(r), Vec::as_slice);
                    unpinned(&mut overlap.iter().copied())
                        + seen_pinned
                            .iter()
                            .filter(|(pin, _)| {
                                self.roster
                                    .index
                                    .get(pin)
                                    .is_some_and(|e| self.takes(e, *r))
                            })
                            .map(|(_, n)| n)
                            .sum::<u32>()
                }
            };
            match &q.pin {
                Some(pin) => *sorted::entry(&mut seen_pinned, pin) += 1,
                None => seen[*r] += 1,
            }
        }
        let creating = self
            .queue
            .requests
            .values()
            .filter_map(|q| {
                q.creating.as_ref().map(|c| CreatingRequest {
                    request: String::from(&*q.id),
                    executor: c.executor.clone(),
                    role: self.roster.request_role_name(q).to_string(),
                    since: q.since,
                    owner: q.owner().map(str::to_string),
                })
            })
            .collect();
        Snapshot {
            now: self.now,
            roles: roles.clone(),
            executors,
            queue: queue.into_iter().map(|(_, _, q)| q).collect(),
            creating,
            pending_reload: self.reloads.pending.as_ref().map(|p| PendingReloadStatus {
                since: p.since,
                awaiting: p.awaiting.clone(),
            }),
            wake_at: self.poll_timeout(),
        }
    }

    /// Why each executor can or cannot take a request (waiting or hypothetical) now.
    pub fn explain(&self, request: &ExplainRequest) -> Result<Explanation, Error> {
        let waiting = request
            .request
            .as_deref()
            .and_then(|id| self.queue.requests.get(id));
        let purpose = waiting.and_then(|q| q.purpose().map(str::to_string));
        let (tenant, turn) = waiting.map(|q| self.tenant_turn(q)).unwrap_or_default();
        let (role, avoid, prefer, pin, affinity) = match &request.request {
            Some(id) => {
                let q = self
                    .queue
                    .requests
                    .get(id)
                    .ok_or_else(|| Error::UnknownRequest { id: id.clone() })?;
                (
                    self.roster.request_role_name(q).to_string(),
                    q.avoid().clone(),
                    q.prefer().map(str::to_string),
                    q.pin().map(str::to_string),
                    q.affinity().map(str::to_string),
                )
            }
            None => (
                request.role.clone(),
                Avoid::new(request.avoid.clone()),
                request.prefer.clone(),
                request.pin.clone(),
                request.affinity.clone(),
            ),
        };
        let r = self.role_index(&role)?;
        let executors = self
            .roster
            .executors
            .iter()
            .enumerate()
            .map(|(e, x)| {
                let mut reasons = Vec::new();
                let id = &x.spec.id;
                if !x.has_role(r) {
                    reasons.push(format!("lacks the role {role}"));
                }
                if pin.as_ref().is_some_and(|p| p != id) {
                    reasons.push(format!(
                        "the request is pinned to {}",
                        pin.clone().unwrap_or_default()
                    ));
                }
                if avoid.contains(id) {
                    reasons.push("avoided by the request".to_string());
                }
                if x.draining {
                    reasons.push("removed by a reload; draining".to_string());
                }
                if let Some(exclusion) = &x.runtime.exclusion {
                    reasons.push(format!("out of the round {}", Described(exclusion)));
                }
                if pin.is_none() && x.spec.provision {
                    if let Some(p) = x.runtime.pause.as_ref().filter(|p| p.blocked) {
                        reasons.push(format!(
                            "paused creating machines until {} after {} failure(s)",
                            iso(p.until),
                            p.failures
                        ));
                    }
                }
                if let Some(line) = self.budget_line(e) {
                    reasons.push(line);
                }
                if x.has_role(r) && !x.draining {
                    if x.busy >= x.spec.slots {
                        reasons.push(format!("busy ({} of {} slots)", x.busy, x.spec.slots));
                    } else if x.busy >= x.slots_now() {
                        reasons.push(ON_PROBATION.to_string());
                    } else if x.busy_in(r) >= x.cap(r) {
                        reasons.push(format!(
                            "role cap reached ({role} {} of {})",
                            x.busy_in(r),
                            x.cap(r)
                        ));
                    }
                }
                ExecutorExplanation {
                    id: id.clone(),
                    ok: reasons.is_empty(),
                    reasons,
                    priority: x.has_role(r).then_some(x.priority(r).0),
                }
            })
            .collect::<Vec<_>>();
        let hypothetical = Request {
            id: Box::from(""),
            key: order_key((0, 0, 0, 0)),
            since: self.now,
            role: self.roster.roles.ids.get(r).copied().unwrap_or(0),
            announced: true,
            try_only: false,
            has_event_time: false,
            label: None,
            owner: None,
            extra: request_extra(Given {
                avoid: avoid.as_given().to_vec(),
                prefer,
                pin: pin.clone(),
                affinity,
                ..Given::default()
            }),
            creating: None,
        };
        let pick = match &pin {
            Some(p) => self
                .roster
                .index
                .get(p)
                .filter(|&e| self.pin_ready(e, r) && !avoid.contains(p)),
            None => self.pick(&hypothetical, r),
        };
        let affinity = self.affinity_line(&hypothetical, r, pick);
        let pick = pick.map(|e| self.roster.executors[e].spec.id.clone());
        let mut explanation = Explanation {
            role,
            pick,
            can_ever_serve: self.can_serve(r, &avoid, pin.as_deref()),
            purpose,
            tenant,
            turn,
            affinity,
            executors,
        };
        if let Some(p) = &pin {
            if !self.roster.index.contains_key(p) {
                explanation.executors.push(ExecutorExplanation {
                    id: p.clone(),
                    ok: false,
                    reasons: vec!["not in the roster (the pinned request waits for a reload that declares it)".into()],
                    priority: None,
                });
            }
        }
        Ok(explanation)
    }

    /// A dry run of a reload: which executors drain, which waiters would be granted
    /// or exhausted. Changes nothing.
    pub fn plan(&self, document: &Value) -> Result<Plan, Error> {
        let parsed = Document::from_json(document, self.options.kinds.as_deref())
            .map_err(|violations| Error::InvalidDocument { violations })?;
        let mut plan = Plan {
            added: Vec::new(),
            draining: Vec::new(),
            leaving: Vec::new(),
            resized: Vec::new(),
            changed: Vec::new(),
            granted: Vec::new(),
            exhausted: Vec::new(),
            preflight: if self.options.preflight_reloads {
                self.needs_preflight(&parsed).into_iter().collect()
            } else {
                Vec::new()
            },
        };
        for spec in &parsed.executors {
            match self.roster.index.get(&spec.id) {
                None => plan.added.push(spec.id.clone()),
                Some(e) => {
                    let x = &self.roster.executors[e];
                    if x.draining {
                        plan.added.push(spec.id.clone());
                    } else if x.spec.slots != spec.slots {
                        plan.resized.push(Resize {
                            id: spec.id.clone(),
                            from: x.spec.slots,
                            to: spec.slots,
                            running: x.busy,
                        });
                    } else if x.spec.roles != spec.roles
                        || x.spec.role_caps != spec.role_caps
                        || x.spec.priority != spec.priority
                        || x.spec.raw != spec.raw
                    {
                        plan.changed.push(spec.id.clone());
                    }
                }
            }
        }
        for x in &self.roster.executors {
            if parsed.executor(&x.spec.id).is_none() && !x.draining {
                if x.busy > 0 {
                    plan.draining.push(x.spec.id.clone());
                } else {
                    plan.leaving.push(x.spec.id.clone());
                }
            }
        }
        let mut trial = self.clone();
        trial.outputs.clear();
        trial.apply_reload(parsed);
        trial.grant_pass();
        while let Some(output) = trial.poll_output() {
            match output {
                Output::Granted {
                    request, executor, ..
                }
                | Output::CreateMachine {
                    request, executor, ..
                } => plan.granted.push(PlannedGrant { request, executor }),
                Output::Exhausted { request, .. } => plan.exhausted.push(request),
                _ => {}
            }
        }
        Ok(plan)
    }
}
