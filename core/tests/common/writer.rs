//! `rota_core::write::to_json_text` (what every host gets) against serde_json over the
//! derived `Serialize` (the reference), on a live policy.

use rota_core::write::to_json_text;
use rota_core::{ExplainRequest, Policy};
use serde::Serialize;
use serde_json::Value;

fn derived<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("serde_json writes it")
}

/// The snapshot, an explanation per role and a plan to the running document (and its
/// violations) are written as serde_json writes them.
pub fn assert_writer_is_serde(policy: &Policy) {
    let snapshot = policy.snapshot();
    assert_eq!(to_json_text(&snapshot), derived(&snapshot), "the snapshot");
    for role in &snapshot.roles {
        let request = ExplainRequest {
            role: role.clone(),
            avoid: Vec::new(),
            prefer: None,
            pin: None,
            request: None,
            affinity: None,
        };
        if let Ok(explanation) = policy.explain(&request) {
            assert_eq!(
                to_json_text(&explanation),
                derived(&explanation),
                "explain {role}"
            );
        }
    }
    for queued in &snapshot.queue {
        let request = ExplainRequest {
            role: queued.role.clone(),
            avoid: Vec::new(),
            prefer: None,
            pin: None,
            request: Some(queued.request.clone()),
            affinity: None,
        };
        if let Ok(explanation) = policy.explain(&request) {
            assert_eq!(
                to_json_text(&explanation),
                derived(&explanation),
                "explain a request"
            );
        }
    }
    // A reload that drops the last executor and resizes the first.
    let mut document = policy.document();
    if let Some(executors) = document.get_mut("executors").and_then(Value::as_array_mut) {
        executors.pop();
        if let Some(Value::Object(first)) = executors.first_mut() {
            first.insert("slots".into(), Value::from(3));
        }
    }
    for document in [&policy.document(), &document] {
        match policy.plan(document) {
            Ok(plan) => assert_eq!(to_json_text(&plan), derived(&plan), "the plan"),
            Err(rota_core::Error::InvalidDocument { violations }) => {
                assert_eq!(
                    to_json_text(&violations),
                    derived(&violations),
                    "violations"
                )
            }
            Err(_) => {}
        }
    }
}
