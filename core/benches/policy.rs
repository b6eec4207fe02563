//! Criterion benchmarks of the policy's hot paths, through `handle` and a full drain
//! of `poll_output` (what every host does per input):
//!
//! - `lease_release/<n>`: a steady-state lease-then-release cycle on n free executors
//!   (one role, slots 1 and 2 alternating). Targets: at least 1,000,000 cycles/s at
//!   1,024 executors; the cost at 10,000 at most twice the cost at 4.
//! - `queue_10000/release_grants_next`: with 10,000 requests waiting, a release that
//!   grants the next one (only the release is timed; a new request is queued after
//!   each so the queue stays at 10,000). Target: under 5 µs.
//!   `queue_10000/enqueue_one` times that re-enqueue.
//! - `failure_storm/100000_reports_1024_executors`: 100,000 failure reports of mixed
//!   kinds across 1,024 executors, time moving 1 ms per report. Target: under 1 µs
//!   per report.
//! - `lease_waits/<n>`: a lease that waits (every slot of n executors taken; cancelled
//!   untimed after each). Target: the cost at 10,000 at most twice the cost at 4 (the
//!   waiting report is built from the executors it lists and two counts).
//! - `lease_avoid_10000/waits`: the same at 10,000 executors with an avoid list of
//!   10,000 ids (9,990 of the roster, unsorted). Target: under 5 ms.
//!
//! Before the benchmarks, a counting allocator measures the memory each waiting
//! request holds (target: under 300 bytes), and again with a label on each (the bytes
//! asked of the allocator, indexes included, not its own overhead), and the
//! allocations per lease+release cycle at 64 executors (the inputs' own two strings
//! included), with events at debug and with events below warn off (the npm `Roster`'s
//! step while nobody listens).
//!
//! Latest figures (2026-12-07, the 2-core development machine shared with other builds,
//! load average about 10, so every figure is inflated; two runs each, means):
//!
//! | case | figure | target |
//! |---|---|---|
//! | lease+release, 4 / 64 / 1,024 / 10,000 executors | 1.03 / 1.08 / 1.19 / 1.37 µs | ≥ 1 M/s at 1,024 (0.84 M/s at this load); ≤ 2× the cost at 4 at 10,000 (1.33×) |
//! | a lease that waits, 4 / 10,000 executors | 1.24 / 1.06 µs | ≤ 2× the cost at 4 at 10,000 |
//! | memory per waiting request | 247 B | < 300 B |
//! | allocations per lease+release | 15.0 (7.0 with events below warn off) | |
//!
//! `cargo bench -p rota-core --bench policy` (add `-- --quick` for a fast look).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, BatchSize, BenchmarkId, Criterion, Throughput};
use rota_core::{Failure, FailureKind, Input, LeaseRequest, Level, Options, Output, Policy};
use serde_json::{json, Value};

// ---- A counting allocator, for the memory per waiting request ---------------------------

struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);
/// Allocations (and reallocations) made while counting.
static ALLOCATIONS: AtomicIsize = AtomicIsize::new(0);
/// On only while the memory is measured: a locked add on every allocation would
/// weigh on the timed benchmarks (a report allocates a few dozen times).
static COUNTING: AtomicBool = AtomicBool::new(false);

fn count(delta: isize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE_BYTES.fetch_add(delta, Ordering::Relaxed);
    }
}

fn count_allocation() {
    if COUNTING.load(Ordering::Relaxed) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counter
// only observes sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        count_allocation();
        // SAFETY: same layout contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        count_allocation();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

// ---- Rosters and inputs -------------------------------------------------------------------

const T0: u64 = 1_800_000_000_000;

/// n executors of one role, slots 1 and 2 alternating.
fn roster(n: usize) -> Value {
    json!({
        "roles": ["worker"],
        "executors": (0..n).map(|i| json!({
            "id": format!("e{i}"),
            "harness": "pi",
            "roles": ["worker"],
            "slots": 1 + i % 2,
        })).collect::<Vec<_>>(),
    })
}

fn lease(now: u64, id: &str) -> Input {
    Input::Lease(LeaseRequest {
        now,
        id: id.to_string(),
        role: "worker".to_string(),
        avoid: Vec::new(),
        prefer: None,
        pin: None,
        rank: None,
        event_time: None,
        label: None,
        purpose: None,
        deadline: None,
        owner: None,
        borrow: None,
        tenant: None,
        affinity: None,
        timeout_ms: None,
    })
}

/// Drains every output; the lease id of a grant among them, if any.
fn drain(policy: &mut Policy) -> Option<u64> {
    let mut granted = None;
    while let Some(output) = policy.poll_output() {
        if let Output::Granted { lease, .. } = &output {
            granted = Some(*lease);
        }
        black_box(output);
    }
    granted
}

fn handle(policy: &mut Policy, input: Input) -> Option<u64> {
    policy.handle(input).expect("a valid input");
    drain(policy)
}

// ---- (a) lease + release ---------------------------------------------------------------------

fn lease_release(c: &mut Criterion) {
    let mut group = c.benchmark_group("lease_release");
    group.throughput(Throughput::Elements(1));
    for n in [4usize, 64, 1_024, 10_000] {
        let mut policy = Policy::new(&roster(n), Options::default()).expect("a roster");
        let mut now = T0;
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                now += 1;
                let lease = handle(&mut policy, lease(now, "r")).expect("a free slot");
                handle(&mut policy, Input::Release { now, lease });
            })
        });
    }
    group.finish();
}

