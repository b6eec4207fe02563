//! The log contract of the shared roster on a real PostgreSQL, for rota-host's
//! `PgLogStore` (npm/test/shared/log-store.test.mjs checks the npm package's).
//!
//!   ROTA_PG_URL=$(scripts/postgres.sh start) \
//!     cargo test -p rota-host --features shared --test shared_log
//!
//! ROTA_TEST_SEED=<n> replays the random batch sizes.
#![cfg(feature = "shared")]

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rota_host::shared::{
    LogEntry, LogError, LogStore, PgLogStore, SubscribeOptions, Wake, SCHEMA_VERSION,
};
use tokio::sync::Mutex;
use tokio::time::Instant;
use tokio_postgres::{Client, NoTls};

fn url() -> String {
    std::env::var("ROTA_PG_URL").expect(
        "ROTA_PG_URL is not set: ROTA_PG_URL=$(scripts/postgres.sh start) cargo test -p rota-host --features shared --test shared_log",
    )
}

#[allow(clippy::disallowed_methods)] // names no other run uses, and seeds
fn wall_clock_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

static ROSTERS: AtomicU64 = AtomicU64::new(0);

/// A roster name no other test (or run) uses.
fn roster(what: &str) -> String {
    let now = wall_clock_nanos() / 1_000_000;
    format!(
        "rust-{what}-{}-{now}-{}",
        std::process::id(),
        ROSTERS.fetch_add(1, Ordering::Relaxed)
    )
}

async fn open(roster: &str) -> PgLogStore {
    PgLogStore::connect(&url(), roster).await.expect("connect")
}

async fn raw(url: &str) -> (Client, tokio::task::JoinHandle<()>) {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("connect");
    let task = tokio::spawn(async move {
        let _ = connection.await;
    });
    (client, task)
}

/// Waits until `check` holds, panicking after 10 s with `what`.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let end = Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn until_db_time(store: &PgLogStore, t: u64) {
    until(&format!("database time {t}"), || async {
        store.now().await.expect("now") >= t
    })
    .await;
}

async fn read_all(store: &PgLogStore, from: u64) -> Vec<LogEntry> {
    let mut all: Vec<LogEntry> = Vec::new();
    loop {
        let batch = store
            .read_from(from + all.len() as u64, 1000)
            .await
            .expect("read");
        if batch.is_empty() {
            return all;
        }
        all.extend(batch);
    }
}

fn assert_gapless(entries: &[LogEntry], from: u64) {
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e.seq, from + i as u64, "seq at index {i}");
    }
    for w in entries.windows(2) {
        assert!(w[1].now >= w[0].now, "now goes back at seq {}", w[1].seq);
    }
}

fn code<T: std::fmt::Debug>(result: Result<T, LogError>) -> &'static str {
    result.expect_err("expected an error").code()
}

/// Reads the whole log in order from `from` on every wake, into `seen`.
struct Follower {
    seen: Arc<Mutex<Vec<LogEntry>>>,
    task: tokio::task::JoinHandle<()>,
    listener: Arc<std::sync::Mutex<Option<u32>>>,
}

