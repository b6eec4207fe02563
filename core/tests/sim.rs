//! Seeded random simulation of the whole policy, VOPR style.
//!
//! Every knob (the roster, the options, how often each input comes, how effects are
//! answered) is drawn from one seed with an inline splitmix64. A simulated host
//! drives the core through the JSON step boundary (`json::step_str`), answers its
//! effects (probes, machines, preflights) late and sometimes badly, and checks after
//! every step:
//!
//! - `check_invariants()`, plus the host's own accounting: every executor's busy
//!   count equals the leases and machine creations the host saw granted and not
//!   ended (a release frees exactly one slot, once; every ending frees what it held);
//! - never more leases than slots or a role cap, except by occupy or a resize;
//! - every grant (and machine creation) goes to an executor that has the role, is
//!   not excluded, is not avoided, and is the pin when pinned;
//! - every request ends exactly once (granted, exhausted, timed out, cancelled,
//!   unavailable), a waiting one is announced once, every machine is deleted once;
//! - a rejected input leaves `export_state()` unchanged and has no output;
//! - the last persist decision is the persisted part of the state, and a fresh
//!   policy restored from it has the same persisted state (a restart);
//! - an exported and imported copy answers the next inputs byte for byte the same.
//!
//! Then a liveness phase: failures stop, every executor is resumed, every lease
//! released, every effect answered, time moves to each wake-up: every request must
//! end within a bound. Each seed runs twice and the FNV-1a hashes of the two output
//! streams must be equal (hidden nondeterminism).
//!
//! `ROTA_SIM_SEEDS=n` runs n seeds (default 20, from `ROTA_SIM_FIRST`, default 0),
//! `ROTA_SIM_SEED=s` runs only seed s, `ROTA_SIM_STEPS=k` sets the steps per seed
//! (default 2,000). A failing seed is printed with its last inputs.

#[path = "common/writer.rs"]
mod writer;

use std::collections::{BTreeMap, BTreeSet};

use rota_core::json::step_str;
use rota_core::{Options, PersistedState, Policy, Snapshot};
use serde_json::{json, Map, Value};

const T0: u64 = 1_800_000_000_000;
const DEFAULT_ROLES: [&str; 5] = ["planner", "coder", "reviewer", "judge", "verifier"];

// ---- Randomness and hashing -----------------------------------------------------------

/// splitmix64: tiny, fast, and the same on every platform.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    /// A number in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> Option<T> {
        if items.is_empty() {
            None
        } else {
            Some(items[self.below(items.len() as u64) as usize].clone())
        }
    }

    /// An index drawn with these weights.
    fn weighted(&mut self, weights: &[u64]) -> usize {
        let total: u64 = weights.iter().sum();
        let mut x = self.below(total.max(1));
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        0
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv1a(hash: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *hash ^= u64::from(*b);
        *hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
}

// ---- Knobs: everything a seed decides ---------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Action {
    Lease,
    TryLease,
    Release,
    Cancel,
    Occupy,
    Report,
    Exclude,
    Resume,
    Probe,
    Machine,
    Preflight,
    Reload,
    Restore,
    Tick,
    Invalid,
    Restart,
    Swap,
}

const ACTIONS: [(Action, u64); 17] = [
    (Action::Lease, 30),
    (Action::TryLease, 5),
    (Action::Release, 24),
    (Action::Cancel, 4),
    (Action::Occupy, 2),
    (Action::Report, 10),
    (Action::Exclude, 3),
    (Action::Resume, 4),
    (Action::Probe, 6),
    (Action::Machine, 8),
    (Action::Preflight, 3),
    (Action::Reload, 2),
    (Action::Restore, 1),
    (Action::Tick, 10),
    (Action::Invalid, 2),
    (Action::Restart, 1),
    (Action::Swap, 1),
];

#[derive(Clone, Debug)]
struct Knobs {
    executors: u64,
    health_pct: u64,
    provision_pct: u64,
    weights: Vec<u64>,
    probe_up_pct: u64,
    machine_ok_pct: u64,
    preflight_ok_pct: u64,
    invalid_reload_pct: u64,
    /// How far time jumps at most between inputs (ms).
    max_dt: u64,
    options: Options,
}

impl Knobs {
    fn draw(rng: &mut Rng) -> Knobs {
        let mut options = Options {
            can_probe: rng.chance(80),
            preflight_reloads: rng.chance(30),
            ..Options::default()
        };
        if rng.chance(30) {
            options.health_probe_interval_ms = rng.range(1_000, 30_000);
            options.idle_probe_interval_ms = rng.range(10_000, 120_000);
            options.rate_limit_window_ms = rng.range(10_000, 900_000);
            options.rate_limits_to_exclude = rng.range(1, 4) as u32;
            options.provision_first_pause_ms = rng.range(1_000, 60_000);
            options.provision_max_pause_ms = rng.range(60_000, 900_000);
        }
        if rng.chance(15) {
            options.kinds = Some(vec!["local".into(), "fly".into()]);
        }
        Knobs {
            executors: rng.range(2, 12),
            health_pct: rng.range(0, 60),
            provision_pct: [0, 0, 20, 50][rng.below(4) as usize],
            // Each action's weight: from 0 to twice its base (leases always come).
            weights: ACTIONS
                .iter()
                .map(|(a, w)| {
                    let w = rng.range(0, 2 * w);
                    match a {
                        Action::Lease | Action::Release => w.max(10),
                        Action::Resume => w.max(3),
                        _ => w,
                    }
                })
                .collect(),
            probe_up_pct: rng.range(20, 90),
            machine_ok_pct: rng.range(30, 95),
            preflight_ok_pct: rng.range(50, 100),
            invalid_reload_pct: rng.range(0, 30),
            max_dt: [2_000, 60_000, 600_000][rng.below(3) as usize],
            options,
        }
    }
}

// ---- Documents ----------------------------------------------------------------------------

fn gen_roles(rng: &mut Rng) -> Option<Vec<String>> {
    if rng.chance(50) {
        None
    } else {
        let n = rng.range(1, 4);
        Some((0..n).map(|i| format!("r{i}")).collect())
    }
}

fn gen_executor(rng: &mut Rng, knobs: &Knobs, id: &str, roles: &[String]) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), json!(id));
    o.insert(
        "harness".into(),
        json!(rng.pick(&["claude", "pi", "codex"]).unwrap_or("pi")),
    );
    if rng.chance(50) {
        o.insert("model".into(), json!(format!("model-{}", rng.below(3))));
    }
    let mut own: Vec<String> = roles.iter().filter(|_| rng.chance(45)).cloned().collect();
    if own.is_empty() {
        own.push(rng.pick(roles).unwrap_or_default());
    }
    o.insert("roles".into(), json!(own));
    let slots = rng.range(1, 4);
    match rng.below(5) {
        0 if slots == 1 => {}
        1 => {
            o.insert("maxConcurrentAttempts".into(), json!(slots));
        }
        _ => {
            o.insert("slots".into(), json!(slots));
        }
    }
    let codes = own.iter().any(|r| r == "coder");
    if codes && rng.chance(20) {
        o.insert("coderSlots".into(), json!(rng.range(0, slots)));
    } else if rng.chance(20) {
        let r = rng.pick(&own).unwrap_or_default();
        let mut caps = Map::new();
        caps.insert(r, json!(rng.range(0, slots)));
        o.insert("roleSlots".into(), Value::Object(caps));
    }
    match rng.below(5) {
        0 | 1 => {
            o.insert("priority".into(), json!(rng.range(1, 3)));
        }
        2 => {
            let r = rng.pick(&own).unwrap_or_default();
            let mut per_role = Map::new();
            per_role.insert(r, json!(rng.range(0, 3)));
            per_role.insert("default".into(), json!(1.5));
            o.insert("priority".into(), Value::Object(per_role));
        }
        _ => {}
    }
    if rng.chance(knobs.health_pct) {
        o.insert(
            "health".into(),
            json!(format!("http://127.0.0.1:{}/health", 8000 + rng.below(100))),
        );
    }
    if rng.chance(knobs.provision_pct) {
        o.insert("provision".into(), json!({ "image": "worker" }));
    }
    if rng.chance(50) {
        let pick = |rng: &mut Rng| {
            rng.pick(&["20s", "90s", "2 minutes", "5m", "30 minutes"])
                .unwrap_or("1m")
        };
        o.insert(
            "cooldown".into(),
            json!({ "usageLimit": pick(rng), "rateLimit": pick(rng), "outage": pick(rng) }),
        );
    }
    if let Some(kinds) = &knobs.options.kinds {
        o.insert("kind".into(), json!(rng.pick(kinds)));
    }
    if rng.chance(20) {
        o.insert("notes".into(), json!({ "passedThrough": true }));
    }
    Value::Object(o)
}

