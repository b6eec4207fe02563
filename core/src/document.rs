//! The roster document: `{ "executors": [ ... ] }`, read as the seed roster files are.
//!
//! A document is parsed from JSON in one pass that collects every violation with its
//! place (`executors[2].slots`), so a user fixes a file once, not once per error.
//! Fields the core does not use are kept verbatim and passed back to the host.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::classify::Signals;
/// A document's violations are errors' data: the type lives in `error` (below no
/// module that reads documents), and is named here where it is made.
pub use crate::error::Violation;
use crate::protocol::{Choice, Options, Unservable};
use crate::sorted::SortedMap;
use crate::write::to_text;

mod fields;
mod merge;
mod parse;

pub use fields::{misspelt, unused_accounts};
pub use merge::{duplicate_ids, merge, merge_owned, narrow, Narrowed};
use parse::Parser;

/// The seed's five roles, the default role list of a document.
pub const DEFAULT_ROLES: [&str; 5] = ["planner", "coder", "reviewer", "judge", "verifier"];

/// The role whose slots are capped by default on an executor that also reasons.
pub const CODER_ROLE: &str = "coder";

/// Default cooldowns (the roster seed's).
pub const DEFAULT_USAGE_LIMIT_COOLDOWN_MS: u64 = 30 * 60_000;
pub const DEFAULT_RATE_LIMIT_COOLDOWN_MS: u64 = 10 * 60_000;
pub const DEFAULT_OUTAGE_COOLDOWN_MS: u64 = 5 * 60_000;

/// How long an idle affinity key is remembered by default (`affinityTtl`).
pub const DEFAULT_AFFINITY_TTL_MS: u64 = 10 * 60_000;

/// Lower first. A number for every role, or per role with a `default`.
#[derive(Debug, Clone, PartialEq)]
pub enum Priority {
    All(f64),
    PerRole {
        roles: SortedMap<f64>,
        default: Option<f64>,
    },
}

impl Priority {
    pub fn for_role(&self, role: &str) -> f64 {
        match self {
            Priority::All(p) => *p,
            Priority::PerRole { roles, default } => {
                roles.get(role).copied().or(*default).unwrap_or(1.0)
            }
        }
    }
}

/// A reasoning effort (the upstream's ADR 0029 and its `Effort` schema in
/// @llm4ts/core `Models.ts`: `low | medium | high | max`), which a harness maps to its
/// own flag. The core checks the word, as the upstream's schema does: a slip
/// (`"hgih"`) is a violation, not a value a harness would silently ignore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffortLevel {
    Low,
    Medium,
    High,
    Max,
}

crate::read::unit_names!(EffortLevel {
    Low = "low",
    Medium = "medium",
    High = "high",
    Max = "max"
});

/// An executor's `effort`: one for every role, or per role with a `default`,
/// shaped like `priority`. A role it does not name, without a `default`, has none
/// (the harness keeps its own default).
#[derive(Debug, Clone, PartialEq)]
pub enum Effort {
    All(EffortLevel),
    PerRole {
        roles: SortedMap<EffortLevel>,
        default: Option<EffortLevel>,
    },
}

impl Effort {
    pub fn for_role(&self, role: &str) -> Option<EffortLevel> {
        match self {
            Effort::All(effort) => Some(*effort),
            Effort::PerRole { roles, default } => roles.get(role).copied().or(*default),
        }
    }
}

/// How long each exclusion lasts, in milliseconds (defaults filled in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cooldowns {
    pub usage_limit_ms: u64,
    pub rate_limit_ms: u64,
    pub outage_ms: u64,
}

impl Default for Cooldowns {
    fn default() -> Self {
        Cooldowns {
            usage_limit_ms: DEFAULT_USAGE_LIMIT_COOLDOWN_MS,
            rate_limit_ms: DEFAULT_RATE_LIMIT_COOLDOWN_MS,
            outage_ms: DEFAULT_OUTAGE_COOLDOWN_MS,
        }
    }
}

