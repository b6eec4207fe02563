//! Shared test helpers: one engine and one compiled policy module per test binary
//! (compiled once into a disk cache under cargo's target tmp dir, which every test
//! binary and the `rota` binary share), hand-written broken guests, and a loopback
//! HTTP health server.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rota_host::{CacheDir, EngineConfig, Event, HostEngine, PolicyModule, Roster};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::broadcast;

/// The precompiled-module cache every test (and the CLI tests) share.
pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("rota-cache")
}

/// The engine config of real-module tests: the CLI's defaults, so they share the cache.
pub fn engine_config() -> EngineConfig {
    EngineConfig {
        cache: CacheDir::Dir(cache_dir()),
        ..EngineConfig::default()
    }
}

pub fn engine() -> HostEngine {
    static ENGINE: OnceLock<HostEngine> = OnceLock::new();
    ENGINE
        .get_or_init(|| HostEngine::new(engine_config()).expect("engine"))
        .clone()
}

/// The bundled policy module (built by `make wasm`), loaded once.
pub fn policy() -> PolicyModule {
    static MODULE: OnceLock<PolicyModule> = OnceLock::new();
    MODULE
        .get_or_init(|| {
            engine()
                .load_bundled()
                .expect("the policy module: run `make wasm` first")
        })
        .clone()
}

/// The bundled module written to `dir` (for `module_path` and `swap_policy`).
pub fn policy_file(dir: &Path) -> PathBuf {
    let path = dir.join("rota_policy.wasm");
    std::fs::write(
        &path,
        rota_host::BUNDLED_POLICY.expect("the policy module: run `make wasm` first"),
    )
    .expect("write the module");
    path
}

/// A roster with two coders and a reviewer.
pub fn roster() -> Value {
    json!({
        "executors": [
            { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 2, "priority": 1 },
            { "id": "b", "harness": "claude", "roles": ["coder", "reviewer"], "slots": 2, "coderSlots": 2, "priority": 2 },
        ]
    })
}

/// The ABI version this host needs (`rota_abi_version`): 1.2.
pub const ABI: u32 = (1 << 16) | 2;

/// A guest that speaks the ABI but fails on purpose: `rota_handle` traps on inputs
/// longer than 200 bytes and loops forever on inputs longer than 2000 bytes.
/// `abi_version` is what `rota_abi_version` answers; `import_ok` whether
/// `rota_import` gives a handle.
pub fn broken_guest(abi_version: u32, import_ok: bool) -> Vec<u8> {
    scripted_guest(abi_version, import_ok, r#"{"outputs":[],"wakeAt":null}"#)
}

/// [`broken_guest`] whose `rota_handle` answers `step` (up to 1,024 bytes of JSON) to
/// every input it does not trap on.
pub fn scripted_guest(abi_version: u32, import_ok: bool, step: &str) -> Vec<u8> {
    assert!(step.len() <= 1024, "the step answer fits its slot");
    // (offset, JSON) of every constant answer.
    let texts = [
        (0, r#"{"handle":1}"#),
        (1024, step),
        (128, r#"{"ok":{}}"#),
        (192, r#"{"ok":[]}"#),
        (
            256,
            r#"{"error":{"code":"INVALID_STATE","message":"this guest imports nothing"}}"#,
        ),
    ];
    let data: String = texts
        .iter()
        .map(|(at, text)| {
            format!(
                "  (data (i32.const {at}) \"{}\")\n",
                text.replace('"', "\\22")
            )
        })
        .collect();
    let answer = |at: usize| {
        let (_, text) = texts.iter().find(|(o, _)| *o == at).expect("a constant");
        format!("(call $packed (i32.const {at}) (i32.const {}))", text.len())
    };
    let (handle, outputs, ok, list, error) = (
        answer(0),
        answer(1024),
        answer(128),
        answer(192),
        answer(256),
    );
    let import_body = if import_ok { handle.clone() } else { error };
    let wat = format!(
        r#"(module
  (memory (export "memory") 2)
  (global $next (mut i32) (i32.const 4096))
{data}
  (func $packed (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32))
            (i64.extend_i32_u (local.get $len))))
  (func (export "rota_abi_version") (result i32) (i32.const {abi_version}))
  (func (export "alloc") (param $len i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $next))
    (global.set $next (i32.add (global.get $next) (i32.and (i32.add (local.get $len) (i32.const 15)) (i32.const -16))))
    (local.get $p))
  (func (export "dealloc") (param i32 i32))
  (func (export "rota_create") (param i32 i32 i32 i32) (result i64)
    {handle})
  (func (export "rota_import") (param i32 i32) (result i64)
    {import_body})
  (func (export "rota_destroy") (param i32) (result i32) (i32.const 1))
  (func (export "rota_handle") (param $h i32) (param $ptr i32) (param $len i32) (result i64)
    (if (i32.gt_u (local.get $len) (i32.const 2000))
      (then (loop $forever (br $forever))))
    (if (i32.gt_u (local.get $len) (i32.const 200))
      (then unreachable))
    {outputs})
  (func (export "rota_query") (param i32 i32 i32) (result i64)
    {ok})
  (func (export "rota_export") (param i32) (result i64)
    {ok})
  (func (export "rota_validate") (param i32 i32 i32 i32) (result i64)
    {list})
)"#
    );
    wat::parse_str(wat).expect("the broken guest's WAT parses")
}

