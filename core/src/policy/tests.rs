//! Unit tests that reach inside the policy: the queue's bound (lowered here, since a
//! million waiting requests is no unit test), time arithmetic at the ends of `u64`
//! and of a JSON number, and the import's refusals naming the field.

use serde_json::{json, Value};

use crate::protocol::{ExclusionKind, Failure, FailureKind, Input, LeaseRequest, Options, Output};

use super::Policy;

const MAX_SAFE: u64 = (1 << 53) - 1;
const T0: u64 = 1_800_000_000_000;

fn lease(now: u64, id: &str, role: &str) -> LeaseRequest {
    LeaseRequest {
        now,
        id: id.into(),
        role: role.into(),
        avoid: Vec::new(),
        prefer: None,
        pin: None,
        rank: None,
        event_time: None,
        label: None,
        purpose: None,
        deadline: None,
        owner: None,
        borrow: None,
        tenant: None,
        affinity: None,
        timeout_ms: None,
    }
}

fn outputs(policy: &mut Policy) -> Vec<Output> {
    std::iter::from_fn(|| policy.poll_output()).collect()
}

fn granted(outputs: &[Output]) -> Option<u64> {
    outputs.iter().find_map(|o| match o {
        Output::Granted { lease, .. } => Some(*lease),
        _ => None,
    })
}

fn failure(kind: FailureKind, retry_after_ms: Option<u64>, reset_at: Option<u64>) -> Failure {
    Failure {
        kind: Some(kind),
        tag: None,
        status: None,
        code: None,
        message: "boom".into(),
        reset_at,
        retry_after_ms,
    }
}

#[test]
fn a_lease_that_would_wait_beyond_the_bound_is_refused_and_changes_nothing() {
    let doc = json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 1 },
        { "id": "b", "harness": "pi", "roles": ["reviewer"], "slots": 1 },
    ]});
    let mut policy = Policy::new(&doc, Options::default()).expect("a roster");
    policy.queue.capacity = 2;
    policy
        .handle(Input::Lease(lease(T0, "r0", "coder")))
        .expect("a lease");
    let first = granted(&outputs(&mut policy)).expect("the free slot");
    for id in ["r1", "r2"] {
        policy
            .handle(Input::Lease(lease(T0, id, "coder")))
            .expect("it waits");
        outputs(&mut policy);
    }
    let before = policy.export_state();
    let error = policy
        .handle(Input::Lease(lease(T0 + 1, "r3", "coder")))
        .expect_err("the queue is full");
    assert_eq!(error.code(), "INVALID_INPUT");
    assert!(
        error.to_string().contains("2 requests already wait"),
        "{error}"
    );
    assert_eq!(
        policy.export_state(),
        before,
        "a refused input changes nothing"
    );
    // A tryLease never waits; a lease a free slot serves now is granted.
    policy
        .handle(Input::TryLease(lease(T0, "t", "coder")))
        .expect("answered");
    assert!(matches!(
        outputs(&mut policy)[..],
        [Output::Unavailable { .. }, ..]
    ));
    policy
        .handle(Input::Lease(lease(T0, "x", "reviewer")))
        .expect("a free slot");
    assert!(granted(&outputs(&mut policy)).is_some());
    // Once one is served there is room again.
    policy
        .handle(Input::Release {
            now: T0 + 2,
            lease: first,
        })
        .expect("released");
    outputs(&mut policy);
    policy
        .handle(Input::Lease(lease(T0 + 2, "r3", "coder")))
        .expect("room again");
}

