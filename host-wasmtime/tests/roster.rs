//! The async roster against the real policy module: leases, queue, timeouts,
//! cancellation, reports, health probes over loopback HTTP, the state file across a
//! restart, a corrupt state file, provisioning, reload and a live swap under load.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    broken_guest, build, build_probing, health_server, policy, policy_file, roster, scripted_guest,
    wait_for, ABI,
};
// The core's types as the host re-exports them: no direct rota-core dependency needed.
use rota_host::{
    BoxFuture, ExclusionKind, ExplainRequest, Failure, FailureKind, HostError, LeaseOptions,
    Options, Provisioner, Roster,
};
use serde_json::{json, Value};

/// Issue 43: a `workers` document's lease carries the worker's declaration as the
/// scheduler seed reads usine.yaml (`name`, `kind`, `maxConcurrentAttempts`), also
/// for a map keyed by name (whose entries do not write their name).
#[tokio::test]
async fn a_worker_lease_gives_the_worker_declaration() {
    let roster = build(json!({ "workers": { "a": { "kind": "docker", "max_concurrent_attempts": 2, "image": "usine:1" } } })).await;
    let lease = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(lease.executor(), "a");
    assert_eq!(lease.field("name"), Some(&json!("a")));
    assert_eq!(lease.field("kind"), Some(&json!("docker")));
    assert_eq!(lease.field("maxConcurrentAttempts"), Some(&json!(2)));
    assert_eq!(lease.field("image"), Some(&json!("usine:1")));
    assert_eq!(lease.spec().slots, 2);
}

#[tokio::test]
async fn a_lease_gives_the_executor_entry_and_a_reload_updates_it() {
    let entry = json!({
        "id": "engine", "harness": "pi", "model": "qwen3-coder", "roles": ["coder"],
        "baseUrl": "http://127.0.0.1:8080/v1", "env": { "API_KEY": "k" }, "flags": { "speed": "fast" },
    });
    let roster = build(json!({ "executors": [entry] })).await;
    assert_eq!(roster.document().expect("document")["executors"][0], entry);
    let lease = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(lease.executor(), "engine");
    assert_eq!(lease.spec().model.as_deref(), Some("qwen3-coder"));
    assert_eq!(lease.spec().harness, "pi");
    assert_eq!(
        lease.field("baseUrl"),
        Some(&json!("http://127.0.0.1:8080/v1"))
    );
    assert_eq!(lease.field("env"), Some(&json!({ "API_KEY": "k" })));
    assert_eq!(lease.field("flags"), Some(&json!({ "speed": "fast" })));
    drop(lease);

    let mut changed = entry.clone();
    changed["model"] = json!("qwen3-coder-next");
    roster
        .reload(json!({ "executors": [changed] }))
        .expect("reload");
    let lease = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(lease.spec().model.as_deref(), Some("qwen3-coder-next"));
    assert_eq!(
        roster
            .executor_spec("engine")
            .expect("spec")
            .and_then(|s| s.model),
        Some("qwen3-coder-next".into())
    );
    assert_eq!(roster.executor_spec("nobody").expect("spec"), None);
}

#[tokio::test]
async fn leases_are_granted_by_priority_and_released_on_drop() {
    let roster = build(roster()).await;
    assert_eq!(roster.slots("coder").expect("slots"), 4);
    let first = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(first.executor(), "a", "priority 1 first");
    let second = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    let third = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!((second.executor(), third.executor()), ("a", "b"));
    assert_eq!(roster.available("coder").expect("available"), 1);
    drop(first);
    assert_eq!(roster.available("coder").expect("available"), 2);
    third.release().expect("release");
    assert_eq!(roster.available("coder").expect("available"), 3);
    let reviewer = roster
        .try_lease("reviewer", LeaseOptions::default())
        .await
        .expect("try");
    assert_eq!(reviewer.as_ref().map(|l| l.executor()), Some("b"));
}

#[tokio::test]
async fn a_waiter_gets_the_slot_a_release_frees() {
    let roster =
        build(json!({ "executors": [ { "id": "solo", "harness": "pi", "roles": ["coder"] } ] }))
            .await;
    let held = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert!(roster
        .try_lease("coder", LeaseOptions::default())
        .await
        .expect("try")
        .is_none());
    let mut events = roster.subscribe();
    let waiter = {
        let roster = roster.clone();
        tokio::spawn(async move { roster.lease("coder", LeaseOptions::default()).await })
    };
    wait_for(&mut events, "waiting", Duration::from_secs(10)).await;
    assert_eq!(roster.snapshot().expect("snapshot").queue.len(), 1);
    drop(held);
    let lease = waiter.await.expect("join").expect("granted");
    assert_eq!(lease.executor(), "solo");
}

