//! A dead local engine leaves the round: a real refused TCP connection (the io error a
//! call to a port where nothing listens gives) reported with `report_io` takes an
//! executor with a health URL out as `health` until its URL answers; the same error on
//! an executor without one excludes nothing (the seed's rule).

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{build_probing, health_server, wait_for};
use rota_host::{ExclusionKind, LeaseOptions};
use serde_json::json;

/// A real refused connection: a port bound, closed, then connected to.
async fn refused() -> std::io::Error {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    drop(listener);
    tokio::net::TcpStream::connect(address)
        .await
        .expect_err("nothing listens there")
}

#[tokio::test]
async fn a_refused_connection_takes_an_executor_with_a_health_url_out_until_it_answers() {
    let server = health_server(Duration::from_millis(5)).await;
    let document = json!({ "executors": [
        { "id": "local", "harness": "lm-studio", "roles": ["coder"], "health": server.url },
        { "id": "remote", "harness": "pi", "roles": ["coder"], "priority": 2 },
    ] });
    let roster = build_probing(document).await;
    let mut events = roster.subscribe();
    let error = refused().await;
    assert_eq!(error.kind(), std::io::ErrorKind::ConnectionRefused);
    let classified = roster
        .classify(&rota_host::classify::io_facts(&error))
        .expect("classify");
    assert_eq!(
        classified,
        json!({ "kind": "other", "rule": "unreachable" })
    );

    // Without a health URL: the seed's rule, nothing excluded.
    assert!(roster
        .report_io("remote", &error)
        .expect("report")
        .is_none());

    let exclusion = roster
        .report_io("local", &error)
        .expect("report")
        .expect("excluded");
    assert_eq!(exclusion.kind, ExclusionKind::Health);
    assert!(
        exclusion
            .reason
            .starts_with("serving engine unreachable (ECONNREFUSED: "),
        "{}",
        exclusion.reason
    );
    // remote serves meanwhile; a second request waits for local and gets it once its
    // health URL answers.
    let held = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("lease");
    assert_eq!(held.executor(), "remote");
    let waiter = {
        let roster = roster.clone();
        tokio::spawn(async move { roster.lease("coder", LeaseOptions::default()).await })
    };
    wait_for(&mut events, "probeDown", Duration::from_secs(20)).await;
    server.up.store(true, Ordering::SeqCst);
    wait_for(&mut events, "back", Duration::from_secs(20)).await;
    let lease = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("granted in time")
        .expect("join")
        .expect("lease");
    assert_eq!(lease.executor(), "local");
    assert!(server.probes.load(Ordering::SeqCst) >= 2);
}
