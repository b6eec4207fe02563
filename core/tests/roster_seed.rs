//! The roster seed's behaviours (`Roster.ts`): priorities, round-robin, prefer and
//! avoid, coder and role slots, exhaustion, the waiting report, failure
//! classification, health probes, expiry, manual exclusion and the state file.

mod common;

use common::*;
use rota_core::{ExclusionKind, Level};
use serde_json::{json, Value};

fn coder(id: &str, extra: Value) -> Value {
    ex(id, &["coder"], extra)
}

// ---- Priorities and round-robin ---------------------------------------------------

#[test]
fn a_number_priority_is_lower_first_for_every_role() {
    let mut sim = Sim::new(doc(vec![
        ex("a", &["coder", "reviewer"], json!({ "priority": 2 })),
        ex("b", &["coder", "reviewer"], json!({ "priority": 1 })),
        ex("c", &["coder", "reviewer"], json!({ "priority": 3 })),
    ]));
    assert_eq!(sim.granted("r1", "coder").0, "b");
    assert_eq!(sim.granted("r2", "coder").0, "a");
    assert_eq!(sim.granted("r3", "reviewer").0, "c");
}

#[test]
fn a_per_role_priority_uses_the_role_then_default_then_one() {
    let roles = ["coder", "reviewer", "judge"];
    let mut sim = Sim::new(doc(vec![
        ex(
            "a",
            &roles,
            json!({ "slots": 3, "priority": { "coder": 1, "default": 3 } }),
        ),
        ex("b", &roles, json!({ "slots": 3, "priority": 2 })),
        // No entry for judge and no default: 1.
        ex(
            "c",
            &["reviewer", "judge"],
            json!({ "slots": 3, "priority": { "reviewer": 5 } }),
        ),
    ]));
    assert_eq!(sim.granted("r1", "coder").0, "a"); // a 1 < b 2
    assert_eq!(sim.granted("r2", "reviewer").0, "b"); // b 2 < a 3 (default) < c 5
    assert_eq!(sim.granted("r3", "judge").0, "c"); // c 1 (fallback) < b 2 < a 3
    let a = sim.exec("a");
    assert_eq!(a.priority.get("coder"), Some(&1.0));
    assert_eq!(a.priority.get("reviewer"), Some(&3.0));
    assert_eq!(sim.exec("c").priority.get("judge"), Some(&1.0));
}

#[test]
fn equal_priorities_go_round_robin_least_recently_leased_first() {
    let mut sim = Sim::new(doc(vec![
        ex("a", &["reviewer"], json!({ "slots": 2 })),
        ex("b", &["reviewer"], json!({ "slots": 2 })),
        ex("c", &["reviewer"], json!({ "slots": 2 })),
    ]));
    let mut leases = Vec::new();
    let mut order = Vec::new();
    for i in 1..=6 {
        let (executor, lease) = sim.granted(&format!("r{i}"), "reviewer");
        order.push(executor);
        leases.push(lease);
    }
    assert_eq!(order, ["a", "b", "c", "a", "b", "c"]);
    // Free one slot on c (leased last) and one on a (leased first of the three):
    // a was leased least recently, so it goes first; then c.
    sim.release(leases[5]); // c
    sim.release(leases[3]); // a
    assert_eq!(sim.granted("r7", "reviewer").0, "a");
    assert_eq!(sim.granted("r8", "reviewer").0, "c");
}

#[test]
fn round_robin_never_overrides_priority() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({ "slots": 3, "priority": 1 })),
        coder("b", json!({ "slots": 3, "priority": 2 })),
    ]));
    for i in 1..=3 {
        assert_eq!(sim.granted(&format!("r{i}"), "coder").0, "a");
    }
    assert_eq!(sim.granted("r4", "coder").0, "b");
}

// ---- prefer and avoid ------------------------------------------------------------

fn three_coders() -> Sim {
    Sim::new(doc(vec![
        coder("a", json!({ "priority": 1 })),
        coder("b", json!({ "priority": 2 })),
        coder("c", json!({ "priority": 3 })),
    ]))
}

#[test]
fn prefer_wins_over_priority_while_free() {
    let mut sim = three_coders();
    let grant = sim
        .lease_with("r1", "coder", json!({ "prefer": "c" }))
        .grant();
    assert_eq!(grant.executor, "c");
}

#[test]
fn prefer_is_ignored_when_the_preferred_executor_is_busy() {
    let mut sim = three_coders();
    sim.lease_with("r1", "coder", json!({ "prefer": "b" }));
    let grant = sim
        .lease_with("r2", "coder", json!({ "prefer": "b" }))
        .grant();
    assert_eq!(grant.executor, "a", "b is busy: the usual pick, not a wait");
}

#[test]
fn prefer_is_ignored_when_the_preferred_executor_is_excluded() {
    let mut sim = three_coders();
    sim.input(json!({ "type": "exclude", "executor": "b", "reason": "maintenance" }));
    let grant = sim
        .lease_with("r1", "coder", json!({ "prefer": "b" }))
        .grant();
    assert_eq!(grant.executor, "a");
}