/// How an executor returns after a rate-limit or usage-limit cooldown ends (its
/// `recovery`, else the document's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Every slot at once (the roster seed).
    #[default]
    All,
    /// One slot until a lease on it is released with no failure reported since its
    /// grant; a rate or usage limit on probation excludes again for a longer cooldown.
    Probation,
}

crate::read::unit_names!(RecoveryMode {
    All = "all",
    Probation = "probation"
});

/// The most a failure on probation multiplies a cooldown by (`maxBackoff`; its
/// violation's message says 1024).
pub const MAX_BACKOFF: u32 = 1024;
/// The most `other` failures in a row `exclusion.consecutiveFailures` may ask for (its
/// violation's message says 1000).
pub const MAX_CONSECUTIVE_FAILURES: u32 = 1000;

/// An executor's recovery rule (`recovery`: a mode, or `{ mode, maxBackoff,
/// quietPeriod }`; an executor's fields win over the document's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryRule {
    pub mode: RecoveryMode,
    /// A failure on probation doubles the cooldown, up to this many times the
    /// cooldown of its kind (default 8).
    pub max_backoff: u32,
    /// The multiplier halves after each quiet period in the round without such a
    /// failure; `None`: the cooldown of the failure's kind.
    pub quiet_ms: Option<u64>,
}

impl Default for RecoveryRule {
    fn default() -> Self {
        RecoveryRule {
            mode: RecoveryMode::All,
            max_backoff: 8,
            quiet_ms: None,
        }
    }
}

/// A budget: at most `requests` grants in any window of `per_ms` (a sliding window
/// of grant times), on an executor or on an account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub requests: u32,
    pub per_ms: u64,
}

/// One executor, parsed and with its defaults resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutorSpec {
    pub id: String,
    pub harness: String,
    pub model: Option<String>,
    /// The roles it takes, in document order, without duplicates.
    pub roles: Vec<String>,
    pub slots: u32,
    /// Per-role caps in effect (explicit `roleSlots`/`coderSlots`, or the coder default).
    pub role_caps: SortedMap<u32>,
    pub priority: Priority,
    /// The reasoning effort per role, if the executor sets one.
    pub effort: Option<Effort>,
    pub health: Option<String>,
    pub cooldown: Cooldowns,
    /// How it returns after a rate-limit or usage-limit cooldown.
    pub recovery: RecoveryRule,
    /// `other` failures in a row that exclude it as an outage (0: never; its
    /// `exclusion.consecutiveFailures`, else the document's).
    pub consecutive_failures: u32,
    pub disabled: bool,
    /// Each lease first creates a machine (the scheduler seed's provisioned workers).
    pub provision: bool,
    /// Opaque to the core; checked against the kinds a host can run.
    pub kind: Option<String>,
    /// At most so many grants in any window (`budget`), on this executor alone.
    pub budget: Option<Budget>,
    /// The account (or key) it shares a quota with: executors of one account share
    /// usage-limit and rate-limit exclusions and the rate-limit window.
    pub account: Option<String>,
    /// Its share of the grants among executors of equal priority (`weight`, 1 to
    /// `limits::MAX_WEIGHT`; default 1): a smooth weighted round-robin.
    pub weight: u32,
    /// The executor's JSON object as written, unknown fields included.
    pub raw: Map<String, Value>,
}

impl ExecutorSpec {
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }

    /// The most leases of `role` this executor holds at once.
    pub fn cap_for(&self, role: &str) -> u32 {
        self.role_caps
            .get(role)
            .copied()
            .unwrap_or(self.slots)
            .min(self.slots)
    }

    pub fn priority_for(&self, role: &str) -> f64 {
        self.priority.for_role(role)
    }

    /// The effort `role` runs at on this executor (the upstream's `effortOf`); none
    /// when the executor sets none for it.
    pub fn effort_for(&self, role: &str) -> Option<EffortLevel> {
        self.effort.as_ref().and_then(|e| e.for_role(role))
    }
}

/// The form a document declares its executors in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `executors` (the roster seed's files).
    Roster,
    /// Only a `workers` list or map (the scheduler seed's `usine.yaml`): `name` as the
    /// id, `maxConcurrentAttempts`/`max_concurrent_attempts` slots, every role.
    Workers,
}

