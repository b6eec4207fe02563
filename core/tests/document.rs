//! The roster document: validation (every violation at once, with paths), merge,
//! narrow and parseDuration, as the roster seed has them and as DESIGN.md extends
//! them.

mod common;

use common::*;
use rota_core::{merge, narrow, parse_duration, validate, Options, Policy, Violation};
use serde_json::{json, Value};

fn v(path: &str, message: &str) -> Violation {
    Violation {
        path: path.into(),
        message: message.into(),
    }
}

fn paths(violations: &[Violation]) -> Vec<String> {
    violations.iter().map(|v| v.path.clone()).collect()
}

fn one(executor: Value) -> Vec<Violation> {
    validate(&doc(vec![executor]), None)
}

#[test]
fn a_valid_document_has_no_violation() {
    let document = json!({ "executors": [
        {
            "id": "claude", "harness": "claude", "model": "sonnet",
            "flags": { "--effort": "high" }, "env": { "KEY": "${ANTHROPIC_KEY}" },
            "roles": ["coder", "reviewer"], "slots": 2, "coderSlots": 1,
            "priority": { "coder": 1, "default": 2 },
            "health": "https://gpu.example:8443/health",
            "cooldown": { "usageLimit": "2h", "rateLimit": "90s", "outage": "5 minutes" },
            "somethingNew": { "kept": true }
        },
        { "id": "lm", "harness": "lm-studio", "baseUrl": "http://127.0.0.1:1234/v1", "roles": ["judge"] },
        { "id": "vm", "harness": "exe", "roles": ["verifier"], "maxConcurrentAttempts": 3, "provision": { "image": "x" }, "kind": "exe.dev" },
        { "id": "off", "harness": "pi", "roles": ["planner"], "disabled": true }
    ]});
    assert_eq!(validate(&document, None), []);
    let policy = Policy::new(&document, Options::default()).unwrap();
    // Fields the core does not use pass through.
    assert_eq!(policy.document(), document);
    let vm = policy
        .snapshot()
        .executors
        .into_iter()
        .find(|x| x.id == "vm")
        .unwrap();
    assert_eq!(vm.slots, 3, "maxConcurrentAttempts is the slots' alias");
    assert!(vm.provision);
}

#[test]
fn every_violation_of_the_seed_is_reported_at_once_with_its_path() {
    let document = json!({ "executors": [
        { "id": "", "harness": "pi", "roles": ["coder"] },
        { "id": "a", "harness": "pi", "roles": ["coder"] },
        { "id": "a", "harness": "pi", "roles": ["coder"] },
        { "id": "b", "harness": "  ", "roles": ["coder"] },
        { "id": "c", "harness": "pi", "roles": ["coder", "chef"] },
        { "id": "d", "harness": "pi", "roles": [] },
        { "id": "e", "harness": "pi", "roles": ["coder"], "slots": 0 },
        { "id": "f", "harness": "pi", "roles": ["coder"], "slots": 1.5 },
        { "id": "g", "harness": "pi", "roles": ["coder", "reviewer"], "slots": 2, "coderSlots": 3 },
        { "id": "h", "harness": "pi", "roles": ["coder"], "cooldown": { "usageLimit": "soon" } }
    ]});
    let roles = "planner, coder, reviewer, judge, verifier";
    let expected = vec![
        v("executors[0].id", "an executor has an empty id"),
        v("executors[2].id", "executor 'a' is listed twice"),
        v("executors[3].harness", "executor 'b' has no harness"),
        v(
            "executors[4].roles",
            &format!("executor 'c' has unknown role(s) chef (roles: {roles})"),
        ),
        v("executors[5].roles", "executor 'd' takes no role"),
        v(
            "executors[6].slots",
            "executor 'e' needs a whole number of slots, at least 1",
        ),
        v(
            "executors[7].slots",
            "executor 'f' needs a whole number of slots, at least 1",
        ),
        v(
            "executors[8].coderSlots",
            "executor 'g' has coderSlots outside 0..slots",
        ),
        v(
            "executors[9].cooldown.usageLimit",
            "executor 'h' has an unreadable usageLimit cooldown 'soon'",
        ),
    ];
    let mut got = validate(&document, None);
    got.sort_by(|a, b| a.path.cmp(&b.path));
    assert_eq!(got, expected);
    // Creating a policy from it fails with the same list, all at once.
    let error = Policy::new(&document, Options::default()).unwrap_err();
    assert_eq!(error.code(), "INVALID_DOCUMENT");
    let json = error.to_json();
    assert_eq!(json["code"], "INVALID_DOCUMENT");
    assert_eq!(json["violations"].as_array().unwrap().len(), expected.len());
}