#[test]
fn prefer_is_ignored_when_the_preferred_executor_is_avoided_or_lacks_the_role() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({ "priority": 1 })),
        coder("b", json!({ "priority": 2 })),
        ex("j", &["judge"], json!({ "priority": 0 })),
    ]));
    let grant = sim
        .lease_with("r1", "coder", json!({ "prefer": "b", "avoid": ["b"] }))
        .grant();
    assert_eq!(grant.executor, "a");
    let grant = sim
        .lease_with("r2", "coder", json!({ "prefer": "j" }))
        .grant();
    assert_eq!(grant.executor, "b");
}

#[test]
fn avoid_is_honoured_even_when_the_avoided_executor_is_free() {
    let mut sim = three_coders();
    let grant = sim
        .lease_with("r1", "coder", json!({ "avoid": ["a"] }))
        .grant();
    assert_eq!(grant.executor, "b");
    // b and c busy; a free but avoided: the request waits and a is not in its report.
    sim.lease_with("r2", "coder", json!({ "prefer": "c" }));
    let outs = sim.lease_with("r3", "coder", json!({ "avoid": ["a"] }));
    outs.no_grant();
    let waiting = outs.waiting();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].2, "b busy; c busy");
    // It takes b when b frees, never a.
    let outs = sim.release(1);
    assert_eq!(outs.grant_pairs(), [("r3".to_string(), "b".to_string())]);
    assert_eq!(sim.exec("a").busy, 0);
}

// ---- Slots -------------------------------------------------------------------------

#[test]
fn coder_slots_default_to_slots_minus_one_on_an_executor_that_codes_and_reasons() {
    let mut sim = Sim::new(doc(vec![ex(
        "a",
        &["coder", "reviewer"],
        json!({ "slots": 3 }),
    )]));
    assert_eq!(sim.exec("a").role_caps.get("coder"), Some(&2));
    assert_eq!(sim.policy.slots("coder").unwrap(), 2);
    assert_eq!(sim.policy.slots("reviewer").unwrap(), 3);
    assert_eq!(sim.granted("c1", "coder").0, "a");
    assert_eq!(sim.granted("c2", "coder").0, "a");
    assert_eq!(sim.policy.available("coder").unwrap(), 0);
    assert_eq!(sim.policy.available("reviewer").unwrap(), 1);
    let outs = sim.lease("c3", "coder");
    outs.no_grant();
    assert_eq!(outs.waiting().len(), 1);
    // The slot kept for reasoning serves a reviewer.
    assert_eq!(sim.granted("v1", "reviewer").0, "a");
    assert_eq!(sim.exec("a").busy_by_role.get("coder"), Some(&2));
    assert_eq!(sim.exec("a").busy_by_role.get("reviewer"), Some(&1));
}

#[test]
fn coder_slots_are_all_slots_when_it_only_codes() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({ "slots": 3 }))]));
    for i in 1..=3 {
        assert_eq!(sim.granted(&format!("c{i}"), "coder").0, "a");
    }
    assert_eq!(sim.exec("a").role_caps.get("coder"), Some(&3));
}

#[test]
fn coder_slots_are_all_slots_with_one_slot() {
    let mut sim = Sim::new(doc(vec![ex("a", &["coder", "reviewer"], json!({}))]));
    assert_eq!(sim.exec("a").role_caps.get("coder"), Some(&1));
    assert_eq!(sim.granted("c1", "coder").0, "a");
}

#[test]
fn explicit_coder_slots_cap_the_coder_role() {
    let mut sim = Sim::new(doc(vec![
        ex(
            "a",
            &["coder", "reviewer"],
            json!({ "slots": 3, "coderSlots": 1 }),
        ),
        ex(
            "b",
            &["coder", "reviewer"],
            json!({ "slots": 2, "coderSlots": 2, "priority": 2 }),
        ),
    ]));
    assert_eq!(sim.policy.slots("coder").unwrap(), 3);
    assert_eq!(sim.granted("c1", "coder").0, "a");
    assert_eq!(sim.granted("c2", "coder").0, "b");
    assert_eq!(sim.granted("c3", "coder").0, "b");
    sim.lease("c4", "coder").no_grant();
    // a still has two slots for reasoning.
    assert_eq!(sim.granted("v1", "reviewer").0, "a");
    assert_eq!(sim.granted("v2", "reviewer").0, "a");
}

#[test]
fn coder_slots_zero_means_it_never_codes() {
    let mut sim = Sim::new(doc(vec![ex(
        "a",
        &["coder", "reviewer"],
        json!({ "slots": 2, "coderSlots": 0 }),
    )]));
    let outs = sim.lease("c1", "coder");
    let exhausted = outs.exhausted();
    assert_eq!(exhausted.len(), 1, "{outs:#?}");
    assert_eq!(exhausted[0].0, "c1");
    assert_eq!(exhausted[0].2, ["a takes no coder slot (its cap is 0)"]);
    assert_eq!(sim.policy.slots("coder").unwrap(), 0);
    assert!(!sim.policy.can_ever_serve("coder", &[]).unwrap());
    assert_eq!(sim.granted("v1", "reviewer").0, "a");
}

#[test]
fn role_slots_cap_any_role() {
    let mut sim = Sim::new(doc(vec![ex(
        "a",
        &["reviewer", "judge"],
        json!({ "slots": 3, "roleSlots": { "reviewer": 1 } }),
    )]));
    assert_eq!(sim.exec("a").role_caps.get("reviewer"), Some(&1));
    assert_eq!(sim.exec("a").role_caps.get("judge"), Some(&3));
    assert_eq!(sim.policy.slots("reviewer").unwrap(), 1);
    assert_eq!(sim.granted("v1", "reviewer").0, "a");
    sim.lease("v2", "reviewer").no_grant();
    assert_eq!(sim.granted("j1", "judge").0, "a");
    assert_eq!(sim.granted("j2", "judge").0, "a");
    assert_eq!(sim.exec("a").busy, 3);
}