/// Options and cooldowns at their largest, times at 2^53 − 1: every end saturates
/// instead of overflowing (a panic natively, a wrap in the wasm build that never
/// probes the executor again).
#[test]
fn time_arithmetic_saturates_at_the_largest_options_and_2_pow_53() {
    let huge = "9007199254740991ms";
    let cooldown = json!({ "usageLimit": huge, "rateLimit": huge, "outage": huge });
    let doc = json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["planner"], "slots": 1,
          "provision": { "image": "worker" }, "cooldown": cooldown },
        { "id": "b", "harness": "pi", "roles": ["coder"], "slots": 1,
          "health": "http://127.0.0.1:9/b", "cooldown": cooldown },
        { "id": "c", "harness": "pi", "roles": ["coder"], "slots": 1, "cooldown": cooldown },
    ]});
    for options in [
        // The longest each option may be (`limits.rs`: longer ones are refused as
        // INVALID_OPTIONS, at creation and on import), with times near 2^53-1.
        Options {
            health_probe_interval_ms: *crate::limits::HEALTH_PROBE_INTERVAL_MS.end(),
            idle_probe_interval_ms: *crate::limits::IDLE_PROBE_INTERVAL_MS.end(),
            rate_limit_window_ms: *crate::limits::RATE_LIMIT_WINDOW_MS.end(),
            rate_limits_to_exclude: 2,
            provision_first_pause_ms: *crate::limits::PROVISION_FIRST_PAUSE_MS.end(),
            provision_max_pause_ms: *crate::limits::PROVISION_MAX_PAUSE_MS.end(),
            ..Options::default()
        },
        Options {
            can_probe: false,
            provision_first_pause_ms: *crate::limits::PROVISION_FIRST_PAUSE_MS.end(),
            provision_max_pause_ms: *crate::limits::PROVISION_MAX_PAUSE_MS.end(),
            ..Options::default()
        },
    ] {
        let mut policy = Policy::new(&doc, options).expect("a roster");
        let now = MAX_SAFE - 10;
        let feed = |policy: &mut Policy, input: Input| {
            policy.handle(input).expect("accepted");
            let out = outputs(policy);
            let timeout = policy.poll_timeout();
            assert!(timeout.is_none_or(|t| t >= policy.now().min(MAX_SAFE - 10)));
            out
        };
        // A machine that keeps failing: the pause doubles into saturation.
        feed(&mut policy, Input::Lease(lease(now, "m", "planner")));
        for i in 0..3 {
            let failed = Input::MachineFailed {
                now: now + i,
                id: "m".into(),
                message: "quota".into(),
                reason: None,
            };
            if policy.queue.requests.get("m").is_some_and(|q| !q.waiting()) {
                feed(&mut policy, failed);
            }
        }
        // Rate limits in a week-long window, a usage limit retried after 2^53 - 1 ms,
        // an outage probed at a week's interval, a deadline at 2^53 - 1.
        for executor in ["b", "c"] {
            for _ in 0..2 {
                let rate = failure(FailureKind::RateLimit, None, None);
                feed(
                    &mut policy,
                    Input::Report {
                        now,
                        executor: executor.into(),
                        failure: rate,
                    },
                );
            }
        }
        // The largest an input may carry (`limits.rs`: past 2^53-1 is INVALID_INPUT).
        let usage = failure(FailureKind::UsageLimit, Some(MAX_SAFE), Some(MAX_SAFE));
        feed(
            &mut policy,
            Input::Report {
                now,
                executor: "c".into(),
                failure: usage,
            },
        );
        feed(
            &mut policy,
            Input::Resume {
                now,
                executor: "b".into(),
            },
        );
        let outage = failure(FailureKind::Outage, None, None);
        feed(
            &mut policy,
            Input::Report {
                now,
                executor: "b".into(),
                failure: outage,
            },
        );
        feed(
            &mut policy,
            Input::ProbeResult {
                now: now + 1,
                executor: "b".into(),
                up: false,
            },
        );
        let mut waits = lease(now, "w", "coder");
        waits.deadline = Some(MAX_SAFE);
        feed(&mut policy, Input::Lease(waits));
        feed(&mut policy, Input::Tick { now: MAX_SAFE });
        // The state at these times exports and imports again.
        let again = Policy::import_state(&policy.export_state()).expect("a real export");
        assert_eq!(again.export_state(), policy.export_state());
    }
}