fn gen_document(rng: &mut Rng, knobs: &Knobs, next_exec: &mut u64) -> Value {
    let declared = gen_roles(rng);
    let roles = declared
        .clone()
        .unwrap_or_else(|| DEFAULT_ROLES.iter().map(|r| r.to_string()).collect());
    let executors: Vec<Value> = (0..knobs.executors)
        .map(|_| {
            *next_exec += 1;
            gen_executor(rng, knobs, &format!("x{}", *next_exec), &roles)
        })
        .collect();
    let mut doc = json!({ "executors": executors });
    if let Some(roles) = declared {
        doc["roles"] = json!(roles);
    }
    doc
}

fn roles_of(doc: &Value) -> Vec<String> {
    doc.get("roles")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_else(|| DEFAULT_ROLES.iter().map(|r| r.to_string()).collect())
}

fn executor_ids(doc: &Value) -> Vec<String> {
    doc["executors"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// A reload: most executors kept, some changed, dropped or added; the role list
/// sometimes changes; sometimes the document is invalid (and must be refused).
fn gen_reload(rng: &mut Rng, knobs: &Knobs, current: &Value, next_exec: &mut u64) -> (Value, bool) {
    let mut roles = roles_of(current);
    let mut declared = current.get("roles").cloned();
    let new_roles = rng.chance(10);
    if new_roles {
        match gen_roles(rng) {
            Some(r) => {
                declared = Some(json!(r));
                roles = r;
            }
            None => {
                declared = None;
                roles = DEFAULT_ROLES.iter().map(|r| r.to_string()).collect();
            }
        }
    }
    let mut executors = Vec::new();
    for x in current["executors"].as_array().cloned().unwrap_or_default() {
        let id = x["id"].as_str().unwrap_or("x").to_string();
        match rng.below(100) {
            0..=14 => {} // dropped
            15..=34 => executors.push(gen_executor(rng, knobs, &id, &roles)),
            _ if new_roles => executors.push(gen_executor(rng, knobs, &id, &roles)),
            _ => executors.push(x),
        }
    }
    for _ in 0..rng.range(0, 3) {
        let id = if rng.chance(30) && *next_exec > 0 {
            format!("x{}", rng.range(1, *next_exec))
        } else {
            *next_exec += 1;
            format!("x{}", *next_exec)
        };
        if !executors.iter().any(|x| x["id"] == json!(id)) {
            executors.push(gen_executor(rng, knobs, &id, &roles));
        }
    }
    let mut doc = json!({ "executors": executors });
    if let Some(declared) = declared {
        doc["roles"] = declared;
    }
    let valid = !rng.chance(knobs.invalid_reload_pct);
    if !valid {
        let list = doc["executors"].as_array_mut().expect("an array");
        match rng.below(5) {
            0 if !list.is_empty() => {
                let first = list[0].clone();
                list.push(first);
            }
            1 => list.push(json!({ "id": "bad", "harness": "pi", "roles": ["no-such-role"] })),
            2 => {
                list.push(json!({ "id": "bad", "harness": "pi", "roles": [roles[0]], "slots": 0 }))
            }
            3 => list.push(
                json!({ "id": "bad", "roles": [roles[0]], "cooldown": { "outage": "soon" } }),
            ),
            _ => list.push(
                json!({ "id": "bad", "harness": "pi", "roles": [roles[0]], "health": "ftp://x" }),
            ),
        }
    }
    (doc, valid)
}

// ---- The simulated host ---------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Req {
    role: String,
    avoid: Vec<String>,
    pin: Option<String>,
    try_only: bool,
    announced: bool,
}

#[derive(Clone, Debug)]
struct HostLease {
    #[allow(dead_code)] // for debugging output
    request: String,
    executor: String,
    role: Option<String>,
    hold: Option<String>,
    counted: bool,
}

#[derive(Default, Debug, Clone)]
struct Stats {
    steps: u64,
    errors: u64,
    granted: u64,
    waiting: u64,
    exhausted: u64,
    timed_out: u64,
    cancelled: u64,
    unavailable: u64,
    machines: u64,
    probes: u64,
    persists: u64,
    reloads: u64,
    restarts: u64,
    swaps: u64,
    liveness_rounds: u64,
}

impl Stats {
    fn add(&mut self, o: &Stats) {
        self.steps += o.steps;
        self.errors += o.errors;
        self.granted += o.granted;
        self.waiting += o.waiting;
        self.exhausted += o.exhausted;
        self.timed_out += o.timed_out;
        self.cancelled += o.cancelled;
        self.unavailable += o.unavailable;
        self.machines += o.machines;
        self.probes += o.probes;
        self.persists += o.persists;
        self.reloads += o.reloads;
        self.restarts += o.restarts;
        self.swaps += o.swaps;
        self.liveness_rounds = self.liveness_rounds.max(o.liveness_rounds);
    }
}

struct Host {
    seed: u64,
    rng: Rng,
    knobs: Knobs,
    /// Full checks (snapshots, clones) or only the output hash.
    checked: bool,
    policy: Policy,
    now: u64,
    next_id: u64,
    next_exec: u64,
    next_machine: u64,
    open: BTreeMap<String, Req>,
    /// Requests whose machine is being created: they hold a slot.
    creating: BTreeMap<String, (String, String)>,
    /// createMachine outputs not answered yet (request → executor).
    machine_asks: BTreeMap<String, String>,
    /// Requests that ended while their machine was created: its arrival deletes it.
    abandoned: BTreeSet<String>,
    leases: BTreeMap<u64, HostLease>,
    /// Released leases whose machine the host is deleting: they hold their slot until
    /// `machineDeleted`.
    deleting: BTreeMap<u64, HostLease>,
    released: Vec<u64>,
    seen_leases: BTreeSet<u64>,
    machines: BTreeSet<String>,
    probes: BTreeMap<String, String>,
    preflights: BTreeSet<String>,
    last_persist: PersistedState,
    /// An imported copy and the inputs left to compare it on.
    shadow: Option<(Policy, u32)>,
    /// Executors allowed over capacity (an occupy, or a resize).
    over_ok: BTreeSet<String>,
    /// The snapshot after the last accepted input (checked runs).
    snap: Option<Snapshot>,
    hash: u64,
    stats: Stats,
}

/// A state file's entries in id order: a reload may reorder the executors without
/// changing what the file says.
fn sorted(mut state: PersistedState) -> PersistedState {
    state.exclusions.sort_by(|a, b| a.id.cmp(&b.id));
    state
}

fn request_of(output: &Value) -> String {
    output["request"].as_str().unwrap_or_default().to_string()
}

impl Host {
    fn new(seed: u64, checked: bool) -> Host {
        let mut rng = Rng(seed);
        let knobs = Knobs::draw(&mut rng);
        let mut next_exec = 0;
        let document = gen_document(&mut rng, &knobs, &mut next_exec);
        let policy = Policy::new(&document, knobs.options.clone())
            .unwrap_or_else(|e| panic!("seed {seed}: a generated document is refused: {e}"));
        let mut host = Host {
            seed,
            rng,
            knobs,
            checked,
            policy,
            now: T0,
            next_id: 0,
            next_exec,
            next_machine: 0,
            open: BTreeMap::new(),
            creating: BTreeMap::new(),
            machine_asks: BTreeMap::new(),
            abandoned: BTreeSet::new(),
            leases: BTreeMap::new(),
            deleting: BTreeMap::new(),
            released: Vec::new(),
            seen_leases: BTreeSet::new(),
            machines: BTreeSet::new(),
            probes: BTreeMap::new(),
            preflights: BTreeSet::new(),
            last_persist: PersistedState {
                version: 1,
                exclusions: Vec::new(),
            },
            shadow: None,
            over_ok: BTreeSet::new(),
            snap: None,
            hash: FNV_OFFSET,
            stats: Stats::default(),
        };
        host.send(json!({ "type": "tick", "now": T0 }));
        host
    }

    fn doc(&self) -> Value {
        self.policy.document()
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{}", self.next_id)
    }

    /// The time for the next input: mostly forward, sometimes backwards (clamped).
    fn time(&mut self) -> u64 {
        let dt = match self.rng.below(100) {
            0..=39 => 0,
            40..=79 => self.rng.range(1, 2_000),
            80..=96 => self.rng.range(1, self.knobs.max_dt),
            _ => {
                return self.now.saturating_sub(self.rng.range(1, 10_000));
            }
        };
        self.now += dt;
        self.now
    }

    fn some_executor(&mut self) -> String {
        let ids = executor_ids(&self.doc());
        match self.rng.pick(&ids) {
            Some(id) if !self.rng.chance(2) => id,
            _ => format!("ghost{}", self.rng.below(3)),
        }
    }

    // ---- One step through the JSON boundary ----------------------------------------------

    /// Feeds one input as JSON text; the outputs, or `None` when it was refused.
    fn send(&mut self, input: Value) -> Option<Vec<Value>> {
        self.send_text(&input.to_string(), Some(&input))
    }

    fn send_text(&mut self, text: &str, input: Option<&Value>) -> Option<Vec<Value>> {
        let seed = self.seed;
        TRACE.with(|t| {
            let mut t = t.borrow_mut();
            if t.len() == TRACE_LEN {
                t.pop_front();
            }
            t.push_back(text.to_string());
        });
        // The state before (for a refused input) and its snapshot (kept from the
        // step before: nothing else changes the policy).
        let before = self.checked.then(|| self.policy.clone());
        let answer = step_str(&mut self.policy, text);
        fnv1a(&mut self.hash, answer.as_bytes());
        fnv1a(&mut self.hash, b"\n");
        self.stats.steps += 1;
        if let Some((shadow, left)) = self.shadow.as_mut() {
            let copy = step_str(shadow, text);
            assert_eq!(
                copy, answer,
                "seed {seed}: the imported copy answered {text} differently"
            );
            *left -= 1;
            if *left == 0 {
                assert_eq!(
                    shadow.export_state(),
                    self.policy.export_state(),
                    "seed {seed}: the imported copy drifted"
                );
                self.shadow = None;
            }
        }
        let answer: Value = serde_json::from_str(&answer).expect("a step answers JSON");
        if let Some(error) = answer.get("error") {
            self.stats.errors += 1;
            assert!(
                error["code"].is_string() && error["message"].is_string(),
                "seed {seed}: an error has a code and a message: {error}"
            );
            if let Some(policy) = &before {
                assert_eq!(
                    policy.export_state(),
                    self.policy.export_state(),
                    "seed {seed}: the rejected input {text} changed the state ({error})"
                );
            }
            assert!(self.policy.poll_output().is_none());
            return None;
        }
        let outputs = answer["outputs"].as_array().cloned().unwrap_or_default();
        assert_eq!(
            answer["wakeAt"],
            json!(self.policy.poll_timeout()),
            "seed {seed}: wakeAt is poll_timeout"
        );
        let input = match input {
            Some(input) => input.clone(),
            None => serde_json::from_str(text).unwrap_or(Value::Null),
        };
        let before = self.snap.take();
        self.snap = self.checked.then(|| self.policy.snapshot());
        if self.checked {
            writer::assert_writer_is_serde(&self.policy);
        }
        self.account(&input, &outputs, before.as_ref());
        Some(outputs)
    }

    /// Follows the outputs of an accepted input, checking what each may do.
    fn account(&mut self, input: &Value, outputs: &[Value], before: Option<&Snapshot>) {
        let seed = self.seed;
        let kind = input["type"].as_str().unwrap_or_default().to_string();
        let mut occupy: Option<(String, String, Option<String>, Option<String>)> = None;
        let mut released_hold: Option<String> = None;
        match kind.as_str() {
            "lease" | "tryLease" => {
                let id = input["id"].as_str().unwrap_or_default().to_string();
                let req = Req {
                    role: input["role"].as_str().unwrap_or_default().to_string(),
                    avoid: input["avoid"]
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|v| v.as_str().map(String::from))
                                .collect()
                        })
                        .unwrap_or_default(),
                    pin: input["pin"].as_str().map(String::from),
                    try_only: kind == "tryLease",
                    announced: false,
                };
                assert!(
                    self.open.insert(id.clone(), req).is_none(),
                    "seed {seed}: request {id} accepted while live"
                );
            }
            "release" => {
                let lease = input["lease"].as_u64().unwrap_or_default();
                if let Some(l) = self.leases.remove(&lease) {
                    self.released.push(lease);
                    match (&l.hold, l.counted) {
                        (Some(_), true) => {
                            released_hold = l.hold.clone();
                            self.deleting.insert(lease, l);
                        }
                        // Work on an executor the roster does not have: its machine is
                        // not the pool's, and stays the host's.
                        (Some(hold), false) => {
                            self.machines.remove(hold);
                        }
                        (None, _) => {}
                    }
                }
            }
            "machineDeleted" => {
                let lease = input["lease"].as_u64().unwrap_or_default();
                assert!(
                    self.deleting.remove(&lease).is_some(),
                    "seed {seed}: machineDeleted {lease} accepted for no deletion"
                );
            }
            "occupy" => {
                occupy = Some((
                    input["id"].as_str().unwrap_or_default().to_string(),
                    input["executor"].as_str().unwrap_or_default().to_string(),
                    input["role"].as_str().map(String::from),
                    input["hold"].as_str().map(String::from),
                ));
                if let Some(hold) = input["hold"].as_str() {
                    self.machines.insert(hold.to_string());
                }
            }
            "machineCreated" => {
                let id = input["id"].as_str().unwrap_or_default();
                self.machine_asks.remove(id);
                if let Some(hold) = input["hold"].as_str() {
                    assert!(self.machines.insert(hold.to_string()));
                }
            }
            "machineFailed" => {
                let id = input["id"].as_str().unwrap_or_default();
                self.machine_asks.remove(id);
                self.creating.remove(id);
            }
            "probeResult" => {
                self.probes
                    .remove(input["executor"].as_str().unwrap_or_default());
            }
            "preflightResult" => {
                self.preflights
                    .remove(input["executor"].as_str().unwrap_or_default());
            }
            "reload" => self.stats.reloads += 1,
            _ => {}
        }

        let mut excluded_at: BTreeMap<String, usize> = BTreeMap::new();
        for (i, o) in outputs.iter().enumerate() {
            if o["type"] == "event" && o["name"] == "excluded" {
                if let Some(x) = o["fields"]["executor"].as_str() {
                    excluded_at.insert(x.to_string(), i);
                }
            }
        }
        // Slots taken in this step: (position, executor, role, request).
        let mut taken: Vec<(usize, String, String, String)> = Vec::new();
        for (i, o) in outputs.iter().enumerate() {
            let request = request_of(o);
            match o["type"].as_str().unwrap_or_default() {
                "granted" => {
                    self.stats.granted += 1;
                    let lease = o["lease"].as_u64().expect("a lease id");
                    assert!(
                        self.seen_leases.insert(lease),
                        "seed {seed}: lease {lease} granted twice"
                    );
                    let executor = o["executor"].as_str().unwrap_or_default().to_string();
                    let hold = o["hold"].as_str().map(String::from);
                    if o["occupied"] == json!(true) {
                        let (id, x, role, h) = occupy.take().unwrap_or_else(|| {
                            panic!("seed {seed}: an occupied grant without an occupy")
                        });
                        assert_eq!((&id, &x, &h), (&request, &executor, &hold));
                        // Uncounted: its executor is not the roster's (a warning says so,
                        // and warnings are never filtered out).
                        let counted = !outputs
                            .iter()
                            .any(|o| o["name"].as_str() == Some("occupiedUnknown"));
                        debug_assert!(
                            before.is_none_or(|s| s.executors.iter().any(|e| e.id == x) == counted),
                            "seed {seed}: occupy counted as the snapshot says"
                        );
                        self.over_ok.insert(x.clone());
                        self.leases.insert(
                            lease,
                            HostLease {
                                request: id,
                                executor: x,
                                role,
                                hold,
                                counted,
                            },
                        );
                        continue;
                    }
                    let req = self.open.remove(&request).unwrap_or_else(|| {
                        panic!("seed {seed}: {request} granted but not live (ended twice?)")
                    });
                    let role = o["role"].as_str().unwrap_or_default().to_string();
                    assert_eq!(role, req.role, "seed {seed}: the role of {request}");
                    match self.creating.remove(&request) {
                        Some((x, _)) => {
                            assert_eq!(x, executor, "seed {seed}: {request}'s machine");
                            assert!(hold.is_some(), "seed {seed}: a created machine's hold");
                        }
                        None => {
                            assert!(hold.is_none(), "seed {seed}: a hold without a machine");
                            self.check_taker(&req, &request, &executor, before);
                            taken.push((i, executor.clone(), role.clone(), request.clone()));
                        }
                    }
                    self.leases.insert(
                        lease,
                        HostLease {
                            request,
                            executor,
                            role: Some(role),
                            hold,
                            counted: true,
                        },
                    );
                }
                "createMachine" => {
                    self.stats.machines += 1;
                    let executor = o["executor"].as_str().unwrap_or_default().to_string();
                    let req = self.open.get(&request).cloned().unwrap_or_else(|| {
                        panic!("seed {seed}: a machine for {request}, which is not live")
                    });
                    assert!(
                        req.pin.is_none(),
                        "seed {seed}: a pinned request makes no machine"
                    );
                    self.check_taker(&req, &request, &executor, before);
                    assert!(
                        self.creating
                            .insert(request.clone(), (executor.clone(), req.role.clone()))
                            .is_none(),
                        "seed {seed}: two machines at once for {request}"
                    );
                    self.machine_asks.insert(request.clone(), executor.clone());
                    taken.push((i, executor, req.role.clone(), request));
                }
                "exhausted" | "timedOut" | "cancelled" | "unavailable" => {
                    let req = self.open.remove(&request).unwrap_or_else(|| {
                        panic!(
                            "seed {seed}: {request} ended ({}) but is not live",
                            o["type"]
                        )
                    });
                    match o["type"].as_str().unwrap_or_default() {
                        "exhausted" => self.stats.exhausted += 1,
                        "timedOut" => self.stats.timed_out += 1,
                        "cancelled" => self.stats.cancelled += 1,
                        _ => {
                            self.stats.unavailable += 1;
                            assert!(req.try_only, "seed {seed}: unavailable for a lease");
                        }
                    }
                    if self.creating.remove(&request).is_some() {
                        self.abandoned.insert(request);
                    }
                }
                "waiting" => {
                    self.stats.waiting += 1;
                    let req = self
                        .open
                        .get_mut(&request)
                        .unwrap_or_else(|| panic!("seed {seed}: {request} waits but is not live"));
                    assert!(!req.try_only, "seed {seed}: a tryLease never waits");
                    assert!(!req.announced, "seed {seed}: {request} announced twice");
                    req.announced = true;
                }
                "probe" => {
                    self.stats.probes += 1;
                    let executor = o["executor"].as_str().unwrap_or_default().to_string();
                    self.probes
                        .insert(executor, o["url"].as_str().unwrap_or_default().to_string());
                }
                "deleteMachine" => {
                    if let Some(lease) = o["lease"].as_u64() {
                        assert!(
                            self.deleting.contains_key(&lease),
                            "seed {seed}: a deletion for lease {lease}, which was not released"
                        );
                    }
                    let hold = o["hold"].as_str().unwrap_or_default();
                    assert!(
                        self.machines.remove(hold),
                        "seed {seed}: machine {hold} deleted but not live"
                    );
                }
                "event"
                    if matches!(
                        o["name"].as_str(),
                        Some("reloaded" | "reloadRefused" | "reloadSuperseded")
                    ) =>
                {
                    // The preflights asked so far are moot.
                    self.preflights.clear();
                }
                "preflight" => {
                    self.preflights
                        .insert(o["executor"].as_str().unwrap_or_default().to_string());
                }
                "persist" => {
                    self.stats.persists += 1;
                    let state: PersistedState =
                        serde_json::from_value(o["state"].clone()).expect("a persisted state");
                    let ids: BTreeSet<&str> = o["ids"]
                        .as_array()
                        .expect("ids")
                        .iter()
                        .filter_map(Value::as_str)
                        .collect();
                    for x in &state.exclusions {
                        assert!(ids.contains(x.id.as_str()), "seed {seed}: persist ids");
                        assert_ne!(
                            x.kind,
                            rota_core::ExclusionKind::Run,
                            "seed {seed}: run persisted"
                        );
                    }
                    // The file: entries of `ids` replaced, the others kept.
                    let ids: Vec<String> = ids.into_iter().map(str::to_string).collect();
                    self.last_persist.apply(&ids, &state.exclusions);
                }
                "event" => {}
                other => panic!("seed {seed}: unknown output {other}"),
            }
        }
        assert!(occupy.is_none(), "seed {seed}: an occupy without a grant");
        if matches!(kind.as_str(), "machineCreated" | "machineFailed") {
            // Answered (the request may have ended in this very step, before the
            // answer applied: its deadline passed first).
            self.abandoned
                .remove(input["id"].as_str().unwrap_or_default());
        }
        if let Some(hold) = released_hold {
            assert!(
                !self.machines.contains(&hold),
                "seed {seed}: releasing the lease of machine {hold} did not delete it"
            );
        }
        if kind == "restore" {
            // What was read is what the file holds: no write for a restore.
            self.last_persist = self.policy.persisted_state();
        }
        if !self.checked {
            return;
        }

        // ---- Checks against the state after the step ----
        // (handle() checks the invariants itself in debug builds.)
        #[cfg(not(debug_assertions))]
        self.policy.check_invariants();
        let Some(after) = self.snap.as_ref() else {
            return;
        };
        let reloaded = matches!(kind.as_str(), "reload" | "preflightResult");
        assert_eq!(
            sorted(self.policy.persisted_state()),
            sorted(self.last_persist.clone()),
            "seed {seed}: the file the persists wrote is not the persisted state"
        );
        // Every grant or machine creation: the executor was not excluded then (an
        // exclusion that came later in the same step announced itself after it).
        for (i, executor, role, request) in &taken {
            let Some(x) = after.executors.iter().find(|x| x.id == *executor) else {
                continue;
            };
            if x.exclusion.is_some() {
                assert!(
                    excluded_at.get(executor).is_some_and(|at| at > i),
                    "seed {seed}: {request} went to {executor}, which is excluded ({:?})",
                    x.exclusion
                );
            }
            // (An occupy applies after the grants time made: it may go beyond.)
            let occupied = kind == "occupy" && input["executor"] == json!(executor);
            if !reloaded && !occupied && !x.draining {
                assert!(
                    x.busy <= x.slots,
                    "seed {seed}: a grant put {executor} over its slots ({} of {})",
                    x.busy,
                    x.slots
                );
                if let (Some(busy), Some(cap)) = (x.busy_by_role.get(role), x.role_caps.get(role)) {
                    assert!(
                        busy <= cap,
                        "seed {seed}: a grant put {executor} over its {role} cap"
                    );
                }
            }
        }
        // Slot accounting: busy is exactly what the host holds there.
        let mut busy: BTreeMap<&str, u32> = BTreeMap::new();
        let mut by_role: BTreeMap<(&str, &str), u32> = BTreeMap::new();
        for l in self
            .leases
            .values()
            .chain(self.deleting.values())
            .filter(|l| l.counted)
        {
            *busy.entry(&l.executor).or_default() += 1;
            if let Some(role) = &l.role {
                *by_role.entry((&l.executor, role)).or_default() += 1;
            }
        }
        for (x, role) in self.creating.values() {
            *busy.entry(x).or_default() += 1;
            *by_role.entry((x, role)).or_default() += 1;
        }
        for x in &after.executors {
            assert_eq!(
                x.busy,
                busy.remove(x.id.as_str()).unwrap_or(0),
                "seed {seed}: busy count of {} after {kind}",
                x.id
            );
            for (role, n) in x.busy_by_role.iter() {
                assert_eq!(
                    *n,
                    by_role
                        .get(&(x.id.as_str(), role.as_str()))
                        .copied()
                        .unwrap_or(0),
                    "seed {seed}: {role} count of {} after {kind}",
                    x.id
                );
            }
            if reloaded && x.busy > x.slots {
                self.over_ok.insert(x.id.clone());
            }
            if x.busy <= x.slots {
                self.over_ok.remove(&x.id);
            } else {
                assert!(
                    x.draining || self.over_ok.contains(&x.id),
                    "seed {seed}: {} holds {} leases on {} slots",
                    x.id,
                    x.busy,
                    x.slots
                );
            }
        }
        assert!(
            busy.is_empty(),
            "seed {seed}: leases on executors that left: {busy:?}"
        );
        // The queue is the open requests that are not creating a machine.
        let queued: BTreeSet<&str> = after.queue.iter().map(|q| q.request.as_str()).collect();
        let open: BTreeSet<&str> = self
            .open
            .keys()
            .map(String::as_str)
            .filter(|id| !self.creating.contains_key(*id))
            .collect();
        assert_eq!(queued, open, "seed {seed}: the queue after {kind}");
        let creating: BTreeSet<&str> = after.creating.iter().map(|q| q.request.as_str()).collect();
        assert_eq!(
            creating,
            self.creating.keys().map(String::as_str).collect(),
            "seed {seed}: machines being created"
        );
    }

    /// A request that takes a slot on `executor`: it has the role, is not avoided,
    /// and is the pin when pinned.
    fn check_taker(&self, req: &Req, request: &str, executor: &str, before: Option<&Snapshot>) {
        let after = self.snap.as_ref();
        let seed = self.seed;
        assert!(
            !req.avoid.iter().any(|a| a == executor),
            "seed {seed}: {request} avoids {executor} but got it"
        );
        if let Some(pin) = &req.pin {
            assert_eq!(pin, executor, "seed {seed}: {request} is pinned");
        }
        if let Some(after) = after {
            let has = |s: &Snapshot| {
                s.executors
                    .iter()
                    .any(|x| x.id == executor && x.roles.contains(&req.role))
            };
            assert!(
                has(after) || before.is_some_and(has),
                "seed {seed}: {executor} lacks the role {} of {request}",
                req.role
            );
        }
    }

    // ---- Inputs ---------------------------------------------------------------------------

    fn lease(&mut self, try_only: bool) {
        let now = self.time();
        let roles = roles_of(&self.doc());
        let ids = executor_ids(&self.doc());
        // Mostly a role some executor takes; sometimes any role, or none at all.
        let taken: Vec<String> = self.doc()["executors"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|x| x["roles"].as_array().cloned().unwrap_or_default())
            .filter_map(|r| r.as_str().map(String::from))
            .collect();
        let role = match self.rng.below(100) {
            0..=1 => "no-such-role".to_string(),
            2..=14 => self.rng.pick(&roles).unwrap_or_default(),
            _ => match self.rng.pick(&taken) {
                Some(role) => role,
                None => self.rng.pick(&roles).unwrap_or_default(),
            },
        };
        let id = match self
            .rng
            .pick(&self.open.keys().cloned().collect::<Vec<_>>())
        {
            Some(live) if self.rng.chance(2) => live, // a duplicate: refused
            _ => self.fresh("q"),
        };
        let mut input = json!({
            "type": if try_only { "tryLease" } else { "lease" },
            "now": now, "id": id, "role": role,
        });
        if self.rng.chance(30) {
            let n = self.rng.range(1, 2);
            let avoid: Vec<String> = (0..n).filter_map(|_| self.rng.pick(&ids)).collect();
            input["avoid"] = json!(avoid);
        }
        if self.rng.chance(15) {
            input["prefer"] = json!(self.rng.pick(&ids));
        }
        if self.rng.chance(8) {
            input["pin"] = if self.rng.chance(85) {
                json!(self.rng.pick(&ids))
            } else {
                json!(format!("x{}", self.next_exec + 1 + self.rng.below(2)))
            };
        }
        if self.rng.chance(30) {
            input["rank"] = json!(self.rng.range(0, 6) as i64 - 2);
        }
        if self.rng.chance(20) {
            input["eventTime"] = json!(now.saturating_sub(self.rng.below(600_000)));
        }
        if self.rng.chance(50) {
            input["label"] = json!(format!("story-{}", self.rng.below(50)));
        }
        if self.rng.chance(30) {
            input["deadline"] = json!(now + self.rng.below(300_000));
        }
        self.send(input);
    }

    fn release(&mut self) {
        let now = self.time();
        let live: Vec<u64> = self.leases.keys().copied().collect();
        let lease = match self.rng.below(100) {
            0..=79 if !live.is_empty() => self.rng.pick(&live).unwrap_or(1),
            0..=94 if !self.released.is_empty() => {
                self.rng.pick(&self.released.clone()).unwrap_or(1)
            }
            _ => self
                .rng
                .pick(&[0, 1 << 40, u64::from(u32::MAX)])
                .unwrap_or(0),
        };
        self.send(json!({ "type": "release", "now": now, "lease": lease }));
    }

    fn cancel(&mut self) {
        let open: Vec<String> = self.open.keys().cloned().collect();
        if open.is_empty() && !self.rng.chance(10) {
            return self.tick();
        }
        let now = self.time();
        let id = match self.rng.pick(&open) {
            Some(id) if self.rng.chance(85) => id,
            _ => self.fresh("nobody"),
        };
        self.send(json!({ "type": "cancel", "now": now, "id": id }));
    }

    fn occupy(&mut self) {
        let now = self.time();
        let id = self.fresh("o");
        let executor = self.some_executor();
        let mut input = json!({ "type": "occupy", "now": now, "id": id, "executor": executor });
        if self.rng.chance(70) {
            input["role"] = json!(self.rng.pick(&roles_of(&self.doc())));
        }
        if self.rng.chance(30) {
            self.next_machine += 1;
            input["hold"] = json!(format!("m{}", self.next_machine));
        }
        self.send(input);
    }

    fn report(&mut self) {
        let now = self.time();
        let executor = self.some_executor();
        let kind = self
            .rng
            .pick(&[
                "usageLimit",
                "usageLimit",
                "rateLimit",
                "rateLimit",
                "rateLimit",
                "authentication",
                "outage",
                "outage",
                "outage",
                "modelUnavailable",
                "other",
                "other",
                "other",
                "usageLimit",
                "outage",
            ])
            .unwrap_or("other");
        let message = if self.rng.chance(2) {
            "Error: model not found (claude-9)".to_string()
        } else {
            format!("{kind} number {}", self.rng.below(1000))
        };
        let mut failure = json!({ "kind": kind, "message": message });
        if self.rng.chance(20) {
            failure["resetAt"] = json!((now + self.rng.below(1_800_000)).saturating_sub(300_000));
        }
        if self.rng.chance(20) {
            failure["retryAfterMs"] = json!(self.rng.below(600_000));
        }
        self.send(
            json!({ "type": "report", "now": now, "executor": executor, "failure": failure }),
        );
    }

    fn exclude(&mut self) {
        let now = self.time();
        let executor = self.some_executor();
        let kind = self
            .rng
            .pick(&["manual", "manual", "until", "until", "health", "run"])
            .unwrap_or("manual");
        let mut input =
            json!({ "type": "exclude", "now": now, "executor": executor, "kind": kind });
        if self.rng.chance(60) {
            // Sometimes in the past: refused for `until` and `manual`.
            input["until"] = json!((now + self.rng.below(900_000)).saturating_sub(60_000));
        }
        if self.rng.chance(50) {
            input["reason"] = json!("maintenance");
        }
        self.send(input);
    }

    fn resume(&mut self) {
        let now = self.time();
        let excluded: Vec<String> = self
            .policy
            .snapshot()
            .executors
            .into_iter()
            .filter(|x| x.exclusion.is_some())
            .map(|x| x.id)
            .collect();
        let executor = match self.rng.pick(&excluded) {
            Some(x) if self.rng.chance(90) => x,
            _ => self.some_executor(),
        };
        self.send(json!({ "type": "resume", "now": now, "executor": executor }));
    }

    fn probe(&mut self) {
        let now = self.time();
        let asked: Vec<String> = self.probes.keys().cloned().collect();
        let executor = match self.rng.pick(&asked) {
            Some(x) if self.rng.chance(90) => x,
            _ => self.some_executor(),
        };
        let up = self.rng.chance(self.knobs.probe_up_pct);
        self.send(json!({ "type": "probeResult", "now": now, "executor": executor, "up": up }));
    }

    fn machine(&mut self) {
        if let Some(&lease) = self.deleting.keys().next() {
            if self.rng.chance(50) {
                let now = self.time();
                let ok = self.rng.chance(self.knobs.machine_ok_pct);
                let mut input =
                    json!({ "type": "machineDeleted", "now": now, "lease": lease, "ok": ok });
                if !ok {
                    input["error"] = json!("the provider timed out");
                }
                self.send(input);
                return;
            }
        }
        let asked: Vec<String> = self.machine_asks.keys().cloned().collect();
        if asked.is_empty() && !self.rng.chance(5) {
            return self.lease(false);
        }
        let now = self.time();
        let id = match self.rng.pick(&asked) {
            Some(id) if self.rng.chance(95) => id,
            _ => self.fresh("nomachine"),
        };
        if self.rng.chance(self.knobs.machine_ok_pct) {
            self.next_machine += 1;
            let hold = format!("m{}", self.next_machine);
            self.send(json!({ "type": "machineCreated", "now": now, "id": id, "hold": hold }));
        } else {
            self.send(json!({ "type": "machineFailed", "now": now, "id": id, "message": "quota exceeded" }));
        }
    }

    fn preflight(&mut self) {
        let now = self.time();
        let asked: Vec<String> = self.preflights.iter().cloned().collect();
        let Some(executor) = self.rng.pick(&asked) else {
            return self.tick();
        };
        let ok = self.rng.chance(self.knobs.preflight_ok_pct);
        let mut input =
            json!({ "type": "preflightResult", "now": now, "executor": executor, "ok": ok });
        if !ok {
            input["error"] = json!("the harness does not start");
        }
        self.send(input);
    }

    fn reload(&mut self) {
        let now = self.time();
        let doc = self.doc().clone();
        let (document, valid) = gen_reload(&mut self.rng, &self.knobs, &doc, &mut self.next_exec);
        let accepted = self
            .send(json!({ "type": "reload", "now": now, "document": document }))
            .is_some();
        assert_eq!(
            accepted,
            valid,
            "seed {}: a {} reload was {}",
            self.seed,
            if valid { "valid" } else { "invalid" },
            if accepted { "accepted" } else { "refused" }
        );
    }

    fn restore(&mut self) {
        let now = self.time();
        let state = if self.rng.chance(50) {
            serde_json::to_value(&self.last_persist).expect("a state")
        } else {
            let n = self.rng.range(0, 4);
            let exclusions: Vec<Value> = (0..n)
                .map(|_| {
                    let kind = self.rng.pick(&["until", "manual", "health", "run"]).unwrap_or("until");
                    let mut x = json!({ "id": self.some_executor(), "reason": "from the file", "kind": kind });
                    if kind == "until" || self.rng.chance(50) {
                        x["until"] = json!((now + self.rng.below(1_200_000)).saturating_sub(300_000));
                    }
                    x
                })
                .collect();
            json!({ "version": if self.rng.chance(5) { 2 } else { 1 }, "exclusions": exclusions })
        };
        self.send(json!({ "type": "restore", "now": now, "state": state }));
    }

    fn tick(&mut self) {
        let now = match self.policy.poll_timeout() {
            Some(wake) if self.rng.chance(60) => {
                self.now = self.now.max(wake);
                self.now
            }
            _ => self.time(),
        };
        self.send(json!({ "type": "tick", "now": now }));
    }

    fn invalid(&mut self) {
        let now = self.now;
        let texts = [
            "not json".to_string(),
            "{}".to_string(),
            "[1,2]".to_string(),
            json!({ "type": "nope", "now": now }).to_string(),
            json!({ "type": "lease", "now": now, "role": "coder" }).to_string(),
            json!({ "type": "lease", "now": now, "id": "", "role": "coder" }).to_string(),
            json!({ "type": "release", "now": -1, "lease": 1 }).to_string(),
            json!({ "type": "tick", "now": 9_007_199_254_740_993u64 }).to_string(),
            json!({ "type": "tick" }).to_string(),
            json!({ "type": "lease", "now": now, "id": "z", "role": "coder", "extra": 1 }).to_string(),
            json!({ "type": "report", "now": now, "executor": "x1", "failure": { "kind": "meteor" } }).to_string(),
            json!({ "type": "exclude", "now": now, "executor": "x1", "kind": "until" }).to_string(),
            json!({ "type": "restore", "now": now, "state": { "version": 1, "exclusions": [{ "id": "x1", "reason": "", "kind": "until" }] } }).to_string(),
            json!({ "type": "reload", "now": now, "document": { "executors": 3 } }).to_string(),
        ];
        let text = self.rng.pick(&texts).unwrap_or_default();
        let refused = self.send_text(&text, None).is_none();
        assert!(refused, "seed {}: {text} was accepted", self.seed);
    }

    /// A restart: a fresh policy from the same document, restored from the last
    /// persist decision, has the same persisted state.
    fn restart_check(&mut self) {
        self.stats.restarts += 1;
        let mut fresh = Policy::new(&self.policy.document(), self.policy.options().clone())
            .unwrap_or_else(|e| panic!("seed {}: the running document is refused: {e}", self.seed));
        let restore =
            json!({ "type": "restore", "now": self.policy.now(), "state": self.last_persist });
        let answer = step_str(&mut fresh, &restore.to_string());
        assert!(
            !answer.contains("\"error\""),
            "seed {}: restoring {restore} failed: {answer}",
            self.seed
        );
        assert_eq!(
            sorted(fresh.persisted_state()),
            sorted(self.last_persist.clone()),
            "seed {}: the state after a restore is not the persisted one",
            self.seed
        );
    }

    /// A live swap: export, import; the copy must answer the next inputs the same.
    fn swap(&mut self) {
        if self.shadow.is_some() {
            return;
        }
        self.stats.swaps += 1;
        let exported = self.policy.export_state();
        let copy = Policy::import_state(&exported)
            .unwrap_or_else(|e| panic!("seed {}: import failed: {e}", self.seed));
        assert_eq!(
            copy.export_state(),
            exported,
            "seed {}: import is not export",
            self.seed
        );
        let inputs = self.rng.range(5, 40) as u32;
        self.shadow = Some((copy, inputs));
    }

    fn step(&mut self) {
        let a = self.rng.weighted(&self.knobs.weights);
        match ACTIONS[a].0 {
            Action::Lease => self.lease(false),
            Action::TryLease => self.lease(true),
            Action::Release => self.release(),
            Action::Cancel => self.cancel(),
            Action::Occupy => self.occupy(),
            Action::Report => self.report(),
            Action::Exclude => self.exclude(),
            Action::Resume => self.resume(),
            Action::Probe => self.probe(),
            Action::Machine => self.machine(),
            Action::Preflight => self.preflight(),
            Action::Reload => self.reload(),
            Action::Restore => self.restore(),
            Action::Tick => self.tick(),
            Action::Invalid => self.invalid(),
            Action::Restart => self.restart_check(),
            Action::Swap => self.swap(),
        }
    }

    // ---- Liveness ---------------------------------------------------------------------------

    /// No more faults: resume everything, release everything, answer every effect
    /// well, follow the wake-ups. Every request must end within the bound.
    fn converge(&mut self, bound: u64) {
        let seed = self.seed;
        for round in 0..bound {
            self.stats.liveness_rounds = round;
            let now = self.now;
            for (executor, _) in std::mem::take(&mut self.probes) {
                self.send(
                    json!({ "type": "probeResult", "now": now, "executor": executor, "up": true }),
                );
            }
            // (An answer may ask for more: those stay for the next round.)
            for executor in self.preflights.clone() {
                self.send(json!({ "type": "preflightResult", "now": now, "executor": executor, "ok": true }));
                self.preflights.remove(&executor);
            }
            for (id, _) in self.machine_asks.clone() {
                self.next_machine += 1;
                let hold = format!("m{}", self.next_machine);
                self.send(json!({ "type": "machineCreated", "now": now, "id": id, "hold": hold }));
            }
            for lease in self.leases.keys().copied().collect::<Vec<_>>() {
                self.send(json!({ "type": "release", "now": now, "lease": lease }));
            }
            for lease in self.deleting.keys().copied().collect::<Vec<_>>() {
                self.send(
                    json!({ "type": "machineDeleted", "now": now, "lease": lease, "ok": true }),
                );
            }
            let ids = executor_ids(&self.doc());
            for x in &ids {
                self.send(json!({ "type": "resume", "now": now, "executor": x }));
            }
            // A request pinned to an executor no document declares waits by design:
            // the host gives up on it.
            let orphans: Vec<String> = self
                .open
                .iter()
                .filter(|(id, q)| {
                    q.pin.as_ref().is_some_and(|p| !ids.contains(p))
                        && !self.creating.contains_key(*id)
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in orphans {
                self.send(json!({ "type": "cancel", "now": now, "id": id }));
            }
            if self.open.is_empty()
                && self.leases.is_empty()
                && self.deleting.is_empty()
                && self.machine_asks.is_empty()
                && self.probes.is_empty()
                && self.preflights.is_empty()
            {
                let snap = self.policy.snapshot();
                assert!(snap.queue.is_empty() && snap.creating.is_empty());
                assert!(snap
                    .executors
                    .iter()
                    .all(|x| x.busy == 0 && x.exclusion.is_none()));
                assert!(
                    self.machines.is_empty(),
                    "seed {seed}: machines never deleted: {:?}",
                    self.machines
                );
                assert!(
                    self.abandoned.is_empty(),
                    "seed {seed}: machines never answered for {:?}",
                    self.abandoned
                );
                return;
            }
            self.now = match self.policy.poll_timeout() {
                Some(wake) => self.now.max(wake),
                None => self.now + 1_000,
            };
            self.send(json!({ "type": "tick", "now": self.now }));
        }
        panic!(
            "seed {seed}: no convergence after {bound} rounds: open {:?}, leases {}, snapshot {}",
            self.open.keys().collect::<Vec<_>>(),
            self.leases.len(),
            serde_json::to_string(&self.policy.snapshot()).unwrap_or_default()
        );
    }
}

const TRACE_LEN: usize = 12;

thread_local! {
    /// The last inputs, printed when a seed fails.
    static TRACE: std::cell::RefCell<std::collections::VecDeque<String>> =
        const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
}

/// Prints the seed (and the last inputs) when a run panics, so that
/// `ROTA_SIM_SEED=n` reproduces it.
struct SeedGuard(u64);

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            TRACE.with(|t| {
                eprintln!("the last inputs of seed {}:", self.0);
                for line in t.borrow().iter() {
                    eprintln!("  {line}");
                }
            });
            eprintln!(
                "\n*** simulation failed: seed {0} (reproduce: ROTA_SIM_SEED={0} cargo test -p rota-core --test sim)\n",
                self.0
            );
        }
    }
}