// ---- Exhaustion ------------------------------------------------------------------------

#[test]
fn exhausted_when_no_executor_takes_the_role() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let outs = sim.lease("r1", "judge");
    assert_eq!(
        outs.exhausted(),
        [(
            "r1".to_string(),
            "judge".to_string(),
            vec!["no executor in the roster takes this role".to_string()]
        )]
    );
    outs.no_grant();
    assert!(outs.waiting().is_empty());
    assert_eq!(outs.event("exhausted").level, Level::Warn);
    assert!(sim.queue().is_empty());
    assert!(!sim.policy.can_ever_serve("judge", &[]).unwrap());
}

#[test]
fn exhausted_when_every_executor_is_out_for_the_run_with_one_reason_each() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({})),
        coder("b", json!({ "model": "gpt-9" })),
        ex("j", &["judge"], json!({})),
    ]));
    sim.report("a", "authentication", "401 invalid x-api-key");
    sim.report("b", "other", "model not found: gpt-9");
    let outs = sim.lease("r1", "coder");
    assert_eq!(
        outs.exhausted(),
        [(
            "r1".to_string(),
            "coder".to_string(),
            vec![
                "a for this run: not signed in (401 invalid x-api-key)".to_string(),
                "b for this run: its model 'gpt-9' is unavailable (model not found: gpt-9)"
                    .to_string(),
            ]
        )]
    );
}

#[test]
fn exhausted_when_every_executor_with_the_role_is_avoided() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({})),
        coder("b", json!({})),
        ex("j", &["judge"], json!({})),
    ]));
    let outs = sim.lease_with("r1", "coder", json!({ "avoid": ["a", "b"] }));
    // Named, as `explain` says it (issue 16: "no executor in the roster takes this
    // role" was untrue here).
    assert_eq!(
        outs.exhausted()[0].2,
        ["a: avoided by the request", "b: avoided by the request"]
    );
    // Avoided executors give no reason; the others do.
    sim.report("b", "authentication", "expired token");
    let outs = sim.lease_with("r2", "coder", json!({ "avoid": ["a"] }));
    assert_eq!(
        outs.exhausted()[0].2,
        ["b for this run: not signed in (expired token)"]
    );
}

#[test]
fn a_waiting_request_is_exhausted_when_its_last_executor_goes_out_for_the_run() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    sim.granted("r1", "coder");
    sim.granted("r2", "coder");
    sim.lease("r3", "coder").no_grant();
    assert!(sim
        .report("a", "authentication", "signed out")
        .exhausted()
        .is_empty());
    let outs = sim.report("b", "modelUnavailable", "gone");
    assert_eq!(
        outs.exhausted(),
        [(
            "r3".to_string(),
            "coder".to_string(),
            vec![
                "a for this run: not signed in (signed out)".to_string(),
                "b for this run: its model is unavailable (gone)".to_string(),
            ]
        )]
    );
    assert!(sim.queue().is_empty());
}

// ---- The waiting report -------------------------------------------------------------------

#[test]
fn the_waiting_report_names_each_executor_and_is_announced_once() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({})),
        coder("b", json!({})),
        coder("c", json!({})),
    ]));
    sim.granted("r1", "coder"); // a
    sim.report("b", "usageLimit", "You've hit your limit");
    sim.input(json!({ "type": "exclude", "executor": "c", "reason": "maintenance" }));
    let outs = sim.lease_with("r2", "coder", json!({ "label": "story-7" }));
    let report = format!(
        "a busy; b until {}: usage limit (You've hit your limit); c paused: maintenance",
        iso(T0 + 30 * MIN)
    );
    assert_eq!(
        outs.waiting(),
        [("r2".to_string(), "coder".to_string(), report.clone(), 0)]
    );
    assert_eq!(
        outs.messages("waiting"),
        [format!(
            "waiting for an executor to take coder for story-7: {report}"
        )]
    );
    // Later inputs (another waiter, ticks, probes of time) never announce r2 again.
    sim.after(MIN);
    sim.lease("r3", "coder");
    sim.after(MIN);
    sim.tick();
    sim.after(MIN);
    sim.report("a", "rateLimit", "429");
    let outs = sim.run_to(T0 + 30 * MIN);
    assert_eq!(outs.grant_pairs(), [("r2".to_string(), "b".to_string())]);
    let announced: Vec<_> = sim
        .log
        .iter()
        .filter(|o| matches!(o, rota_core::Output::Waiting { request, .. } if request == "r2"))
        .collect();
    assert_eq!(announced.len(), 1);
}

#[test]
fn the_waiting_report_describes_health_and_run_exclusions() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({})),
        coder("b", json!({ "health": "http://gpu:8080/health" })),
        coder("c", json!({})),
    ]));
    sim.granted("r1", "coder");
    sim.report("b", "outage", "ECONNREFUSED");
    sim.report("c", "authentication", "no key");
    let outs = sim.lease("r2", "coder");
    assert_eq!(
        outs.waiting()[0].2,
        "a busy; b until its health check answers: serving engine down (ECONNREFUSED); c for this run: not signed in (no key)"
    );
}

