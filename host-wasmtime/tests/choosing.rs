//! Choosing among equal free executors on the Rust roster: `choice: "leastBusy"`
//! sends a lease to the idle executor where round-robin would not, with the `chosen`
//! event saying why; `weight` 3 to 1 splits twelve grants 9:3; a bad weight is a
//! violation naming the executor and the field.

mod common;

use std::time::Duration;

use common::{build, wait_for};
use rota_host::{Choice, LeaseOptions, Roster};
use serde_json::json;

async fn lease(roster: &Roster) -> rota_host::Lease {
    roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease")
}

#[tokio::test]
async fn least_busy_takes_the_idle_executor_and_says_why() {
    let roster = build(json!({ "choice": "leastBusy", "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 2 },
        { "id": "b", "harness": "pi", "roles": ["coder"], "slots": 2 },
    ] }))
    .await;
    let document = rota_host::Document::from_json(&roster.document().expect("document"), None)
        .expect("document");
    assert_eq!(document.choice, Some(Choice::LeastBusy));
    let first = lease(&roster).await;
    let second = lease(&roster).await;
    assert_eq!((first.executor(), second.executor()), ("a", "b"));
    drop(second);
    let mut events = roster.subscribe();
    // Round-robin would give a (leased longest ago); b is at 0 of 2, a at 1 of 2.
    let third = lease(&roster).await;
    assert_eq!(third.executor(), "b");
    let chosen = wait_for(&mut events, "chosen", Duration::from_secs(5)).await;
    assert_eq!(
        chosen.message,
        "b is chosen for coder: the least busy (0 of 2 in use)"
    );
    assert_eq!(chosen.fields["inUse"], json!(0));
}

#[tokio::test]
async fn weights_three_to_one_split_the_grants() {
    let roster = build(json!({ "executors": [
        { "id": "fast", "harness": "lm-studio", "roles": ["coder"], "slots": 2, "weight": 3 },
        { "id": "api", "harness": "claude", "roles": ["coder"], "slots": 2 },
    ] }))
    .await;
    let mut picks = String::new();
    for _ in 0..12 {
        let lease = lease(&roster).await;
        picks.push(if lease.executor() == "fast" { 'f' } else { 'p' });
    }
    assert_eq!(picks, "fpfffpfffpff");
    let bad = rota_host::Document::from_json(
        &json!({ "executors": [{ "id": "a", "harness": "pi", "roles": ["coder"], "weight": 0 }] }),
        None,
    )
    .expect_err("a violation");
    assert_eq!(bad[0].path, "executors[0].weight");
    assert_eq!(
        bad[0].message,
        "executor 'a' has a weight that is not a whole number from 1 to 1000"
    );
}

#[tokio::test]
async fn max_excluded_holds_the_second_rate_limit_back_but_not_a_usage_limit() {
    let roster = build(
        json!({ "maxExcluded": { "coder": "50%", "default": "100%" }, "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"] },
        { "id": "b", "harness": "pi", "roles": ["coder"] },
    ] }),
    )
    .await;
    let mut events = roster.subscribe();
    assert!(roster
        .report_http("a", 429, &[("retry-after", "60")], "slow down")
        .expect("report")
        .is_some());
    assert!(roster
        .report_http("b", 429, &[("retry-after", "60")], "slow down")
        .expect("report")
        .is_none());
    let held = wait_for(&mut events, "exclusionHeldBack", Duration::from_secs(5)).await;
    assert_eq!(held.fields["executor"], json!("b"));
    assert_eq!(held.fields["maxExcluded"], json!(50));
    assert_eq!(lease(&roster).await.executor(), "b");
    let usage = rota_host::Failure {
        kind: Some(rota_host::FailureKind::UsageLimit),
        message: "usage limit reached".into(),
        ..Default::default()
    };
    let excluded = roster.report("b", usage).expect("report");
    assert!(
        excluded
            .as_ref()
            .is_some_and(|x| x.reason.starts_with("usage limit")),
        "{excluded:?}"
    );
}
