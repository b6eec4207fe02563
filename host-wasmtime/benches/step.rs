//! Per-input cost through wasmtime vs the native core, on the same inputs, in one run;
//! and loading the policy module from the precompiled cache.
//!
//!     cargo bench -p rota-host --bench step
//!
//! The inputs are the first 2,000 steps of `rota simulate` (seed 1): leases, releases,
//! reports, probes, ticks, machines. Each iteration replays them on a fresh policy
//! (built outside the timing); throughput is per input. Both sides take JSON text and
//! return JSON text (`rota_core::json::step_str` natively; the ABI's `rota_handle`
//! through wasmtime, plus the host runtime's journal and checkpoints).
//! `ROTA_BENCH_MODULE=path.wasm` benchmarks another build of the module (every
//! variant and the load).
//!
//! The roster group times a `try_lease` + `release` and a `lease` + `release` through
//! [`Roster`] (the step plus reading its outputs into the core's `Output` and carrying
//! them out), and a lease that waits: queued behind the only slot, granted when its
//! holder releases (`cargo bench -p rota-host --bench step -- roster`).
//!
//! One quiet run on the 2-core development machine (the module built by
//! `scripts/build-wasm.sh abi`, profile `wasm-speed`): native 1.53 µs per input;
//! wasmtime with the epoch deadline, journal and checkpoints 4.00 µs (2.6×); without
//! any deadline 3.36 µs; with fuel 4.37 µs. A no-op tick: 0.19 µs vs 0.66 µs. Load from
//! the precompiled cache 0.59 ms, instantiate + create 0.19 ms. Under load from other
//! builds every figure doubles or worse, and not alike on both sides.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use rota_host::engine::{CacheDir, EngineConfig, HostEngine};
use rota_host::sim::{simulate, SimConfig};
use rota_host::trace::{Trace, TraceWriter};
use rota_host::{LeaseOptions, PolicyRuntime, Roster};
use serde_json::{json, Value};

const STEPS: usize = 2_000;

/// The module under test: `$ROTA_BENCH_MODULE`, else the bundled one.
fn module_bytes() -> Vec<u8> {
    match std::env::var_os("ROTA_BENCH_MODULE") {
        Some(path) => std::fs::read(path).expect("the module"),
        None => rota_host::BUNDLED_POLICY
            .expect("the policy module: run `make wasm`")
            .to_vec(),
    }
}

struct Fixture {
    engine: HostEngine,
    module: rota_host::PolicyModule,
    document: Value,
    inputs: Vec<String>,
    cache: tempfile::TempDir,
}

