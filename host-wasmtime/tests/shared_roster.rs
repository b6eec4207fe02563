//! The shared roster (sql/PROTOCOL.md) on a real PostgreSQL: several rota-host
//! instances over one log, and a Node replica folding the same log.
//!
//!   ROTA_PG_URL=$(scripts/postgres.sh start) \
//!     cargo test -p rota-host --features shared --test shared_roster
//!
//! Without ROTA_PG_URL every test says so and passes without running.
#![cfg(feature = "shared")]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rota_host::shared::{
    Lease, LogEntry, LogError, LogStore, PgLogStore, SharedConfig, SharedRoster,
    SharedRosterBuilder,
};
use rota_host::{HostEngine, HostError, LeaseOptions, PolicyModule};
use serde_json::{json, Value};
use tokio::time::Instant;

fn url() -> Option<String> {
    let url = std::env::var("ROTA_PG_URL").ok().filter(|u| !u.is_empty());
    if url.is_none() {
        eprintln!(
            "skipped: ROTA_PG_URL is not set (ROTA_PG_URL=$(scripts/postgres.sh start) cargo test -p rota-host --features shared --test shared_roster)"
        );
    }
    url
}

#[allow(clippy::disallowed_methods)] // names no other run uses
fn wall_clock_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(1)
}

static ROSTERS: AtomicU64 = AtomicU64::new(0);

/// A roster name no other test (or run) uses.
fn roster(what: &str) -> String {
    format!(
        "rust-roster-{what}-{}-{}-{}",
        std::process::id(),
        wall_clock_ms(),
        ROSTERS.fetch_add(1, Ordering::Relaxed)
    )
}

async fn module() -> PolicyModule {
    tokio::task::spawn_blocking(|| HostEngine::shared()?.load(None))
        .await
        .expect("loader")
        .expect("the bundled module")
}

fn document(slots: u32) -> Value {
    json!({ "executors": [
        { "id": "a", "harness": "claude", "roles": ["coder"], "slots": slots },
        { "id": "b", "harness": "codex", "roles": ["coder"], "slots": slots },
    ] })
}

fn fast() -> SharedConfig {
    SharedConfig {
        ttl: Duration::from_millis(1200),
        leader_ttl: Duration::from_millis(1200),
        sweep: Duration::from_millis(100),
        snapshot_every: 1000,
        poll: Duration::from_millis(200),
    }
}

/// An instance `name` of `roster`, configured, not yet connected.
fn builder(
    url: &str,
    name: &str,
    roster: &str,
    module: &PolicyModule,
    document: &Value,
    config: SharedConfig,
) -> SharedRosterBuilder {
    SharedRoster::builder()
        .url(url)
        .roster(roster)
        .name(name)
        .document(document.clone())
        .module(module.clone())
        .config(config)
}

/// An instance `name` of `roster`, connected, keeping its state hashes.
async fn join(
    url: &str,
    name: &str,
    roster: &str,
    module: &PolicyModule,
    document: &Value,
    config: SharedConfig,
) -> SharedRoster {
    builder(url, name, roster, module, document, config)
        .record_hashes(true)
        .connect()
        .await
        .expect("connect")
}

/// Waits until `check` holds, panicking after `secs` with `what`.
async fn until<F, Fut>(what: &str, secs: u64, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let end = Instant::now() + Duration::from_secs(secs);
    while !check().await {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A lease of `role` with the default options: it must be granted.
async fn take<S: LogStore + 'static>(roster: &SharedRoster<S>, role: &str) -> Lease<S> {
    roster
        .lease(role, LeaseOptions::default())
        .await
        .expect("lease")
}

/// A lease of `role` that waits `ms` and must time out (on the leader's ticks).
async fn times_out<S: LogStore + 'static>(roster: &SharedRoster<S>, role: &str, ms: u64) {
    let waited = roster
        .lease(
            role,
            LeaseOptions {
                timeout: Some(Duration::from_millis(ms)),
                ..LeaseOptions::default()
            },
        )
        .await;
    assert!(
        matches!(waited, Err(HostError::TimedOut { .. })),
        "{waited:?}"
    );
}

async fn read_all(store: &PgLogStore) -> Vec<LogEntry> {
    let mut all: Vec<LogEntry> = Vec::new();
    loop {
        let from = all.last().map_or(1, |e| e.seq + 1);
        let batch = store.read_from(from, 1000).await.expect("read");
        if batch.is_empty() {
            return all;
        }
        all.extend(batch);
    }
}

/// Every replica folded the whole log and agrees on the hash there.
async fn converged(rosters: &[&SharedRoster]) -> (u64, String) {
    for roster in rosters {
        roster.flush().await.expect("flush");
    }
    let head = rosters[0].store().head().await.expect("head").last_seq;
    for roster in rosters {
        let roster = (*roster).clone();
        until("a replica to fold the whole log", 10, || {
            let roster = roster.clone();
            async move {
                roster.sync().await;
                roster.folded_seq() >= head
            }
        })
        .await;
    }
    // Nobody appends now (callers are done); read the hash at one seq on each.
    let mut seen = BTreeMap::new();
    for roster in rosters {
        let (seq, hash) = roster.folded_hash().expect("hash");
        seen.insert(roster.instance(), (seq, hash));
    }
    let first = seen.values().next().cloned().expect("a roster");
    for (instance, at) in &seen {
        if at.0 == first.0 {
            assert_eq!(at.1, first.1, "{instance} differs at seq {}", at.0);
        }
    }
    first
}

