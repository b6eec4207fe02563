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

/// Hand-edited exports that contradict themselves are refused with
/// `INVALID_STATE`, naming the field or the invariant, rather than imported (to
/// fail later: `nextLease: 1` beside a live lease 1 leaked a slot) or panicking.
#[test]
fn contradictory_exports_are_refused_naming_what_breaks() {
    let policy = requests_after_a_busy_start();
    let exported = policy.export_state();
    assert!(
        Policy::import_state(&exported).is_ok(),
        "the export as it is"
    );
    assert!(
        exported["leases"]["1"].is_object(),
        "a's lease 1: {exported}"
    );
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit, &str); 7] = [
        (
            "nextLease 1 while lease 1 runs",
            |s| s["nextLease"] = json!(1),
            "nextLease 1 is not above lease 1",
        ),
        (
            "a lease holding a slot on an unknown executor",
            |s| s["leases"]["1"]["executor"] = json!("zz"),
            "leases.1: it holds a slot on 'zz'",
        ),
        (
            "a waiting request while a slot is free",
            |s| {
                s["leases"].as_object_mut().map(|l| l.remove("1"));
            },
            "invariant `grant pass` broken: waiting request",
        ),
        (
            "a persisted entry of an unknown executor",
            |s| s["lastPersisted"] = json!([{ "id": "zz", "reason": "x", "kind": "manual" }]),
            "lastPersisted: 'zz' is not an executor of the roster",
        ),
        (
            "a machine created on an unknown executor",
            |s| s["requests"][0]["state"]["creating"]["executor"] = json!("zz"),
            "requests: 'r1' creates a machine on 'zz'",
        ),
        (
            "an arrival counter below a request's arrival",
            |s| s["nextArrival"] = json!(3),
            "nextArrival 3 is not above the arrival",
        ),
        (
            "a request id held by a lease too",
            |s| s["requests"][1]["id"] = json!("r0"),
            "requests: 'r0' is also the request of lease 1",
        ),
    ];
    for (case, edit, says) in cases {
        let mut state = exported.clone();
        edit(&mut state);
        let error = match Policy::import_state(&state) {
            Ok(_) => panic!("{case}: imported"),
            Err(error) => error,
        };
        assert_eq!(error.code(), "INVALID_STATE", "{case}: {error}");
        assert!(error.to_string().contains(says), "{case}: {error}");
    }
}
