//! `Roster::builder().document(..)` takes what a caller has at hand: a
//! `serde_json::Value`, text of JSON or YAML (`&str` or `String`), or the core's typed
//! `Document`; text it cannot read fails `build` with what is wrong and where.

mod common;

use common::policy;
use rota_host::core::Document;
use rota_host::{HostError, IntoDocument, LeaseOptions, Roster};
use serde_json::json;

async fn executor_of(document: impl IntoDocument) -> String {
    let roster = Roster::builder()
        .document(document)
        .module(policy())
        .build()
        .await
        .expect("roster");
    let lease = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    lease.executor().to_string()
}

#[tokio::test]
async fn a_value_json_text_yaml_text_and_a_typed_document_all_build() {
    let value = json!({ "executors": [ { "id": "v", "harness": "claude", "roles": ["coder"] } ] });
    assert_eq!(executor_of(value.clone()).await, "v");
    assert_eq!(executor_of(&value).await, "v");
    let json_text =
        r#"{ "executors": [ { "id": "j", "harness": "claude", "roles": ["coder"] } ] }"#;
    assert_eq!(executor_of(json_text).await, "j");
    assert_eq!(executor_of(json_text.to_string()).await, "j");
    let yaml = "executors:\n  - id: y\n    harness: claude\n    roles: [coder]\n    slots: 2\n";
    assert_eq!(executor_of(yaml).await, "y");
    assert_eq!(executor_of(&yaml.to_string()).await, "y");
    let typed = Document::from_str(
        r#"{ "executors": [ { "id": "t", "harness": "claude", "roles": ["coder"] } ] }"#,
        None,
    )
    .expect("a document");
    assert_eq!(executor_of(&typed).await, "t");
    assert_eq!(executor_of(typed).await, "t");
}

async fn build_error(text: &str) -> HostError {
    Roster::builder()
        .document(text)
        .module(policy())
        .build()
        .await
        .expect_err("bad text")
}

/// Text that is neither JSON nor YAML: `Invalid` at `$`, with the line and column.
async fn unreadable(text: &str) -> String {
    let error = build_error(text).await;
    assert!(matches!(error, HostError::Invalid { .. }), "{error:?}");
    error.to_string()
}

#[tokio::test]
async fn text_that_cannot_be_read_says_what_and_where() {
    let error = unreadable("{ \"executors\": [ { \"id\": \"a\", } ] }").await;
    assert!(
        error.starts_with("$: the document text is not JSON (line 1, column 31)"),
        "{error}"
    );
    let error = unreadable("executors:\n  - id: a\n   roles: [coder\n").await;
    assert!(
        error.contains("the document text is not YAML (line 3"),
        "{error}"
    );
    let error = unreadable("  \n").await;
    assert!(error.contains("the document text is empty"), "{error}");
    // Readable text that is no roster: the core's violations, with their places.
    let error = build_error("executors:\n  - id: a\n    harness: claude\n    slots: two\n").await;
    assert_eq!(error.code(), Some("INVALID_DOCUMENT"), "{error:?}");
    assert!(error.to_string().contains("executors[0].slots"), "{error}");
}
