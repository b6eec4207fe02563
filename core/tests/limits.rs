//! The bounds of `rota_core::limits`, each at the bound (accepted) and one past it
//! (refused with its code, naming what and the bound), through the JSON every host
//! speaks (`json::step_str`, `json::parse_options`, `Policy::new`).

use rota_core::json::{parse_input, parse_options, step_str};
use rota_core::limits::{self, MAX_SAFE_INTEGER};
use rota_core::{Error, Input, LeaseRequest, Options, Policy};
use serde_json::{json, Value};

const T0: u64 = 1_800_000_000_000;

fn policy() -> Policy {
    let document = json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 1 },
    ]});
    Policy::new(&document, Options::default()).expect("a valid roster")
}

/// The step's answer as JSON.
fn step(policy: &mut Policy, input: &Value) -> Value {
    serde_json::from_str(&step_str(policy, &input.to_string())).expect("JSON")
}

fn error_of(answer: &Value) -> (&str, &str) {
    let code = answer["error"]["code"].as_str().unwrap_or("");
    let message = answer["error"]["message"].as_str().unwrap_or("");
    (code, message)
}

fn lease(id: &str) -> Value {
    json!({ "type": "lease", "now": T0, "id": id, "role": "coder" })
}

/// Sends `input`, expecting a refusal with `code` whose message holds `needle`, and
/// that nothing changed.
fn refused(policy: &mut Policy, input: &Value, code: &str, needle: &str) {
    let before = policy.export_state();
    let answer = step(policy, input);
    let (got, message) = error_of(&answer);
    assert_eq!(got, code, "{answer}");
    assert!(message.contains(needle), "{message:?} lacks {needle:?}");
    assert_eq!(
        policy.export_state(),
        before,
        "a refused input changed the state"
    );
}

fn accepted(policy: &mut Policy, input: &Value) {
    let answer = step(policy, input);
    assert!(answer.get("outputs").is_some(), "{answer}");
}

// ---- Inputs ------------------------------------------------------------------------

#[test]
fn a_request_id_at_the_bound_is_taken_and_one_byte_more_is_refused() {
    let mut p = policy();
    accepted(&mut p, &lease(&"i".repeat(limits::MAX_ID_BYTES)));
    refused(
        &mut p,
        &lease(&"j".repeat(limits::MAX_ID_BYTES + 1)),
        "INVALID_INPUT",
        "lease: `id` is 1025 bytes long; the most is 1024",
    );
    // Bytes, not characters: 513 two-byte characters are 1,026 bytes.
    refused(
        &mut p,
        &lease(&"é".repeat(513)),
        "INVALID_INPUT",
        "`id` is 1026 bytes",
    );
    let occupy = json!({ "type": "occupy", "now": T0, "id": "k".repeat(1025), "executor": "a" });
    refused(
        &mut p,
        &occupy,
        "INVALID_INPUT",
        "occupy: `id` is 1025 bytes long",
    );
}

#[test]
fn a_label_at_the_bound_is_taken_and_one_byte_more_is_refused() {
    let mut p = policy();
    let mut input = lease("r1");
    input["label"] = json!("l".repeat(limits::MAX_LABEL_BYTES));
    accepted(&mut p, &input);
    let mut input = lease("r2");
    input["label"] = json!("l".repeat(limits::MAX_LABEL_BYTES + 1));
    refused(
        &mut p,
        &input,
        "INVALID_INPUT",
        "lease: `label` is 4097 bytes long; the most is 4096",
    );
}

#[test]
fn prefer_pin_and_each_avoided_id_are_ids() {
    let mut p = policy();
    for field in ["prefer", "pin"] {
        let mut input = lease("r1");
        input[field] = json!("p".repeat(limits::MAX_ID_BYTES + 1));
        refused(
            &mut p,
            &input,
            "INVALID_INPUT",
            &format!("`{field}` is 1025 bytes long"),
        );
    }
    let mut input = lease("r1");
    input["avoid"] = json!(["b", "x".repeat(limits::MAX_ID_BYTES + 1)]);
    refused(
        &mut p,
        &input,
        "INVALID_INPUT",
        "`avoid` is 1025 bytes long",
    );
}