/// Which generation of the roster seed's rules a document follows (its top-level
/// `rules`): `seed` (@llm4ts/flow 2.9.1, the default) or `upstream` (the rules its
/// upstream adopted later). The switch sets the default of every rule that has its
/// own field (`prefer`, `coderSlotsDefault`); a rule's own field wins over it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rules {
    #[default]
    Seed,
    Upstream,
}

/// What a request's `prefer` does (the document's `prefer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreferRule {
    /// The preferred executor is taken first while free, whatever its priority (the
    /// roster seed).
    #[default]
    First,
    /// It breaks ties only: taken while its priority for the role is no worse than
    /// the best free executor's (the upstream, 2.9.7: "continuity breaks ties, it
    /// never overrides a priority the operator changed").
    TieBreak,
}

/// The default of an executor's `coderSlots` (the document's `coderSlotsDefault`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CoderSlotsDefault {
    /// `slots - 1` on an executor that codes and also reasons with more than one
    /// slot: one slot stays free for reasoning (the roster seed).
    #[default]
    SlotsMinusOne,
    /// `slots`: a slot is a clone, every one may code (the upstream, ADR 0033).
    Slots,
}

/// Whether leases carry clone numbers (the document's `clones`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClonesRule {
    /// Leases name the executor only (the roster seed).
    #[default]
    Unnumbered,
    /// Each lease takes the lowest free clone number of its executor, from 1, and its
    /// grant, events and messages name it (`codex#2`; the upstream, ADR 0033).
    Numbered,
}

/// What the lease events carry (the document's `leaseEvents`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LeaseEventsRule {
    /// The seed's fields: `released` names the executor and the lease.
    #[default]
    Plain,
    /// Typed for a dashboard (the upstream's `ExecutorLeased`, `ExecutorReleased`,
    /// `ExecutorResumed`, `Timed`): `released` with the role and label too, a waited
    /// grant with `waitedMs`, an executor back in the round with `why`.
    Typed,
}

crate::read::unit_names!(ClonesRule {
    Unnumbered = "unnumbered",
    Numbered = "numbered"
});
crate::read::unit_names!(LeaseEventsRule {
    Plain = "plain",
    Typed = "typed"
});
/// Where a usage limit's reset time comes from (the document's `resetTime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResetTime {
    /// Only a report's own `resetAt` (the roster seed).
    #[default]
    Reported,
    /// Also the failure's message, when the report gives no `resetAt`: "resets
    /// 8:20am (Europe/Rome)", "try again at 2:30 PM" (the upstream's `UsageLimits.ts`,
    /// read by `crate::reset_time`).
    Message,
}

crate::read::unit_names!(ResetTime {
    Reported = "reported",
    Message = "message"
});

/// The order waiting requests of a role are served in (the document's `fairness`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fairness {
    /// Lease order: rank, then event time, then arrival (both seeds).
    #[default]
    LeaseOrder,
    /// Across tenants by weighted fair queuing (their `weight` under `tenants`,
    /// default 1), and within a tenant in lease order.
    Tenants,
}

crate::read::unit_names!(Fairness {
    LeaseOrder = "leaseOrder",
    Tenants = "tenants"
});

/// The tenant of a lease that names none.
pub const DEFAULT_TENANT: &str = "default";

crate::read::unit_names!(Rules {
    Seed = "seed",
    Upstream = "upstream"
});
crate::read::unit_names!(PreferRule {
    First = "first",
    TieBreak = "tieBreak"
});
crate::read::unit_names!(CoderSlotsDefault {
    SlotsMinusOne = "slotsMinusOne",
    Slots = "slots"
});

