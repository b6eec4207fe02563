//! Beyond the seeds (DESIGN.md): one fair queue, deadlines, Retry-After, exclusions
//! that never get shorter, explain, plan, clamped time, idempotent release, errors
//! that change nothing, export/import mid-run, and tryLease.

mod common;

use common::*;
use rota_core::json::{step, step_str};
use rota_core::{ExclusionKind, ExplainRequest, Level, Policy};
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

// ---- One fair queue ------------------------------------------------------------------------------

#[test]
fn waiters_of_every_caller_are_served_first_come_first_served() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    let mut running = vec![sim.granted("r0", "coder").1, sim.granted("r1", "coder").1];
    let arrivals = [
        ("alice-1", "alice"),
        ("bob-1", "bob"),
        ("alice-2", "alice"),
        ("carol-1", "carol"),
        ("bob-2", "bob"),
        ("alice-3", "alice"),
    ];
    for (id, caller) in arrivals {
        sim.lease_with(id, "coder", json!({ "label": caller }))
            .no_grant();
    }
    // Same `now` for all: arrival order decides.
    let mut served = Vec::new();
    while let Some(lease) = running.pop() {
        for grant in sim.release(lease).granted() {
            served.push(grant.request);
            running.insert(0, grant.lease);
        }
    }
    let expected: Vec<&str> = arrivals.iter().map(|(id, _)| *id).collect();
    assert_eq!(served, expected);
}

#[test]
fn equal_ranks_and_event_times_are_served_in_arrival_order() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let mut lease = sim.granted("r0", "coder").1;
    for i in 1..=5 {
        sim.after(SEC);
        sim.lease_with(
            &format!("w{i}"),
            "coder",
            json!({ "rank": 2, "eventTime": T0 - HOUR }),
        );
    }
    let mut served = Vec::new();
    for _ in 1..=5 {
        let grant = sim.release(lease).grant();
        served.push(grant.request);
        lease = grant.lease;
    }
    assert_eq!(served, ["w1", "w2", "w3", "w4", "w5"]);
}

// ---- Deadlines ---------------------------------------------------------------------------------------

#[test]
fn a_request_times_out_at_its_deadline() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let lease = sim.granted("r0", "coder").1;
    sim.lease_with(
        "r1",
        "coder",
        json!({ "deadline": T0 + 5 * SEC, "label": "story-2" }),
    )
    .no_grant();
    assert_eq!(sim.snapshot().queue[0].deadline, Some(T0 + 5 * SEC));
    assert_eq!(sim.wake_at(), Some(T0 + 5 * SEC));
    assert!(sim.run_to(T0 + 5 * SEC - 1).timed_out().is_empty());
    let outs = sim.run_to(T0 + 5 * SEC);
    assert_eq!(outs.timed_out(), ["r1"]);
    let event = outs.event("timedOut");
    assert_eq!(event.level, Level::Warn);
    assert_eq!(
        event.message,
        "no executor took coder for story-2 before its deadline: a busy"
    );
    // Why, per executor, and who asked, as fields (issue 16, issue 13).
    assert_eq!(event.fields["reasons"], json!(["a busy"]));
    assert_eq!(event.fields["label"], json!("story-2"));
    assert!(sim.queue().is_empty());
    assert_eq!(sim.wake_at(), None);
    // It ended once: a freed slot does not go to it.
    sim.release(lease).no_grant();
}

#[test]
fn a_request_granted_before_its_deadline_never_times_out() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let lease = sim.granted("r0", "coder").1;
    sim.lease_with("r1", "coder", json!({ "deadline": T0 + 5 * SEC }));
    sim.after(SEC);
    assert_eq!(sim.release(lease).grant().request, "r1");
    assert_eq!(sim.wake_at(), None);
    assert!(sim.run_to(T0 + MIN).timed_out().is_empty());
}

#[test]
fn a_deadline_already_past_times_out_at_once_when_nothing_is_free() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.granted("r0", "coder");
    let outs = sim.lease_with("r1", "coder", json!({ "deadline": T0 - 1 }));
    assert_eq!(outs.timed_out(), ["r1"]);
    assert!(outs.waiting().is_empty());
    // ... and is granted when a slot is free.
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let outs = sim.lease_with("r1", "coder", json!({ "deadline": T0 - 1 }));
    assert_eq!(outs.grant().request, "r1");
}

#[test]
fn a_slot_that_came_back_before_the_deadline_is_granted_even_on_a_late_tick() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.report("a", "usageLimit", "limit"); // until T0 + 30 min
    sim.lease_with("r1", "coder", json!({ "deadline": T0 + 31 * MIN }));
    // The host's timer fires late, after both instants: the exclusion ended first.
    sim.at(T0 + 40 * MIN);
    let outs = sim.tick();
    assert_eq!(outs.grant_pairs(), pairs(&[("r1", "a")]));
    assert!(outs.timed_out().is_empty());
}

#[test]
fn a_deadline_that_passes_while_the_machine_is_created_frees_the_slot() {
    let mut sim = Sim::new(doc(vec![coder("m", json!({ "provision": true }))]));
    sim.lease_with("r1", "coder", json!({ "deadline": T0 + MIN }));
    sim.lease("r2", "coder");
    let outs = sim.run_to(T0 + MIN);
    assert_eq!(outs.timed_out(), ["r1"]);
    assert_eq!(outs.creates(), pairs(&[("r2", "m")]));
    let outs = sim.input(json!({ "type": "machineCreated", "id": "r1", "hold": "vm-1" }));
    outs.no_grant();
    assert_eq!(outs.deletes(), [(s("m"), json!("vm-1"))]);
}

// ---- Retry-After ----------------------------------------------------------------------------------------

#[test]
fn retry_after_on_a_rate_limit_sets_the_end_of_the_exclusion() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let outs = sim.report_with(
        "a",
        json!({ "kind": "rateLimit", "message": "429", "retryAfterMs": 2 * MIN }),
    );
    let x = sim.exclusion("a").expect("a Retry-After excludes at once");
    assert_eq!(
        (x.kind, x.until),
        (ExclusionKind::Until, Some(T0 + 2 * MIN))
    );
    assert_eq!(x.reason, "rate limited; retry after 2m");
    assert_eq!(outs.persists().len(), 1);
    let outs = sim.run_to(T0 + 2 * MIN);
    assert!(outs.has_event("back"));
}

#[test]
fn retry_after_on_a_usage_limit_sets_the_end_of_the_exclusion() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.report_with(
        "a",
        json!({ "kind": "usageLimit", "message": "limit", "retryAfterMs": 45 * MIN }),
    );
    let x = sim.exclusion("a").unwrap();
    assert_eq!(
        (x.kind, x.until),
        (ExclusionKind::Until, Some(T0 + 45 * MIN))
    );
}