#[tokio::test]
async fn exhausted_when_no_executor_can_ever_serve() {
    let roster = build(roster()).await;
    let error = roster
        .lease(
            "reviewer",
            LeaseOptions {
                avoid: vec!["b".into()],
                ..LeaseOptions::default()
            },
        )
        .await
        .expect_err("nobody else reviews");
    match error {
        HostError::Exhausted { role, reasons } => {
            assert_eq!(role, "reviewer");
            assert!(
                !reasons.is_empty(),
                "a reason per executor or for the roster"
            );
        }
        other => panic!("{other:?}"),
    }
    let error = roster
        .lease("chef", LeaseOptions::default())
        .await
        .expect_err("no such role");
    assert_eq!(error.code(), Some("UNKNOWN_ROLE"));
}

#[tokio::test(start_paused = true)]
async fn a_deadline_times_the_request_out_in_virtual_time() {
    let roster =
        build(json!({ "executors": [ { "id": "solo", "harness": "pi", "roles": ["coder"] } ] }))
            .await;
    let _held = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    let started = tokio::time::Instant::now();
    let error = roster
        .lease(
            "coder",
            LeaseOptions {
                timeout: Some(Duration::from_secs(600)),
                label: Some("issue 17".into()),
                ..LeaseOptions::default()
            },
        )
        .await
        .expect_err("times out");
    match &error {
        HostError::TimedOut { role, label, .. } => {
            assert_eq!(role, "coder");
            assert_eq!(label.as_deref(), Some("issue 17"));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        error.to_string().contains("for role 'coder' (issue 17)"),
        "{error}"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(600) && waited < Duration::from_secs(602),
        "{waited:?}"
    );
    assert!(roster.snapshot().expect("snapshot").queue.is_empty());
}

#[tokio::test(start_paused = true)]
async fn dropping_a_waiting_lease_future_cancels_it_and_leaks_nothing() {
    let roster =
        build(json!({ "executors": [ { "id": "solo", "harness": "pi", "roles": ["coder"] } ] }))
            .await;
    let held = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    let gave_up = tokio::time::timeout(
        Duration::from_secs(5),
        roster.lease("coder", LeaseOptions::default()),
    )
    .await;
    assert!(gave_up.is_err(), "still waiting after 5 s");
    assert!(
        roster.snapshot().expect("snapshot").queue.is_empty(),
        "the dropped request left the queue"
    );
    drop(held);
    assert_eq!(roster.available("coder").expect("available"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_with_retry_after_excludes_until_then() {
    let roster = build(roster()).await;
    let lease = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    // Without Retry-After a rate limit only counts (three in ten minutes exclude).
    assert!(roster
        .report_http("a", 429, &[], "slow down")
        .expect("report")
        .is_none());
    let now = roster.now_ms();
    let exclusion = roster
        .report_http("a", 429, &[("Retry-After", "120")], "slow down")
        .expect("report")
        .expect("a Retry-After excludes until then");
    assert_eq!(
        (exclusion.kind, exclusion.until),
        (ExclusionKind::Until, Some(now + 120_000))
    );
    drop(lease);
    let next = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(next.executor(), "b", "a is out of the round");
    let auth = roster
        .report_http("b", 401, &[], "bad key")
        .expect("report")
        .expect("excluded");
    assert_eq!(auth.kind, ExclusionKind::Run);
    let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    // `b` is already out for the run: an outage does not weaken it.
    assert!(roster.report_io("b", &io).expect("report").is_none());
}

#[tokio::test]
async fn health_probes_over_loopback_bring_an_executor_back() {
    let server = health_server(Duration::from_millis(30)).await;
    // A reset connection is an outage only because this document says so (the seed's
    // signals do not include it).
    let document = json!({ "signals": { "outage": ["ECONNRESET"] }, "executors": [
        { "id": "local", "harness": "opencode", "roles": ["coder"], "health": server.url },
    ] });
    let roster = build_probing(document).await;
    let mut events = roster.subscribe();
    let io = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
    let exclusion = roster
        .report_io("local", &io)
        .expect("report")
        .expect("excluded");
    assert_eq!(exclusion.kind, ExclusionKind::Health);
    // A waiter makes probes frequent; it gets the executor once it is back.
    let waiter = {
        let roster = roster.clone();
        tokio::spawn(async move { roster.lease("coder", LeaseOptions::default()).await })
    };
    wait_for(&mut events, "probeDown", Duration::from_secs(20)).await;
    wait_for(&mut events, "probeDown", Duration::from_secs(20)).await;
    server.up.store(true, Ordering::SeqCst);
    wait_for(&mut events, "back", Duration::from_secs(20)).await;
    let lease = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("granted in time")
        .expect("join")
        .expect("lease");
    assert_eq!(lease.executor(), "local");
    assert!(server.probes.load(Ordering::SeqCst) >= 3);
    assert_eq!(
        server.max_concurrent.load(Ordering::SeqCst),
        1,
        "one probe per executor at a time"
    );
}

/// A loopback HTTPS `/health` that is always up, with a self-signed certificate for
/// 127.0.0.1: its URL and the certificate as PEM.
async fn https_health_server() -> (String, String) {
    use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    use tokio_rustls::rustls::ServerConfig;

    let cert =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).expect("a certificate");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
    let provider = std::sync::Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        for _ in 0..10_000 {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = [0u8; 1024];
                let _ = tls.read(&mut buf).await;
                let _ = tls
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    )
                    .await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (format!("https://{address}/health"), cert.cert.pem())
}

#[tokio::test]
async fn https_health_probes_trust_the_roots_they_are_given() {
    let (url, pem) = https_health_server().await;
    let document = json!({ "signals": { "outage": ["ECONNRESET"] }, "executors": [
        { "id": "tls", "harness": "x", "roles": ["coder"], "health": url },
    ] });
    let options = Options {
        health_probe_interval_ms: 40,
        idle_probe_interval_ms: 40,
        ..Options::default()
    };
    let roster = Roster::builder()
        .document(document)
        .options(options)
        .module(policy())
        .probe_timeout(Duration::from_secs(5))
        .probe_tls(rota_host::ProbeTls::with_roots_pem(pem.as_bytes()).expect("the test root"))
        .build()
        .await
        .expect("roster");
    let mut events = roster.subscribe();
    let io = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
    let exclusion = roster
        .report_io("tls", &io)
        .expect("report")
        .expect("excluded");
    assert_eq!(exclusion.kind, ExclusionKind::Health);
    wait_for(&mut events, "back", Duration::from_secs(20)).await;
    assert_eq!(roster.available("coder").expect("available"), 1);
}

#[tokio::test]
async fn an_unprobeable_health_url_counts_as_down_with_an_event() {
    // The core takes any http(s) URL with a host; this port is out of range for a probe.
    let document = json!({ "executors": [
        { "id": "remote", "harness": "x", "roles": ["coder"], "health": "https://127.0.0.1:99999/health" },
    ] });
    let options = Options {
        health_probe_interval_ms: 20,
        idle_probe_interval_ms: 20,
        ..Options::default()
    };
    let roster = Roster::builder()
        .document(document)
        .options(options)
        .module(policy())
        .build()
        .await
        .expect("roster");
    let mut events = roster.subscribe();
    roster
        .report("remote", Failure::of_kind(FailureKind::Outage, "down"))
        .expect("report");
    let event = wait_for(&mut events, "probeUnsupported", Duration::from_secs(20)).await;
    assert!(event.message.contains("bad port"), "{}", event.message);
}

#[tokio::test]
async fn exclusions_outlive_a_restart_and_other_rosters_entries_stay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.json");
    std::fs::write(
        &state,
        r#"{"version":1,"exclusions":[{"id":"elsewhere","reason":"another roster's","kind":"manual"}]}"#,
    )
    .expect("write");
    let roster_file = dir.path().join("roster.json");
    std::fs::write(&roster_file, roster().to_string()).expect("write");
    let until = {
        let first = Roster::builder()
            .roster_file(&roster_file)
            .state_file(&state)
            .module(policy())
            .build()
            .await
            .expect("roster");
        let until = first.now_ms() + 3_600_000;
        first
            .exclude("a", ExclusionKind::Until, "maintenance", Some(until))
            .expect("exclude");
        first
            .report(
                "b",
                Failure::of_kind(FailureKind::ModelUnavailable, "model gone"),
            )
            .expect("report");
        first.flush().await.expect("flushed");
        until
    };
    let text = std::fs::read_to_string(&state).expect("read");
    let file: Value = serde_json::from_str(&text).expect("json");
    let ids: Vec<&str> = file["value"]["exclusions"]
        .as_array()
        .expect("array")
        .iter()
        .map(|e| e["id"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        ids,
        ["elsewhere", "a"],
        "run exclusions are never written: {text}"
    );
    assert_eq!(file["schemaVersion"], 1, "the seed's envelope");

    let second = Roster::builder()
        .roster_file(&roster_file)
        .state_file(&state)
        .module(policy())
        .build()
        .await
        .expect("roster");
    let snapshot = second.snapshot().expect("snapshot");
    let a = snapshot.executors.iter().find(|e| e.id == "a").expect("a");
    let exclusion = a
        .exclusion
        .as_ref()
        .expect("a is still excluded after the restart");
    assert_eq!(
        (exclusion.kind, exclusion.until),
        (ExclusionKind::Until, Some(until))
    );
    let b = snapshot.executors.iter().find(|e| e.id == "b").expect("b");
    assert!(b.exclusion.is_none(), "a run exclusion ends with the run");
    // Resuming writes the file again, still keeping the other roster's entry.
    second.resume("a").expect("resume");
    second.flush().await.expect("flushed");
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(&state).expect("read")).expect("json");
    let ids: Vec<&str> = file["value"]["exclusions"]
        .as_array()
        .expect("array")
        .iter()
        .map(|e| e["id"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(ids, ["elsewhere"]);
}

#[tokio::test]
async fn a_literal_secret_in_env_is_a_warning_event_at_build_and_on_reload() {
    let secret = "sk-ant-api03-abcdefghijklmnop";
    let doc = |env: Value| {
        json!({ "executors": [
            { "id": "a", "harness": "pi", "roles": ["coder"], "env": env },
            { "id": "b", "harness": "pi", "roles": ["coder"] },
        ] })
    };
    let roster = Roster::builder()
        .document(doc(
            json!({ "ANTHROPIC_API_KEY": secret, "HOME": "/home/u" }),
        ))
        .module(policy())
        .build()
        .await
        .expect("a literal secret is a warning, not an error");
    let secrets = |roster: &Roster| -> Vec<String> {
        roster
            .host_events()
            .into_iter()
            .filter(|e| e.name == "literalSecret")
            .map(|e| {
                assert!(
                    !e.message.contains(secret),
                    "the value never shows: {}",
                    e.message
                );
                assert_eq!(e.level, rota_host::core::Level::Warn);
                e.fields["path"].as_str().unwrap_or_default().to_string()
            })
            .collect()
    };
    assert_eq!(secrets(&roster), ["executors[0].env.ANTHROPIC_API_KEY"]);
    roster
        .reload(doc(json!({ "GITHUB_TOKEN": "ghp_0123456789abcdef" })))
        .expect("reload");
    assert_eq!(
        secrets(&roster),
        [
            "executors[0].env.ANTHROPIC_API_KEY",
            "executors[0].env.GITHUB_TOKEN"
        ]
    );
    roster
        .reload(doc(json!({ "GITHUB_TOKEN": "${GITHUB_TOKEN}" })))
        .expect("reload");
    assert_eq!(secrets(&roster).len(), 2, "a reference is no warning");
}

#[tokio::test]
async fn a_corrupt_state_file_is_moved_aside_with_an_event() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.json");
    std::fs::write(&state, "{ this is not json").expect("write");
    let roster = Roster::builder()
        .document(roster())
        .state_file(&state)
        .module(policy())
        .build()
        .await
        .expect("a corrupt state file is no reason to fail");
    let event = roster
        .host_events()
        .into_iter()
        .find(|e| e.name == "stateFileCorrupt")
        .expect("an event says so");
    let aside = event.fields["movedTo"]
        .as_str()
        .expect("where it went")
        .to_string();
    assert_eq!(
        std::fs::read_to_string(&aside).expect("kept aside"),
        "{ this is not json"
    );
    assert!(!state.exists());
    roster
        .exclude("a", ExclusionKind::Manual, "pause", None)
        .expect("exclude");
    roster.flush().await.expect("flushed");
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(&state).expect("rewritten")).expect("json");
    assert_eq!(file["value"]["exclusions"][0]["id"], "a");
}

/// Issue 43: a file that parses as JSON but is neither envelope rota knows (a
/// `version: 1` object without `exclusions`) is set aside, never read as empty and
/// written over.
#[tokio::test]
async fn a_version_1_object_without_exclusions_is_set_aside_not_written_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.json");
    let theirs = r#"{"version": 1, "data": {"exclusions": [{"id": "a", "kind": "manual", "reason": "kept"}]}}"#;
    std::fs::write(&state, theirs).expect("write");
    let roster = Roster::builder()
        .document(roster())
        .state_file(&state)
        .module(policy())
        .build()
        .await
        .expect("no reason to fail");
    let event = roster
        .host_events()
        .into_iter()
        .find(|e| e.name == "stateFileCorrupt")
        .expect("an event says so");
    assert!(
        event.message.contains("`exclusions` is missing"),
        "{}",
        event.message
    );
    let aside = event.fields["movedTo"]
        .as_str()
        .expect("where it went")
        .to_string();
    roster
        .exclude("b", ExclusionKind::Manual, "pause", None)
        .expect("exclude");
    roster.flush().await.expect("flushed");
    assert_eq!(std::fs::read_to_string(&aside).expect("kept aside"), theirs);
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(&state).expect("rewritten")).expect("json");
    assert_eq!(file["value"]["exclusions"][0]["id"], "b");
}

