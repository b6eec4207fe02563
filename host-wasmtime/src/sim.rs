//! `rota simulate`: the real policy module, driven through wasmtime against simulated
//! executors, in virtual time, with every fault drawn from one seed.
//!
//! The world: jobs arrive (a Poisson process sized to keep the roster about 80% busy),
//! each asks for a lease for a role (some ranked, some avoiding an executor, some with
//! a deadline), holds it for a while, and gives it back. Executors misbehave: calls hit
//! rate limits (some with `Retry-After`), usage limits (with a reset time), and whole
//! executors go down for minutes at a time (their health URL answers "down" until
//! they are back; probes take 150 ms). Machines for `provision` executors take 20-40 s
//! and sometimes fail. An operator pauses one executor for half an hour mid-run.
//!
//! The same seed gives the same run, step for step: the trace it writes replays
//! exactly (`rota replay`). A `tick` is fed only when the core's wake-up time has
//! come and no other input came at or after it: a trace has no empty ticks.
//!
//! With `tracing` enabled for `rota::core` (`rota -v simulate`), the core's events are
//! logged in a span `sim{at=...}` that gives their virtual time; `rota::sim` at debug
//! logs every input.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use rota_core::{Document, Output};
use serde_json::{json, Value};

use crate::error::{HostError, Result};
use crate::event::Event;
use crate::output;
use crate::runtime::PolicyRuntime;
use crate::trace::TraceWriter;

/// 2026-01-01T00:00:00Z: the simulation's epoch.
pub const SIM_START_MS: u64 = 1_767_225_600_000;

const MINUTE: u64 = 60_000;

/// splitmix64: small, fast, and the same on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Uniform in [lo, hi].
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi.saturating_sub(lo) + 1)
    }

    /// Exponential with this mean.
    pub fn exp(&mut self, mean: f64) -> u64 {
        (-(1.0 - self.unit()).ln() * mean).round() as u64
    }
}

/// How a simulation runs.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Seed of every random draw.
    pub seed: u64,
    /// Virtual hours.
    pub hours: f64,
    /// Mean job length.
    pub mean_job_ms: u64,
    /// Offered load as a fraction of all slots.
    pub load: f64,
    /// Per finished call: chance of a rate limit / a usage limit.
    pub rate_limit_chance: f64,
    /// Per finished call: chance of a usage limit.
    pub usage_limit_chance: f64,
    /// Mean time between an executor's outages, and their length range.
    pub mean_time_between_outages_ms: u64,
    /// The shortest and longest outage.
    pub outage_ms: (u64, u64),
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            hours: 8.0,
            mean_job_ms: 4 * MINUTE,
            load: 0.8,
            rate_limit_chance: 0.03,
            usage_limit_chance: 0.004,
            mean_time_between_outages_ms: 3 * 60 * MINUTE,
            outage_ms: (2 * MINUTE, 15 * MINUTE),
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct SimReport {
    /// Inputs fed.
    pub steps: u64,
    /// Lease requests made.
    pub requests: u64,
    /// Leases granted.
    pub granted: u64,
    /// Requests that ended exhausted.
    pub exhausted: u64,
    /// Requests that timed out.
    pub timed_out: u64,
    /// Still waiting when the run ended.
    pub cancelled: u64,
    /// Inputs the core rejected.
    pub rejected_inputs: u64,
    /// Wait of each granted request (ms).
    pub waits_ms: Vec<u64>,
    /// Exclusions, by kind.
    pub exclusions_by_kind: BTreeMap<String, u64>,
    /// Health probes asked for.
    pub probes: u64,
    /// State-file writes asked for.
    pub persists: u64,
    /// Machines created.
    pub machines_created: u64,
    /// Machine creations that failed.
    pub machines_failed: u64,
    /// (executor, slots, busy slot-ms).
    pub executors: Vec<(String, u32, u128)>,
    /// The simulated time (ms).
    pub duration_ms: u64,
}

impl SimReport {
    /// Mean wait of the granted requests (ms).
    pub fn mean_wait_ms(&self) -> f64 {
        if self.waits_ms.is_empty() {
            0.0
        } else {
            self.waits_ms.iter().sum::<u64>() as f64 / self.waits_ms.len() as f64
        }
    }