fn run_seed(seed: u64, steps: u64, checked: bool) -> (u64, Stats) {
    let _guard = SeedGuard(seed);
    TRACE.with(|t| t.borrow_mut().clear());
    let mut host = Host::new(seed, checked);
    for _ in 0..steps {
        host.step();
    }
    if checked {
        host.restart_check();
    }
    host.shadow = None;
    // Each round frees every slot; a queue of n drains in about n rounds at worst.
    let bound = 50 + 2 * host.open.len() as u64;
    host.converge(bound);
    (host.hash, host.stats)
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[test]
fn simulation_is_safe_live_and_deterministic() {
    let steps = env_u64("ROTA_SIM_STEPS").unwrap_or(2_000);
    let seeds: Vec<u64> = match env_u64("ROTA_SIM_SEED") {
        Some(seed) => vec![seed],
        None => {
            let first = env_u64("ROTA_SIM_FIRST").unwrap_or(0);
            (first..first + env_u64("ROTA_SIM_SEEDS").unwrap_or(20)).collect()
        }
    };
    // Seeds run on a few threads; a failing one names itself.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let total = std::sync::Mutex::new(Stats::default());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&seed) = seeds.get(i) else { break };
                let (hash, stats) = run_seed(seed, steps, true);
                let (again, _) = run_seed(seed, steps, false);
                assert_eq!(
                    hash, again,
                    "seed {seed}: the same seed gave different output streams"
                );
                total.lock().expect("stats").add(&stats);
            });
        }
    });
    let total = total.into_inner().expect("stats");
    eprintln!("{} seeds x {steps} steps: {total:?}", seeds.len());
    assert!(total.granted > 0 && total.waiting > 0);
}