#[tokio::test]
async fn unreadable_roster_files_and_bad_documents_are_errors() {
    let error = Roster::builder()
        .roster_file("/nonexistent/roster.json")
        .module(policy())
        .build()
        .await
        .expect_err("unreadable");
    assert!(matches!(error, HostError::Read { .. }), "{error:?}");
    let error = Roster::builder()
        .document(json!({ "executors": [ { "id": "", "roles": ["chef"] } ] }))
        .module(policy())
        .build()
        .await
        .expect_err("invalid");
    match error {
        HostError::Policy {
            code, violations, ..
        } => {
            assert_eq!(code, rota_host::PolicyCode::InvalidDocument);
            assert_eq!(code, "INVALID_DOCUMENT");
            assert!(violations.len() >= 2, "{violations:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn repo_overlay_and_narrowing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let user = dir.path().join("user.json");
    let repo = dir.path().join("repo.json");
    std::fs::write(&user, roster().to_string()).expect("write");
    std::fs::write(
        &repo,
        json!({ "executors": [
            { "id": "b", "disabled": true },
            { "id": "c", "harness": "codex", "roles": ["reviewer"] },
        ] })
        .to_string(),
    )
    .expect("write");
    let roster = Roster::builder()
        .roster_file(&user)
        .repo_overlay(&repo)
        .module(policy())
        .build()
        .await
        .expect("roster");
    let ids: Vec<String> = roster
        .snapshot()
        .expect("snapshot")
        .executors
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids, ["a", "c"]);
    let narrowed = Roster::builder()
        .roster_file(&user)
        .executors(vec!["b".into()])
        .module(policy())
        .build()
        .await
        .expect("roster");
    let ids: Vec<String> = narrowed
        .snapshot()
        .expect("snapshot")
        .executors
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids, ["b"]);
    // Reload from the files after they change.
    std::fs::write(&repo, json!({ "executors": [] }).to_string()).expect("write");
    roster.reload_files().expect("reload");
    let ids: Vec<String> = roster
        .snapshot()
        .expect("snapshot")
        .executors
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids, ["a", "b"]);
}