    /// The `p` quantile of the waits (ms), `p` in [0, 1].
    pub fn percentile_wait_ms(&self, p: f64) -> u64 {
        let mut waits = self.waits_ms.clone();
        waits.sort_unstable();
        if waits.is_empty() {
            return 0;
        }
        let rank = ((p * waits.len() as f64).ceil() as usize).clamp(1, waits.len());
        waits[rank - 1]
    }

    /// Each executor's share of its slot-time that was leased (0 to 1).
    pub fn utilization(&self) -> Vec<(&str, u32, f64)> {
        self.executors
            .iter()
            .map(|(id, slots, busy)| {
                let capacity = u128::from(*slots) * u128::from(self.duration_ms.max(1));
                let share = if capacity == 0 {
                    0.0
                } else {
                    *busy as f64 / capacity as f64
                };
                (id.as_str(), *slots, share)
            })
            .collect()
    }

    /// The summary tables.
    pub fn render(&self) -> String {
        let secs = |ms: f64| format!("{:.1} s", ms / 1000.0);
        let mut out = format!(
            "simulated {:.1} h in {} steps\n\n",
            self.duration_ms as f64 / 3_600_000.0,
            self.steps
        );
        let mut summary = crate::table::plain();
        for (name, value) in [
            ("lease requests", self.requests.to_string()),
            ("leases granted", self.granted.to_string()),
            ("timed out", self.timed_out.to_string()),
            ("left waiting", self.cancelled.to_string()),
            ("exhausted", self.exhausted.to_string()),
            ("mean wait", secs(self.mean_wait_ms())),
            ("p50 wait", secs(self.percentile_wait_ms(0.50) as f64)),
            ("p99 wait", secs(self.percentile_wait_ms(0.99) as f64)),
            ("health probes", self.probes.to_string()),
            ("state writes", self.persists.to_string()),
            (
                "machines",
                format!(
                    "{} created, {} failed",
                    self.machines_created, self.machines_failed
                ),
            ),
        ] {
            summary.add_row([name.to_string(), value]);
        }
        out.push_str(&format!("{}\n", crate::table::render(&summary)));
        out.push_str("\nexclusions by kind\n");
        if self.exclusions_by_kind.is_empty() {
            out.push_str("  (none)\n");
        } else {
            let mut kinds = crate::table::plain();
            for (kind, count) in &self.exclusions_by_kind {
                kinds.add_row([kind.clone(), count.to_string()]);
            }
            out.push_str(&format!("{}\n", crate::table::render(&kinds)));
        }
        out.push_str("\nutilization per executor\n");
        let mut executors = crate::table::plain();
        executors.set_header(["executor", "slots", "utilization", ""]);
        for (id, slots, share) in self.utilization() {
            executors.add_row([
                id.to_string(),
                slots.to_string(),
                format!("{:.1}%", share * 100.0),
                "#".repeat((share * 20.0).round() as usize),
            ]);
        }
        crate::table::align_right(&mut executors, &[1, 2]);
        out.push_str(&format!("{}\n", crate::table::render(&executors)));
        out
    }

    /// The report as JSON (`rota simulate --json`; the README gives the shape).
    pub fn to_json(&self) -> Value {
        json!({
            "simulatedHours": self.duration_ms as f64 / 3_600_000.0,
            "steps": self.steps,
            "requests": self.requests,
            "granted": self.granted,
            "timedOut": self.timed_out,
            "leftWaiting": self.cancelled,
            "exhausted": self.exhausted,
            "rejectedInputs": self.rejected_inputs,
            "waitMs": {
                "mean": self.mean_wait_ms(),
                "p50": self.percentile_wait_ms(0.50),
                "p99": self.percentile_wait_ms(0.99),
            },
            "probes": self.probes,
            "stateWrites": self.persists,
            "machines": { "created": self.machines_created, "failed": self.machines_failed },
            "exclusionsByKind": self.exclusions_by_kind,
            "executors": self.utilization().into_iter().map(|(id, slots, share)| json!({
                "id": id, "slots": slots, "utilization": share,
            })).collect::<Vec<_>>(),
        })
    }
}