// ---- Failures the simulation found, pinned -------------------------------------------------

/// Feeds JSON inputs; the answers, each checked for an error code when one is given.
fn feed(policy: &mut Policy, inputs: &[Value]) -> Vec<Value> {
    inputs
        .iter()
        .map(|input| {
            let answer: Value =
                serde_json::from_str(&step_str(policy, &input.to_string())).expect("JSON");
            assert!(
                answer.get("error").is_none(),
                "{input} was refused: {answer}"
            );
            policy.check_invariants();
            answer
        })
        .collect()
}

fn provisioned_roster(roles: &[&str]) -> Value {
    json!({
        "roles": roles,
        "executors": [
            { "id": "m", "harness": "pi", "roles": [roles[0]], "provision": true },
            { "id": "k", "harness": "pi", "roles": [roles[0]] },
        ]
    })
}

/// Seed 14: a reload removed an executor whose only slot was a machine being
/// created; when that creation ended (deadline, cancel, failure) the executor stayed
/// listed as draining with nothing running.
#[test]
fn regression_a_removed_executor_leaves_when_its_machine_creation_ends() {
    for ending in ["deadline", "cancel", "machineFailed"] {
        let mut policy =
            Policy::new(&provisioned_roster(&["coder"]), Options::default()).expect("a roster");
        let keep_k = json!({ "executors": [{ "id": "k", "harness": "pi", "roles": ["coder"] }] });
        let end = match ending {
            "deadline" => json!({ "type": "tick", "now": T0 + 10 }),
            "cancel" => json!({ "type": "cancel", "now": T0 + 2, "id": "q" }),
            _ => json!({ "type": "machineFailed", "now": T0 + 2, "id": "q", "message": "quota" }),
        };
        let answers = feed(
            &mut policy,
            &[
                json!({ "type": "lease", "now": T0, "id": "q", "role": "coder", "deadline": T0 + 10 }),
                json!({ "type": "reload", "now": T0 + 1, "document": keep_k }),
                end,
            ],
        );
        assert_eq!(answers[0]["outputs"][0]["type"], "createMachine");
        let snapshot = policy.snapshot();
        assert_eq!(
            snapshot
                .executors
                .iter()
                .map(|x| x.id.as_str())
                .collect::<Vec<_>>(),
            ["k"],
            "{ending}: m left the roster"
        );
        // The machine that arrives late is deleted.
        if ending != "machineFailed" {
            let answer = feed(
                &mut policy,
                &[json!({ "type": "machineCreated", "now": T0 + 20, "id": "q", "hold": "h" })],
            );
            assert_eq!(answer[0]["outputs"][0]["type"], "deleteMachine", "{ending}");
        }
    }
}