#[tokio::test]
async fn reload_plan_and_explain() {
    let roster = build(roster()).await;
    let _lease = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    let smaller = json!({ "executors": [ { "id": "b", "harness": "claude", "roles": ["coder", "reviewer"], "slots": 2 } ] });
    let plan = roster.plan(&smaller).expect("plan");
    assert_eq!(plan.draining, ["a"]);
    assert!(
        roster
            .snapshot()
            .expect("snapshot")
            .executors
            .iter()
            .any(|e| e.id == "a"),
        "a plan changes nothing"
    );
    let explanation = roster
        .explain(rota_host::Explain::role("reviewer"))
        .expect("explain");
    assert_eq!(explanation.pick.as_deref(), Some("b"));
    let explanation = roster
        .explain(ExplainRequest {
            role: "reviewer".into(),
            avoid: vec!["b".into()],
            prefer: None,
            pin: None,
            request: None,
            affinity: None,
        })
        .expect("explain");
    assert_eq!(explanation.pick, None, "b avoided: {explanation:?}");
    let error = roster
        .reload(json!({ "executors": [ { "id": "x" } ] }))
        .expect_err("invalid");
    assert_eq!(error.code(), Some("INVALID_DOCUMENT"));
    roster.reload(smaller).expect("reload");
    let a = roster
        .snapshot()
        .expect("snapshot")
        .executors
        .into_iter()
        .find(|e| e.id == "a")
        .expect("a drains");
    assert!(a.draining);
}