// ---- Usage limits --------------------------------------------------------------------------

fn excluded_until(sim: &Sim, id: &str) -> (ExclusionKind, Option<u64>) {
    let x = sim
        .exclusion(id)
        .unwrap_or_else(|| panic!("{id} is not excluded"));
    (x.kind, x.until)
}

#[test]
fn a_usage_limit_lasts_until_its_reset_time() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let outs = sim.report_with(
        "a",
        json!({ "kind": "usageLimit", "message": "limit reached", "resetAt": T0 + 2 * HOUR }),
    );
    assert_eq!(
        excluded_until(&sim, "a"),
        (ExclusionKind::Until, Some(T0 + 2 * HOUR))
    );
    let x = sim.exclusion("a").unwrap();
    assert_eq!(x.reason, "usage limit (limit reached)");
    assert_eq!(
        x.description,
        format!("until {}: usage limit (limit reached)", iso(T0 + 2 * HOUR))
    );
    assert_eq!(
        outs.event("excluded").message,
        format!(
            "a out of the round until {}: usage limit (limit reached)",
            iso(T0 + 2 * HOUR)
        )
    );
    assert_eq!(
        outs.persisted().exclusions,
        [rota_core::Exclusion {
            id: "a".into(),
            reason: "usage limit (limit reached)".into(),
            kind: ExclusionKind::Until,
            until: Some(T0 + 2 * HOUR),
        }]
    );
    assert_eq!(sim.wake_at(), Some(T0 + 2 * HOUR));
}

#[test]
fn a_usage_limit_without_a_future_reset_waits_out_the_usage_cooldown() {
    for reset_at in [None, Some(T0 - MIN), Some(T0)] {
        let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
        let mut failure = json!({ "kind": "usageLimit", "message": "limit" });
        if let Some(t) = reset_at {
            failure["resetAt"] = json!(t);
        }
        sim.report_with("a", failure);
        assert_eq!(
            excluded_until(&sim, "a"),
            (ExclusionKind::Until, Some(T0 + 30 * MIN)),
            "resetAt {reset_at:?}"
        );
    }
}

#[test]
fn the_usage_cooldown_is_the_executors_own_when_it_sets_one() {
    let mut sim = Sim::new(doc(vec![coder(
        "a",
        json!({ "cooldown": { "usageLimit": "45 minutes" } }),
    )]));
    sim.report("a", "usageLimit", "limit");
    assert_eq!(
        excluded_until(&sim, "a"),
        (ExclusionKind::Until, Some(T0 + 45 * MIN))
    );
}

// ---- Rate limits ---------------------------------------------------------------------------

#[test]
fn three_rate_limits_in_ten_minutes_exclude_for_the_rate_cooldown_two_do_not() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let outs = sim.report("a", "rateLimit", "429");
    assert!(sim.exclusion("a").is_none());
    assert!(outs.persists().is_empty());
    assert_eq!(
        outs.messages("rateLimited"),
        ["a hit a rate limit (1 of 3 within 10m)"]
    );
    sim.after(4 * MIN);
    sim.report("a", "rateLimit", "429");
    assert!(sim.exclusion("a").is_none());
    assert_eq!(sim.exec("a").recent_rate_limits, 2);
    sim.after(5 * MIN + 59 * SEC); // T0 + 9:59, still inside the window of the first
    let outs = sim.report("a", "rateLimit", "429");
    let at = T0 + 9 * MIN + 59 * SEC;
    assert_eq!(
        excluded_until(&sim, "a"),
        (ExclusionKind::Until, Some(at + 10 * MIN))
    );
    assert_eq!(
        sim.exclusion("a").unwrap().reason,
        // The seed's reason, with effect's `Duration.format` of the window.
        "3 rate limits within 10m"
    );
    assert_eq!(outs.persists().len(), 1);
}

#[test]
fn old_rate_limits_slide_out_of_the_window() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.report("a", "rateLimit", "429"); // T0
    sim.at(T0 + 5 * MIN);
    sim.report("a", "rateLimit", "429");
    // Exactly ten minutes after the first: it is out of the window.
    sim.at(T0 + 10 * MIN);
    sim.report("a", "rateLimit", "429");
    assert!(sim.exclusion("a").is_none());
    assert_eq!(sim.exec("a").recent_rate_limits, 2);
    sim.at(T0 + 12 * MIN);
    sim.report("a", "rateLimit", "429");
    assert_eq!(
        excluded_until(&sim, "a"),
        (ExclusionKind::Until, Some(T0 + 22 * MIN))
    );
}

#[test]
fn the_rate_limit_count_resets_after_an_exclusion() {
    // A one-minute cooldown brings it back while the old reports are still inside
    // the ten-minute window: only a reset count keeps it in the round.
    let mut sim = Sim::new(doc(vec![coder(
        "a",
        json!({ "cooldown": { "rateLimit": "1 minute" } }),
    )]));
    for i in 0..3 {
        sim.at(T0 + i * SEC);
        sim.report("a", "rateLimit", "429");
    }
    assert_eq!(
        excluded_until(&sim, "a"),
        (ExclusionKind::Until, Some(T0 + 2 * SEC + MIN))
    );
    assert_eq!(sim.exec("a").recent_rate_limits, 0);
    let outs = sim.run_to(T0 + 2 * SEC + MIN);
    assert_eq!(outs.messages("back"), ["a back in the round"]);
    sim.after(SEC);
    sim.report("a", "rateLimit", "429");
    sim.after(SEC);
    sim.report("a", "rateLimit", "429");
    assert!(sim.exclusion("a").is_none(), "two since the exclusion");
    sim.after(SEC);
    sim.report("a", "rateLimit", "429");
    assert_eq!(sim.exclusion("a").unwrap().kind, ExclusionKind::Until);
}