/// A validated roster document.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The role list: the document's own `roles`, or the seed's five.
    pub roles: Vec<String>,
    /// `executors` first, then `workers`, each in document order.
    pub executors: Vec<ExecutorSpec>,
    pub form: Form,
    /// The document's own `choice` and `unservable`, if it gives them.
    pub choice: Option<Choice>,
    pub unservable: Option<Unservable>,
    /// The document's `rules` switch and the rules' own fields, if it gives them
    /// ([`Document::prefer_rule`], [`Document::coder_slots_default`] resolve them).
    pub rules: Option<Rules>,
    pub prefer: Option<PreferRule>,
    pub coder_slots_default: Option<CoderSlotsDefault>,
    /// The document's `clones` and `leaseEvents`, if it gives them
    /// ([`Document::clones_rule`], [`Document::lease_events_rule`] resolve them).
    pub clones: Option<ClonesRule>,
    pub lease_events: Option<LeaseEventsRule>,
    /// The document's `resetTime`, if it gives one ([`Document::reset_time`]).
    pub reset_time: Option<ResetTime>,
    /// The document's `affinityTtl` in ms, if it gives one ([`Document::affinity_ttl`]).
    pub affinity_ttl: Option<u64>,
    /// The budgets of the accounts listed under `accounts` that give one.
    pub accounts: SortedMap<Budget>,
    /// The floor under each role (`maxExcluded`): per role, the most percent of its
    /// slots that rate-limit, outage and failures-in-a-row exclusions may take out of
    /// the round; `default` for the roles it does not name. Empty: no floor.
    pub max_excluded: SortedMap<u8>,
    /// The document's `fairness`, if it gives one ([`Document::fairness`]).
    pub fairness: Option<Fairness>,
    /// The weights of the tenants listed under `tenants` (a tenant not listed
    /// weighs 1).
    pub tenants: SortedMap<u32>,
    /// The signal table failures are classified with: the seed's, extended by the
    /// document's top-level `signals` (`crate::classify`).
    pub signals: Signals,
    /// The document as written, but for its `executors` entries when
    /// `executors_in_specs` is `Some(n)`: then each of them lives once, as the `raw` of
    /// its spec (the first `n` specs, in order), and `raw` holds an empty list in their
    /// place (issue 15: a large roster was in memory twice). [`Document::as_written`]
    /// puts them back.
    pub(crate) raw: Value,
    pub(crate) executors_in_specs: Option<usize>,
}

impl Document {
    /// Parses and validates; every violation at once on failure.
    pub fn from_json(value: &Value, kinds: Option<&[String]>) -> Result<Document, Vec<Violation>> {
        Document::from_owned_json(value.clone(), kinds)
    }

    /// As `from_json`, taking `value`: its `executors` entries move into their specs
    /// and the rest is kept as written, so a large roster is in memory once while it
    /// is read and after.
    pub fn from_owned_json(
        mut value: Value,
        kinds: Option<&[String]>,
    ) -> Result<Document, Vec<Violation>> {
        let mut document = Document::parse(&value, kinds, true)?;
        if let Some(Value::Array(items)) = value.get_mut("executors") {
            // Parsed without a violation: every entry is an object, and the first
            // specs are theirs, in order (the `workers` come after them).
            let items = std::mem::take(items);
            debug_assert!(items.len() <= document.executors.len());
            document.executors_in_specs = Some(items.len());
            for (spec, item) in document.executors.iter_mut().zip(items) {
                if let Value::Object(object) = item {
                    spec.raw = object;
                }
            }
        }
        document.raw = value;
        Ok(document)
    }

    /// The document as written (a copy).
    pub fn as_written(&self) -> Value {
        self.written_with(self.executors.iter())
    }