struct Machines {
    created: AtomicU32,
    deleted: tokio::sync::mpsc::UnboundedSender<Value>,
}

impl Provisioner for Machines {
    fn create_machine(&self, executor: &str, request: &str) -> BoxFuture<Result<Value, String>> {
        let n = self.created.fetch_add(1, Ordering::SeqCst) + 1;
        let hold = json!({ "machine": format!("m{n}"), "executor": executor, "request": request });
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(hold)
        })
    }
    fn delete_machine(&self, _executor: &str, hold: Value) -> BoxFuture<Result<(), String>> {
        let _ = self.deleted.send(hold);
        Box::pin(async { Ok(()) })
    }
    fn preflight(&self, _executor: &str) -> BoxFuture<Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test]
async fn provisioned_executors_create_and_delete_machines() {
    let (deleted, mut deletions) = tokio::sync::mpsc::unbounded_channel();
    let roster = Roster::builder()
        .document(json!({ "executors": [
            { "id": "vm", "harness": "worker", "kind": "vm", "provision": true, "roles": ["coder"], "maxConcurrentAttempts": 2 },
        ] }))
        .provisioner(Arc::new(Machines { created: AtomicU32::new(0), deleted }))
        .module(policy())
        .build()
        .await
        .expect("roster");
    let lease = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(lease.hold().and_then(|h| h["machine"].as_str()), Some("m1"));
    drop(lease);
    let hold = tokio::time::timeout(Duration::from_secs(10), deletions.recv())
        .await
        .expect("the release deletes the machine")
        .expect("a hold");
    assert_eq!(hold["machine"], "m1");
}