#[test]
fn the_rate_cooldown_is_the_executors_own_when_it_sets_one() {
    let mut sim = Sim::new(doc(vec![coder(
        "a",
        json!({ "cooldown": { "rateLimit": "90s" } }),
    )]));
    for _ in 0..3 {
        sim.report("a", "rateLimit", "429");
    }
    assert_eq!(
        excluded_until(&sim, "a"),
        (ExclusionKind::Until, Some(T0 + 90 * SEC))
    );
}

// ---- Out for the run -----------------------------------------------------------------------

/// The seed's `modelUnavailableSignals`, copied from `Roster.ts`.
const SEED_MODEL_SIGNALS: [&str; 7] = [
    "issue with the selected model",
    "may not exist or you may not have access",
    "model not found",
    "model_not_found",
    "unknown model",
    "invalid model",
    "does not exist or you do not have access",
];

#[test]
fn every_model_unavailable_signal_excludes_for_the_run_in_any_failure_kind() {
    let kinds = [
        "usageLimit",
        "rateLimit",
        "authentication",
        "outage",
        "modelUnavailable",
        "other",
    ];
    for signal in SEED_MODEL_SIGNALS {
        for kind in kinds {
            let mut sim = Sim::new(doc(vec![coder(
                "a",
                json!({ "model": "claude-x", "health": "http://h:1/health" }),
            )]));
            let message = format!("Error 404: {} (claude-x)", signal.to_uppercase());
            let outs = sim.report("a", kind, &message);
            let x = sim
                .exclusion("a")
                .unwrap_or_else(|| panic!("{kind}: {message} did not exclude"));
            assert_eq!(x.kind, ExclusionKind::Run, "{kind}: {message}");
            assert_eq!(
                x.reason,
                format!("its model 'claude-x' is unavailable ({message})")
            );
            assert_eq!(x.until, None);
            assert!(
                outs.probes().is_empty(),
                "{kind}: a run exclusion is not probed"
            );
            assert!(
                outs.persists().is_empty(),
                "run exclusions are never written"
            );
        }
    }
}

#[test]
fn the_seeds_claude_message_is_a_model_signal() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.report(
        "a",
        "other",
        "There's an issue with the selected model (claude-9). It may not exist or you may not have access to it.",
    );
    assert_eq!(sim.exclusion("a").unwrap().kind, ExclusionKind::Run);
}

#[test]
fn authentication_excludes_for_the_run_with_the_message_cut_to_160_characters() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    let long = "x".repeat(300);
    let outs = sim.report("a", "authentication", &long);
    let x = sim.exclusion("a").unwrap();
    assert_eq!(x.kind, ExclusionKind::Run);
    assert_eq!(x.reason, format!("not signed in ({})", "x".repeat(160)));
    assert_eq!(x.description, format!("for this run: {}", x.reason));
    assert!(outs.persists().is_empty());
    assert!(sim.policy.persisted_state().exclusions.is_empty());
    // Out for the run: no timer brings it back.
    assert_eq!(sim.wake_at(), None);
    sim.run_to(T0 + 24 * HOUR - 9 * HOUR);
    assert_eq!(sim.exclusion("a").unwrap().kind, ExclusionKind::Run);
    assert_eq!(sim.granted("r1", "coder").0, "b");
}

#[test]
fn the_model_reason_is_cut_to_200_characters() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    let message = format!("model not found {}", "y".repeat(400));
    sim.report("a", "other", &message);
    let reason = sim.exclusion("a").unwrap().reason;
    let cut: String = message.chars().take(200).collect();
    assert_eq!(reason, format!("its model is unavailable ({cut})"));
}

// ---- Outages and health probes -----------------------------------------------------------

const URL: &str = "http://gpu-1:8080/health";

fn with_health() -> Sim {
    Sim::new(doc(vec![
        coder("a", json!({ "health": URL })),
        coder("b", json!({ "priority": 2 })),
    ]))
}

#[test]
fn an_outage_with_a_health_url_probes_at_once_and_up_brings_it_back() {
    let mut sim = with_health();
    let outs = sim.report("a", "outage", "ECONNREFUSED");
    let x = sim.exclusion("a").unwrap();
    assert_eq!(x.kind, ExclusionKind::Health);
    assert_eq!(x.reason, "serving engine down (ECONNREFUSED)");
    assert_eq!(outs.probes(), [("a".to_string(), URL.to_string())]);
    assert_eq!(
        outs.persisted().exclusions,
        [rota_core::Exclusion {
            id: "a".into(),
            reason: "serving engine down (ECONNREFUSED)".into(),
            kind: ExclusionKind::Health,
            // As the seed writes it: the report's time.
            until: Some(sim.now),
        }]
    );
    assert!(sim.exec("a").probe_in_flight);
    // b serves meanwhile.
    assert_eq!(sim.granted("r1", "coder").0, "b");
    sim.after(2 * SEC);
    let outs = sim.input(json!({ "type": "probeResult", "executor": "a", "up": true }));
    assert_eq!(
        outs.event("back").message,
        "a answers its health check again; back in the round"
    );
    assert!(outs.persisted().exclusions.is_empty());
    assert!(sim.exclusion("a").is_none());
    assert_eq!(sim.granted("r2", "coder").0, "a");
}

