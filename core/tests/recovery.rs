//! Recovery across an export and an import, a reload, and
//! hand-edited exports that contradict themselves.

use rota_core::json::{parse_options, step_str};
use rota_core::Policy;
use serde_json::{json, Value};

const T0: u64 = 1_800_000_000_000;
const MINUTE: u64 = 60_000;

fn document() -> Value {
    json!({
        "recovery": { "mode": "probation", "maxBackoff": 4 },
        "exclusion": { "consecutiveFailures": 3 },
        "executors": [
            { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 2,
              "cooldown": { "usageLimit": "10 minutes" } },
            { "id": "b", "harness": "pi", "roles": ["reviewer"] },
        ]
    })
}

fn step(policy: &mut Policy, input: Value) -> Value {
    let answer = step_str(policy, &input.to_string());
    let answer: Value = serde_json::from_str(&answer).expect("an answer");
    assert!(answer.get("error").is_none(), "{input}: {answer}");
    answer
}

fn usage_limit(now: u64) -> Value {
    json!({ "type": "report", "now": now, "executor": "a",
            "failure": { "kind": "usageLimit", "message": "usage limit" } })
}

fn lease(now: u64, id: &str, role: &str) -> Value {
    json!({ "type": "lease", "now": now, "id": id, "role": role })
}

