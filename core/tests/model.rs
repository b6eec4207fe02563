//! Model-based test (proptest-state-machine): a small reference model of slots,
//! roles, leases, exclusions and the waiting queue runs beside the real core. Every
//! transition is fed to both; the core's decisions (every output but events) must be
//! exactly the ones the model expects, in the same order, and its snapshot must
//! agree with the model's state after every step.
//!
//! The roster is a simplified one: 2–4 executors, two roles (`a`, `b`), 1–3 slots,
//! optional role caps, two priority levels, no health URLs, no provisioning. The
//! transitions: lease and tryLease (avoid, prefer, pin, rank, event time, deadline,
//! duplicate ids), release (live, already released, never granted), cancel (waiting
//! or not), failure reports of every kind (with resetAt and retryAfterMs), resume,
//! and time passing (by a step, or to the core's own wake-up time).

#[path = "common/writer.rs"]
mod writer;

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};
use rota_core::{
    ExclusionKind, Failure, FailureKind, Input, LeaseRequest, Options, Output, Policy,
};
use serde_json::{json, Value};

/// The first instant of every run (epoch ms).
const T0: u64 = 1_800_000_000_000;
const ROLES: [&str; 2] = ["a", "b"];
/// The default rate-limit window and threshold (Options::default()).
const RATE_WINDOW_MS: u64 = 10 * 60_000;
const RATE_LIMITS_TO_EXCLUDE: usize = 3;
/// An executor id no document declares.
const UNKNOWN: &str = "zz";

type Key = (u8, i64, u64, u64);

// ---- The reference model --------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
enum Excl {
    Until(u64),
    Run,
}

#[derive(Clone, Debug)]
struct Exec {
    id: String,
    has: [bool; 2],
    caps: [u32; 2],
    slots: u32,
    prio: u32,
    usage_ms: u64,
    rate_ms: u64,
    outage_ms: u64,
    busy: u32,
    busy_by_role: [u32; 2],
    last_leased: u64,
    excl: Option<Excl>,
    rate_limits: Vec<u64>,
}

impl Exec {
    fn free_for(&self, r: usize) -> bool {
        self.busy < self.slots && self.busy_by_role[r] < self.caps[r]
    }

    /// It can take an unpinned request for role `r` now.
    fn ready(&self, r: usize) -> bool {
        self.has[r] && self.free_for(r) && self.excl.is_none()
    }

    /// It can ever serve role `r` in this run.
    fn servable(&self, r: usize) -> bool {
        self.caps[r] > 0 && self.excl != Some(Excl::Run)
    }
}

#[derive(Clone, Debug)]
struct Req {
    id: String,
    role: usize,
    avoid: Vec<String>,
    prefer: Option<String>,
    pin: Option<String>,
    deadline: Option<u64>,
}

#[derive(Clone, Debug)]
struct Lease {
    request: String,
    exec: usize,
    role: usize,
}

/// A decision the model expects from the core (events are not compared).
#[derive(Clone, Debug, PartialEq)]
enum Expect {
    Granted {
        request: String,
        lease: u64,
        executor: String,
        role: String,
        passed: u32,
    },
    Waiting {
        request: String,
        role: String,
        ahead: u32,
    },
    Exhausted {
        request: String,
        role: String,
    },
    TimedOut(String),
    Unavailable(String),
    Cancelled(String),
    /// The persisted exclusions: `(executor, until)` (all of kind `until` here).
    Persist(Vec<(String, u64)>),
}

#[derive(Clone, Debug)]
pub struct Model {
    document: Value,
    now: u64,
    execs: Vec<Exec>,
    /// Waiting requests in lease order.
    waiting: BTreeMap<Key, Req>,
    leases: BTreeMap<u64, Lease>,
    released: Vec<u64>,
    next_lease: u64,
    next_arrival: u64,
    lease_clock: u64,
    last_persisted: Vec<(String, u64)>,
    persist_dirty: bool,
    /// For generating fresh request ids.
    next_request: u32,
    /// What the last transition must produce.
    expected: Vec<Expect>,
    error: Option<&'static str>,
}