// ---- Exclusions never get shorter ------------------------------------------------------------------------

fn until_of(sim: &Sim, id: &str) -> (ExclusionKind, Option<u64>) {
    let x = sim.exclusion(id).expect("excluded");
    (x.kind, x.until)
}

fn usage(sim: &mut Sim, id: &str, reset_at: u64) -> Outs {
    sim.report_with(
        id,
        json!({ "kind": "usageLimit", "message": "limit", "resetAt": reset_at }),
    )
}

#[test]
fn between_timed_exclusions_the_later_end_wins() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    usage(&mut sim, "a", T0 + 2 * HOUR);
    let outs = usage(&mut sim, "a", T0 + HOUR);
    assert_eq!(
        until_of(&sim, "a"),
        (ExclusionKind::Until, Some(T0 + 2 * HOUR))
    );
    assert!(outs.persists().is_empty());
    assert!(outs.has_event("exclusionKept"));
    // A report that would end sooner (the outage cooldown) does not shorten it either.
    sim.report("a", "outage", "down");
    assert_eq!(
        until_of(&sim, "a"),
        (ExclusionKind::Until, Some(T0 + 2 * HOUR))
    );
    let outs = usage(&mut sim, "a", T0 + 3 * HOUR);
    assert_eq!(
        until_of(&sim, "a"),
        (ExclusionKind::Until, Some(T0 + 3 * HOUR))
    );
    assert_eq!(outs.persisted().exclusions[0].until, Some(T0 + 3 * HOUR));
    assert!(sim.run_to(T0 + 2 * HOUR).messages("back").is_empty());
    assert_eq!(
        sim.run_to(T0 + 3 * HOUR).messages("back"),
        ["a back in the round"]
    );
}

#[test]
fn a_run_exclusion_stays_for_the_run() {
    let mut sim = Sim::new(doc(vec![coder(
        "a",
        json!({ "health": "http://h:1/health" }),
    )]));
    sim.report("a", "authentication", "no key");
    usage(&mut sim, "a", T0 + HOUR);
    sim.report("a", "outage", "down");
    sim.input(json!({ "type": "exclude", "executor": "a", "reason": "ops", "until": T0 + MIN }));
    assert_eq!(until_of(&sim, "a"), (ExclusionKind::Run, None));
    sim.run_to(T0 + 2 * HOUR);
    assert_eq!(until_of(&sim, "a"), (ExclusionKind::Run, None));
    assert!(sim
        .log
        .iter()
        .all(|o| !matches!(o, rota_core::Output::Probe { .. })));
}

#[test]
fn a_manual_pause_ends_only_by_resume_or_its_own_end() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.input(json!({ "type": "exclude", "executor": "a", "reason": "ops" }));
    usage(&mut sim, "a", T0 + 30 * MIN);
    assert_eq!(until_of(&sim, "a"), (ExclusionKind::Manual, None));
    sim.run_to(T0 + HOUR);
    assert_eq!(until_of(&sim, "a"), (ExclusionKind::Manual, None));
    let outs = sim.input(json!({ "type": "resume", "executor": "a" }));
    assert!(outs.has_event("resumed"));
    assert!(sim.exclusion("a").is_none());
}

#[test]
fn a_stronger_exclusion_replaces_a_weaker_one() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({})),
        coder("b", json!({ "health": "http://h:1/health" })),
    ]));
    usage(&mut sim, "a", T0 + 30 * MIN);
    let outs = sim.report("a", "authentication", "signed out");
    assert_eq!(until_of(&sim, "a"), (ExclusionKind::Run, None));
    assert!(
        outs.persisted().exclusions.is_empty(),
        "the timed entry leaves the file: run is never written"
    );
    assert!(sim.run_to(T0 + 30 * MIN).messages("back").is_empty());
    assert_eq!(until_of(&sim, "a"), (ExclusionKind::Run, None));
    // A manual pause over a timed exclusion and over a health one.
    usage(&mut sim, "b", T0 + HOUR);
    sim.input(json!({ "type": "exclude", "executor": "b", "reason": "ops" }));
    assert_eq!(until_of(&sim, "b"), (ExclusionKind::Manual, None));
    assert!(sim.run_to(T0 + 2 * HOUR).messages("back").is_empty());
    sim.input(json!({ "type": "resume", "executor": "b" }));
    sim.report("b", "outage", "down");
    sim.input(json!({ "type": "exclude", "executor": "b", "reason": "ops" }));
    assert_eq!(until_of(&sim, "b"), (ExclusionKind::Manual, None));
    // The answer to the probe that was in flight does not end the pause.
    sim.input(json!({ "type": "probeResult", "executor": "b", "up": true }));
    assert_eq!(until_of(&sim, "b"), (ExclusionKind::Manual, None));
}

#[test]
fn a_timed_exclusion_under_a_manual_one_takes_over_after_the_manual_end() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.input(
        json!({ "type": "exclude", "executor": "a", "reason": "ops", "until": T0 + 10 * MIN }),
    );
    usage(&mut sim, "a", T0 + 30 * MIN);
    let x = sim.exclusion("a").unwrap();
    assert_eq!(
        (x.kind, x.until),
        (ExclusionKind::Manual, Some(T0 + 10 * MIN))
    );
    assert_eq!(x.then_until, Some(T0 + 30 * MIN));
    let outs = sim.run_to(T0 + 10 * MIN);
    assert!(outs.messages("back").is_empty());
    assert_eq!(
        outs.messages("exclusionChanged"),
        [format!(
            "a's manual exclusion ended; it stays out of the round until {}: usage limit (limit)",
            iso(T0 + 30 * MIN)
        )]
    );
    assert_eq!(
        until_of(&sim, "a"),
        (ExclusionKind::Until, Some(T0 + 30 * MIN))
    );
    let (_, state) = outs.persists()[0].clone();
    assert_eq!(state.exclusions[0].kind, ExclusionKind::Until);
    assert_eq!(
        sim.run_to(T0 + 30 * MIN).messages("back"),
        ["a back in the round"]
    );
}

#[test]
fn a_timed_exclusion_that_ends_before_the_manual_end_is_gone_at_the_manual_end() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.input(
        json!({ "type": "exclude", "executor": "a", "reason": "ops", "until": T0 + 40 * MIN }),
    );
    usage(&mut sim, "a", T0 + 30 * MIN);
    assert!(sim.run_to(T0 + 30 * MIN).messages("back").is_empty());
    assert_eq!(
        until_of(&sim, "a"),
        (ExclusionKind::Manual, Some(T0 + 40 * MIN))
    );
    assert_eq!(
        sim.run_to(T0 + 40 * MIN).messages("back"),
        ["a back in the round"]
    );
}

