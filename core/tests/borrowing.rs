//! Borrowing (issue 43 item 2) across an export and an import: a borrowed lease (no
//! slot) and a waiting borrower are the core's state, so a restored policy (a live
//! swap, a shared roster's snapshot) keeps them: the borrowed lease still frees no
//! slot, and the waiting borrower is still re-decided in the queue. An import that
//! says a borrowed lease holds a slot is refused.

mod common;

use common::{feed, T0};
use rota_core::{Options, Policy};
use serde_json::{json, Value};

#[test]
fn borrowed_leases_and_waiting_borrowers_survive_an_export_and_an_import() {
    let both = |id: &str| json!({ "id": id, "harness": "pi", "roles": ["coder", "reviewer"] });
    let document = json!({ "executors": [both("a"), both("b")] });
    let mut policy = Policy::new(&document, Options::default()).expect("a roster");
    feed(
        &mut policy,
        json!({ "type": "lease", "now": T0, "id": "c1", "role": "coder" }),
    );
    feed(
        &mut policy,
        json!({ "type": "lease", "now": T0 + 1, "id": "r0", "role": "reviewer" }),
    );
    feed(
        &mut policy,
        json!({ "type": "lease", "now": T0 + 2, "id": "c2", "role": "coder" }),
    );
    let borrower = json!({ "type": "lease", "now": T0 + 3, "id": "r1", "role": "reviewer",
                           "avoid": ["a"], "borrow": "a" });
    let out = feed(&mut policy, borrower);
    assert_eq!(out["outputs"][0]["type"], "waiting");

    let mut restored = Policy::import_state(&policy.export_state()).expect("import");
    assert_eq!(restored.state_hash(), policy.state_hash());
    // b's call ends: the coder takes b, and the restored queue lends a to the review.
    let out = feed(
        &mut restored,
        json!({ "type": "release", "now": T0 + 4, "lease": 2 }),
    );
    let grants: Vec<&Value> = out["outputs"]
        .as_array()
        .expect("outputs")
        .iter()
        .filter(|o| o["type"] == "granted")
        .collect();
    assert_eq!(grants.len(), 2, "{out}");
    assert_eq!(grants[1]["executor"], "a");
    assert_eq!(grants[1]["borrowed"], true);
    assert_eq!(grants[1]["because"], "held");
    let borrowed = grants[1]["lease"].clone();

    let exported = restored.export_state();
    let mut again = Policy::import_state(&exported).expect("import with a borrowed lease");
    assert_eq!(again.state_hash(), restored.state_hash());
    assert_eq!(again.available("reviewer").expect("role"), 0);
    feed(
        &mut again,
        json!({ "type": "release", "now": T0 + 5, "lease": borrowed }),
    );
    assert_eq!(
        again.available("reviewer").expect("role"),
        0,
        "it freed no slot"
    );

    // A borrowed lease that claims a slot contradicts itself.
    let mut bad = exported.clone();
    assert_eq!(claim_slots(&mut bad), 1, "one borrowed lease in {exported}");
    let error = Policy::import_state(&bad).expect_err("refused");
    assert!(error.to_string().contains("borrowed"), "{error}");
}

/// Marks every borrowed lease in an exported state as holding a slot; how many.
fn claim_slots(value: &mut Value) -> usize {
    match value {
        Value::Object(map) if map.get("borrowed") == Some(&json!(true)) => {
            map.insert("counted".into(), json!(true));
            1
        }
        Value::Object(map) => map.values_mut().map(claim_slots).sum(),
        Value::Array(items) => items.iter_mut().map(claim_slots).sum(),
        _ => 0,
    }
}
