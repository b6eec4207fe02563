//! Accounts and budgets on the Rust roster: executors of one account share a rate
//! limit's exclusion (a 429 on one excludes both, with one end; the reason names the
//! account), and a budget keeps a lease waiting until its window has room, when the
//! roster's own wake-up grants it with nothing else happening.

mod common;

use std::time::Duration;

use common::build;
use rota_host::{ExclusionKind, Explain, LeaseOptions};
use serde_json::json;

#[tokio::test]
async fn a_429_with_retry_after_on_one_executor_of_an_account_excludes_both() {
    let roster = build(json!({ "executors": [
        { "id": "a", "harness": "claude", "roles": ["coder"], "account": "claude-max" },
        { "id": "b", "harness": "claude", "roles": ["coder"], "account": "claude-max" },
        { "id": "c", "harness": "pi", "roles": ["coder"] },
    ] }))
    .await;
    let lease = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(lease.executor(), "a");
    let exclusion = roster
        .report_http("a", 429, &[("retry-after", "120")], "slow down")
        .expect("report")
        .expect("excluded");
    assert_eq!(exclusion.kind, ExclusionKind::Until);
    assert_eq!(
        exclusion.reason,
        "rate limited; retry after 2m (account 'claude-max')"
    );
    let snapshot = roster.snapshot().expect("snapshot");
    let until = |id: &str| {
        snapshot
            .executors
            .iter()
            .find(|x| x.id == id)
            .and_then(|x| x.exclusion.as_ref())
            .and_then(|x| x.until)
    };
    assert_eq!(until("b"), exclusion.until, "b shares a's end");
    assert_eq!(until("c"), None, "c has no account");
    drop(lease);
    let next = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(next.executor(), "c");
}

#[tokio::test]
async fn a_lease_beyond_the_budget_waits_for_the_window_and_is_granted_by_the_wake_up() {
    let roster = build(json!({
        "accounts": { "acme": { "budget": { "requests": 2, "perMs": 300 } } },
        "executors": [
            { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 4, "account": "acme" },
        ],
    }))
    .await;
    let start = roster.now_ms();
    let first = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    let _second = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert!(roster
        .try_lease("coder", LeaseOptions::default())
        .await
        .expect("try")
        .is_none());
    drop(first); // a release refunds nothing
    let third = roster.lease("coder", LeaseOptions::default());
    tokio::pin!(third);
    assert!(
        tokio::time::timeout(Duration::from_millis(50), &mut third)
            .await
            .is_err(),
        "it waits for the window"
    );
    let explained = roster.explain(Explain::role("coder")).expect("explain");
    assert!(
        explained.executors[0].reasons[0].starts_with("budget: room at "),
        "{:?}",
        explained.executors[0].reasons
    );
    let third = tokio::time::timeout(Duration::from_secs(5), third)
        .await
        .expect("woken at the window's room")
        .expect("lease");
    assert_eq!(third.executor(), "a");
    assert!(
        roster.now_ms() >= start + 300,
        "not before the window had room"
    );
}