#[test]
fn a_health_check_that_answers_does_not_end_a_usage_limit_it_shadowed() {
    let url = "http://gpu:8080/health";
    let mut sim = Sim::new(doc(vec![coder("a", json!({ "health": url }))]));
    usage(&mut sim, "a", T0 + 30 * MIN);
    sim.after(MIN);
    let outs = sim.report("a", "outage", "down");
    assert_eq!(sim.exclusion("a").unwrap().kind, ExclusionKind::Health);
    assert_eq!(outs.probes(), pairs(&[("a", url)]));
    sim.after(MIN);
    let outs = sim.input(json!({ "type": "probeResult", "executor": "a", "up": true }));
    assert!(outs.messages("back").is_empty());
    assert_eq!(
        until_of(&sim, "a"),
        (ExclusionKind::Until, Some(T0 + 30 * MIN))
    );
}

// ---- explain -------------------------------------------------------------------------------------------

fn explain(sim: &Sim, request: Value) -> rota_core::Explanation {
    let request: ExplainRequest = serde_json::from_value(request).unwrap();
    let before = sim.policy.export_state();
    let explanation = sim.policy.explain(&request).unwrap();
    assert_eq!(
        sim.policy.export_state(),
        before,
        "explain changed the state"
    );
    explanation
}

fn reasons(explanation: &rota_core::Explanation, id: &str) -> Vec<String> {
    explanation
        .executors
        .iter()
        .find(|x| x.id == id)
        .unwrap_or_else(|| panic!("no {id} in {explanation:#?}"))
        .reasons
        .clone()
}

#[test]
fn explain_says_why_each_executor_cannot_take_a_request() {
    let mut sim = Sim::new(doc(vec![
        ex("l", &["reviewer"], json!({})),
        coder("b", json!({})),
        ex("c", &["coder", "reviewer"], json!({ "slots": 2 })),
        coder("d", json!({})),
        coder("e", json!({})),
        coder("m", json!({ "provision": true })),
        coder("f", json!({ "priority": 5 })),
    ]));
    sim.lease_with("rb", "coder", json!({ "prefer": "b" }));
    sim.lease_with("rc", "coder", json!({ "prefer": "c" }));
    sim.report("d", "usageLimit", "limit");
    let outs = sim.lease_with("rm", "coder", json!({ "avoid": ["b", "c", "d", "e", "f"] }));
    assert_eq!(outs.creates(), pairs(&[("rm", "m")]));
    sim.input(json!({ "type": "machineFailed", "id": "rm", "message": "quota" }));

    let e = explain(&sim, json!({ "role": "coder", "avoid": ["e"] }));
    assert_eq!(e.role, "coder");
    assert!(e.can_ever_serve);
    assert_eq!(e.pick.as_deref(), Some("f"));
    assert_eq!(reasons(&e, "l"), ["lacks the role coder"]);
    assert_eq!(reasons(&e, "b"), ["busy (1 of 1 slots)"]);
    assert_eq!(reasons(&e, "c"), ["role cap reached (coder 1 of 1)"]);
    assert_eq!(
        reasons(&e, "d"),
        [format!(
            "out of the round until {}: usage limit (limit)",
            iso(T0 + 30 * MIN)
        )]
    );
    assert_eq!(reasons(&e, "e"), ["avoided by the request"]);
    assert_eq!(
        reasons(&e, "m"),
        [format!(
            "paused creating machines until {} after 1 failure(s)",
            iso(T0 + 30 * SEC)
        )]
    );
    assert_eq!(reasons(&e, "f"), Vec::<String>::new());
    let f = e.executors.iter().find(|x| x.id == "f").unwrap();
    assert!(f.ok);
    assert_eq!(f.priority, Some(5.0));
    assert_eq!(
        e.executors.iter().find(|x| x.id == "l").unwrap().priority,
        None
    );
    assert_eq!(e.executors.iter().filter(|x| x.ok).count(), 1);

    // A waiting request is explained with its own avoid list.
    let e = explain(&sim, json!({ "role": "ignored", "request": "rm" }));
    assert_eq!(e.role, "coder");
    assert_eq!(e.pick, None);
    assert_eq!(reasons(&e, "f"), ["avoided by the request"]);
    assert!(reasons(&e, "m")[0].starts_with("paused creating machines"));
}

#[test]
fn explain_a_pinned_request() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    sim.lease_with("r0", "coder", json!({ "prefer": "b" }));
    let e = explain(&sim, json!({ "role": "coder", "pin": "b" }));
    assert_eq!(e.pick, None);
    assert_eq!(reasons(&e, "a"), ["the request is pinned to b"]);
    assert_eq!(reasons(&e, "b"), ["busy (1 of 1 slots)"]);
    let e = explain(&sim, json!({ "role": "coder", "pin": "z" }));
    assert!(e.can_ever_serve, "an undeclared pin waits for a reload");
    assert_eq!(
        reasons(&e, "z"),
        ["not in the roster (the pinned request waits for a reload that declares it)"]
    );
}

#[test]
fn explain_refuses_unknown_requests_and_roles() {
    let sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let request: ExplainRequest =
        serde_json::from_value(json!({ "role": "coder", "request": "nope" })).unwrap();
    assert_eq!(
        sim.policy.explain(&request).unwrap_err().code(),
        "UNKNOWN_REQUEST"
    );
    let request: ExplainRequest = serde_json::from_value(json!({ "role": "chef" })).unwrap();
    assert_eq!(
        sim.policy.explain(&request).unwrap_err().code(),
        "UNKNOWN_ROLE"
    );
}

// ---- plan --------------------------------------------------------------------------------------------------