/// Seed 24: a machine failed after a reload removed its request's role; the
/// request went back to waiting in no queue, forever.
#[test]
fn regression_a_machine_failure_after_its_role_went_ends_the_request() {
    let mut policy =
        Policy::new(&provisioned_roster(&["r0", "r1"]), Options::default()).expect("a roster");
    let other_roles = json!({
        "roles": ["r1"],
        "executors": [
            { "id": "m", "harness": "pi", "roles": ["r1"], "provision": true },
            { "id": "k", "harness": "pi", "roles": ["r1"] },
        ]
    });
    let answers = feed(
        &mut policy,
        &[
            json!({ "type": "lease", "now": T0, "id": "q", "role": "r0" }),
            json!({ "type": "reload", "now": T0 + 1, "document": other_roles }),
            json!({ "type": "machineFailed", "now": T0 + 2, "id": "q" }),
        ],
    );
    let last = answers[2]["outputs"].as_array().expect("outputs");
    assert!(
        last.iter()
            .any(|o| o["type"] == "exhausted" && o["request"] == "q"),
        "{last:?}"
    );
    assert!(policy.snapshot().queue.is_empty());
}

/// Found by the corpus mutations: an export taken while an executor drains under a
/// role a reload removed could not be imported.
#[test]
fn regression_an_export_with_an_executor_draining_a_removed_role_imports() {
    let mut policy = Policy::new(&fuzz_document(), Options::default()).expect("a roster");
    let only_x =
        json!({ "roles": ["x"], "executors": [{ "id": "a", "harness": "h", "roles": ["x"] }] });
    feed(
        &mut policy,
        &[
            json!({ "type": "lease", "now": T0, "id": "a1", "role": "coder" }),
            json!({ "type": "lease", "now": T0, "id": "a2", "role": "coder" }),
            json!({ "type": "reload", "now": T0 + 1, "document": only_x }),
        ],
    );
    assert!(policy.snapshot().executors.iter().any(|x| x.draining));
    let exported = policy.export_state();
    let copy = Policy::import_state(&exported).expect("the export imports");
    assert_eq!(copy.export_state(), exported);
}