#[test]
fn health_probes_run_every_15s_while_a_request_waits_and_every_60s_otherwise() {
    let mut sim = with_health();
    sim.lease_with("r1", "coder", json!({ "prefer": "b" }));
    sim.report("a", "outage", "down");
    // Only one probe in flight: time passing does not ask again.
    sim.after(30 * SEC);
    assert!(sim.tick().probes().is_empty());
    assert_eq!(sim.wake_at(), None);
    // Down at T0+30s; nobody waits: the idle interval.
    let outs = sim.input(json!({ "type": "probeResult", "executor": "a", "up": false }));
    assert!(sim.exclusion("a").is_some());
    assert!(outs.persists().is_empty());
    assert_eq!(sim.wake_at(), Some(T0 + 30 * SEC + 60 * SEC));
    // A request that a could serve starts to wait: every 15 s from the last probe.
    sim.at(T0 + 40 * SEC);
    sim.lease("r2", "coder").no_grant();
    assert_eq!(sim.wake_at(), Some(T0 + 45 * SEC));
    let outs = sim.run_to(T0 + 45 * SEC);
    assert_eq!(outs.probes(), [("a".to_string(), URL.to_string())]);
    sim.input(json!({ "type": "probeResult", "executor": "a", "up": false }));
    assert_eq!(sim.wake_at(), Some(T0 + 60 * SEC));
    let outs = sim.run_to(T0 + 59 * SEC);
    assert!(outs.probes().is_empty());
    let outs = sim.run_to(T0 + 60 * SEC);
    assert_eq!(outs.probes().len(), 1);
    let outs = sim.input(json!({ "type": "probeResult", "executor": "a", "up": true }));
    assert_eq!(outs.grant_pairs(), [("r2".to_string(), "a".to_string())]);
    assert!(outs.has_event("back"));
}

#[test]
fn the_idle_probe_interval_is_an_option() {
    let mut sim = Sim::with_options(
        doc(vec![coder("a", json!({ "health": URL }))]),
        json!({ "idleProbeIntervalMs": 120000, "healthProbeIntervalMs": 5000 }),
    );
    sim.report("a", "outage", "down");
    sim.input(json!({ "type": "probeResult", "executor": "a", "up": false }));
    assert_eq!(sim.wake_at(), Some(T0 + 120 * SEC));
    sim.lease("r1", "coder");
    assert_eq!(sim.wake_at(), Some(T0 + 5 * SEC));
}

#[test]
fn an_outage_without_a_health_url_waits_out_the_outage_cooldown() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({})),
        coder("b", json!({ "cooldown": { "outage": "2 minutes" } })),
    ]));
    let outs = sim.report("a", "outage", "ECONNREFUSED");
    assert!(outs.probes().is_empty());
    assert_eq!(
        excluded_until(&sim, "a"),
        (ExclusionKind::Until, Some(T0 + 5 * MIN))
    );
    assert_eq!(
        sim.exclusion("a").unwrap().reason,
        "serving engine down (ECONNREFUSED)"
    );
    sim.report("b", "outage", "502");
    assert_eq!(
        excluded_until(&sim, "b"),
        (ExclusionKind::Until, Some(T0 + 2 * MIN))
    );
}

#[test]
fn a_host_that_cannot_probe_gets_the_outage_cooldown() {
    let mut sim = Sim::with_options(
        doc(vec![coder("a", json!({ "health": URL }))]),
        json!({ "canProbe": false }),
    );
    let outs = sim.report("a", "outage", "down");
    assert!(outs.probes().is_empty());
    assert_eq!(
        excluded_until(&sim, "a"),
        (ExclusionKind::Until, Some(T0 + 5 * MIN))
    );
    sim.lease("r1", "coder").no_grant();
    let outs = sim.run_to(T0 + 5 * MIN);
    assert!(sim
        .log
        .iter()
        .all(|o| !matches!(o, rota_core::Output::Probe { .. })));
    assert_eq!(outs.grant_pairs(), [("r1".to_string(), "a".to_string())]);
}

#[test]
fn other_errors_do_not_exclude() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({ "health": URL }))]));
    let outs = sim.report("a", "other", "the tests failed");
    assert!(sim.exclusion("a").is_none());
    assert!(outs.decisions().is_empty(), "{outs:#?}");
    assert_eq!(outs.event("failureIgnored").level, Level::Debug);
    assert_eq!(sim.granted("r1", "coder").0, "a");
}

// ---- Expiry, manual exclusion, resume -------------------------------------------------------