impl Follower {
    async fn start(store: Arc<PgLogStore>, from: u64, options: SubscribeOptions) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let listener = Arc::new(std::sync::Mutex::new(None));
        let mut subscription = store.subscribe(options).await.expect("subscribe");
        let (s, l) = (Arc::clone(&seen), Arc::clone(&listener));
        let task = tokio::spawn(async move {
            let mut next = from;
            while subscription.next().await.is_some() {
                *l.lock().expect("lock") = subscription.listener_pid();
                loop {
                    let batch = store.read_from(next, 1000).await.expect("read");
                    let Some(last) = batch.last() else { break };
                    next = last.seq + 1;
                    s.lock().await.extend(batch);
                }
            }
        });
        Follower {
            seen,
            task,
            listener,
        }
    }

    async fn count(&self) -> usize {
        self.seen.lock().await.len()
    }

    fn listener_pid(&self) -> Option<u32> {
        *self.listener.lock().expect("lock")
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The tests' server with another database, in key=value form.
fn url_of_database(db: &str) -> String {
    let config: tokio_postgres::Config = url().parse().expect("a connection URL");
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        other => panic!("ROTA_PG_URL names a TCP host, not {other:?}"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("postgres");
    format!("host={host} port={port} user={user} dbname={db}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_applies_once_and_refuses_a_newer_version() {
    let (admin, _t) = raw(&url()).await;
    let db = format!(
        "rota_schema_rust_{}_{}",
        std::process::id(),
        ROSTERS.fetch_add(1, Ordering::Relaxed)
    );
    admin
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .await
        .expect("create database");
    let other = url_of_database(&db);
    let newer = async {
        // Three instances at once on an empty database: the advisory lock serializes them.
        let (a, b, c) = tokio::join!(
            PgLogStore::connect(&other, "r"),
            PgLogStore::connect(&other, "r"),
            PgLogStore::connect(&other, "r")
        );
        let (a, _b, _c) = (
            a.expect("connect"),
            b.expect("connect"),
            c.expect("connect"),
        );
        a.append(&["x".into()], "a", None).await.expect("append");
        let (client, _t) = raw(&other).await;
        let versions: Vec<i32> = client
            .query("SELECT version FROM rota_schema ORDER BY version", &[])
            .await
            .expect("versions")
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(versions, vec![SCHEMA_VERSION]);
        client
            .execute(
                "INSERT INTO rota_schema (version) VALUES ($1)",
                &[&(SCHEMA_VERSION + 1)],
            )
            .await
            .expect("a newer version");
        PgLogStore::connect(&other, "r").await.map(|_| ())
    }
    .await;
    admin
        .batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)"))
        .await
        .expect("drop database");
    assert_eq!(code(newer), "SCHEMA_TOO_NEW");
}

/// A small seeded generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_appenders_leave_no_gap_and_no_duplicate() {
    let seed = std::env::var("ROTA_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(wall_clock_nanos);
    println!("eight_concurrent_appenders: ROTA_TEST_SEED={seed}");
    let mut rng = Rng(seed);
    let name = roster("concurrent");
    let plans: Vec<Vec<Vec<String>>> = (0..8)
        .map(|a| {
            (0..40)
                .map(|b| {
                    (0..1 + rng.next() % 4)
                        .map(|k| format!("a{a}-b{b}-{k}"))
                        .collect()
                })
                .collect()
        })
        .collect();
    let mut tasks = Vec::new();
    for (a, plan) in plans.iter().cloned().enumerate() {
        let store = open(&name).await;
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for batch in &plan {
                got.push(
                    store
                        .append(batch, &format!("a{a}"), None)
                        .await
                        .expect("append"),
                );
            }
            got
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.expect("appender"));
    }
    let store = open(&name).await;
    let all = read_all(&store, 1).await;
    let total: usize = plans.iter().flatten().map(Vec::len).sum();
    assert_eq!(all.len(), total);
    assert_gapless(&all, 1);
    let by_seq: BTreeMap<u64, &LogEntry> = all.iter().map(|e| (e.seq, e)).collect();
    for (a, plan) in plans.iter().enumerate() {
        let mut last = 0;
        for (b, batch) in plan.iter().enumerate() {
            let r = results[a][b];
            assert_eq!((r.last_seq - r.first_seq + 1) as usize, batch.len());
            assert!(r.first_seq > last, "appender {a}'s batches in its order");
            last = r.last_seq;
            for (k, entry) in batch.iter().enumerate() {
                let e = by_seq[&(r.first_seq + k as u64)];
                assert_eq!(&e.entry, entry);
                assert_eq!(e.instance, format!("a{a}"));
                assert_eq!(e.now, r.now, "one now per batch");
                assert_eq!(e.epoch, None);
            }
        }
    }
    let distinct: BTreeSet<&str> = all.iter().map(|e| e.entry.as_str()).collect();
    assert_eq!(distinct.len(), total, "no entry twice");
    let head = store.head().await.expect("head");
    assert_eq!(head.last_seq, total as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_append_leaves_no_gap() {
    let name = roster("abort");
    let store = open(&name).await;
    store
        .append(&["one".into(), "two".into()], "a", None)
        .await
        .expect("append");

    // Rolled back after its seqs were given.
    let (mut client, _t) = raw(&url()).await;
    let tx = client.transaction().await.expect("begin");
    let row = tx
        .query_one(
            "SELECT * FROM rota_append($1, $2, NULL, $3)",
            &[&name, &"x", &vec!["lost1", "lost2"]],
        )
        .await
        .expect("append in a transaction");
    assert_eq!(row.get::<_, i64>("first_seq"), 3);
    tx.rollback().await.expect("rollback");
    let three = store
        .append(&["three".into()], "a", None)
        .await
        .expect("append");
    assert_eq!((three.first_seq, three.last_seq), (3, 3));

    // A batch the database refuses (text cannot hold NUL): all or nothing.
    assert_eq!(
        code(
            store
                .append(&["four?".into(), "bad\0".into()], "a", None)
                .await
        ),
        "DATABASE"
    );

    // Killed in the middle of its transaction while another append waits on the head.
    let (admin, _a) = raw(&url()).await;
    let pid: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0);
    let tx = client.transaction().await.expect("begin");
    let row = tx
        .query_one(
            "SELECT * FROM rota_append($1, $2, NULL, $3)",
            &[&name, &"x", &vec!["killed1", "killed2", "killed3"]],
        )
        .await
        .expect("append in a transaction");
    assert_eq!(row.get::<_, i64>("first_seq"), 4);
    let store = Arc::new(store);
    let waiting = {
        let store = Arc::clone(&store);
        tokio::spawn(async move { store.append(&["four".into()], "b", None).await })
    };
    until("the second append to wait on the killed one", || async {
        let n: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                &[&pid],
            )
            .await
            .expect("pg_stat_activity")
            .get(0);
        n > 0
    })
    .await;
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .expect("terminate");
    let four = waiting.await.expect("task").expect("append");
    assert_eq!(four.first_seq, 4);
    drop(tx);

    let all = read_all(&store, 1).await;
    assert_gapless(&all, 1);
    let entries: Vec<&str> = all.iter().map(|e| e.entry.as_str()).collect();
    assert_eq!(entries, ["one", "two", "three", "four"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_are_invalid_input_and_append_nothing() {
    let store = open(&roster("bad")).await;
    assert_eq!(code(store.append(&[], "a", None).await), "INVALID_INPUT");
    assert_eq!(
        code(store.append(&["x".into()], "", None).await),
        "INVALID_INPUT"
    );
    assert_eq!(
        code(store.append(&["x".into()], "a", Some(0)).await),
        "INVALID_INPUT"
    );
    assert_eq!(code(store.read_from(0, 10).await), "INVALID_INPUT");
    assert_eq!(store.head().await.expect("head").last_seq, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_epoch_is_refused_and_the_new_leader_accepted() {
    let store = open(&roster("epoch")).await;
    let a = store.acquire_leader("a", 60_000).await.expect("acquire");
    assert!(a.acquired);
    assert_eq!(a.instance.as_deref(), Some("a"));
    store
        .append(&["tick-a".into()], "a", Some(a.epoch))
        .await
        .expect("leader append");

    let b = store.acquire_leader("b", 60_000).await.expect("acquire");
    assert!(!b.acquired);
    assert_eq!((b.instance.as_deref(), b.epoch), (Some("a"), a.epoch));
    assert_eq!(
        code(store.append(&["tick-b".into()], "b", Some(a.epoch)).await),
        "STALE_EPOCH"
    );

    assert!(store.step_down("a", a.epoch).await.expect("step down"));
    assert_eq!(
        code(
            store
                .append(&["tick-a-late".into()], "a", Some(a.epoch))
                .await
        ),
        "STALE_EPOCH"
    );
    let b2 = store.acquire_leader("b", 60_000).await.expect("acquire");
    assert!(b2.acquired);
    assert_eq!(b2.epoch, a.epoch + 1);
    assert_eq!(
        code(
            store
                .append(&["tick-a-stale".into()], "a", Some(a.epoch))
                .await
        ),
        "STALE_EPOCH"
    );
    assert_eq!(
        code(store.renew_leader("a", a.epoch, 60_000).await),
        "STALE_EPOCH"
    );
    store
        .append(&["tick-b".into()], "b", Some(b2.epoch))
        .await
        .expect("new leader append");
    store
        .append(&["request-a".into()], "a", None)
        .await
        .expect("plain append");

    let all = read_all(&store, 1).await;
    assert_gapless(&all, 1);
    let got: Vec<(&str, Option<u64>)> = all.iter().map(|e| (e.entry.as_str(), e.epoch)).collect();
    assert_eq!(
        got,
        [
            ("tick-a", Some(a.epoch)),
            ("tick-b", Some(b2.epoch)),
            ("request-a", None)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_lapses_on_database_time_and_the_next_leader_takes_a_new_epoch() {
    let name = roster("lease");
    let store = Arc::new(open(&name).await);
    let ttl = 400;
    let a = store.acquire_leader("a", ttl).await.expect("acquire");
    assert!(a.acquired);
    let again = store.acquire_leader("a", ttl).await.expect("acquire");
    assert_eq!(again.epoch, a.epoch, "the holder keeps its epoch");
    let renewed = store.renew_leader("a", a.epoch, ttl).await.expect("renew");
    assert!(renewed >= again.expires_at);
    assert!(
        !store
            .acquire_leader("b", ttl)
            .await
            .expect("acquire")
            .acquired
    );

    // Appends of the old leader race the takeover: the log never interleaves epochs.
    let ticking = {
        let store = Arc::clone(&store);
        let epoch = a.epoch;
        tokio::spawn(async move {
            loop {
                match store.append(&["tick-a".into()], "a", Some(epoch)).await {
                    Ok(_) => {}
                    Err(e) => return e.code(),
                }
            }
        })
    };
    until_db_time(&store, renewed).await;
    let b = store.acquire_leader("b", ttl).await.expect("acquire");
    assert!(b.acquired);
    assert_eq!(b.instance.as_deref(), Some("b"));
    assert_eq!(b.epoch, a.epoch + 1);
    assert!(b.expires_at >= renewed + ttl);
    store
        .append(&["tick-b".into()], "b", Some(b.epoch))
        .await
        .expect("new leader append");
    assert_eq!(ticking.await.expect("task"), "STALE_EPOCH");
    assert_eq!(
        code(store.renew_leader("a", a.epoch, ttl).await),
        "STALE_EPOCH"
    );
    assert!(
        !store
            .acquire_leader("a", ttl)
            .await
            .expect("acquire")
            .acquired
    );

    let all = read_all(&store, 1).await;
    assert_gapless(&all, 1);
    let first_b = all
        .iter()
        .position(|e| e.epoch == Some(b.epoch))
        .expect("b's entry");
    assert!(first_b > 0);
    // Every entry of the old epoch is stamped before its lease ended.
    assert!(all[..first_b]
        .iter()
        .all(|e| e.epoch == Some(a.epoch) && e.now < renewed));
    assert!(all[first_b..].iter().all(|e| e.epoch == Some(b.epoch)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_with_no_notifications_reads_everything_by_polling() {
    let store = Arc::new(open(&roster("poll")).await);
    let reader = Follower::start(
        Arc::clone(&store),
        1,
        SubscribeOptions {
            poll: Duration::from_millis(50),
            listen: false,
        },
    )
    .await;
    for i in 0..20 {
        store
            .append(&[format!("e{i}")], "a", None)
            .await
            .expect("append");
    }
    until("the poll-only reader to read 20 entries", || async {
        reader.count().await == 20
    })
    .await;
    assert_gapless(&reader.seen.lock().await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_whose_listen_connection_is_killed_catches_up_and_listens_again() {
    let store = Arc::new(open(&roster("notify")).await);
    let (admin, _a) = raw(&url()).await;
    let mut counter = store
        .subscribe(SubscribeOptions {
            poll: Duration::from_secs(60),
            listen: true,
        })
        .await
        .expect("subscribe");
    assert_eq!(counter.next().await, Some(Wake::Listen));
    let reader = Follower::start(
        Arc::clone(&store),
        1,
        SubscribeOptions {
            poll: Duration::from_millis(300),
            listen: true,
        },
    )
    .await;
    until("LISTEN", || async { reader.listener_pid().is_some() }).await;
    let appended = store
        .append(&["one".into()], "a", None)
        .await
        .expect("append");
    let wake = tokio::time::timeout(Duration::from_secs(10), counter.next())
        .await
        .expect("a notification in time");
    assert_eq!(
        wake,
        Some(Wake::Notify {
            seq: appended.last_seq
        })
    );
    until("the reader to read entry 1", || async {
        reader.count().await == 1
    })
    .await;

    let pid = reader.listener_pid().expect("pid");
    admin
        .execute(
            "SELECT pg_terminate_backend($1)",
            &[&i32::try_from(pid).expect("pid")],
        )
        .await
        .expect("terminate");
    // Appended while its LISTEN is gone: the notifications are lost, the entries are not.
    for i in 2..=10 {
        store
            .append(&[format!("e{i}")], "a", None)
            .await
            .expect("append");
    }
    until("the reader to catch up", || async {
        reader.count().await == 10
    })
    .await;
    until("LISTEN again", || async {
        reader.listener_pid().is_some_and(|p| p != pid)
    })
    .await;
    assert_gapless(&reader.seen.lock().await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lapsed_heartbeats_are_listed_with_a_grace_period_after_the_database_started() {
    let name = roster("heartbeat");
    let store = open(&name).await;
    let (admin, _a) = raw(&url()).await;
    let ttl = 300;
    let started: i64 = admin
        .query_one(
            "SELECT (extract(epoch FROM pg_postmaster_start_time()) * 1000)::bigint",
            &[],
        )
        .await
        .expect("start time")
        .get(0);
    let started = u64::try_from(started).expect("start time");
    let seen_a = store.heartbeat("a").await.expect("heartbeat");
    until_db_time(&store, seen_a.max(started) + ttl).await;
    let seen_b = store.heartbeat("b").await.expect("heartbeat");
    assert!(seen_b >= seen_a + ttl);
    let expired = store.expired_instances(ttl).await.expect("expired");
    assert_eq!(expired.len(), 1);
    assert_eq!(
        (expired[0].instance.as_str(), expired[0].last_seen),
        ("a", seen_a)
    );

    // A heartbeat long before the server's start: with a TTL longer than the server's
    // uptime it is not (yet) expired; with a short one it is.
    store.heartbeat("old").await.expect("heartbeat");
    admin
        .execute(
            "UPDATE rota_instance SET last_seen = 0 WHERE roster = $1 AND instance = 'old'",
            &[&name],
        )
        .await
        .expect("age it");
    let uptime = store.now().await.expect("now") - started;
    let names = |v: Vec<rota_host::shared::InstanceSeen>| {
        v.into_iter().map(|e| e.instance).collect::<Vec<_>>()
    };
    assert!(names(
        store
            .expired_instances(uptime + 60_000)
            .await
            .expect("expired")
    )
    .is_empty());
    assert_eq!(
        names(store.expired_instances(ttl).await.expect("expired")),
        ["a", "old"]
    );
    assert!(store.forget_instance("a").await.expect("forget"));
    assert!(!store.forget_instance("a").await.expect("forget"));
    assert!(store.heartbeat("b").await.expect("heartbeat") >= seen_b);
    assert_eq!(
        names(store.expired_instances(ttl).await.expect("expired")),
        ["old"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_compaction_and_a_late_reader_from_the_snapshot() {
    let name = roster("snapshot");
    let store = open(&name).await;
    assert_eq!(store.latest_snapshot().await.expect("snapshot"), None);
    for i in 1..=10 {
        store
            .append(&[format!("e{i}")], "a", None)
            .await
            .expect("append");
    }
    assert_eq!(
        code(store.write_snapshot(11, "past the head").await),
        "NO_SNAPSHOT"
    );
    assert_eq!(code(store.compact(6).await), "NO_SNAPSHOT");
    store
        .write_snapshot(4, "state after 4")
        .await
        .expect("snapshot");
    store
        .write_snapshot(6, "state after 6")
        .await
        .expect("snapshot");
    assert_eq!(store.compact(6).await.expect("compact"), 6);
    let head = store.head().await.expect("head");
    assert_eq!((head.last_seq, head.compacted_through), (10, 6));
    assert_eq!(code(store.read_from(1, 10).await), "COMPACTED");
    assert_eq!(code(store.read_from(6, 10).await), "COMPACTED");
    assert_eq!(code(store.compact(4).await), "NO_SNAPSHOT");

    // A new instance: the latest snapshot, then the rest of the log, then what follows.
    let late = Arc::new(open(&name).await);
    let snapshot = late
        .latest_snapshot()
        .await
        .expect("snapshot")
        .expect("one");
    assert_eq!(
        (snapshot.seq, snapshot.state.as_str()),
        (6, "state after 6")
    );
    let reader = Follower::start(
        Arc::clone(&late),
        snapshot.seq + 1,
        SubscribeOptions {
            poll: Duration::from_millis(50),
            listen: true,
        },
    )
    .await;
    store
        .append(&["e11".into()], "a", None)
        .await
        .expect("append");
    until("the late reader to reach 11", || async {
        reader.count().await == 5
    })
    .await;
    let seen = reader.seen.lock().await;
    assert_gapless(&seen, 7);
    let entries: Vec<&str> = seen.iter().map(|e| e.entry.as_str()).collect();
    assert_eq!(entries, ["e7", "e8", "e9", "e10", "e11"]);
}

/// The database server's start, epoch ms (the heartbeat grace counts from it).
async fn postmaster_start(admin: &Client) -> u64 {
    let started: i64 = admin
        .query_one(
            "SELECT (extract(epoch FROM pg_postmaster_start_time()) * 1000)::bigint",
            &[],
        )
        .await
        .expect("start time")
        .get(0);
    u64::try_from(started).expect("start time")
}

fn expire_owner(owner: &str) -> String {
    format!("{{\"type\":\"expireOwner\",\"owner\":\"{owner}\"}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leaders_expiry_is_refused_while_the_heartbeat_is_fresh_and_needs_the_epoch() {
    let name = roster("expire");
    let store = open(&name).await;
    let (admin, _a) = raw(&url()).await;
    let ttl = 300;
    let started = postmaster_start(&admin).await;
    let lead = store
        .acquire_leader("leader", 60_000)
        .await
        .expect("acquire");
    assert!(lead.acquired);
    let epoch = lead.epoch;
    let seen = store.heartbeat("x").await.expect("heartbeat");
    store.heartbeat("y").await.expect("heartbeat");

    // Fresh: refused, nothing appended, the row stays.
    let fresh = store
        .expire_instance("x", ttl, "leader", epoch, &expire_owner("x"))
        .await
        .expect("expire");
    assert_eq!(fresh, None, "a fresh heartbeat refuses the expiry");
    // No row at all: nothing to expire.
    let unknown = store
        .expire_instance("nobody", ttl, "leader", epoch, &expire_owner("nobody"))
        .await
        .expect("expire");
    assert_eq!(unknown, None);
    assert_eq!(store.head().await.expect("head").last_seq, 0);

    // Lapsed: expired, the entry appended with the epoch, the row gone.
    until_db_time(&store, seen.max(started) + ttl).await;
    let seq = store
        .expire_instance("x", ttl, "leader", epoch, &expire_owner("x"))
        .await
        .expect("expire")
        .expect("a lapsed heartbeat is expired");
    let all = read_all(&store, 1).await;
    assert_eq!(all.len(), 1);
    assert_eq!(
        (
            all[0].seq,
            all[0].entry.as_str(),
            all[0].epoch,
            all[0].instance.as_str()
        ),
        (seq, expire_owner("x").as_str(), Some(epoch), "leader")
    );
    let listed: Vec<String> = store
        .expired_instances(ttl)
        .await
        .expect("expired")
        .into_iter()
        .map(|e| e.instance)
        .collect();
    assert_eq!(listed, ["y"], "x was forgotten with its expiry");
    assert!(!store.forget_instance("x").await.expect("forget"));
    // Expired once: again, there is no row to expire.
    let again = store
        .expire_instance("x", ttl, "leader", epoch, &expire_owner("x"))
        .await
        .expect("expire");
    assert_eq!(again, None);

    // A stale epoch, or an instance that does not hold it: refused, nothing changes.
    assert_eq!(
        code(
            store
                .expire_instance("y", ttl, "leader", epoch + 1, &expire_owner("y"))
                .await
        ),
        "STALE_EPOCH"
    );
    assert_eq!(
        code(
            store
                .expire_instance("y", ttl, "other", epoch, &expire_owner("y"))
                .await
        ),
        "STALE_EPOCH"
    );
    assert!(store.step_down("leader", epoch).await.expect("step down"));
    assert_eq!(
        code(
            store
                .expire_instance("y", ttl, "leader", epoch, &expire_owner("y"))
                .await
        ),
        "STALE_EPOCH"
    );
    assert_eq!(store.head().await.expect("head").last_seq, seq);
    let listed = store.expired_instances(ttl).await.expect("expired");
    assert_eq!(listed.len(), 1, "y's row is still there: {listed:?}");

    // Bad arguments are refused before anything is sent.
    for bad in [
        store.expire_instance("y", 0, "leader", epoch, "e").await,
        store.expire_instance("", ttl, "leader", epoch, "e").await,
        store.expire_instance("y", ttl, "", epoch, "e").await,
        store.expire_instance("y", ttl, "leader", 0, "e").await,
        store.expire_instance("y", ttl, "leader", epoch, "").await,
    ] {
        assert_eq!(code(bad), "INVALID_INPUT");
    }
}

/// Spins for `micros` (a sub-millisecond jitter tokio's timer cannot give).
fn spin(micros: u64) {
    let end = Instant::now() + Duration::from_micros(micros);
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_racing_an_expiry_lands_first_or_finds_the_expiry_in_the_log() {
    let seed = std::env::var("ROTA_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(wall_clock_nanos);
    println!("a_heartbeat_racing_an_expiry: ROTA_TEST_SEED={seed}");
    let mut rng = Rng(seed);
    let name = roster("expiry-race");
    // Two connections: the heartbeat and the expiry really run at once.
    let leader = Arc::new(open(&name).await);
    let beater = Arc::new(open(&name).await);
    let (admin, _a) = raw(&url()).await;
    let ttl = 1000;
    let started = postmaster_start(&admin).await;
    until_db_time(&leader, started + ttl).await; // past the grace
    let epoch = leader
        .acquire_leader("leader", 600_000)
        .await
        .expect("acquire")
        .epoch;
    let (mut expired, mut refused) = (BTreeSet::new(), 0);
    for round in 0..60 {
        let who = format!("i{round}");
        beater.heartbeat(&who).await.expect("heartbeat");
        // Lapsed long ago: the expiry goes through unless the heartbeat lands first.
        admin
            .execute(
                "UPDATE rota_instance SET last_seen = 0 WHERE roster = $1 AND instance = $2",
                &[&name, &who],
            )
            .await
            .expect("age it");
        let (beat_delay, expiry_delay) = (rng.next() % 1500, rng.next() % 1500);
        let start = Arc::new(tokio::sync::Barrier::new(2));
        let beat = {
            let (beater, start, who) = (Arc::clone(&beater), Arc::clone(&start), who.clone());
            tokio::spawn(async move {
                start.wait().await;
                spin(beat_delay);
                beater.heartbeat(&who).await.expect("heartbeat");
                // What the instance reads after its heartbeat returned.
                beater.head().await.expect("head").last_seq
            })
        };
        let expiry = {
            let (leader, start, who) = (Arc::clone(&leader), Arc::clone(&start), who.clone());
            tokio::spawn(async move {
                start.wait().await;
                spin(expiry_delay);
                leader
                    .expire_instance(&who, ttl, "leader", epoch, &expire_owner(&who))
                    .await
                    .expect("expire")
            })
        };
        let head_after_beat = beat.await.expect("heartbeat task");
        match expiry.await.expect("expiry task") {
            Some(seq) => {
                assert!(
                    head_after_beat >= seq,
                    "round {round} (ROTA_TEST_SEED={seed}): {who} was expired at seq {seq}, \
                     but the log read after its heartbeat returned ends at {head_after_beat}"
                );
                expired.insert(who);
            }
            None => refused += 1,
        }
    }
    println!(
        "a_heartbeat_racing_an_expiry: {} expired, {refused} refused",
        expired.len()
    );
    let logged: BTreeSet<String> = read_all(&leader, 1)
        .await
        .iter()
        .map(|e| {
            assert_eq!(e.epoch, Some(epoch));
            let value: serde_json::Value = serde_json::from_str(&e.entry).expect("json");
            value["owner"].as_str().expect("owner").to_string()
        })
        .collect();
    assert_eq!(
        logged, expired,
        "the log holds exactly the expiries reported"
    );
}
