//! `minEventLevel`: events below it are left out, nothing else changes.

use rota_core::json::{parse_options, step_str};
use rota_core::{Level, Options, Policy};
use serde_json::{json, Value};

const T0: u64 = 1_800_000_000_000;

fn policy(options: Value) -> Policy {
    let document = json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 1 },
        { "id": "b", "harness": "pi", "roles": ["coder"], "slots": 1,
          "health": "http://b.test/health" },
    ] });
    Policy::new(&document, parse_options(&options).expect("valid options")).expect("valid")
}

/// A trace with events of every level: grants (info), a tryLease that finds nothing
/// (debug), an outage (warn), an ignored failure (debug), a probe, releases, a wait.
fn trace() -> Vec<Value> {
    vec![
        json!({"type": "lease", "now": T0, "id": "r1", "role": "coder"}),
        json!({"type": "lease", "now": T0, "id": "r2", "role": "coder"}),
        json!({"type": "tryLease", "now": T0 + 1, "id": "r3", "role": "coder"}),
        json!({"type": "report", "now": T0 + 2, "executor": "b",
               "failure": {"kind": "outage", "message": "connection refused"}}),
        json!({"type": "report", "now": T0 + 3, "executor": "a",
               "failure": {"kind": "other", "message": "a test failed"}}),
        json!({"type": "lease", "now": T0 + 4, "id": "r4", "role": "coder", "label": "w4"}),
        json!({"type": "release", "now": T0 + 5, "lease": 1}),
        json!({"type": "tick", "now": T0 + 60_000}),
        json!({"type": "probeResult", "now": T0 + 60_001, "executor": "b", "up": true}),
        json!({"type": "release", "now": T0 + 60_002, "lease": 3}),
        json!({"type": "release", "now": T0 + 60_003, "lease": 2}),
    ]
}

/// Each step's answer, parsed.
fn run(options: Value) -> Vec<Value> {
    let mut policy = policy(options);
    trace()
        .iter()
        .map(|input| {
            let answer = step_str(&mut policy, &input.to_string());
            serde_json::from_str(&answer).expect("the core writes JSON")
        })
        .collect()
}

fn level_of(output: &Value) -> Option<&str> {
    (output["type"] == "event").then(|| output["level"].as_str().expect("a level"))
}

/// The answers with the events below `min` removed.
fn filtered(answers: &[Value], min: &[&str]) -> Vec<Value> {
    answers
        .iter()
        .map(|answer| {
            let mut answer = answer.clone();
            let outputs = answer["outputs"].as_array_mut().expect("outputs");
            outputs.retain(|o| level_of(o).is_none_or(|level| min.contains(&level)));
            answer
        })
        .collect()
}

#[test]
fn the_default_emits_every_event() {
    assert_eq!(Options::default().min_event_level, Level::Debug);
    let answers = run(Value::Null);
    let levels: Vec<&str> = answers
        .iter()
        .flat_map(|a| a["outputs"].as_array().expect("outputs"))
        .filter_map(level_of)
        .collect();
    for level in ["debug", "info", "warn"] {
        assert!(
            levels.contains(&level),
            "the trace has {level} events: {levels:?}"
        );
    }
    assert_eq!(answers, run(json!({ "minEventLevel": "debug" })));
}

#[test]
fn a_minimum_level_leaves_out_only_the_events_below_it() {
    let all = run(Value::Null);
    assert_eq!(
        run(json!({ "minEventLevel": "info" })),
        filtered(&all, &["info", "warn"])
    );
    assert_eq!(
        run(json!({ "minEventLevel": "warn" })),
        filtered(&all, &["warn"])
    );
}

#[test]
fn a_lease_and_a_release_at_warn_answer_the_decision_alone() {
    let mut policy = policy(json!({ "minEventLevel": "warn" }));
    let lease = json!({"type": "lease", "now": T0, "id": "r1", "role": "coder"});
    assert_eq!(
        step_str(&mut policy, &lease.to_string()),
        r#"{"outputs":[{"type":"granted","request":"r1","lease":1,"executor":"a","role":"coder","passed":0}],"wakeAt":null}"#
    );
    let release = json!({"type": "release", "now": T0, "lease": 1});
    assert_eq!(
        step_str(&mut policy, &release.to_string()),
        r#"{"outputs":[],"wakeAt":null}"#
    );
}

#[test]
fn the_level_is_an_option_like_any_other() {
    let options = parse_options(&json!({ "minEventLevel": "info" })).expect("valid");
    assert_eq!(options.min_event_level, Level::Info);
    let error = parse_options(&json!({ "minEventLevel": "error" })).expect_err("unknown level");
    assert_eq!(
        error.to_string(),
        "invalid input: options: unknown variant `error`, expected one of `debug`, `info`, `warn`"
    );
    // Written only when it is not the default: an exported state reads as before.
    let default = serde_json::to_value(Options::default()).expect("writable");
    assert!(default.get("minEventLevel").is_none());
    let warn =
        serde_json::to_value(parse_options(&json!({ "minEventLevel": "warn" })).expect("valid"))
            .expect("writable");
    assert_eq!(warn["minEventLevel"], "warn");
}

#[test]
fn an_exported_state_keeps_the_level() {
    let mut policy = policy(json!({ "minEventLevel": "warn" }));
    let lease = json!({"type": "lease", "now": T0, "id": "r1", "role": "coder"});
    step_str(&mut policy, &lease.to_string());
    let state = policy.export_state();
    assert_eq!(state["options"]["minEventLevel"], "warn");
    let mut imported = Policy::import_state(&state).expect("importable");
    assert_eq!(imported.options().min_event_level, Level::Warn);
    let release = json!({"type": "release", "now": T0, "lease": 1});
    assert_eq!(
        step_str(&mut imported, &release.to_string()),
        r#"{"outputs":[],"wakeAt":null}"#
    );
    // At the default, the exported options are what they were before the option.
    let default = self::policy(Value::Null).export_state();
    assert!(default["options"].get("minEventLevel").is_none());
}

/// Each step's answer with the host's event floor at `floor`, and the exported state.
fn run_with_floor(floor: Level) -> (Vec<Value>, Value) {
    let mut policy = policy(Value::Null);
    let answers = trace()
        .iter()
        .map(|input| {
            policy.set_event_floor(floor);
            let answer = step_str(&mut policy, &input.to_string());
            serde_json::from_str(&answer).expect("the core writes JSON")
        })
        .collect();
    (answers, policy.export_state())
}

#[test]
fn a_host_floor_leaves_out_the_events_below_it_and_is_no_state() {
    let (all, state) = run_with_floor(Level::Debug);
    assert_eq!(all, run(Value::Null));
    let (info, info_state) = run_with_floor(Level::Info);
    assert_eq!(info, filtered(&all, &["info", "warn"]));
    let (warn, warn_state) = run_with_floor(Level::Warn);
    assert_eq!(warn, filtered(&all, &["warn"]));
    // Every decision is the same; the floor is not exported (nor is the option changed).
    assert_eq!(info_state, state);
    assert_eq!(warn_state, state);
    assert!(state["options"].get("minEventLevel").is_none());
}