impl Model {
    fn new(execs: Vec<Exec>) -> Model {
        let document = json!({
            "roles": ROLES,
            "executors": execs.iter().map(|x| {
                let roles: Vec<&str> = (0..2).filter(|&r| x.has[r]).map(|r| ROLES[r]).collect();
                let mut o = json!({
                    "id": x.id,
                    "harness": "h",
                    "roles": roles,
                    "slots": x.slots,
                    "priority": x.prio,
                    "cooldown": {
                        "usageLimit": format!("{}s", x.usage_ms / 1000),
                        "rateLimit": format!("{}s", x.rate_ms / 1000),
                        "outage": format!("{}s", x.outage_ms / 1000),
                    },
                });
                let caps: serde_json::Map<String, Value> = (0..2)
                    .filter(|&r| x.has[r] && x.caps[r] < x.slots)
                    .map(|r| (ROLES[r].to_string(), json!(x.caps[r])))
                    .collect();
                if !caps.is_empty() {
                    o["roleSlots"] = Value::Object(caps);
                }
                o
            }).collect::<Vec<_>>(),
        });
        Model {
            document,
            now: T0,
            execs,
            waiting: BTreeMap::new(),
            leases: BTreeMap::new(),
            released: Vec::new(),
            next_lease: 1,
            next_arrival: 0,
            lease_clock: 0,
            last_persisted: Vec::new(),
            persist_dirty: false,
            next_request: 0,
            expected: Vec::new(),
            error: None,
        }
    }

    fn index(&self, id: &str) -> Option<usize> {
        self.execs.iter().position(|x| x.id == id)
    }

    fn is_live(&self, id: &str) -> bool {
        self.waiting.values().any(|q| q.id == id) || self.leases.values().any(|l| l.request == id)
    }

    /// Waiting requests before `key` that compete with a request of role `r` (pinned
    /// to `pin`) for an executor (DESIGN.md: "how many ahead of it compete for the
    /// same executors"): two unpinned ones when some executor takes both roles; a
    /// pinned and an unpinned one when the pin's executor takes the other's role; two
    /// pinned ones when they have the same pin (the seed's `aheadCount`).
    fn ahead_of(&self, r: usize, key: &Key, pin: Option<&str>) -> u32 {
        let takes = |id: &str, o: usize| {
            self.index(id)
                .is_some_and(|e| self.execs[e].has[o] && self.execs[e].caps[o] > 0)
        };
        let overlap = |o: usize| {
            o == r
                || self
                    .execs
                    .iter()
                    .any(|x| x.has[r] && x.has[o] && x.caps[r] > 0 && x.caps[o] > 0)
        };
        let competes = |p: &Req| match (p.pin.as_deref(), pin) {
            (None, None) => overlap(p.role),
            (Some(theirs), None) => takes(theirs, r),
            (None, Some(ours)) => takes(ours, p.role),
            (Some(theirs), Some(ours)) => theirs == ours,
        };
        self.waiting
            .iter()
            .filter(|(k, q)| *k < key && competes(q))
            .count() as u32
    }

    /// Waiting requests before `key` that executor `e` could have served (not those
    /// pinned elsewhere).
    fn passed_by(&self, e: usize, key: &Key) -> u32 {
        let x = &self.execs[e];
        self.waiting
            .iter()
            .filter(|(k, q)| {
                x.has[q.role]
                    && x.caps[q.role] > 0
                    && *k < key
                    && q.pin.as_deref().is_none_or(|pin| pin == x.id)
            })
            .count() as u32
    }

    /// The executor that would serve `q` now, if any.
    fn choose(&self, q: &Req) -> Option<usize> {
        let r = q.role;
        if let Some(pin) = &q.pin {
            return self.index(pin).filter(|&e| {
                let x = &self.execs[e];
                x.has[r] && x.free_for(r) && x.excl.is_none() && !q.avoid.contains(pin)
            });
        }
        if let Some(prefer) = &q.prefer {
            if let Some(e) = self.index(prefer) {
                if self.execs[e].ready(r) && !q.avoid.contains(prefer) {
                    return Some(e);
                }
            }
        }
        (0..self.execs.len())
            .filter(|&e| self.execs[e].ready(r) && !q.avoid.contains(&self.execs[e].id))
            .min_by_key(|&e| (self.execs[e].prio, self.execs[e].last_leased, e))
    }

    fn can_serve(&self, q: &Req) -> bool {
        if let Some(pin) = &q.pin {
            if q.avoid.contains(pin) {
                return false;
            }
            return self
                .index(pin)
                .is_none_or(|e| self.execs[e].servable(q.role));
        }
        self.execs
            .iter()
            .any(|x| x.servable(q.role) && !q.avoid.contains(&x.id))
    }

    fn grant(&mut self, q: Req, key: Key, e: usize) {
        let passed = self.passed_by(e, &key);
        self.lease_clock += 1;
        let x = &mut self.execs[e];
        x.last_leased = self.lease_clock;
        x.busy += 1;
        x.busy_by_role[q.role] += 1;
        let lease = self.next_lease;
        self.next_lease += 1;
        self.expected.push(Expect::Granted {
            request: q.id.clone(),
            lease,
            executor: x.id.clone(),
            role: ROLES[q.role].to_string(),
            passed,
        });
        self.leases.insert(
            lease,
            Lease {
                request: q.id,
                exec: e,
                role: q.role,
            },
        );
    }

