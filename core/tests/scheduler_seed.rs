//! The scheduler seed's behaviours (`scheduler.js`): lease order, no head-of-line
//! blocking, pinned requests, ahead/passed, machine provisioning with back-off,
//! live reload with drain and resize, reload preflights, host kinds and occupy.

mod common;

use common::*;
use rota_core::Level;
use serde_json::{json, Value};

fn coder(id: &str, extra: Value) -> Value {
    ex(id, &["coder"], extra)
}

fn s(x: &str) -> String {
    x.to_string()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(a, b)| (s(a), s(b))).collect()
}

// ---- Lease order ------------------------------------------------------------------------

#[test]
fn lease_order_is_rank_then_event_time_then_arrival_with_unranked_last() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let (_, first) = sim.granted("r0", "coder");
    for (id, extra) in [
        ("u1", json!({ "eventTime": T0 - HOUR })),
        ("k5", json!({ "rank": 5, "eventTime": T0 })),
        ("k1-late", json!({ "rank": 1, "eventTime": T0 - 10 * MIN })),
        ("k1-early", json!({ "rank": 1, "eventTime": T0 - 20 * MIN })),
        (
            "k1-early-2",
            json!({ "rank": 1, "eventTime": T0 - 20 * MIN }),
        ),
        ("u2", json!({ "eventTime": T0 - 2 * HOUR })),
        ("kneg", json!({ "rank": -3, "eventTime": T0 })),
        ("u3", json!({})), // no event time: it arrived now
    ] {
        sim.after(SEC);
        sim.lease_with(id, "coder", extra).no_grant();
    }
    let expected = [
        "kneg",
        "k1-early",
        "k1-early-2",
        "k1-late",
        "k5",
        "u2",
        "u1",
        "u3",
    ];
    assert_eq!(sim.queue(), expected);
    let aheads: Vec<u32> = sim.snapshot().queue.iter().map(|q| q.ahead).collect();
    assert_eq!(aheads, [0, 1, 2, 3, 4, 5, 6, 7]);
    // Each release grants the head of the queue, in that order.
    let mut lease = first;
    let mut granted = Vec::new();
    for _ in 0..expected.len() {
        let grant = sim.release(lease).grant();
        assert_eq!(grant.passed, 0, "the head passes nobody");
        granted.push(grant.request);
        lease = grant.lease;
    }
    assert_eq!(granted, expected);
}

#[test]
fn waiting_outputs_count_the_requests_ahead() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.granted("r0", "coder");
    assert_eq!(
        sim.lease_with("r1", "coder", json!({ "rank": 2 }))
            .waiting()[0]
            .3,
        0
    );
    assert_eq!(
        sim.lease_with("r2", "coder", json!({ "rank": 2 }))
            .waiting()[0]
            .3,
        1
    );
    // A better rank jumps the queue: nobody is ahead of it.
    assert_eq!(
        sim.lease_with("r3", "coder", json!({ "rank": 1 }))
            .waiting()[0]
            .3,
        0
    );
    assert_eq!(sim.lease("r4", "coder").waiting()[0].3, 3);
    let queue = sim.snapshot().queue;
    let view: Vec<(String, u32)> = queue.iter().map(|q| (q.request.clone(), q.ahead)).collect();
    assert_eq!(
        view,
        [(s("r3"), 0), (s("r1"), 1), (s("r2"), 2), (s("r4"), 3)]
    );
    assert_eq!(queue[0].rank, Some(1));
    assert_eq!(queue[3].waiting_since, T0);
}

#[test]
fn ahead_and_passed_count_requests_of_other_roles_that_compete_for_the_same_executors() {
    // a codes and reviews, b only reviews, c only plans: a coder competes with the
    // reviewers (both want a), never with the planners.
    let mut sim = Sim::new(doc(vec![
        ex("a", &["coder", "reviewer"], json!({ "slots": 1 })),
        ex("b", &["reviewer"], json!({})),
        ex("c", &["planner"], json!({})),
    ]));
    let (_, on_a) = sim.granted("c0", "coder");
    sim.granted("v0", "reviewer"); // b
    sim.granted("p0", "planner"); // c
    assert_eq!(sim.lease("v1", "reviewer").waiting()[0].3, 0);
    assert_eq!(
        sim.lease("p1", "planner").waiting()[0].3,
        0,
        "no planner waits"
    );
    assert_eq!(
        sim.lease("c1", "coder").waiting()[0].3,
        1,
        "the reviewer before it also wants a; the planner does not"
    );
    let view: Vec<(String, u32)> = sim
        .snapshot()
        .queue
        .iter()
        .map(|q| (q.request.clone(), q.ahead))
        .collect();
    assert_eq!(view, [(s("v1"), 0), (s("p1"), 0), (s("c1"), 1)]);
    // a frees: the reviewer, first in lease order, takes it and passes nobody.
    let grant = sim.release(on_a).grant();
    assert_eq!((grant.request.as_str(), grant.passed), ("v1", 0));
    // v1 released: a goes to the coder, which passed nobody still waiting for a.
    let grant = sim.release(grant.lease).grant();
    assert_eq!((grant.request.as_str(), grant.passed), ("c1", 0));
}

#[test]
fn a_grant_counts_the_earlier_requests_of_every_role_its_executor_takes() {
    // x (a reviewer that avoids a) waits; a coder behind it gets a: it passed x.
    let mut sim = Sim::new(doc(vec![
        ex("a", &["coder", "reviewer"], json!({ "slots": 1 })),
        ex("b", &["reviewer"], json!({ "slots": 1 })),
    ]));
    let (_, on_a) = sim.granted("r0", "coder");
    sim.granted("r1", "reviewer"); // b
    sim.lease_with("x", "reviewer", json!({ "avoid": ["a"] }))
        .no_grant();
    assert_eq!(sim.lease("y", "coder").waiting()[0].3, 1);
    let grant = sim.release(on_a).grant();
    assert_eq!(
        (
            grant.request.as_str(),
            grant.executor.as_str(),
            grant.passed
        ),
        ("y", "a", 1)
    );
}

// ---- No head-of-line blocking -------------------------------------------------------------

#[test]
fn a_request_no_free_slot_can_serve_does_not_block_other_roles_behind_it() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({})),
        ex("b", &["reviewer"], json!({})),
    ]));
    sim.granted("c0", "coder");
    let (_, v0) = sim.granted("v0", "reviewer");
    sim.lease("c1", "coder").no_grant();
    sim.lease("v1", "reviewer").no_grant();
    let outs = sim.release(v0);
    assert_eq!(outs.grant_pairs(), pairs(&[("v1", "b")]));
    assert_eq!(sim.queue(), ["c1"]);
}

#[test]
fn a_request_that_avoids_the_freed_executor_does_not_block_the_next() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    sim.granted("r0", "coder"); // a
    let (executor, on_b) = sim.granted("r1", "coder");
    assert_eq!(executor, "b");
    sim.lease_with("x", "coder", json!({ "avoid": ["b"] }))
        .no_grant();
    sim.lease("y", "coder").no_grant();
    let grant = sim.release(on_b).grant();
    assert_eq!(
        (grant.request.as_str(), grant.executor.as_str()),
        ("y", "b")
    );
    assert_eq!(grant.passed, 1, "it passed x");
    assert_eq!(sim.queue(), ["x"]);
}

