//! Issue 43 items 2 and 6 on the Rust roster: a saturated roster borrows instead of
//! deadlocking (the upstream's `borrow`), and `capacity` / `capacity_changed`, woken
//! by a cooldown that ends with nothing else happening.

mod common;

use std::time::Duration;

use common::build;
use rota_host::{Because, ExclusionKind, LeaseOptions};
use serde_json::{json, Value};

fn both(id: &str, slots: u32) -> Value {
    json!({ "id": id, "harness": "pi", "roles": ["coder", "reviewer"], "slots": slots })
}

fn review_of(context: &str) -> LeaseOptions {
    LeaseOptions {
        avoid: vec![context.to_string()],
        borrow: Some(context.to_string()),
        label: Some(format!("story {context}")),
        ..Default::default()
    }
}

#[tokio::test]
async fn every_coder_slot_held_a_review_borrows_its_own_coder_executor() {
    let roster = build(json!({ "executors": [both("a", 1), both("b", 1)] })).await;
    let coder_a = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("a");
    let coder_b = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("b");
    assert_eq!((coder_a.executor(), coder_b.executor()), ("a", "b"));
    let avoid = ["a".to_string()];
    assert!(roster.coder_held("reviewer", &avoid).expect("query"));
    assert_eq!(
        roster
            .independence_blocked("reviewer", &avoid)
            .expect("query"),
        Some(Because::Held)
    );
    // Without `borrow` this review would wait for a story to end, which waits on it.
    let review = tokio::time::timeout(
        Duration::from_secs(5),
        roster.lease("reviewer", review_of("a")),
    )
    .await
    .expect("borrowed instead of deadlocking")
    .expect("lease");
    assert_eq!(review.executor(), "a");
    assert!(review.borrowed());
    assert_eq!(review.because(), Some(Because::Held));
    assert!(!coder_a.borrowed() && coder_a.because().is_none());
    let snapshot = roster.snapshot().expect("snapshot");
    let a = snapshot.executors.iter().find(|x| x.id == "a").expect("a");
    assert_eq!(a.busy, 1, "a borrowed lease holds no slot");
    review.release().expect("release");
    assert_eq!(
        roster.available("reviewer").expect("available"),
        0,
        "and frees none"
    );
    // try_lease never borrows.
    let tried = roster
        .try_lease("reviewer", review_of("a"))
        .await
        .expect("try");
    assert!(tried.is_none());
}

#[tokio::test]
async fn a_waiting_review_borrows_once_coders_hold_every_other_slot() {
    let roster = build(json!({ "executors": [both("a", 1), both("b", 1)] })).await;
    let _coder = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("a");
    let call = roster
        .lease("reviewer", LeaseOptions::default())
        .await
        .expect("b");
    assert_eq!(call.executor(), "b");
    let second_coder = roster.lease("coder", LeaseOptions::default());
    let review = roster.lease("reviewer", review_of("a"));
    tokio::pin!(second_coder, review);
    // Both wait, the coder first in lease order: b's slot is held by a call, which ends.
    assert!(
        tokio::time::timeout(Duration::from_millis(50), &mut second_coder)
            .await
            .is_err()
    );
    assert!(tokio::time::timeout(Duration::from_millis(50), &mut review)
        .await
        .is_err());
    call.release().expect("release");
    let coder = tokio::time::timeout(Duration::from_secs(5), second_coder)
        .await
        .expect("granted")
        .expect("the coder takes b");
    let review = tokio::time::timeout(Duration::from_secs(5), review)
        .await
        .expect("borrowed in the queue")
        .expect("the review borrows a");
    assert_eq!(coder.executor(), "b");
    assert_eq!(
        (review.executor(), review.borrowed(), review.because()),
        ("a", true, Some(Because::Held))
    );
}

#[tokio::test]
async fn capacity_changed_wakes_when_a_cooldown_ends_with_nothing_else_happening() {
    let roster = build(json!({ "executors": [
        both("a", 3),
        { "id": "b", "harness": "pi", "roles": ["coder"], "slots": 2 },
    ] }))
    .await;
    // a: 3 slots, 2 of them coder slots (it also reasons); b: 2.
    assert_eq!(roster.capacity("coder").expect("capacity"), 4);
    assert_eq!(roster.capacity("reviewer").expect("capacity"), 3);
    let lease = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(
        roster.capacity("coder").expect("capacity"),
        4,
        "a lease does not lower it"
    );
    drop(lease);
    assert_eq!(
        roster.capacity_changed("coder", 3).await.expect("at once"),
        4
    );
    let until = roster.now_ms() + 200;
    roster
        .exclude("b", ExclusionKind::Until, "cooling down", Some(until))
        .expect("exclude");
    assert_eq!(roster.capacity("coder").expect("capacity"), 2);
    // Nothing waits, nothing else is fed: only the roster's wake-up at the end of the
    // exclusion can end this wait.
    let back = tokio::time::timeout(Duration::from_secs(5), roster.capacity_changed("coder", 2))
        .await
        .expect("woken by the cooldown's end")
        .expect("capacity");
    assert_eq!(back, 4);
    assert!(roster.now_ms() >= until, "it waited for the end");
    // A resume wakes it too.
    roster
        .exclude("b", ExclusionKind::Manual, "paused", None)
        .expect("exclude");
    let resumed = roster.capacity_changed("coder", 2);
    tokio::pin!(resumed);
    assert!(
        tokio::time::timeout(Duration::from_millis(50), &mut resumed)
            .await
            .is_err()
    );
    roster.resume("b").expect("resume");
    assert_eq!(resumed.await.expect("capacity"), 4);
    assert!(roster.capacity_changed("chef", 0).await.is_err());
}