#[test]
fn an_expired_exclusion_returns_with_a_back_event_and_a_persist() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.report("a", "usageLimit", "limit");
    sim.lease("r1", "coder").no_grant();
    assert_eq!(sim.wake_at(), Some(T0 + 30 * MIN));
    let outs = sim.run_to(T0 + 30 * MIN - 1);
    assert!(outs.events().is_empty() && outs.decisions().is_empty());
    let outs = sim.run_to(T0 + 30 * MIN);
    assert_eq!(outs.messages("back"), ["a back in the round"]);
    assert_eq!(outs.persists().len(), 1);
    assert!(outs.persisted().exclusions.is_empty());
    assert_eq!(outs.grant_pairs(), [("r1".to_string(), "a".to_string())]);
    assert_eq!(sim.wake_at(), None);
}

#[test]
fn an_exclusion_expires_on_any_input_that_passes_its_time() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.report("a", "usageLimit", "limit");
    sim.at(T0 + HOUR);
    // No tick: the lease itself carries the time.
    let outs = sim.lease("r1", "coder");
    assert!(outs.has_event("back"));
    assert_eq!(outs.persists().len(), 1);
    assert_eq!(outs.grant().executor, "a");
}

#[test]
fn a_manual_exclusion_without_end_lasts_until_resumed() {
    let mut sim = Sim::new(doc(vec![
        coder("a", json!({})),
        coder("b", json!({ "priority": 2 })),
    ]));
    let outs = sim.input(json!({ "type": "exclude", "executor": "a", "reason": "maintenance" }));
    let x = sim.exclusion("a").unwrap();
    assert_eq!((x.kind, x.until), (ExclusionKind::Manual, None));
    assert_eq!(x.description, "paused: maintenance");
    assert_eq!(
        outs.event("excluded").message,
        "a out of the round paused: maintenance"
    );
    assert_eq!(
        outs.persisted().exclusions,
        [rota_core::Exclusion {
            id: "a".into(),
            reason: "maintenance".into(),
            kind: ExclusionKind::Manual,
            until: None,
        }]
    );
    assert_eq!(sim.wake_at(), None);
    sim.run_to(T0 + 10 * HOUR);
    assert_eq!(sim.exclusion("a").unwrap().kind, ExclusionKind::Manual);
    assert_eq!(sim.granted("r1", "coder").0, "b");
    let outs = sim.input(json!({ "type": "resume", "executor": "a" }));
    assert_eq!(outs.messages("resumed"), ["a resumed"]);
    assert!(outs.persisted().exclusions.is_empty());
    assert_eq!(sim.granted("r2", "coder").0, "a");
    // Resuming an executor in the round does nothing.
    let outs = sim.input(json!({ "type": "resume", "executor": "a" }));
    assert!(outs.0.is_empty(), "{outs:#?}");
}

#[test]
fn a_manual_exclusion_with_an_end_returns_at_its_end() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.input(json!({
        "type": "exclude", "executor": "a", "reason": "upgrade", "until": T0 + 15 * MIN
    }));
    let x = sim.exclusion("a").unwrap();
    assert_eq!(
        (x.kind, x.until),
        (ExclusionKind::Manual, Some(T0 + 15 * MIN))
    );
    assert_eq!(
        x.description,
        format!("paused until {}: upgrade", iso(T0 + 15 * MIN))
    );
    let outs = sim.run_to(T0 + 15 * MIN);
    assert_eq!(outs.messages("back"), ["a back in the round"]);
    assert!(outs.persisted().exclusions.is_empty());
}

#[test]
fn a_manual_exclusion_without_a_reason_says_who() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.input(json!({ "type": "exclude", "executor": "a" }));
    assert_eq!(
        sim.exclusion("a").unwrap().reason,
        "excluded by an operator"
    );
}

#[test]
fn resume_ends_any_exclusion_even_one_for_the_run() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({}))]));
    sim.report("a", "authentication", "no key");
    let outs = sim.input(json!({ "type": "resume", "executor": "a" }));
    assert_eq!(outs.messages("resumed"), ["a resumed"]);
    assert!(outs.persists().is_empty(), "nothing lasting changed");
    assert_eq!(sim.granted("r1", "coder").0, "a");
}

// ---- The state file -------------------------------------------------------------------------

fn five() -> Value {
    doc(vec![
        coder("a", json!({ "health": URL })),
        coder("b", json!({})),
        coder("c", json!({})),
        coder("d", json!({})),
        coder("e", json!({})),
    ])
}

