//! Affinity keys across an export and an import: the memory (key -> executor, last
//! use) is the core's state, so a restored policy (a live swap, a shared roster's
//! snapshot) sends a key to the same executor; an import whose memory contradicts the
//! roster is refused naming the field.

mod common;

use common::{feed, T0};
use rota_core::{Options, Policy};
use serde_json::{json, Value};

fn granted_on(out: &Value) -> String {
    out["outputs"]
        .as_array()
        .expect("outputs")
        .iter()
        .find(|o| o["type"] == "granted")
        .and_then(|o| o["executor"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Key k remembered on b (a busy when it was granted), then both free.
fn remembered_on_b() -> Policy {
    let document = json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"] },
        { "id": "b", "harness": "pi", "roles": ["coder"] }
    ], "affinityTtl": "2 minutes" });
    let mut policy = Policy::new(&document, Options::default()).expect("a roster");
    let out = feed(
        &mut policy,
        json!({ "type": "lease", "now": T0, "id": "r1", "role": "coder" }),
    );
    assert_eq!(granted_on(&out), "a");
    let out = feed(
        &mut policy,
        json!({ "type": "lease", "now": T0 + 1, "id": "r2", "role": "coder", "affinity": "k" }),
    );
    assert_eq!(granted_on(&out), "b");
    feed(
        &mut policy,
        json!({ "type": "release", "now": T0 + 2, "lease": 2 }),
    );
    feed(
        &mut policy,
        json!({ "type": "release", "now": T0 + 3, "lease": 1 }),
    );
    policy
}

#[test]
fn the_memory_survives_an_export_and_an_import() {
    let policy = remembered_on_b();
    let exported = policy.export_state();
    assert_eq!(exported["affinity"], json!([["k", "b", T0 + 1]]));
    let mut restored = Policy::import_state(&exported).expect("its own export imports");
    assert_eq!(restored.state_hash(), policy.state_hash());
    // b was leased after a: round-robin alone would give a, the key gives b.
    let out = feed(
        &mut restored,
        json!({ "type": "lease", "now": T0 + 4, "id": "r3", "role": "coder", "affinity": "k" }),
    );
    assert_eq!(granted_on(&out), "b", "{out}");
    // Idle for the TTL: forgotten, by the inputs' time.
    feed(
        &mut restored,
        json!({ "type": "release", "now": T0 + 5, "lease": 3 }),
    );
    feed(
        &mut restored,
        json!({ "type": "tick", "now": T0 + 4 + 120_000 }),
    );
    assert!(restored.export_state().get("affinity").is_none());
}

#[test]
fn an_export_without_affinity_writes_none() {
    let document = json!({ "executors": [{ "id": "a", "harness": "pi", "roles": ["coder"] }] });
    let policy = Policy::new(&document, Options::default()).expect("a roster");
    assert!(policy.export_state().get("affinity").is_none());
}

#[test]
fn a_contradictory_memory_is_refused_naming_the_field() {
    let exported = remembered_on_b().export_state();
    let cases: [(Value, &str); 5] = [
        (
            json!([["k", "zed", T0 + 1]]),
            "affinity[0]: its executor is not an executor of the running document",
        ),
        (json!([["k", "b", T0 + 10]]), "affinity[0]: used after now"),
        (json!([["k", "b", T0 - 200_000]]), "affinity[0]: expired"),
        (
            json!([["j", "a", T0 + 1], ["k", "b", T0]]),
            "affinity[1]: used before the entry above it",
        ),
        (
            json!([["k", "a", T0], ["k", "b", T0 + 1]]),
            "affinity[1]: its key is listed twice",
        ),
    ];
    for (memory, expected) in cases {
        let mut bad = exported.clone();
        bad["affinity"] = memory.clone();
        let error = Policy::import_state(&bad).expect_err("refused").to_string();
        assert!(error.contains(expected), "{memory}: {error}");
    }
    let mut bad = exported.clone();
    bad["affinity"] = json!([["k", "b"]]);
    let error = Policy::import_state(&bad).expect_err("refused").to_string();
    assert!(error.contains("affinity"), "{error}");
}