#[test]
fn a_pinned_request_does_not_block_the_next_on_another_executor() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    sim.granted("r0", "coder"); // a
    let (_, on_b) = sim.granted("r1", "coder");
    sim.lease_with("p", "coder", json!({ "pin": "a" }))
        .no_grant();
    sim.lease("q", "coder").no_grant();
    let grant = sim.release(on_b).grant();
    assert_eq!(
        (
            grant.request.as_str(),
            grant.executor.as_str(),
            grant.passed
        ),
        // p is pinned to a: b could never serve it, so q passed nobody (the seed's
        // `passedCount` counts only what the worker could have taken).
        ("q", "b", 0)
    );
}

// ---- Pinned requests ------------------------------------------------------------------------

#[test]
fn a_pinned_request_waits_for_its_executor_while_others_are_free() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    let on_b = sim
        .lease_with("r0", "coder", json!({ "prefer": "b" }))
        .grant()
        .lease;
    let outs = sim.lease_with("p", "coder", json!({ "pin": "b" }));
    outs.no_grant();
    assert_eq!(outs.waiting(), [(s("p"), s("coder"), s("b busy"), 0)]);
    assert_eq!(sim.exec("a").busy, 0);
    let outs = sim.release(on_b);
    assert_eq!(outs.grant_pairs(), pairs(&[("p", "b")]));
}

#[test]
fn a_request_pinned_to_an_undeclared_executor_waits_until_a_reload_declares_it() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let outs = sim.lease_with("p", "coder", json!({ "pin": "z", "label": "run-9" }));
    outs.no_grant();
    assert!(outs.exhausted().is_empty());
    assert_eq!(
        outs.waiting(),
        [(s("p"), s("coder"), s("z not in the roster"), 0)]
    );
    assert_eq!(
        outs.messages("waiting"),
        ["waiting for an executor to take coder for run-9: z not in the roster (z is not in the roster; the request waits until a reload declares it or it is cancelled)"]
    );
    assert_eq!(sim.snapshot().queue[0].pin.as_deref(), Some("z"));
    // Time passes; nothing gives up on it.
    sim.run_to(T0 + HOUR);
    assert_eq!(sim.queue(), ["p"]);
    sim.after(SEC);
    let outs = sim.input(json!({ "type": "reload", "document": doc(vec![
        coder("a", json!({})), coder("z", json!({}))
    ]) }));
    assert_eq!(outs.grant_pairs(), pairs(&[("p", "z")]));
}

#[test]
fn a_pinned_request_waits_out_a_timed_exclusion_of_its_executor() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    sim.report("b", "usageLimit", "limit");
    let outs = sim.lease_with("p", "coder", json!({ "pin": "b" }));
    outs.no_grant();
    assert!(outs.exhausted().is_empty());
    let outs = sim.run_to(T0 + 30 * MIN);
    assert_eq!(outs.grant_pairs(), pairs(&[("p", "b")]));
}

#[test]
fn a_request_pinned_to_an_executor_out_for_the_run_is_exhausted() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    sim.report("b", "authentication", "no key");
    let outs = sim.lease_with("p", "coder", json!({ "pin": "b" }));
    assert_eq!(
        outs.exhausted(),
        [(
            s("p"),
            s("coder"),
            vec![s("b for this run: not signed in (no key)")]
        )]
    );
}

// ---- Provisioning ------------------------------------------------------------------------------

fn provisioned(slots: u32) -> Sim {
    Sim::new(doc(vec![coder(
        "m",
        json!({ "provision": true, "slots": slots }),
    )]))
}

#[test]
fn a_provisioned_executor_creates_a_machine_before_the_grant() {
    let mut sim = provisioned(1);
    let outs = sim.lease_with("r1", "coder", json!({ "label": "run-1" }));
    outs.no_grant();
    assert!(outs.waiting().is_empty());
    assert_eq!(outs.creates(), pairs(&[("r1", "m")]));
    let creating = sim.snapshot().creating;
    assert_eq!(creating.len(), 1);
    assert_eq!(
        (creating[0].request.as_str(), creating[0].executor.as_str()),
        ("r1", "m")
    );
    assert_eq!(sim.exec("m").busy, 1, "the creation holds the slot");
    sim.lease("r2", "coder").no_grant();
    sim.after(20 * SEC);
    let hold = json!({ "machine": "vm-1", "zone": "fra" });
    let outs = sim.input(json!({ "type": "machineCreated", "id": "r1", "hold": hold }));
    let grant = outs.grant();
    assert_eq!(
        (
            grant.request.as_str(),
            grant.executor.as_str(),
            grant.role.as_str()
        ),
        ("r1", "m", "coder")
    );
    assert_eq!(grant.hold, Some(hold.clone()));
    assert_eq!(grant.passed, 0);
    assert!(sim.snapshot().creating.is_empty());
    let leases = sim.exec("m").leases;
    assert_eq!(leases.len(), 1);
    assert_eq!(leases[0].hold, Some(hold.clone()));
    // Releasing a lease that holds a machine deletes the machine; the slot frees once
    // the host says it is deleted, and then the next request creates its own.
    let outs = sim.release(grant.lease);
    assert_eq!(outs.deletes(), [(s("m"), hold)]);
    assert_eq!(outs.deleting_leases(), [grant.lease]);
    assert!(
        outs.creates().is_empty(),
        "the slot is held until the deletion"
    );
    let outs = sim.input(json!({ "type": "machineDeleted", "lease": grant.lease, "ok": true }));
    assert_eq!(outs.creates(), pairs(&[("r2", "m")]));
}

#[test]
fn a_failed_creation_frees_the_slot_requeues_in_place_and_pauses_with_doubling() {
    let mut sim = provisioned(1);
    assert_eq!(sim.lease("r1", "coder").creates(), pairs(&[("r1", "m")]));
    sim.lease("r2", "coder").no_grant();
    let mut t = T0;
    let mut delays = Vec::new();
    for failure in 1..=7u32 {
        sim.at(t);
        let outs =
            sim.input(json!({ "type": "machineFailed", "id": "r1", "message": "quota exceeded" }));
        assert!(outs.creates().is_empty(), "paused: no creation at once");
        outs.no_grant();
        let pause = sim.exec("m").pause.expect("a pause");
        assert_eq!(pause.failures, failure);
        assert!(pause.blocked);
        assert_eq!(pause.message, "quota exceeded");
        assert_eq!(sim.exec("m").busy, 0, "the slot is free");
        assert_eq!(sim.queue(), ["r1", "r2"], "r1 is back in its place");
        delays.push(pause.until - t);
        let event = outs.event("provisionPaused");
        assert_eq!(event.level, Level::Warn);
        if failure == 1 {
            assert_eq!(
                event.message,
                "m could not create a machine (quota exceeded); its requests keep waiting, and it tries again after 30 seconds (failure 1)"
            );
        }
        assert_eq!(sim.wake_at(), Some(pause.until));
        // Just before the pause ends nothing happens; at its end r1 (not r2) goes.
        assert!(sim.run_to(pause.until - 1).creates().is_empty());
        let outs = sim.run_to(pause.until);
        assert_eq!(outs.creates(), pairs(&[("r1", "m")]));
        assert!(outs.has_event("provisionResumed"));
        assert!(!sim.exec("m").pause.unwrap().blocked);
        t = pause.until;
    }
    assert_eq!(
        delays,
        [
            30 * SEC,
            60 * SEC,
            2 * MIN,
            4 * MIN,
            8 * MIN,
            10 * MIN,
            10 * MIN
        ]
    );
    // A success clears the count: the next failure pauses 30 s again.
    let outs = sim.input(json!({ "type": "machineCreated", "id": "r1", "hold": "vm-7" }));
    assert_eq!(outs.grant().request, "r1");
    assert!(sim.exec("m").pause.is_none());
    let lease = outs.grant().lease;
    let outs = sim.release(lease);
    assert_eq!(outs.deletes(), [(s("m"), json!("vm-7"))]);
    let outs = sim.input(json!({ "type": "machineDeleted", "lease": lease, "ok": true }));
    assert_eq!(outs.creates(), pairs(&[("r2", "m")]));
    sim.input(json!({ "type": "machineFailed", "id": "r2", "message": "again" }));
    let pause = sim.exec("m").pause.unwrap();
    assert_eq!((pause.failures, pause.until), (1, sim.now + 30 * SEC));
}

