//! Affinity keys on the Rust roster: a lease's `affinity` key sticks to the executor
//! of its last grant, yields while that executor is busy, and is forgotten after the
//! document's `affinityTtl` of idleness on the roster's clock (tokio's, paused here);
//! `explain` says what a key does.

mod common;

use std::time::Duration;

use common::build;
use rota_host::{Explain, LeaseOptions};
use serde_json::{json, Value};

fn keyed(key: &str) -> LeaseOptions {
    LeaseOptions {
        affinity: Some(key.to_string()),
        ..LeaseOptions::default()
    }
}

async fn advance(ms: u64) {
    tokio::time::advance(Duration::from_millis(ms)).await;
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

fn two(extra: Value) -> Value {
    let mut document = json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"] },
        { "id": "b", "harness": "pi", "roles": ["coder"] },
    ] });
    if let (Some(document), Some(extra)) = (document.as_object_mut(), extra.as_object()) {
        document.extend(extra.clone());
    }
    document
}

#[tokio::test(start_paused = true)]
async fn a_key_sticks_to_its_executor_and_yields_while_it_is_busy() {
    let roster = build(two(json!({}))).await;
    let first = roster
        .lease("coder", keyed("session-1"))
        .await
        .expect("lease");
    assert_eq!(first.executor(), "a");
    drop(first);
    advance(1).await;
    // Round-robin alone would give b (never leased): the key keeps a.
    let why = roster
        .explain(Explain::role("coder").affinity("session-1"))
        .expect("explain");
    assert_eq!(why.pick.as_deref(), Some("a"));
    let line = why.affinity.expect("an affinity line");
    assert!(
        line.starts_with("key 'session-1' sticks to a until "),
        "{line}"
    );
    let again = roster
        .lease("coder", keyed("session-1"))
        .await
        .expect("lease");
    assert_eq!(again.executor(), "a");
    // a busy: the key yields to b and moves there.
    let moved = roster
        .lease("coder", keyed("session-1"))
        .await
        .expect("lease");
    assert_eq!(moved.executor(), "b");
    drop(again);
    drop(moved);
    advance(1).await;
    let after = roster
        .lease("coder", keyed("session-1"))
        .await
        .expect("lease");
    assert_eq!(after.executor(), "b");
}

#[tokio::test(start_paused = true)]
async fn a_key_idle_for_the_ttl_is_forgotten() {
    let roster = build(two(json!({ "affinityTtl": "1 minute" }))).await;
    let first = roster.lease("coder", keyed("k")).await.expect("lease");
    assert_eq!(first.executor(), "a");
    drop(first);
    advance(59_000).await;
    let again = roster.lease("coder", keyed("k")).await.expect("lease");
    assert_eq!(again.executor(), "a", "refreshed within the TTL");
    drop(again);
    advance(60_000).await;
    let later = roster.lease("coder", keyed("k")).await.expect("lease");
    assert_eq!(later.executor(), "b", "forgotten: round-robin decides");
}

#[tokio::test]
async fn a_bad_key_is_refused_naming_the_field() {
    let roster = build(two(json!({}))).await;
    let error = roster
        .lease("coder", keyed(""))
        .await
        .expect_err("refused")
        .to_string();
    assert!(error.contains("`affinity` is empty"), "{error}");
}