#[test]
fn plan_is_a_dry_run_of_a_reload_that_changes_nothing() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({})),
        coder("b", json!({})),
        coder("c", json!({})),
        ex("j", &["judge"], json!({})),
        ex("e", &["reviewer"], json!({})),
    ]));
    sim.lease_with("ra", "coder", json!({ "prefer": "a" }));
    sim.lease_with("rc", "coder", json!({ "prefer": "c" }));
    sim.granted("rj", "judge");
    sim.lease_with("w1", "coder", json!({ "avoid": ["b"] }))
        .no_grant();
    sim.lease_with("w3", "coder", json!({ "avoid": ["b"] }))
        .no_grant();
    sim.lease("w2", "judge").no_grant();
    let next = doc(vec![
        coder("c", json!({ "slots": 2 })),
        coder("d", json!({})),
        ex("e", &["reviewer"], json!({ "priority": 7 })),
    ]);
    let before = (sim.snapshot(), sim.policy.export_state());
    let plan = sim.policy.plan(&next).unwrap();
    assert_eq!(
        (sim.snapshot(), sim.policy.export_state()),
        before,
        "plan changed the state"
    );
    assert!(sim.policy.poll_output().is_none(), "plan gave outputs");
    assert_eq!(plan.added, ["d"]);
    assert_eq!(plan.draining, ["a", "j"]);
    assert_eq!(plan.leaving, ["b"]);
    assert_eq!(plan.resized.len(), 1);
    let resize = &plan.resized[0];
    assert_eq!(
        (resize.id.as_str(), resize.from, resize.to, resize.running),
        ("c", 1, 2, 1)
    );
    assert_eq!(plan.changed, ["e"]);
    let granted: Vec<(String, String)> = plan
        .granted
        .iter()
        .map(|g| (g.request.clone(), g.executor.clone()))
        .collect();
    assert_eq!(granted, pairs(&[("w1", "d"), ("w3", "c")]));
    assert_eq!(plan.exhausted, ["w2"]);
    assert!(plan.preflight.is_empty());
    // The reload itself does what the plan said.
    let outs = sim.input(json!({ "type": "reload", "document": next }));
    assert_eq!(outs.grant_pairs(), pairs(&[("w1", "d"), ("w3", "c")]));
    let exhausted: Vec<String> = outs.exhausted().into_iter().map(|x| x.0).collect();
    assert_eq!(exhausted, ["w2"]);
}

#[test]
fn plan_of_a_bad_document_lists_its_violations() {
    let sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let error = sim
        .policy
        .plan(&json!({ "executors": [{ "id": "a", "roles": ["coder"] }] }))
        .unwrap_err();
    assert_eq!(error.code(), "INVALID_DOCUMENT");
    assert_eq!(
        error.to_json()["violations"][0]["path"],
        "executors[0].harness"
    );
}

#[test]
fn plan_names_the_executors_that_need_a_preflight() {
    let sim = Sim::with_options(
        doc(vec![coder("a", json!({}))]),
        json!({ "preflightReloads": true }),
    );
    let plan = sim
        .policy
        .plan(&doc(vec![
            coder("a", json!({ "slots": 2 })),
            coder("b", json!({})),
        ]))
        .unwrap();
    assert_eq!(plan.preflight, ["a", "b"]);
}

// ---- Time -----------------------------------------------------------------------------------------------------

#[test]
fn time_that_runs_backwards_is_clamped_to_the_last_now() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    sim.report("a", "usageLimit", "limit"); // until T0 + 30 min
    sim.at(T0 + 30 * MIN);
    assert!(sim.tick().has_event("back"));
    // An input from the past: the clock stays, the exclusion stays over.
    sim.at(T0 + 5 * MIN);
    sim.tick();
    assert_eq!(sim.policy.now(), T0 + 30 * MIN);
    assert!(sim.exclusion("a").is_none());
    sim.report("b", "usageLimit", "limit");
    assert_eq!(sim.exclusion("b").unwrap().until, Some(T0 + 60 * MIN));
    assert_eq!(sim.exclusion("b").unwrap().since, T0 + 30 * MIN);
    sim.granted("r1", "coder");
    sim.lease("r2", "coder");
    assert_eq!(sim.snapshot().queue[0].waiting_since, T0 + 30 * MIN);
    assert_eq!(sim.snapshot().now, T0 + 30 * MIN);
}

// ---- release ----------------------------------------------------------------------------------------------------

#[test]
fn releasing_twice_frees_one_slot_once() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let lease = sim.granted("r1", "coder").1;
    sim.lease("w", "coder");
    let outs = sim.release(lease);
    assert_eq!(outs.grant().request, "w");
    let outs = sim.release(lease);
    assert!(outs.0.is_empty(), "{outs:#?}");
    assert_eq!(sim.exec("a").busy, 1);
    sim.lease("x", "coder").no_grant();
    assert_eq!(sim.queue(), ["x"]);
}

#[test]
fn a_released_request_id_can_be_used_again() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let lease = sim.granted("r1", "coder").1;
    sim.release(lease);
    assert_eq!(sim.granted("r1", "coder").0, "a");
}

/// A request granted from the queue keeps its id in use while its lease runs (one
/// id map holds waiting and leased requests: the grant rewrites its entry), and
/// frees it when the lease ends.
#[test]
fn a_waiter_granted_later_holds_its_id_until_its_lease_ends() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let first = sim.granted("r0", "coder").1;
    sim.lease("w", "coder").no_grant();
    let granted = sim.release(first).grant();
    assert_eq!(granted.request, "w");
    for input in [
        json!({ "type": "lease", "id": "w", "role": "coder" }),
        json!({ "type": "tryLease", "id": "w", "role": "coder" }),
        json!({ "type": "occupy", "id": "w", "executor": "a" }),
    ] {
        let refused = sim.try_input(input.clone()).expect_err("w is leased");
        assert_eq!(refused.code(), "DUPLICATE_REQUEST", "{input}");
    }
    let cancel = sim.try_input(json!({ "type": "cancel", "id": "w" }));
    assert_eq!(cancel.expect_err("w has a lease").code(), "UNKNOWN_REQUEST");
    assert!(sim.queue().is_empty());
    sim.release(granted.lease);
    assert_eq!(sim.granted("w", "coder").0, "a", "w is free again");
}

/// A lease remembers where its executor stood (a hint that saves the id lookup at
/// release); a reload that reorders the roster, and a drained executor that leaves,
/// move the executors under it, and its release still frees its own executor's slot.
#[test]
fn a_release_frees_its_executors_slot_after_a_reload_moved_the_executors() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({})),
        coder("b", json!({})),
        coder("c", json!({})),
    ]));
    let on_a = sim
        .lease_with("r0", "coder", json!({ "prefer": "a" }))
        .grant();
    let on_c = sim
        .lease_with("r1", "coder", json!({ "prefer": "c" }))
        .grant();
    let on_b = sim
        .lease_with("r2", "coder", json!({ "prefer": "b" }))
        .grant();
    assert_eq!(
        [&on_a.executor, &on_b.executor, &on_c.executor],
        ["a", "b", "c"]
    );
    // c moves from the third place to the first; b from the second to the third.
    sim.input(json!({ "type": "reload", "document": doc(vec![
        coder("c", json!({})),
        coder("a", json!({})),
        coder("b", json!({})),
    ]) }));
    sim.release(on_b.lease);
    assert_eq!((sim.exec("b").busy, sim.exec("c").busy), (0, 1));
    // a is removed while it holds a lease: it drains where it stands, then leaves,
    // and c and b move up one place.
    sim.input(json!({ "type": "reload", "document": doc(vec![
        coder("c", json!({})),
        coder("b", json!({})),
    ]) }));
    sim.release(on_a.lease);
    assert!(!sim.has_exec("a"), "a left with its last lease");
    sim.release(on_c.lease);
    assert_eq!((sim.exec("b").busy, sim.exec("c").busy), (0, 0));
    // Both slots are free again, and nothing else is.
    let first = sim.lease("r3", "coder").grant().executor;
    let second = sim.lease("r4", "coder").grant().executor;
    assert_eq!(
        sorted_pair(first, second),
        ("b".to_string(), "c".to_string())
    );
    sim.lease("r5", "coder").no_grant();
}