#[test]
fn a_request_put_back_after_a_failed_creation_is_not_announced_again() {
    let mut sim = provisioned(1);
    sim.lease("r1", "coder");
    let outs = sim.lease("r2", "coder");
    assert_eq!(outs.waiting().len(), 1);
    let lease = sim
        .input(json!({ "type": "machineCreated", "id": "r1", "hold": "vm-1" }))
        .grant()
        .lease;
    sim.release(lease);
    let outs = sim.input(json!({ "type": "machineDeleted", "lease": lease, "ok": true }));
    assert_eq!(outs.creates(), pairs(&[("r2", "m")]));
    let outs = sim.input(json!({ "type": "machineFailed", "id": "r2", "message": "quota" }));
    assert!(outs.waiting().is_empty(), "{outs:#?}");
    assert_eq!(sim.queue(), ["r2"]);
    let announced = sim
        .log
        .iter()
        .filter(|o| matches!(o, rota_core::Output::Waiting { request, .. } if request == "r2"))
        .count();
    assert_eq!(announced, 1);
}

#[test]
fn a_paused_executor_takes_no_unpinned_request_but_serves_pinned_ones() {
    let mut sim = Sim::new(doc(vec![
        coder("m", json!({ "provision": true, "slots": 2 })),
        coder("b", json!({ "priority": 2 })),
    ]));
    let on_b = sim
        .lease_with("r0", "coder", json!({ "prefer": "b" }))
        .grant()
        .lease;
    assert_eq!(sim.lease("r1", "coder").creates(), pairs(&[("r1", "m")]));
    sim.input(json!({ "type": "machineFailed", "id": "r1", "message": "no capacity" }));
    // m is paused with two free slots; r1 waits.
    assert_eq!(sim.queue(), ["r1"]);
    assert_eq!(sim.policy.available("coder").unwrap(), 0);
    let outs = sim.lease("r2", "coder");
    assert!(outs.creates().is_empty());
    outs.no_grant();
    assert_eq!(
        outs.waiting()[0].2,
        format!(
            "m paused creating machines until {}; b busy",
            iso(T0 + 30 * SEC)
        )
    );
    // A pinned request (a reattached attempt) is served on the paused executor, with
    // no machine.
    let outs = sim.lease_with("p", "coder", json!({ "pin": "m" }));
    let grant = outs.grant();
    assert_eq!(
        (grant.request.as_str(), grant.executor.as_str()),
        ("p", "m")
    );
    assert_eq!(grant.hold, None);
    assert!(outs.creates().is_empty());
    // b frees: r1 takes it (the first in lease order), not the paused m.
    let outs = sim.release(on_b);
    assert_eq!(outs.grant_pairs(), pairs(&[("r1", "b")]));
    // The pause ends: r2 creates on m.
    let outs = sim.run_to(T0 + 30 * SEC);
    assert_eq!(outs.creates(), pairs(&[("r2", "m")]));
}

#[test]
fn a_failed_creation_is_granted_elsewhere_at_once_when_a_slot_is_free() {
    let mut sim = Sim::new(doc(vec![
        coder("m", json!({ "provision": true })),
        coder("b", json!({ "priority": 2 })),
    ]));
    assert_eq!(sim.lease("r1", "coder").creates(), pairs(&[("r1", "m")]));
    let outs = sim.input(json!({ "type": "machineFailed", "id": "r1", "message": "boom" }));
    assert_eq!(outs.grant_pairs(), pairs(&[("r1", "b")]));
    assert!(sim.queue().is_empty());
}

#[test]
fn a_try_lease_whose_machine_creation_fails_is_unavailable_not_queued() {
    // tryLease is a slot now or nothing: a failed creation does not make it wait.
    let mut sim = Sim::new(doc(vec![
        coder("m", json!({ "provision": true })),
        coder("b", json!({ "priority": 2 })),
    ]));
    let on_b = sim
        .lease_with("r0", "coder", json!({ "prefer": "b" }))
        .grant()
        .lease;
    assert_eq!(
        sim.try_lease("t1", "coder").creates(),
        pairs(&[("t1", "m")])
    );
    let outs = sim.input(json!({ "type": "machineFailed", "id": "t1", "message": "quota" }));
    assert_eq!(outs.unavailable(), ["t1"]);
    assert!(outs.waiting().is_empty());
    assert!(sim.queue().is_empty());
    assert!(outs.has_event("provisionPaused"));
    sim.release(on_b).no_grant();
    // With another slot free at once, it takes that one.
    let mut sim = Sim::new(doc(vec![
        coder("m", json!({ "provision": true })),
        coder("b", json!({ "priority": 2 })),
    ]));
    sim.try_lease("t1", "coder");
    let outs = sim.input(json!({ "type": "machineFailed", "id": "t1", "message": "quota" }));
    assert_eq!(outs.grant_pairs(), pairs(&[("t1", "b")]));
    assert!(outs.unavailable().is_empty());
}

#[test]
fn cancel_while_creating_frees_the_slot_and_deletes_the_machine_when_it_arrives() {
    let mut sim = provisioned(1);
    sim.lease("r1", "coder");
    sim.lease("r2", "coder").no_grant();
    let outs = sim.cancel("r1");
    assert_eq!(outs.cancelled(), ["r1"]);
    // The slot is free again: r2 creates its machine.
    assert_eq!(outs.creates(), pairs(&[("r2", "m")]));
    assert_eq!(sim.exec("m").busy, 1);
    let outs =
        sim.input(json!({ "type": "machineCreated", "id": "r1", "hold": { "machine": "vm-1" } }));
    outs.no_grant();
    assert_eq!(outs.deletes(), [(s("m"), json!({ "machine": "vm-1" }))]);
    assert!(outs.has_event("machineDiscarded"));
    assert_eq!(sim.exec("m").busy, 1, "r2's creation still holds its slot");
    // The machine arrives only once.
    let error = sim.refused(json!({ "type": "machineCreated", "id": "r1", "hold": "again" }));
    assert_eq!(error.code(), "UNKNOWN_REQUEST");
}

#[test]
fn a_pinned_request_creates_no_machine() {
    let mut sim = provisioned(1);
    let outs = sim.lease_with("p", "coder", json!({ "pin": "m" }));
    assert!(outs.creates().is_empty());
    assert_eq!(outs.grant().hold, None);
}

// ---- Reload ---------------------------------------------------------------------------------------

fn reload(sim: &mut Sim, executors: Vec<Value>) -> Outs {
    sim.input(json!({ "type": "reload", "document": doc(executors) }))
}

#[test]
fn an_added_executor_takes_leases_at_once() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.granted("r0", "coder");
    sim.lease("r1", "coder").no_grant();
    let outs = reload(&mut sim, vec![coder("a", json!({})), coder("b", json!({}))]);
    assert_eq!(outs.grant_pairs(), pairs(&[("r1", "b")]));
    assert_eq!(
        outs.messages("added"),
        ["b added by a reload; it takes leases now"]
    );
}