// ---- (b) a queue of 10,000 -------------------------------------------------------------------

struct Queue {
    policy: Policy,
    now: u64,
    /// The one running lease (one executor, one slot).
    lease: u64,
    next: u64,
}

/// One executor with one slot, busy, and `waiting` requests queued behind it.
fn queue(waiting: u64) -> Queue {
    let mut policy = Policy::new(&roster(1), Options::default()).expect("a roster");
    let lease = handle(&mut policy, lease(T0, "first")).expect("the free slot");
    for i in 0..waiting {
        let granted = handle(&mut policy, self::lease(T0, &format!("q{i}")));
        assert!(granted.is_none(), "the slot is taken: it waits");
    }
    Queue {
        policy,
        now: T0,
        lease,
        next: waiting,
    }
}

#[allow(clippy::disallowed_methods)] // a benchmark reads the clock; the core never does
fn queue_10000(c: &mut Criterion) {
    let mut group = c.benchmark_group("queue_10000");
    group.throughput(Throughput::Elements(1));
    let mut q = queue(10_000);
    group.bench_function("release_grants_next", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                q.now += 1;
                let release = Input::Release {
                    now: q.now,
                    lease: q.lease,
                };
                let start = Instant::now();
                q.lease = handle(&mut q.policy, release).expect("the head is granted");
                timed += start.elapsed();
                // Keep the queue at 10,000.
                let id = format!("q{}", q.next);
                q.next += 1;
                handle(&mut q.policy, lease(q.now, &id));
            }
            timed
        })
    });
    group.bench_function("enqueue_one", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                q.now += 1;
                let id = format!("q{}", q.next);
                q.next += 1;
                let input = lease(q.now, &id);
                let start = Instant::now();
                handle(&mut q.policy, input);
                timed += start.elapsed();
                q.lease = handle(
                    &mut q.policy,
                    Input::Release {
                        now: q.now,
                        lease: q.lease,
                    },
                )
                .expect("the head is granted");
            }
            timed
        })
    });
    group.finish();
}

/// Live heap bytes per waiting request, measured by the counting allocator;
/// `label`: each request names its caller (as the roster seed's callers do).
fn memory_per_waiting_request(label: Option<&str>) -> f64 {
    let mut q = queue(0);
    COUNTING.store(true, Ordering::Relaxed);
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    let n = 10_000u64;
    for i in 0..n {
        let mut input = lease(T0, &format!("m{i}"));
        if let Input::Lease(request) = &mut input {
            request.label = label.map(str::to_string);
        }
        handle(&mut q.policy, input);
    }
    let after = LIVE_BYTES.load(Ordering::Relaxed);
    COUNTING.store(false, Ordering::Relaxed);
    black_box(&q.policy);
    (after - before) as f64 / n as f64
}

/// Allocations per lease+release cycle (the inputs' own strings included), at 64
/// executors, with every event built, or with events below warn left out (the npm
/// Roster's step while nobody listens).
fn allocations_per_cycle(floor: Level) -> f64 {
    let mut policy = Policy::new(&roster(64), Options::default()).expect("a roster");
    policy.set_event_floor(floor);
    let mut now = T0;
    let mut cycle = |policy: &mut Policy| {
        now += 1;
        let lease = handle(policy, lease(now, "r")).expect("a free slot");
        handle(policy, Input::Release { now, lease });
    };
    for _ in 0..100 {
        cycle(&mut policy); // warm: indexes at their working size
    }
    let n = 1_000;
    COUNTING.store(true, Ordering::Relaxed);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..n {
        cycle(&mut policy);
    }
    let after = ALLOCATIONS.load(Ordering::Relaxed);
    COUNTING.store(false, Ordering::Relaxed);
    (after - before) as f64 / f64::from(n)
}

// ---- (c) a failure storm ---------------------------------------------------------------------

const STORM: usize = 100_000;
const STORM_EXECUTORS: usize = 1_024;

/// 1,024 executors (a quarter with a health URL), one role.
fn storm_roster() -> Value {
    json!({
        "roles": ["worker"],
        "executors": (0..STORM_EXECUTORS).map(|i| {
            let mut x = json!({ "id": format!("e{i}"), "harness": "pi", "roles": ["worker"], "slots": 2 });
            if i % 4 == 0 {
                x["health"] = json!(format!("http://10.0.{}.{}/health", i / 256, i % 256));
            }
            x
        }).collect::<Vec<_>>(),
    })
}