/// Something that happens at a virtual instant.
#[derive(Debug, Clone)]
enum Happening {
    Arrival,
    JobEnd {
        lease: u64,
        executor: String,
    },
    Release {
        lease: u64,
        executor: String,
    },
    ProbeAnswer {
        executor: String,
    },
    MachineAnswer {
        request: String,
        executor: String,
    },
    Preflight {
        executor: String,
    },
    /// The host deleted a released lease's machine (its slot frees then).
    Deleted {
        lease: u64,
    },
    OutageStart {
        executor: String,
    },
    Tick,
    Pause {
        executor: String,
    },
    Resume {
        executor: String,
    },
    /// The run ends: requests still waiting are cancelled.
    End,
    Cancel {
        request: String,
    },
}

struct SimExecutor {
    id: String,
    /// Busy time counts up to the end of the run only.
    end: u64,
    slots: u32,
    down_until: u64,
    busy: u32,
    busy_ms: u128,
    last_change: u64,
}

impl SimExecutor {
    fn set_busy(&mut self, now: u64, busy: u32) {
        let (from, to) = (self.last_change.min(self.end), now.min(self.end));
        self.busy_ms += u128::from(self.busy) * u128::from(to.saturating_sub(from));
        self.last_change = now;
        self.busy = busy;
    }
}

struct World {
    rng: Rng,
    config: SimConfig,
    now: u64,
    end: u64,
    seq: u64,
    agenda: BinaryHeap<Reverse<(u64, u64)>>,
    happenings: BTreeMap<u64, Happening>,
    executors: Vec<SimExecutor>,
    roles: Vec<(String, u32)>,
    requested_at: BTreeMap<String, u64>,
    next_job: u64,
    next_machine: u64,
    /// The core's wake-up time, from its last answer.
    wake_at: Option<u64>,
    /// The time of the last input fed: the core has done everything due by then.
    last_input_at: Option<u64>,
    /// Times with a `Tick` in the agenda.
    ticks: BTreeSet<u64>,
    /// Whether the core's events go to `tracing` (`rota -v simulate`).
    log_events: bool,
    report: SimReport,
}

impl World {
    fn at(&mut self, when: u64, happening: Happening) {
        self.seq += 1;
        self.agenda.push(Reverse((when, self.seq)));
        self.happenings.insert(self.seq, happening);
    }

    fn executor(&mut self, id: &str) -> Option<&mut SimExecutor> {
        self.executors.iter_mut().find(|e| e.id == id)
    }

    fn up(&self, id: &str) -> bool {
        self.executors
            .iter()
            .find(|e| e.id == id)
            .is_none_or(|e| self.now >= e.down_until)
    }

    fn pick_role(&mut self) -> String {
        let total: u32 = self.roles.iter().map(|(_, w)| w).sum();
        let mut draw = (self.rng.next_u64() % u64::from(total.max(1))) as u32;
        for (role, weight) in &self.roles {
            if draw < *weight {
                return role.clone();
            }
            draw -= weight;
        }
        self.roles
            .first()
            .map(|(r, _)| r.clone())
            .unwrap_or_default()
    }

