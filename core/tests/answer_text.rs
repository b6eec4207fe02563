//! `json::answer_text` (the hand-written writer of every step's answer) writes exactly
//! the bytes of serde_json over the derived `Serialize` of `Output`.

#[path = "common/writer.rs"]
mod writer;

use std::collections::BTreeMap;
use std::path::Path;

use rota_core::json::{answer_text, parse_input, parse_options};
use rota_core::{Exclusion, ExclusionKind, Level, Output, PersistedState, Policy};
use serde::Serialize;
use serde_json::{json, Value};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Answer<'a> {
    outputs: &'a [Output],
    wake_at: Option<u64>,
}

fn assert_same(outputs: &[Output], wake_at: Option<u64>) {
    let derived = serde_json::to_string(&Answer { outputs, wake_at }).expect("writable");
    assert_eq!(answer_text(outputs, wake_at), derived);
}

const AWKWARD: &[&str] = &[
    "",
    "plain",
    "a \"quoted\" word",
    "back\\slash",
    "line\nbreak\ttab\r\u{8}\u{c}",
    "\u{0}\u{1f}\u{7f}",
    "ünïcödé — 🦀",
    "</script>",
];

fn values() -> Vec<Value> {
    vec![
        Value::Null,
        json!(true),
        json!(false),
        json!(0),
        json!(u64::MAX),
        json!(-17),
        json!(1.5),
        json!(1e300),
        json!(0.1),
        json!("a \"hold\"\n"),
        json!([1, "two", null, {"three": 3.25}]),
        json!({"machine": "m-1", "zone": {"name": "eu\\west", "n": -1}}),
    ]
}

#[test]
fn every_output_kind_with_awkward_strings_and_values() {
    let mut outputs = Vec::new();
    for (i, s) in AWKWARD.iter().enumerate() {
        let s = s.to_string();
        let value = values()[i % values().len()].clone();
        outputs.push(Output::Granted {
            request: s.clone(),
            lease: i as u64,
            executor: s.clone(),
            clone: (i % 2 == 1).then_some(i as u32),
            role: s.clone(),
            hold: (i % 2 == 0).then(|| value.clone()),
            passed: i as u32,
            occupied: i % 3 == 0,
            borrowed: false,
            because: None,
            owner: None,
        });
        outputs.push(Output::Exhausted {
            request: s.clone(),
            role: s.clone(),
            reasons: vec![s.clone(); i],
            owner: None,
        });
        outputs.push(Output::TimedOut {
            request: s.clone(),
            reasons: vec![s.clone(); i % 3],
            owner: None,
        });
        outputs.push(Output::Unavailable {
            request: s.clone(),
            owner: None,
        });
        outputs.push(Output::Cancelled {
            request: s.clone(),
            owner: None,
        });
        outputs.push(Output::Waiting {
            request: s.clone(),
            role: s.clone(),
            report: s.clone(),
            ahead: u32::MAX - i as u32,
            spent: vec![s.clone(); i % 3],
            owner: None,
        });
        outputs.push(Output::Probe {
            executor: s.clone(),
            url: s.clone(),
        });
        outputs.push(Output::CreateMachine {
            request: s.clone(),
            executor: s.clone(),
            owner: None,
        });
        outputs.push(Output::DeleteMachine {
            executor: s.clone(),
            hold: value.clone(),
            lease: None,
            owner: None,
        });
        outputs.push(Output::DeleteMachine {
            executor: s.clone(),
            hold: value.clone(),
            lease: Some(7),
            owner: None,
        });
        outputs.push(Output::Preflight {
            executor: s.clone(),
        });
        outputs.push(Output::StartFailed {
            executor: s.clone(),
            error: s.clone(),
        });
        outputs.push(Output::Persist {
            ids: vec![s.clone()],
            state: PersistedState {
                version: 1,
                exclusions: vec![Exclusion {
                    id: s.clone(),
                    reason: s.clone(),
                    kind: ExclusionKind::Until,
                    until: Some(i as u64),
                }],
            },
        });
        let fields: BTreeMap<String, Value> = values()
            .into_iter()
            .enumerate()
            .map(|(k, v)| (format!("{s}{k}"), v))
            .collect();
        for level in [Level::Debug, Level::Info, Level::Warn] {
            outputs.push(Output::Event {
                level,
                name: s.clone().into(),
                message: s.clone(),
                fields: fields.clone().into_iter().collect(),
            });
        }
        outputs.push(Output::Event {
            level: Level::Info,
            name: s.clone().into(),
            message: s.clone(),
            fields: rota_core::Fields::default(),
        });
    }
    for wake_at in [None, Some(0), Some(1_800_000_000_000), Some(u64::MAX)] {
        assert_same(&outputs, wake_at);
        assert_same(&outputs[..1], wake_at);
        assert_same(&[], wake_at);
    }
}

/// Every step of every conformance vector: the outputs the core really emits.
#[test]
fn the_outputs_of_every_conformance_vector() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut steps = 0;
    for entry in std::fs::read_dir(&dir).expect("tests/vectors") {
        let path = entry.expect("an entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let vector: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("readable"))
                .expect("a vector is JSON");
        let options = parse_options(vector.get("options").unwrap_or(&Value::Null));
        let Ok(options) = options else { continue };
        let Ok(mut policy) = Policy::new(&vector["document"], options) else {
            continue;
        };
        for step in vector["steps"].as_array().into_iter().flatten() {
            let Some(input) = step.get("input") else {
                continue;
            };
            let Ok(input) = parse_input(input) else {
                continue;
            };
            if policy.handle(input).is_err() {
                continue;
            }
            let outputs: Vec<Output> = std::iter::from_fn(|| policy.poll_output()).collect();
            assert_same(&outputs, policy.poll_timeout());
            writer::assert_writer_is_serde(&policy);
            steps += 1;
        }
    }
    assert!(steps > 100, "only {steps} steps");
}

/// Options (defaults, kinds, every level) and a document's violations through the
/// hand-written writer, as serde_json writes them.
#[test]
fn options_and_violations_as_serde_writes_them() {
    use rota_core::write::to_json_text;
    for level in [Level::Debug, Level::Info, Level::Warn] {
        for kinds in [
            None,
            Some(vec![]),
            Some(vec!["a".to_string(), "b\"c".to_string()]),
        ] {
            let options = rota_core::Options {
                kinds,
                min_event_level: level,
                can_probe: false,
                ..Default::default()
            };
            assert_eq!(
                to_json_text(&options),
                serde_json::to_string(&options).expect("writable")
            );
        }
    }
    for document in [
        json!(null),
        json!({"executors": [{"id": "a\n\"b\"", "slots": -1}, {"id": "a\n\"b\""}]}),
        json!({"executors": [{"id": "x", "roles": ["nope", 7], "priority": "high"}]}),
    ] {
        let violations = rota_core::validate(&document, Some(&["k".to_string()]));
        assert!(!violations.is_empty());
        assert_eq!(
            to_json_text(&violations),
            serde_json::to_string(&violations).expect("writable")
        );
    }
}