#[test]
fn an_avoid_list_at_the_bound_is_taken_and_one_more_is_refused() {
    let ids = |n: usize| (0..n).map(|i| format!("x{i}")).collect::<Vec<_>>();
    let mut p = policy();
    let mut input = lease("r1");
    input["avoid"] = json!(ids(limits::MAX_AVOID));
    accepted(&mut p, &input);
    let mut input = lease("r2");
    input["avoid"] = json!(ids(limits::MAX_AVOID + 1));
    refused(
        &mut p,
        &input,
        "INVALID_INPUT",
        "lease: `avoid` names 100001 executors; the most is 100000",
    );
}

#[test]
fn numbers_beyond_what_json_holds_exactly_are_refused_naming_the_field() {
    let mut p = policy();
    let beyond = MAX_SAFE_INTEGER + 1;
    for (field, value) in [
        ("deadline", json!(beyond)),
        ("eventTime", json!(beyond)),
        ("rank", json!(beyond)),
        ("rank", json!(-(beyond as i64))),
    ] {
        let mut input = lease("r1");
        input[field] = value;
        refused(
            &mut p,
            &input,
            "INVALID_INPUT",
            &format!("lease: `{field}` is beyond what a JSON number holds exactly"),
        );
    }
    // At the bound: accepted (rank on both sides).
    for (id, field, value) in [
        ("r1", "deadline", json!(MAX_SAFE_INTEGER)),
        ("r2", "eventTime", json!(MAX_SAFE_INTEGER)),
        ("r3", "rank", json!(MAX_SAFE_INTEGER)),
        ("r4", "rank", json!(-(MAX_SAFE_INTEGER as i64))),
    ] {
        let mut input = lease(id);
        input[field] = value;
        accepted(&mut p, &input);
    }
    let release = json!({ "type": "release", "now": T0, "lease": beyond });
    refused(
        &mut p,
        &release,
        "INVALID_INPUT",
        "release: `lease` is beyond",
    );
    let exclude =
        json!({ "type": "exclude", "now": T0, "executor": "a", "kind": "manual", "until": beyond });
    refused(
        &mut p,
        &exclude,
        "INVALID_INPUT",
        "exclude: `until` is beyond",
    );
    for field in ["resetAt", "retryAfterMs"] {
        let report = json!({ "type": "report", "now": T0, "executor": "a",
            "failure": { "kind": "rateLimit", "message": "429", field: u64::MAX } });
        refused(
            &mut p,
            &report,
            "INVALID_INPUT",
            &format!("report: `failure.{field}` is beyond"),
        );
    }
    // `now` keeps its own wording (a conformance vector pins it).
    let tick = json!({ "type": "tick", "now": beyond });
    refused(
        &mut p,
        &tick,
        "INVALID_INPUT",
        "`now` is beyond what a JSON number holds exactly",
    );
}

#[test]
fn negatives_fractions_and_non_numbers_in_numeric_fields_are_invalid_input() {
    // JSON text carries no NaN or infinity (JS writes them as null, which the JS
    // package refuses before it writes the text; see npm/test/limits.test.mjs);
    // negatives and fractions are refused with serde's wording, as the vectors pin.
    let mut p = policy();
    let cases = [
        ("now", json!(-1)),
        ("now", json!(1.5)),
        ("deadline", json!(-1)),
        ("deadline", json!(T0 as f64 + 0.5)),
        ("eventTime", json!(-3)),
        ("eventTime", json!(0.25)),
        ("rank", json!(1.5)),
        ("now", json!(1e300)),
        ("deadline", json!("soon")),
    ];
    for (field, value) in cases {
        let mut input = lease("r1");
        input[field] = value.clone();
        let answer = step(&mut p, &input);
        assert_eq!(
            error_of(&answer).0,
            "INVALID_INPUT",
            "{field} = {value}: {answer}"
        );
    }
    // A serde_json Value cannot hold NaN or infinity: json! makes them null, which an
    // optional field reads as absent and `now` refuses.
    assert_eq!(json!(f64::NAN), Value::Null);
    let input = json!({ "type": "tick", "now": f64::INFINITY });
    assert!(matches!(
        parse_input(&input),
        Err(Error::InvalidInput { .. })
    ));
}