    /// Grants, in lease order, every waiting request a free slot can serve.
    fn grant_pass(&mut self) {
        loop {
            let found = self
                .waiting
                .iter()
                .find_map(|(k, q)| self.choose(q).map(|e| (*k, e)));
            let Some((key, e)) = found else { break };
            let q = self.waiting.remove(&key).expect("found above");
            self.grant(q, key, e);
        }
    }

    fn end_waiting(&mut self, key: &Key, ending: fn(String) -> Expect) {
        if let Some(q) = self.waiting.remove(key) {
            self.expected.push(ending(q.id));
        }
    }

    fn exhaust(&mut self, key: &Key) {
        if let Some(q) = self.waiting.remove(key) {
            self.expected.push(Expect::Exhausted {
                request: q.id,
                role: ROLES[q.role].to_string(),
            });
        }
    }

    fn set_exclusion(&mut self, e: usize, new: Option<Excl>) {
        let old = self.execs[e].excl.clone();
        let timed = |x: &Option<Excl>| matches!(x, Some(Excl::Until(_)));
        if timed(&old) || timed(&new) {
            self.persist_dirty = true;
        }
        let to_run = old != Some(Excl::Run) && new == Some(Excl::Run);
        self.execs[e].excl = new;
        if to_run {
            // Requests nothing can serve any more end, role by role, in lease order,
            // then those pinned to this executor.
            for r in 0..2 {
                if !self.execs[e].has[r] {
                    continue;
                }
                let ended: Vec<Key> = self
                    .waiting
                    .iter()
                    .filter(|(_, q)| q.role == r && !self.can_serve(q))
                    .map(|(k, _)| *k)
                    .collect();
                for key in ended {
                    self.exhaust(&key);
                }
            }
            let id = self.execs[e].id.clone();
            let pinned: Vec<Key> = self
                .waiting
                .iter()
                .filter(|(_, q)| q.pin.as_deref() == Some(id.as_str()))
                .map(|(k, _)| *k)
                .collect();
            for key in pinned {
                self.exhaust(&key);
            }
        }
    }

    /// The strength rules for the kinds the model has: `run` lasts the run; between
    /// timed ends the later wins.
    fn exclude(&mut self, e: usize, new: Excl) {
        let merged = match (&self.execs[e].excl, &new) {
            (None, _) => new,
            (Some(Excl::Run), _) | (_, Excl::Run) => Excl::Run,
            (Some(Excl::Until(a)), Excl::Until(b)) => Excl::Until((*a).max(*b)),
        };
        if Some(&merged) != self.execs[e].excl.as_ref() {
            self.set_exclusion(e, Some(merged));
        }
    }

    fn report(&mut self, e: usize, kind: FailureKind, reset_at: Option<u64>, retry: Option<u64>) {
        let now = self.now;
        let x = &mut self.execs[e];
        let excl = match kind {
            FailureKind::ModelUnavailable | FailureKind::Authentication => Some(Excl::Run),
            FailureKind::UsageLimit => Some(Excl::Until(
                reset_at
                    .filter(|t| *t > now)
                    .or(retry.map(|ms| now.saturating_add(ms)))
                    .filter(|t| *t > now)
                    .unwrap_or(now + x.usage_ms),
            )),
            FailureKind::RateLimit => {
                x.rate_limits.retain(|&t| t + RATE_WINDOW_MS > now);
                x.rate_limits.push(now);
                if let Some(ms) = retry.filter(|ms| *ms > 0) {
                    Some(Excl::Until(now + ms))
                } else if x.rate_limits.len() >= RATE_LIMITS_TO_EXCLUDE {
                    Some(Excl::Until(now + x.rate_ms))
                } else {
                    None
                }
            }
            FailureKind::Outage => Some(Excl::Until(now + x.outage_ms)),
            FailureKind::Other => None,
        };
        if let Some(excl) = excl {
            if kind == FailureKind::RateLimit {
                self.execs[e].rate_limits.clear();
            }
            self.exclude(e, excl);
        }
    }

    fn exclusion_end(&self) -> Option<u64> {
        self.execs
            .iter()
            .filter_map(|x| match x.excl {
                Some(Excl::Until(t)) => Some(t),
                _ => None,
            })
            .min()
    }

    fn poll_timeout(&self) -> Option<u64> {
        let deadline = self.waiting.values().filter_map(|q| q.deadline).min();
        [self.exclusion_end(), deadline].into_iter().flatten().min()
    }

