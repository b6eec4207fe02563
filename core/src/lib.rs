//! # rota-core: the lease and roster policy, once
//!
//! rota decides who serves the next call: which executor (a harness and a model, or a
//! worker machine) takes a role now, who waits and in what order, who is out of the
//! round after a rate limit or an outage and until when, when to probe a health URL,
//! and what to persist so exclusions outlive a restart.
//!
//! This crate is that decision logic as one deterministic, **sans-IO** state machine.
//! It reads no clock, sleeps never, draws no random number, does no IO and iterates no
//! hash map: time arrives inside every input, and every effect it wants (probe this
//! URL, create a machine, write the state file, wake me at T) leaves as an output that
//! the host carries out and answers with another input. The same document and the
//! same inputs give byte-identical outputs on every host: native Rust, wasmtime,
//! Node.js and the browser (they all speak the JSON of [`json`]).
//!
//! ## The run loop
//!
//! One entry ([`Policy::handle`]), one drain ([`Policy::poll_output`]), one timer
//! ([`Policy::poll_timeout`]). Every mutation must be followed by a complete drain.
//! Early or repeated ticks are harmless; time never runs backwards (a `now` earlier
//! than the last one is clamped to it).
//!
//! ```
//! use rota_core::{Input, LeaseRequest, Options, Output, Policy};
//! use serde_json::json;
//!
//! let document = json!({ "executors": [
//!     { "id": "claude", "harness": "claude", "roles": ["coder", "reviewer"], "slots": 2 },
//!     { "id": "local", "harness": "lm-studio", "roles": ["reviewer"],
//!       "health": "http://127.0.0.1:1234/v1/models" },
//! ]});
//! let mut policy = Policy::new(&document, Options::default()).expect("a valid roster");
//! let mut now = 1_800_000_000_000; // epoch ms, from the host's clock
//!
//! let request = |id: &str, now| LeaseRequest {
//!     now, id: id.into(), role: "reviewer".into(), avoid: vec![], prefer: None,
//!     pin: None, rank: None, event_time: None, label: None, purpose: None, deadline: None,
//!     timeout_ms: None, owner: None, borrow: None, tenant: None, affinity: None,
//! };
//! let mut leases = Vec::new();
//! for id in ["r1", "r2", "r3", "r4"] {
//!     policy.handle(Input::Lease(request(id, now))).expect("a valid input");
//!     // Drain every output: decisions, effects, events.
//!     while let Some(output) = policy.poll_output() {
//!         match output {
//!             Output::Granted { lease, executor, .. } => leases.push((lease, executor)),
//!             Output::Waiting { report, .. } => assert_eq!(report, "claude busy; local busy"),
//!             Output::Probe { .. } | Output::Persist { .. } => { /* the host's IO */ }
//!             _ => {}
//!         }
//!     }
//! }
//! assert_eq!(leases.len(), 3); // claude twice, local once; r4 waits
//!
//! // When nothing else happens, the host sleeps until `poll_timeout` (None: no timer)
//! // and then feeds a tick.
//! assert_eq!(policy.poll_timeout(), None);
//! now += 1_000;
//! policy.handle(Input::Release { now, lease: leases[0].0 }).expect("a granted lease");
//! let granted: Vec<Output> = std::iter::from_fn(|| policy.poll_output())
//!     .filter(|o| matches!(o, Output::Granted { .. }))
//!     .collect();
//! assert!(matches!(&granted[0], Output::Granted { request, .. } if request == "r4"));
//! ```
//!
//! ## The model
//!
//! * **The document** ([`document`]): `{ "executors": [...] }` as the seed roster files
//!   write it, with `slots` (alias `maxConcurrentAttempts`), `coderSlots`/`roleSlots`
//!   caps, `priority` (a number or per role with `default`; lower first), `health`,
//!   `cooldown` durations ([`parse_duration`]), `provision`, `kind`, `disabled`. Unknown
//!   fields are kept. A top-level `rules` ([`Rules`]: the roster seed's, or its
//!   upstream's later ones) sets the defaults of `prefer` ([`PreferRule`]) and
//!   `coderSlotsDefault` ([`CoderSlotsDefault`]), `clones` ([`ClonesRule`]: clone
//!   numbers, [`clone_name`]) and `leaseEvents` ([`LeaseEventsRule`]), each its own
//!   field too. [`validate`] lists every violation with its place; [`merge`] lays
//!   a repository roster over the user's; [`narrow`] keeps the named executors.
//! * **Requests and the queue**: waiting requests form one queue in lease order — rank
//!   (ranked first), then event time, then arrival. After every input the core grants,
//!   in that order, every request that a free slot can serve; a request no free slot
//!   can serve does not block those behind it. Among free executors: `prefer` first
//!   (with the document's `prefer: "tieBreak"`, only while its priority is no worse
//!   than the best free one's), else the lowest priority for the role, ties to the
//!   one leased least recently.
//!   A request nothing outside its `avoid` can ever serve ends as `exhausted` with a
//!   reason per executor. `pin` waits for one executor, even an undeclared one.
//! * **Exclusions**: `until` an instant, `health` until the health URL answers, `run`
//!   for the rest of the run, `manual` until resumed (or its own end). A failure
//!   report carries facts (an @llm4ts/core tag, an HTTP status, an error code, a
//!   message, a reset instant) or an explicit kind; the core classifies it as the
//!   roster seed does, with one signal table a document may extend ([`classify`]),
//!   and says which probe answers mean up. A stronger exclusion is
//!   never replaced by a weaker one, and between timed ends the later wins; a timed
//!   exclusion hidden under a stronger one takes over when that one ends.
//! * **Persistence**: every change to the exclusions that outlive a run gives one
//!   `persist` output per input at most, in the seed's state-file format. It names
//!   only the executors whose entry changed (`ids`) with their new entries: the host
//!   replaces those entries in the file and keeps the others, so a failure storm on a
//!   large roster writes what changed, not the whole roster. A host feeds the file
//!   back with `restore` after a restart. What the file holds is the core's rule too
//!   ([`state_file`]: parse both envelopes, merge, render the seed's bytes), which every
//!   host calls around its own IO.
//! * **Provisioning**: an executor with `provision` first asks the host to create a
//!   machine; a failure frees the slot, re-queues the request in its place and pauses
//!   creation on that executor (30 s doubling to 10 minutes).
//! * **Reload**: a new document replaces the old one live after validation; removed
//!   executors drain, resized ones retire slots as leases end, and (with
//!   `preflightReloads`) added or grown executors must pass a host preflight first.
//! * **Several processes, one roster**: a request may name its `owner` (an instance
//!   folding a shared input log); its lease and every output about it carry it.
//!   `expireOwner` ends what a gone owner left (its leases released or kept,
//!   [`ExpiredOwnerLeases`]), `dropCreation` drops a creation nobody will answer
//!   without a pause, `timeoutMs` is a deadline from the input's `now`, a `version`
//!   marker refuses a log this core does not fold ([`LOG_VERSION`]), and
//!   [`Policy::state_hash`] lets replicas compare their state.
//! * **Queries** change nothing: [`Policy::snapshot`], [`Policy::available`],
//!   [`Policy::slots`], [`Policy::can_ever_serve`], [`Policy::explain`],
//!   [`Policy::plan`] (a dry run of a reload).
//!
//! ## Errors
//!
//! Bad input is an [`Error`] value with a stable [`Error::code`], never a panic, and a
//! rejected input leaves the state exactly as it was — time included. A broken
//! invariant is a bug: [`Policy::check_invariants`] runs after every input in debug
//! builds and panics naming the invariant ([`Policy::verify`] returns it instead;
//! `import_state` refuses a state that breaks one with `INVALID_STATE`).
//!
//! Every bound on what the core is given (id and label lengths, `avoid` length,
//! executors, roles, each option's range) is named with its reason in [`limits`]; past
//! one, a document has a violation, an input is `INVALID_INPUT` and options are
//! `INVALID_OPTIONS`.
//!
//! ## Imports
//!
//! One way, checked by `tests/layering.rs`: [`json`] (the step every host calls) and
//! [`log`] (the shared log's rules, which use `json`) use the [`policy`], which uses [`document`], [`status`], [`protocol`], [`classify`] and
//! [`error`], which use the leaves (`read`, [`write`], `sorted`, `names`, `time`,
//! [`duration`], `decimal`, [`limits`]). Each wire type's JSON writer sits beside its
//! type and reader. Inside [`policy`], `mod.rs` holds [`Policy`] and the run loop, flow
//! files add the methods that touch several sub-states, and the sub-states' own files
//! import neither.
//!
//! ## Cost
//!
//! Per-role sets of the executors that can take a role now, per-role queues in lease
//! order (both sorted blocks, cheap at the ends where their traffic is) and timer sets
//! keep a decision's cost independent of the number of waiters and logarithmic in the
//! number of executors; ids are found by a fixed-hash map. See `benches/`.
//!
//! ## Module map
//!
//! * [`json`]: the JSON step every host calls (`step_str`), queries and answers.
//! * [`log`]: a shared roster's log folded (`sql/PROTOCOL.md`): the genesis, an
//!   input's entry, the text fed for an entry, who acts on each output.
//! * [`protocol`]: inputs, outputs and options, the shapes every host speaks.
//!   * `protocol::wire`: one table per input; the output's reader and writer.
//!   * `protocol::options`: the options and their values.
//!   * `protocol::fields`: an event's structured fields.
//!   * `protocol::failure`: a report's failure and its kind.
//! * [`document`]: the roster document and its validation.
//!   * `document::parse`: the one-pass parser.
//!   * `document::merge`: `merge` and `narrow`.
//! * [`secrets`]: literal secrets in `env`: warnings, redaction.
//! * [`state_file`]: the seed's state file: both envelopes parsed, merged, rendered.
//! * [`classify`]: a failure report's kind, as the roster seed classifies it.
//! * [`reset_time`]: a usage limit's reset time read from its message.
//! * [`status`]: what queries return (snapshot, explanation, plan).
//! * [`error`]: errors with stable codes, and a broken invariant.
//! * [`duration`]: duration strings, parsed and written.
//! * `time`: instants as ISO 8601 in messages.
//! * `decimal`: a duration's number as the nearest `f64`, without core's float parser.
//! * `read`: JSON readers.
//! * [`write`]: the JSON writer's primitives.
//! * `sorted`: sorted-vector maps.
//! * `names`: the fixed-hash map of request and executor ids; names shared as `Arc<str>`.
//! * [`limits`]: every bound, with its reason.
//! * [`policy`]: the state machine (`mod.rs`: [`Policy`], its sub-states, `new`,
//!   `handle`, `check`, `apply`). Its sub-states and their own methods:
//!   * `policy::roster`: executors, their caps and priorities per role, role tables.
//!   * `policy::ready`: a role's ready set.
//!   * `policy::requests`: the request store and the one map of live request ids.
//!   * `policy::queue`: the per-role and pinned queues, deadlines, endings.
//!   * `policy::role_queue`: a role's queue.
//!   * `policy::blocks`: the sorted blocks under the ready sets and role queues.
//!   * `policy::keys`: the one key encoding of every ordered index.
//!   * `policy::avoid`: a request's avoid list, indexed for membership.
//!   * `policy::leases`: the open leases.
//!   * `policy::exclusions`: active exclusions, their timers and strength rules.
//!   * `policy::probes`: the health-probe schedule.
//!   * `policy::provisioning`: creation pauses, abandoned creations.
//!   * `policy::reload`: the pending reload, the startup preflight.
//!   * `policy::persistence`: what the next persist carries.
//!   * `policy::events`: the event names and the event output.
//!   * `policy::outputs`: the output queue, and outputs as references into the state.
//!   * `policy::recovery`: an executor's probation after a cooldown, the backoff of
//!     failures on probation, and its `other` failures in a row.
//!   * `policy::affinity`: the affinity keys' memory (key -> the executor of its last
//!     grant and when), bounded and expiring by the inputs' time.
//!
//!   Its flows (methods of [`Policy`]):
//!   * `policy::granting`: admission, the choice of executor, the grant pass.
//!   * `policy::spreading`: `choice: "leastBusy"` and weights among equal free
//!     executors (a smooth weighted round-robin).
//!   * `policy::borrowing`: a request's `borrow` taken when independence cannot be had
//!     (the upstream's nobody / held / out), and the queue's re-decision of waiting borrowers.
//!   * `policy::queueing`: requests enqueued, counted ahead, dequeued and ended.
//!   * `policy::exhaustion`: whether anything can ever serve a request, and why not.
//!   * `policy::leasing`: a lease opened, released, freed; `occupy`; drained executors.
//!   * `policy::owners`: a shared roster's owners, `expireOwner`.
//!   * `policy::excluding`: failure reports, exclusions set, ended, resumed.
//!   * `policy::flooring`: the floor under a role (`maxExcluded`) that holds back a
//!     rate-limit, outage or failures-in-a-row exclusion.
//!   * `policy::recovering`: probation started and ended, a failure on probation
//!     excluded for a longer cooldown, `other` failures in a row excluded as an outage.
//!   * `policy::remembering`: a lease's affinity key preferring its executor, grants
//!     remembered, expired keys and removed executors' keys forgotten.
//!   * `policy::probing`: probes due, started, answered.
//!   * `policy::machines`: machines created or failed, pauses that end.
//!   * `policy::reloading`: preflights, a reload applied, the roster rebuilt.
//!   * `policy::persisting`: one persist per input at most, restore.
//!   * `policy::timers`: the next timer and why it fires; the time advance.
//!   * `policy::emitting`: events and outputs pushed, settled and drained.
//!   * `policy::queries`: snapshot, explain, plan, available, slots, can_ever_serve.
//!   * `policy::export`: the export of the whole state, and its JSON.
//!   * `policy::import`: an export checked as a whole and rebuilt into a policy.
//!   * `policy::invariants`: `verify` and `check_invariants`.