    /// The input for a happening (and the follow-ups it schedules).
    fn input_for(&mut self, happening: Happening) -> Option<Value> {
        let now = self.now;
        match happening {
            Happening::Arrival => {
                let mean_gap = self.arrival_gap_ms();
                let gap = self.rng.exp(mean_gap).max(1);
                if now + gap < self.end {
                    self.at(now + gap, Happening::Arrival);
                }
                self.next_job += 1;
                let id = format!("j{}", self.next_job);
                let role = self.pick_role();
                let mut request = json!({ "type": "lease", "now": now, "id": id, "role": role });
                if self.rng.chance(0.3) {
                    request["rank"] = json!(self.rng.between(0, 5));
                }
                if self.rng.chance(0.15) {
                    request["deadline"] = json!(now + self.rng.between(5, 30) * MINUTE);
                }
                if self.rng.chance(0.1) && !self.executors.is_empty() {
                    let index = (self.rng.next_u64() % self.executors.len() as u64) as usize;
                    request["avoid"] = json!([self.executors[index].id]);
                }
                request["label"] = json!(format!("job {}", self.next_job));
                self.requested_at.insert(id, now);
                self.report.requests += 1;
                Some(request)
            }
            Happening::JobEnd { lease, executor } => {
                // The job's last call may have failed: report first, then release.
                let failure = if !self.up(&executor) {
                    Some(json!({ "kind": "outage", "message": "connection refused" }))
                } else if self.rng.chance(self.config.usage_limit_chance) {
                    let reset = now + self.rng.between(10, 60) * MINUTE;
                    Some(
                        json!({ "kind": "usageLimit", "message": "usage limit reached", "resetAt": reset }),
                    )
                } else if self.rng.chance(self.config.rate_limit_chance) {
                    let mut f = json!({ "kind": "rateLimit", "message": "HTTP 429" });
                    if self.rng.chance(0.5) {
                        f["retryAfterMs"] = json!(self.rng.between(30, 300) * 1000);
                    }
                    Some(f)
                } else {
                    None
                };
                match failure {
                    Some(failure) => {
                        // The release follows right after the report.
                        self.at(
                            now,
                            Happening::Release {
                                lease,
                                executor: executor.clone(),
                            },
                        );
                        Some(
                            json!({ "type": "report", "now": now, "executor": executor, "failure": failure }),
                        )
                    }
                    None => self.input_for(Happening::Release { lease, executor }),
                }
            }
            Happening::Release { lease, executor } => {
                if let Some(e) = self.executor(&executor) {
                    let busy = e.busy.saturating_sub(1);
                    e.set_busy(now, busy);
                }
                Some(json!({ "type": "release", "now": now, "lease": lease }))
            }
            Happening::ProbeAnswer { executor } => {
                let up = self.up(&executor);
                Some(json!({ "type": "probeResult", "now": now, "executor": executor, "up": up }))
            }
            Happening::Deleted { lease } => {
                Some(json!({ "type": "machineDeleted", "now": now, "lease": lease, "ok": true }))
            }
            Happening::MachineAnswer { request, executor } => {
                if self.rng.chance(0.1) {
                    self.report.machines_failed += 1;
                    Some(
                        json!({ "type": "machineFailed", "now": now, "id": request, "message": "quota exceeded in zone" }),
                    )
                } else {
                    self.next_machine += 1;
                    self.report.machines_created += 1;
                    let hold = json!({ "machine": format!("m{}", self.next_machine), "executor": executor });
                    Some(
                        json!({ "type": "machineCreated", "now": now, "id": request, "hold": hold }),
                    )
                }
            }
            Happening::Preflight { executor } => Some(
                json!({ "type": "preflightResult", "now": now, "executor": executor, "ok": true }),
            ),
            Happening::OutageStart { executor } => {
                let (lo, hi) = self.config.outage_ms;
                let length = self.rng.between(lo, hi);
                let next = now
                    + length
                    + self
                        .rng
                        .exp(self.config.mean_time_between_outages_ms as f64);
                if next < self.end {
                    self.at(
                        next,
                        Happening::OutageStart {
                            executor: executor.clone(),
                        },
                    );
                }
                if let Some(e) = self.executor(&executor) {
                    e.down_until = now + length;
                }
                // Nothing to feed: the outage shows in reports and probes.
                None
            }
            Happening::Tick => {
                self.ticks.remove(&now);
                // Only when the wake-up time has come, and not at the time of the last
                // input (which did everything due by then): no empty ticks.
                let due = self.wake_at.is_some_and(|wake| wake <= now)
                    && self.last_input_at.is_none_or(|last| now > last);
                due.then(|| json!({ "type": "tick", "now": now }))
            }
            Happening::Pause { executor } => Some(json!({
                "type": "exclude", "now": now, "executor": executor, "kind": "manual",
                "reason": "operator: maintenance window", "until": now + 30 * MINUTE
            })),
            Happening::Resume { executor } => {
                Some(json!({ "type": "resume", "now": now, "executor": executor }))
            }
            Happening::End => {
                let waiting: Vec<String> = self.requested_at.keys().cloned().collect();
                for request in waiting {
                    self.at(now, Happening::Cancel { request });
                }
                None
            }
            Happening::Cancel { request } => self
                .requested_at
                .contains_key(&request)
                .then(|| json!({ "type": "cancel", "now": now, "id": request })),
        }
    }