    /// The document as written, its `executors` entries (when they live in specs)
    /// from `specs`: this document's own, in order (a running policy keeps them in its
    /// roster).
    pub(crate) fn written_with<'a>(&self, specs: impl Iterator<Item = &'a ExecutorSpec>) -> Value {
        let mut value = self.raw.clone();
        if let (Some(n), Some(slot)) = (self.executors_in_specs, value.get_mut("executors")) {
            *slot = Value::Array(
                specs
                    .take(n)
                    .map(|s| Value::Object(s.raw.clone()))
                    .collect(),
            );
        }
        value
    }

    /// `written_with` as compact JSON text, written from the parts: no copy of the
    /// document is built, one entry at a time (a host's `document()` query of a
    /// large roster). The same text as `to_text` of `written_with`: a map's keys in
    /// its order, each value as `to_text` writes it.
    pub(crate) fn written_text_with<'a>(
        &self,
        specs: impl Iterator<Item = &'a ExecutorSpec>,
    ) -> String {
        let (Some(n), Value::Object(top)) = (self.executors_in_specs, &self.raw) else {
            return to_text(&self.raw);
        };
        let mut specs = specs.take(n);
        let mut out = String::from("{");
        for (i, (key, value)) in top.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&to_text(&Value::String(key.clone())));
            out.push(':');
            if key != "executors" {
                out.push_str(&to_text(value));
                continue;
            }
            out.push('[');
            for (j, spec) in specs.by_ref().enumerate() {
                if j > 0 {
                    out.push(',');
                }
                out.push_str(&to_text(&Value::Object(spec.raw.clone())));
            }
            out.push(']');
        }
        out.push('}');
        out
    }

    /// Parses and validates; `raw` is left `null` for the caller to fill (and, with
    /// `raw_later`, the `executors` entries' `raw` empty).
    fn parse(
        value: &Value,
        kinds: Option<&[String]>,
        raw_later: bool,
    ) -> Result<Document, Vec<Violation>> {
        let mut parser = Parser {
            violations: Vec::new(),
            executors_raw_later: raw_later,
            coder_slots_default: CoderSlotsDefault::default(),
            recovery: RecoveryRule::default(),
            consecutive_failures: 0,
        };
        let document = parser.document(value, kinds);
        if parser.violations.is_empty() {
            if let Some(document) = document {
                return Ok(document);
            }
        }
        Err(parser.violations)
    }

    pub fn from_str(text: &str, kinds: Option<&[String]>) -> Result<Document, Vec<Violation>> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            vec![Violation {
                path: "$".into(),
                message: format!("the document is not JSON: {e}"),
            }]
        })?;
        Document::from_json(&value, kinds)
    }

    pub fn is_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }

    pub fn executor(&self, id: &str) -> Option<&ExecutorSpec> {
        self.executors.iter().find(|e| e.id == id)
    }

    /// Which equal free executor takes a request: the document's `choice`, else the
    /// options', else its form's (DESIGN.md: where the seeds differ, rota offers both).
    pub fn choice(&self, options: &Options) -> Choice {
        self.choice.or(options.choice).unwrap_or(match self.form {
            Form::Roster => Choice::RoundRobin,
            Form::Workers => Choice::Declared,
        })
    }

    /// What becomes of a request nothing can ever serve: the document's
    /// `unservable`, else the options', else its form's.
    pub fn unservable(&self, options: &Options) -> Unservable {
        self.unservable
            .or(options.unservable)
            .unwrap_or(match self.form {
                Form::Roster => Unservable::Exhaust,
                Form::Workers => Unservable::Wait,
            })
    }
}

impl Document {
    /// What a request's `prefer` does: the document's `prefer`, else its `rules`'.
    pub fn prefer_rule(&self) -> PreferRule {
        self.prefer.unwrap_or(match self.rules {
            Some(Rules::Upstream) => PreferRule::TieBreak,
            _ => PreferRule::First,
        })
    }

    /// Where a usage limit's reset time comes from: the document's `resetTime`, else
    /// its `rules`'.
    pub fn reset_time(&self) -> ResetTime {
        self.reset_time.unwrap_or(match self.rules {
            Some(Rules::Upstream) => ResetTime::Message,
            _ => ResetTime::Reported,
        })
    }

    /// How long an affinity key is remembered after its last grant: the document's
    /// `affinityTtl`, else 10 minutes.
    pub fn affinity_ttl(&self) -> u64 {
        self.affinity_ttl.unwrap_or(DEFAULT_AFFINITY_TTL_MS)
    }

    /// The default of an executor's `coderSlots`: the document's
    /// `coderSlotsDefault`, else its `rules`'.
    pub fn coder_slots_default(&self) -> CoderSlotsDefault {
        resolve_coder_slots_default(self.coder_slots_default, self.rules)
    }
}