#[test]
fn a_removed_executor_drains_and_leaves_after_its_last_lease() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({ "slots": 2 })),
        coder("b", json!({ "priority": 2 })),
    ]));
    let (executor, on_a) = sim.granted("r0", "coder");
    assert_eq!(executor, "a");
    let outs = reload(&mut sim, vec![coder("b", json!({ "priority": 2 }))]);
    assert_eq!(
        outs.messages("removed"),
        ["a removed by a reload; it takes no new lease, and leaves when its running leases end (1 running)"]
    );
    let a = sim.exec("a");
    assert!(a.draining);
    assert_eq!((a.slots, a.busy), (0, 1));
    // a has a free slot but takes no new lease.
    assert_eq!(sim.granted("r1", "coder").0, "b");
    sim.lease("r2", "coder").no_grant();
    assert_eq!(sim.policy.slots("coder").unwrap(), 1);
    let outs = sim.release(on_a);
    outs.no_grant();
    assert_eq!(
        outs.messages("left"),
        ["the last lease on a, which a reload removed, ended; it leaves the roster"]
    );
    assert!(!sim.has_exec("a"));
    assert_eq!(sim.queue(), ["r2"]);
}

#[test]
fn a_removed_executor_without_leases_leaves_at_once_and_its_exclusion_is_dropped() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    sim.report("a", "usageLimit", "limit");
    let outs = reload(&mut sim, vec![coder("b", json!({}))]);
    assert_eq!(
        outs.messages("removed"),
        ["a removed by a reload; it runs no lease, so it leaves now"]
    );
    assert!(!sim.has_exec("a"));
    assert!(outs.persisted().exclusions.is_empty());
}

#[test]
fn exclusions_of_executors_that_remain_stay() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    sim.report("a", "usageLimit", "limit");
    let outs = reload(
        &mut sim,
        vec![coder("a", json!({ "slots": 2 })), coder("c", json!({}))],
    );
    assert!(outs.persists().is_empty());
    assert_eq!(sim.exclusion("a").unwrap().until, Some(T0 + 30 * MIN));
}

#[test]
fn a_resize_down_keeps_running_leases_and_retires_slots_as_they_end() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({ "slots": 3 }))]));
    let leases: Vec<u64> = (1..=3)
        .map(|i| sim.granted(&format!("r{i}"), "coder").1)
        .collect();
    sim.lease("w", "coder").no_grant();
    let outs = reload(&mut sim, vec![coder("a", json!({ "slots": 1 }))]);
    assert_eq!(
        outs.messages("resized"),
        ["a resized by a reload from 3 to 1 slots; running leases continue (3 running)"]
    );
    assert_eq!((sim.exec("a").slots, sim.exec("a").busy), (1, 3));
    let outs = sim.release(leases[0]);
    outs.no_grant();
    assert_eq!(
        outs.messages("retired"),
        ["a lease ended on a, which runs more leases than it has slots; its slot retires (2 running, 1 slots)"]
    );
    let outs = sim.release(leases[1]);
    outs.no_grant();
    assert_eq!(outs.messages("retired").len(), 1);
    let outs = sim.release(leases[2]);
    assert_eq!(outs.grant_pairs(), pairs(&[("w", "a")]));
}

#[test]
fn a_resize_up_grants_waiters_at_once() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.granted("r0", "coder");
    sim.lease("r1", "coder").no_grant();
    let outs = reload(&mut sim, vec![coder("a", json!({ "slots": 2 }))]);
    assert_eq!(outs.grant_pairs(), pairs(&[("r1", "a")]));
}

#[test]
fn priority_and_role_changes_apply() {
    let mut sim = Sim::new(doc(vec![
        ex(
            "a",
            &["coder", "reviewer"],
            json!({ "priority": 1, "slots": 4 }),
        ),
        ex(
            "b",
            &["coder", "reviewer"],
            json!({ "priority": 2, "slots": 4 }),
        ),
    ]));
    assert_eq!(sim.granted("r1", "coder").0, "a");
    reload(
        &mut sim,
        vec![
            ex(
                "a",
                &["coder", "reviewer"],
                json!({ "priority": 3, "slots": 4 }),
            ),
            ex(
                "b",
                &["coder", "reviewer"],
                json!({ "priority": 2, "slots": 4 }),
            ),
        ],
    );
    assert_eq!(sim.granted("r2", "coder").0, "b");
    reload(
        &mut sim,
        vec![
            ex("a", &["reviewer"], json!({ "priority": 0, "slots": 4 })),
            ex(
                "b",
                &["coder", "reviewer"],
                json!({ "priority": 2, "slots": 4 }),
            ),
        ],
    );
    assert_eq!(sim.granted("r3", "reviewer").0, "a");
    assert_eq!(sim.granted("r4", "coder").0, "b");
    // a keeps the coder lease it had.
    assert_eq!(sim.exec("a").busy, 2);
}

#[test]
fn a_bad_reload_changes_nothing_and_lists_its_violations() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.granted("r0", "coder");
    sim.lease("r1", "coder");
    let error = sim.refused(json!({ "type": "reload", "document": { "executors": [
        { "id": "a", "harness": "", "roles": ["chef"] },
        { "id": "b", "harness": "pi", "roles": ["coder"], "slots": 0 }
    ]}}));
    assert_eq!(error.code(), "INVALID_DOCUMENT");
    let json = error.to_json();
    let paths: Vec<&str> = json["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "executors[0].harness",
            "executors[0].roles",
            "executors[0].roles",
            "executors[1].slots"
        ]
    );
    assert!(json["message"]
        .as_str()
        .unwrap()
        .contains("executor 'a' has no harness"));
}

// ---- Reload preflights ----------------------------------------------------------------------------

fn preflighted() -> Sim {
    let mut sim = Sim::with_options(
        doc(vec![coder("a", json!({}))]),
        json!({ "preflightReloads": true }),
    );
    sim.granted("r0", "coder");
    sim.lease("r1", "coder").no_grant();
    sim
}

fn preflight(sim: &mut Sim, executor: &str, ok: bool, error: Option<&str>) -> Outs {
    let mut input = json!({ "type": "preflightResult", "executor": executor, "ok": ok });
    if let Some(error) = error {
        input["error"] = json!(error);
    }
    sim.input(input)
}

#[test]
fn a_reload_that_adds_or_grows_applies_only_when_every_preflight_passes() {
    let mut sim = preflighted();
    let outs = reload(
        &mut sim,
        vec![coder("a", json!({ "slots": 2 })), coder("c", json!({}))],
    );
    assert_eq!(outs.preflights(), ["a", "c"]);
    outs.no_grant();
    let pending = sim.snapshot().pending_reload.expect("a pending reload");
    assert_eq!(pending.awaiting, ["a", "c"]);
    assert_eq!(sim.exec("a").slots, 1);
    assert!(!sim.has_exec("c"));
    sim.after(5 * SEC);
    let outs = preflight(&mut sim, "a", true, None);
    outs.no_grant();
    assert_eq!(sim.snapshot().pending_reload.unwrap().awaiting, ["c"]);
    assert_eq!(sim.exec("a").slots, 1, "not applied yet");
    sim.after(5 * SEC);
    let outs = preflight(&mut sim, "c", true, None);
    assert!(outs.has_event("reloaded"));
    assert_eq!(outs.granted().len(), 1);
    assert_eq!(outs.grant().request, "r1");
    assert_eq!(sim.exec("a").slots, 2);
    assert!(sim.snapshot().pending_reload.is_none());
    let a = sim.exec("a").preflight.unwrap();
    assert_eq!((a.at, a.ok, a.error), (T0 + 5 * SEC, true, None));
    let c = sim.exec("c").preflight.unwrap();
    assert_eq!((c.at, c.ok), (T0 + 10 * SEC, true));
}

