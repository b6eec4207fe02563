//! Tenants on the Rust roster: with `fairness: "tenants"`, a lease's
//! `LeaseOptions::tenant` decides its turn. Tenant a keeps five requests waiting on
//! one slot, tenant b asks once after them: b is granted second (one turn of a, then
//! b's), where lease order would serve it last. The snapshot's queue and leases name
//! each tenant.

mod common;

use std::time::Duration;

use common::policy;
use rota_host::{Lease, LeaseOptions, Roster};
use serde_json::json;
use tokio::sync::mpsc;

fn tenant(name: &str) -> LeaseOptions {
    LeaseOptions {
        tenant: Some(name.to_string()),
        label: Some(name.to_string()),
        ..LeaseOptions::default()
    }
}

async fn queued(roster: &Roster, n: usize) {
    for _ in 0..200 {
        if roster.snapshot().expect("snapshot").queue.len() == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{n} requests never waited");
}

#[tokio::test]
async fn a_tenant_that_asks_once_is_served_within_its_turn() {
    let roster = Roster::builder()
        .document(json!({
            "fairness": "tenants",
            "executors": [{ "id": "x", "harness": "pi", "roles": ["coder"], "slots": 1 }],
        }))
        .module(policy())
        .build()
        .await
        .expect("roster");
    let held = roster.lease("coder", tenant("a")).await.expect("lease");
    let (tx, mut rx) = mpsc::unbounded_channel::<(String, Lease)>();
    let names: Vec<String> = (1..=5)
        .map(|i| format!("a{i}"))
        .chain(["b".to_string()])
        .collect();
    for (i, name) in names.iter().enumerate() {
        let (asker, tx, name) = (roster.clone(), tx.clone(), name.clone());
        let who = if name == "b" { "b" } else { "a" };
        tokio::spawn(async move {
            let options = LeaseOptions {
                label: Some(name.clone()),
                ..tenant(who)
            };
            let lease = asker.lease("coder", options).await.expect("granted");
            let _ = tx.send((name, lease));
        });
        queued(&roster, i + 1).await;
    }
    let snapshot = roster.snapshot().expect("snapshot");
    let tenants: Vec<_> = snapshot.queue.iter().map(|q| q.tenant.clone()).collect();
    assert_eq!(tenants.last(), Some(&Some("b".to_string())));
    assert_eq!(snapshot.executors[0].leases[0].tenant.as_deref(), Some("a"));
    drop(held);
    let mut order = Vec::new();
    for _ in 0..names.len() {
        let (name, lease) = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("a grant")
            .expect("a lease");
        order.push(name);
        drop(lease);
    }
    assert_eq!(order, ["a1", "b", "a2", "a3", "a4", "a5"]);
}