/// The same arithmetic with every option at `u64::MAX`, past the ranges `Policy::new`
/// refuses (set here from inside the crate): the saturation, not the ranges alone,
/// keeps `now + interval`, the window and the pause doubling from overflowing.
#[test]
fn time_arithmetic_saturates_with_options_at_u64_max() {
    let doc = json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["planner"], "slots": 1,
          "provision": { "image": "worker" } },
        { "id": "b", "harness": "pi", "roles": ["coder"], "slots": 1,
          "health": "http://127.0.0.1:9/b" },
    ]});
    let mut policy = Policy::new(&doc, Options::default()).expect("a roster");
    let o = &mut policy.options;
    o.health_probe_interval_ms = u64::MAX;
    o.idle_probe_interval_ms = u64::MAX;
    o.rate_limit_window_ms = u64::MAX;
    o.provision_first_pause_ms = u64::MAX;
    o.provision_max_pause_ms = u64::MAX;
    let now = MAX_SAFE - 10;
    let inputs = [
        Input::Lease(lease(now, "m", "planner")),
        Input::MachineFailed {
            now,
            id: "m".into(),
            message: "quota".into(),
            reason: None,
        },
        Input::Report {
            now,
            executor: "b".into(),
            failure: failure(FailureKind::RateLimit, None, None),
        },
        Input::Report {
            now,
            executor: "b".into(),
            failure: failure(FailureKind::Outage, None, None),
        },
        Input::ProbeResult {
            now: now + 1,
            executor: "b".into(),
            up: false,
        },
        Input::Tick { now: MAX_SAFE },
    ];
    for input in inputs {
        policy.handle(input).expect("accepted");
        outputs(&mut policy);
        assert!(policy.poll_timeout().is_none_or(|t| t >= now));
    }
    let pause = policy.roster.executors[0]
        .runtime
        .pause
        .as_ref()
        .map(|p| p.until);
    assert_eq!(pause, Some(u64::MAX), "the pause saturates");
}

/// A real export with leases and waiters.
fn real_export() -> Value {
    let doc = json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 2 },
        { "id": "b", "harness": "pi", "roles": ["coder", "reviewer"], "slots": 1 },
    ]});
    let mut policy = Policy::new(&doc, Options::default()).expect("a roster");
    for i in 1..=5 {
        policy
            .handle(Input::Lease(lease(T0, &format!("r{i}"), "coder")))
            .expect("a lease");
    }
    outputs(&mut policy);
    policy.export_state()
}

#[test]
fn contradictory_exports_are_refused_naming_the_field() {
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit); 10] = [
        ("nextLease", |s| s["nextLease"] = json!(1)),
        ("which the roster does not have", |s| {
            s["leases"]["1"]["executor"] = json!("ghost")
        }),
        ("could be served", |s| s["leases"] = json!({})),
        ("holds lease", |s| {
            s["leases"]["1001"] = s["leases"]["1"].clone();
            s["nextLease"] = json!(1002);
        }),
        ("now", |s| s["now"] = json!(u64::MAX)),
        ("listed twice", |s| {
            let first = s["requests"][0].clone();
            if let Some(requests) = s["requests"].as_array_mut() {
                requests.push(first);
            }
        }),
        ("arrival", |s| {
            s["requests"][1]["key"][3] = s["requests"][0]["key"][3].clone()
        }),
        ("is after now", |s| {
            s["requests"][0]["since"] = json!(T0 + 1);
            s["requests"][0]["key"][2] = json!(T0 + 1);
        }),
        ("nextArrival", |s| s["nextArrival"] = json!(0)),
        ("lease ids start at 1", |s| s["nextLease"] = json!(0)),
    ];
    let base = real_export();
    Policy::import_state(&base).expect("the real export imports");
    for (named, edit) in cases {
        let mut state = base.clone();
        edit(&mut state);
        let error = Policy::import_state(&state).expect_err(named);
        assert_eq!(error.code(), "INVALID_STATE", "{named}: {error}");
        assert!(
            error.to_string().contains(named),
            "want '{named}' in: {error}"
        );
    }
}