#[test]
fn a_failed_preflight_refuses_the_reload_and_says_which_executor_and_why() {
    let mut sim = preflighted();
    reload(
        &mut sim,
        vec![coder("a", json!({ "slots": 2 })), coder("d", json!({}))],
    );
    preflight(&mut sim, "a", true, None);
    sim.after(SEC);
    let outs = preflight(&mut sim, "d", false, Some("no GPU"));
    let event = outs.event("reloadRefused");
    assert_eq!(event.level, Level::Warn);
    assert_eq!(
        event.message,
        "the reload is refused: the preflight of d failed (no GPU); the running roster stays as it was"
    );
    assert_eq!(event.fields["executor"], json!("d"));
    outs.no_grant();
    assert!(!sim.has_exec("d"));
    assert_eq!(sim.exec("a").slots, 1);
    assert!(sim.snapshot().pending_reload.is_none());
    assert_eq!(sim.queue(), ["r1"]);
    // Status keeps a's last preflight.
    let a = sim.exec("a").preflight.unwrap();
    assert_eq!((a.at, a.ok), (T0, true));
    // A later failure is recorded with its error.
    reload(&mut sim, vec![coder("a", json!({ "slots": 3 }))]);
    sim.after(SEC);
    preflight(&mut sim, "a", false, Some("disk full"));
    let a = sim.exec("a").preflight.unwrap();
    assert_eq!(
        (a.at, a.ok, a.error.as_deref()),
        (T0 + 2 * SEC, false, Some("disk full"))
    );
    assert_eq!(sim.exec("a").slots, 1);
}

#[test]
fn a_reload_that_adds_or_grows_nothing_needs_no_preflight() {
    let mut sim = preflighted();
    let outs = reload(&mut sim, vec![coder("a", json!({ "priority": 4 }))]);
    assert!(outs.preflights().is_empty());
    assert!(outs.has_event("reloaded"));
    assert_eq!(sim.exec("a").priority.get("coder"), Some(&4.0));
}

#[test]
fn without_the_option_reloads_apply_at_once() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let outs = reload(&mut sim, vec![coder("a", json!({})), coder("b", json!({}))]);
    assert!(outs.preflights().is_empty());
    assert!(sim.has_exec("b"));
}

// ---- Host kinds ----------------------------------------------------------------------------------

#[test]
fn an_executor_of_a_kind_the_host_cannot_run_is_refused_at_start_and_on_reload() {
    let options = rota_core::json::parse_options(&json!({ "kinds": ["docker"] })).unwrap();
    let error = rota_core::Policy::new(
        &doc(vec![coder("a", json!({ "kind": "exe.dev" }))]),
        options,
    )
    .unwrap_err();
    assert_eq!(error.code(), "INVALID_DOCUMENT");
    assert_eq!(
        error.to_json()["violations"][0]["path"],
        "executors[0].kind"
    );

    let mut sim = Sim::with_options(
        doc(vec![coder("a", json!({ "kind": "docker" }))]),
        json!({ "kinds": ["docker"] }),
    );
    let error = sim.refused(json!({ "type": "reload", "document": doc(vec![
        coder("a", json!({ "kind": "docker" })),
        coder("b", json!({ "kind": "exe.dev" })),
    ]) }));
    assert_eq!(error.code(), "INVALID_DOCUMENT");
    assert!(!sim.has_exec("b"));
}

// ---- occupy -----------------------------------------------------------------------------------------

#[test]
fn occupy_takes_a_slot_even_beyond_capacity_and_says_so() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let outs = sim.input(json!({ "type": "occupy", "id": "o1", "executor": "a", "role": "coder" }));
    let first = outs.grant();
    assert!(first.occupied);
    assert_eq!(
        (first.executor.as_str(), first.role.as_str()),
        ("a", "coder")
    );
    assert_eq!(outs.event("occupied").level, Level::Debug);
    let outs = sim.input(json!({ "type": "occupy", "id": "o2", "executor": "a", "role": "coder" }));
    let second = outs.grant();
    let event = outs.event("occupiedBeyondCapacity");
    assert_eq!(event.level, Level::Warn);
    assert_eq!(
        event.message,
        "work that already runs on a occupies a slot beyond its 1 slots; a takes no new lease until enough of its leases end"
    );
    assert_eq!(sim.exec("a").busy, 2);
    assert!(sim.exec("a").leases.iter().all(|l| l.occupied));
    sim.lease("r1", "coder").no_grant();
    let outs = sim.release(first.lease);
    outs.no_grant();
    assert!(outs.has_event("retired"));
    let outs = sim.release(second.lease);
    assert_eq!(outs.grant_pairs(), pairs(&[("r1", "a")]));
}

#[test]
fn occupy_on_an_executor_the_roster_does_not_have_takes_no_slot() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let outs = sim.input(json!({
        "type": "occupy", "id": "o1", "executor": "gone", "role": "coder", "hold": "vm-3"
    }));
    let grant = outs.grant();
    assert!(grant.occupied);
    assert_eq!(grant.executor, "gone");
    let event = outs.event("occupiedUnknown");
    assert_eq!(event.level, Level::Warn);
    assert!(!sim.has_exec("gone"));
    assert_eq!(sim.exec("a").busy, 0);
    assert_eq!(sim.granted("r1", "coder").0, "a");
    // Its release frees nothing and deletes no machine: the machine is not the
    // pool's (the seed's occupy adopts a machine only on a worker it has).
    let outs = sim.release(grant.lease);
    assert!(outs.deletes().is_empty());
    assert_eq!(sim.exec("a").busy, 1);
}

#[test]
fn occupied_work_on_an_executor_declared_later_frees_no_slot_when_it_ends() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let occupied = sim
        .input(json!({ "type": "occupy", "id": "o1", "executor": "z", "role": "coder" }))
        .grant()
        .lease;
    reload(&mut sim, vec![coder("a", json!({})), coder("z", json!({}))]);
    assert_eq!(sim.exec("z").busy, 0);
    let (executor, _) = sim.granted("r1", "coder");
    let (other, _) = sim.granted("r2", "coder");
    assert_eq!([executor.as_str(), other.as_str()], ["a", "z"]);
    sim.lease("r3", "coder").no_grant();
    // The occupied work ends: it held no slot on z, so nothing is freed.
    sim.release(occupied).no_grant();
    assert_eq!(sim.exec("z").busy, 1);
    assert_eq!(sim.queue(), ["r3"]);
}

#[test]
fn a_request_only_a_draining_executor_could_serve_is_exhausted() {
    let mut sim = Sim::new(doc(vec![
        ex("j", &["judge"], json!({})),
        coder("a", json!({})),
    ]));
    let j1 = sim.granted("j1", "judge").1;
    sim.lease_with("w", "judge", json!({ "pin": "j" }))
        .no_grant();
    let outs = reload(&mut sim, vec![coder("a", json!({}))]);
    assert!(
        outs.exhausted().is_empty(),
        "a request pinned to it still waits"
    );
    assert_eq!(sim.queue(), ["w"]);
    let outs = sim.lease("j2", "judge");
    assert_eq!(
        outs.exhausted(),
        [(s("j2"), s("judge"), vec![s("j was removed by a reload")])]
    );
    // j leaves with its last lease; the pinned request waits for a reload that
    // declares j again.
    let outs = sim.release(j1);
    assert!(outs.has_event("left"));
    assert!(outs.exhausted().is_empty());
    assert_eq!(sim.queue(), ["w"]);
    let outs = reload(
        &mut sim,
        vec![coder("a", json!({})), ex("j", &["judge"], json!({}))],
    );
    assert_eq!(outs.grant_pairs(), pairs(&[("w", "j")]));
}