// ---- The fuzz corpus, without nightly ---------------------------------------------------------

/// The fuzz target's fixed document (core/fuzz/fuzz_targets/step.rs has the same).
fn fuzz_document() -> Value {
    json!({
        "executors": [
            { "id": "a", "harness": "claude", "roles": ["coder", "reviewer"], "slots": 2 },
            { "id": "b", "harness": "pi", "roles": ["coder"], "priority": 2,
              "health": "http://127.0.0.1:1/h" },
            { "id": "m", "harness": "pi", "roles": ["verifier"], "provision": true, "slots": 2 }
        ]
    })
}

/// What the fuzz target does with one input: each line is one JSON input.
fn fuzz_one(bytes: &[u8]) {
    let mut policy = Policy::new(&fuzz_document(), Options::default()).expect("the fuzz document");
    let text = String::from_utf8_lossy(bytes);
    for line in text.lines().take(256) {
        let answer = step_str(&mut policy, line);
        assert!(serde_json::from_str::<Value>(&answer).is_ok());
        policy.check_invariants();
        let _ = policy.poll_timeout();
    }
    let _ = policy.snapshot();
    let copy = Policy::import_state(&policy.export_state())
        .unwrap_or_else(|e| panic!("an export does not import: {e}\n{}", policy.export_state()));
    assert_eq!(copy.export_state(), policy.export_state());
}