/// A host that reads its outputs late (after later inputs) reads the outputs it would
/// have read at once: the queue's references (a grant, its event, a release's event)
/// are built before their lease closes and before a removal or a reload moves the
/// executors (`outputs.rs`).
#[test]
fn outputs_read_late_are_the_outputs_read_at_once() {
    let doc = json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 1 },
        { "id": "b", "harness": "pi", "roles": ["coder"], "slots": 2 },
        { "id": "c", "harness": "pi", "roles": ["coder"], "slots": 1 },
    ]});
    // Without `a`: it drains, and leaves (moving the executors) when its lease ends.
    let without_a = json!({ "executors": [
        { "id": "b", "harness": "pi", "roles": ["coder"], "slots": 2 },
        { "id": "c", "harness": "pi", "roles": ["coder"], "slots": 1 },
    ]});
    // Then without `b`, which the executors hold before `c` (`a` came back last).
    let without_b = json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 1 },
        { "id": "c", "harness": "pi", "roles": ["coder"], "slots": 1 },
    ]});
    let mut labelled = lease(T0, "r2", "coder");
    labelled.label = Some("w2".into());
    // Owner `o`'s leases on `c` and then on `b`: expiring it releases the one on `c`
    // (its event queued, naming `c` by index) before `b`'s last lease ends and `b`
    // leaves, within one input.
    let owned = |id: &str, on: &str| {
        let mut request = lease(T0 + 5, id, "coder");
        request.owner = Some("o".into());
        request.pin = Some(on.into());
        Input::Lease(request)
    };
    let inputs = vec![
        Input::Lease(lease(T0, "r1", "coder")),
        Input::Lease(labelled),
        Input::Lease(lease(T0, "r3", "coder")),
        Input::Lease(lease(T0, "r4", "coder")),
        Input::Lease(lease(T0, "r5", "coder")),
        // Released before its grant (queued with it) was read.
        Input::Release {
            now: T0 + 1,
            lease: 1,
        },
        Input::Reload {
            now: T0 + 2,
            document: without_a.clone(),
        },
        Input::Release {
            now: T0 + 3,
            lease: 2,
        },
        Input::Release {
            now: T0 + 3,
            lease: 3,
        },
        Input::Release {
            now: T0 + 4,
            lease: 5,
        },
        Input::Release {
            now: T0 + 4,
            lease: 4,
        },
        Input::Reload {
            now: T0 + 5,
            document: doc.clone(),
        },
        owned("r6", "c"),
        owned("r7", "b"),
        Input::Reload {
            now: T0 + 6,
            document: without_b,
        },
        Input::ExpireOwner {
            now: T0 + 7,
            owner: "o".into(),
        },
    ];
    let mut at_once = Policy::new(&doc, Options::default()).expect("a roster");
    let mut late = at_once.clone();
    let mut read = Vec::new();
    for input in &inputs {
        at_once.handle(input.clone()).expect("accepted");
        read.extend(outputs(&mut at_once));
        late.handle(input.clone()).expect("accepted");
        late.check_invariants();
    }
    let left = read
        .iter()
        .filter(|o| matches!(o, Output::Event { name, .. } if name == "left"))
        .count();
    assert_eq!(left, 2, "the trace removes an executor twice: {read:?}");
    // The owner's lease on `c` (lease 6) was released before `b` left, in one input.
    let released: Vec<&Output> = read
        .iter()
        .filter(|o| matches!(o, Output::Event { name, .. } if name == "released"))
        .collect();
    let Some(Output::Event {
        message, fields, ..
    }) = released.last()
    else {
        panic!("no release: {read:?}");
    };
    assert_eq!(message, "c's slot is released");
    assert_eq!(fields.get("lease"), Some(&json!(6)));
    // An export carries the unread outputs, built.
    let mut imported = Policy::import_state(&late.export_state()).expect("its own export");
    assert_eq!(outputs(&mut imported), read, "the export's outputs");
    assert_eq!(outputs(&mut late), read);
    assert_eq!(late.export_state(), at_once.export_state());
}