#[test]
fn a_role_list_of_only_unknown_roles_is_unknown_and_takes_no_role() {
    let got = one(json!({ "id": "a", "harness": "pi", "roles": ["chef", "waiter"] }));
    assert_eq!(
        got,
        [
            v(
                "executors[0].roles",
                "executor 'a' has unknown role(s) chef, waiter (roles: planner, coder, reviewer, judge, verifier)"
            ),
            v("executors[0].roles", "executor 'a' takes no role"),
        ]
    );
}

#[test]
fn missing_fields_are_violations() {
    let got = one(json!({ "harness": "pi", "roles": ["coder"] }));
    assert_eq!(paths(&got), ["executors[0].id"]);
    let got = one(json!({ "id": "a", "roles": ["coder"] }));
    assert_eq!(
        got,
        [v("executors[0].harness", "executor 'a' has no harness")]
    );
    let got = one(json!({ "id": "a", "harness": "pi" }));
    assert_eq!(got, [v("executors[0].roles", "executor 'a' takes no role")]);
    assert_eq!(paths(&validate(&json!({}), None)), ["executors"]);
    assert_eq!(paths(&validate(&json!([]), None)), ["$"]);
}

#[test]
fn slots_must_be_whole_and_at_least_one() {
    for slots in [json!(0), json!(-1), json!(2.5), json!("2"), json!(null)] {
        let got = one(json!({ "id": "a", "harness": "pi", "roles": ["coder"], "slots": slots }));
        assert_eq!(paths(&got), ["executors[0].slots"], "slots {slots}");
    }
    for slots in [json!(1), json!(4), json!(2.0)] {
        let got = one(json!({ "id": "a", "harness": "pi", "roles": ["coder"], "slots": slots }));
        assert_eq!(got, [], "slots {slots}");
    }
    let got =
        one(json!({ "id": "a", "harness": "pi", "roles": ["coder"], "maxConcurrentAttempts": 0 }));
    assert_eq!(paths(&got), ["executors[0].maxConcurrentAttempts"]);
}

#[test]
fn coder_slots_must_lie_in_zero_to_slots() {
    for coder_slots in [json!(-1), json!(3), json!(0.5)] {
        let got = one(json!({
            "id": "a", "harness": "pi", "roles": ["coder", "reviewer"], "slots": 2, "coderSlots": coder_slots
        }));
        assert_eq!(
            got,
            [v(
                "executors[0].coderSlots",
                "executor 'a' has coderSlots outside 0..slots"
            )],
            "coderSlots {coder_slots}"
        );
    }
    for coder_slots in [0, 1, 2] {
        let got = one(json!({
            "id": "a", "harness": "pi", "roles": ["coder", "reviewer"], "slots": 2, "coderSlots": coder_slots
        }));
        assert_eq!(got, []);
    }
}

#[test]
fn every_unreadable_cooldown_is_named() {
    let got = one(json!({
        "id": "a", "harness": "pi", "roles": ["coder"],
        "cooldown": { "usageLimit": "30 parsecs", "rateLimit": "10", "outage": "5m" }
    }));
    assert_eq!(
        got,
        [
            v(
                "executors[0].cooldown.rateLimit",
                "executor 'a' has an unreadable rateLimit cooldown '10'"
            ),
            v(
                "executors[0].cooldown.usageLimit",
                "executor 'a' has an unreadable usageLimit cooldown '30 parsecs'"
            ),
        ]
    );
    let got = one(
        json!({ "id": "a", "harness": "pi", "roles": ["coder"], "cooldown": { "outage": 300 } }),
    );
    assert_eq!(paths(&got), ["executors[0].cooldown.outage"]);
}