// ---- Issue 14: everything the scheduler seed does, with its defaults ----------------------

/// The outputs a policy queued when it was built (the startup preflight's).
fn start_outputs(sim: &mut Sim) -> Outs {
    Outs(std::iter::from_fn(|| sim.policy.poll_output()).collect())
}

fn field(event: &common::Event, key: &str) -> Value {
    event.fields.get(key).cloned().unwrap_or(Value::Null)
}

/// A provisioned lease on `m` (one slot), granted with machine `hold`.
fn provisioned_lease(sim: &mut Sim, id: &str, hold: &str) -> u64 {
    assert_eq!(sim.lease(id, "coder").creates(), pairs(&[(id, "m")]));
    sim.input(json!({ "type": "machineCreated", "id": id, "hold": hold }))
        .grant()
        .lease
}

// Item 1: the slot frees after the machine is deleted.

#[test]
fn a_released_machine_holds_its_slot_until_the_host_deletes_it() {
    let mut sim = provisioned(1);
    let lease = provisioned_lease(&mut sim, "r1", "vm-1");
    sim.lease("r2", "coder").no_grant();
    let outs = sim.release(lease);
    assert_eq!(outs.deletes(), [(s("m"), json!("vm-1"))]);
    assert_eq!(outs.deleting_leases(), [lease]);
    assert!(
        outs.creates().is_empty(),
        "no creation while the machine is deleted"
    );
    assert_eq!(sim.exec("m").busy, 1, "the slot is still held");
    assert!(sim.exec("m").leases[0].deleting);
    assert_eq!(sim.policy.available("coder").unwrap(), 0);
    // A second release is harmless; the request id is free again at once.
    assert!(sim.release(lease).0.is_empty());
    let outs = sim.input(json!({ "type": "machineDeleted", "lease": lease, "ok": true }));
    assert_eq!(outs.creates(), pairs(&[("r2", "m")]));
    assert!(!outs.has_event("machineDeleteFailed"));
    // A deletion nothing waits for is refused, and changes nothing.
    let error = sim.refused(json!({ "type": "machineDeleted", "lease": lease, "ok": true }));
    assert_eq!(code(&error), "UNKNOWN_LEASE");
    let error = sim.refused(json!({ "type": "machineDeleted", "lease": 99, "ok": true }));
    assert_eq!(code(&error), "UNKNOWN_LEASE");
}

#[test]
fn a_failed_deletion_frees_the_slot_with_a_warning_naming_the_machine() {
    let mut sim = provisioned(1);
    let lease = provisioned_lease(&mut sim, "r1", "vm-1");
    sim.lease("r2", "coder").no_grant();
    sim.release(lease);
    let outs = sim.input(json!({
        "type": "machineDeleted", "lease": lease, "ok": false, "error": "provider timeout"
    }));
    let event = outs.event("machineDeleteFailed");
    assert_eq!(event.level, Level::Warn);
    assert_eq!(field(&event, "hold"), json!("vm-1"));
    assert_eq!(field(&event, "executor"), json!("m"));
    assert_eq!(field(&event, "error"), json!("provider timeout"));
    assert!(
        event.message.contains("left for a sweep"),
        "{}",
        event.message
    );
    assert_eq!(outs.creates(), pairs(&[("r2", "m")]));
}

#[test]
fn a_pending_deletion_survives_export_and_import() {
    let mut sim = provisioned(1);
    let lease = provisioned_lease(&mut sim, "r1", "vm-1");
    sim.lease("r2", "coder").no_grant();
    sim.release(lease);
    let state = sim.policy.export_state();
    assert_eq!(state["leases"][lease.to_string()]["deleting"], json!(true));
    sim.policy = rota_core::Policy::import_state(&state).expect("the export imports");
    assert_eq!(sim.exec("m").busy, 1);
    // The request id r1 is free (a new request may take it) while the slot is held.
    sim.lease("r1", "coder").no_grant();
    let outs = sim.input(json!({ "type": "machineDeleted", "lease": lease, "ok": true }));
    assert_eq!(outs.creates(), pairs(&[("r2", "m")]));
}

#[test]
fn a_removed_worker_leaves_only_once_its_machine_is_deleted() {
    let mut sim = provisioned(1);
    let lease = provisioned_lease(&mut sim, "r1", "vm-1");
    sim.input(json!({ "type": "reload", "document": doc(vec![]) }));
    let outs = sim.release(lease);
    assert!(!outs.has_event("left"));
    assert!(sim.has_exec("m"));
    let outs = sim.input(json!({ "type": "machineDeleted", "lease": lease, "ok": true }));
    assert!(outs.has_event("left"));
    assert!(!sim.has_exec("m"));
}

// Items 2, 3 and 11: the startup preflight, preflight by default, the first failure.

fn two_workers() -> Value {
    json!({ "workers": [
        { "name": "a", "kind": "docker", "maxConcurrentAttempts": 1 },
        { "name": "b", "kind": "docker", "maxConcurrentAttempts": 1 }
    ] })
}

#[test]
fn every_executor_is_preflighted_before_the_roster_serves() {
    let mut sim = Sim::with_options(two_workers(), json!({ "preflight": true }));
    let outs = start_outputs(&mut sim);
    assert_eq!(outs.preflights(), ["a", "b"]);
    assert!(outs.has_event("preflighting"));
    // Requests wait (even one nothing could serve, and a tryLease gets nothing).
    sim.lease("r1", "coder").no_grant();
    assert_eq!(sim.try_lease("t", "coder").unavailable(), ["t"]);
    sim.input(json!({ "type": "preflightResult", "executor": "a", "ok": true }))
        .no_grant();
    let outs = sim.input(json!({ "type": "preflightResult", "executor": "b", "ok": true }));
    assert!(outs.has_event("started"));
    assert_eq!(outs.grant().executor, "a");
    assert!(sim.exec("b").preflight.unwrap().ok);
}

#[test]
fn a_failed_startup_preflight_stops_the_start_and_cuts_the_others_short() {
    let mut sim = Sim::with_options(two_workers(), json!({ "preflight": true }));
    start_outputs(&mut sim);
    sim.lease("r1", "coder").no_grant();
    let outs = sim.input(json!({
        "type": "preflightResult", "executor": "b", "ok": false, "error": "no docker daemon"
    }));
    assert_eq!(outs.start_failed(), [(s("b"), s("no docker daemon"))]);
    assert_eq!(outs.event("startFailed").level, Level::Warn);
    // The later answer is ignored, not recorded (the seed interrupts the others).
    let outs = sim.input(json!({ "type": "preflightResult", "executor": "a", "ok": true }));
    assert!(outs.has_event("preflightIgnored"));
    assert!(sim.exec("a").preflight.is_none());
    outs.no_grant();
    assert_eq!(sim.queue(), ["r1"]);
}