// The kept reports are checked in debug builds only (see `verify`).
#[cfg(debug_assertions)]
#[test]
fn a_kept_waiting_report_that_no_longer_says_what_is_true_is_a_violation() {
    let doc = json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 1 },
    ]});
    let mut policy = Policy::new(&doc, Options::default()).expect("a roster");
    let waiter = |id: &str| Input::Lease(lease(1, id, "coder"));
    policy.handle(waiter("r0")).expect("granted");
    policy.handle(waiter("r1")).expect("waits");
    while policy.poll_output().is_some() {}
    let coder = policy.document.roles.iter().position(|r| r == "coder");
    let coder = coder.expect("the coder role");
    assert_eq!(policy.roster.reports[coder].as_deref(), Some("a busy"));
    // A kept report that says what is no longer true.
    policy.roster.reports[coder] = Some("a paused".into());
    let violation = policy.verify().expect_err("the report is stale");
    assert_eq!(violation.invariant, "waiting reports");
    assert!(violation.detail.contains("\"a busy\""), "{violation}");
    policy.roster.reports[coder] = Some("a busy".into());
    assert_eq!(policy.verify(), Ok(()));
    // A pause through its input: the next waiter's report says so.
    policy
        .handle(Input::Exclude {
            now: 1,
            executor: "a".into(),
            kind: ExclusionKind::Manual,
            reason: "maintenance".into(),
            until: None,
        })
        .expect("exclude");
    policy.handle(waiter("r2")).expect("waits");
    let mut report = None;
    while let Some(output) = policy.poll_output() {
        if let Output::Waiting { report: r, .. } = output {
            report = Some(r);
        }
    }
    assert_eq!(report.as_deref(), Some("a paused: maintenance"));
    assert_eq!(policy.verify(), Ok(()));
}

/// Issue 43 item 3: clone numbers and purposes are state: an export carries them, an
/// import takes them back (the next lease still takes the lowest free number), and a
/// state that gives one clone number to two leases of an executor is refused.
#[test]
fn clone_numbers_and_purposes_survive_export_and_import() {
    let doc = json!({ "clones": "numbered", "executors": [
        { "id": "a", "harness": "codex", "roles": ["coder"], "slots": 3 },
    ]});
    let mut policy = Policy::new(&doc, Options::default()).expect("a roster");
    for i in 1..=3 {
        let mut request = lease(T0, &format!("r{i}"), "coder");
        request.purpose = Some(format!("lens {i}"));
        policy.handle(Input::Lease(request)).expect("a lease");
    }
    policy
        .handle(Input::Release { now: T0, lease: 1 })
        .expect("a release");
    outputs(&mut policy);
    let state = policy.export_state();
    assert_eq!(state["leases"]["2"]["clone"], json!(2));
    assert_eq!(state["leases"]["3"]["purpose"], json!("lens 3"));
    let mut imported = Policy::import_state(&state).expect("its own export");
    assert_eq!(imported.export_state(), state);
    imported
        .handle(Input::Lease(lease(T0, "r4", "coder")))
        .expect("a lease");
    let clone = outputs(&mut imported).iter().find_map(|o| match o {
        Output::Granted { clone, .. } => *clone,
        _ => None,
    });
    assert_eq!(clone, Some(1), "the lowest free number, after the import");

    let mut twice = state.clone();
    twice["leases"]["3"]["clone"] = json!(2);
    let error = Policy::import_state(&twice).expect_err("one number, two leases");
    assert!(
        error
            .to_string()
            .contains("invariant `clones` broken: executor a: its leases' clone numbers repeat"),
        "{error}"
    );
}

/// An executor's effort is the document's: a policy imported from an export answers
/// `effort_of` as the one exported (issue 43 item 7), and a removed executor answers
/// while its lease runs.
#[test]
fn effort_survives_export_import_and_a_reload_that_removes_it() {
    let document = json!({"executors": [
        {"id": "a", "harness": "pi", "roles": ["coder", "judge"], "effort": {"judge": "max", "default": "low"}},
        {"id": "b", "harness": "pi", "roles": ["coder"], "priority": 2}
    ]});
    let mut policy = Policy::new(&document, Options::default()).expect("a valid document");
    policy
        .handle(Input::Lease(lease(T0, "r1", "coder")))
        .expect("accepted");
    assert_eq!(granted(&outputs(&mut policy)), Some(1));
    let again = Policy::import_state(&policy.export_state()).expect("a real export");
    for p in [&policy, &again] {
        assert_eq!(p.effort_of("a", "judge").ok(), Some(Some("max")));
        assert_eq!(p.effort_of("a", "coder").ok(), Some(Some("low")));
        assert_eq!(p.effort_of("b", "coder").ok(), Some(None));
    }
    let mut policy = again;
    let reload = json!({"executors": [{"id": "b", "harness": "pi", "roles": ["coder"]}]});
    policy
        .handle(Input::Reload {
            now: T0 + 1,
            document: reload,
        })
        .expect("accepted");
    outputs(&mut policy);
    assert_eq!(policy.effort_of("a", "coder").ok(), Some(Some("low")));
}
