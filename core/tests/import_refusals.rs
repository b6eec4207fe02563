//! `import_state` refuses the contradictions of an export: a test hand-edits an export
//! as a user (or a mixed-up snapshot) could and expects `INVALID_STATE` naming what
//! and where; a random test mutates exports and asserts that an import either refuses
//! or yields a state that passes every invariant and goes on taking inputs.

use rota_core::json::{parse_options, step_str};
use rota_core::Policy;
use serde_json::{json, Value};

const T0: u64 = 1_800_000_000_000;

fn document() -> Value {
    json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder", "reviewer"], "slots": 2,
          "health": "http://a.test/health" },
        { "id": "m", "harness": "pi", "roles": ["coder"], "provision": { "kind": "vm" } },
        { "id": "b", "harness": "pi", "roles": ["reviewer"] },
    ]})
}

fn policy(inputs: &[Value]) -> Policy {
    let mut policy =
        Policy::new(&document(), parse_options(&json!({})).expect("options")).expect("a policy");
    for input in inputs {
        let answer = step_str(&mut policy, &input.to_string());
        assert!(!answer.starts_with("{\"error\""), "{input}: {answer}");
    }
    policy
}

fn lease(id: &str, role: &str) -> Value {
    json!({ "type": "lease", "now": T0, "id": id, "role": role })
}

/// The import's error message, or a panic when it was accepted.
fn refused(state: &Value) -> String {
    match Policy::import_state(state) {
        Ok(_) => panic!("accepted: {state}"),
        Err(error) => {
            assert_eq!(error.code(), "INVALID_STATE", "{error}");
            error.to_string()
        }
    }
}

/// r1 leased on `a`, r2 creating a machine on `m`; nobody waits.
fn busy() -> Value {
    let state = policy(&[lease("r1", "coder"), lease("r2", "coder")]).export_state();
    assert!(
        Policy::import_state(&state).is_ok(),
        "the export itself imports"
    );
    state
}

#[test]
fn a_pending_output_that_names_what_the_state_never_had_is_refused() {
    let cases = [
        (
            json!({"type": "granted", "request": "zz", "lease": 77, "executor": "nope", "role": "coder", "passed": 0}),
            "outputs[0] (granted): lease 77 was never granted (nextLease 2)",
        ),
        (
            json!({"type": "probe", "executor": "zz", "url": "http://zz.test"}),
            "outputs[0] (probe): 'zz' is not an executor this roster declared",
        ),
        (
            json!({"type": "createMachine", "request": "r1", "executor": "q"}),
            "outputs[0] (createMachine): 'q' is not an executor this roster declared",
        ),
        (
            json!({"type": "deleteMachine", "executor": "q", "hold": {}}),
            "outputs[0] (deleteMachine): 'q' is not an executor this roster declared",
        ),
    ];
    for (output, message) in cases {
        let mut state = busy();
        state["outputs"] = json!([output]);
        assert_eq!(refused(&state), format!("invalid state: {message}"));
    }
    // What the state has is carried.
    let mut state = busy();
    state["outputs"] = json!([
        {"type": "granted", "request": "r1", "lease": 1, "executor": "a", "role": "coder", "passed": 0},
        {"type": "createMachine", "request": "r2", "executor": "m"}
    ]);
    assert!(Policy::import_state(&state).is_ok());
}

// ---- random mutations ----------------------------------------------------------------

struct Rng(u64);

impl Rng {
    /// splitmix64.
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Every place in `value` (JSON pointers), the root excluded.
fn places(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let path = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
                out.push(path.clone());
                places(v, path, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let path = format!("{at}/{i}");
                out.push(path.clone());
                places(v, path, out);
            }
        }
        _ => {}
    }
}

