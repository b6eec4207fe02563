//! What a lease carries and says (issue 43 items 3, 5, 8): its clone number under the
//! document's `clones: "numbered"` (the lowest free, reused after a release, kept
//! across a live swap), its request's `purpose`, and the typed lease events.

mod common;

use std::time::Duration;

use common::{policy, policy_file, wait_for};
use rota_host::{clone_name, LeaseOptions, Roster};
use serde_json::json;

#[tokio::test]
async fn a_lease_exposes_its_clone_number_and_purpose() {
    let roster = Roster::builder()
        .document(json!({ "clones": "numbered", "executors": [
            { "id": "codex", "harness": "codex", "roles": ["coder", "reviewer"], "slots": 3 },
        ]}))
        .module(policy())
        .build()
        .await
        .expect("roster");
    let mut events = roster.subscribe();
    let review = LeaseOptions {
        label: Some("story a".into()),
        purpose: Some("adversarial lens".into()),
        ..Default::default()
    };
    let first = roster.lease("reviewer", review).await.expect("lease");
    assert_eq!(first.clone_number(), Some(1));
    assert_eq!(first.purpose(), Some("adversarial lens"));
    let granted = wait_for(&mut events, "granted", Duration::from_secs(5)).await;
    assert_eq!(
        granted.message,
        "codex#1 takes reviewer for story a · adversarial lens"
    );
    assert_eq!(granted.fields.get("clone"), Some(&json!(1)));
    assert_eq!(
        granted.fields.get("purpose"),
        Some(&json!("adversarial lens"))
    );

    let second = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(second.clone_number(), Some(2));
    assert_eq!(second.purpose(), None);
    first.release().expect("release");
    let released = wait_for(&mut events, "released", Duration::from_secs(5)).await;
    assert_eq!(
        released.message,
        "codex#1's slot is released (reviewer for story a · adversarial lens)"
    );

    // A live swap (export, import) keeps the numbers: the next lease takes #1 again.
    let dir = tempfile::tempdir().expect("tempdir");
    roster
        .swap_policy(&policy_file(dir.path()))
        .await
        .expect("swap");
    let third = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(third.clone_number(), Some(1));
    assert_eq!(clone_name(third.executor(), 1), "codex#1");
    let snapshot = roster.snapshot().expect("snapshot");
    let clones: Vec<Option<u32>> = snapshot.executors[0]
        .leases
        .iter()
        .map(|l| l.clone)
        .collect();
    assert_eq!(clones, [Some(2), Some(1)]);
}

#[tokio::test]
async fn without_the_rule_a_lease_has_no_clone_and_typed_events_say_the_wait() {
    let roster = Roster::builder()
        .document(json!({ "leaseEvents": "typed", "executors": [
            { "id": "solo", "harness": "pi", "roles": ["coder"] },
        ]}))
        .module(policy())
        .build()
        .await
        .expect("roster");
    let mut events = roster.subscribe();
    let held = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(held.clone_number(), None);
    let waiter = {
        let roster = roster.clone();
        tokio::spawn(async move { roster.lease("coder", LeaseOptions::default()).await })
    };
    wait_for(&mut events, "waiting", Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    drop(held);
    let granted = loop {
        let event = wait_for(&mut events, "granted", Duration::from_secs(5)).await;
        if event.fields.contains_key("waitedMs") {
            break event;
        }
    };
    let waited = granted.fields["waitedMs"].as_u64().expect("a number");
    assert!(waited >= 30, "waited {waited} ms");
    waiter.await.expect("join").expect("granted");
}
