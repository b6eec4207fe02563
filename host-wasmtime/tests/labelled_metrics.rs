//! The labelled metrics of `Roster::metrics()`: the Prometheus text after a few leases
//! and reports, per executor and role (the same series as the npm package's
//! `roster.metrics()`), and a reload that removes an executor removes its series once
//! it has left.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::build;
use rota_host::{Failure, FailureKind, LeaseOptions};
use serde_json::json;

/// The sample lines of a Prometheus text: `name{labels}` → value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| {
            let (key, value) = line.rsplit_once(' ')?;
            Some((key.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn prefer(executor: &str) -> LeaseOptions {
    LeaseOptions {
        prefer: Some(executor.into()),
        ..LeaseOptions::default()
    }
}

#[tokio::test]
async fn per_executor_and_role_after_leases_and_reports() {
    let roster = build(json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 2 },
        { "id": "b", "harness": "pi", "roles": ["coder", "judge"], "slots": 2, "coderSlots": 1 },
        { "id": "c", "harness": "pi", "roles": ["judge"] },
    ] }))
    .await;
    let a1 = roster.lease("coder", prefer("a")).await.expect("lease");
    let a2 = roster.lease("coder", prefer("a")).await.expect("lease");
    let judge = roster.lease("judge", prefer("b")).await.expect("lease");
    drop(a2);
    roster
        .report_http("a", 429, &[], "Too Many Requests")
        .expect("report"); // one of three: no exclusion
    roster
        .report(
            "b",
            Failure::of_kind(FailureKind::UsageLimit, "usage limit reached"),
        )
        .expect("report");
    roster
        .report("c", Failure::new("timed out"))
        .expect("report");
    let text = roster.metrics().expect("metrics");
    let s = samples(&text);
    let at = |key: &str| s.get(key).copied();
    assert_eq!(
        at(r#"rota_leases_granted_total{executor="a",role="coder"}"#),
        Some(2.0)
    );
    assert_eq!(
        at(r#"rota_leases_granted_total{executor="b",role="judge"}"#),
        Some(1.0)
    );
    assert_eq!(
        at(r#"rota_leases_granted_total{executor="c",role="judge"}"#),
        Some(0.0)
    );
    assert_eq!(
        at(r#"rota_slots_in_use{executor="a",role="coder"}"#),
        Some(1.0)
    );
    assert_eq!(
        at(r#"rota_slots_in_use{executor="b",role="judge"}"#),
        Some(1.0)
    );
    assert_eq!(
        at(r#"rota_slots_in_use{executor="b",role="coder"}"#),
        Some(0.0)
    );
    assert_eq!(
        at(r#"rota_capacity{role="coder"}"#),
        Some(2.0),
        "a's two; b is out"
    );
    assert_eq!(at(r#"rota_capacity{role="judge"}"#), Some(1.0), "c");
    assert_eq!(at(r#"rota_excluded{executor="b",kind="until"}"#), Some(1.0));
    assert_eq!(
        at(r#"rota_excluded{executor="b",kind="health"}"#),
        Some(0.0)
    );
    assert_eq!(at(r#"rota_excluded{executor="a",kind="until"}"#), Some(0.0));
    assert_eq!(
        at(r#"rota_failures_total{executor="a",kind="rateLimit"}"#),
        Some(1.0)
    );
    assert_eq!(
        at(r#"rota_failures_total{executor="b",kind="usageLimit"}"#),
        Some(1.0)
    );
    assert_eq!(
        at(r#"rota_failures_total{executor="c",kind="other"}"#),
        Some(1.0)
    );
    assert_eq!(
        at(r#"rota_failures_total{executor="a",kind="other"}"#),
        None
    );
    assert_eq!(
        at(r#"rota_budget_waits_total{executor="a",role="coder"}"#),
        Some(0.0),
        "no budget: no budget wait"
    );
    for (name, kind) in [
        ("rota_slots_in_use", "gauge"),
        ("rota_capacity", "gauge"),
        ("rota_excluded", "gauge"),
        ("rota_failures_total", "counter"),
        ("rota_budget_waits_total", "counter"),
        ("rota_leases_granted_total", "counter"),
    ] {
        assert!(
            text.contains(&format!("\n# TYPE {name} {kind}\n"))
                || text.starts_with(&format!("# HELP {name} ")),
            "{name} {kind}"
        );
    }
    drop((a1, judge));
}

#[tokio::test]
async fn a_reload_that_removes_an_executor_removes_its_series_once_it_has_left() {
    let roster = build(json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"] },
        { "id": "b", "harness": "pi", "roles": ["coder"] },
    ] }))
    .await;
    let held = roster.lease("coder", prefer("b")).await.expect("lease");
    roster.report("b", Failure::new("boom")).expect("report");
    assert!(roster
        .metrics()
        .expect("metrics")
        .contains(r#"executor="b""#));
    roster
        .reload(json!({ "executors": [ { "id": "a", "harness": "pi", "roles": ["coder"] } ] }))
        .expect("reload");
    let text = roster.metrics().expect("metrics");
    assert!(
        text.contains("rota_slots_in_use{executor=\"b\",role=\"coder\"} 1\n"),
        "b drains its lease:\n{text}"
    );
    drop(held);
    roster.flush().await.expect("flush");
    let text = roster.metrics().expect("metrics");
    assert!(!text.contains(r#"executor="b""#), "{text}");
    assert!(text.contains("rota_leases_granted_total{executor=\"a\",role=\"coder\"} 0\n"));
    assert!(text.contains("rota_excluded{executor=\"a\",kind=\"run\"} 0\n"));
}

#[tokio::test]
async fn a_request_that_waits_for_a_budget_counts_once_for_that_executor_and_role() {
    let roster = build(json!({ "executors": [
        { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 3,
          "budget": { "requests": 1, "perMs": 300 } },
        { "id": "b", "harness": "pi", "roles": ["judge"] },
    ] }))
    .await;
    let waits = |executor: &str, role: &str| {
        let text = roster.metrics().expect("metrics");
        samples(&text)
            .get(&format!(
                r#"rota_budget_waits_total{{executor="{executor}",role="{role}"}}"#
            ))
            .copied()
    };
    let first = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(waits("a", "coder"), Some(0.0), "within the budget");
    let second = roster.lease("coder", LeaseOptions::default());
    tokio::pin!(second);
    assert!(
        tokio::time::timeout(Duration::from_millis(50), &mut second)
            .await
            .is_err(),
        "it waits for the window"
    );
    assert_eq!(waits("a", "coder"), Some(1.0), "one request waited");
    let judge = roster
        .lease("judge", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(waits("b", "judge"), Some(0.0), "b has no budget");
    let second = tokio::time::timeout(Duration::from_secs(5), second)
        .await
        .expect("woken at the window's room")
        .expect("lease");
    assert_eq!(
        waits("a", "coder"),
        Some(1.0),
        "a grant at room is no new wait"
    );
    drop((first, second, judge));
}
