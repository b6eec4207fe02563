//! Recovery on the Rust roster: probation after a cooldown (the first
//! lease after it fails, and the next return is later by the doubled cooldown), and
//! `other` failures in a row taken out as an outage until the health URL answers.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{build, health_server, policy, wait_for};
use rota_host::{ExclusionKind, Explain, Failure, FailureKind, LeaseOptions, RecoveryMode, Roster};
use serde_json::json;

const MINUTE: u64 = 60_000;

fn usage_limit() -> Failure {
    Failure::of_kind(FailureKind::UsageLimit, "usage limit reached")
}

/// Lets the roster's timer task fold the tick at the new time.
async fn advance(ms: u64) {
    tokio::time::advance(Duration::from_millis(ms)).await;
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn the_first_lease_after_a_cooldown_fails_and_the_next_return_is_later_by_the_doubled_cooldown(
) {
    let roster = build(json!({
        "recovery": "probation",
        "executors": [{ "id": "a", "harness": "pi", "roles": ["coder"], "slots": 2,
                        "cooldown": { "usageLimit": "10 minutes" } }],
    }))
    .await;
    let spec = roster.snapshot().expect("snapshot");
    assert!(!spec.executors[0].probation);
    let first = roster
        .report("a", usage_limit())
        .expect("report")
        .expect("excluded");
    assert_eq!(first.until, Some(roster.now_ms() + 10 * MINUTE));
    advance(10 * MINUTE).await;
    let snapshot = roster.snapshot().expect("snapshot");
    assert!(
        snapshot.executors[0].exclusion.is_none(),
        "back in the round"
    );
    assert!(snapshot.executors[0].probation, "on probation");
    assert_eq!(roster.available("coder").expect("available"), 1);

    let lease = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert!(
        roster
            .try_lease("coder", LeaseOptions::default())
            .await
            .expect("try")
            .is_none(),
        "one slot on probation"
    );
    let why = roster.explain(Explain::role("coder")).expect("explain");
    assert_eq!(
        why.executors[0].reasons,
        ["on probation: one slot until a lease is released without a failure"]
    );
    // The first lease after the cooldown fails: out for twice the cooldown.
    let failed_at = roster.now_ms();
    let again = lease
        .report(usage_limit())
        .expect("report")
        .expect("excluded again");
    assert_eq!(again.until, Some(failed_at + 20 * MINUTE));
    assert!(
        again.reason.contains("cooldown doubled to 20m (2× 10m"),
        "{}",
        again.reason
    );
    drop(lease);
    let waiter = {
        let roster = roster.clone();
        tokio::spawn(async move { roster.lease("coder", LeaseOptions::default()).await })
    };
    advance(10 * MINUTE).await;
    assert!(
        roster.snapshot().expect("snapshot").executors[0]
            .exclusion
            .is_some(),
        "not back after the base cooldown"
    );
    assert!(!waiter.is_finished());
    advance(10 * MINUTE).await;
    let granted = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("granted at the doubled cooldown's end")
        .expect("join")
        .expect("lease");
    assert_eq!(roster.now_ms(), failed_at + 20 * MINUTE);
    let mut events = roster.subscribe();
    drop(granted);
    let ended = wait_for(&mut events, "probationEnded", Duration::from_secs(5)).await;
    assert_eq!(ended.fields["slots"], json!(2));
    let snapshot = roster.snapshot().expect("snapshot");
    assert!(!snapshot.executors[0].probation);
    assert_eq!(snapshot.executors[0].backoff, 2);
    assert_eq!(roster.available("coder").expect("available"), 2);
    // The rule as the document reads it.
    let document = rota_host::Document::from_json(&roster.document().expect("document"), None)
        .expect("document");
    assert_eq!(document.executors[0].recovery.mode, RecoveryMode::Probation);
}

#[tokio::test]
async fn three_failures_in_a_row_exclude_until_the_health_url_answers() {
    let server = health_server(Duration::from_millis(10)).await;
    let roster = Roster::builder()
        .document(json!({
            "exclusion": { "consecutiveFailures": 3 },
            "executors": [{ "id": "local", "harness": "opencode", "roles": ["coder"],
                            "health": server.url }],
        }))
        .module(policy())
        .probe_timeout(Duration::from_secs(2))
        .build()
        .await
        .expect("roster");
    let mut events = roster.subscribe();
    for _ in 0..2 {
        assert!(roster
            .report_http("local", 500, &[], "internal error")
            .expect("report")
            .is_none());
    }
    assert_eq!(
        roster.snapshot().expect("snapshot").executors[0].failures_in_a_row,
        2
    );
    // A lease granted after those failures, released without one: the count restarts.
    drop(
        roster
            .lease("coder", LeaseOptions::default())
            .await
            .expect("lease"),
    );
    assert_eq!(
        roster.snapshot().expect("snapshot").executors[0].failures_in_a_row,
        0
    );
    for _ in 0..2 {
        assert!(roster
            .report_http("local", 500, &[], "internal error")
            .expect("report")
            .is_none());
    }
    let exclusion = roster
        .report_http("local", 503, &[], "still broken")
        .expect("report")
        .expect("excluded");
    assert_eq!(exclusion.kind, ExclusionKind::Health);
    assert!(
        exclusion.reason.starts_with("3 failures in a row ("),
        "{}",
        exclusion.reason
    );
    wait_for(&mut events, "probeDown", Duration::from_secs(20)).await;
    server.up.store(true, Ordering::SeqCst);
    let waiter = roster.lease("coder", LeaseOptions::default());
    let lease = tokio::time::timeout(Duration::from_secs(60), waiter)
        .await
        .expect("back once its health URL answers")
        .expect("lease");
    assert_eq!(lease.executor(), "local");
}