#[test]
fn bad_priorities_are_violations() {
    for (priority, path) in [
        (json!("high"), "executors[0].priority"),
        (json!(true), "executors[0].priority"),
        (json!({ "coder": "1" }), "executors[0].priority.coder"),
        (json!({ "chef": 1 }), "executors[0].priority.chef"),
        (json!({ "default": null }), "executors[0].priority.default"),
    ] {
        let got =
            one(json!({ "id": "a", "harness": "pi", "roles": ["coder"], "priority": priority }));
        assert_eq!(paths(&got), [path], "priority {priority}");
        assert!(got[0].message.starts_with("executor 'a' "), "{got:?}");
    }
    for priority in [
        json!(0),
        json!(-2),
        json!(1.5),
        json!({ "coder": 0, "default": 9 }),
    ] {
        let got =
            one(json!({ "id": "a", "harness": "pi", "roles": ["coder"], "priority": priority }));
        assert_eq!(got, [], "priority {priority}");
    }
}

#[test]
fn bad_health_urls_are_violations() {
    for url in [
        json!("ftp://gpu/health"),
        json!("http://"),
        json!("https:///health"),
        json!("gpu:8080/health"),
        json!("http://gpu /health"),
        json!(""),
        json!(8080),
    ] {
        let got = one(json!({ "id": "a", "harness": "pi", "roles": ["coder"], "health": url }));
        assert_eq!(paths(&got), ["executors[0].health"], "health {url}");
        assert!(got[0].message.starts_with("executor 'a' "), "{got:?}");
    }
    for url in [
        "http://gpu:8080/health",
        "https://gpu.example/health?x=1",
        "http://127.0.0.1:1234",
        "http://[::1]:8080/h",
    ] {
        let got = one(json!({ "id": "a", "harness": "pi", "roles": ["coder"], "health": url }));
        assert_eq!(got, [], "health {url}");
    }
}

#[test]
fn role_slot_problems_are_violations() {
    for (role_slots, path) in [
        (json!({ "reviewer": 3 }), "executors[0].roleSlots.reviewer"),
        (json!({ "reviewer": -1 }), "executors[0].roleSlots.reviewer"),
        (
            json!({ "reviewer": 1.5 }),
            "executors[0].roleSlots.reviewer",
        ),
        (json!({ "chef": 1 }), "executors[0].roleSlots.chef"),
        (json!([1]), "executors[0].roleSlots"),
    ] {
        let got = one(json!({
            "id": "a", "harness": "pi", "roles": ["reviewer", "judge"], "slots": 2, "roleSlots": role_slots
        }));
        assert_eq!(paths(&got), [path], "roleSlots {role_slots}");
    }
    // coderSlots and roleSlots.coder must agree.
    let got = one(json!({
        "id": "a", "harness": "pi", "roles": ["coder", "judge"], "slots": 3,
        "coderSlots": 1, "roleSlots": { "coder": 2 }
    }));
    assert_eq!(paths(&got), ["executors[0].coderSlots"]);
}

#[test]
fn violations_of_several_executors_and_kinds_come_together() {
    let document = json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"], "priority": "x", "health": "nope" },
        { "id": "b", "harness": "", "roles": ["judge"], "roleSlots": { "judge": 9 }, "cooldown": { "outage": "?" } }
    ]});
    let mut got = paths(&validate(&document, None));
    got.sort();
    assert_eq!(
        got,
        [
            "executors[0].health",
            "executors[0].priority",
            "executors[1].cooldown.outage",
            "executors[1].harness",
            "executors[1].roleSlots.judge",
        ]
    );
}

#[test]
fn a_declared_role_list_replaces_the_seeds_five() {
    let document = json!({
        "roles": ["build", "test"],
        "executors": [{ "id": "a", "harness": "pi", "roles": ["build", "test"], "slots": 2 }]
    });
    assert_eq!(validate(&document, None), []);
    let mut sim = Sim::new(document);
    assert_eq!(sim.snapshot().roles, ["build", "test"]);
    assert_eq!(sim.granted("r1", "build").0, "a");
    let error = sim.refused(json!({ "type": "lease", "id": "r2", "role": "coder" }));
    assert_eq!(error.code(), "UNKNOWN_ROLE");
    // The seed's roles are unknown to it.
    let got = validate(
        &json!({ "roles": ["build"], "executors": [{ "id": "a", "harness": "pi", "roles": ["coder"] }] }),
        None,
    );
    assert_eq!(
        got[0],
        v(
            "executors[0].roles",
            "executor 'a' has unknown role(s) coder (roles: build)"
        )
    );
}