#[test]
fn inputs_built_in_rust_are_checked_by_check_limits() {
    let request = LeaseRequest {
        now: T0,
        id: "x".repeat(limits::MAX_ID_BYTES + 1),
        role: "coder".into(),
        avoid: vec![],
        prefer: None,
        pin: None,
        rank: None,
        event_time: None,
        label: None,
        purpose: None,
        deadline: None,
        owner: None,
        borrow: None,
        tenant: None,
        affinity: None,
        timeout_ms: None,
    };
    let error = Input::Lease(request).check_limits().unwrap_err();
    assert_eq!(error.code(), "INVALID_INPUT");
    assert_eq!(
        error.to_string(),
        "invalid input: lease: `id` is 1025 bytes long; the most is 1024"
    );
    assert!(Input::Tick { now: T0 }.check_limits().is_ok());
}

// ---- Options -----------------------------------------------------------------------

const MS_OPTIONS: [&str; 5] = [
    "healthProbeIntervalMs",
    "idleProbeIntervalMs",
    "rateLimitWindowMs",
    "provisionFirstPauseMs",
    "provisionMaxPauseMs",
];

fn options_error(options: Value) -> Error {
    parse_options(&options).expect_err("refused")
}

#[test]
fn every_duration_option_has_a_range_and_u64_max_or_2_pow_53_is_refused() {
    for name in MS_OPTIONS {
        for value in [u64::MAX, MAX_SAFE_INTEGER, limits::MAX_OPTION_MS + 1, 0] {
            let error = options_error(json!({ name: value }));
            assert_eq!(error.code(), "INVALID_OPTIONS", "{name} = {value}");
            assert_eq!(
                error.to_string(),
                format!("invalid options: `{name}` is {value}; it must be from 1 to 604800000")
            );
        }
        for value in [1, limits::MAX_OPTION_MS] {
            // The pauses are a pair (the most not below the first): both at the bound.
            let options = if name.starts_with("provision") {
                json!({ "provisionFirstPauseMs": value, "provisionMaxPauseMs": value })
            } else {
                json!({ name: value })
            };
            assert!(parse_options(&options).is_ok(), "{name} = {value}");
        }
    }
}

#[test]
fn a_most_pause_below_the_first_is_refused() {
    let error =
        options_error(json!({ "provisionFirstPauseMs": 60_000, "provisionMaxPauseMs": 30_000 }));
    assert_eq!(error.code(), "INVALID_OPTIONS");
    assert_eq!(
        error.to_string(),
        "invalid options: `provisionMaxPauseMs` is 30000, below `provisionFirstPauseMs` (60000): the pause doubles from the first up to the most"
    );
    // Against the default first pause (30 s) too; equal is a range of one.
    assert_eq!(
        options_error(json!({ "provisionMaxPauseMs": 1_000 })).code(),
        "INVALID_OPTIONS"
    );
    assert!(
        parse_options(&json!({ "provisionFirstPauseMs": 5, "provisionMaxPauseMs": 5 })).is_ok()
    );
}

#[test]
fn rate_limits_to_exclude_has_a_range() {
    for value in [0, 1_001] {
        let error = options_error(json!({ "rateLimitsToExclude": value }));
        assert_eq!(error.code(), "INVALID_OPTIONS");
        assert_eq!(
            error.to_string(),
            format!("invalid options: `rateLimitsToExclude` is {value}; it must be from 1 to 1000")
        );
    }
    for value in [1, 1_000] {
        assert!(parse_options(&json!({ "rateLimitsToExclude": value })).is_ok());
    }
    // Beyond u32 it is still a wrong type (the vectors' wording), not a range.
    let error = options_error(json!({ "rateLimitsToExclude": u64::MAX }));
    assert_eq!(error.code(), "INVALID_INPUT");
}