    fn arrival_gap_ms(&self) -> f64 {
        let slots: u32 = self.executors.iter().map(|e| e.slots).sum();
        let jobs_per_ms =
            f64::from(slots.max(1)) * self.config.load / self.config.mean_job_ms as f64;
        1.0 / jobs_per_ms
    }

    /// Carries out one step's outputs.
    fn absorb(&mut self, result: &Value) {
        let now = self.now;
        if result.get("error").is_some() {
            self.report.rejected_inputs += 1;
            return;
        }
        for raw in result["outputs"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let output = match output::read(raw) {
                Ok(output) => output,
                Err(unreadable) => {
                    unreadable.log();
                    continue;
                }
            };
            match output {
                Output::Granted {
                    request,
                    lease,
                    executor,
                    ..
                } => {
                    self.report.granted += 1;
                    if let Some(at) = self.requested_at.remove(&request) {
                        self.report.waits_ms.push(now - at);
                    }
                    if let Some(e) = self.executor(&executor) {
                        let busy = e.busy + 1;
                        e.set_busy(now, busy);
                    }
                    let length = self
                        .rng
                        .exp(self.config.mean_job_ms as f64)
                        .clamp(20_000, 45 * MINUTE);
                    self.at(now + length, Happening::JobEnd { lease, executor });
                }
                Output::Exhausted { request, .. } => {
                    self.report.exhausted += 1;
                    self.requested_at.remove(&request);
                }
                Output::TimedOut { request, .. } => {
                    self.report.timed_out += 1;
                    self.requested_at.remove(&request);
                }
                Output::Cancelled { request, .. } => {
                    self.report.cancelled += 1;
                    self.requested_at.remove(&request);
                }
                // The simulated callers never try a lease, and a waiting request's
                // wait is counted when it ends.
                Output::Unavailable { .. } | Output::Waiting { .. } => {}
                Output::Probe { executor, .. } => {
                    self.report.probes += 1;
                    self.at(now + 150, Happening::ProbeAnswer { executor });
                }
                Output::CreateMachine {
                    request, executor, ..
                } => {
                    let delay = self.rng.between(20, 40) * 1000;
                    self.at(now + delay, Happening::MachineAnswer { request, executor });
                }
                Output::DeleteMachine { lease, .. } => {
                    if let Some(lease) = lease {
                        self.at(now + 2000, Happening::Deleted { lease });
                    }
                }
                Output::Preflight { executor } => {
                    self.at(now + 1000, Happening::Preflight { executor })
                }
                // Every preflight of the simulation passes.
                Output::StartFailed { .. } => {}
                Output::Persist { .. } => self.report.persists += 1,
                Output::Event {
                    level,
                    name,
                    message,
                    fields,
                } => {
                    if name == "excluded" {
                        let kind = fields.get("kind").and_then(Value::as_str).unwrap_or("?");
                        *self
                            .report
                            .exclusions_by_kind
                            .entry(kind.to_string())
                            .or_default() += 1;
                    }
                    if self.log_events {
                        Event::core(level, &name, message, &fields).log();
                    }
                }
            }
        }
        self.wake_at = result["wakeAt"].as_u64();
        // A tick at the wake-up time (once per time; one that is no longer due when
        // its time comes is not fed). A wake-up time not after this input needs none.
        if let Some(wake) = self.wake_at.filter(|&w| w > now && w < self.end) {
            if self.ticks.insert(wake) {
                self.at(wake, Happening::Tick);
            }
        }
    }
}