    /// Ends what time ends, in time order, granting between steps.
    fn advance_time(&mut self) {
        while let Some(at) = self.poll_timeout().filter(|t| *t <= self.now) {
            let mut ending: Vec<(u64, usize)> = (0..self.execs.len())
                .filter_map(|e| match self.execs[e].excl {
                    Some(Excl::Until(t)) if t <= at => Some((t, e)),
                    _ => None,
                })
                .collect();
            ending.sort();
            for (_, e) in ending {
                self.set_exclusion(e, None);
            }
            self.grant_pass();
            let mut due: Vec<(u64, Key, String)> = self
                .waiting
                .iter()
                .filter_map(|(k, q)| {
                    q.deadline
                        .filter(|d| *d <= at)
                        .map(|d| (d, *k, q.id.clone()))
                })
                .collect();
            due.sort();
            for (_, key, _) in due {
                self.end_waiting(&key, Expect::TimedOut);
            }
        }
    }

    fn flush_persist(&mut self) {
        if !std::mem::take(&mut self.persist_dirty) {
            return;
        }
        // What the state file holds after the persist, in id order.
        let mut list: Vec<(String, u64)> = self
            .execs
            .iter()
            .filter_map(|x| match x.excl {
                Some(Excl::Until(t)) => Some((x.id.clone(), t)),
                _ => None,
            })
            .collect();
        list.sort();
        if list != self.last_persisted {
            self.last_persisted = list.clone();
            self.expected.push(Expect::Persist(list));
        }
    }

    fn admit(&mut self, t: &LeaseTr, base: u64) {
        let key: Key = (
            u8::from(t.rank.is_none()),
            t.rank.unwrap_or(0),
            t.event_back_ms.map_or(self.now, |b| base.saturating_sub(b)),
            self.next_arrival,
        );
        self.next_arrival += 1;
        let q = Req {
            id: t.id.clone(),
            role: t.role,
            avoid: t.avoid.clone(),
            prefer: t.prefer.clone(),
            pin: t.pin.clone(),
            deadline: t.deadline_in_ms.map(|d| base + d),
        };
        if let Some(e) = self.choose(&q) {
            self.grant(q, key, e);
        } else if t.try_only {
            self.expected.push(Expect::Unavailable(q.id));
        } else if !self.can_serve(&q) {
            self.expected.push(Expect::Exhausted {
                request: q.id,
                role: ROLES[q.role].to_string(),
            });
        } else if q.deadline.is_some_and(|d| d <= self.now) {
            self.expected.push(Expect::TimedOut(q.id));
        } else {
            self.expected.push(Expect::Waiting {
                request: q.id.clone(),
                role: ROLES[q.role].to_string(),
                ahead: self.ahead_of(q.role, &key, q.pin.as_deref()),
            });
            self.waiting.insert(key, q);
        }
    }

    /// Feeds one transition: the model's `handle`.
    fn step(&mut self, tr: &Tr) {
        self.expected.clear();
        self.error = None;
        let base = self.now;
        let now_in = tr.now_in(base, self.poll_timeout());
        // Validation: a rejected input changes nothing, not even the time.
        self.error = match tr {
            Tr::Lease(t) if self.is_live(&t.id) => Some("DUPLICATE_REQUEST"),
            Tr::Cancel { id, .. } if !self.waiting.values().any(|q| q.id == *id) => {
                Some("UNKNOWN_REQUEST")
            }
            Tr::Release { lease, .. } if *lease == 0 || *lease >= self.next_lease => {
                Some("UNKNOWN_LEASE")
            }
            Tr::Report { exec, .. } | Tr::Resume { exec, .. } if self.index(exec).is_none() => {
                Some("UNKNOWN_EXECUTOR")
            }
            _ => None,
        };
        if self.error.is_some() {
            return;
        }
        self.now = self.now.max(now_in);
        self.advance_time();
        match tr {
            Tr::Lease(t) => self.admit(t, base),
            Tr::Release { lease, .. } => {
                if let Some(l) = self.leases.remove(lease) {
                    let x = &mut self.execs[l.exec];
                    x.busy -= 1;
                    x.busy_by_role[l.role] -= 1;
                    self.released.push(*lease);
                }
            }
            Tr::Cancel { id, .. } => {
                let key = self
                    .waiting
                    .iter()
                    .find(|(_, q)| q.id == *id)
                    .map(|(k, _)| *k);
                if let Some(key) = key {
                    self.end_waiting(&key, Expect::Cancelled);
                }
            }
            Tr::Report {
                exec,
                kind,
                reset_in_ms,
                retry_after_ms,
                ..
            } => {
                let e = self.index(exec).expect("checked");
                let reset_at = reset_in_ms.map(|d| base.saturating_add_signed(d));
                self.report(e, *kind, reset_at, *retry_after_ms);
            }
            Tr::Resume { exec, .. } => {
                let e = self.index(exec).expect("checked");
                if self.execs[e].excl.is_some() {
                    self.set_exclusion(e, None);
                }
            }
            Tr::Tick { .. } | Tr::TickToWake => {}
        }
        self.grant_pass();
        self.flush_persist();
    }
}

// ---- Transitions ------------------------------------------------------------------------