impl Document {
    /// The order a role's waiting requests are served in: the document's `fairness`,
    /// else lease order.
    pub fn fairness(&self) -> Fairness {
        self.fairness.unwrap_or_default()
    }

    /// A tenant's weight: its entry under `tenants`, else 1.
    pub fn tenant_weight(&self, tenant: &str) -> u32 {
        self.tenants.get(tenant).copied().unwrap_or(1)
    }
}

impl Document {
    /// Whether leases carry clone numbers: the document's `clones`, else its `rules`'.
    pub fn clones_rule(&self) -> ClonesRule {
        self.clones.unwrap_or(match self.rules {
            Some(Rules::Upstream) => ClonesRule::Numbered,
            _ => ClonesRule::Unnumbered,
        })
    }

    /// What the lease events carry: the document's `leaseEvents`, else its `rules`'.
    pub fn lease_events_rule(&self) -> LeaseEventsRule {
        self.lease_events.unwrap_or(match self.rules {
            Some(Rules::Upstream) => LeaseEventsRule::Typed,
            _ => LeaseEventsRule::Plain,
        })
    }
}

/// A clone's name: its executor's id and its number (`codex#2`, the upstream's).
pub fn clone_name(id: &str, n: u32) -> String {
    let mut name = String::with_capacity(id.len() + 4);
    name.push_str(id);
    name.push('#');
    crate::write::push_u64(&mut name, u64::from(n));
    name
}

fn resolve_coder_slots_default(
    own: Option<CoderSlotsDefault>,
    rules: Option<Rules>,
) -> CoderSlotsDefault {
    own.unwrap_or(match rules {
        Some(Rules::Upstream) => CoderSlotsDefault::Slots,
        _ => CoderSlotsDefault::SlotsMinusOne,
    })
}

/// Every violation of a document, in one pass (empty when it is valid).
pub fn validate(value: &Value, kinds: Option<&[String]>) -> Vec<Violation> {
    // Parsed only: no copy of the document is kept.
    Document::parse(value, kinds, true)
        .err()
        .unwrap_or_default()
}

/// A scheduler worker's declaration as the scheduler seed reads `usine.yaml`: as
/// written, with its `name` (a map's key names it) and `maxConcurrentAttempts` (the
/// YAML's `max_concurrent_attempts`). Its spec's `raw`, and what hosts hand their
/// callbacks (the worker's whole declaration, as the scheduler hands it).
pub(crate) fn worker_entry(object: &Map<String, Value>, key: Option<&str>) -> Map<String, Value> {
    let mut entry = object.clone();
    if let Some(key) = key {
        entry
            .entry("name")
            .or_insert_with(|| Value::String(key.to_string()));
    }
    if let Some(slots) = object.get("max_concurrent_attempts") {
        entry
            .entry("maxConcurrentAttempts")
            .or_insert_with(|| slots.clone());
    }
    entry
}

/// Each executor's id and entry, in the document's order (`executors`, then
/// `workers`), as a host hands them to its callbacks (`preflight`, a lease's
/// executor, the roster's `executors`): an `executors` entry as written; a worker's
/// declaration (`worker_entry`) with its `id` (its name). The document need not be
/// valid: an entry without a string id is left out.
pub fn entries(document: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for item in document
        .get("executors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(id) = item.get("id").and_then(Value::as_str) {
            out.push((id.to_string(), item.clone()));
        }
    }
    let mut worker = |object: &Value, key: Option<&str>| {
        let Some(object) = object.as_object() else {
            return;
        };
        let mut entry = worker_entry(object, key);
        let Some(id) = entry
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return;
        };
        entry
            .entry("id")
            .or_insert_with(|| Value::String(id.clone()));
        out.push((id, Value::Object(entry)));
    };
    match document.get("workers") {
        Some(Value::Array(items)) => items.iter().for_each(|item| worker(item, None)),
        Some(Value::Object(map)) => map.iter().for_each(|(key, item)| worker(item, Some(key))),
        _ => {}
    }
    out
}
