//! The document check through the policy module: `rota_check` (ABI 1.2) carries the
//! core's warnings (a literal secret in `env`) beside `rota_validate`'s violations,
//! and `rota_validate` answers as it always did.

mod common;

use common::{broken_guest, fuel_engine, policy, roster};
use rota_host::{HostError, PolicyRuntime};
use serde_json::{json, Value};

fn with_env(env: Value) -> Value {
    let mut doc = roster();
    doc["executors"][0]["env"] = env;
    doc
}

#[test]
fn check_carries_the_cores_warnings_and_validate_is_unchanged() {
    let module = policy();
    let doc = with_env(json!({
        "ANTHROPIC_API_KEY": "sk-ant-api03-AbCdEf0123456789",
        "BASE": "${BASE}",
    }));
    let check = module.check(&doc, &Value::Null).expect("check");
    assert_eq!(
        check,
        rota_host::core::check(&doc, None),
        "the core's answer"
    );
    assert!(check.violations.is_empty(), "{check:?}");
    let paths: Vec<&str> = check.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(paths, ["executors[0].env.ANTHROPIC_API_KEY"]);
    assert!(
        !check.warnings[0].message.contains("AbCdEf"),
        "never quotes the value"
    );
    // The existing call: violations only, still none.
    assert!(module
        .validate(&doc, &Value::Null)
        .expect("validate")
        .is_empty());

    // A running policy asks its module the same.
    let mut runtime = PolicyRuntime::new(module.clone(), &roster(), &Value::Null).expect("runs");
    assert_eq!(runtime.check(&doc, &Value::Null).expect("check"), check);
    let clean = runtime.check(&roster(), &Value::Null).expect("check");
    assert!(clean.violations.is_empty() && clean.warnings.is_empty());
}

#[test]
fn check_lists_validates_violations_with_the_options_kinds() {
    let module = policy();
    let bad = json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 0, "env": { "TOKEN": "x" } },
        { "id": "a", "roles": [] },
    ]});
    let options = json!({ "kinds": ["harness"] });
    let check = module.check(&bad, &options).expect("check");
    let violations = module.validate(&bad, &options).expect("validate");
    assert!(!violations.is_empty());
    assert_eq!(check.violations, violations);
    assert_eq!(check.warnings.len(), 1, "{check:?}");
    let error = module
        .check(&bad, &json!({ "bogus": 1 }))
        .expect_err("bad options");
    assert!(
        matches!(&error, HostError::Policy { .. }),
        "an error of the core: {error:?}"
    );
}

#[test]
fn a_module_of_abi_1_1_is_refused_one_without_rota_check_fails_the_call() {
    let engine = fuel_engine(1_000_000);
    let error = engine
        .load_bytes(&broken_guest((1 << 16) | 1, true), "old")
        .expect_err("ABI 1.1 has no rota_check");
    assert!(
        matches!(
            error,
            HostError::AbiVersion {
                found_minor: 1,
                want_minor: 2,
                ..
            }
        ),
        "{error:?}"
    );
    // Says 1.2 but lacks the export: an ABI error for that call, nothing worse.
    let hollow = engine
        .load_bytes(&broken_guest((1 << 16) | 2, true), "hollow")
        .expect("loads");
    let error = hollow
        .check(&roster(), &Value::Null)
        .expect_err("no rota_check");
    assert!(
        matches!(&error, HostError::Abi(m) if m.contains("rota_check")),
        "{error:?}"
    );
}
