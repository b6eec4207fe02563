//! Every bound the core puts on what it is given, each named once with its reason
//! ("put a limit on everything": an input the core has no bound for is one whose cost
//! or arithmetic nobody has thought through).
//!
//! Where each is enforced: document bounds are violations of the document
//! (`document.rs`); input bounds are `INVALID_INPUT` when an input is read
//! (`Input::check_limits`, which every JSON reader and the binary step apply); option
//! ranges are `INVALID_OPTIONS` (`Options::check`). [`MAX_WAITING_REQUESTS`] is the
//! policy's to enforce, since only it knows how many wait.

use std::ops::RangeInclusive;

/// The largest integer a JSON number holds exactly (2^53 − 1, `Number.MAX_SAFE_INTEGER`):
/// every time (epoch ms), lease id, rank and duration a host sends is within it, so
/// that every host (a JS number is an f64) reads the same value.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// The longest id, in UTF-8 bytes: request ids, executor ids, role names, executor
/// kinds. Ids are keys held in several indexes and repeated in outputs and events;
/// 1 KiB holds any UUID, path or composed name a host makes.
pub const MAX_ID_BYTES: usize = 1_024;

/// The longest request label, in UTF-8 bytes. It only goes into events; 4 KiB is a
/// long sentence about who asks, not a payload.
pub const MAX_LABEL_BYTES: usize = 4_096;

/// The longest lease purpose (a review lens), in UTF-8 bytes: like a label, it only
/// goes into events, lines and the lease.
pub const MAX_PURPOSE_BYTES: usize = MAX_LABEL_BYTES;

/// The longest lease `affinity` key, in UTF-8 bytes: a key is held in the roster's
/// memory (up to [`MAX_AFFINITY_KEYS`] of them) and exported; 1 KiB holds any
/// session id or hash of a prompt prefix.
pub const MAX_AFFINITY_KEY_BYTES: usize = MAX_ID_BYTES;

/// The most affinity keys the roster remembers at once (key -> executor): past it,
/// the key used least recently is forgotten first. 10,000 keys of at most 1 KiB keep
/// the memory and an export within a few megabytes.
pub const MAX_AFFINITY_KEYS: usize = 10_000;

/// The most executors one document declares. A decision costs O(log executors), a
/// reload or a validation O(executors); 100,000 (a document of megabytes) is far
/// beyond any pool a roster describes and keeps a reload well under a second.
pub const MAX_EXECUTORS: usize = 100_000;

/// The most ids a request's `avoid` names. It names executors of the roster, so more
/// than the roster can hold names nothing new; the list is read and sorted per lease.
pub const MAX_AVOID: usize = MAX_EXECUTORS;

/// The most roles a document declares. Every executor and every queue is indexed per
/// role; the seed has five, and a few hundred is more than any flow distinguishes.
pub const MAX_ROLES: usize = 256;

/// The most requests a `budget` allows per window: its grant times are state, kept
/// one per request.
pub const MAX_BUDGET_REQUESTS: u64 = 1_000_000;

/// The largest `weight` of an executor: its share of the grants among equal
/// priorities (a smooth weighted round-robin). A thousand to one is beyond any
/// split a pool of models needs, and keeps the round-robin's sums small.
pub const MAX_WEIGHT: u32 = 1_000;
/// The longest lease `tenant`, in UTF-8 bytes: a tenant is a name like an id (a
/// team, a customer, a user), a key of the fair queues.
pub const MAX_TENANT_BYTES: usize = MAX_ID_BYTES;

/// The largest tenant `weight`. A tenant's turn advances its virtual finish time by
/// [`TENANT_TURN`] / weight, exactly: the turn is divisible by every weight up to it.
/// 20 to 1 is a wider share than any team split asks for, and keeps the turn small.
pub const MAX_TENANT_WEIGHT: u32 = 20;

/// The virtual time one turn of a tenant of weight 1 takes: lcm(1, ..., 20), so that
/// `TENANT_TURN / weight` is a whole number for every allowed weight.
pub const TENANT_TURN: u64 = 232_792_560;

/// The most tenants a document's `tenants` declares (each is read and kept).
pub const MAX_TENANTS: usize = 10_000;

/// The most requests that wait at once (the queue's bound: each holds its id, label
/// and avoid list in memory). Enforced by the policy, which alone knows the count.
pub const MAX_WAITING_REQUESTS: usize = 1_000_000;

/// The most executor kinds a host's options name.
pub const MAX_KINDS: usize = 256;

/// A week in milliseconds: the longest probe interval, rate-limit window or
/// provisioning pause an option may set. Longer ones are mistakes (a unit slip), and
/// the bound keeps `now + option` exact and far from overflow for every `now` a clock
/// gives ([`MAX_SAFE_INTEGER`] + a week < `u64::MAX`).
pub const MAX_OPTION_MS: u64 = 7 * 24 * 60 * 60 * 1_000;

/// `healthProbeIntervalMs`: at least 1 ms (0 would probe again at the instant each
/// answer arrives, a busy loop between host and core), at most a week.
pub const HEALTH_PROBE_INTERVAL_MS: RangeInclusive<u64> = 1..=MAX_OPTION_MS;

/// `idleProbeIntervalMs`: as the health probe interval.
pub const IDLE_PROBE_INTERVAL_MS: RangeInclusive<u64> = 1..=MAX_OPTION_MS;

/// `rateLimitWindowMs`: at least 1 ms (an empty window counts nothing), at most a week.
pub const RATE_LIMIT_WINDOW_MS: RangeInclusive<u64> = 1..=MAX_OPTION_MS;

/// `rateLimitsToExclude`: at least one rate limit, at most 1,000 (the window keeps
/// one entry per rate limit counted, per executor).
pub const RATE_LIMITS_TO_EXCLUDE: RangeInclusive<u64> = 1..=1_000;

/// `provisionFirstPauseMs`: at least 1 ms (no pause retries a failing creation at
/// once, in a loop), at most a week.
pub const PROVISION_FIRST_PAUSE_MS: RangeInclusive<u64> = 1..=MAX_OPTION_MS;

/// `provisionMaxPauseMs`: as the first pause.
pub const PROVISION_MAX_PAUSE_MS: RangeInclusive<u64> = 1..=MAX_OPTION_MS;

/// The longest duration a document's `cooldown` may give (`parse_duration`): what a
/// JSON number holds exactly. `now + cooldown` stays below 2^54, far from overflow.
pub const MAX_DURATION_MS: u64 = MAX_SAFE_INTEGER;

// The relations the arithmetic relies on, checked when the crate compiles.
const _: () = {
    assert!(MAX_SAFE_INTEGER.checked_add(MAX_OPTION_MS).is_some());
    assert!(MAX_SAFE_INTEGER.checked_add(MAX_DURATION_MS).is_some());
    // A provisioning pause doubles up to 2^20 times before the maximum caps it.
    assert!(MAX_OPTION_MS.checked_mul(1 << 20).is_some());
    assert!(MAX_AVOID >= MAX_EXECUTORS);
    assert!(MAX_ID_BYTES <= MAX_LABEL_BYTES);
    assert!(*RATE_LIMITS_TO_EXCLUDE.end() <= u32::MAX as u64);
    // Every weight divides a turn.
    let mut w = 1;
    while w <= MAX_TENANT_WEIGHT as u64 {
        assert!(TENANT_TURN % w == 0);
        w += 1;
    }
};