fn granted(answer: &Value) -> Vec<String> {
    answer["outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["type"] == "granted")
        .map(|o| o["request"].as_str().unwrap_or("?").to_string())
        .collect()
}

fn event_names(answer: &Value) -> Vec<String> {
    answer["outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["type"] == "event")
        .map(|o| o["name"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// `a` on probation with r1 granted (lease 1) and r2 waiting; `b` with 2 failures in
/// a row.
fn on_probation() -> Policy {
    let mut policy =
        Policy::new(&document(), parse_options(&json!({})).expect("options")).expect("a policy");
    step(&mut policy, usage_limit(T0));
    let back = step(
        &mut policy,
        json!({ "type": "tick", "now": T0 + 10 * MINUTE }),
    );
    assert!(event_names(&back).contains(&"probationStarted".to_string()));
    let now = T0 + 10 * MINUTE + 1;
    assert_eq!(
        granted(&step(&mut policy, lease(now, "r1", "coder"))),
        ["r1"]
    );
    assert!(granted(&step(&mut policy, lease(now, "r2", "coder"))).is_empty());
    for _ in 0..2 {
        step(
            &mut policy,
            json!({ "type": "report", "now": now, "executor": "b",
                    "failure": { "message": "HTTP 500", "status": 500 } }),
        );
    }
    policy
}

#[test]
fn probation_and_failures_in_a_row_survive_an_export_and_an_import() {
    let policy = on_probation();
    let state = policy.export_state();
    assert_eq!(
        state["runtime"]["a"]["recovery"],
        json!({ "probation": true, "cleanFrom": 1 })
    );
    assert_eq!(
        state["runtime"]["b"]["recovery"],
        json!({ "failures": 2, "cleanFrom": 2 })
    );
    let mut imported = Policy::import_state(&state).expect("the export imports");
    assert_eq!(imported.state_hash(), policy.state_hash());
    let snapshot = serde_json::to_value(imported.snapshot()).expect("a snapshot");
    assert_eq!(snapshot["executors"][0]["probation"], json!(true));
    assert_eq!(snapshot["executors"][1]["failuresInARow"], json!(2));
    let now = T0 + 11 * MINUTE;
    // The third failure in a row on b excludes it, as it would have before the import.
    let third = step(
        &mut imported,
        json!({ "type": "report", "now": now, "executor": "b",
                "failure": { "message": "HTTP 500", "status": 500 } }),
    );
    assert!(
        event_names(&third).contains(&"excluded".to_string()),
        "{third}"
    );
    // The release of r1 ends the probation: r2 takes the second slot at once.
    let released = step(
        &mut imported,
        json!({ "type": "release", "now": now, "lease": 1 }),
    );
    assert!(event_names(&released).contains(&"probationEnded".to_string()));
    assert_eq!(granted(&released), ["r2"]);
}

#[test]
fn a_failure_on_probation_doubles_the_cooldown_and_the_export_keeps_the_multiplier() {
    let mut policy = on_probation();
    let now = T0 + 12 * MINUTE;
    let out = step(&mut policy, usage_limit(now));
    let excluded = &out["outputs"][0];
    assert_eq!(excluded["fields"]["until"], json!(now + 20 * MINUTE));
    let state = policy.export_state();
    assert_eq!(
        state["runtime"]["a"]["recovery"],
        json!({ "armed": true, "backoff": 2, "quietMs": 10 * MINUTE, "cleanFrom": 2 })
    );
    let mut imported = Policy::import_state(&state).expect("the export imports");
    // r1, open when the failure came, ends: not a release without a failure.
    let released = step(
        &mut imported,
        json!({ "type": "release", "now": now, "lease": 1 }),
    );
    assert!(!event_names(&released).contains(&"probationEnded".to_string()));
    let back = step(
        &mut imported,
        json!({ "type": "tick", "now": now + 20 * MINUTE }),
    );
    assert!(event_names(&back).contains(&"probationStarted".to_string()));
    // Back on probation: r2 (waiting all along) takes the one slot.
    assert_eq!(granted(&back), ["r2"]);
    let again = step(&mut imported, usage_limit(now + 21 * MINUTE));
    assert_eq!(
        again["outputs"][0]["fields"]["until"],
        json!(now + 21 * MINUTE + 40 * MINUTE),
        "4× (the cap): {again}"
    );
}

#[test]
fn a_reload_fits_the_state_to_its_new_rules() {
    let mut policy = on_probation();
    let mut doc = document();
    doc["recovery"] = json!("all");
    doc["exclusion"] = json!({ "consecutiveFailures": 2 });
    let now = T0 + 11 * MINUTE;
    let reloaded = step(
        &mut policy,
        json!({ "type": "reload", "now": now, "document": doc }),
    );
    // No probation without the rule: r2 takes a's second slot.
    assert_eq!(granted(&reloaded), ["r2"], "{reloaded}");
    let state = policy.export_state();
    assert!(state["runtime"]["a"]
        .get("recovery")
        .is_some_and(|r| r["probation"].is_null()));
    // b's 2 failures are more than the new threshold allows: 1 kept, the next excludes.
    assert_eq!(state["runtime"]["b"]["recovery"]["failures"], json!(1));
    let next = step(
        &mut policy,
        json!({ "type": "report", "now": now, "executor": "b",
                "failure": { "message": "HTTP 500", "status": 500 } }),
    );
    assert!(
        event_names(&next).contains(&"excluded".to_string()),
        "{next}"
    );
}

/// A hand edit of an export.
type Edit = dyn Fn(&mut Value);

#[test]
fn an_export_that_contradicts_its_recovery_rules_is_refused_naming_the_field() {
    let state = on_probation().export_state();
    let refused = |edit: &Edit| {
        let mut state = state.clone();
        edit(&mut state);
        match Policy::import_state(&state) {
            Ok(_) => panic!("accepted: {}", state["runtime"]),
            Err(error) => {
                assert_eq!(error.code(), "INVALID_STATE", "{error}");
                error.to_string()
            }
        }
    };
    let cases: [(&Edit, &str); 7] = [
        (
            &|s| s["runtime"]["a"]["recovery"]["backoff"] = json!(8),
            "executor a: recovery.backoff: above the executor's maxBackoff",
        ),
        (
            &|s| s["runtime"]["b"]["recovery"]["failures"] = json!(3),
            "executor b: recovery.failures: as many as exclude the executor",
        ),
        (
            &|s| s["runtime"]["a"]["recovery"]["cleanFrom"] = json!(99),
            "executor a: recovery.cleanFrom: above the next lease id",
        ),
        (
            &|s| {
                let recovery = &mut s["runtime"]["b"]["recovery"];
                recovery["backoff"] = json!(2);
                recovery["quietMs"] = json!(MINUTE);
                recovery["calmSince"] = json!(T0 + 99 * MINUTE);
            },
            "executor b: recovery.calmSince: after now",
        ),
        (
            &|s| {
                s["runtime"]["a"]["exclusion"] = json!({
                    "kind": "manual", "reason": "paused", "since": T0, "until": null, "then": null
                })
            },
            "executor a: recovery.probation: on probation while out of the round",
        ),
        (
            &|s| s["runtime"]["b"]["recovery"]["armed"] = json!(true),
            "executor b: recovery.armed: armed for probation while in the round",
        ),
        (
            &|s| s["runtime"]["a"]["recovery"]["probation"] = json!("yes"),
            "runtime.a: recovery:",
        ),
    ];
    for (edit, message) in cases {
        let error = refused(edit);
        assert!(error.contains(message), "{error} (expected: {message})");
    }
}
