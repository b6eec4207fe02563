//! Property test (issue 12): an exported state, mutated at random, is either refused by
//! `Policy::import_state` with `INVALID_STATE`, or accepted and then survives 100 random
//! inputs with every invariant holding. Nothing may panic: in the wasm module a panic is
//! a trap, and a trap leaks memory and poisons every other `Policy` in the process.
//!
//! `ROTA_SEED=<n>` replays a run (the seed is printed); `ROTA_IMPORT_MUTATIONS=<n>` sets
//! how many mutated exports to try (20,000 by default; more for a soak).

use std::panic::{catch_unwind, AssertUnwindSafe};

use rota_core::json::parse_input;
use rota_core::{Options, Policy};
use serde_json::{json, Map, Value};

const T0: u64 = 1_800_000_000_000;

/// splitmix64: small, seedable, and the same on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const IDS: [&str; 4] = ["a", "b", "c", "d"];
const ROLES: [&str; 3] = ["coder", "reviewer", "planner"];

fn document(rng: &mut Rng) -> Value {
    let count = 2 + rng.below(3);
    let executors: Vec<Value> = IDS[..count]
        .iter()
        .map(|id| {
            let mut roles: Vec<&str> = ROLES.iter().copied().filter(|_| rng.chance(60)).collect();
            if roles.is_empty() {
                roles.push("coder");
            }
            let mut e =
                json!({ "id": id, "harness": "pi", "roles": roles, "slots": 1 + rng.below(3) });
            if rng.chance(30) {
                e["health"] = json!(format!("http://127.0.0.1:9/{id}"));
            }
            if rng.chance(25) {
                e["provision"] = json!({ "image": "worker" });
            }
            e
        })
        .collect();
    json!({ "executors": executors })
}

/// A random input, named by ids this kind of roster uses; many are refused, which is fine.
fn random_input(rng: &mut Rng, now: &mut u64, serial: &mut u64) -> Value {
    if rng.chance(30) {
        *now += rng.next() % 120_000;
    }
    *serial += 1;
    let executor = *rng.pick(&IDS);
    let request = format!("q{}", rng.below(*serial as usize + 1));
    let now = *now;
    match rng.below(12) {
        0..=2 => {
            let mut input = json!({ "type": "lease", "now": now, "id": format!("m{serial}"), "role": rng.pick(&ROLES) });
            if rng.chance(20) {
                input["avoid"] = json!([executor]);
            }
            if rng.chance(15) {
                input["pin"] = json!(executor);
            }
            if rng.chance(20) {
                input["deadline"] = json!(now + rng.next() % 60_000);
            }
            input
        }
        3 => {
            json!({ "type": "tryLease", "now": now, "id": format!("t{serial}"), "role": rng.pick(&ROLES) })
        }
        4 | 5 => json!({ "type": "release", "now": now, "lease": 1 + rng.below(12) }),
        6 => json!({ "type": "cancel", "now": now, "id": request }),
        7 => {
            let kind = rng.pick(&[
                "rateLimit",
                "usageLimit",
                "outage",
                "authentication",
                "other",
            ]);
            json!({ "type": "report", "now": now, "executor": executor, "failure": { "kind": kind, "message": "boom" } })
        }
        8 => {
            json!({ "type": "probeResult", "now": now, "executor": executor, "up": rng.chance(50) })
        }
        9 => {
            if rng.chance(50) {
                json!({ "type": "machineCreated", "now": now, "id": format!("m{}", rng.below(*serial as usize)), "hold": { "machine": serial.to_string() } })
            } else {
                json!({ "type": "machineFailed", "now": now, "id": format!("m{}", rng.below(*serial as usize)), "message": "quota" })
            }
        }
        10 => {
            if rng.chance(50) {
                json!({ "type": "exclude", "now": now, "executor": executor, "kind": "manual", "reason": "ops" })
            } else {
                json!({ "type": "resume", "now": now, "executor": executor })
            }
        }
        _ => json!({ "type": "tick", "now": now }),
    }
}

/// Feeds an input; refusals are fine. Panics (caught by the caller) on a broken invariant.
fn feed(policy: &mut Policy, input: &Value) {
    if let Ok(parsed) = parse_input(input) {
        if policy.handle(parsed).is_ok() {
            while policy.poll_output().is_some() {}
            policy.check_invariants();
        }
    }
}

/// A real export after a random run.
fn base_export(rng: &mut Rng) -> Value {
    let mut policy = Policy::new(&document(rng), Options::default()).expect("a valid roster");
    let (mut now, mut serial) = (T0, 0);
    for _ in 0..(10 + rng.below(40)) {
        let input = random_input(rng, &mut now, &mut serial);
        feed(&mut policy, &input);
    }
    policy.export_state()
}