/// Machines whose deletion waits for a permit, and preflights that fail for the
/// executors named in `failing`.
struct Gated {
    deletions: Arc<tokio::sync::Semaphore>,
    deleted: AtomicU32,
    preflighted: Mutex<Vec<String>>,
    failing: Vec<String>,
}

impl Provisioner for Gated {
    fn create_machine(&self, executor: &str, request: &str) -> BoxFuture<Result<Value, String>> {
        let hold = json!({ "executor": executor, "request": request });
        Box::pin(async move { Ok(hold) })
    }
    fn delete_machine(&self, _executor: &str, _hold: Value) -> BoxFuture<Result<(), String>> {
        let gate = self.deletions.clone();
        let n = self.deleted.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            // One permit per deletion: it is used up, not given back.
            gate.acquire().await.map_err(|e| e.to_string())?.forget();
            // Every second deletion fails: the slot frees all the same.
            if n % 2 == 1 {
                return Err("the provider timed out".to_string());
            }
            Ok(())
        })
    }
    fn preflight(&self, executor: &str) -> BoxFuture<Result<(), String>> {
        self.preflighted
            .lock()
            .expect("lock")
            .push(executor.to_string());
        let fails = self.failing.iter().any(|f| f == executor);
        Box::pin(async move {
            if fails {
                Err("no docker daemon".to_string())
            } else {
                Ok(())
            }
        })
    }
}

fn gated(failing: &[&str]) -> Arc<Gated> {
    Arc::new(Gated {
        deletions: Arc::new(tokio::sync::Semaphore::new(0)),
        deleted: AtomicU32::new(0),
        preflighted: Mutex::new(Vec::new()),
        failing: failing.iter().map(|s| s.to_string()).collect(),
    })
}

#[tokio::test]
async fn a_released_machine_holds_its_slot_until_the_provisioner_deleted_it() {
    let provisioner = gated(&[]);
    let roster = Roster::builder()
        .document(json!({ "workers": [ { "name": "vm", "kind": "vm", "provision": true } ] }))
        .provisioner(provisioner.clone())
        .module(policy())
        .build()
        .await
        .expect("roster");
    assert_eq!(*provisioner.preflighted.lock().expect("lock"), ["vm"]);
    for round in 0..2 {
        let lease = roster
            .lease("coder", LeaseOptions::default())
            .await
            .expect("lease");
        drop(lease);
        let next = roster.lease("coder", LeaseOptions::default());
        tokio::pin!(next);
        assert!(
            tokio::time::timeout(Duration::from_millis(200), &mut next)
                .await
                .is_err(),
            "round {round}: no slot while the machine is being deleted"
        );
        // The deletion ends (the second one fails): the waiting lease gets the slot.
        provisioner.deletions.add_permits(1);
        let lease = tokio::time::timeout(Duration::from_secs(10), next)
            .await
            .expect("granted once deleted")
            .expect("lease");
        drop(lease);
        provisioner.deletions.add_permits(1);
    }
}

#[tokio::test]
async fn every_executor_is_preflighted_at_start_and_a_failure_stops_it() {
    let document = json!({ "workers": [ { "name": "a" }, { "name": "b" } ] });
    let provisioner = gated(&["b"]);
    let error = Roster::builder()
        .document(document.clone())
        .provisioner(provisioner.clone())
        .module(policy())
        .build()
        .await
        .expect_err("the start fails");
    match &error {
        HostError::StartFailed { executor, error } => {
            assert_eq!(
                (executor.as_str(), error.as_str()),
                ("b", "no docker daemon")
            );
        }
        other => panic!("not a start failure: {other}"),
    }
    // The builder can turn the startup preflight off; without a provisioner that
    // preflights there is none.
    Roster::builder()
        .document(document.clone())
        .provisioner(gated(&["b"]))
        .preflight(false)
        .module(policy())
        .build()
        .await
        .expect("no startup preflight");
    let roster = build(document).await;
    let lease = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(lease.executor(), "a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_live_swap_under_concurrent_leases_loses_and_doubles_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let module = policy_file(dir.path());
    let roster = build(roster()).await;
    let slots = [("a", 2u32), ("b", 2u32)];
    let holding: Arc<[AtomicU32; 2]> = Arc::new([AtomicU32::new(0), AtomicU32::new(0)]);
    let granted = Arc::new(AtomicUsize::new(0));
    let ids = Arc::new(Mutex::new(BTreeSet::new()));
    let mut tasks = Vec::new();
    for task in 0..8 {
        let (roster, holding, granted, ids) = (
            roster.clone(),
            holding.clone(),
            granted.clone(),
            ids.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for round in 0..40 {
                let lease = roster
                    .lease(
                        "coder",
                        LeaseOptions {
                            label: Some(format!("t{task}/{round}")),
                            ..LeaseOptions::default()
                        },
                    )
                    .await
                    .expect("every request is granted");
                let index = usize::from(lease.executor() == "b");
                let now = holding[index].fetch_add(1, Ordering::SeqCst) + 1;
                assert!(
                    now <= slots[index].1,
                    "{} holds {now} leases",
                    slots[index].0
                );
                assert!(
                    ids.lock().expect("lock").insert(lease.id()),
                    "lease {} granted twice",
                    lease.id()
                );
                granted.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
                holding[index].fetch_sub(1, Ordering::SeqCst);
                drop(lease);
            }
        }));
    }
    let mut swaps = 0;
    while granted.load(Ordering::SeqCst) < 8 * 40 && swaps < 50 {
        roster.swap_policy(&module).await.expect("swap");
        swaps += 1;
        tokio::task::yield_now().await;
    }
    for task in tasks {
        task.await.expect("task");
    }
    assert!(swaps >= 1);
    assert_eq!(granted.load(Ordering::SeqCst), 320);
    assert_eq!(ids.lock().expect("lock").len(), 320);
    let snapshot = roster.snapshot().expect("snapshot");
    assert!(snapshot.queue.is_empty());
    assert!(
        snapshot.executors.iter().all(|e| e.busy == 0),
        "every slot came back"
    );
    assert_eq!(roster.available("coder").expect("available"), 4);
}