/// Runs a simulation on `runtime` (built from `document`). `progress` sees the share
/// of virtual time done; `trace` records every step.
pub fn simulate(
    runtime: &mut PolicyRuntime,
    document: &Value,
    config: &SimConfig,
    mut trace: Option<&mut TraceWriter>,
    mut progress: impl FnMut(f64, u64),
) -> Result<SimReport> {
    let parsed = Document::from_json(document, None)
        .map_err(|violations| HostError::Invalid { violations })?;
    let start = SIM_START_MS;
    let duration = (config.hours.max(0.0) * 3_600_000.0) as u64;
    let mut world = World {
        rng: Rng::new(config.seed),
        config: config.clone(),
        now: start,
        end: start + duration,
        seq: 0,
        agenda: BinaryHeap::new(),
        happenings: BTreeMap::new(),
        executors: parsed
            .executors
            .iter()
            .map(|e| SimExecutor {
                id: e.id.clone(),
                end: start + duration,
                slots: e.slots,
                down_until: 0,
                busy: 0,
                busy_ms: 0,
                last_change: start,
            })
            .collect(),
        roles: parsed
            .roles
            .iter()
            .map(|r| {
                let weight = match r.as_str() {
                    "coder" => 4,
                    "reviewer" => 2,
                    _ => 1,
                };
                (r.clone(), weight)
            })
            .collect(),
        requested_at: BTreeMap::new(),
        next_job: 0,
        next_machine: 0,
        wake_at: None,
        last_input_at: None,
        ticks: BTreeSet::new(),
        // Decided once: building events costs, a disabled callsite does not.
        log_events: tracing::enabled!(target: "rota::core", tracing::Level::WARN),
        report: SimReport::default(),
    };
    world.at(start, Happening::Arrival);
    world.at(world.end, Happening::End);
    for index in 0..world.executors.len() {
        let first = start + world.rng.exp(config.mean_time_between_outages_ms as f64);
        if first < world.end {
            let executor = world.executors[index].id.clone();
            world.at(first, Happening::OutageStart { executor });
        }
    }
    if let Some(first) = world.executors.first().map(|e| e.id.clone()) {
        let pause_at = start + duration / 2;
        world.at(
            pause_at,
            Happening::Pause {
                executor: first.clone(),
            },
        );
        world.at(
            pause_at + 20 * MINUTE,
            Happening::Resume { executor: first },
        );
    }

    let mut last_share = -1.0;
    while let Some(Reverse((when, seq))) = world.agenda.pop() {
        let Some(happening) = world.happenings.remove(&seq) else {
            continue;
        };
        // After the end only the leases still out come back.
        if when > world.end
            && !matches!(
                happening,
                Happening::JobEnd { .. } | Happening::Release { .. }
            )
        {
            continue;
        }
        world.now = when;
        let Some(input) = world.input_for(happening) else {
            continue;
        };
        let input_text = input.to_string();
        // The virtual time of what the step logs.
        let _at = world.log_events.then(|| {
            tracing::info_span!(target: "rota::sim", "sim", at = %rota_core::iso_time(when))
                .entered()
        });
        tracing::debug!(target: "rota::sim", input = %input_text, "input");
        let text = runtime.step_text(&input_text)?;
        let result: Value = serde_json::from_str(&text)
            .map_err(|e| HostError::Abi(format!("a step result is not JSON: {e}")))?;
        world.report.steps += 1;
        world.last_input_at = Some(when);
        if let Some(trace) = trace.as_deref_mut() {
            trace.step_text(&input_text, &text)?;
        }
        world.absorb(&result);
        let share = ((when - start) as f64 / duration.max(1) as f64).min(1.0);
        if share - last_share >= 0.01 {
            last_share = share;
            progress(share, world.report.steps);
        }
    }
    progress(1.0, world.report.steps);
    let end = world.end;
    world.report.duration_ms = duration;
    for e in &mut world.executors {
        e.set_busy(end, e.busy);
    }
    world.report.executors = world
        .executors
        .iter()
        .map(|e| (e.id.clone(), e.slots, e.busy_ms))
        .collect();
    Ok(world.report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_stable() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert!((0..1000).all(|_| (0.0..1.0).contains(&a.unit())));
    }

    #[test]
    fn percentiles() {
        let report = SimReport {
            waits_ms: (1..=100).collect(),
            ..SimReport::default()
        };
        assert_eq!(report.percentile_wait_ms(0.99), 99);
        assert_eq!(report.percentile_wait_ms(0.5), 50);
    }
}