/// The storm: (executor, failure), drawn with splitmix64 from a fixed seed.
fn storm() -> Vec<(String, Failure)> {
    let mut state = 0x5EED_u64;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    (0..STORM)
        .map(|_| {
            let executor = format!("e{}", next() % STORM_EXECUTORS as u64);
            let (kind, retry_after_ms) = match next() % 100 {
                0..=29 => (FailureKind::RateLimit, None),
                30..=39 => (FailureKind::RateLimit, Some(30_000)),
                40..=59 => (FailureKind::UsageLimit, None),
                60..=64 => (FailureKind::UsageLimit, Some(120_000)),
                65..=84 => (FailureKind::Outage, None),
                85..=97 => (FailureKind::Other, None),
                98 => (FailureKind::Authentication, None),
                _ => (FailureKind::ModelUnavailable, None),
            };
            let failure = Failure {
                retry_after_ms,
                ..Failure::of_kind(kind, "HTTP 429: too many requests")
            };
            (executor, failure)
        })
        .collect()
}

fn failure_storm(c: &mut Criterion) {
    let mut group = c.benchmark_group("failure_storm");
    group.throughput(Throughput::Elements(STORM as u64));
    group.sample_size(10);
    let doc = storm_roster();
    let reports = storm();
    group.bench_function("100000_reports_1024_executors", |b| {
        b.iter_batched(
            || {
                let policy = Policy::new(&doc, Options::default()).expect("a roster");
                (policy, reports.clone())
            },
            |(mut policy, reports)| {
                for (i, (executor, failure)) in reports.into_iter().enumerate() {
                    let now = T0 + i as u64;
                    handle(
                        &mut policy,
                        Input::Report {
                            now,
                            executor,
                            failure,
                        },
                    );
                }
                policy
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

// ---- (d) a lease that waits, and one that avoids 10,000 ids -------------------------------

/// n executors of one role, every slot taken (the leases are never released).
fn all_busy(n: usize) -> (Policy, u64) {
    let mut policy = Policy::new(&roster(n), Options::default()).expect("a roster");
    let slots: usize = (0..n).map(|i| 1 + i % 2).sum();
    for i in 0..slots {
        handle(&mut policy, lease(T0, &format!("busy{i}"))).expect("a free slot");
    }
    (policy, T0)
}

/// Times `input` (a lease that waits), then cancels it untimed so the queue stays
/// empty and every iteration sees the same state.
#[allow(clippy::disallowed_methods)] // a benchmark reads the clock; the core never does
fn time_waiting(
    policy: &mut Policy,
    now: &mut u64,
    iters: u64,
    input: &dyn Fn(u64) -> Input,
) -> Duration {
    let mut timed = Duration::ZERO;
    for _ in 0..iters {
        *now += 1;
        let input = input(*now);
        let start = Instant::now();
        let granted = handle(policy, input);
        timed += start.elapsed();
        assert!(granted.is_none(), "every slot is taken: it waits");
        let cancel = Input::Cancel {
            now: *now,
            id: "w".to_string(),
        };
        handle(policy, cancel);
    }
    timed
}

fn lease_waits(c: &mut Criterion) {
    let mut group = c.benchmark_group("lease_waits");
    group.throughput(Throughput::Elements(1));
    for n in [4usize, 10_000] {
        let (mut policy, mut now) = all_busy(n);
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_custom(|iters| {
                time_waiting(&mut policy, &mut now, iters, &|now| lease(now, "w"))
            })
        });
    }
    group.finish();
}

fn lease_avoiding_10000(c: &mut Criterion) {
    let mut group = c.benchmark_group("lease_avoid_10000");
    group.throughput(Throughput::Elements(1));
    let (mut policy, mut now) = all_busy(10_000);
    // 9,990 executors of the roster and 10 ids it lacks, in no order: the waiting
    // report skips the 9,990 before it reaches the ten it lists.
    let mut avoid: Vec<String> = (0..9_990).rev().map(|i| format!("e{i}")).collect();
    avoid.extend((0..10).map(|i| format!("ghost{i}")));
    avoid.swap(0, 5_000);
    group.bench_function("waits", |b| {
        b.iter_custom(|iters| {
            time_waiting(&mut policy, &mut now, iters, &|now| match lease(now, "w") {
                Input::Lease(request) => Input::Lease(LeaseRequest {
                    avoid: avoid.clone(),
                    ..request
                }),
                other => other,
            })
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    targets = lease_release, queue_10000, failure_storm, lease_waits, lease_avoiding_10000
}

fn main() {
    let bytes = memory_per_waiting_request(None);
    println!("memory per waiting request: {bytes:.0} bytes (target < 300)");
    let bytes = memory_per_waiting_request(Some("reviewer of #1234"));
    println!("  with a label of 17 characters: {bytes:.0} bytes");
    let debug = allocations_per_cycle(Level::Debug);
    let warn = allocations_per_cycle(Level::Warn);
    println!("allocations per lease+release: {debug:.1} ({warn:.1} with events below warn off)");
    benches();
    Criterion::default().configure_from_args().final_summary();
}