#[test]
fn kinds_are_bounded_in_count_and_length() {
    let kinds = |n: usize| (0..n).map(|i| format!("k{i}")).collect::<Vec<_>>();
    assert!(parse_options(&json!({ "kinds": kinds(limits::MAX_KINDS) })).is_ok());
    let error = options_error(json!({ "kinds": kinds(limits::MAX_KINDS + 1) }));
    assert_eq!(error.code(), "INVALID_OPTIONS");
    assert!(error
        .to_string()
        .contains("`kinds` names 257 kinds; the most is 256"));
    let error = options_error(json!({ "kinds": ["k".repeat(limits::MAX_ID_BYTES + 1)] }));
    assert!(error.to_string().contains("`kinds` is 1025 bytes long"));
}

#[test]
fn options_check_serves_rust_callers_and_defaults_pass() {
    assert!(Options::default().check().is_ok());
    let options = Options {
        health_probe_interval_ms: u64::MAX,
        ..Options::default()
    };
    assert_eq!(options.check().unwrap_err().code(), "INVALID_OPTIONS");
}

#[test]
fn an_exported_state_with_options_out_of_range_is_refused() {
    let p = policy();
    let mut state = p.export_state();
    state["options"]["healthProbeIntervalMs"] = json!(u64::MAX);
    let Err(error) = Policy::import_state(&state) else {
        panic!("an exported state with u64::MAX options was accepted");
    };
    assert_eq!(error.code(), "INVALID_STATE", "{error}");
    assert!(
        error.to_string().contains("healthProbeIntervalMs"),
        "{error}"
    );
}

// ---- The document ------------------------------------------------------------------

fn violations(document: &Value) -> Vec<(String, String)> {
    rota_core::validate(document, None)
        .into_iter()
        .map(|v| (v.path, v.message))
        .collect()
}

#[test]
fn an_executor_id_at_the_bound_is_taken_and_one_byte_more_is_a_violation() {
    let at = json!({ "executors": [
        { "id": "e".repeat(limits::MAX_ID_BYTES), "harness": "pi", "roles": ["coder"] },
    ]});
    assert_eq!(violations(&at), []);
    let past = json!({ "executors": [
        { "id": "e".repeat(limits::MAX_ID_BYTES + 1), "harness": "pi", "roles": ["coder"] },
    ]});
    assert_eq!(
        violations(&past),
        [(
            "executors[0].id".to_string(),
            "an executor's id is 1025 bytes long; the most is 1024".to_string()
        )]
    );
}

#[test]
fn roles_at_the_bound_are_taken_and_one_more_is_a_violation() {
    let roles = |n: usize| (0..n).map(|i| format!("role{i}")).collect::<Vec<_>>();
    let document = |n| {
        json!({ "roles": roles(n), "executors": [
            { "id": "a", "harness": "pi", "roles": ["role0"] },
        ]})
    };
    assert_eq!(violations(&document(limits::MAX_ROLES)), []);
    let found = violations(&document(limits::MAX_ROLES + 1));
    assert_eq!(
        found[0],
        (
            "roles".to_string(),
            "the document declares 257 roles; the most is 256".to_string()
        )
    );
    let long = json!({ "roles": ["r".repeat(limits::MAX_ID_BYTES + 1)], "executors": [] });
    assert!(violations(&long)
        .iter()
        .any(|(path, message)| path == "roles[0]" && message.contains("1025 bytes long")));
}

#[test]
fn executors_at_the_bound_are_taken_and_one_more_is_a_violation() {
    let document = |n: usize| {
        let executors: Vec<Value> = (0..n)
            .map(|i| json!({ "id": format!("e{i}"), "harness": "pi", "roles": ["coder"] }))
            .collect();
        json!({ "executors": executors })
    };
    assert_eq!(violations(&document(limits::MAX_EXECUTORS)), []);
    assert_eq!(
        violations(&document(limits::MAX_EXECUTORS + 1)),
        [(
            "executors".to_string(),
            "the roster has 100001 executors; the most is 100000".to_string()
        )]
    );
}
