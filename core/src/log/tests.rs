use serde_json::{json, Value};

use super::*;
use crate::protocol::Options;

fn document() -> Value {
    json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"], "health": "http://a/health" },
        { "id": "m", "harness": "pi", "roles": ["coder"], "provision": { "kind": "vm" } },
    ]})
}

#[test]
fn the_genesis_fixes_preflight_off_and_reads_back() {
    let entry = genesis_entry(
        &document(),
        &json!({ "preflightReloads": true, "preflight": true, "canProbe": false }),
    )
    .expect("a genesis");
    assert!(entry.starts_with("{\"type\":\"genesis\",\"log\":1,\"document\":"));
    let genesis = read_genesis(&entry).expect("readable");
    assert_eq!(genesis.document, document());
    assert_eq!(
        genesis.options,
        json!({ "preflight": false, "preflightReloads": false, "canProbe": false })
    );
    let options = parse_options(&genesis.options).expect("options");
    assert!(!options.preflight && !options.preflight_reloads && !options.can_probe);
}

#[test]
fn a_genesis_that_cannot_build_a_policy_is_refused() {
    let bad = genesis_entry(&json!({ "executors": "no" }), &Value::Null).unwrap_err();
    assert_eq!(bad.code(), "INVALID_DOCUMENT");
    let bad = genesis_entry(&document(), &json!([1])).unwrap_err();
    assert_eq!(bad.code(), "INVALID_OPTIONS");
}

#[test]
fn a_log_that_is_not_version_1_or_has_no_genesis_is_refused() {
    let code = |entry: &str| read_genesis(entry).unwrap_err().code();
    assert_eq!(code("{\"type\":\"tick\"}"), "INVALID_LOG");
    assert_eq!(code("not json"), "INVALID_LOG");
    assert_eq!(code("{\"type\":\"genesis\",\"log\":\"1\"}"), "INVALID_LOG");
    assert_eq!(
        code("{\"type\":\"genesis\",\"log\":2}"),
        "UNSUPPORTED_VERSION"
    );
    assert_eq!(
        read_genesis("{\"type\":\"tick\"}").unwrap_err().to_string(),
        "the log does not start with a genesis entry: its first entry is {\"type\":\"tick\"}"
    );
}

#[test]
fn an_entry_is_the_input_without_now_and_no_deadline() {
    let entry =
        entry_of_text("{\"now\":5,\"type\":\"lease\",\"id\":\"r\",\"role\":\"coder\",\"owner\":\"i:1\",\"timeoutMs\":9}")
            .expect("an entry");
    assert_eq!(
        entry,
        "{\"type\":\"lease\",\"id\":\"r\",\"owner\":\"i:1\",\"role\":\"coder\",\"timeoutMs\":9}"
    );
    assert_eq!(
        fold_text(7, &entry),
        "{\"now\":7,\"type\":\"lease\",\"id\":\"r\",\"owner\":\"i:1\",\"role\":\"coder\",\"timeoutMs\":9}"
    );
    let refused = entry_of_text(
        "{\"type\":\"lease\",\"now\":5,\"id\":\"r\",\"role\":\"coder\",\"deadline\":9}",
    )
    .unwrap_err();
    assert_eq!(refused.code(), "INVALID_INPUT");
    assert!(refused.to_string().contains("`deadline`"), "{refused}");
    assert_eq!(
        entry_of(&Input::Tick { now: 3 }).expect("a tick"),
        "{\"type\":\"tick\"}"
    );
    assert_eq!(entry_of_text("nope").unwrap_err().code(), "INVALID_INPUT");
}

#[test]
fn facts_of_entries() {
    let facts = EntryFacts::of("{\"type\":\"expireOwner\",\"owner\":\"b:2\"}");
    assert_eq!(facts.owner.as_deref(), Some("b:2"));
    assert!(facts.expires("b:2", "a:1"));
    assert!(!facts.expires("b:2", "b:2"));
    assert!(!facts.expires("a:1", "b:2"));
    let lease = EntryFacts::of("{\"type\":\"lease\",\"id\":\"r\"}");
    assert_eq!(lease.call_of("a:1"), Some("a:1"));
    assert_eq!(
        EntryFacts::of("{\"type\":\"release\",\"lease\":1}").call_of("a:1"),
        None
    );
    assert!(EntryFacts::of("{\"type\":\"genesis\",\"log\":1}").skipped());
    assert!(EntryFacts::of("{\"log\":2,\"type\":\"version\"}").halts("UNSUPPORTED_VERSION"));
    assert!(!EntryFacts::of("{\"type\":\"version\",\"log\":1}").halts("INVALID_INPUT"));
    assert_eq!(EntryFacts::of("garbage"), EntryFacts::default());
}