#[tokio::test]
async fn a_failing_guest_behind_the_roster_fails_one_call_and_the_host_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("broken.wasm");
    std::fs::write(&path, broken_guest(ABI, true)).expect("write");
    let roster = Roster::builder()
        .document(roster())
        .module_path(&path)
        .engine(common::fuel_engine(5_000_000))
        .build()
        .await
        .expect("roster");
    let error = roster
        .exclude(
            "a",
            ExclusionKind::Manual,
            &"a very long reason ".repeat(20),
            None,
        )
        .expect_err("the guest traps");
    assert!(error.is_guest_failure(), "{error:?}");
    let error = roster
        .exclude("a", ExclusionKind::Manual, &"loop ".repeat(500), None)
        .expect_err("the guest loops");
    assert!(error.is_guest_failure(), "{error:?}");
    assert_eq!(roster.recoveries(), 2);
    roster.resume("a").expect("the next call works");
    let names: Vec<String> = roster.host_events().into_iter().map(|e| e.name).collect();
    assert_eq!(
        names,
        [
            "guestFailed",
            "guestRestored",
            "guestFailed",
            "guestRestored"
        ]
    );
}

#[tokio::test]
async fn swap_policy_refuses_a_bad_module_and_keeps_the_running_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let roster = build(roster()).await;
    let _lease = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    let hash = roster.module_hash();
    let bad = dir.path().join("v2.wasm");
    std::fs::write(&bad, broken_guest(2 << 16, true)).expect("write");
    let error = roster.swap_policy(&bad).await.expect_err("ABI 2");
    assert!(matches!(error, HostError::SwapRefused(_)), "{error:?}");
    let error = roster
        .swap_policy(dir.path().join("missing.wasm"))
        .await
        .expect_err("missing");
    assert!(matches!(error, HostError::SwapRefused(_)), "{error:?}");
    assert_eq!(roster.module_hash(), hash);
    assert_eq!(roster.available("coder").expect("available"), 3);
    assert!(roster
        .host_events()
        .iter()
        .any(|e| e.name == "policySwapRefused"));
}

#[tokio::test(start_paused = true)]
async fn the_guest_classifies_the_facts_the_host_extracts() {
    let roster = build(roster()).await;
    // A 429 "Quota exceeded … per minute" is a rate limit, as on every host.
    let quota = rota_host::classify::http_facts(
        429,
        &[],
        "Quota exceeded for quota metric 'Generate Content API requests per minute'",
        0,
    );
    assert_eq!(
        roster.classify(&quota).expect("classify"),
        json!({ "kind": "rateLimit", "rule": "status" })
    );
    // A 404 "model … does not exist": out for the run.
    let gone = roster
        .report_http(
            "a",
            404,
            &[],
            "The model `gpt-9` does not exist or you do not have access to it.",
        )
        .expect("report")
        .expect("excluded");
    assert_eq!(gone.kind, ExclusionKind::Run);
    // A plain 503 is not an outage by the seed's signals.
    assert!(roster
        .report_http("b", 503, &[], "Service Unavailable")
        .expect("report")
        .is_none());
}