fn sorted_pair(x: String, y: String) -> (String, String) {
    if x <= y {
        (x, y)
    } else {
        (y, x)
    }
}

#[test]
fn cancelling_a_waiting_request_removes_it() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let lease = sim.granted("r0", "coder").1;
    sim.lease_with("r1", "coder", json!({ "deadline": T0 + MIN }));
    sim.lease("r2", "coder");
    let outs = sim.cancel("r1");
    assert_eq!(outs.cancelled(), ["r1"]);
    assert!(outs.has_event("cancelled"));
    assert_eq!(sim.queue(), ["r2"]);
    assert_eq!(sim.wake_at(), None, "its deadline went with it");
    assert_eq!(sim.release(lease).grant().request, "r2");
}

// ---- Errors change nothing -------------------------------------------------------------------------------------

/// A policy with some of everything, for error tests.
fn busy_sim() -> Sim {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({ "health": "http://h:1/health" })),
        coder("b", json!({})),
        coder("m", json!({ "provision": true })),
    ]));
    sim.granted("r1", "coder");
    sim.granted("r2", "coder");
    sim.lease("r3", "coder"); // creating on m
    sim.lease_with("r4", "coder", json!({ "deadline": T0 + HOUR }));
    sim.report("a", "rateLimit", "429");
    sim.after(SEC);
    sim
}

#[test]
fn unknown_leases_requests_roles_and_executors_are_errors_that_change_nothing() {
    let mut sim = busy_sim();
    for (input, code) in [
        (json!({ "type": "release", "lease": 99 }), "UNKNOWN_LEASE"),
        (json!({ "type": "release", "lease": 0 }), "UNKNOWN_LEASE"),
        (json!({ "type": "cancel", "id": "nope" }), "UNKNOWN_REQUEST"),
        (json!({ "type": "cancel", "id": "r1" }), "UNKNOWN_REQUEST"),
        (
            json!({ "type": "machineCreated", "id": "nope", "hold": 1 }),
            "UNKNOWN_REQUEST",
        ),
        (
            json!({ "type": "machineCreated", "id": "r4", "hold": 1 }),
            "UNKNOWN_REQUEST",
        ),
        (
            json!({ "type": "machineFailed", "id": "nope" }),
            "UNKNOWN_REQUEST",
        ),
        (
            json!({ "type": "lease", "id": "r4", "role": "coder" }),
            "DUPLICATE_REQUEST",
        ),
        (
            json!({ "type": "lease", "id": "r1", "role": "coder" }),
            "DUPLICATE_REQUEST",
        ),
        (
            json!({ "type": "lease", "id": "r3", "role": "coder" }),
            "DUPLICATE_REQUEST",
        ),
        (
            json!({ "type": "tryLease", "id": "r1", "role": "coder" }),
            "DUPLICATE_REQUEST",
        ),
        (
            json!({ "type": "occupy", "id": "r2", "executor": "b" }),
            "DUPLICATE_REQUEST",
        ),
        (
            json!({ "type": "lease", "id": "x", "role": "chef" }),
            "UNKNOWN_ROLE",
        ),
        (
            json!({ "type": "tryLease", "id": "x", "role": "chef" }),
            "UNKNOWN_ROLE",
        ),
        (
            json!({ "type": "occupy", "id": "x", "executor": "b", "role": "chef" }),
            "UNKNOWN_ROLE",
        ),
        (
            json!({ "type": "report", "executor": "zz", "failure": { "kind": "other" } }),
            "UNKNOWN_EXECUTOR",
        ),
        (
            json!({ "type": "exclude", "executor": "zz" }),
            "UNKNOWN_EXECUTOR",
        ),
        (
            json!({ "type": "resume", "executor": "zz" }),
            "UNKNOWN_EXECUTOR",
        ),
        (
            json!({ "type": "probeResult", "executor": "zz", "up": true }),
            "UNKNOWN_EXECUTOR",
        ),
        (
            json!({ "type": "preflightResult", "executor": "zz", "ok": true }),
            "UNKNOWN_EXECUTOR",
        ),
        (
            json!({ "type": "restore", "state": { "version": 2, "exclusions": [] } }),
            "INVALID_STATE",
        ),
        (
            json!({ "type": "restore", "state": { "version": 1, "exclusions": [
            { "id": "a", "reason": "x", "kind": "until" }
        ] } }),
            "INVALID_STATE",
        ),
    ] {
        // `refused` asserts that export_state() is the same before and after.
        let error = sim.refused(input.clone());
        assert_eq!(error.code(), code, "{input}");
    }
    assert_eq!(
        sim.policy.now(),
        T0,
        "a refused input does not advance time"
    );
}

#[test]
fn error_messages_name_what_is_wrong() {
    let mut sim = busy_sim();
    let message = |sim: &mut Sim, input: Value| sim.refused(input).to_string();
    assert_eq!(
        message(&mut sim, json!({ "type": "release", "lease": 99 })),
        "no lease 99: it was never granted"
    );
    assert_eq!(
        message(&mut sim, json!({ "type": "cancel", "id": "nope" })),
        "no waiting request 'nope'"
    );
    assert_eq!(
        message(
            &mut sim,
            json!({ "type": "lease", "id": "x", "role": "chef" })
        ),
        "unknown role 'chef' (roles: planner, coder, reviewer, judge, verifier)"
    );
    assert_eq!(
        message(&mut sim, json!({ "type": "resume", "executor": "zz" })),
        "no executor 'zz' in the roster"
    );
}