#[test]
fn reloads_are_preflighted_whenever_the_host_can_preflight_and_explicit_options_win() {
    let parse = |v: Value| rota_core::json::parse_options(&v).unwrap();
    assert!(parse(json!({ "preflight": true })).preflight_reloads);
    assert!(!parse(json!({ "preflight": true, "preflightReloads": false })).preflight_reloads);
    assert!(parse(json!({ "preflightReloads": true })).preflight_reloads);
    assert!(!parse(json!({})).preflight_reloads);
    let mut sim = Sim::with_options(
        doc(vec![coder("a", json!({}))]),
        json!({ "preflight": true }),
    );
    start_outputs(&mut sim);
    sim.input(json!({ "type": "preflightResult", "executor": "a", "ok": true }));
    let outs = sim.input(json!({
        "type": "reload",
        "document": doc(vec![coder("a", json!({})), coder("n", json!({}))])
    }));
    assert_eq!(outs.preflights(), ["n"]);
}

#[test]
fn a_reload_preflight_failure_ignores_the_later_answers() {
    let mut sim = Sim::with_options(
        doc(vec![coder("a", json!({}))]),
        json!({ "preflightReloads": true }),
    );
    let outs = sim.input(json!({
        "type": "reload",
        "document": doc(vec![coder("a", json!({})), coder("n1", json!({})), coder("n2", json!({}))])
    }));
    assert_eq!(outs.preflights(), ["n1", "n2"]);
    let outs = sim
        .input(json!({ "type": "preflightResult", "executor": "n1", "ok": false, "error": "x" }));
    assert!(outs.has_event("reloadRefused"));
    let outs = sim.input(json!({ "type": "preflightResult", "executor": "n2", "ok": true }));
    assert!(outs.has_event("preflightIgnored"));
    assert!(!outs.has_event("reloaded"));
    assert!(!sim.has_exec("n2"));
}

// Items 4, 5 and 6: the scheduler's declaration, its choice and its waiting.

#[test]
fn the_schedulers_workers_take_every_role_with_either_spelling_of_the_count() {
    let mut sim = Sim::new(json!({ "workers": [
        { "name": "a", "kind": "docker", "maxConcurrentAttempts": 2 },
        { "name": "b", "kind": "docker", "max_concurrent_attempts": 3 }
    ] }));
    assert_eq!(sim.exec("a").slots, 2);
    assert_eq!(sim.exec("b").slots, 3);
    assert_eq!(sim.exec("b").roles, rota_core::document::DEFAULT_ROLES);
    // The first declared free worker: a, a, b, b (the seed's `workerFor`).
    let takers: Vec<String> = ["planner", "coder", "judge", "verifier"]
        .iter()
        .enumerate()
        .map(|(i, role)| sim.granted(&format!("r{i}"), role).0)
        .collect();
    assert_eq!(takers, ["a", "a", "b", "b"]);
    // A map keyed by name reads the same.
    let sim = Sim::new(json!({ "workers": {
        "a": { "kind": "docker", "max_concurrent_attempts": 3 }
    } }));
    assert_eq!(sim.exec("a").slots, 3);
}

#[test]
fn the_choice_and_the_waiting_are_options_per_document_or_in_options() {
    let roster = doc(vec![coder("a", json!({})), coder("b", json!({}))]);
    let takers = |sim: &mut Sim| -> Vec<String> {
        (0..2)
            .map(|i| {
                let (executor, lease) = sim.granted(&format!("c{i}"), "coder");
                sim.release(lease);
                executor
            })
            .collect()
    };
    assert_eq!(takers(&mut Sim::new(roster.clone())), ["a", "b"]);
    let mut declared = Sim::with_options(roster.clone(), json!({ "choice": "declared" }));
    assert_eq!(takers(&mut declared), ["a", "a"]);
    let mut document = roster.clone();
    document["choice"] = json!("declared");
    assert_eq!(takers(&mut Sim::new(document)), ["a", "a"]);
    let mut workers =
        json!({ "workers": [{ "name": "a" }, { "name": "b" }], "choice": "roundRobin" });
    assert_eq!(takers(&mut Sim::new(workers.clone())), ["a", "b"]);
    // The roster form exhausts; `unservable: "wait"` keeps the request waiting.
    let outs = Sim::new(doc(vec![])).lease("r", "coder");
    assert_eq!(outs.exhausted().len(), 1);
    let mut waiting = Sim::with_options(doc(vec![]), json!({ "unservable": "wait" }));
    assert!(waiting.lease("r", "coder").exhausted().is_empty());
    assert_eq!(waiting.queue(), ["r"]);
    workers["unservable"] = json!("exhaust");
    workers["workers"] = json!([]);
    assert_eq!(Sim::new(workers).lease("r", "coder").exhausted().len(), 1);
}

#[test]
fn runs_nothing_can_serve_keep_waiting_until_a_reload_or_a_cancel() {
    let mut sim = Sim::new(json!({ "workers": [{ "name": "a", "kind": "docker" }] }));
    let (_, lease) = sim.granted("r0", "coder");
    sim.lease("r1", "coder").no_grant();
    let outs = sim.input(json!({ "type": "reload", "document": { "workers": [] } }));
    assert!(outs.exhausted().is_empty(), "the seed keeps it waiting");
    sim.release(lease);
    assert_eq!(sim.queue(), ["r1"]);
    assert!(sim.lease("r2", "coder").exhausted().is_empty());
    let outs = sim.input(json!({ "type": "reload", "document": { "workers": [{ "name": "b" }] } }));
    assert_eq!(outs.grant_pairs(), [(s("r1"), s("b"))]);
    assert_eq!(sim.cancel("r2").cancelled(), ["r2"]);
}

#[test]
fn a_workers_document_names_its_violations_by_worker() {
    let violations = rota_core::validate(
        &json!({ "workers": { "a": { "name": "b" } }, "choice": "random" }),
        None,
    );
    let paths: Vec<&str> = violations.iter().map(|v| v.path.as_str()).collect();
    assert_eq!(paths, ["choice", "workers.a.name"]);
    let violations = rota_core::validate(
        &json!({ "workers": [{ "name": "a", "max_concurrent_attempts": 0 }] }),
        None,
    );
    assert_eq!(violations[0].path, "workers[0].max_concurrent_attempts");
}

// Items 7 and 8: the pause record; a failure after a cancel.

#[test]
fn the_pause_keeps_the_seeds_record_and_a_check_failure_is_a_failed_preflight() {
    let mut sim = provisioned(1);
    sim.lease("r1", "coder");
    let outs = sim.input(json!({
        "type": "machineFailed", "id": "r1", "message": "no capacity in fra", "reason": "capacity"
    }));
    let event = outs.event("provisionPaused");
    assert_eq!(field(&event, "retryAt"), json!(iso(T0 + 30 * SEC)));
    assert_eq!(field(&event, "reason"), json!("capacity"));
    let pause = sim.exec("m").pause.unwrap();
    assert_eq!(
        (
            pause.reason.as_str(),
            pause.failed_at.as_str(),
            pause.retry_at.as_str()
        ),
        ("capacity", iso(T0).as_str(), iso(T0 + 30 * SEC).as_str())
    );
    assert!(sim.exec("m").preflight.is_none());
    sim.run_to(T0 + 30 * SEC);
    sim.input(json!({
        "type": "machineFailed", "id": "r1", "message": "the image lacks git", "reason": "check"
    }));
    let preflight = sim.exec("m").preflight.unwrap();
    assert!(!preflight.ok);
    assert_eq!(preflight.error.as_deref(), Some("the image lacks git"));
    assert_eq!(sim.exec("m").pause.unwrap().reason, "check");
    // A grant's check is a passed preflight; without a reason the pause says so.
    sim.run_to(T0 + 90 * SEC);
    sim.input(json!({
        "type": "machineCreated", "id": "r1", "hold": "vm-1", "checked": { "brains": ["pi/x"] }
    }))
    .grant();
    assert!(sim.exec("m").preflight.unwrap().ok);
}

