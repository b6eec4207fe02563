//! Owners (issue 18 item 1): `expireOwner` on every path (waiting, creating,
//! abandoned, leased, deleting; each `expiredOwnerLeases`), with the invariants
//! after it, export/import round trips that keep owners, `stateHash` agreement
//! between replicas, `timeoutMs`, `dropCreation` and the version marker.
//!
//! `seeded_replicas_agree` draws inputs with splitmix64: it prints its seed, and
//! `ROTA_SEED=<n>` replays it.

use rota_core::json::step_str;
use rota_core::{Options, Policy};
use serde_json::{json, Value};

const T: u64 = 1_800_000_000_000;

fn document() -> Value {
    json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 2 },
        { "id": "w", "harness": "exe.dev", "roles": ["reviewer"], "slots": 3,
          "provision": { "image": "worker" } },
    ]})
}

fn policy(options: Value) -> Policy {
    let options = rota_core::json::parse_options(&options).expect("valid options");
    Policy::new(&document(), options).expect("a valid roster")
}

/// Feeds `input`; its answer as JSON (panics on an error answer).
fn step(policy: &mut Policy, input: Value) -> Value {
    let answer: Value = serde_json::from_str(&step_str(policy, &input.to_string())).unwrap();
    assert!(answer.get("error").is_none(), "{input}: {answer}");
    answer
}