/// Every value of a JSON tree with its path, depth first.
fn paths(value: &Value, path: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(path.clone());
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(json!(i));
                paths(item, path, out);
                path.pop();
            }
        }
        Value::Object(fields) => {
            for (key, item) in fields {
                path.push(json!(key));
                paths(item, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn at_path<'a>(value: &'a mut Value, path: &[Value]) -> Option<&'a mut Value> {
    let mut here = value;
    for step in path {
        here = match step {
            Value::Number(i) => here.get_mut(i.as_u64()? as usize)?,
            Value::String(k) => here.get_mut(k.as_str())?,
            _ => return None,
        };
    }
    Some(here)
}

/// The strings and numbers of the export: mutations swap one for another, which is what
/// makes contradictions (a lease on another executor, a request id reused...).
fn pools(value: &Value, strings: &mut Vec<String>, numbers: &mut Vec<u64>) {
    match value {
        Value::String(s) => strings.push(s.clone()),
        Value::Number(n) => numbers.extend(n.as_u64()),
        Value::Array(items) => items.iter().for_each(|v| pools(v, strings, numbers)),
        Value::Object(fields) => fields.values().for_each(|v| pools(v, strings, numbers)),
        _ => {}
    }
}

/// One random edit somewhere in the tree; returns what it did, for the failure message.
fn mutate(rng: &mut Rng, state: &mut Value) -> String {
    let mut all = Vec::new();
    paths(state, &mut Vec::new(), &mut all);
    let (mut strings, mut numbers) = (Vec::new(), Vec::new());
    pools(state, &mut strings, &mut numbers);
    strings.extend(["ghost".to_string(), String::new(), "coder".to_string()]);
    numbers.extend([0, 1, 2, 9_007_199_254_740_991, u64::MAX, T0, T0 + 600_000]);
    let path = rng.pick(&all).clone();
    let Some(target) = at_path(state, &path) else {
        return "nothing".into();
    };
    let shown = Value::Array(path.clone());
    let before = target.to_string();
    match target {
        Value::Number(n) => {
            let n = n.as_u64().unwrap_or(0);
            *target = json!(match rng.below(4) {
                0 => n.wrapping_add(1),
                1 => n.saturating_sub(1),
                2 => *rng.pick(&numbers),
                _ => n.wrapping_mul(2),
            });
        }
        Value::String(_) => *target = json!(rng.pick(&strings)),
        Value::Bool(b) => *target = json!(!*b),
        Value::Null => {
            *target = if rng.chance(50) {
                json!(rng.pick(&numbers))
            } else {
                json!(rng.pick(&strings))
            }
        }
        Value::Array(items) => match rng.below(3) {
            0 if !items.is_empty() => {
                let i = rng.below(items.len());
                items.remove(i);
            }
            1 if !items.is_empty() => {
                let i = rng.below(items.len());
                let copy = items[i].clone();
                items.push(copy);
            }
            _ if items.len() > 1 => {
                let (i, j) = (rng.below(items.len()), rng.below(items.len()));
                items.swap(i, j);
            }
            _ => items.push(json!(rng.pick(&strings))),
        },
        Value::Object(fields) => {
            let keys: Vec<String> = fields.keys().cloned().collect();
            if !keys.is_empty() && rng.chance(60) {
                let key = rng.pick(&keys).clone();
                fields.remove(&key);
            } else if !keys.is_empty() {
                // A copy of one entry under another key (a duplicate lease, runtime...).
                let key = rng.pick(&keys).clone();
                let copy = fields[&key].clone();
                let new_key = rng.pick(&strings).clone();
                fields.insert(new_key, copy);
            } else {
                let mut extra = Map::new();
                extra.insert("x".into(), json!(1));
                *target = Value::Object(extra);
            }
        }
    }
    format!(
        "{shown}: {before} -> {}",
        at_path(state, &path).map_or("(gone)".into(), |v| v.to_string())
    )
}

fn seed() -> u64 {
    std::env::var("ROTA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x00C0_FFEE)
}

fn count() -> usize {
    std::env::var("ROTA_IMPORT_MUTATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000)
}

#[test]
fn mutated_exports_are_refused_or_survive_random_inputs() {
    let seed = seed();
    let total = count();
    println!("import mutations: ROTA_SEED={seed} ROTA_IMPORT_MUTATIONS={total}");
    let mut rng = Rng(seed);
    let bases: Vec<Value> = (0..40).map(|_| base_export(&mut rng)).collect();
    // Every base export imports as it is.
    for (i, base) in bases.iter().enumerate() {
        if let Err(error) = Policy::import_state(base) {
            panic!("ROTA_SEED={seed}: the real export #{i} was refused: {error}");
        }
    }
    let (mut refused, mut accepted) = (0usize, 0usize);
    // The default hook would print every caught panic; the failure message says enough.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut failure = None;
    for case in 0..total {
        let mut state = rng.pick(&bases).clone();
        let edits: Vec<String> = (0..1 + rng.below(3))
            .map(|_| mutate(&mut rng, &mut state))
            .collect();
        let follow_seed = rng.next();
        let outcome = catch_unwind(AssertUnwindSafe(|| match Policy::import_state(&state) {
            Err(error) => {
                assert_eq!(
                    error.code(),
                    "INVALID_STATE",
                    "refused with {}: {error}",
                    error.code()
                );
                false
            }
            Ok(mut policy) => {
                policy.check_invariants();
                let mut follow = Rng(follow_seed);
                let (mut now, mut serial) = (policy.now(), 1_000);
                for _ in 0..100 {
                    let input = random_input(&mut follow, &mut now, &mut serial);
                    feed(&mut policy, &input);
                }
                true
            }
        }));
        match outcome {
            Ok(true) => accepted += 1,
            Ok(false) => refused += 1,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failure = Some(format!(
                    "ROTA_SEED={seed}: case {case} panicked: {message}\n  edits: {}",
                    edits.join("\n         ")
                ));
                break;
            }
        }
    }
    std::panic::set_hook(hook);
    if let Some(failure) = failure {
        panic!("{failure}");
    }
    println!("import mutations: {refused} refused with INVALID_STATE, {accepted} accepted and survived 100 inputs");
    assert_eq!(refused + accepted, total);
    assert!(
        refused > 0 && accepted > 0,
        "the mutations should both break and keep states"
    );
}