#[allow(clippy::disallowed_methods)] // a benchmark reads the clock
fn fixture() -> Fixture {
    let cache = tempfile::tempdir().expect("tempdir");
    let engine = HostEngine::new(EngineConfig {
        cache: CacheDir::Dir(cache.path().to_path_buf()),
        ..EngineConfig::default()
    })
    .expect("engine");
    let started = Instant::now();
    let module = engine
        .load_bytes(&module_bytes(), "bench")
        .expect("the policy module: run `make wasm`");
    eprintln!(
        "compiling the policy module (cold, Cranelift): {:.0} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    let document: Value =
        serde_json::from_str(include_str!("../examples/roster.json")).expect("example");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trace.json");
    let mut writer = TraceWriter::create(&path, &document, &json!({})).expect("trace");
    let mut runtime = PolicyRuntime::new(module.clone(), &document, &json!({})).expect("runtime");
    let config = SimConfig {
        seed: 1,
        hours: 24.0,
        ..SimConfig::default()
    };
    simulate(
        &mut runtime,
        &document,
        &config,
        Some(&mut writer),
        |_, _| {},
    )
    .expect("simulate");
    writer.finish().expect("trace");
    let trace = Trace::read(&path).expect("trace");
    let inputs: Vec<String> = trace
        .steps
        .iter()
        .take(STEPS)
        .map(|s| s["input"].to_string())
        .collect();
    assert_eq!(inputs.len(), STEPS, "the simulation gives enough steps");
    Fixture {
        engine,
        module,
        document,
        inputs,
        cache,
    }
}

/// Replays the inputs through a runtime that keeps a journal but no checkpoints.
fn journal_only(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    module: &rota_host::PolicyModule,
    f: &Fixture,
) {
    group.bench_function(name, |b| {
        b.iter_batched(
            || {
                let mut runtime =
                    PolicyRuntime::new(module.clone(), &f.document, &json!({})).expect("runtime");
                runtime.set_checkpoint_every(usize::MAX);
                runtime
            },
            |mut runtime| {
                for input in &f.inputs {
                    std::hint::black_box(runtime.step_text(input).expect("step"));
                }
                runtime
            },
            BatchSize::PerIteration,
        )
    });
}

fn per_input(c: &mut Criterion) {
    let f = fixture();
    let mut group = c.benchmark_group("per input");
    group.throughput(Throughput::Elements(STEPS as u64));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("native core", |b| {
        b.iter_batched(
            || rota_core::Policy::new(&f.document, rota_core::Options::default()).expect("policy"),
            |mut policy| {
                for input in &f.inputs {
                    std::hint::black_box(rota_core::json::step_str(&mut policy, input));
                }
                policy
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("wasmtime (runtime: journal + checkpoints)", |b| {
        b.iter_batched(
            || PolicyRuntime::new(f.module.clone(), &f.document, &json!({})).expect("runtime"),
            |mut runtime| {
                for input in &f.inputs {
                    std::hint::black_box(runtime.step_text(input).expect("step"));
                }
                runtime
            },
            BatchSize::PerIteration,
        )
    });
    journal_only(&mut group, "wasmtime (journal only)", &f.module, &f);
    // The sandbox's share: the same module without epoch interruption, and with a fuel
    // budget instead (deterministic, what the tests use).
    for (name, deadline, fuel) in [
        (
            "wasmtime (journal only, no deadline at all)",
            Duration::ZERO,
            None,
        ),
        (
            "wasmtime (journal only, fuel instead of epochs)",
            Duration::ZERO,
            Some(u64::MAX / 2),
        ),
    ] {
        let engine = HostEngine::new(EngineConfig {
            deadline,
            fuel,
            cache: CacheDir::Dir(f.cache.path().join(name.len().to_string())),
            ..EngineConfig::default()
        })
        .expect("engine");
        let module = engine
            .load_bytes(&module_bytes(), "bench")
            .expect("the module");
        journal_only(&mut group, name, &module, &f);
    }
    group.finish();

    // The fixed cost of one call: a tick that changes nothing.
    let mut group = c.benchmark_group("per call");
    let tick = |n: u64| format!("{{\"type\":\"tick\",\"now\":{n}}}");
    group.bench_function("native tick", |b| {
        let mut policy =
            rota_core::Policy::new(&f.document, rota_core::Options::default()).expect("policy");
        let mut n = 1_000u64;
        b.iter(|| {
            n += 1;
            rota_core::json::step_str(&mut policy, &tick(n))
        })
    });
    group.bench_function("wasmtime tick", |b| {
        let mut runtime =
            PolicyRuntime::new(f.module.clone(), &f.document, &json!({})).expect("runtime");
        let mut n = 1_000u64;
        b.iter(|| {
            n += 1;
            runtime.step_text(&tick(n)).expect("step")
        })
    });
    group.finish();

    // The roster's cost per call, as a caller's lease takes it: the guest's step, then
    // its outputs read into the core's `Output` and carried out.
    let mut group = c.benchmark_group("roster");
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");
    let roster = tokio
        .block_on(
            Roster::builder()
                .document(f.document.clone())
                .module(f.module.clone())
                .build(),
        )
        .expect("roster");
    group.bench_function("try_lease + release", |b| {
        b.iter(|| {
            tokio.block_on(async {
                let lease = roster
                    .try_lease("coder", LeaseOptions::default())
                    .await
                    .expect("try_lease")
                    .expect("a free slot");
                lease.release().expect("release");
            })
        })
    });
    group.bench_function("lease + release", |b| {
        b.iter(|| {
            tokio.block_on(async {
                let lease = roster
                    .lease("coder", LeaseOptions::default())
                    .await
                    .expect("lease");
                lease.release().expect("release");
            })
        })
    });
    group.finish();
    drop(roster);

    // A lease that waits: the only slot is held; the request queues, the holder
    // releases, the waiter is granted, then releases in turn.
    let mut group = c.benchmark_group("roster");
    let single = tokio
        .block_on(
            Roster::builder()
                .document(json!({ "executors": [ { "id": "only", "harness": "claude", "roles": ["coder"], "slots": 1 } ] }))
                .module(f.module.clone())
                .build(),
        )
        .expect("roster");
    group.bench_function("a lease that waits", |b| {
        b.iter(|| {
            tokio.block_on(async {
                let held = single
                    .lease("coder", LeaseOptions::default())
                    .await
                    .expect("lease");
                let waiting = single.lease("coder", LeaseOptions::default());
                tokio::pin!(waiting);
                // Polled once: the request is in the queue.
                tokio::select! {
                    biased;
                    _ = &mut waiting => panic!("granted while the slot is held"),
                    () = std::future::ready(()) => {}
                }
                held.release().expect("release");
                let lease = waiting.await.expect("the waiter's lease");
                lease.release().expect("release");
            })
        })
    });
    group.finish();
    drop(single);

    let mut group = c.benchmark_group("module");
    group.sample_size(20);
    let bytes = module_bytes();
    group.bench_function("load from the precompiled cache", |b| {
        b.iter(|| {
            let module = f.engine.load_bytes(&bytes, "bundled").expect("load");
            assert!(module.from_cache());
            module
        })
    });
    group.bench_function("instantiate + create", |b| {
        b.iter(|| PolicyRuntime::new(f.module.clone(), &f.document, &json!({})).expect("runtime"))
    });
    group.finish();
    drop(f.cache);
}

criterion_group!(benches, per_input);
criterion_main!(benches);