fn outputs_of(answer: &Value, kind: &str) -> Vec<Value> {
    answer["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["type"] == kind)
        .cloned()
        .collect()
}

/// The policy through its export: the same state, the same hash, owners kept.
fn round_trip(policy: &Policy) -> Policy {
    let state = policy.export_state();
    let imported = Policy::import_state(&state).expect("its own export imports");
    assert_eq!(
        imported.export_state(),
        state,
        "the export survives an import"
    );
    assert_eq!(imported.state_hash(), policy.state_hash());
    imported
        .verify()
        .expect("the invariants hold after an import");
    imported
}

/// i1 holds a lease on `a`, a lease with a machine on `w`, a released machine
/// being deleted, a creation in progress, an abandoned creation and a waiting
/// request; i2 waits behind it.
fn busy_owner(options: Value) -> Policy {
    let mut p = policy(options);
    step(
        &mut p,
        json!({"type": "lease", "now": T, "id": "c1", "role": "coder", "owner": "i1"}),
    );
    step(
        &mut p,
        json!({"type": "lease", "now": T, "id": "c2", "role": "coder", "owner": "i1"}),
    );
    step(
        &mut p,
        json!({"type": "lease", "now": T, "id": "c3", "role": "coder", "owner": "i1"}),
    );
    step(
        &mut p,
        json!({"type": "lease", "now": T, "id": "d1", "role": "coder", "owner": "i2"}),
    );
    step(
        &mut p,
        json!({"type": "lease", "now": T, "id": "m1", "role": "reviewer", "owner": "i1"}),
    );
    step(
        &mut p,
        json!({"type": "machineCreated", "now": T + 1, "id": "m1", "hold": {"vm": 1}}),
    );
    step(
        &mut p,
        json!({"type": "lease", "now": T + 1, "id": "m2", "role": "reviewer", "owner": "i1"}),
    );
    step(
        &mut p,
        json!({"type": "machineCreated", "now": T + 2, "id": "m2", "hold": {"vm": 2}}),
    );
    // Lease 4 (m2): released, its machine being deleted.
    step(&mut p, json!({"type": "release", "now": T + 2, "lease": 4}));
    step(
        &mut p,
        json!({"type": "lease", "now": T + 3, "id": "m3", "role": "reviewer", "owner": "i1"}),
    );
    // m3's slot would be the third on w: m3 creates, then is cancelled (abandoned).
    step(&mut p, json!({"type": "cancel", "now": T + 4, "id": "m3"}));
    step(
        &mut p,
        json!({"type": "lease", "now": T + 4, "id": "m4", "role": "reviewer", "owner": "i1"}),
    );
    p.verify().unwrap();
    p
}

#[test]
fn expiry_releases_cancels_and_drops_and_the_state_round_trips() {
    let mut p = busy_owner(json!({}));
    let mut q = round_trip(&p);
    let answer = step(
        &mut p,
        json!({"type": "expireOwner", "now": T + 5, "owner": "i1"}),
    );
    // The same input on the imported replica: the same answer and the same state.
    let again = step(
        &mut q,
        json!({"type": "expireOwner", "now": T + 5, "owner": "i1"}),
    );
    assert_eq!(answer, again);
    assert_eq!(p.state_hash(), q.state_hash());
    p.verify().unwrap();

    let cancelled: Vec<Value> = outputs_of(&answer, "cancelled");
    assert_eq!(
        cancelled,
        vec![
            json!({"type": "cancelled", "request": "c3", "owner": "i1"}),
            json!({"type": "cancelled", "request": "m4", "owner": "i1"}),
        ]
    );
    // The released machine of lease 3 (m1) and the one lease 4 was deleting.
    let deletes = outputs_of(&answer, "deleteMachine");
    assert_eq!(deletes.len(), 2, "{answer}");
    assert!(deletes.iter().all(|d| d["owner"] == "i1"));
    // d1 (i2) got c1's or c2's slot.
    let granted = outputs_of(&answer, "granted");
    assert_eq!(granted.len(), 1);
    assert_eq!(
        (&granted[0]["request"], &granted[0]["owner"]),
        (&json!("d1"), &json!("i2"))
    );

    let export = p.export_state();
    let text = export.to_string();
    assert!(!text.contains("\"c3\""), "nothing of c3 is left");
    assert!(
        !text.contains("\"m3\""),
        "the abandoned creation is dropped"
    );
    assert!(export.get("abandonedOwners").is_none());
    // What is left of i1: the two machines whose deletion is asked.
    let leases = export["leases"].as_object().unwrap();
    let of_i1: Vec<&Value> = leases.values().filter(|l| l["owner"] == "i1").collect();
    assert_eq!(of_i1.len(), 2);
    assert!(of_i1.iter().all(|l| l["deleting"] == true));
    let _ = round_trip(&p);
    // The deletions answered: every slot of i1 is free.
    step(
        &mut p,
        json!({"type": "machineDeleted", "now": T + 6, "lease": 3, "ok": true}),
    );
    step(
        &mut p,
        json!({"type": "machineDeleted", "now": T + 6, "lease": 4, "ok": true}),
    );
    let snapshot = serde_json::to_value(p.snapshot()).unwrap();
    assert_eq!(snapshot["executors"][1]["busy"], 0, "{snapshot}");
    assert_eq!(snapshot["executors"][0]["busy"], 1);
    p.verify().unwrap();
}

#[test]
fn keep_machines_keeps_the_leases_with_a_machine() {
    let mut p = busy_owner(json!({"expiredOwnerLeases": "keepMachines"}));
    let answer = step(
        &mut p,
        json!({"type": "expireOwner", "now": T + 5, "owner": "i1"}),
    );
    p.verify().unwrap();
    let event = outputs_of(&answer, "event")
        .into_iter()
        .find(|e| e["name"] == "ownerExpired")
        .unwrap();
    assert_eq!(event["fields"]["kept"], json!([3]));
    assert_eq!(event["fields"]["released"], json!([1, 2]));
    assert_eq!(event["fields"]["dropped"], json!(2));
    // Only the machine lease 4 was deleting is asked again.
    assert_eq!(outputs_of(&answer, "deleteMachine").len(), 1);
    let q = round_trip(&p);
    let lease = &q.export_state()["leases"]["3"];
    assert_eq!(
        (&lease["owner"], &lease["hold"]),
        (&json!("i1"), &json!({"vm": 1}))
    );
    // A kept lease is released by its id later, by anyone.
    let answer = step(&mut p, json!({"type": "release", "now": T + 6, "lease": 3}));
    assert_eq!(outputs_of(&answer, "deleteMachine")[0]["owner"], "i1");
}

#[test]
fn keep_keeps_every_lease_and_a_later_expiry_changes_nothing_more() {
    let mut p = busy_owner(json!({"expiredOwnerLeases": "keep"}));
    step(
        &mut p,
        json!({"type": "expireOwner", "now": T + 5, "owner": "i1"}),
    );
    p.verify().unwrap();
    let export = p.export_state();
    let kept = export["leases"]
        .as_object()
        .unwrap()
        .values()
        .filter(|l| l["owner"] == "i1")
        .count();
    assert_eq!(kept, 4, "c1, c2, m1, and m2 still being deleted");
    let hash = p.state_hash();
    let answer = step(
        &mut p,
        json!({"type": "expireOwner", "now": T + 5, "owner": "i1"}),
    );
    assert_eq!(outputs_of(&answer, "cancelled").len(), 0);
    // Only the machine still being deleted is asked again; the state is the same.
    assert_eq!(outputs_of(&answer, "deleteMachine").len(), 1);
    assert_eq!(p.state_hash(), hash);
}

#[test]
fn import_refuses_contradictory_owners() {
    let p = busy_owner(json!({}));
    let mut state = p.export_state();
    assert_eq!(state["abandonedOwners"], json!({"m3": "i1"}));
    state["abandonedOwners"] = json!({"nobody": "i1"});
    let error = Policy::import_state(&state).unwrap_err();
    assert_eq!(error.code(), "INVALID_STATE");
    assert!(error.to_string().contains("abandonedOwners"), "{error}");

    let mut state = p.export_state();
    state["leases"]["1"]["owner"] = json!("");
    let error = Policy::import_state(&state).unwrap_err();
    assert_eq!(error.code(), "INVALID_STATE");
    assert!(error.to_string().contains("leases.1"), "{error}");

    let mut state = p.export_state();
    state["requests"][0]["owner"] = json!("");
    assert_eq!(
        Policy::import_state(&state).unwrap_err().code(),
        "INVALID_STATE"
    );
}

#[test]
fn an_export_without_owners_reads_as_before() {
    let mut p = policy(json!({}));
    step(
        &mut p,
        json!({"type": "lease", "now": T, "id": "m1", "role": "reviewer"}),
    );
    step(&mut p, json!({"type": "cancel", "now": T, "id": "m1"}));
    step(
        &mut p,
        json!({"type": "lease", "now": T, "id": "c1", "role": "coder"}),
    );
    let text = p.export_state().to_string();
    assert!(!text.contains("owner"), "{text}");
    assert!(!text.contains("expiredOwnerLeases"), "{text}");
}

#[test]
fn version_marker_changes_nothing_and_a_foreign_one_is_refused() {
    let mut p = busy_owner(json!({}));
    let before = p.export_state();
    let answer = step(
        &mut p,
        json!({"type": "version", "now": T + 999_999, "log": 1}),
    );
    assert_eq!(answer, json!({"outputs": [], "wakeAt": p.poll_timeout()}));
    assert_eq!(p.export_state(), before);
    let answer: Value = serde_json::from_str(&step_str(
        &mut p,
        &json!({"type": "version", "now": T + 9, "log": 2}).to_string(),
    ))
    .unwrap();
    assert_eq!(answer["error"]["code"], "UNSUPPORTED_VERSION");
    assert_eq!(p.export_state(), before);
}

#[test]
fn timeout_ms_is_the_deadline_from_the_inputs_now() {
    let mut p = policy(json!({}));
    step(
        &mut p,
        json!({"type": "lease", "now": T, "id": "c1", "role": "coder"}),
    );
    step(
        &mut p,
        json!({"type": "lease", "now": T, "id": "c2", "role": "coder"}),
    );
    step(
        &mut p,
        json!({"type": "lease", "now": T + 10, "id": "c3", "role": "coder", "timeoutMs": 500}),
    );
    assert_eq!(p.poll_timeout(), Some(T + 510));
    let state = p.export_state();
    assert_eq!(state["requests"][0]["deadline"], json!(T + 510));
    // A `now` beyond 2^53 − 1 − timeoutMs is refused by `now`; the deadline stays exact.
    step(
        &mut p,
        json!({"type": "lease", "now": T + 10, "id": "c4", "role": "coder", "timeoutMs": (1u64 << 53) - 1}),
    );
    let state = p.export_state();
    assert_eq!(state["requests"][1]["deadline"], json!((1u64 << 53) - 1));
}

#[test]
fn drop_creation_never_pauses() {
    let mut p = policy(json!({}));
    for i in 0..5 {
        step(
            &mut p,
            json!({"type": "lease", "now": T + i, "id": format!("m{i}"), "role": "reviewer"}),
        );
    }
    // Three create, two wait; dropping one creation twice over never pauses `w`.
    for _ in 0..2 {
        let answer = step(
            &mut p,
            json!({"type": "dropCreation", "now": T + 10, "id": "m0"}),
        );
        assert!(outputs_of(&answer, "event")
            .iter()
            .all(|e| e["name"] != "provisionPaused"));
        let snapshot = serde_json::to_value(p.snapshot()).unwrap();
        assert!(
            snapshot["executors"][1].get("pause").is_none(),
            "{snapshot}"
        );
        p.verify().unwrap();
    }
    // m0 went back to its place, first in lease order: it creates again at once.
    let snapshot = serde_json::to_value(p.snapshot()).unwrap();
    let creating: Vec<&Value> = snapshot["creating"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["request"])
        .collect();
    assert_eq!(creating, vec![&json!("m0"), &json!("m1"), &json!("m2")]);
}

// ---- replicas -----------------------------------------------------------------------

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Two replicas fold the same random inputs (owners, expiries, drops, markers); one
/// goes through export/import every few inputs (a late joiner from a snapshot). They
/// agree on every answer and on `stateHash` after each, and the invariants hold.
#[test]
fn seeded_replicas_agree() {
    let seed: u64 = std::env::var("ROTA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0a11_ce5e_ed00_0018);
    println!("seeded_replicas_agree: ROTA_SEED={seed}");
    let mut rng = seed;
    // That the draw reaches the paths: expiries that cancel or release something,
    // and drops that are not refused.
    let (mut expiries, mut drops) = (0, 0);
    for run in 0..40 {
        let keep = ["release", "keepMachines", "keep"][run % 3];
        let mut a = policy(json!({"expiredOwnerLeases": keep}));
        let mut b = policy(json!({"expiredOwnerLeases": keep}));
        let mut now = T;
        let mut next_id = 0u64;
        for i in 0..120 {
            now += splitmix(&mut rng) % 3_000;
            let owner = format!("i{}", splitmix(&mut rng) % 3);
            let n = splitmix(&mut rng);
            let id = format!("r{}", n % (next_id + 1));
            let input = match n % 11 {
                0..=2 => {
                    next_id += 1;
                    let role = if n % 2 == 0 { "coder" } else { "reviewer" };
                    let mut lease = json!({"type": "lease", "now": now, "id": format!("r{next_id}"), "role": role, "owner": owner});
                    if n % 5 == 0 {
                        lease["timeoutMs"] = json!(n % 10_000);
                    }
                    lease
                }
                3 => json!({"type": "release", "now": now, "lease": 1 + n % (next_id + 1)}),
                4 => {
                    json!({"type": "machineCreated", "now": now, "id": id, "hold": {"vm": n % 100}})
                }
                5 => {
                    json!({"type": "machineFailed", "now": now, "id": id, "message": "no capacity"})
                }
                6 => {
                    json!({"type": "machineDeleted", "now": now, "lease": 1 + n % (next_id + 1), "ok": true})
                }
                7 => json!({"type": "expireOwner", "now": now, "owner": owner}),
                8 => json!({"type": "dropCreation", "now": now, "id": id}),
                9 => json!({"type": "cancel", "now": now, "id": id}),
                _ => json!({"type": "version", "now": now, "log": 1 + n % 2}),
            };
            let text = input.to_string();
            let answer_a = step_str(&mut a, &text);
            let answer_b = step_str(&mut b, &text);
            assert_eq!(
                answer_a, answer_b,
                "ROTA_SEED={seed}, run {run}, input {i}: {text}"
            );
            assert_eq!(
                a.state_hash(),
                b.state_hash(),
                "ROTA_SEED={seed}, run {run}, input {i}"
            );
            a.verify()
                .unwrap_or_else(|v| panic!("ROTA_SEED={seed}, run {run}, input {i}: {v}"));
            let ended = |a: &str| a.contains("{\"type\":\"cancelled\"") || a.contains("\"lease\":");
            if input["type"] == "expireOwner" && ended(&answer_a) {
                expiries += 1;
            }
            if input["type"] == "dropCreation" && !answer_a.contains("\"error\"") {
                drops += 1;
            }
            if i % 7 == 0 {
                b = round_trip(&b);
            }
        }
    }
    println!("expiries that ended something: {expiries}; drops: {drops}");
    assert!(
        expiries > 20 && drops > 5,
        "ROTA_SEED={seed}: {expiries} expiries, {drops} drops"
    );
}

#[test]
fn options_write_the_lease_choice_only_when_not_the_default() {
    let options = Options::default();
    assert!(options.expired_owner_leases.is_release());
    let p = policy(json!({"expiredOwnerLeases": "keepMachines"}));
    assert_eq!(
        p.export_state()["options"]["expiredOwnerLeases"],
        "keepMachines"
    );
}