/// A lease or tryLease. Times are relative to the core's time before the input
/// (`base`), filled in when the input is built.
#[derive(Clone, Debug)]
pub struct LeaseTr {
    id: String,
    role: usize,
    avoid: Vec<String>,
    prefer: Option<String>,
    pin: Option<String>,
    rank: Option<i64>,
    event_back_ms: Option<u64>,
    deadline_in_ms: Option<u64>,
    try_only: bool,
    dt: i64,
}

#[derive(Clone, Debug)]
pub enum Tr {
    Lease(LeaseTr),
    Release {
        lease: u64,
        dt: i64,
    },
    Cancel {
        id: String,
        dt: i64,
    },
    Report {
        exec: String,
        kind: FailureKind,
        reset_in_ms: Option<i64>,
        retry_after_ms: Option<u64>,
        dt: i64,
    },
    Resume {
        exec: String,
        dt: i64,
    },
    Tick {
        dt: i64,
    },
    /// A tick at the core's own wake-up time.
    TickToWake,
}

impl Tr {
    fn now_in(&self, base: u64, wake: Option<u64>) -> u64 {
        let dt = match self {
            Tr::Lease(t) => t.dt,
            Tr::Release { dt, .. }
            | Tr::Cancel { dt, .. }
            | Tr::Report { dt, .. }
            | Tr::Resume { dt, .. }
            | Tr::Tick { dt } => *dt,
            Tr::TickToWake => return wake.unwrap_or(base).max(base),
        };
        base.saturating_add_signed(dt)
    }

    /// The input the core gets, given its time before it and its wake-up time.
    fn input(&self, base: u64, wake: Option<u64>) -> Input {
        let now = self.now_in(base, wake);
        match self {
            Tr::Lease(t) => {
                let request = LeaseRequest {
                    now,
                    id: t.id.clone(),
                    role: ROLES[t.role].to_string(),
                    avoid: t.avoid.clone(),
                    prefer: t.prefer.clone(),
                    pin: t.pin.clone(),
                    rank: t.rank,
                    event_time: t.event_back_ms.map(|b| base.saturating_sub(b)),
                    label: Some(format!("label-{}", t.id)),
                    purpose: None,
                    deadline: t.deadline_in_ms.map(|d| base + d),
                    owner: None,
                    borrow: None,
                    tenant: None,
                    affinity: None,
                    timeout_ms: None,
                };
                if t.try_only {
                    Input::TryLease(request)
                } else {
                    Input::Lease(request)
                }
            }
            Tr::Release { lease, .. } => Input::Release { now, lease: *lease },
            Tr::Cancel { id, .. } => Input::Cancel {
                now,
                id: id.clone(),
            },
            Tr::Report {
                exec,
                kind,
                reset_in_ms,
                retry_after_ms,
                ..
            } => Input::Report {
                now,
                executor: exec.clone(),
                failure: Failure {
                    kind: Some(*kind),
                    message: format!("{kind:?} failure"),
                    reset_at: reset_in_ms.map(|d| base.saturating_add_signed(d)),
                    retry_after_ms: *retry_after_ms,
                    ..Failure::default()
                },
            },
            Tr::Resume { exec, .. } => Input::Resume {
                now,
                executor: exec.clone(),
            },
            Tr::Tick { .. } | Tr::TickToWake => Input::Tick { now },
        }
    }
}

fn dt() -> impl Strategy<Value = i64> {
    prop_oneof![
        6 => Just(0i64),
        6 => 1..2_000i64,
        2 => 2_000..120_000i64,
        1 => -5_000..0i64,
    ]
}

fn exec_strategy(i: usize) -> impl Strategy<Value = Exec> {
    (
        1u32..=3,
        prop_oneof![Just([true, false]), Just([false, true]), Just([true, true])],
        1u32..=2,
        proptest::option::weighted(0.25, (0usize..2, 0u32..=2)),
        (1u64..=4, 1u64..=3, 1u64..=2),
    )
        .prop_map(move |(slots, has, prio, cap, (usage, rate, outage))| {
            let mut caps = [
                if has[0] { slots } else { 0 },
                if has[1] { slots } else { 0 },
            ];
            if let Some((r, c)) = cap {
                if has[r] {
                    caps[r] = c.min(slots);
                }
            }
            Exec {
                id: format!("e{i}"),
                has,
                caps,
                slots,
                prio,
                usage_ms: usage * 60_000,
                rate_ms: rate * 60_000,
                outage_ms: outage * 30_000,
                busy: 0,
                busy_by_role: [0, 0],
                last_leased: 0,
                excl: None,
                rate_limits: Vec::new(),
            }
        })
}

pub struct RosterModel;

impl ReferenceStateMachine for RosterModel {
    type State = Model;
    type Transition = Tr;