#[test]
fn who_acts_on_each_output() {
    let facts = EntryFacts::of("{\"type\":\"release\",\"lease\":1}");
    let owned = Output::Cancelled {
        request: "r".into(),
        owner: Some("b:2".into()),
    };
    assert_eq!(actor(&owned, &facts, "a:1"), Actor::Instance("b:2".into()));
    let bare = Output::Cancelled {
        request: "r".into(),
        owner: None,
    };
    assert_eq!(actor(&bare, &facts, "a:1"), Actor::Instance("a:1".into()));
    let delete = Output::DeleteMachine {
        executor: "m".into(),
        hold: json!({}),
        lease: Some(1),
        owner: Some("b:2".into()),
    };
    assert_eq!(actor(&delete, &facts, "a:1"), Actor::Instance("b:2".into()));
    let expiry = EntryFacts::of("{\"type\":\"expireOwner\",\"owner\":\"b:2\"}");
    assert_eq!(
        actor(&delete, &expiry, "a:1"),
        Actor::Instance("a:1".into())
    );
    let probe = Output::Probe {
        executor: "a".into(),
        url: "u".into(),
    };
    assert_eq!(actor(&probe, &facts, "a:1"), Actor::Leader);
    // A reload's preflight (a genesis from before genesis_options): its appender's.
    let reload = EntryFacts::of("{\"type\":\"reload\",\"document\":{}}");
    let preflight = Output::Preflight {
        executor: "b".into(),
    };
    assert_eq!(
        actor(&preflight, &reload, "a:1"),
        Actor::Instance("a:1".into())
    );
    assert!(Actor::Leader.is("x", true) && !Actor::Leader.is("x", false));
    assert!(!Actor::Nobody.is("x", true) && Actor::Everyone.is("x", false));
}

#[test]
fn fold_answers_outputs_and_actors_and_rejections() {
    let mut policy = Policy::new(&document(), Options::default()).expect("a policy");
    let entry = "{\"type\":\"lease\",\"id\":\"r\",\"role\":\"coder\",\"owner\":\"b:2\"}";
    let answer: Value =
        serde_json::from_str(&fold_str(&mut policy, 1_800_000_000_000, entry, "b:2"))
            .expect("json");
    let outputs = answer["outputs"].as_array().expect("outputs");
    assert_eq!(
        answer["actors"].as_array().map(Vec::len),
        Some(outputs.len())
    );
    assert_eq!(answer["actors"][0], json!({ "instance": "b:2" }));
    assert_eq!(answer["type"], json!("lease"));
    let again: Value =
        serde_json::from_str(&fold_str(&mut policy, 1_800_000_000_001, entry, "b:2"))
            .expect("json");
    assert_eq!(again["error"]["code"], json!("DUPLICATE_REQUEST"));
    assert_eq!(again["call"], json!("b:2"));
    assert_eq!(again["halt"], json!(false));
    let skipped = fold_str(&mut policy, 1, "{\"type\":\"genesis\",\"log\":1}", "c:3");
    assert_eq!(skipped, "{\"skipped\":true}");
    let version: Value = serde_json::from_str(&fold_str(
        &mut policy,
        1_800_000_000_002,
        "{\"type\":\"version\",\"log\":2}",
        "c:3",
    ))
    .expect("json");
    assert_eq!(version["halt"], json!(true));
    assert_eq!(version["call"], Value::Null);
}

#[test]
fn a_new_leader_redoes_the_probes_in_flight() {
    let mut policy = Policy::new(&document(), Options::default()).expect("a policy");
    assert!(policy.probes_in_flight().is_empty());
    let report = "{\"type\":\"report\",\"executor\":\"a\",\"failure\":{\"kind\":\"outage\",\"message\":\"down\"}}";
    let answer: Value =
        serde_json::from_str(&fold_str(&mut policy, 1_800_000_000_000, report, "a:1"))
            .expect("json");
    let probes: Vec<&Value> = answer["outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["type"] == "probe")
        .collect();
    assert_eq!(probes.len(), 1, "{answer}");
    assert_eq!(
        policy.probes_in_flight(),
        vec![Output::Probe {
            executor: "a".into(),
            url: "http://a/health".into()
        }]
    );
}

#[test]
fn answer_asks_each_rule() {
    let ok = |request: Value| answer(&request)["ok"].clone();
    assert_eq!(
        ok(json!({ "op": "feed", "now": 3, "entry": "{\"type\":\"tick\"}" })),
        json!("{\"now\":3,\"type\":\"tick\"}")
    );
    assert_eq!(
        ok(
            json!({ "op": "actors", "entry": "{\"type\":\"tick\"}", "appender": "a:1",
                   "outputs": [{ "type": "probe", "executor": "a", "url": "u" }] })
        ),
        json!(["leader"])
    );
    assert_eq!(
        answer(&json!({ "op": "x" }))["error"]["code"],
        json!("INVALID_INPUT")
    );
}
