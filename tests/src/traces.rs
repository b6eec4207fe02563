//! Random traces: input sequences drawn from one seed, bad inputs included, generated
//! against the native core (so they follow its outputs: a granted lease gets released,
//! a probe answered, a machine created) and recorded with the native answers' FNV-1a
//! hashes. Every other host replays the input texts and must give byte-identical
//! answers.
//!
//! The file (`target/conformance/traces.json`):
//!
//! ```json
//! { "version": 1, "seed": "00000000c0ffee00", "count": 1000,
//!   "traces": [ { "seed": "…16 hex…", "document": "<json text>", "options": "<json text>",
//!                 "inputs": ["<input text>", ...], "hashes": ["…16 hex…", ...],
//!                 "hash": "…16 hex…" } ] }
//! ```
//!
//! `hashes[i]` is the hash of the answer text to `inputs[i]`; `hash` is the hash of
//! every answer text, each followed by `\n`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::fnv::{hash_hex, Fnv1a};
use crate::host::{Host, NativeHost};
use crate::prng::SplitMix64;

/// The default seed of `make test` (any other reproduces another 1,000 traces).
pub const DEFAULT_SEED: u64 = 0x0000_0000_c0ff_ee00;
pub const DEFAULT_COUNT: usize = 1000;
pub const FILE_VERSION: u32 = 1;