    fn init_state() -> BoxedStrategy<Model> {
        (2usize..=4)
            .prop_flat_map(|n| (0..n).map(exec_strategy).collect::<Vec<_>>())
            .prop_map(Model::new)
            .boxed()
    }

    fn transitions(s: &Model) -> BoxedStrategy<Tr> {
        let mut names: Vec<String> = s.execs.iter().map(|x| x.id.clone()).collect();
        let known = names.clone();
        names.push(UNKNOWN.to_string());
        let fresh = format!("r{}", s.next_request);
        let mut live: Vec<String> = s.waiting.values().map(|q| q.id.clone()).collect();
        live.extend(s.leases.values().map(|l| l.request.clone()));
        let waiting: Vec<String> = s.waiting.values().map(|q| q.id.clone()).collect();
        let leases: Vec<u64> = s.leases.keys().copied().collect();
        let released = s.released.clone();
        let next_lease = s.next_lease;

        let lease_with = |ids: BoxedStrategy<String>, try_weight: f64| {
            (
                ids,
                0usize..2,
                proptest::option::weighted(0.35, subsequence(names.clone(), 1..=2))
                    .prop_map(Option::unwrap_or_default),
                proptest::option::weighted(0.2, select(names.clone())),
                proptest::option::weighted(0.12, select(names.clone())),
                proptest::option::weighted(0.4, 0i64..3),
                proptest::option::weighted(0.3, 0u64..100_000),
                proptest::option::weighted(0.3, 0u64..200_000),
                proptest::bool::weighted(try_weight),
                dt(),
            )
                .prop_map(
                    |(
                        id,
                        role,
                        avoid,
                        prefer,
                        pin,
                        rank,
                        event_back_ms,
                        deadline,
                        try_only,
                        dt,
                    )| {
                        Tr::Lease(LeaseTr {
                            id,
                            role,
                            avoid,
                            prefer,
                            pin,
                            rank,
                            event_back_ms,
                            deadline_in_ms: deadline,
                            try_only,
                            dt,
                        })
                    },
                )
                .boxed()
        };

        let mut choices: Vec<(u32, BoxedStrategy<Tr>)> =
            vec![(30, lease_with(Just(fresh).boxed(), 0.2))];
        if !live.is_empty() {
            choices.push((2, lease_with(select(live).boxed(), 0.5)));
        }
        if !leases.is_empty() {
            choices.push((
                22,
                (select(leases), dt())
                    .prop_map(|(lease, dt)| Tr::Release { lease, dt })
                    .boxed(),
            ));
        }
        if !released.is_empty() {
            choices.push((
                3,
                (select(released), dt())
                    .prop_map(|(lease, dt)| Tr::Release { lease, dt })
                    .boxed(),
            ));
        }
        choices.push((
            1,
            (next_lease..next_lease + 3, dt())
                .prop_map(|(lease, dt)| Tr::Release { lease, dt })
                .boxed(),
        ));
        if !waiting.is_empty() {
            choices.push((
                8,
                (select(waiting), dt())
                    .prop_map(|(id, dt)| Tr::Cancel { id, dt })
                    .boxed(),
            ));
        }
        choices.push((
            1,
            (Just(format!("gone{}", s.next_request)), dt())
                .prop_map(|(id, dt)| Tr::Cancel { id, dt })
                .boxed(),
        ));
        let kinds = vec![
            FailureKind::UsageLimit,
            FailureKind::RateLimit,
            FailureKind::RateLimit,
            FailureKind::Authentication,
            FailureKind::Outage,
            FailureKind::ModelUnavailable,
            FailureKind::Other,
        ];
        choices.push((
            12,
            (
                prop_oneof![20 => select(known.clone()), 1 => Just(UNKNOWN.to_string())],
                select(kinds),
                proptest::option::weighted(0.3, -100_000i64..400_000),
                proptest::option::weighted(0.3, prop_oneof![Just(0u64), 1u64..300_000]),
                dt(),
            )
                .prop_map(|(exec, kind, reset_in_ms, retry_after_ms, dt)| Tr::Report {
                    exec,
                    kind,
                    reset_in_ms,
                    retry_after_ms,
                    dt,
                })
                .boxed(),
        ));
        choices.push((
            5,
            (
                prop_oneof![10 => select(known), 1 => Just(UNKNOWN.to_string())],
                dt(),
            )
                .prop_map(|(exec, dt)| Tr::Resume { exec, dt })
                .boxed(),
        ));
        choices.push((
            6,
            prop_oneof![0i64..1_000, 1_000i64..400_000]
                .prop_map(|dt| Tr::Tick { dt })
                .boxed(),
        ));
        choices.push((4, Just(Tr::TickToWake).boxed()));
        proptest::strategy::Union::new_weighted(choices).boxed()
    }