#[test]
fn malformed_json_inputs_are_invalid_input_and_change_nothing() {
    let mut sim = busy_sim();
    let now = T0 + SEC;
    for input in [
        json!({}),
        json!([]),
        json!("lease"),
        json!({ "type": 3, "now": now }),
        json!({ "type": "fly", "now": now }),
        json!({ "type": "lease", "now": now, "role": "coder" }),
        json!({ "type": "lease", "id": "x", "role": "coder" }),
        json!({ "type": "lease", "now": "soon", "id": "x", "role": "coder" }),
        json!({ "type": "lease", "now": -1, "id": "x", "role": "coder" }),
        json!({ "type": "lease", "now": 1.5, "id": "x", "role": "coder" }),
        json!({ "type": "lease", "now": 9_007_199_254_740_993u64, "id": "x", "role": "coder" }),
        json!({ "type": "lease", "now": now, "id": "", "role": "coder" }),
        json!({ "type": "lease", "now": now, "id": "x", "role": "coder", "colour": "red" }),
        json!({ "type": "lease", "now": now, "id": "x", "role": "coder", "avoid": "a" }),
        json!({ "type": "release", "now": now, "lease": "1" }),
        json!({ "type": "report", "now": now, "executor": "a", "failure": { "kind": "meteor" } }),
        json!({ "type": "report", "now": now, "executor": "a" }),
        json!({ "type": "exclude", "now": now, "executor": "a", "kind": "until" }),
        json!({ "type": "exclude", "now": now, "executor": "a", "until": now - 1 }),
        json!({ "type": "exclude", "now": now, "executor": "a", "kind": "forever" }),
        json!({ "type": "probeResult", "now": now, "executor": "a", "up": "yes" }),
    ] {
        let before = sim.policy.export_state();
        let answer = step(&mut sim.policy, &input);
        assert_eq!(
            answer["error"]["code"], "INVALID_INPUT",
            "{input} → {answer}"
        );
        assert!(answer["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
        assert_eq!(
            sim.policy.export_state(),
            before,
            "{input} changed the state"
        );
        assert!(sim.policy.poll_output().is_none());
    }
    let before = sim.policy.export_state();
    let answer: Value = serde_json::from_str(&step_str(&mut sim.policy, "{not json")).unwrap();
    assert_eq!(answer["error"]["code"], "INVALID_INPUT");
    assert_eq!(sim.policy.export_state(), before);
    // A good input through the same door works.
    let answer = step(&mut sim.policy, &json!({ "type": "tick", "now": now }));
    assert!(answer["outputs"].is_array(), "{answer}");
    assert_eq!(answer["wakeAt"], json!(T0 + HOUR));
}

// ---- Export / import mid-run -----------------------------------------------------------------------------------

#[test]
fn export_and_import_mid_run_give_the_same_subsequent_outputs() {
    let url = "http://gpu:8080/health";
    let mut sim = Sim::with_options(
        doc(vec![
            coder("a", json!({ "health": url, "slots": 2 })),
            coder("b", json!({})),
            coder("m", json!({ "provision": true, "slots": 2 })),
            ex("v", &["reviewer"], json!({})),
            ex("gone", &["judge"], json!({})),
        ]),
        json!({ "preflightReloads": true }),
    );
    let on_a = sim
        .lease_with("r1", "coder", json!({ "prefer": "a", "label": "x" }))
        .grant()
        .lease;
    sim.lease_with("r2", "coder", json!({ "prefer": "b" }));
    sim.lease_with("r3", "coder", json!({ "prefer": "m" })); // creating on m
    sim.lease_with("r4", "coder", json!({ "prefer": "m" })); // creating on m
    sim.input(json!({ "type": "machineFailed", "id": "r4", "message": "quota" }));
    sim.granted("j1", "judge");
    sim.input(json!({ "type": "occupy", "id": "o1", "executor": "v", "role": "reviewer" }));
    sim.report("a", "outage", "down"); // probe in flight
    sim.report("b", "rateLimit", "429");
    sim.input(json!({ "type": "exclude", "executor": "v", "reason": "ops", "until": T0 + HOUR }));
    sim.lease_with(
        "w1",
        "coder",
        json!({ "deadline": T0 + 10 * MIN, "rank": 1 }),
    );
    sim.lease_with("w2", "reviewer", json!({ "label": "review" }));
    sim.lease_with("p1", "coder", json!({ "pin": "z" }));
    // Remove `gone` (it drains), then start a reload that waits for a preflight.
    sim.input(json!({ "type": "reload", "document": doc(vec![
        coder("a", json!({ "health": url, "slots": 2 })),
        coder("b", json!({})),
        coder("m", json!({ "provision": true, "slots": 2 })),
        ex("v", &["reviewer"], json!({})),
    ]) }));
    sim.after(SEC);
    sim.input(json!({ "type": "reload", "document": doc(vec![
        coder("a", json!({ "health": url, "slots": 2 })),
        coder("b", json!({})),
        coder("m", json!({ "provision": true, "slots": 2 })),
        ex("v", &["reviewer"], json!({})),
        coder("z", json!({})),
    ]) }));
    assert!(sim.snapshot().pending_reload.is_some());
    assert!(sim.exec("gone").draining);

    let exported = sim.policy.export_state();
    let imported = Policy::import_state(&exported).unwrap();
    assert_eq!(imported.export_state(), exported, "the round trip is exact");
    assert_eq!(imported.snapshot(), sim.snapshot());
    assert_eq!(imported.poll_timeout(), sim.policy.poll_timeout());
    let mut twin = Sim {
        policy: imported,
        now: sim.now,
        log: Vec::new(),
    };

    let script = [
        json!({ "type": "probeResult", "executor": "a", "up": false }),
        json!({ "type": "machineCreated", "id": "r3", "hold": { "vm": 1 } }),
        json!({ "type": "preflightResult", "executor": "z", "ok": true }),
        json!({ "type": "release", "lease": on_a }),
        json!({ "type": "report", "executor": "b", "failure": { "kind": "rateLimit", "message": "429" } }),
        json!({ "type": "lease", "id": "n1", "role": "coder" }),
        json!({ "type": "release", "lease": 2 }),
    ];
    for input in script {
        sim.after(7 * SEC);
        twin.after(7 * SEC);
        assert_eq!(
            sim.input(input.clone()).0,
            twin.input(input.clone()).0,
            "{input}"
        );
        assert_eq!(sim.wake_at(), twin.wake_at());
    }
    assert_eq!(sim.run_to(T0 + 2 * HOUR).0, twin.run_to(T0 + 2 * HOUR).0);
    assert_eq!(sim.policy.export_state(), twin.policy.export_state());
    assert_eq!(sim.snapshot(), twin.snapshot());
}

#[test]
fn import_refuses_a_state_it_cannot_read() {
    for state in [
        json!(null),
        json!({ "version": 99 }),
        json!({ "version": 1 }),
    ] {
        let error = Policy::import_state(&state).unwrap_err();
        assert_eq!(error.code(), "INVALID_STATE", "{state}");
    }
}

// ---- tryLease -------------------------------------------------------------------------------------------------------

#[test]
fn try_lease_takes_a_free_slot_or_answers_unavailable() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let outs = sim.try_lease("t1", "coder");
    let grant = outs.grant();
    assert_eq!(
        (grant.request.as_str(), grant.executor.as_str()),
        ("t1", "a")
    );
    let outs = sim.try_lease("t2", "coder");
    assert_eq!(outs.unavailable(), ["t2"]);
    outs.no_grant();
    assert!(outs.waiting().is_empty());
    assert!(sim.queue().is_empty(), "a tryLease never waits");
    // Nothing remembers t2: the id is free, and a freed slot does not go to it.
    sim.release(grant.lease).no_grant();
    assert_eq!(sim.try_lease("t2", "coder").grant().executor, "a");
    // A role nobody takes: unavailable too, not an error.
    assert_eq!(sim.try_lease("t3", "judge").unavailable(), ["t3"]);
}

// ---- Faults of the seed that rota must not have ---------------------------------------------------------------

#[test]
fn one_input_that_ends_several_exclusions_persists_once() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({})),
        coder("b", json!({})),
        coder("c", json!({})),
    ]));
    sim.report("a", "usageLimit", "limit"); // until T0 + 30 min
    sim.after(MIN);
    sim.report("b", "usageLimit", "limit"); // until T0 + 31 min
    sim.input(json!({ "type": "exclude", "executor": "c", "until": T0 + 32 * MIN }));
    sim.at(T0 + HOUR);
    let outs = sim.tick();
    assert_eq!(
        outs.messages("back"),
        [
            "a back in the round",
            "b back in the round",
            "c back in the round"
        ]
    );
    assert_eq!(outs.persists().len(), 1);
    assert!(outs.persisted().exclusions.is_empty());
}