const T0: u64 = 1_800_000_000_000;
const DEFAULT_ROLES: [&str; 5] = ["planner", "coder", "reviewer", "judge", "verifier"];
const OWN_ROLES: [&str; 3] = ["build", "test", "deploy"];
const NAMES: [&str; 6] = ["claude", "codex", "pi", "local", "gpu-1", "gpu-2"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// The seed this trace was drawn from (16 hex digits).
    pub seed: String,
    pub document: String,
    pub options: String,
    pub inputs: Vec<String>,
    pub hashes: Vec<String>,
    pub hash: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceFile {
    pub version: u32,
    pub seed: String,
    pub count: usize,
    pub traces: Vec<Trace>,
}

/// The seed of trace `index` in a set drawn from `seed`.
pub fn trace_seed(seed: u64, index: usize) -> u64 {
    let mut r = SplitMix64::new(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    r.next_u64()
}

/// `count` traces from `seed`, with the native answers' hashes. Also returns native
/// problems (invariant panics, rejected inputs that changed state, restore mismatches)
/// with the trace seed and step.
pub fn generate(seed: u64, count: usize) -> (TraceFile, Vec<String>) {
    generate_with(seed, count, true)
}

/// As [`generate`]; `checks: false` skips the native host's extra checks (faster, for
/// runners that only need the traces).
pub fn generate_with(seed: u64, count: usize, checks: bool) -> (TraceFile, Vec<String>) {
    let mut traces = Vec::with_capacity(count);
    let mut problems = Vec::new();
    for index in 0..count {
        let (trace, mut found) = generate_one_with(trace_seed(seed, index), checks);
        traces.push(trace);
        problems.append(&mut found);
    }
    (
        TraceFile {
            version: FILE_VERSION,
            seed: format!("{seed:016x}"),
            count,
            traces,
        },
        problems,
    )
}

/// What the generator knows of the policy, learnt from its outputs.
#[derive(Default)]
struct Seen {
    now: u64,
    wake_at: Option<u64>,
    request_counter: u64,
    /// Live leases: lease id -> request id.
    leases: BTreeMap<u64, String>,
    released: Vec<u64>,
    max_lease: u64,
    waiting: Vec<String>,
    /// Requests with a `createMachine` not yet answered.
    machines: Vec<String>,
    /// Leases whose machine's deletion is not answered yet (`deleteMachine` with a lease).
    deleting: Vec<u64>,
    probes: Vec<String>,
    preflights: Vec<String>,
    persisted: Option<Value>,
    /// The running document and its executor ids.
    document: Value,
    roles: Vec<String>,
    ids: Vec<String>,
    /// Ids any document had (some since removed).
    ever: Vec<String>,
}

impl Seen {
    fn learn(&mut self, answer: &Value) {
        if let Some(w) = answer.get("wakeAt") {
            self.wake_at = w.as_u64();
        }
        let Some(outputs) = answer.get("outputs").and_then(Value::as_array) else {
            return;
        };
        for o in outputs {
            let request = o.get("request").and_then(Value::as_str).map(str::to_string);
            match o["type"].as_str().unwrap_or("") {
                "granted" => {
                    if let (Some(lease), Some(request)) = (o["lease"].as_u64(), request) {
                        self.max_lease = self.max_lease.max(lease);
                        self.waiting.retain(|w| *w != request);
                        self.leases.insert(lease, request);
                    }
                }
                "waiting" => self.waiting.extend(request),
                "exhausted" | "timedOut" | "cancelled" | "unavailable" => {
                    if let Some(request) = request {
                        self.waiting.retain(|w| *w != request);
                    }
                }
                "createMachine" => {
                    if let Some(request) = request {
                        self.waiting.retain(|w| *w != request);
                        self.machines.push(request);
                    }
                }
                "deleteMachine" => self.deleting.extend(o["lease"].as_u64()),
                "probe" => self
                    .probes
                    .extend(o["executor"].as_str().map(str::to_string)),
                "preflight" => self
                    .preflights
                    .extend(o["executor"].as_str().map(str::to_string)),
                "persist" => self.persisted = Some(o["state"].clone()),
                _ => {}
            }
        }
    }

    fn set_document(&mut self, document: &Value) {
        self.document = document.clone();
        self.roles = match document.get("roles").and_then(Value::as_array) {
            Some(roles) => roles
                .iter()
                .filter_map(|r| r.as_str().map(str::to_string))
                .collect(),
            None => DEFAULT_ROLES.iter().map(|r| r.to_string()).collect(),
        };
        self.ids = executor_ids(document);
        for id in &self.ids {
            if !self.ever.contains(id) {
                self.ever.push(id.clone());
            }
        }
    }
}

fn executor_ids(document: &Value) -> Vec<String> {
    document["executors"]
        .as_array()
        .map(|xs| {
            xs.iter()
                .filter_map(|x| x["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn random_roles(r: &mut SplitMix64, roles: &[String]) -> Vec<String> {
    let mut own: Vec<String> = roles.iter().filter(|_| r.chance(45)).cloned().collect();
    if own.is_empty() {
        own.push(r.pick(roles).clone());
    }
    own
}

fn random_executor(r: &mut SplitMix64, id: &str, roles: &[String]) -> Value {
    let own = random_roles(r, roles);
    let mut slots = r.range(1, 3);
    let mut x = json!({ "id": id, "harness": *r.pick(&["claude", "pi", "codex", "lm-studio"]), "roles": own });
    if r.chance(50) {
        x["model"] = json!(*r.pick(&["sonnet", "opus", "gpt-5", "qwen3"]));
    }
    if r.chance(85) {
        if r.chance(15) {
            x["maxConcurrentAttempts"] = json!(slots);
        } else {
            x["slots"] = json!(slots);
        }
    } else {
        slots = 1; // the default
    }
    if r.chance(15) && roles.iter().any(|x| x == "coder") {
        x["coderSlots"] = json!(r.below(slots + 1));
    } else if r.chance(15) {
        let role = r.pick(&own).clone();
        x["roleSlots"] = json!({ role: r.below(slots + 1) });
    }
    match r.below(4) {
        0 => x["priority"] = json!(r.below(4)),
        1 => {
            let role = r.pick(&own).clone();
            x["priority"] = json!({ role: r.below(3), "default": r.range(1, 3) });
        }
        _ => {}
    }
    // An effort (issue 43 item 7): one, or per role with a default.
    match r.below(8) {
        0 => x["effort"] = json!(*r.pick(&["low", "high", "max"])),
        1 => {
            let role = r.pick(&own).clone();
            x["effort"] = json!({ role: "max", "default": "low" });
        }
        _ => {}
    }
    // Recovery after a cooldown and failures in a row, the
    // executor's own (over the document's, below).
    match r.below(10) {
        0 => x["recovery"] = json!("probation"),
        1 => {
            x["recovery"] = json!({
                "mode": *r.pick(&["probation", "all"]),
                "maxBackoff": *r.pick(&[1, 2, 8]),
                "quietPeriod": *r.pick(&["45s", "5 minutes"]),
            })
        }
        2 => x["exclusion"] = json!({ "consecutiveFailures": r.range(0, 4) }),
        _ => {}
    }
    if r.chance(45) {
        x["health"] = json!(format!("http://127.0.0.1:{}/health", 8000 + r.below(100)));
    }
    if r.chance(25) {
        x["cooldown"] = json!({
            "usageLimit": *r.pick(&["1h", "30 minutes", "90s"]),
            "rateLimit": *r.pick(&["2 minutes", "10m", "45s"]),
            "outage": *r.pick(&["90s", "5 minutes", "1.5 min"]),
        });
    }
    if r.chance(15) {
        x["provision"] = json!({ "image": "worker" });
    }
    if r.chance(10) {
        x["kind"] = json!("local");
    }
    if r.chance(10) {
        x["flags"] = json!({ "effort": "high" });
    }
    // An account and a budget: shared limits, a grant window.
    if r.chance(30) {
        x["account"] = json!(*r.pick(&["acme", "solo"]));
    }
    match r.below(8) {
        0 => x["budget"] = json!({ "requestsPerMinute": r.range(1, 3) }),
        1 => {
            x["budget"] =
                json!({ "requests": r.range(1, 4), "per": *r.pick(&["30s", "2 minutes"]) })
        }
        2 => x["budget"] = json!({ "requests": r.range(1, 3), "perMs": 45_000 }),
        _ => {}
    }
    // A weight: the weighted round-robin among equal priorities.
    if r.chance(25) {
        x["weight"] = json!(r.range(1, 4));
    }
    x
}

fn random_document(r: &mut SplitMix64) -> Value {
    let own_roles = r.chance(20);
    let roles: Vec<String> = if own_roles {
        OWN_ROLES.iter().map(|s| s.to_string()).collect()
    } else {
        DEFAULT_ROLES.iter().map(|s| s.to_string()).collect()
    };
    let n = r.range(1, 5) as usize;
    let executors: Vec<Value> = NAMES[..n]
        .iter()
        .map(|id| random_executor(r, id, &roles))
        .collect();
    let mut doc = json!({ "executors": executors });
    if own_roles {
        doc["roles"] = json!(roles);
    }
    if r.chance(15) {
        doc["choice"] = json!("leastBusy");
    }
    // A floor under every role, for the document or per role.
    match r.below(8) {
        0 => doc["maxExcluded"] = json!(*r.pick(&["0%", "50%", "75%"])),
        1 => doc["maxExcluded"] = json!({ "default": "50%", roles[0].as_str(): "100%" }),
        _ => {}
    }
    if r.chance(25) {
        doc["accounts"] =
            json!({ "acme": { "budget": { "requests": r.range(1, 4), "perMs": 60_000 } } });
    }
    // Tenants served fairly, some with weights (a tenant not listed weighs 1).
    if r.chance(30) {
        doc["fairness"] = json!("tenants");
        if r.chance(50) {
            doc["tenants"] = json!({ "t1": { "weight": r.range(1, 4) }, "t2": {} });
        }
    }
    // How long an idle affinity key is remembered: short ones expire within a trace.
    if r.chance(30) {
        doc["affinityTtl"] = json!(*r.pick(&["1s", "45s", "10 minutes"]));
    }
    // The upstream's later rules (issue 43): the switch, or one rule's own field.
    match r.below(12) {
        0 => doc["rules"] = json!("upstream"),
        1 => doc["prefer"] = json!("tieBreak"),
        2 => doc["coderSlotsDefault"] = json!("slots"),
        3 => doc["clones"] = json!("numbered"),
        4 => doc["leaseEvents"] = json!("typed"),
        5 => doc["resetTime"] = json!("message"),
        _ => {}
    }
    // The document's recovery and failures in a row.
    match r.below(6) {
        0 => doc["recovery"] = json!("probation"),
        1 => doc["exclusion"] = json!({ "consecutiveFailures": r.range(1, 4) }),
        2 => {
            doc["recovery"] = json!({ "mode": "probation", "maxBackoff": 4 });
            doc["exclusion"] = json!({ "consecutiveFailures": 2 });
        }
        _ => {}
    }
    doc
}

fn random_options(r: &mut SplitMix64) -> Value {
    let mut o = json!({});
    if r.chance(15) {
        o["canProbe"] = json!(false);
    }
    if r.chance(25) {
        o["preflightReloads"] = json!(true);
    }
    if r.chance(10) {
        o["healthProbeIntervalMs"] = json!(5_000);
        o["idleProbeIntervalMs"] = json!(20_000);
    }
    if r.chance(10) {
        o["rateLimitsToExclude"] = json!(2);
    }
    if r.chance(10) {
        o["kinds"] = json!(["local"]);
    }
    // The scheduler seed's ways: a startup preflight, the first declared, waiting.
    if r.chance(10) {
        o["preflight"] = json!(true);
    }
    if r.chance(15) {
        o["choice"] = json!("declared");
    }
    if r.chance(15) {
        o["unservable"] = json!("wait");
    }
    // What an expired owner's leases become (issue 18).
    if r.chance(20) {
        o["expiredOwnerLeases"] = json!(*r.pick(&["release", "keepMachines", "keep"]));
    }
    if r.chance(30) {
        Value::Null
    } else {
        o
    }
}

/// A reload's document: the running one changed (an executor added, removed, resized,
/// re-prioritised), or now and then a bad one.
fn reload_document(r: &mut SplitMix64, seen: &Seen) -> Value {
    let mut doc = seen.document.clone();
    let roles = seen.roles.clone();
    let Some(executors) = doc["executors"].as_array_mut() else {
        return doc;
    };
    match r.below(6) {
        0 if executors.len() > 1 => {
            let i = r.below(executors.len() as u64) as usize;
            executors.remove(i);
        }
        1 => {
            let free: Vec<&str> = NAMES
                .iter()
                .copied()
                .filter(|n| !seen.ids.iter().any(|id| id == n))
                .collect();
            if let Some(id) = free.first() {
                executors.push(random_executor(r, id, &roles));
            }
        }
        2 if !executors.is_empty() => {
            let i = r.below(executors.len() as u64) as usize;
            let x = &mut executors[i];
            let slots = r.range(1, 4);
            if let Some(o) = x.as_object_mut() {
                o.remove("maxConcurrentAttempts");
                o.remove("coderSlots");
                o.remove("roleSlots");
            }
            x["slots"] = json!(slots);
        }
        3 if !executors.is_empty() => {
            let i = r.below(executors.len() as u64) as usize;
            executors[i]["priority"] = json!(r.below(5));
        }
        4 => {
            // A bad document: refused, nothing changes.
            match r.below(3) {
                0 => executors.push(json!({"id": "", "harness": "", "roles": ["nobody"]})),
                1 => {
                    if let Some(first) = executors.first().cloned() {
                        executors.push(first);
                    }
                }
                _ => return json!({ "executors": "none" }),
            }
        }
        _ => {
            if !executors.is_empty() {
                let i = r.below(executors.len() as u64) as usize;
                if let Some(o) = executors[i].as_object_mut() {
                    o.remove("health");
                }
            }
        }
    }
    doc
}

fn some_executor(r: &mut SplitMix64, seen: &Seen) -> String {
    match r.below(20) {
        0 => "ghost".to_string(),
        1 if !seen.ever.is_empty() => r.pick(&seen.ever).clone(),
        _ if !seen.ids.is_empty() => r.pick(&seen.ids).clone(),
        _ => "ghost".to_string(),
    }
}

fn lease_input(r: &mut SplitMix64, seen: &mut Seen, kind: &str) -> Value {
    seen.request_counter += 1;
    let id = if r.chance(4) && !seen.waiting.is_empty() {
        r.pick(&seen.waiting).clone() // a duplicate id: DUPLICATE_REQUEST
    } else if r.chance(3) && !seen.leases.is_empty() {
        let leases: Vec<String> = seen.leases.values().cloned().collect();
        r.pick(&leases).clone()
    } else {
        format!("r{}", seen.request_counter)
    };
    let role = if r.chance(4) {
        "astronaut".to_string() // UNKNOWN_ROLE
    } else if seen.roles.is_empty() {
        "coder".to_string()
    } else {
        r.pick(&seen.roles).clone()
    };
    let mut input = json!({ "type": kind, "now": seen.now, "id": id, "role": role });
    if r.chance(20) {
        let avoid: Vec<String> = seen.ids.iter().filter(|_| r.chance(40)).cloned().collect();
        input["avoid"] = json!(avoid);
    }
    if r.chance(20) {
        input["prefer"] = json!(some_executor(r, seen));
    }
    if r.chance(8) {
        input["pin"] = json!(some_executor(r, seen));
    }
    if r.chance(30) {
        input["rank"] = json!(r.below(6) as i64 - 1);
    }
    if r.chance(30) {
        input["eventTime"] = json!(seen.now.saturating_sub(r.below(600_000)));
    }
    if r.chance(30) {
        input["label"] = json!(format!("story-{}", r.below(9)));
    }
    if r.chance(20) {
        input["purpose"] = json!(format!("lens {}", r.below(3)));
    }
    // A deadline, or (issue 18) a timeout relative to the input's `now`; now and then
    // both, which the core refuses.
    match r.below(10) {
        0 | 1 => input["deadline"] = json!(seen.now + r.range(1, 180) * 1_000),
        2 | 3 => input["timeoutMs"] = json!(r.range(0, 180) * 1_000),
        4 if r.chance(10) => {
            input["deadline"] = json!(seen.now + 1_000);
            input["timeoutMs"] = json!(1_000);
        }
        _ => {}
    }
    if let Some(owner) = some_owner(r) {
        input["owner"] = json!(owner);
    }
    // Issue 43: the context's coder executor, borrowed when no other can serve.
    if r.chance(15) {
        input["borrow"] = json!(some_executor(r, seen));
    }
    if r.chance(40) {
        input["tenant"] = json!(*r.pick(&["t1", "t2", "t3"]));
    }
    // Affinity: a few keys, so they stick, move and expire.
    if r.chance(35) {
        input["affinity"] = json!(format!("k{}", r.below(4)));
    }
    input
}

/// The instances of a shared roster (issue 18): most inputs of a trace name no owner.
const OWNERS: [&str; 3] = ["inst-a:0001", "inst-b:0002", "inst-c:0003"];

fn some_owner(r: &mut SplitMix64) -> Option<&'static str> {
    if r.chance(35) {
        Some(*r.pick(&OWNERS))
    } else {
        None
    }
}

const MESSAGES: [&str; 9] = [
    "There's an issue with the selected model (x). It may not exist or you may not have access to it.",
    "Error: model_not_found",
    "429 Too Many Requests",
    "ECONNREFUSED 127.0.0.1:1234",
    "You've hit your usage limit",
    "the tests failed",
    // Reset times a message names (issue 43 item 9): a zone, none, an unknown one.
    "You've hit your session limit · resets 8:20am (Europe/Rome)",
    "You've hit your usage limit. Try again at 2:30 PM.",
    "usage limit · resets 3am (Mars/Olympus_Mons)",
];

fn report_input(r: &mut SplitMix64, seen: &Seen) -> Value {
    let kind = *r.pick(&[
        "usageLimit",
        "rateLimit",
        "rateLimit",
        "rateLimit",
        "authentication",
        "outage",
        "outage",
        "modelUnavailable",
        "other",
        "other",
    ]);
    let mut failure = json!({ "kind": kind, "message": *r.pick(&MESSAGES) });
    if kind == "usageLimit" && r.chance(40) {
        // Sometimes in the past: then the cooldown decides.
        failure["resetAt"] = json!((seen.now + r.below(7_200_000)).saturating_sub(600_000));
    }
    if (kind == "usageLimit" || kind == "rateLimit") && r.chance(30) {
        failure["retryAfterMs"] = json!(r.below(300) * 1_000);
    }
    json!({ "type": "report", "now": seen.now, "executor": some_executor(r, seen), "failure": failure })
}

fn exclude_input(r: &mut SplitMix64, seen: &Seen) -> Value {
    let kind = *r.pick(&["manual", "manual", "until", "health", "run"]);
    let mut input =
        json!({ "type": "exclude", "now": seen.now, "executor": some_executor(r, seen) });
    if r.chance(80) {
        input["kind"] = json!(kind);
    }
    if r.chance(50) {
        input["reason"] = json!("maintenance");
    }
    if kind == "until" || r.chance(40) {
        // Now and then not after now: INVALID_INPUT.
        input["until"] = json!((seen.now + r.below(1_800_000)).saturating_sub(60_000));
    }
    input
}

fn restore_input(r: &mut SplitMix64, seen: &Seen) -> Value {
    let state = match (&seen.persisted, r.below(3)) {
        (Some(state), 0 | 1) => state.clone(),
        _ => {
            let id = some_executor(r, seen);
            json!({ "version": 1, "exclusions": [
                { "id": id, "reason": "usage limit (old)", "kind": "until", "until": seen.now + r.below(3_600_000) },
                { "id": "other-roster", "reason": "x", "kind": "manual" },
                { "id": some_executor(r, seen), "reason": "not signed in", "kind": "run" },
                { "id": some_executor(r, seen), "reason": "expired", "kind": "until", "until": seen.now.saturating_sub(1) },
                { "id": some_executor(r, seen), "reason": "serving engine down", "kind": *r.pick(&["health", "manual"]) },
            ]})
        }
    };
    let mut state = state;
    if r.chance(5) {
        state["version"] = json!(2); // INVALID_STATE
    }
    json!({ "type": "restore", "now": seen.now, "state": state })
}

/// An input that must be refused (as text: some are not JSON at all).
fn bad_input(r: &mut SplitMix64, seen: &Seen) -> String {
    let now = seen.now;
    match r.below(14) {
        0 => "not json".to_string(),
        1 => "[1,2,3]".to_string(),
        2 => json!({ "now": now }).to_string(),
        3 => json!({ "type": "teleport", "now": now }).to_string(),
        4 => json!({ "type": "lease", "now": now, "role": "coder" }).to_string(),
        5 => json!({ "type": "lease", "now": now, "id": "x", "role": 7 }).to_string(),
        6 => json!({ "type": "tick", "now": -5 }).to_string(),
        7 => json!({ "type": "tick", "now": 1.5 }).to_string(),
        8 => json!({ "type": "tick", "now": 9_007_199_254_740_993u64 }).to_string(),
        9 => json!({ "type": "release", "now": now, "lease": seen.max_lease + 1 + r.below(5) })
            .to_string(),
        10 => json!({ "type": "cancel", "now": now, "id": "nobody" }).to_string(),
        11 => json!({ "type": "lease", "now": now, "id": "x", "role": "coder", "colour": "red" })
            .to_string(),
        12 => {
            json!({ "type": "machineCreated", "now": now, "id": "nobody", "hold": 1 }).to_string()
        }
        _ => json!({ "type": "release", "now": now, "lease": 0 }).to_string(),
    }
}

fn next_input(r: &mut SplitMix64, seen: &mut Seen) -> String {
    // Time moves: mostly forward, sometimes not at all, now and then backwards.
    match r.weighted(&[20, 40, 25, 10, 5]) {
        0 => {}
        1 => seen.now += r.range(1, 5_000),
        2 => seen.now += r.range(5_000, 60_000),
        3 => seen.now += r.range(60_000, 900_000),
        _ => seen.now = seen.now.saturating_sub(r.range(1, 10_000)),
    }
    let now = seen.now;
    let kinds = [
        20, // 0 lease
        6,  // 1 tryLease
        12, // 2 release
        4,  // 3 cancel
        3,  // 4 occupy
        10, // 5 report
        4,  // 6 exclude
        3,  // 7 resume
        6,  // 8 probeResult
        5,  // 9 machine answer
        3,  // 10 reload
        4,  // 11 preflightResult
        2,  // 12 restore
        9,  // 13 tick
        3,  // 14 expireOwner
        2,  // 15 dropCreation
        1,  // 16 version marker
        6,  // 17 bad
    ];
    let input = match r.weighted(&kinds) {
        0 => lease_input(r, seen, "lease"),
        1 => lease_input(r, seen, "tryLease"),
        2 => {
            let lease = match r.below(10) {
                0 | 1 if !seen.released.is_empty() => *r.pick(&seen.released),
                2 => seen.max_lease + 1,
                _ if !seen.leases.is_empty() => {
                    let live: Vec<u64> = seen.leases.keys().copied().collect();
                    *r.pick(&live)
                }
                _ => 1 + r.below(seen.max_lease.max(1)),
            };
            if seen.leases.remove(&lease).is_some() {
                seen.released.push(lease);
            }
            json!({ "type": "release", "now": now, "lease": lease })
        }
        3 => {
            let id = if !seen.waiting.is_empty() && r.chance(85) {
                r.pick(&seen.waiting).clone()
            } else if !seen.machines.is_empty() && r.chance(70) {
                r.pick(&seen.machines).clone()
            } else {
                "nobody".to_string()
            };
            json!({ "type": "cancel", "now": now, "id": id })
        }
        4 => {
            seen.request_counter += 1;
            let mut input = json!({ "type": "occupy", "now": now, "id": format!("o{}", seen.request_counter), "executor": some_executor(r, seen) });
            if r.chance(60) && !seen.roles.is_empty() {
                input["role"] = json!(r.pick(&seen.roles).clone());
            }
            if r.chance(30) {
                input["hold"] = json!({ "machine": format!("m-{}", seen.request_counter) });
            }
            if let Some(owner) = some_owner(r) {
                input["owner"] = json!(owner);
            }
            input
        }
        5 => report_input(r, seen),
        6 => exclude_input(r, seen),
        7 => json!({ "type": "resume", "now": now, "executor": some_executor(r, seen) }),
        8 => {
            let executor = if !seen.probes.is_empty() && r.chance(85) {
                let i = r.below(seen.probes.len() as u64) as usize;
                seen.probes.remove(i)
            } else {
                some_executor(r, seen)
            };
            json!({ "type": "probeResult", "now": now, "executor": executor, "up": r.chance(50) })
        }
        9 if !seen.deleting.is_empty() && r.chance(40) => {
            let i = r.below(seen.deleting.len() as u64) as usize;
            let lease = seen.deleting.remove(i);
            if r.chance(80) {
                json!({ "type": "machineDeleted", "now": now, "lease": lease, "ok": true })
            } else {
                json!({ "type": "machineDeleted", "now": now, "lease": lease, "ok": false, "error": "provider timeout" })
            }
        }
        9 => {
            let id = if !seen.machines.is_empty() && r.chance(90) {
                let i = r.below(seen.machines.len() as u64) as usize;
                seen.machines.remove(i)
            } else {
                "nobody".to_string()
            };
            if r.chance(60) {
                seen.request_counter += 1;
                json!({ "type": "machineCreated", "now": now, "id": id, "hold": { "machine": format!("vm-{}", seen.request_counter) } })
            } else {
                json!({ "type": "machineFailed", "now": now, "id": id, "message": "quota exceeded" })
            }
        }
        10 => json!({ "type": "reload", "now": now, "document": reload_document(r, seen) }),
        11 => {
            let executor = if !seen.preflights.is_empty() && r.chance(85) {
                let i = r.below(seen.preflights.len() as u64) as usize;
                seen.preflights.remove(i)
            } else {
                some_executor(r, seen)
            };
            let mut input = json!({ "type": "preflightResult", "now": now, "executor": executor, "ok": r.chance(75) });
            if input["ok"] == false {
                input["error"] = json!("the harness is not installed");
            }
            input
        }
        12 => restore_input(r, seen),
        13 => {
            // Half the time exactly at the wake-up the core asked for.
            if let Some(at) = seen.wake_at.filter(|at| *at > now && r.chance(60)) {
                seen.now = at;
            }
            json!({ "type": "tick", "now": seen.now })
        }
        14 => {
            // Now and then an owner nobody named (a no-op with its event).
            let owner = if r.chance(15) {
                "ghost:ffff"
            } else {
                *r.pick(&OWNERS)
            };
            json!({ "type": "expireOwner", "now": now, "owner": owner })
        }
        15 => {
            let id = if !seen.machines.is_empty() && r.chance(85) {
                let i = r.below(seen.machines.len() as u64) as usize;
                seen.machines.remove(i)
            } else {
                "nobody".to_string()
            };
            json!({ "type": "dropCreation", "now": now, "id": id })
        }
        16 => json!({ "type": "version", "now": now, "log": if r.chance(80) { 1 } else { 2 } }),
        _ => return bad_input(r, seen),
    };
    input.to_string()
}

/// One trace from its own seed: the document, options, inputs and native answers.
pub fn generate_one(seed: u64) -> (Trace, Vec<String>) {
    generate_one_with(seed, true)
}

fn generate_one_with(seed: u64, checks: bool) -> (Trace, Vec<String>) {
    let mut r = SplitMix64::new(seed);
    let mut problems = Vec::new();
    let mut document = random_document(&mut r);
    let options = random_options(&mut r);
    if !options["kinds"].is_null() {
        // A host that names its kinds refuses an executor without one.
        for x in document["executors"].as_array_mut().into_iter().flatten() {
            x["kind"] = json!("local");
        }
    }
    let mut seen = Seen {
        now: T0 + r.below(86_400_000),
        ..Seen::default()
    };
    seen.set_document(&document);
    let mut host = if checks {
        NativeHost::new()
    } else {
        NativeHost::unchecked()
    };
    let document_text = document.to_string();
    let options_text = options.to_string();
    if let Err(answer) = host.create(&document_text, &options_text) {
        problems.push(format!(
            "trace {seed:016x}: the generated document is refused: {answer}"
        ));
    }
    let steps = r.range(30, 90) as usize;
    let mut inputs = Vec::with_capacity(steps);
    let mut hashes = Vec::with_capacity(steps);
    let mut whole = Fnv1a::default();
    for step in 0..steps {
        let input = next_input(&mut r, &mut seen);
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| host.step(&input)))
            .unwrap_or_else(|panic| {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                problems.push(format!(
                    "trace {seed:016x} step {}: the native core panicked: {why}\n  input: {input}",
                    step + 1
                ));
                String::from("{\"panic\":true}")
            });
        for problem in host.take_problems() {
            problems.push(format!(
                "trace {seed:016x} step {}: {problem}\n  input: {input}",
                step + 1
            ));
        }
        let parsed: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
        if parsed.get("error").is_none() {
            if let Ok(value) = serde_json::from_str::<Value>(&input) {
                if value["type"] == "reload" {
                    // Applied now, or once its preflights pass (close enough for the
                    // generator: it only picks ids from it).
                    let refused = parsed["outputs"]
                        .as_array()
                        .is_some_and(|o| o.iter().any(|x| x["name"] == "reloadRefused"));
                    if !refused {
                        seen.set_document(&value["document"]);
                    }
                }
            }
        }
        seen.learn(&parsed);
        if parsed.get("outputs").is_some() {
            // The core clamps time that goes backwards; follow its clock.
            seen.now = host.policy().map_or(seen.now, |p| p.now());
        }
        hashes.push(hash_hex(&answer));
        whole.update(answer.as_bytes());
        whole.update(b"\n");
        inputs.push(input);
    }
    (
        Trace {
            seed: format!("{seed:016x}"),
            document: document_text,
            options: options_text,
            inputs,
            hashes,
            hash: whole.hex(),
        },
        problems,
    )
}

/// Where a host's replay of a trace first differs from the recorded hashes.
#[derive(Debug)]
pub struct Mismatch {
    pub seed: String,
    pub step: usize,
    pub input: String,
    pub expected_hash: String,
    pub actual: String,
}

/// Replays a trace on a host; `None` when every answer hashes as recorded.
pub fn replay(host: &mut dyn Host, trace: &Trace) -> Option<Mismatch> {
    if let Err(answer) = host.create(&trace.document, &trace.options) {
        return Some(Mismatch {
            seed: trace.seed.clone(),
            step: 0,
            input: "(creation)".into(),
            expected_hash: "(created)".into(),
            actual: answer,
        });
    }
    let mut whole = Fnv1a::default();
    for (i, input) in trace.inputs.iter().enumerate() {
        let answer = host.step(input);
        whole.update(answer.as_bytes());
        whole.update(b"\n");
        if hash_hex(&answer) != trace.hashes[i] {
            return Some(Mismatch {
                seed: trace.seed.clone(),
                step: i + 1,
                input: input.clone(),
                expected_hash: trace.hashes[i].clone(),
                actual: answer,
            });
        }
    }
    if whole.hex() != trace.hash {
        return Some(Mismatch {
            seed: trace.seed.clone(),
            step: trace.inputs.len(),
            input: "(the whole stream)".into(),
            expected_hash: trace.hash.clone(),
            actual: whole.hex(),
        });
    }
    None
}

/// A readable report of a mismatch, with the native answer recomputed for the diff.
pub fn describe_mismatch(host: &str, trace: &Trace, m: &Mismatch) -> String {
    let mut native = NativeHost::unchecked();
    let mut expected = String::from("(not recomputed)");
    if native.create(&trace.document, &trace.options).is_ok() {
        for (i, input) in trace.inputs.iter().enumerate() {
            let answer = native.step(input);
            if i + 1 == m.step {
                expected = answer;
                break;
            }
        }
    }
    let lines = |text: &str| match serde_json::from_str::<Value>(text) {
        Ok(v) => crate::matching::answer_lines(&v),
        Err(_) => format!("{text}\n"),
    };
    let mut diff = crate::diff::lines(&lines(&expected), &lines(&m.actual));
    if diff.is_empty() {
        diff = text_difference(&expected, &m.actual, host);
    }
    format!(
        "random trace seed {} on {host}: step {} of {} differs (expected hash {})\n  input: {}\n  (- native, + {host}):\n{}\n  reproduce: cargo run -p rota-conformance -- trace {}",
        m.seed,
        m.step,
        trace.inputs.len(),
        m.expected_hash,
        m.input,
        diff,
        m.seed
    )
}

/// Two texts that are the same JSON but not the same bytes: where they part.
pub fn text_difference(expected: &str, actual: &str, host: &str) -> String {
    let at = expected
        .bytes()
        .zip(actual.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(actual.len()));
    let window = |text: &str| {
        let start = at.saturating_sub(60);
        let end = (at + 60).min(text.len());
        // Byte offsets may split a character: show what is valid.
        String::from_utf8_lossy(&text.as_bytes()[start..end]).into_owned()
    };
    format!(
        "  the same JSON, but not the same text: the first difference is at byte {at} of {} (native) / {} ({host})\n  {:<10}…{}…\n  {:<10}…{}…\n",
        expected.len(),
        actual.len(),
        "native:",
        window(expected),
        format!("{host}:"),
        window(actual)
    )
}

/// Reads a trace file.
pub fn read_file(path: &std::path::Path) -> Result<TraceFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "cannot read {} ({e}): generate it with `cargo run -p rota-conformance -- traces`",
            path.display()
        )
    })?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes a trace file (one trace per line, so it diffs and greps well).
pub fn write_file(path: &std::path::Path, file: &TraceFile) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut text = format!(
        "{{\"version\":{},\"seed\":\"{}\",\"count\":{},\"traces\":[\n",
        file.version, file.seed, file.count
    );
    for (i, trace) in file.traces.iter().enumerate() {
        text.push_str(&serde_json::to_string(trace).map_err(|e| e.to_string())?);
        if i + 1 < file.traces.len() {
            text.push(',');
        }
        text.push('\n');
    }
    text.push_str("]}\n");
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}