    fn apply(mut state: Model, tr: &Tr) -> Model {
        state.next_request += 1;
        state.step(tr);
        state
    }
}

// ---- The system under test ----------------------------------------------------------------

pub struct Sut {
    policy: Policy,
    /// Requests started and not yet ended (granted, exhausted, timed out, cancelled,
    /// unavailable): each must end exactly once.
    open: BTreeSet<String>,
    /// The state file: every persist applied in turn (entries of its `ids` replaced).
    file: BTreeMap<String, u64>,
    /// The same policy fed the same inputs, drained only every third input: a host
    /// that reads late gets the same outputs (the queue holds some as references into
    /// the state, built before their lease closes or the executors move).
    lagging: Policy,
    /// The main policy's outputs since the lagging one was last drained.
    unread: Vec<Output>,
    inputs: u32,
}

fn decision(output: &Output, file: &mut BTreeMap<String, u64>) -> Option<Expect> {
    Some(match output {
        Output::Granted {
            request,
            lease,
            executor,
            role,
            passed,
            hold,
            occupied,
            ..
        } => {
            assert!(hold.is_none() && !occupied, "no machine and no occupy here");
            Expect::Granted {
                request: request.clone(),
                lease: *lease,
                executor: executor.clone(),
                role: role.clone(),
                passed: *passed,
            }
        }
        Output::Waiting {
            request,
            role,
            ahead,
            ..
        } => Expect::Waiting {
            request: request.clone(),
            role: role.clone(),
            ahead: *ahead,
        },
        Output::Exhausted { request, role, .. } => Expect::Exhausted {
            request: request.clone(),
            role: role.clone(),
        },
        Output::TimedOut { request, .. } => Expect::TimedOut(request.clone()),
        Output::Unavailable { request, .. } => Expect::Unavailable(request.clone()),
        Output::Cancelled { request, .. } => Expect::Cancelled(request.clone()),
        Output::Persist { ids, state } => {
            let mut want: Vec<&String> = ids.iter().collect();
            want.sort();
            want.dedup();
            assert_eq!(want.len(), ids.len(), "persist ids are unique");
            for id in ids {
                file.remove(id);
            }
            for x in &state.exclusions {
                assert_eq!(x.kind, ExclusionKind::Until, "only timed exclusions here");
                assert!(ids.contains(&x.id), "a persisted entry is one of its ids");
                file.insert(
                    x.id.clone(),
                    x.until.expect("a timed exclusion has its end"),
                );
            }
            Expect::Persist(file.iter().map(|(id, t)| (id.clone(), *t)).collect())
        }
        Output::Event { .. } => return None,
        other => panic!("unexpected output {other:?}"),
    })
}

impl StateMachineTest for Sut {
    type SystemUnderTest = Sut;
    type Reference = RosterModel;

    fn init_test(model: &Model) -> Sut {
        let mut policy =
            Policy::new(&model.document, Options::default()).expect("a valid document");
        policy
            .handle(Input::Tick { now: T0 })
            .expect("the first tick");
        assert!(
            policy.poll_output().is_none(),
            "the first tick decides nothing"
        );
        Sut {
            lagging: policy.clone(),
            policy,
            open: BTreeSet::new(),
            file: BTreeMap::new(),
            unread: Vec::new(),
            inputs: 0,
        }
    }