fn corpus() -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/step");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| std::fs::read(p).expect("a corpus file"))
        .collect()
}

/// Changes a JSON text the way a fuzzer would: bytes flipped, cut, repeated,
/// numbers and strings swapped for edge cases, lines spliced.
fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..rng.range(1, 4) {
        match rng.below(8) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len() as u64) as usize;
                out[i] ^= 1 << rng.below(8);
            }
            1 if !out.is_empty() => {
                let i = rng.below(out.len() as u64) as usize;
                out.truncate(i);
            }
            2 if !out.is_empty() => {
                let i = rng.below(out.len() as u64) as usize;
                let j = (i + rng.below(16) as usize).min(out.len());
                let piece = out[i..j].to_vec();
                out.splice(i..i, piece);
            }
            3 => {
                let edge = rng
                    .pick(&[
                        "0",
                        "-1",
                        "18446744073709551615",
                        "9007199254740993",
                        "1e308",
                        "-0.5",
                        "null",
                        "\"\"",
                        "[]",
                        "{}",
                        "\"\\u0000\"",
                        "\"a\"",
                        "true",
                    ])
                    .unwrap_or("0");
                // Replace the first number or string after a random colon.
                let text = String::from_utf8_lossy(&out).to_string();
                let colons: Vec<usize> = text.match_indices(':').map(|(i, _)| i).collect();
                if let Some(&c) = rng.pick(&colons).as_ref() {
                    let rest = &text[c + 1..];
                    let end = rest.find([',', '}', ']']).unwrap_or(rest.len());
                    out = format!("{}{edge}{}", &text[..=c], &rest[end..]).into_bytes();
                }
            }
            4 => {
                out.push(b'\n');
                out.extend_from_slice(other);
            }
            5 => {
                let lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
                if let Some(line) = rng.pick(&lines) {
                    let mut again = line.to_vec();
                    again.push(b'\n');
                    again.extend_from_slice(&out);
                    out = again;
                }
            }
            6 => {
                let text = String::from_utf8_lossy(&out).to_string();
                let swapped = match rng.below(4) {
                    0 => text.replace("\"lease\"", "\"tryLease\""),
                    1 => text.replace("\"a\"", "\"b\""),
                    2 => text.replace("\"coder\"", "\"verifier\""),
                    _ => text.replace("\"now\":", "\"now\":1"),
                };
                out = swapped.into_bytes();
            }
            _ => {
                let i = rng.below(out.len() as u64 + 1) as usize;
                let junk = rng
                    .pick(&[&b"{"[..], b"}", b"\"", b"\\", b",", b"\xff\xfe", b"\n"])
                    .unwrap_or(b"{");
                out.splice(i..i, junk.iter().copied());
            }
        }
    }
    out
}

#[test]
fn fuzz_corpus_and_mutations_never_panic() {
    let corpus = corpus();
    assert!(
        corpus.len() >= 20,
        "the fuzz corpus has {} files",
        corpus.len()
    );
    for input in &corpus {
        fuzz_one(input);
    }
    let mut rng = Rng(env_u64("ROTA_FUZZ_SEED").unwrap_or(7));
    let rounds = env_u64("ROTA_FUZZ_ROUNDS").unwrap_or(3_000);
    for round in 0..rounds {
        let a = rng.pick(&corpus).unwrap_or_default();
        let b = rng.pick(&corpus).unwrap_or_default();
        let mutated = mutate(&mut rng, &a, &b);
        let result = std::panic::catch_unwind(|| fuzz_one(&mutated));
        assert!(
            result.is_ok(),
            "round {round}: a mutated input panicked: {}",
            String::from_utf8_lossy(&mutated)
        );
    }
}