#[test]
fn persisted_state_round_trips_through_restore() {
    let mut sim = Sim::new(five());
    sim.report("a", "outage", "down");
    sim.report("b", "usageLimit", "limit");
    sim.input(json!({ "type": "exclude", "executor": "c", "reason": "ops" }));
    sim.report("d", "authentication", "no key");
    sim.input(
        json!({ "type": "exclude", "executor": "e", "reason": "upgrade", "until": T0 + HOUR }),
    );
    // Each persist names the one executor whose lasting entry changed; the
    // authentication exclusion (for the run) is never written.
    let persisted: Vec<Vec<String>> = sim
        .log
        .iter()
        .filter_map(|o| match o {
            rota_core::Output::Persist { ids, .. } => Some(ids.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(persisted, [["a"], ["b"], ["c"], ["e"]]);
    let state = sim.file();
    assert_eq!(state.version, 1);
    let kinds: Vec<(&str, ExclusionKind, Option<u64>)> = state
        .exclusions
        .iter()
        .map(|x| (x.id.as_str(), x.kind, x.until))
        .collect();
    assert_eq!(
        kinds,
        [
            // The seed writes a health entry's `until` as the report's time.
            ("a", ExclusionKind::Health, Some(T0)),
            ("b", ExclusionKind::Until, Some(T0 + 30 * MIN)),
            ("c", ExclusionKind::Manual, None),
            ("e", ExclusionKind::Manual, Some(T0 + HOUR)),
        ],
        "run exclusions are never written"
    );
    assert_eq!(sim.lasting(), state);

    // The seed's file format, as JSON.
    let text = serde_json::to_value(&state).unwrap();
    assert_eq!(text["version"], json!(1));
    assert_eq!(
        text["exclusions"][1],
        json!({ "id": "b", "reason": "usage limit (limit)", "kind": "until", "until": T0 + 30 * MIN })
    );

    let mut fresh = Sim::new(five());
    fresh.at(T0 + MIN);
    let outs = fresh.input(json!({ "type": "restore", "state": text }));
    assert_eq!(fresh.lasting(), state);
    for id in ["a", "b", "c", "e"] {
        let (before, after) = (sim.exclusion(id).unwrap(), fresh.exclusion(id).unwrap());
        assert_eq!(
            (before.kind, before.until, &before.reason),
            (after.kind, after.until, &after.reason),
            "{id}"
        );
    }
    assert!(fresh.exclusion("d").is_none());
    assert!(outs.persists().is_empty(), "a restore writes nothing back");
    // The restored health exclusion is probed.
    assert_eq!(outs.probes(), [("a".to_string(), URL.to_string())]);
}

#[test]
fn restore_drops_expired_run_and_unknown_entries() {
    let state = json!({
        "version": 1,
        "exclusions": [
            { "id": "b", "reason": "usage limit (x)", "kind": "until", "until": T0 + 30 * MIN },
            { "id": "c", "reason": "ops", "kind": "manual", "until": T0 + HOUR },
            { "id": "d", "reason": "not signed in (x)", "kind": "run" },
            { "id": "e", "reason": "ops", "kind": "manual" },
            { "id": "zz", "reason": "another roster's", "kind": "until", "until": T0 + 5 * HOUR }
        ]
    });
    let mut sim = Sim::new(five());
    sim.at(T0 + 30 * MIN);
    sim.input(json!({ "type": "restore", "state": state }));
    assert!(sim.exclusion("b").is_none(), "expired at its until");
    assert_eq!(
        excluded_until(&sim, "c"),
        (ExclusionKind::Manual, Some(T0 + HOUR))
    );
    assert!(sim.exclusion("d").is_none(), "run entries are never loaded");
    assert_eq!(excluded_until(&sim, "e"), (ExclusionKind::Manual, None));
    assert!(!sim.has_exec("zz"));
    let mut later = Sim::new(five());
    later.at(T0 + 2 * HOUR);
    later.input(json!({ "type": "restore", "state": state }));
    assert!(later.exclusion("c").is_none());
    assert_eq!(later.exclusion("e").unwrap().kind, ExclusionKind::Manual);
}

#[test]
fn restored_exclusions_expire_with_a_back_event_and_a_persist() {
    let mut sim = Sim::new(five());
    sim.input(json!({ "type": "restore", "state": {
        "version": 1,
        "exclusions": [{ "id": "b", "reason": "usage limit (x)", "kind": "until", "until": T0 + MIN }]
    }}));
    let outs = sim.run_to(T0 + MIN);
    assert_eq!(outs.messages("back"), ["b back in the round"]);
    assert!(outs.persisted().exclusions.is_empty());
}

#[test]
fn a_persist_carries_only_the_entries_that_changed() {
    let mut sim = Sim::new(five());
    let outs = sim.report("b", "usageLimit", "limit");
    let (ids, state) = outs.persists()[0].clone();
    assert_eq!(ids, ["b"]);
    assert_eq!(state.exclusions.len(), 1);
    let outs = sim.input(json!({ "type": "exclude", "executor": "c", "reason": "ops" }));
    let (ids, state) = outs.persists()[0].clone();
    assert_eq!(ids, ["c"], "b's entry is unchanged, so not rewritten");
    assert_eq!(state.exclusions[0].id, "c");
    let outs = sim.input(json!({ "type": "resume", "executor": "b" }));
    let (ids, state) = outs.persists()[0].clone();
    assert_eq!(ids, ["b"]);
    assert!(state.exclusions.is_empty(), "b's entry is cleared");
    assert_eq!(sim.file(), sim.lasting());
    assert_eq!(sim.file().exclusions.len(), 1);
}

#[test]
fn a_reload_that_removes_an_excluded_executor_clears_its_entry() {
    let mut sim = Sim::new(doc(vec![coder("a", json!({})), coder("b", json!({}))]));
    sim.input(json!({ "type": "exclude", "executor": "a", "reason": "ops" }));
    let outs = sim.input(json!({ "type": "reload", "document": doc(vec![coder("b", json!({})), coder("c", json!({}))]) }));
    let (ids, state) = outs.persists()[0].clone();
    assert_eq!(ids, ["a"]);
    assert!(state.exclusions.is_empty());
    let outs = sim.report("c", "usageLimit", "limit");
    let (ids, state) = outs.persists()[0].clone();
    assert_eq!(ids, ["c"]);
    assert_eq!(state.exclusions.len(), 1);
    assert_eq!(sim.file(), sim.lasting());
}