#[test]
fn queries_change_nothing_and_expiry_happens_on_the_next_input() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.report("a", "usageLimit", "limit");
    let before = sim.policy.export_state();
    // Long after the exclusion's end, queries still describe the last input's state.
    let snapshot = sim.snapshot();
    assert_eq!(
        snapshot.executors[0].exclusion.as_ref().unwrap().until,
        Some(T0 + 30 * MIN)
    );
    assert_eq!(sim.policy.available("coder").unwrap(), 0);
    assert_eq!(sim.policy.slots("coder").unwrap(), 1);
    assert!(sim.policy.can_ever_serve("coder", &[]).unwrap());
    assert_eq!(sim.policy.export_state(), before);
    assert!(sim.policy.poll_output().is_none());
    // The next input passes the time: the exclusion ends with its event and persist.
    sim.at(T0 + HOUR);
    let outs = sim.tick();
    assert_eq!(outs.messages("back"), ["a back in the round"]);
    assert_eq!(outs.persists().len(), 1);
    assert_eq!(sim.policy.available("coder").unwrap(), 1);
}

#[test]
fn health_probes_follow_their_schedule_whoever_asks() {
    let url = "http://gpu:8080/health";
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({ "health": url })),
        coder("b", json!({})),
    ]));
    sim.report("a", "outage", "down");
    sim.input(json!({ "type": "probeResult", "executor": "a", "up": false }));
    // Nobody waits and nobody asks: the idle schedule still probes.
    let outs = sim.run_to(T0 + 60 * SEC);
    assert_eq!(outs.probes(), pairs(&[("a", url)]));
    let outs = sim.input(json!({ "type": "probeResult", "executor": "a", "up": true }));
    assert!(outs.has_event("back"));
    // A tryLease is served by the executor that came back.
    assert_eq!(sim.try_lease("t1", "coder").grant().executor, "a");
}

#[test]
fn a_health_exclusion_whose_url_a_reload_removes_waits_out_the_outage_cooldown() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({ "health": "http://gpu:1/h" }))]));
    sim.report("a", "outage", "down");
    sim.at(T0 + MIN);
    let outs = sim.input(json!({ "type": "reload", "document": doc(vec![coder("a", json!({}))]) }));
    let x = sim.exclusion("a").unwrap();
    assert_eq!(
        (x.kind, x.until),
        (ExclusionKind::Until, Some(T0 + 6 * MIN))
    );
    assert_eq!(outs.persisted().exclusions[0].kind, ExclusionKind::Until);
    assert_eq!(
        sim.run_to(T0 + 6 * MIN).messages("back"),
        ["a back in the round"]
    );
}

#[test]
fn grant_and_exclusion_events_use_the_seeds_wording() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    let outs = sim.lease_with("r1", "coder", json!({ "label": "story-1" }));
    assert_eq!(outs.messages("granted"), ["a takes coder for story-1"]);
    let event = outs.event("granted");
    // A request's lifecycle is debug (issue 16); its label is a field (issue 13).
    assert_eq!(event.level, Level::Debug);
    assert_eq!(event.fields["executor"], json!("a"));
    assert_eq!(event.fields["request"], json!("r1"));
    assert_eq!(event.fields["label"], json!("story-1"));
    let outs = sim.lease("r2", "coder");
    assert_eq!(outs.messages("granted"), ["b takes coder"]);
    let outs = sim.report("b", "authentication", "expired");
    let event = outs.event("excluded");
    assert_eq!(event.level, Level::Warn);
    assert_eq!(
        event.message,
        "b out of the round for this run: not signed in (expired)"
    );
    assert_eq!(event.fields["kind"], json!("run"));
}

#[test]
fn unknown_fields_in_any_input_are_refused_and_change_nothing() {
    let doc = serde_json::json!({"executors":[{"id":"a","harness":"h","roles":["coder"]}]});
    let mut policy = rota_core::Policy::new(&doc, rota_core::Options::default()).unwrap();
    let before = policy.export_state();
    for text in [
        r#"{"type":"tick","now":5,"extra":1}"#,
        r#"{"type":"release","now":5,"lease":1,"leaseId":1}"#,
        r#"{"type":"lease","now":5,"id":"r","role":"coder","avoids":["a"]}"#,
        r#"{"type":"report","now":5,"executor":"a","failure":{"kind":"outage","msg":"x"}}"#,
    ] {
        let answer: serde_json::Value =
            serde_json::from_str(&rota_core::json::step_str(&mut policy, text)).unwrap();
        assert_eq!(answer["error"]["code"], "INVALID_INPUT", "{text}: {answer}");
        assert_eq!(policy.export_state(), before, "{text}");
    }
}

#[test]
fn step_str_and_step_agree_on_content() {
    let doc = serde_json::json!({"executors":[{"id":"a","harness":"h","roles":["coder"]}]});
    let mut by_text = rota_core::Policy::new(&doc, rota_core::Options::default()).unwrap();
    let mut by_value = by_text.clone();
    for input in [
        serde_json::json!({"type":"lease","now":1,"id":"r1","role":"coder","label":"x"}),
        serde_json::json!({"type":"lease","now":2,"id":"r2","role":"coder"}),
        serde_json::json!({"type":"report","now":3,"executor":"a","failure":{"kind":"usageLimit","message":"quota"}}),
        serde_json::json!({"type":"release","now":4,"lease":7}),
    ] {
        let text: serde_json::Value =
            serde_json::from_str(&rota_core::json::step_str(&mut by_text, &input.to_string()))
                .unwrap();
        let value = rota_core::json::step(&mut by_value, &input);
        assert_eq!(text, value, "{input}");
    }
}