    fn apply(mut sut: Sut, model: &Model, tr: Tr) -> Sut {
        let base = sut.policy.now();
        let input = tr.input(base, sut.policy.poll_timeout());
        // Only a rejected input needs the state before it (it must be unchanged).
        let before = model.error.map(|_| sut.policy.export_state());
        let result = sut.policy.handle(input.clone());
        assert_eq!(
            sut.lagging.handle(input.clone()).map_err(|e| e.code()),
            result.as_ref().map(|_| ()).map_err(|e| e.code()),
            "the lagging policy answers {input:?} alike"
        );
        match (&result, model.error) {
            (Err(error), Some(code)) => {
                assert_eq!(error.code(), code, "the error of {input:?}");
                assert_eq!(
                    Some(sut.policy.export_state()),
                    before,
                    "a rejected input changed the state"
                );
                assert!(
                    sut.policy.poll_output().is_none(),
                    "an error has no outputs"
                );
                return sut;
            }
            (Ok(()), None) => {}
            (result, want) => panic!("{input:?}: the core answered {result:?}, the model {want:?}"),
        }
        if let Input::Lease(r) | Input::TryLease(r) = &input {
            assert!(
                sut.open.insert(r.id.clone()),
                "request {} started twice",
                r.id
            );
        }
        let outputs: Vec<Output> = std::iter::from_fn(|| sut.policy.poll_output()).collect();
        sut.unread.extend(outputs.iter().cloned());
        sut.inputs += 1;
        if sut.inputs % 3 == 0 {
            let late: Vec<Output> = std::iter::from_fn(|| sut.lagging.poll_output()).collect();
            assert_eq!(late, std::mem::take(&mut sut.unread), "outputs read late");
            assert_eq!(sut.lagging.export_state(), sut.policy.export_state());
        }
        let decisions: Vec<Expect> = outputs
            .iter()
            .filter_map(|o| decision(o, &mut sut.file))
            .collect();
        for d in &decisions {
            match d {
                Expect::Granted { request, .. }
                | Expect::Exhausted { request, .. }
                | Expect::TimedOut(request)
                | Expect::Unavailable(request)
                | Expect::Cancelled(request) => assert!(
                    sut.open.remove(request),
                    "request {request} ended twice, or was never started"
                ),
                Expect::Waiting { request, .. } => {
                    assert!(sut.open.contains(request), "{request} waits unstarted")
                }
                Expect::Persist(_) => {}
            }
        }
        assert_eq!(
            decisions, model.expected,
            "decisions for {input:?} (left: core, right: model)"
        );
        // A grant never goes beyond capacity, to an excluded, avoided or wrong-role
        // executor, or past its pin; the model chooses the executor and the snapshot
        // comparison below checks the counts.
        // The file the persists wrote is the lasting state, after every input.
        let lasting: BTreeMap<String, u64> = sut
            .policy
            .persisted_state()
            .exclusions
            .iter()
            .map(|x| (x.id.clone(), x.until.expect("only timed exclusions here")))
            .collect();
        assert_eq!(sut.file, lasting, "the persists wrote the lasting state");
        sut
    }

    fn check_invariants(sut: &Sut, model: &Model) {
        sut.policy.check_invariants();
        sut.lagging.check_invariants();
        assert_eq!(sut.policy.now(), model.now, "time");
        let snap = sut.policy.snapshot();
        writer::assert_writer_is_serde(&sut.policy);
        assert_eq!(snap.executors.len(), model.execs.len());
        for (s, x) in snap.executors.iter().zip(&model.execs) {
            assert_eq!(s.id, x.id);
            assert_eq!(s.busy, x.busy, "busy of {}", x.id);
            assert!(s.busy <= s.slots, "{} holds more leases than slots", x.id);
            for (r, role) in ROLES.iter().enumerate() {
                if x.has[r] {
                    assert_eq!(
                        s.busy_by_role.get(role).copied(),
                        Some(x.busy_by_role[r]),
                        "{role} count of {}",
                        x.id
                    );
                    assert!(x.busy_by_role[r] <= x.caps[r], "role cap of {}", x.id);
                }
            }
            let excl = s.exclusion.as_ref().map(|e| match e.kind {
                ExclusionKind::Until => Excl::Until(e.until.expect("until has an end")),
                ExclusionKind::Run => Excl::Run,
                other => panic!("the model makes no {other:?} exclusion"),
            });
            assert_eq!(excl, x.excl, "exclusion of {}", x.id);
            let leases: Vec<u64> = s.leases.iter().map(|l| l.lease).collect();
            let want: Vec<u64> = model
                .leases
                .iter()
                .filter(|(_, l)| model.execs[l.exec].id == x.id)
                .map(|(id, _)| *id)
                .collect();
            assert_eq!(leases, want, "leases on {}", x.id);
        }
        let queue: Vec<&str> = snap.queue.iter().map(|q| q.request.as_str()).collect();
        let want: Vec<&str> = model.waiting.values().map(|q| q.id.as_str()).collect();
        assert_eq!(queue, want, "the queue in lease order");
        for q in &snap.queue {
            let r = ROLES
                .iter()
                .position(|r| *r == q.role)
                .expect("a known role");
            let key = model
                .waiting
                .iter()
                .find(|(_, m)| m.id == q.request)
                .map(|(k, _)| *k)
                .expect("queued in the model");
            let pin = q.pin.as_deref();
            assert_eq!(
                q.ahead,
                model.ahead_of(r, &key, pin),
                "ahead of {}",
                q.request
            );
        }
        let open: BTreeSet<String> = model.waiting.values().map(|q| q.id.clone()).collect();
        assert_eq!(
            sut.open, open,
            "requests not yet ended are the waiting ones"
        );
        assert_eq!(
            sut.policy.poll_timeout(),
            model.poll_timeout(),
            "wake-up time"
        );
    }
}

prop_state_machine! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES=n runs more (or fewer) cases.
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256),
        max_shrink_iters: 20_000,
        // Failures go to core/proptest-regressions/model.txt (committed), replayed first.
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct("proptest-regressions/model.txt"),
        )),
        .. ProptestConfig::default()
    })]

    #[test]
    fn core_matches_the_reference_model(sequential 1..100 => Sut);
}
