//! Arbitrary bytes as a sequence of JSON inputs (one per line) through the JSON step
//! boundary on a fixed small roster: no input may panic, and the invariants hold
//! after every step.
//!
//! `cargo +nightly fuzz run step` (from core/); the corpus is in corpus/step/, and
//! core/tests/sim.rs runs it (with mutations) as a regular test.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rota_core::json::step_str;
use rota_core::{Options, Policy};
use serde_json::{json, Value};

/// The same document as `fuzz_document()` in core/tests/sim.rs.
fn document() -> Value {
    json!({
        "executors": [
            { "id": "a", "harness": "claude", "roles": ["coder", "reviewer"], "slots": 2 },
            { "id": "b", "harness": "pi", "roles": ["coder"], "priority": 2,
              "health": "http://127.0.0.1:1/h" },
            { "id": "m", "harness": "pi", "roles": ["verifier"], "provision": true, "slots": 2 }
        ]
    })
}

fuzz_target!(|data: &[u8]| {
    let mut policy = Policy::new(&document(), Options::default()).expect("the fuzz document");
    let text = String::from_utf8_lossy(data);
    for line in text.lines().take(256) {
        let answer = step_str(&mut policy, line);
        assert!(
            serde_json::from_str::<Value>(&answer).is_ok(),
            "a step answers JSON"
        );
        policy.check_invariants();
        let _ = policy.poll_timeout();
    }
    let _ = policy.snapshot();
    let exported = policy.export_state();
    let copy = Policy::import_state(&exported).expect("an export imports");
    assert_eq!(copy.export_state(), exported, "an import is the export");
});