fn replacement(rng: &mut Rng, old: &Value) -> Value {
    let pool = [
        json!(null),
        json!(true),
        json!(false),
        json!(0),
        json!(1),
        json!(2),
        json!(T0),
        json!(T0 + 60_000),
        json!(T0 - 1),
        json!("a"),
        json!("b"),
        json!("m"),
        json!("r1"),
        json!("r2"),
        json!("coder"),
        json!("reviewer"),
        json!("tester"),
        json!("health"),
        json!("until"),
        json!("waiting"),
        json!({"creating": {"executor": "m", "passed": 0}}),
        json!({"creating": {"executor": "a", "passed": 0}}),
        json!([]),
        json!({}),
    ];
    match (rng.below(4), old) {
        // A nearby number.
        (0, Value::Number(n)) => json!(n
            .as_u64()
            .unwrap_or(0)
            .wrapping_add(rng.below(3) as u64)
            .saturating_sub(1)),
        // A flipped boolean.
        (0, Value::Bool(b)) => json!(!b),
        _ => pool[rng.below(pool.len())].clone(),
    }
}

fn scenarios() -> Vec<Value> {
    let mut excluded = policy(&[
        lease("r1", "coder"),
        lease("r2", "coder"),
        lease("r3", "reviewer"),
    ]);
    for input in [
        json!({"type": "report", "now": T0 + 10, "executor": "a", "failure": {"kind": "outage", "message": "down"}}),
        json!({"type": "exclude", "now": T0 + 20, "executor": "b", "kind": "until", "until": T0 + 600_000, "reason": "ops"}),
        json!(lease("r4", "reviewer")),
    ] {
        let mut input = input;
        input["now"] = json!(T0 + 30);
        step_str(&mut excluded, &input.to_string());
    }
    vec![busy(), excluded.export_state(), policy(&[]).export_state()]
}

#[test]
fn a_mutated_export_is_refused_or_keeps_every_invariant() {
    let seed = std::env::var("ROTA_IMPORT_SEED")
        .ok()
        .and_then(|s| u64::from_str_radix(&s, 16).ok())
        .unwrap_or(0x1e42_0001);
    println!("import mutations: seed {seed:x} (ROTA_IMPORT_SEED=<hex> repeats it)");
    let mut rng = Rng(seed);
    let bases = scenarios();
    let (mut accepted, mut refused_count) = (0, 0);
    for round in 0..3_000 {
        let mut state = bases[rng.below(bases.len())].clone();
        for _ in 0..=rng.below(2) {
            let mut at = Vec::new();
            places(&state, String::new(), &mut at);
            let path = &at[rng.below(at.len())];
            let Some(place) = state.pointer_mut(path) else {
                continue;
            };
            *place = replacement(&mut rng, place);
        }
        let Ok(mut policy) = Policy::import_state(&state) else {
            refused_count += 1;
            continue;
        };
        accepted += 1;
        let context = || format!("seed {seed:x}, round {round}: {state}");
        if let Err(violation) = policy.verify() {
            panic!("an accepted import breaks {violation}; {}", context());
        }
        // It must go on as a state the inputs reach (check_invariants runs inside
        // every handle in debug builds and panics naming the invariant).
        let now = policy.now() + 1;
        for input in [
            json!({"type": "tick", "now": now + 3_600_000}),
            json!({"type": "lease", "now": now + 3_600_001, "id": "fresh", "role": "coder"}),
            json!({"type": "release", "now": now + 3_600_002, "lease": 1}),
            json!({"type": "expireOwner", "now": now + 3_600_003, "owner": "nobody:0"}),
        ] {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                step_str(&mut policy, &input.to_string())
            }));
            if outcome.is_err() {
                panic!(
                    "input {input} panicked after an accepted import; {}",
                    context()
                );
            }
        }
        if let Err(violation) = policy.verify() {
            panic!(
                "inputs after an accepted import break {violation}; {}",
                context()
            );
        }
    }
    println!("{accepted} accepted, {refused_count} refused");
    assert!(
        accepted > 100 && refused_count > 100,
        "{accepted} accepted, {refused_count} refused"
    );
}