#[test]
fn host_kinds_make_another_kind_a_violation() {
    let kinds = vec!["docker".to_string()];
    let document = doc(vec![
        ex("a", &["coder"], json!({ "kind": "docker" })),
        ex("b", &["coder"], json!({ "kind": "exe.dev" })),
    ]);
    let got = validate(&document, Some(&kinds));
    assert_eq!(paths(&got), ["executors[1].kind"]);
    assert!(got[0].message.contains("exe.dev") && got[0].message.contains("docker"));
    assert_eq!(validate(&document, None), []);
}

// ---- merge ---------------------------------------------------------------------------------

#[test]
fn merge_replaces_same_ids_removes_disabled_and_adds_new_ones() {
    let user = doc(vec![
        ex("a", &["coder"], json!({ "harness": "pi" })),
        ex("b", &["coder"], json!({ "harness": "pi", "slots": 2 })),
        ex("c", &["judge"], json!({})),
    ]);
    let repo = doc(vec![
        ex("b", &["reviewer"], json!({ "harness": "claude" })),
        json!({ "id": "c", "disabled": true }),
        ex("d", &["verifier"], json!({ "local": "kept" })),
        json!({ "id": "e", "harness": "pi", "roles": ["coder"], "disabled": true }),
    ]);
    let merged = merge(&user, &repo).unwrap();
    assert_eq!(
        merged,
        doc(vec![
            ex("a", &["coder"], json!({ "harness": "pi" })),
            ex("b", &["reviewer"], json!({ "harness": "claude" })),
            ex("d", &["verifier"], json!({ "local": "kept" })),
        ])
    );
    assert_eq!(validate(&merged, None), []);
}

#[test]
fn merge_with_a_missing_side_is_the_other() {
    let user = doc(vec![ex("a", &["coder"], json!({}))]);
    assert_eq!(merge(&user, &Value::Null).unwrap(), user);
    assert_eq!(merge(&Value::Null, &user).unwrap(), user);
    assert_eq!(merge(&Value::Null, &Value::Null).unwrap(), doc(vec![]));
    // A disabled entry in the user's own roster is removed too.
    let user = doc(vec![
        ex("a", &["coder"], json!({ "disabled": true })),
        ex("b", &["coder"], json!({})),
    ]);
    assert_eq!(
        merge(&user, &Value::Null).unwrap(),
        doc(vec![ex("b", &["coder"], json!({}))])
    );
}

#[test]
fn merge_refuses_a_side_that_is_not_a_roster() {
    let error = merge(&json!({ "executors": 3 }), &Value::Null).unwrap_err();
    assert_eq!(paths(&error), ["user.executors"]);
    let error = merge(&Value::Null, &json!({ "executors": [{ "harness": "pi" }] })).unwrap_err();
    assert_eq!(paths(&error), ["repo.executors[0].id"]);
}

// ---- narrow ---------------------------------------------------------------------------------

#[test]
fn narrow_keeps_only_the_named_executors_in_document_order() {
    let document = doc(vec![
        ex("a", &["coder"], json!({})),
        ex("b", &["coder"], json!({})),
        ex("c", &["coder"], json!({})),
    ]);
    let ids = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let narrowed = narrow(&document, &ids(&["c", "a"])).unwrap();
    assert_eq!(
        narrowed.document,
        doc(vec![
            ex("a", &["coder"], json!({})),
            ex("c", &["coder"], json!({}))
        ])
    );
    assert_eq!(narrowed.warning(), None);
    assert_eq!(narrow(&document, &[]).unwrap().document, document);
}

#[test]
fn narrow_ignores_unknown_ids_with_a_warning_naming_them() {
    // The seed's `narrowRoster` filters by the ids it has: an unknown one is ignored,
    // not a refused document (issue 13); rota names it so a typo does not pass quietly.
    let document = doc(vec![
        ex("a", &["coder"], json!({})),
        ex("b", &["coder"], json!({})),
    ]);
    let ids = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let narrowed = narrow(&document, &ids(&["a", "zz", "yy", "zz"])).unwrap();
    assert_eq!(narrowed.document, doc(vec![ex("a", &["coder"], json!({}))]));
    assert_eq!(narrowed.unknown, ["zz", "yy"]);
    assert_eq!(
        narrowed.warning(),
        Some(v(
            "executors",
            "executors 'zz', 'yy' are not in the roster; narrowing ignores them"
        ))
    );
    let one = narrow(&document, &ids(&["q"])).unwrap();
    assert_eq!(one.document, doc(vec![]));
    assert_eq!(
        one.warning().unwrap().message,
        "executor 'q' is not in the roster; narrowing ignores it"
    );
    // A document narrowing cannot read is still refused.
    assert!(narrow(&json!({}), &ids(&["a"])).is_err());
}

