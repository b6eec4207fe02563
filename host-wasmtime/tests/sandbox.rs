//! The guest is sandboxed: a trap or an overrun never takes the host down; the host
//! restores the last good state and fails only that call. A module that fails its
//! checks is refused at load and at a swap.

mod common;

use std::time::Duration;

use common::{broken_guest, fuel_engine, policy, roster, ABI};
use rota_host::{GuestFailure, HostEngine, HostError, PolicyRuntime};
use serde_json::{json, Value};

fn long_input(len: usize) -> Value {
    json!({ "type": "resume", "now": 1, "executor": "x".repeat(len) })
}

#[test]
fn a_trapping_guest_fails_one_call_and_is_restored() {
    let engine = fuel_engine(10_000_000);
    let module = engine
        .load_bytes(&broken_guest(ABI, true), "broken")
        .expect("loads");
    let mut runtime = PolicyRuntime::new(module, &roster(), &Value::Null).expect("creates");

    assert!(runtime.step(&json!({ "type": "tick", "now": 1 })).is_ok());
    let error = runtime.step(&long_input(300)).expect_err("the guest traps");
    match &error {
        HostError::Guest { kind, call, .. } => {
            assert_eq!(*kind, GuestFailure::Trapped);
            assert_eq!(call, "rota_handle");
        }
        other => panic!("expected a guest failure, got {other:?}"),
    }
    assert_eq!(runtime.recoveries(), 1);
    let names: Vec<String> = runtime.take_events().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["guestFailed", "guestRestored"]);
    // The host is fine and so is the next call.
    assert!(runtime.step(&json!({ "type": "tick", "now": 2 })).is_ok());
    assert!(runtime.snapshot_json().is_ok());
}

