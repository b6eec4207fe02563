//! Issue 18: a live Node instance (`Roster.create({ shared })`, in its own process:
//! npm/test/shared/harness/worker.mjs) and live Rust instances lease from one roster at
//! once, and agree on `stateHash` at every checkpoint the Node instance takes.
//!
//!   ROTA_PG_URL=$(scripts/postgres.sh start) \
//!     cargo test -p rota-host --features shared --test shared_node_rust
//!
//! Without ROTA_PG_URL the test says so and passes without running. Needs the npm
//! package's module (`make wasm`).
#![cfg(feature = "shared")]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rota_host::shared::{LogStore, SharedConfig, SharedRoster};
use rota_host::{HostEngine, LeaseOptions};
use serde_json::{json, Value};
use tokio::time::Instant;

#[allow(clippy::disallowed_methods)] // a roster name no other run uses
fn unique_roster() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("node-rust-{}-{ms}", std::process::id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_instance_and_rust_instances_leasing_one_roster_agree_at_every_checkpoint() {
    let Some(url) = std::env::var("ROTA_PG_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("skipped: ROTA_PG_URL is not set (ROTA_PG_URL=$(scripts/postgres.sh start) cargo test -p rota-host --features shared --test shared_node_rust)");
        return;
    };
    let name = unique_roster();
    let document = json!({ "executors": [
        { "id": "e0", "harness": "claude", "roles": ["coder"], "slots": 2 },
        { "id": "e1", "harness": "codex", "roles": ["coder"], "slots": 2 },
        { "id": "e2", "harness": "pi", "roles": ["coder"], "slots": 1 },
    ] });
    let config = SharedConfig {
        ttl: Duration::from_millis(3000),
        leader_ttl: Duration::from_millis(3000),
        sweep: Duration::from_millis(100),
        snapshot_every: 100_000,
        poll: Duration::from_millis(200),
    };
    let module = tokio::task::spawn_blocking(|| HostEngine::shared()?.load(None))
        .await
        .expect("loader")
        .expect("the bundled module");
    let join = |instance: &str| {
        SharedRoster::builder()
            .url(url.clone())
            .roster(name.clone())
            .name(instance)
            .document(document.clone())
            .module(module.clone())
            .config(config)
            .record_hashes(true)
            .connect()
    };
    // Rust writes the genesis; then the Node instance joins and both lease at once.
    let rust = [
        join("rust-a").await.expect("connect"),
        join("rust-b").await.expect("connect"),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("node.jsonl");
    let worker =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../npm/test/shared/harness/worker.mjs");
    let mut node = std::process::Command::new("node")
        .arg(&worker)
        .args(["--url", &url, "--roster", &name, "--name", "node"])
        .arg("--log")
        .arg(&log)
        .args(["--callers", "4", "--hold-ms", "1", "--duration-ms", "2500"])
        .args([
            "--checkpoint-ms",
            "15",
            "--ttl-ms",
            "3000",
            "--leader-ttl-ms",
            "3000",
        ])
        .args(["--document", &document.to_string()])
        .spawn()
        .expect("node runs the worker");
    let granted = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_millis(2500);
    let mut callers = Vec::new();
    for roster in &rust {
        for _ in 0..4 {
            let (roster, granted) = (roster.clone(), Arc::clone(&granted));
            callers.push(tokio::spawn(async move {
                while Instant::now() < until {
                    let lease = roster
                        .lease("coder", LeaseOptions::default())
                        .await
                        .expect("a Rust lease");
                    granted.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    lease.release().expect("release");
                }
            }));
        }
    }
    for caller in callers {
        caller.await.expect("a Rust caller");
    }
    let status = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::task::spawn_blocking(move || node.wait()),
    )
    .await
    .expect("the Node worker ends within 30 s")
    .expect("join")
    .expect("wait");
    assert!(status.success(), "the Node worker failed: {status}");

    // Both Rust replicas fold the whole log (the Node instance's close is in it).
    let head = rust[0].store().head().await.expect("head").last_seq;
    for roster in &rust {
        roster.flush().await.expect("flush");
        let deadline = Instant::now() + Duration::from_secs(10);
        while roster.folded_seq() < head {
            assert!(Instant::now() < deadline, "a Rust replica folds the log");
            roster.sync().await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let by_seq: BTreeMap<u64, String> = rust[0].hashes().into_iter().collect();
    let other: BTreeMap<u64, String> = rust[1].hashes().into_iter().collect();

    // Every checkpoint of the Node instance against the Rust replicas' hash at its seq.
    let records: Vec<Value> = std::fs::read_to_string(&log)
        .expect("the worker's log")
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let node_grants = records.iter().filter(|r| r["t"] == "grant").count();
    let mut compared = BTreeMap::new();
    for r in records.iter().filter(|r| r["t"] == "checkpoint") {
        let (Some(seq), Some(hash)) = (r["foldedSeq"].as_u64(), r["hash"].as_str()) else {
            continue;
        };
        let rust_hash = by_seq.get(&seq).or_else(|| other.get(&seq));
        let Some(rust_hash) = rust_hash else {
            // (A replica that started from a snapshot has no hash before it.)
            continue;
        };
        assert_eq!(
            rust_hash, hash,
            "Node and Rust differ at seq {seq} (roster {name})"
        );
        compared.insert(seq, hash.to_string());
    }
    for (seq, hash) in &other {
        if let Some(mine) = by_seq.get(seq) {
            assert_eq!(mine, hash, "the two Rust replicas differ at seq {seq}");
        }
    }
    let rust_grants = granted.load(Ordering::Relaxed);
    eprintln!(
        "node × rust: {} distinct checkpoints compared (seq {}..{} of {head}); grants: node {node_grants}, rust {rust_grants}",
        compared.len(),
        compared.keys().next().copied().unwrap_or(0),
        compared.keys().last().copied().unwrap_or(0),
    );
    assert!(
        node_grants > 0 && rust_grants > 0,
        "both hosts leased (node {node_grants}, rust {rust_grants})"
    );
    assert!(
        compared.len() >= 20,
        "too few checkpoints compared to mean anything: {}",
        compared.len()
    );
    for roster in rust {
        roster.close().await.expect("close");
    }
}