#![forbid(unsafe_code)]

pub mod classify;
mod decimal;
pub mod document;
pub mod duration;
pub mod error;
pub mod json;
pub mod limits;
pub mod log;
mod names;
pub mod policy;
pub mod protocol;
mod read;
pub mod reset_time;
pub mod secrets;
mod sorted;
pub mod state_file;
pub mod status;
mod time;
pub mod write;

pub use classify::{classify, probe_is_up, Classification, Rule, Signals};
pub use document::{
    clone_name, duplicate_ids, merge, merge_owned, narrow, validate, ClonesRule, CoderSlotsDefault,
    Document, Effort, EffortLevel, ExecutorSpec, Fairness, LeaseEventsRule, Narrowed, PreferRule,
    RecoveryMode, RecoveryRule, ResetTime, Rules, Violation, DEFAULT_TENANT,
};
pub use duration::{format_duration, format_seed_duration, parse_duration};
pub use error::Error;
pub use policy::{Grant, OutputRef, Policy};
pub use protocol::{
    Because, Choice, Exclusion, ExclusionKind, ExpiredOwnerLeases, ExplainRequest, Failure,
    FailureKind, Fields, Input, LeaseRequest, Level, Options, Output, PersistedState, Unservable,
    LOG_VERSION,
};
pub use secrets::{check, Check, Warning};
pub use sorted::SortedMap;
pub use status::{Explanation, Plan, Snapshot};
pub use time::iso as iso_time;