#[test]
fn a_guest_that_runs_out_of_fuel_is_stopped_and_restored() {
    let engine = fuel_engine(1_000_000);
    let module = engine
        .load_bytes(&broken_guest(ABI, true), "looping")
        .expect("loads");
    let mut runtime = PolicyRuntime::new(module, &roster(), &Value::Null).expect("creates");
    let error = runtime
        .step(&long_input(3000))
        .expect_err("the guest loops");
    assert!(
        matches!(
            error,
            HostError::Guest {
                kind: GuestFailure::Overran,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(runtime.recoveries(), 1);
    assert!(runtime.step(&json!({ "type": "tick", "now": 2 })).is_ok());
}

#[test]
fn a_guest_that_runs_past_its_epoch_deadline_is_stopped() {
    // No fuel: only the wall-clock deadline (epoch interruption) stops the loop.
    let engine = HostEngine::new(rota_host::EngineConfig {
        deadline: Duration::from_millis(100),
        epoch_tick: Duration::from_millis(5),
        fuel: None,
        cache: rota_host::CacheDir::Disabled,
        ..rota_host::EngineConfig::default()
    })
    .expect("engine");
    let module = engine
        .load_bytes(&broken_guest(ABI, true), "looping")
        .expect("loads");
    let mut runtime = PolicyRuntime::new(module, &roster(), &Value::Null).expect("creates");
    let started = tokio::time::Instant::now();
    let error = runtime
        .step(&long_input(3000))
        .expect_err("the deadline stops it");
    assert!(
        matches!(
            error,
            HostError::Guest {
                kind: GuestFailure::Overran,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stopped in {:?}",
        started.elapsed()
    );
    assert!(runtime.step(&json!({ "type": "tick", "now": 2 })).is_ok());
}

#[test]
fn a_module_of_another_abi_major_is_refused_at_load() {
    let engine = fuel_engine(1_000_000);
    let error = engine
        .load_bytes(&broken_guest(2 << 16, true), "future")
        .expect_err("ABI 2 is refused");
    assert!(
        matches!(
            error,
            HostError::AbiVersion {
                found_major: 2,
                want_major: 1,
                ..
            }
        ),
        "{error:?}"
    );
    let error = engine
        .load_bytes(b"not wasm", "junk")
        .expect_err("junk is refused");
    assert!(matches!(error, HostError::Load { .. }), "{error:?}");
    let missing = wat::parse_str(r#"(module (memory (export "memory") 1) (func (export "rota_abi_version") (result i32) (i32.const 65537)))"#)
        .expect("wat");
    let error = engine
        .load_bytes(&missing, "partial")
        .expect_err("missing exports are refused");
    assert!(error.to_string().contains("alloc"), "{error}");
}

#[test]
fn restarting_the_real_policy_rebuilds_the_exact_state() {
    let mut runtime = PolicyRuntime::new(policy(), &roster(), &Value::Null).expect("creates");
    runtime.set_checkpoint_every(5);
    let mut now = 1_000;
    for i in 0..12 {
        now += 1_000;
        let input = json!({ "type": "lease", "now": now, "id": format!("r{i}"), "role": "coder" });
        runtime.step(&input).expect("lease");
    }
    runtime
        .step(&json!({ "type": "report", "now": now + 1, "executor": "a", "failure": { "kind": "rateLimit" } }))
        .expect("report");
    assert!(runtime.journal_len() > 0 && runtime.journal_len() < 5);
    let before = runtime.snapshot_json().expect("snapshot");
    let state_before = runtime.export_state().expect("export");
    runtime.restart().expect("restart");
    assert_eq!(runtime.snapshot_json().expect("snapshot"), before);
    assert_eq!(runtime.export_state().expect("export"), state_before);
    // And it goes on deciding the same way as an untouched copy would.
    let release = json!({ "type": "release", "now": now + 2, "lease": 1 });
    let mut fresh = PolicyRuntime::from_state(policy(), &state_before).expect("import");
    assert_eq!(
        runtime.step(&release).expect("release"),
        fresh.step(&release).expect("release")
    );
}

#[test]
fn a_rejected_input_changes_nothing_and_is_not_journaled() {
    let mut runtime = PolicyRuntime::new(policy(), &roster(), &Value::Null).expect("creates");
    let before = runtime.export_state().expect("export");
    let error = runtime
        .step(&json!({ "type": "lease", "now": 5, "id": "x", "role": "chef" }))
        .expect_err("unknown role");
    assert_eq!(error.code(), Some("UNKNOWN_ROLE"));
    assert_eq!(runtime.journal_len(), 0);
    assert_eq!(runtime.export_state().expect("export"), before);
}

#[test]
fn a_swap_to_a_module_that_cannot_import_is_refused_and_the_old_one_stays() {
    let mut runtime = PolicyRuntime::new(policy(), &roster(), &Value::Null).expect("creates");
    runtime
        .step(&json!({ "type": "lease", "now": 5, "id": "x", "role": "coder" }))
        .expect("lease");
    let hash = runtime.module().hash().to_string();
    let engine = common::engine();
    let refuses = engine
        .load_bytes(&broken_guest(ABI, false), "refuses")
        .expect("loads");
    let error = runtime.swap(refuses).expect_err("import fails");
    assert!(matches!(error, HostError::SwapRefused(_)), "{error:?}");
    // Imports, but its snapshot is `{}`: not the same state.
    let hollow = engine
        .load_bytes(&broken_guest(ABI, true), "hollow")
        .expect("loads");
    let error = runtime.swap(hollow).expect_err("snapshots differ");
    assert!(error.to_string().contains("snapshot differs"), "{error}");
    assert_eq!(runtime.module().hash(), hash);
    assert_eq!(runtime.snapshot().expect("snapshot").executors[0].busy, 1);
}

#[test]
fn a_swap_to_the_same_policy_keeps_every_lease() {
    let mut runtime = PolicyRuntime::new(policy(), &roster(), &Value::Null).expect("creates");
    for i in 0..5 {
        runtime
            .step(&json!({ "type": "lease", "now": 5 + i, "id": format!("r{i}"), "role": "coder" }))
            .expect("lease");
    }
    let before = runtime.snapshot_json().expect("snapshot");
    runtime.swap(policy()).expect("swap");
    assert_eq!(runtime.snapshot_json().expect("snapshot"), before);
    let names: Vec<String> = runtime.take_events().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["policySwapped"]);
}

#[test]
#[allow(clippy::disallowed_methods)] // file times of a cache
fn loading_prunes_the_module_cache_but_never_the_entry_in_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = HostEngine::new(rota_host::EngineConfig {
        cache: rota_host::CacheDir::Dir(dir.path().to_path_buf()),
        cache_keep: 1,
        ..rota_host::EngineConfig::default()
    })
    .expect("engine");
    let all = || {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("read the cache")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    // The files besides the entries' digests.
    let entries = || -> Vec<String> {
        all()
            .into_iter()
            .filter(|n| !n.ends_with(".sha256"))
            .collect()
    };
    // A stale entry (another wasmtime's, say) and a file that is not the cache's.
    let stale = dir
        .path()
        .join(format!("{}-{}.cwasm", "0".repeat(32), "f".repeat(16)));
    std::fs::write(&stale, b"old").expect("write");
    let file = std::fs::File::options()
        .append(true)
        .open(&stale)
        .expect("open");
    file.set_modified(std::time::SystemTime::now() - Duration::from_secs(86_400))
        .expect("set mtime");
    std::fs::write(dir.path().join("README"), b"mine").expect("write");

    let (v0, v1, v2) = (ABI, ABI + 1, ABI + 2);
    let first = engine
        .load_bytes(&broken_guest(v0, true), "v0")
        .expect("loads");
    assert!(!first.from_cache());
    // Kept: the entry just written and the newest other one (the stale file).
    assert_eq!(entries().len(), 3, "{:?}", entries());
    std::thread::sleep(Duration::from_millis(20));
    engine
        .load_bytes(&broken_guest(v1, true), "v1")
        .expect("loads");
    assert!(!stale.exists(), "the oldest entry goes: {:?}", entries());
    std::thread::sleep(Duration::from_millis(20));
    // A cache hit marks its entry as used: v0 is the newest other entry now.
    assert!(engine
        .load_bytes(&broken_guest(v0, true), "v0")
        .expect("loads")
        .from_cache());
    std::thread::sleep(Duration::from_millis(20));
    let v2_module = engine
        .load_bytes(&broken_guest(v2, true), "v2")
        .expect("loads");
    let names = entries();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names.contains(&"README".to_string()));
    let hash = |h: &str| h[..32].to_string();
    assert!(
        names.iter().any(|n| n.starts_with(&hash(first.hash()))),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n.starts_with(&hash(v2_module.hash()))),
        "{names:?}"
    );
    // Every entry kept has its digest, and no digest outlives its entry.
    let digests: Vec<String> = all()
        .into_iter()
        .filter_map(|n| n.strip_suffix(".sha256").map(str::to_string))
        .collect();
    let kept: Vec<String> = names
        .into_iter()
        .filter(|n| n.ends_with(".cwasm"))
        .collect();
    assert_eq!(digests, kept);
}

#[test]
fn a_corrupt_cache_entry_is_compiled_again_not_loaded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = HostEngine::new(rota_host::EngineConfig {
        cache: rota_host::CacheDir::Dir(dir.path().to_path_buf()),
        ..rota_host::EngineConfig::default()
    })
    .expect("engine");
    let guest = broken_guest(ABI, true);
    let first = engine.load_bytes(&guest, "guest").expect("loads");
    assert!(!first.from_cache());
    let entry = std::fs::read_dir(dir.path())
        .expect("read the cache")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .expect("a cache entry");
    assert!(engine
        .load_bytes(&guest, "guest")
        .expect("loads")
        .from_cache());

    // Flip one bit in the middle of the entry (its code, most likely): without the
    // digest check, loading it would run whatever the bytes now say, outside the
    // sandbox.
    let mut corrupt = std::fs::read(&entry).expect("read the entry");
    let middle = corrupt.len() / 2;
    corrupt[middle] ^= 0x10;
    std::fs::write(&entry, &corrupt).expect("write");
    let module = engine.load_bytes(&guest, "guest").expect("compiled again");
    assert!(!module.from_cache(), "a corrupt entry is never loaded");
    let mut runtime = PolicyRuntime::new(module, &roster(), &Value::Null).expect("creates");
    assert!(runtime.step(&json!({ "type": "tick", "now": 1 })).is_ok());
    assert_ne!(
        std::fs::read(&entry).expect("rewritten"),
        corrupt,
        "the entry is written again"
    );
    assert!(engine
        .load_bytes(&guest, "guest")
        .expect("loads")
        .from_cache());

    // A bad digest, or none (an older host's entry), is the same: compiled again.
    let digest = entry.with_extension("cwasm.sha256");
    std::fs::write(&digest, "0".repeat(64)).expect("write");
    assert!(!engine
        .load_bytes(&guest, "guest")
        .expect("loads")
        .from_cache());
    std::fs::remove_file(&digest).expect("remove");
    assert!(!engine
        .load_bytes(&guest, "guest")
        .expect("loads")
        .from_cache());
    assert!(digest.exists(), "the digest is written again");
}