/// The hashes two replicas recorded agree at every seq both folded.
fn same_hashes<A: LogStore, B: LogStore>(a: &SharedRoster<A>, b: &SharedRoster<B>) -> usize {
    let theirs: BTreeMap<u64, String> = b.hashes().into_iter().collect();
    let mut compared = 0;
    for (seq, hash) in a.hashes() {
        if let Some(other) = theirs.get(&seq) {
            assert_eq!(
                &hash,
                other,
                "{} and {} differ at seq {seq}",
                a.instance(),
                b.instance()
            );
            compared += 1;
        }
    }
    compared
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_share_the_slots_without_an_over_grant() {
    let Some(url) = url() else { return };
    let name = roster("grants");
    let module = module().await;
    let doc = document(2);
    let mut rosters = Vec::new();
    for i in 0..3 {
        rosters.push(join(&url, &format!("r{i}"), &name, &module, &doc, fast()).await);
    }
    assert_eq!(rosters[0].slots("coder").expect("slots"), 4);
    let held = Arc::new(AtomicI64::new(0));
    let peak = Arc::new(AtomicI64::new(0));
    let per_executor: Arc<std::sync::Mutex<BTreeMap<String, i64>>> = Arc::default();
    let mut callers = Vec::new();
    for roster in &rosters {
        for _ in 0..4 {
            let (roster, held, peak, per) = (
                roster.clone(),
                held.clone(),
                peak.clone(),
                per_executor.clone(),
            );
            callers.push(tokio::spawn(async move {
                let mut grants = 0;
                for _ in 0..6 {
                    let lease = take(&roster, "coder").await;
                    let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    {
                        let mut per = per.lock().expect("lock");
                        let on = per.entry(lease.executor().to_string()).or_default();
                        *on += 1;
                        assert!(*on <= 2, "{} over-granted: {on} leases", lease.executor());
                    }
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    *per.lock()
                        .expect("lock")
                        .entry(lease.executor().to_string())
                        .or_default() -= 1;
                    held.fetch_sub(1, Ordering::SeqCst);
                    lease.release().expect("release");
                    grants += 1;
                }
                grants
            }));
        }
    }
    let mut total = 0;
    for caller in callers {
        total += caller.await.expect("caller");
    }
    assert_eq!(total, 72);
    let peak = peak.load(Ordering::SeqCst);
    assert!((1..=4).contains(&peak), "peak {peak} leases on 4 slots");
    for roster in &rosters {
        roster.flush().await.expect("every release in the log");
    }
    let refs: Vec<&SharedRoster> = rosters.iter().collect();
    let (seq, _) = converged(&refs).await;
    assert!(
        seq > 144,
        "every lease and release is in the log (seq {seq})"
    );
    assert_eq!(rosters[1].available("coder").expect("available"), 4);
    // Checked from the log too: a fresh fold has no executor over its slots at any seq.
    let log = read_all(rosters[0].store()).await;
    let genesis: Value = serde_json::from_str(&log[0].entry).expect("genesis");
    let mut replay =
        rota_host::PolicyRuntime::new(module.clone(), &genesis["document"], &genesis["options"])
            .expect("replica");
    let mut most = 0;
    for entry in &log[1..] {
        let bytes = format!("{{\"now\":{},{}", entry.now, &entry.entry[1..]);
        replay.step_value(bytes.as_bytes()).expect("fold");
        for executor in replay.snapshot().expect("snapshot").executors {
            assert!(
                executor.leases.len() <= executor.slots as usize,
                "{} over-granted at seq {}",
                executor.id,
                entry.seq
            );
            most = most.max(executor.leases.len());
        }
    }
    assert_eq!(most, 2, "the executors were full at times");
    assert!(same_hashes(&rosters[0], &rosters[1]) > 100);
    assert!(same_hashes(&rosters[0], &rosters[2]) > 100);
    for roster in rosters {
        roster.close().await.expect("close");
    }
}

/// Two instances spend one account's budget (4 grants in any
/// 400 ms); folded from the log, no 5 grants in a row fall within 400 ms of the log's
/// time, and both instances were granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_spend_one_accounts_budget_never_over_it_on_the_logs_time() {
    let Some(url) = url() else { return };
    let name = roster("budget");
    let module = module().await;
    let (requests, per_ms) = (4usize, 400u64);
    let doc = json!({
        "accounts": { "acme": { "budget": { "requests": requests, "perMs": per_ms } } },
        "executors": [
            { "id": "a", "harness": "claude", "roles": ["coder"], "slots": 3, "account": "acme" },
            { "id": "b", "harness": "codex", "roles": ["coder"], "slots": 3, "account": "acme" },
        ],
    });
    let mut rosters = Vec::new();
    for i in 0..2 {
        rosters.push(join(&url, &format!("r{i}"), &name, &module, &doc, fast()).await);
    }
    let mut callers = Vec::new();
    for roster in &rosters {
        for _ in 0..3 {
            let roster = roster.clone();
            callers.push(tokio::spawn(async move {
                for _ in 0..4 {
                    let lease = take(&roster, "coder").await;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    lease.release().expect("release");
                }
            }));
        }
    }
    for caller in callers {
        caller.await.expect("caller");
    }
    for roster in &rosters {
        roster.flush().await.expect("every release in the log");
    }
    let refs: Vec<&SharedRoster> = rosters.iter().collect();
    converged(&refs).await;
    // The grants, at the log's time, from a fresh fold.
    let log = read_all(rosters[0].store()).await;
    let genesis: Value = serde_json::from_str(&log[0].entry).expect("genesis");
    let mut replay =
        rota_host::PolicyRuntime::new(module.clone(), &genesis["document"], &genesis["options"])
            .expect("replica");
    let mut times = Vec::new();
    let mut owners = BTreeMap::new();
    for entry in &log[1..] {
        let bytes = format!("{{\"now\":{},{}", entry.now, &entry.entry[1..]);
        let answer = replay.step_value(bytes.as_bytes()).expect("fold");
        for output in answer["outputs"].as_array().into_iter().flatten() {
            if output["type"] == "granted" {
                times.push(entry.now);
                *owners
                    .entry(output["owner"].as_str().unwrap_or("").to_string())
                    .or_insert(0) += 1;
            }
        }
    }
    times.sort_unstable(); // (the log's times never go back; the core clamps them anyway)
    assert_eq!(times.len(), 24, "every caller's four leases");
    assert_eq!(owners.len(), 2, "both instances were granted: {owners:?}");
    for pair in times.windows(requests + 1) {
        assert!(
            pair[requests] - pair[0] >= per_ms,
            "{} grants within {} ms of the log's time: {pair:?}",
            requests + 1,
            pair[requests] - pair[0]
        );
    }
    for roster in rosters {
        roster.close().await.expect("close");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_instance_is_expired_and_its_lease_goes_to_a_waiter() {
    let Some(url) = url() else { return };
    let name = roster("expiry");
    let module = module().await;
    let doc = json!({ "executors": [{ "id": "a", "harness": "claude", "roles": ["coder"], "slots": 1 }] });
    let a = join(&url, "a", &name, &module, &doc, fast()).await;
    let b = join(&url, "b", &name, &module, &doc, fast()).await;
    let held = take(&a, "coder").await;
    let gone = a.instance();
    std::mem::forget(held); // the crash takes its lease with it
    a.crash();
    let crashed = Instant::now();
    let lease = tokio::time::timeout(
        Duration::from_secs(6),
        b.lease("coder", LeaseOptions::default()),
    )
    .await
    .expect("the waiter is granted once the crashed instance expires")
    .expect("lease");
    let waited = crashed.elapsed();
    assert!(
        waited >= Duration::from_millis(900),
        "expired too early: {waited:?}"
    );
    assert_eq!(lease.executor(), "a");
    let log = read_all(b.store()).await;
    let expiry = format!("{{\"type\":\"expireOwner\",\"owner\":\"{gone}\"}}");
    let entry = log
        .iter()
        .find(|e| e.entry == expiry)
        .expect("the expiry is in the log");
    assert!(entry.epoch.is_some(), "a leader's expiry carries its epoch");
    drop(lease);
    b.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_takes_over_and_the_old_epoch_is_refused() {
    let Some(url) = url() else { return };
    let name = roster("failover");
    let module = module().await;
    let doc = document(1);
    let a = join(&url, "a", &name, &module, &doc, fast()).await;
    until("a to lead", 5, || async { a.is_leader() }).await;
    let b = join(&url, "b", &name, &module, &doc, fast()).await;
    let old_epoch = a.leader_epoch().expect("epoch");
    let old_leader = a.instance();
    assert!(!b.is_leader());
    a.crash();
    until("b to lead", 8, || async { b.is_leader() }).await;
    let new_epoch = b.leader_epoch().expect("epoch");
    assert!(
        new_epoch > old_epoch,
        "epochs grow: {old_epoch} -> {new_epoch}"
    );
    // The old leader's appends are refused.
    let stale = b
        .store()
        .append(
            &["{\"type\":\"tick\"}".to_string()],
            &old_leader,
            Some(old_epoch),
        )
        .await;
    assert!(matches!(stale, Err(LogError::StaleEpoch(_))), "{stale:?}");
    // The new leader ticks: a request that waits times out on the log's time.
    let _one = take(&b, "coder").await;
    let _two = take(&b, "coder").await;
    times_out(&b, "coder", 300).await;
    let log = read_all(b.store()).await;
    assert!(log
        .iter()
        .any(|e| e.entry == "{\"type\":\"tick\"}" && e.epoch == Some(new_epoch)));
    drop((_one, _two));
    b.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_joiner_starts_from_a_snapshot_and_reaches_the_same_hash() {
    let Some(url) = url() else { return };
    let name = roster("late");
    let module = module().await;
    let doc = document(1);
    let config = SharedConfig {
        snapshot_every: 20,
        ..fast()
    };
    let a = join(&url, "a", &name, &module, &doc, config).await;
    until("a to lead", 5, || async { a.is_leader() }).await;
    for _ in 0..40 {
        let lease = take(&a, "coder").await;
        lease.release().expect("release");
    }
    a.sync().await;
    until("two snapshots and a compaction", 10, || async {
        matches!(a.store().read_from(1, 1).await, Err(LogError::Compacted(_)))
    })
    .await;
    let snapshot = a
        .store()
        .latest_snapshot()
        .await
        .expect("read")
        .expect("a snapshot");
    let late = join(&url, "late", &name, &module, &doc, config).await;
    let first = late.hashes().first().cloned().expect("a first hash");
    assert!(
        first.0 >= snapshot.seq,
        "started from the snapshot at {}, not the genesis",
        snapshot.seq
    );
    assert!(same_hashes(&a, &late) > 0);
    let lease = take(&late, "coder").await;
    lease.release().expect("release");
    converged(&[&a, &late]).await;
    late.close().await.expect("close");
    a.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_replica_and_the_rust_replicas_agree_at_every_seq() {
    let Some(url) = url() else { return };
    let name = roster("cross");
    let module = module().await;
    let doc = json!({ "executors": [
        { "id": "a", "harness": "claude", "roles": ["coder", "reviewer"], "slots": 1 },
        { "id": "b", "harness": "codex", "roles": ["coder"], "slots": 1 },
    ] });
    let a = join(&url, "a", &name, &module, &doc, fast()).await;
    until("a to lead", 5, || async { a.is_leader() }).await;
    let b = join(&url, "b", &name, &module, &doc, fast()).await;
    let c = join(&url, "c", &name, &module, &doc, fast()).await;
    // Leases and releases from both.
    for _ in 0..5 {
        let one = take(&a, "coder").await;
        let two = take(&b, "coder").await;
        one.release().expect("release");
        drop(two);
    }
    // A report with a timed exclusion (a leader's tick ends it), and a resume.
    let exclusion = a
        .report_http("b", 429, &[("retry-after", "1")], "slow down")
        .await
        .expect("report");
    assert!(exclusion.is_some(), "a 429 excludes b");
    b.exclude("a", rota_host::ExclusionKind::Manual, "maintenance", None)
        .await
        .expect("exclude");
    b.resume("a").await.expect("resume");
    // A timeout: both slots held, a third request waits and times out on a tick.
    let one = take(&a, "coder").await;
    let two = take(&a, "coder").await;
    // A cancel: a waiting request whose future is dropped.
    let dropped = tokio::time::timeout(
        Duration::from_millis(100),
        b.lease("coder", LeaseOptions::default()),
    )
    .await;
    assert!(dropped.is_err(), "no slot was free");
    times_out(&b, "coder", 300).await;
    drop((one, two));
    // A rejected call: the core's error, the same on every replica.
    let unknown = a.resume("nobody").await;
    assert!(
        matches!(unknown, Err(HostError::Policy { .. })),
        "{unknown:?}"
    );
    // An expireOwner: c holds a lease and a waiting request, then crashes.
    let held = take(&c, "reviewer").await;
    std::mem::forget(held);
    let gone = c.instance();
    c.crash();
    until("c to be expired", 8, || async {
        read_all(a.store())
            .await
            .iter()
            .any(|e| e.entry.contains("expireOwner") && e.entry.contains(&gone))
    })
    .await;
    // The exclusion of b ends on the log's time (a tick).
    until("b back in the round", 5, || async {
        a.sync().await;
        a.available("coder").unwrap_or(0) == 2
    })
    .await;
    let last = take(&a, "reviewer").await;
    last.release().expect("release");
    converged(&[&a, &b]).await;

    // The Node replica folds the same log.
    let log = read_all(a.store()).await;
    let kinds: Vec<&str> = [
        "lease",
        "release",
        "report",
        "exclude",
        "resume",
        "tick",
        "expireOwner",
        "cancel",
    ]
    .into_iter()
    .filter(|k| {
        !log.iter()
            .any(|e| e.entry.starts_with(&format!("{{\"type\":\"{k}\"")))
    })
    .collect();
    assert!(kinds.is_empty(), "the log lacks {kinds:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("log.jsonl");
    let lines: Vec<String> = log
        .iter()
        .map(|e| json!({ "seq": e.seq, "now": e.now, "entry": e.entry }).to_string())
        .collect();
    std::fs::write(&file, lines.join("\n") + "\n").expect("write the log");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/shared/fold.mjs");
    let output = std::process::Command::new("node")
        .arg(&script)
        .arg(&file)
        .output()
        .expect("node runs (the npm package needs `make wasm`)");
    assert!(
        output.status.success(),
        "node fold.mjs failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let node: BTreeMap<u64, String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let (seq, hash) = line.split_once(' ')?;
            Some((seq.parse().ok()?, hash.to_string()))
        })
        .collect();
    assert_eq!(node.len(), log.len(), "node folded every entry");
    let rust = a.hashes();
    assert_eq!(
        rust.first().map(|h| h.0),
        Some(1),
        "a folded from the genesis"
    );
    let mut compared = 0;
    for (seq, hash) in &rust {
        let theirs = node
            .get(seq)
            .unwrap_or_else(|| panic!("node has no hash at seq {seq}"));
        assert_eq!(hash, theirs, "rust and node differ at seq {seq}");
        compared += 1;
    }
    assert!(
        compared as u64 >= log.len() as u64 - 1,
        "compared {compared} of {}",
        log.len()
    );
    assert!(same_hashes(&a, &b) > 10);
    b.close().await.expect("close");
    a.close().await.expect("close");
}

/// A store whose database can be switched off: every call fails while `down`.
struct Flaky {
    inner: PgLogStore,
    down: Arc<std::sync::atomic::AtomicBool>,
}

impl Flaky {
    fn check(&self) -> Result<(), LogError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(LogError::Database(
                "the test switched the database off".into(),
            ));
        }
        Ok(())
    }
}

impl LogStore for Flaky {
    fn roster(&self) -> &str {
        self.inner.roster()
    }
    async fn append(
        &self,
        entries: &[String],
        instance: &str,
        epoch: Option<u64>,
    ) -> Result<rota_host::shared::Appended, LogError> {
        self.check()?;
        self.inner.append(entries, instance, epoch).await
    }
    async fn read_from(&self, seq: u64, limit: u32) -> Result<Vec<LogEntry>, LogError> {
        self.check()?;
        self.inner.read_from(seq, limit).await
    }
    async fn head(&self) -> Result<rota_host::shared::Head, LogError> {
        self.check()?;
        self.inner.head().await
    }
    async fn now(&self) -> Result<u64, LogError> {
        self.check()?;
        self.inner.now().await
    }
    async fn subscribe(
        &self,
        options: rota_host::shared::SubscribeOptions,
    ) -> Result<rota_host::shared::Subscription, LogError> {
        self.check()?;
        self.inner.subscribe(options).await
    }
    async fn heartbeat(&self, instance: &str) -> Result<u64, LogError> {
        self.check()?;
        self.inner.heartbeat(instance).await
    }
    async fn expired_instances(
        &self,
        ttl_ms: u64,
    ) -> Result<Vec<rota_host::shared::InstanceSeen>, LogError> {
        self.check()?;
        self.inner.expired_instances(ttl_ms).await
    }
    async fn expire_instance(
        &self,
        instance: &str,
        ttl_ms: u64,
        leader: &str,
        epoch: u64,
        entry: &str,
    ) -> Result<Option<u64>, LogError> {
        self.check()?;
        self.inner
            .expire_instance(instance, ttl_ms, leader, epoch, entry)
            .await
    }
    async fn forget_instance(&self, instance: &str) -> Result<bool, LogError> {
        self.check()?;
        self.inner.forget_instance(instance).await
    }
    async fn acquire_leader(
        &self,
        instance: &str,
        ttl_ms: u64,
    ) -> Result<rota_host::shared::LeaderLease, LogError> {
        self.check()?;
        self.inner.acquire_leader(instance, ttl_ms).await
    }
    async fn renew_leader(&self, instance: &str, epoch: u64, ttl_ms: u64) -> Result<u64, LogError> {
        self.check()?;
        self.inner.renew_leader(instance, epoch, ttl_ms).await
    }
    async fn step_down(&self, instance: &str, epoch: u64) -> Result<bool, LogError> {
        self.check()?;
        self.inner.step_down(instance, epoch).await
    }
    async fn write_snapshot(&self, seq: u64, state: &str) -> Result<(), LogError> {
        self.check()?;
        self.inner.write_snapshot(seq, state).await
    }
    async fn latest_snapshot(&self) -> Result<Option<rota_host::shared::Snapshot>, LogError> {
        self.check()?;
        self.inner.latest_snapshot().await
    }
    async fn compact(&self, through: u64) -> Result<u64, LogError> {
        self.check()?;
        self.inner.compact(through).await
    }
}

/// Instance "a" over a store whose database the test switches off (`down`).
async fn join_flaky(
    url: &str,
    roster: &str,
    module: &PolicyModule,
    document: &Value,
) -> (SharedRoster<Flaky>, Arc<std::sync::atomic::AtomicBool>) {
    let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flaky = Flaky {
        inner: PgLogStore::connect(url, roster).await.expect("connect"),
        down: down.clone(),
    };
    let a = SharedRoster::builder()
        .name("a")
        .document(document.clone())
        .module(module.clone())
        .config(fast())
        .record_hashes(true)
        .connect_with(flaky)
        .await
        .expect("connect");
    (a, down)
}

/// A `coder` lease asked for on a task of its own (it waits while every slot is held).
fn lease_in_background<S: LogStore + 'static>(
    roster: &SharedRoster<S>,
) -> tokio::task::JoinHandle<rota_host::Result<rota_host::shared::Lease<S>>> {
    let roster = roster.clone();
    tokio::spawn(async move { roster.lease("coder", LeaseOptions::default()).await })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_loses_the_database_fences_and_rejoins_under_a_new_id() {
    let Some(url) = url() else { return };
    let name = roster("fence");
    let module = module().await;
    let doc = json!({ "executors": [{ "id": "a", "harness": "claude", "roles": ["coder"], "slots": 1 }] });
    let (a, down) = join_flaky(&url, &name, &module, &doc).await;
    until("a to lead", 5, || async { a.is_leader() }).await;
    let b = join(&url, "b", &name, &module, &doc, fast()).await;
    let held = take(&a, "coder").await;
    let waiter = lease_in_background(&a);
    until("a's second request to wait", 5, || async {
        a.snapshot().map(|s| s.queue.len()).unwrap_or(0) == 1
    })
    .await;
    let old_id = a.instance();
    down.store(true, Ordering::SeqCst);
    let since = Instant::now();
    let failed = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the pending call ends within the TTL")
        .expect("task");
    let error = failed.expect_err("a fenced instance grants nothing");
    assert_eq!(error.code(), Some("FENCED"), "{error}");
    assert!(error.to_string().contains("fenced"), "{error}");
    // The first failed read fences (PROTOCOL.md: "or the log cannot be read").
    assert!(
        since.elapsed() < Duration::from_millis(1500),
        "fenced at once"
    );
    assert!(a.is_fenced());
    let refused = a.try_lease("coder", LeaseOptions::default()).await;
    assert!(
        matches!(refused, Err(HostError::Fenced { .. })),
        "{refused:?}"
    );
    // Meanwhile b leads, expires a (its lease released), and takes the slot.
    let taken = tokio::time::timeout(
        Duration::from_secs(6),
        b.lease("coder", LeaseOptions::default()),
    )
    .await
    .expect("b gets a's slot once a is expired")
    .expect("lease");
    assert!(b.is_leader());
    std::mem::forget(held); // a's lease is another's now: its release would be refused
    down.store(false, Ordering::SeqCst);
    until("a to rejoin", 8, || async { !a.is_fenced() }).await;
    assert_ne!(a.instance(), old_id, "the log expired a: a new incarnation");
    assert!(a.instance().starts_with("a:"));
    drop(taken);
    let again = a
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease after rejoining");
    again.release().expect("release");
    until("both replicas at one seq", 10, || async {
        a.sync().await;
        b.sync().await;
        a.folded_seq() == b.folded_seq()
    })
    .await;
    assert_eq!(a.state_hash().expect("hash"), b.state_hash().expect("hash"));
    assert!(same_hashes(&a, &b) > 5);
    b.close().await.expect("close");
    a.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_outage_fences_and_rejoins_under_the_same_id() {
    let Some(url) = url() else { return };
    let name = roster("outage");
    let module = module().await;
    let doc = document(1);
    let (a, down) = join_flaky(&url, &name, &module, &doc).await;
    let _one = take(&a, "coder").await;
    let _two = take(&a, "coder").await;
    let waiter = lease_in_background(&a);
    until("the third request to wait", 5, || async {
        a.snapshot().map(|s| s.queue.len()).unwrap_or(0) == 1
    })
    .await;
    let id = a.instance();
    down.store(true, Ordering::SeqCst);
    let error = waiter.await.expect("task").expect_err("fenced");
    assert_eq!(error.code(), Some("FENCED"), "{error}");
    down.store(false, Ordering::SeqCst);
    until("a to rejoin", 8, || async { !a.is_fenced() }).await;
    assert_eq!(a.instance(), id, "nobody expired a: it keeps its id");
    // The request no call awaits any more is cancelled on rejoining.
    until("the orphaned request to be cancelled", 5, || async {
        a.sync().await;
        a.snapshot().map(|s| s.queue.is_empty()).unwrap_or(false)
    })
    .await;
    let log = read_all(&PgLogStore::connect(&url, &name).await.expect("connect")).await;
    assert!(log
        .iter()
        .any(|e| e.entry.starts_with("{\"type\":\"cancel\"") && e.entry.contains(&id)));
    a.close().await.expect("close");
}

/// Creates machines `m1`, `m2`... and counts deletions.
#[derive(Default)]
struct Machines {
    created: AtomicU64,
    deleted: AtomicU64,
}

impl rota_host::Provisioner for Machines {
    fn create_machine(
        &self,
        _executor: &str,
        _request: &str,
    ) -> rota_host::BoxFuture<Result<Value, String>> {
        let n = self.created.fetch_add(1, Ordering::SeqCst) + 1;
        Box::pin(async move { Ok(json!({ "machine": format!("m{n}") })) })
    }
    fn delete_machine(
        &self,
        _executor: &str,
        _hold: Value,
    ) -> rota_host::BoxFuture<Result<(), String>> {
        self.deleted.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }
    fn preflight(&self, _executor: &str) -> rota_host::BoxFuture<Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_of_a_request_creates_and_deletes_its_machine() {
    let Some(url) = url() else { return };
    let name = roster("machines");
    let module = module().await;
    let doc = json!({ "executors": [
        { "id": "vm", "harness": "codex", "roles": ["coder"], "provision": true, "maxConcurrentAttempts": 2, "kind": "exe.dev" },
    ] });
    let (mine, theirs) = (Arc::new(Machines::default()), Arc::new(Machines::default()));
    let a = builder(&url, "a", &name, &module, &doc, fast())
        .provisioner(mine.clone())
        .connect()
        .await
        .expect("connect");
    let b = builder(&url, "b", &name, &module, &doc, fast())
        .provisioner(theirs.clone())
        .connect()
        .await
        .expect("connect");
    let lease = take(&a, "coder").await;
    assert_eq!(lease.hold(), Some(&json!({ "machine": "m1" })));
    assert_eq!(mine.created.load(Ordering::SeqCst), 1);
    assert_eq!(
        theirs.created.load(Ordering::SeqCst),
        0,
        "only the owner creates"
    );
    lease.release().expect("release");
    until(
        "the owner to delete the machine and free the slot",
        5,
        || async {
            a.sync().await;
            mine.deleted.load(Ordering::SeqCst) == 1 && a.available("coder").unwrap_or(0) == 2
        },
    )
    .await;
    assert_eq!(theirs.deleted.load(Ordering::SeqCst), 0);
    b.close().await.expect("close");
    a.close().await.expect("close");
}

/// An instance on a runtime of its own (one thread) that the test can stop as SIGSTOP
/// would: none of its tasks runs, and its timers fall due meanwhile.
struct Stoppable {
    roster: SharedRoster,
    controls: tokio::sync::mpsc::UnboundedSender<std::sync::mpsc::Receiver<()>>,
    stopped: tokio::sync::mpsc::UnboundedReceiver<()>,
}

impl Stoppable {
    async fn join(
        url: &str,
        name: &str,
        roster: &str,
        module: &PolicyModule,
        document: &Value,
        config: SharedConfig,
    ) -> Stoppable {
        let (ready_tx, ready) = tokio::sync::oneshot::channel();
        let (controls, mut control_rx) =
            tokio::sync::mpsc::unbounded_channel::<std::sync::mpsc::Receiver<()>>();
        let (stopped_tx, stopped) = tokio::sync::mpsc::unbounded_channel();
        let (url, name, roster, module, document) = (
            url.to_string(),
            name.to_string(),
            roster.to_string(),
            module.clone(),
            document.clone(),
        );
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let joined = join(&url, &name, &roster, &module, &document, config).await;
                let _ = ready_tx.send(joined);
                while let Some(resume) = control_rx.recv().await {
                    let _ = stopped_tx.send(());
                    // Blocks the runtime's only thread: every task of the instance stops.
                    let _: Result<(), _> = resume.recv();
                }
            });
        });
        Stoppable {
            roster: ready.await.expect("the instance's thread"),
            controls,
            stopped,
        }
    }

    /// Stops the instance; it continues when the returned sender is dropped.
    async fn stop(&mut self) -> std::sync::mpsc::Sender<()> {
        let (resume, on_resume) = std::sync::mpsc::channel();
        self.controls
            .send(on_resume)
            .expect("the instance's thread");
        self.stopped.recv().await.expect("stopped");
        resume
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_instance_settles_no_grant_the_log_expired_while_it_was_stopped() {
    let Some(url) = url() else { return };
    let name = roster("stopped");
    let module = module().await;
    let doc = json!({ "executors": [{ "id": "a", "harness": "claude", "roles": ["coder"], "slots": 1 }] });
    let b = join(&url, "b", &name, &module, &doc, fast()).await;
    until("b to lead", 5, || async { b.is_leader() }).await;
    let mut a = Stoppable::join(&url, "a", &name, &module, &doc, fast()).await;
    let held = take(&b, "coder").await;
    let waiter = {
        let a = a.roster.clone();
        tokio::spawn(async move {
            a.lease("coder", LeaseOptions::default())
                .await
                .map(|lease| lease.id())
        })
    };
    until("a's request to wait", 5, || async {
        b.sync().await;
        b.snapshot().map(|s| s.queue.len()).unwrap_or(0) == 1
    })
    .await;
    let old_id = a.roster.instance();
    let resume = a.stop().await;
    // While a is stopped, b's release grants a's waiting request; then b, the leader,
    // expires a (silent for the TTL), which gives the slot to b's next request.
    held.release().expect("release");
    let taken = tokio::time::timeout(
        Duration::from_secs(10),
        b.lease("coder", LeaseOptions::default()),
    )
    .await
    .expect("b gets the slot once a is expired")
    .expect("lease");
    // a's last heartbeat came before the stop, so the expiry may come less than a TTL
    // after it; the log below shows the order that matters (grant, then expiry).
    drop(resume); // SIGCONT: a's timers are all overdue
    let settled = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("a's caller is settled")
        .expect("task");
    let log = read_all(b.store()).await;
    let granted_at = log
        .iter()
        .find(|e| e.entry.starts_with("{\"type\":\"release\"") && e.instance == b.instance())
        .expect("b's release is in the log")
        .seq;
    let expiry = format!("{{\"type\":\"expireOwner\",\"owner\":\"{old_id}\"}}");
    let expired_at = log
        .iter()
        .find(|e| e.entry == expiry)
        .expect("the log expired a")
        .seq;
    assert!(
        granted_at < expired_at,
        "a's grant (seq {granted_at}) came before its expiry (seq {expired_at})"
    );
    match settled {
        Ok(lease) => panic!(
            "a settled its caller with lease {lease}, granted at seq {granted_at}, though the \
             log expired a at seq {expired_at} while it was stopped (the lease is b's now)"
        ),
        Err(error) => assert_eq!(error.code(), Some("FENCED"), "{error}"),
    }
    until("a to rejoin", 8, || async { !a.roster.is_fenced() }).await;
    assert_ne!(
        a.roster.instance(),
        old_id,
        "the log expired a: a new incarnation"
    );
    drop(taken);
    until("both replicas at one seq", 10, || async {
        a.roster.sync().await;
        b.sync().await;
        a.roster.folded_seq() == b.folded_seq()
    })
    .await;
    assert_eq!(
        a.roster.state_hash().expect("hash"),
        b.state_hash().expect("hash")
    );
    assert!(same_hashes(&a.roster, &b) > 5);
    // (Closed while its thread runs: its connections are driven there.)
    a.roster.clone().close().await.expect("close");
    b.close().await.expect("close");
    drop(a);
}

/// The genesis fixes `preflight` and `preflightReloads` off (a shared roster does not
/// preflight): one created with `preflightReloads: true` (`Roster::builder()` with the
/// shared form) applies a reload that adds an executor, and its genesis says the
/// options it folds with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_adds_an_executor_applies_though_preflight_reloads_was_asked() {
    let Some(url) = url() else { return };
    let (module, name) = (module().await, roster("preflight-reloads"));
    let only_a = json!({ "executors": [ { "id": "a", "harness": "claude", "roles": ["coder"], "slots": 1 } ] });
    let options = rota_host::Options {
        preflight: true,
        preflight_reloads: true,
        ..rota_host::Options::default()
    };
    // (Built as the embedded roster is, with the shared form as an option.)
    let one = rota_host::Roster::builder()
        .document(&only_a)
        .options(options)
        .module(module.clone())
        .shared(url.as_str(), name.as_str())
        .name("one")
        .config(fast())
        .connect()
        .await
        .expect("connect");
    let genesis = read_all(one.store()).await.remove(0);
    let genesis: Value = serde_json::from_str(&genesis.entry).expect("the genesis");
    assert_eq!(genesis["type"], "genesis");
    // (Off is the default: `preflight` is then left out.)
    assert_ne!(genesis["options"]["preflight"], true, "{genesis}");
    assert_eq!(genesis["options"]["preflightReloads"], false, "{genesis}");
    // Serving before the reload: a's slot.
    let held = take(&one, "coder").await;
    assert_eq!(held.executor(), "a");
    one.reload(json!({ "executors": [
        { "id": "a", "harness": "claude", "roles": ["coder"], "slots": 1 },
        { "id": "b", "harness": "codex", "roles": ["coder"], "slots": 1 },
    ] }))
    .await
    .expect("reload");
    // Applied, not waiting for a preflight: b serves at once.
    let b = tokio::time::timeout(Duration::from_secs(5), take(&one, "coder"))
        .await
        .expect("b is granted without a preflight");
    assert_eq!(b.executor(), "b");
    drop((held, b));
    one.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_roster_refuses_to_swap_one_replicas_module() {
    let Some(url) = url() else { return };
    let name = roster("swap");
    let module = module().await;
    let a = join(&url, "a", &name, &module, &document(1), fast()).await;
    let before = a.module_hash();
    let refused = a.swap_module(module.clone());
    assert!(
        matches!(refused, Err(rota_host::HostError::SwapRefused(ref why)) if why.contains("replicas")),
        "a swap on a shared roster is refused: {refused:?}"
    );
    assert_eq!(a.module_hash(), before);
    let lease = take(&a, "coder").await;
    lease.release().expect("release");
}

/// A log whose genesis was written before the genesis fixed `preflightReloads` off
/// (by an older rota) still asks for a reload's preflights: the instance that
/// appended the reload runs them, once, and the reload applies on every instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_whose_genesis_asks_for_reload_preflights_has_them_run_by_the_reloader() {
    let Some(url) = url() else { return };
    let (module, name) = (module().await, roster("old-genesis"));
    let store = PgLogStore::connect(&url, &name).await.expect("connect");
    let only_a = json!({ "executors": [ { "id": "a", "harness": "claude", "roles": ["coder"], "slots": 1 } ] });
    let genesis = json!({ "type": "genesis", "log": 1, "document": only_a,
        "options": { "canProbe": false, "preflight": false, "preflightReloads": true } });
    store
        .append(&[genesis.to_string()], "writer:00000000", None)
        .await
        .expect("the old genesis");
    let one = join(&url, "one", &name, &module, &Value::Null, fast()).await;
    let two = join(&url, "two", &name, &module, &Value::Null, fast()).await;
    let with_b = json!({ "executors": [
        { "id": "a", "harness": "claude", "roles": ["coder"], "slots": 1 },
        { "id": "b", "harness": "codex", "roles": ["coder"], "slots": 1 },
    ] });
    one.reload(with_b).await.expect("reload");
    until("the reload to apply on both instances", 10, || async {
        one.sync().await;
        two.sync().await;
        one.slots("coder").unwrap_or(0) == 2 && two.slots("coder").unwrap_or(0) == 2
    })
    .await;
    let results: Vec<String> = read_all(&store)
        .await
        .into_iter()
        .filter(|e| e.entry.starts_with("{\"type\":\"preflightResult\""))
        .map(|e| e.instance)
        .collect();
    assert_eq!(
        results,
        [one.instance()],
        "one preflight result, the reloader's"
    );
    one.close().await.expect("close");
    two.close().await.expect("close");
}