#[test]
fn a_draining_executors_exclusion_is_not_persisted() {
    use rota_core::json::step;
    use serde_json::json;
    let doc = json!({"executors":[
        {"id":"a","harness":"h","roles":["coder"]},
        {"id":"b","harness":"h","roles":["coder"]}
    ]});
    let mut policy = rota_core::Policy::new(&doc, rota_core::Options::default()).unwrap();
    let t = 1_800_000_000_000u64;
    step(
        &mut policy,
        &json!({"type":"lease","now":t,"id":"r1","role":"coder"}),
    );
    let answer = step(
        &mut policy,
        &json!({"type":"reload","now":t,
        "document":{"executors":[{"id":"b","harness":"h","roles":["coder"]}]}}),
    );
    assert!(answer.get("error").is_none(), "{answer}");
    assert!(policy
        .snapshot()
        .executors
        .iter()
        .any(|x| x.id == "a" && x.draining));
    let answer = step(
        &mut policy,
        &json!({"type":"report","now":t+1,"executor":"a",
        "failure":{"kind":"usageLimit","message":"quota"}}),
    );
    let persists: Vec<_> = answer["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["type"] == "persist")
        .collect();
    assert!(persists.is_empty(), "{answer}");
    assert!(policy.persisted_state().exclusions.is_empty());
}

#[test]
fn resume_ends_the_pause_and_a_rate_limit_queued_under_it_takes_over() {
    // Issue 17 item 7: a 429 during a manual pause was queued ("then until ..."); a
    // resume must not drop it (the executor took a lease before its end).
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.input(json!({ "type": "exclude", "executor": "a", "kind": "manual", "reason": "deploy" }));
    let outs = sim.input(json!({
        "type": "report", "executor": "a",
        "failure": { "kind": "rateLimit", "message": "429", "retryAfterMs": 120_000 }
    }));
    assert_eq!(
        outs.event("exclusionQueued").fields["thenUntil"],
        json!(T0 + 2 * MIN)
    );
    sim.after(5 * SEC);
    let outs = sim.input(json!({ "type": "resume", "executor": "a" }));
    let x = sim.exclusion("a").unwrap();
    assert_eq!(
        (x.kind, x.until),
        (ExclusionKind::Until, Some(T0 + 2 * MIN))
    );
    assert_eq!(
        outs.messages("resumed"),
        ["a resumed; it stays out of the round until 2027-01-15T08:02:00.000Z: rate limited; retry after 2m"]
    );
    sim.lease("r1", "coder").no_grant();
    assert_eq!(sim.run_to(T0 + 2 * MIN).granted()[0].executor, "a");
}

#[test]
fn the_last_executor_of_a_role_going_out_warns_and_the_first_back_says_so() {
    // Issue 16 item 10: a starved role is visible, with when the first returns.
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    let outs = sim.report("a", "authentication", "expired");
    assert!(
        outs.events().iter().all(|e| e.name != "roleOut"),
        "b still takes coder"
    );
    let outs = sim.input(json!({
        "type": "report", "executor": "b",
        "failure": { "kind": "rateLimit", "message": "429", "retryAfterMs": 120_000 }
    }));
    let out = outs.event("roleOut");
    assert_eq!(out.level, Level::Warn);
    assert_eq!(out.fields["role"], json!("coder"));
    assert_eq!(out.fields["executors"], json!(["a", "b"]));
    assert_eq!(out.fields["nextBackAt"], json!(T0 + 2 * MIN));
    let outs = sim.run_to(T0 + 2 * MIN);
    let back = outs.event("roleBack");
    assert_eq!(
        (back.level, back.fields["executor"].clone()),
        (Level::Info, json!("b"))
    );
}

#[test]
fn exclusions_that_end_together_come_back_in_one_event() {
    // The roster seed's expire: "a, b back in the round".
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    for id in ["a", "b"] {
        sim.input(json!({ "type": "exclude", "executor": id, "kind": "until", "reason": "x", "until": T0 + MIN }));
    }
    let outs = sim.run_to(T0 + MIN);
    assert_eq!(outs.messages("back"), ["a, b back in the round"]);
    assert_eq!(outs.event("back").fields["executors"], json!(["a", "b"]));
}

/// A report names its executor by id; the index `check` found for it goes stale when
/// the time the input brings drains an executor before it (the roster shifts: removed
/// executors sit after the declared ones, in their order). The report must still land
/// on the executor it names, not on the one now at that index.
#[test]
fn a_report_lands_on_its_executor_when_the_time_it_brings_drains_one_before_it() {
    let mut sim = Sim::new(doc(vec![
        coder("b", json!({})),
        coder(
            "m1",
            json!({ "provision": true, "slots": 1, "priority": 5 }),
        ),
        coder("m2", json!({ "priority": 3 })),
        coder("m3", json!({ "priority": 3 })),
    ]));
    assert_eq!(sim.granted("held-b", "coder").0, "b");
    assert_eq!(
        sim.lease_with("held-m2", "coder", json!({ "pin": "m2" }))
            .grant()
            .executor,
        "m2"
    );
    assert_eq!(
        sim.lease_with("held-m3", "coder", json!({ "pin": "m3" }))
            .grant()
            .executor,
        "m3"
    );
    let outs = sim.lease_with("r1", "coder", json!({ "deadline": T0 + 10 * SEC }));
    assert_eq!(outs.creates(), pairs(&[("r1", "m1")]));
    // m1, m2 and m3 leave the document while each holds a slot: they drain, after b.
    sim.input(json!({ "type": "reload", "document": doc(vec![coder("b", json!({}))]) }));
    assert!(["m1", "m2", "m3"].iter().all(|id| sim.exec(id).draining));
    // Past r1's deadline: this input's time ends r1, whose creation was m1's last slot,
    // so m1 leaves (m2 and m3 move up one) before the report on m2 is applied.
    sim.at(T0 + 20 * SEC);
    let outs = sim.report("m2", "usageLimit", "quota");
    assert!(!sim.has_exec("m1"), "m1 left as the time passed");
    let excluded = outs.messages("excluded");
    assert_eq!(excluded.len(), 1, "{excluded:?}");
    assert!(
        excluded[0].starts_with("m2 out of the round"),
        "{excluded:?}"
    );
    assert!(sim.exclusion("m2").is_some());
    assert!(
        sim.exclusion("m3").is_none(),
        "m3, now where m2 was, is not excluded"
    );
}
