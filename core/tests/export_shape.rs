//! The exported state is a format other hosts and saved states depend on: the
//! request records keep their JSON shape whatever the internal layout (issue 3
//! slimmed the internal record; this pins what `export_state` writes for it).

use rota_core::json::step;
use rota_core::{Options, Policy};
use serde_json::json;

const T0: u64 = 1_800_000_000_000;

fn requests_after_a_busy_start() -> Policy {
    let document = json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"] },
        { "id": "m", "harness": "pi", "roles": ["coder"], "provision": true },
    ]});
    let mut policy = Policy::new(&document, Options::default()).expect("a roster");
    let inputs = [
        json!({ "type": "lease", "now": T0, "id": "r0", "role": "coder" }),
        json!({ "type": "lease", "now": T0 + 1, "id": "r1", "role": "coder", "label": "creating",
                "deadline": T0 + 600_000 }),
        json!({ "type": "lease", "now": T0 + 2, "id": "r2", "role": "coder", "rank": 3,
                "eventTime": T0 - 50, "label": "ranked", "avoid": ["m"], "prefer": "a",
                "deadline": T0 + 900_000 }),
        json!({ "type": "lease", "now": T0 + 3, "id": "r3", "role": "coder", "pin": "ghost" }),
        json!({ "type": "lease", "now": T0 + 4, "id": "r4", "role": "coder", "eventTime": T0 + 4 }),
        json!({ "type": "lease", "now": T0 + 5, "id": "r5", "role": "coder", "rank": -2 }),
    ];
    for input in &inputs {
        let out = step(&mut policy, input);
        assert!(out.get("error").is_none(), "{input}: {out}");
    }
    policy
}

#[test]
fn exported_requests_keep_their_shape() {
    let policy = requests_after_a_busy_start();
    let exported = policy.export_state();
    let requests = exported["requests"].clone();
    // Recorded from the layout before issue 3 (a map of full records by id).
    let expected = json!([
        { "announced": false, "avoid": [], "deadline": T0 + 600000, "eventTime": null,
          "id": "r1", "key": [1, 0, T0 + 1, 1], "label": "creating", "pin": null,
          "prefer": null, "rank": null, "role": "coder", "since": T0 + 1,
          "state": { "creating": { "executor": "m", "passed": 0 } }, "tryOnly": false },
        { "announced": true, "avoid": ["m"], "deadline": T0 + 900000, "eventTime": T0 - 50,
          "id": "r2", "key": [0, 3, T0 - 50, 2], "label": "ranked", "pin": null, "prefer": "a",
          "rank": 3, "role": "coder", "since": T0 + 2, "state": "waiting", "tryOnly": false },
        { "announced": true, "avoid": [], "deadline": null, "eventTime": null, "id": "r3",
          "key": [1, 0, T0 + 3, 3], "label": null, "pin": "ghost", "prefer": null,
          "rank": null, "role": "coder", "since": T0 + 3, "state": "waiting", "tryOnly": false },
        { "announced": true, "avoid": [], "deadline": null, "eventTime": T0 + 4, "id": "r4",
          "key": [1, 0, T0 + 4, 4], "label": null, "pin": null, "prefer": null, "rank": null,
          "role": "coder", "since": T0 + 4, "state": "waiting", "tryOnly": false },
        { "announced": true, "avoid": [], "deadline": null, "eventTime": null, "id": "r5",
          "key": [0, -2, T0 + 5, 5], "label": null, "pin": null, "prefer": null, "rank": -2,
          "role": "coder", "since": T0 + 5, "state": "waiting", "tryOnly": false },
    ]);
    assert_eq!(requests, expected);
}

#[test]
fn exported_requests_import_and_export_again_unchanged() {
    let policy = requests_after_a_busy_start();
    let exported = policy.export_state();
    let copy = Policy::import_state(&exported).expect("the export imports");
    assert_eq!(copy.export_state(), exported);
    assert_eq!(copy.snapshot(), policy.snapshot());
}

#[test]
fn an_export_whose_rank_disagrees_with_its_key_is_refused() {
    let policy = requests_after_a_busy_start();
    let mut exported = policy.export_state();
    let requests = exported["requests"].as_array_mut().expect("a list");
    let waiting = requests
        .iter_mut()
        .find(|q| q["id"] == "r2")
        .expect("r2 waits");
    waiting["rank"] = json!(4);
    let error = Policy::import_state(&exported).expect_err("refused");
    assert!(error.to_string().contains("r2"), "{error}");
}