// ---- parseDuration --------------------------------------------------------------------------

#[test]
fn parse_duration_reads_every_unit_spelling_of_the_seed() {
    for (unit, scale) in [
        ("ms", 1),
        ("milli", 1),
        ("millis", 1),
        ("millisecond", 1),
        ("milliseconds", 1),
        ("s", 1_000),
        ("sec", 1_000),
        ("secs", 1_000),
        ("second", 1_000),
        ("seconds", 1_000),
        ("m", 60_000),
        ("min", 60_000),
        ("mins", 60_000),
        ("minute", 60_000),
        ("minutes", 60_000),
        ("h", 3_600_000),
        ("hour", 3_600_000),
        ("hours", 3_600_000),
    ] {
        for text in [
            format!("7{unit}"),
            format!("7 {unit}"),
            format!("  7   {unit}  "),
            format!("7{}", unit.to_uppercase()),
        ] {
            assert_eq!(parse_duration(&text), Some(7 * scale), "{text:?}");
        }
    }
    assert_eq!(parse_duration("30 minutes"), Some(30 * MIN));
    assert_eq!(parse_duration("90s"), Some(90 * SEC));
    assert_eq!(parse_duration("2h"), Some(2 * HOUR));
    assert_eq!(parse_duration("1.5 hours"), Some(90 * MIN));
    assert_eq!(parse_duration("0.25s"), Some(250));
    assert_eq!(parse_duration("0ms"), Some(0));
    assert_eq!(parse_duration("007 Minutes"), Some(7 * MIN));
}

#[test]
fn parse_duration_rejects_anything_else() {
    for text in [
        "",
        " ",
        "soon",
        "30",
        "minutes",
        "-5s",
        "+5s",
        "5 days",
        "5d",
        "5 weeks",
        "5.s",
        ".5s",
        "5..1s",
        "5 m s",
        "5ms5",
        "1e3s",
        "5s!",
        "5 µs",
        "5_000ms",
        "five minutes",
        "5 hrs",
        "5 msec",
        "5 sek",
    ] {
        assert_eq!(parse_duration(text), None, "{text:?}");
    }
}

/// The running document is kept as its parts (the executors' entries live in their
/// specs, once): `document()` and the export give it back as written, after reloads
/// that reorder, drop (a draining executor) and add executors, in both forms.
#[test]
fn the_document_as_written_survives_reloads_drains_and_an_export() {
    let first = json!({
        "roles": ["coder", "reviewer"],
        "note": { "kept": [1, 2] },
        "executors": [
            { "id": "a", "harness": "pi", "roles": ["coder"], "zeta": 1, "alpha": "x" },
            { "id": "b", "harness": "pi", "roles": ["coder"], "slots": 2 },
            { "id": "c", "harness": "pi", "roles": ["reviewer"], "disabled": true },
        ],
        "workers": [{ "name": "w", "maxConcurrentAttempts": 2 }],
    });
    let mut sim = Sim::new(first.clone());
    assert_eq!(sim.policy.document(), first);
    assert_eq!(sim.policy.document_text(), first.to_string());
    let on = sim.lease_with("r1", "coder", json!({ "pin": "a" })).grant();
    let second = json!({
        "roles": ["coder", "reviewer"],
        "executors": [
            { "id": "d", "harness": "pi", "roles": ["reviewer"], "new": true },
            { "id": "b", "harness": "pi", "roles": ["coder"], "slots": 3 },
        ],
        "workers": { "w": { "maxConcurrentAttempts": 1 } },
    });
    sim.input(json!({ "type": "reload", "document": second }));
    assert!(
        sim.policy
            .snapshot()
            .executors
            .iter()
            .any(|x| x.id == on.executor && x.draining),
        "{} drains",
        on.executor
    );
    assert_eq!(sim.policy.document(), second);
    assert_eq!(sim.policy.document_text(), second.to_string());
    let exported = sim.policy.export_state();
    assert_eq!(exported["document"], second);
    let imported = Policy::import_state(&exported).unwrap();
    assert_eq!(imported.document(), second);
    assert_eq!(imported.export_state(), exported, "the round trip is exact");
    let empty = json!({ "executors": [] });
    sim.input(json!({ "type": "reload", "document": empty }));
    assert_eq!(sim.policy.document(), empty);
}