#[test]
fn a_creation_that_fails_after_its_request_was_cancelled_does_not_pause() {
    let mut sim = provisioned(1);
    sim.lease("r1", "coder");
    sim.cancel("r1");
    let outs = sim.input(json!({ "type": "machineFailed", "id": "r1", "message": "quota" }));
    assert!(outs.has_event("machineFailedIgnored"));
    assert!(!outs.has_event("provisionPaused"));
    assert!(sim.exec("m").pause.is_none());
    assert_eq!(sim.lease("r2", "coder").creates(), pairs(&[("r2", "m")]));
}

// Item 9: events.

#[test]
fn releases_retirements_and_reloads_say_what_happened_with_fields() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({ "slots": 3 }))]));
    let leases: Vec<u64> = (0..3)
        .map(|i| sim.granted(&format!("r{i}"), "coder").1)
        .collect();
    let released = sim.release(leases[0]).event("released");
    assert_eq!(released.level, Level::Debug);
    assert_eq!(field(&released, "executor"), json!("a"));
    let (_, again) = sim.granted("r3", "coder");
    let outs = sim.input(
        json!({ "type": "reload", "document": doc(vec![coder("b", json!({ "slots": 2 }))]) }),
    );
    let added = outs.event("added");
    assert_eq!(
        (field(&added, "executor"), field(&added, "slots")),
        (json!("b"), json!(2))
    );
    let removed = outs.event("removed");
    assert_eq!(
        (field(&removed, "executor"), field(&removed, "running")),
        (json!("a"), json!(3))
    );
    // The seed: Retired, Retired, Dropped.
    let names: Vec<String> = [leases[1], leases[2], again]
        .iter()
        .map(|&l| {
            let outs = sim.release(l);
            let e = outs
                .events()
                .into_iter()
                .find(|e| e.name != "granted")
                .unwrap();
            e.name
        })
        .collect();
    assert_eq!(names, ["retired", "retired", "left"]);
    let outs = sim.input(
        json!({ "type": "reload", "document": doc(vec![coder("b", json!({ "slots": 4 }))]) }),
    );
    let resized = outs.event("resized");
    assert_eq!(
        (
            field(&resized, "slotsBefore"),
            field(&resized, "slotsAfter"),
            field(&resized, "running")
        ),
        (json!(2), json!(4), json!(0))
    );
}

#[test]
fn the_waiting_event_has_the_queue_length_and_the_position_and_a_pin_elsewhere_warns() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.granted("r0", "coder");
    let first = sim
        .lease_with("r1", "coder", json!({ "rank": 4 }))
        .event("waiting");
    // A request's lifecycle events are at debug (issue 16); a pin elsewhere warns.
    assert_eq!(first.level, Level::Debug);
    assert_eq!(
        (
            field(&first, "queued"),
            field(&first, "positionSource"),
            field(&first, "position")
        ),
        (json!(1), json!("rank"), json!(4))
    );
    let second = sim.lease("r2", "coder").event("waiting");
    assert_eq!(
        (field(&second, "queued"), field(&second, "positionSource")),
        (json!(2), json!("none"))
    );
    assert_eq!(field(&second, "position"), Value::Null);
    let pinned = sim
        .lease_with("r3", "coder", json!({ "pin": "gone" }))
        .event("waiting");
    assert_eq!(pinned.level, Level::Warn);
}

// Item 10: counts and capacity.

#[test]
fn requests_pinned_to_different_executors_have_nobody_ahead() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({})),
        coder("b", json!({})),
        coder("c", json!({})),
    ]));
    for id in ["x", "y", "z"] {
        sim.granted(id, "coder");
    }
    let aheads: Vec<u32> = ["a", "b", "c"]
        .iter()
        .map(|pin| {
            sim.lease_with(&format!("p-{pin}"), "coder", json!({ "pin": pin }))
                .waiting()[0]
                .3
        })
        .collect();
    assert_eq!(aheads, [0, 0, 0]);
    // An unpinned request competes with all three; a second pin to a with the first.
    assert_eq!(sim.lease("u", "coder").waiting()[0].3, 3);
    assert_eq!(
        sim.lease_with("p2-a", "coder", json!({ "pin": "a" }))
            .waiting()[0]
            .3,
        2
    );
    let view: Vec<u32> = sim.snapshot().queue.iter().map(|q| q.ahead).collect();
    assert_eq!(view, [0, 0, 0, 3, 2]);
}

#[test]
fn occupy_on_a_removed_worker_reports_its_zero_slots() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({ "slots": 2 })),
        coder("b", json!({})),
    ]));
    sim.granted("r0", "coder");
    sim.input(json!({ "type": "reload", "document": doc(vec![coder("b", json!({}))]) }));
    assert_eq!(sim.exec("a").slots, 0);
    let outs = sim.input(json!({ "type": "occupy", "id": "o", "executor": "a", "role": "coder" }));
    let event = outs.event("occupiedBeyondCapacity");
    assert_eq!(
        (field(&event, "running"), field(&event, "slots")),
        (json!(2), json!(0))
    );
}

#[test]
fn the_pause_doubles_at_most_ten_times() {
    let mut sim = Sim::with_options(
        doc(vec![coder("m", json!({ "provision": true }))]),
        json!({ "provisionMaxPauseMs": 100 * HOUR }),
    );
    sim.lease("r1", "coder");
    let mut delays = Vec::new();
    for _ in 0..13 {
        sim.input(json!({ "type": "machineFailed", "id": "r1", "message": "quota" }));
        let until = sim.exec("m").pause.unwrap().until;
        delays.push((until - sim.now) / SEC);
        sim.run_to(until);
    }
    assert_eq!(&delays[9..], [30 << 9, 30 << 10, 30 << 10, 30 << 10]);
}

#[test]
fn a_host_that_names_its_kinds_refuses_an_executor_without_one() {
    let violations = rota_core::validate(
        &json!({ "workers": [{ "name": "a" }, { "name": "b", "kind": "docker" }] }),
        Some(&[s("docker")]),
    );
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].path, "workers[0].kind");
    assert_eq!(
        violations[0].message,
        "worker 'a' has no kind, and this host runs only: docker"
    );
}

#[test]
fn merge_and_narrow_read_the_schedulers_workers_by_name() {
    let user = json!({ "workers": { "a": { "kind": "docker" }, "b": { "kind": "docker" } } });
    let repo = json!({ "workers": [{ "name": "b", "disabled": true }, { "name": "c" }] });
    let merged = rota_core::merge(&user, &repo).expect("merged");
    assert_eq!(
        merged,
        json!({ "workers": [{ "name": "a", "kind": "docker" }, { "name": "c" }] })
    );
    let narrowed = rota_core::narrow(&merged, &[s("c")]).expect("narrowed");
    assert_eq!(narrowed.document, json!({ "workers": [{ "name": "c" }] }));
    assert!(narrowed.unknown.is_empty());
    let typo = rota_core::narrow(&merged, &[s("c"), s("zz")]).expect("narrowed");
    assert_eq!(typo.unknown, vec![s("zz")]);
    let warning = typo.warning().expect("a warning names the unknown id");
    assert_eq!(warning.path, "workers");
    assert!(warning.message.contains("'zz'"), "{}", warning.message);
    let mixed = rota_core::merge(&doc(vec![coder("a", json!({}))]), &repo).expect_err("mixed");
    assert_eq!(mixed[0].path, "repo.workers");
}