/// An engine for hand-written guests: fuel (deterministic) and a short deadline.
pub fn fuel_engine(fuel: u64) -> HostEngine {
    HostEngine::new(EngineConfig {
        fuel: Some(fuel),
        deadline: Duration::from_secs(5),
        cache: CacheDir::Disabled,
        ..EngineConfig::default()
    })
    .expect("engine")
}

/// A loopback HTTP server answering `/health`: 200 while `up`, else 503. It answers
/// after `delay`, and records how many probes arrived and the most at once.
pub struct HealthServer {
    pub url: String,
    pub up: Arc<AtomicBool>,
    pub probes: Arc<AtomicUsize>,
    pub max_concurrent: Arc<AtomicUsize>,
}

pub async fn health_server(delay: Duration) -> HealthServer {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let address = listener.local_addr().expect("address");
    let up = Arc::new(AtomicBool::new(false));
    let probes = Arc::new(AtomicUsize::new(0));
    let max_concurrent = Arc::new(AtomicUsize::new(0));
    let current = Arc::new(AtomicUsize::new(0));
    let (up2, probes2, max2) = (up.clone(), probes.clone(), max_concurrent.clone());
    tokio::spawn(async move {
        // Bounded: a test makes a few dozen probes at most.
        for _ in 0..10_000 {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let (up, probes, max, current) =
                (up2.clone(), probes2.clone(), max2.clone(), current.clone());
            tokio::spawn(async move {
                let now = current.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                probes.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 1024];
                let _ = stream.read(&mut buf).await;
                tokio::time::sleep(delay).await;
                let answer: &[u8] = if up.load(Ordering::SeqCst) {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                } else {
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\ndown"
                };
                let _ = stream.write_all(answer).await;
                let _ = stream.shutdown().await;
                current.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    HealthServer {
        url: format!("http://{address}/health"),
        up,
        probes,
        max_concurrent,
    }
}

/// Waits for an event named `name` (bounded: fails the test after `within`).
pub async fn wait_for(
    events: &mut broadcast::Receiver<Event>,
    name: &str,
    within: Duration,
) -> Event {
    let found = tokio::time::timeout(within, async {
        loop {
            match events.recv().await {
                Ok(event) if event.name == name => return event,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => panic!("events closed before '{name}'"),
            }
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("no '{name}' event within {within:?}"))
}

/// A roster over `document` with the built policy module and default options.
pub async fn build(document: Value) -> Roster {
    Roster::builder()
        .document(document)
        .module(policy())
        .build()
        .await
        .expect("roster")
}

/// A roster over `document` that probes health URLs every 40 ms (a probe times out
/// after 2 s): the tests that wait for a probe to bring an executor back.
pub async fn build_probing(document: Value) -> Roster {
    let options = rota_host::Options {
        health_probe_interval_ms: 40,
        idle_probe_interval_ms: 40,
        ..rota_host::Options::default()
    };
    Roster::builder()
        .document(document)
        .options(options)
        .module(policy())
        .probe_timeout(Duration::from_secs(2))
        .build()
        .await
        .expect("roster")
}