#[tokio::test]
async fn an_output_the_host_cannot_read_is_an_event_and_the_others_are_still_carried_out() {
    // A newer module's output, a malformed grant, then an event: the host names the
    // first two in `outputUnreadable` warnings and still publishes the third.
    let step = json!({
        "outputs": [
            { "type": "teleport", "executor": "a" },
            { "type": "granted", "request": "r1" },
            { "type": "event", "level": "info", "name": "stillHere", "message": "after them", "fields": { "executor": "a" } },
        ],
        "wakeAt": null,
    });
    let roster = Roster::builder()
        .document(roster())
        .module(
            common::fuel_engine(5_000_000)
                .load_bytes(&scripted_guest(ABI, true, &step.to_string()), "newer")
                .expect("loads"),
        )
        .build()
        .await
        .expect("roster");
    let mut events = roster.subscribe();
    roster.resume("a").expect("the step itself is accepted");
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event);
    }
    let names: Vec<&str> = seen.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        ["outputUnreadable", "outputUnreadable", "stillHere"],
        "{seen:#?}"
    );
    assert_eq!(seen[0].text("kind"), Some("teleport"));
    assert_eq!(seen[0].level, rota_host::Level::Warn);
    assert!(seen[0].message.contains("teleport"), "{}", seen[0].message);
    assert_eq!(seen[0].fields["output"], step["outputs"][0]);
    assert_eq!(seen[1].text("kind"), Some("granted"));
    assert!(
        seen[1].text("error").is_some_and(|e| e.contains("lease")),
        "{:?}",
        seen[1].text("error")
    );
    assert_eq!(seen[2].text("executor"), Some("a"));
    // The roster goes on.
    roster.resume("a").expect("the next step too");
}

/// Issue 43 item 7: a lease carries the effort its role runs at on its executor
/// (one effort, or per role with a `default`), and the roster answers `effort_of`.
#[tokio::test]
async fn a_lease_carries_its_effort_and_the_roster_answers_effort_of() {
    let roster = build(json!({ "executors": [
        { "id": "a", "harness": "claude", "roles": ["coder", "judge"], "slots": 2, "coderSlots": 2,
          "effort": { "judge": "max", "default": "low" } },
        { "id": "b", "harness": "pi", "roles": ["coder"], "priority": 2 }
    ] }))
    .await;
    let coder = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    let judge = roster
        .lease("judge", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!((coder.executor(), coder.effort()), ("a", Some("low")));
    assert_eq!((judge.executor(), judge.effort()), ("a", Some("max")));
    assert_eq!(
        roster.effort_of("a", "judge").expect("query").as_deref(),
        Some("max")
    );
    assert_eq!(roster.effort_of("b", "coder").expect("query"), None);
    let unknown = roster.effort_of("x", "coder").expect_err("no executor x");
    assert!(unknown.to_string().contains("no executor 'x'"), "{unknown}");
    drop((coder, judge));
    let other = roster
        .lease(
            "coder",
            LeaseOptions {
                avoid: vec!["a".into()],
                ..LeaseOptions::default()
            },
        )
        .await
        .expect("lease");
    assert_eq!((other.executor(), other.effort()), ("b", None));
}

/// Issue 43 item 9: under `rules: "upstream"` a usage limit's message sets its reset
/// time, the same instant the core gives on every host (2027-01-15T08:00Z: "resets
/// 8:20am (Europe/Rome)" is 07:20Z tomorrow); `classify` answers it as `resetAt`.
#[tokio::test(start_paused = true)]
async fn a_usage_limit_message_sets_the_reset_time() {
    let roster = Roster::builder()
        .document(json!({ "rules": "upstream", "executors": [
            { "id": "a", "harness": "claude", "roles": ["coder"] },
            { "id": "b", "harness": "codex", "roles": ["coder"] }
        ] }))
        .module(policy())
        .clock(rota_host::Clock::starting_at(1_800_000_000_000))
        .build()
        .await
        .expect("roster");
    let message = "You've hit your session limit · resets 8:20am (Europe/Rome)";
    let classified = roster.classify(&Failure::new(message)).expect("classify");
    assert_eq!(
        classified,
        json!({ "kind": "usageLimit", "rule": "resetAt", "resetAt": 1_800_084_000_000u64 })
    );
    let failure = Failure {
        tag: Some("UsageLimitError".into()),
        ..Failure::new(message)
    };
    let exclusion = roster
        .report("a", failure)
        .expect("report")
        .expect("excluded");
    assert_eq!(
        (exclusion.kind, exclusion.until),
        (ExclusionKind::Until, Some(1_800_084_000_000))
    );
    // A zone the core's table does not hold: the usage cooldown (30 minutes).
    let unknown = Failure::of_kind(FailureKind::UsageLimit, "resets 8:20am (Mars/Olympus_Mons)");
    let exclusion = roster
        .report("b", unknown)
        .expect("report")
        .expect("excluded");
    assert_eq!(exclusion.until, Some(1_800_000_000_000 + 30 * 60_000));
}
