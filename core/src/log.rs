//! A shared roster's log: the rules every host follows to fold it (`sql/PROTOCOL.md`),
//! once. Hosts keep the IO (the log itself, timers, HTTP, fencing); what an entry is,
//! which bytes are fed to the core for it and which instance acts on each output are
//! decided here:
//!
//! * [`genesis_entry`] writes seq 1, fixing the options every replica runs with
//!   ([`genesis_options`]); [`read_genesis`] reads it back, or refuses the log
//!   (`INVALID_LOG`, `UNSUPPORTED_VERSION`).
//! * [`entry_of_value`] (and [`entry_of`], [`entry_of_text`]) turn an input into its entry (its JSON without
//!   `now`, `type` first; a `deadline` is refused); [`fold_text`] is the text fed to the
//!   core for an entry at a log time.
//! * [`EntryFacts`] are the facts of an entry a host needs (its `type`, an
//!   `expireOwner`'s owner); [`actor`] says who acts on each output of a folded entry,
//!   [`EntryFacts::call_of`] whose call a rejected entry was, [`EntryFacts::halts`]
//!   when a rejection stops the replica, [`EntryFacts::expires`] when folding it fences
//!   this instance.
//! * [`fold_str`] folds one entry into a policy and answers with the outputs and who
//!   acts on each (one call per entry); a new leader redoes
//!   [`Policy::probes_in_flight`].
//! * [`answer`] asks any of these as JSON (`{"op": ...}`): the plain ABI's `log` query,
//!   the npm package's `logJson`, the conformance vectors.

use serde_json::{json, Map, Value};

use crate::error::Error;
use crate::json::{answer_text, parse_input_text, parse_options};
use crate::policy::Policy;
use crate::protocol::{Input, Output, LOG_VERSION};
use crate::write::to_text;

/// The `type` of a genesis entry.
pub const GENESIS: &str = "genesis";

/// The options a genesis fixes for every replica, whatever the writer gave:
/// `preflight: false` and `preflightReloads: false` (a shared roster does not
/// preflight in log version 1: nobody would answer the `preflight` outputs). The
/// rest (`canProbe` included) is the writer's. `null` is no options.
pub fn genesis_options(options: &Value) -> Result<Value, Error> {
    let mut fixed = match options {
        Value::Null => Map::new(),
        Value::Object(map) => map.clone(),
        other => {
            return Err(Error::InvalidOptions {
                message: format!("the options are not an object: {}", to_text(other)),
            })
        }
    };
    fixed.insert("preflight".into(), Value::Bool(false));
    fixed.insert("preflightReloads".into(), Value::Bool(false));
    Ok(Value::Object(fixed))
}

/// The genesis entry (seq 1) a writer appends to an empty log:
/// `{"type":"genesis","log":1,"document":D,"options":O}` with O as
/// [`genesis_options`] fixes it. Refused, before it could reach the log, when a policy
/// could not be built from it (the policy's error).
pub fn genesis_entry(document: &Value, options: &Value) -> Result<String, Error> {
    let options = genesis_options(options)?;
    Policy::new(document, parse_options(&options)?)?;
    Ok(format!(
        "{{\"type\":\"genesis\",\"log\":{LOG_VERSION},\"document\":{},\"options\":{}}}",
        to_text(document),
        to_text(&options)
    ))
}

/// What a genesis holds: the replica is `Policy(document, options)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Genesis {
    pub document: Value,
    pub options: Value,
}

/// The document and options of a log's first entry, or why the log is refused:
/// `INVALID_LOG` (not JSON, not a genesis, no version number), `UNSUPPORTED_VERSION`
/// (a `log` this core does not fold).
pub fn read_genesis(entry: &str) -> Result<Genesis, Error> {
    let invalid = |message: String| Error::InvalidLog { message };
    let value: Value = serde_json::from_str(entry)
        .map_err(|e| invalid(format!("the log's first entry is not JSON: {e}")))?;
    if value.get("type").and_then(Value::as_str) != Some(GENESIS) {
        return Err(invalid(format!(
            "the log does not start with a genesis entry: its first entry is {}",
            short(entry)
        )));
    }
    match value.get("log").and_then(Value::as_u64) {
        Some(LOG_VERSION) => {}
        Some(version) => {
            return Err(Error::UnsupportedVersion {
                version,
                supported: LOG_VERSION,
            })
        }
        None => {
            return Err(invalid(format!(
                "the log's genesis entry has no version number in `log`: {}",
                short(entry)
            )))
        }
    }
    let field = |name: &str| value.get(name).cloned().unwrap_or(Value::Null);
    Ok(Genesis {
        document: field("document"),
        options: field("options"),
    })
}

fn short(text: &str) -> &str {
    let end = text
        .char_indices()
        .nth(120)
        .map_or(text.len(), |(index, _)| index);
    &text[..end]
}

/// An input as a log entry: its JSON with `type` first and without `now` (the log's
/// time goes in at the fold, [`fold_text`]), the other fields as the JSON has them (in
/// key order). The input is read as the core reads it, so one the core would refuse is
/// refused here; so is a request with a `deadline`: the log's time is the only clock
/// (give `timeoutMs`).
pub fn entry_of_value(input: &Value) -> Result<String, Error> {
    let typed = crate::json::parse_input(input)?;
    if let Input::Lease(request) | Input::TryLease(request) = &typed {
        if request.deadline.is_some() {
            return Err(Error::input(format!(
                "{}: a log entry carries no `deadline` (the log's time is the only clock): give `timeoutMs`",
                typed.kind()
            )));
        }
    }
    let mut entry = format!("{{\"type\":\"{}\"", typed.kind());
    if let Value::Object(fields) = input {
        for (key, value) in fields {
            if key != "type" && key != "now" {
                entry.push(',');
                entry.push_str(&to_text(&Value::String(key.clone())));
                entry.push(':');
                entry.push_str(&to_text(value));
            }
        }
    }
    entry.push('}');
    Ok(entry)
}

/// [`entry_of_value`] for an input built in Rust.
pub fn entry_of(input: &Input) -> Result<String, Error> {
    let value = serde_json::to_value(input)
        .map_err(|e| Error::input(format!("{}: not JSON: {e}", input.kind())))?;
    entry_of_value(&value)
}

/// [`entry_of_value`] for an input given as text (with a `now`, as any input).
pub fn entry_of_text(input: &str) -> Result<String, Error> {
    let value: Value = serde_json::from_str(input)
        .map_err(|e| Error::input(format!("the input is not JSON: {e}")))?;
    entry_of_value(&value)
}

/// The exact text fed to the core for an entry at log time `now`: `{"now":` + the
/// decimal + `,` + the entry after its first byte. Nothing else is parsed or
/// rewritten, so a bad entry is rejected by every core alike.
pub fn fold_text(now: u64, entry: &str) -> String {
    let rest = entry.get(1..).unwrap_or_default();
    format!("{{\"now\":{now},{rest}")
}

/// The facts of an entry a host needs: its `type` (`None`: none could be read) and,
/// for an `expireOwner`, its `owner`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EntryFacts {
    pub kind: Option<String>,
    pub owner: Option<String>,
}

/// The entries that are an instance's calls: a rejection rejects the call.
const CALLS: &[&str] = &[
    "lease", "tryLease", "occupy", "report", "exclude", "resume", "reload",
];

impl EntryFacts {
    /// Reads the facts: the `type` from the entry's start as every host writes it
    /// (`{"type":"…"`), else from the whole JSON; the owner of an `expireOwner`.
    pub fn of(entry: &str) -> EntryFacts {
        let quick = entry
            .strip_prefix("{\"type\":\"")
            .and_then(|rest| rest.split_once('"'))
            .map(|(kind, _)| kind)
            .filter(|kind| !kind.contains('\\'));
        if let Some(kind) = quick {
            if kind != "expireOwner" {
                return EntryFacts {
                    kind: Some(kind.to_string()),
                    owner: None,
                };
            }
        }
        let Ok(value) = serde_json::from_str::<Value>(entry) else {
            return EntryFacts::default();
        };
        let text = |name: &str| value.get(name).and_then(Value::as_str).map(str::to_string);
        let kind = text("type");
        let owner = if kind.as_deref() == Some("expireOwner") {
            text("owner")
        } else {
            None
        };
        EntryFacts { kind, owner }
    }

    fn is(&self, kind: &str) -> bool {
        self.kind.as_deref() == Some(kind)
    }

    /// A genesis after seq 1 (one that lost the race): skipped by every replica, not
    /// fed to the core.
    pub fn skipped(&self) -> bool {
        self.is(GENESIS)
    }

    /// The instance whose call a rejection of this entry rejects: the appender, when
    /// the entry is one of its calls (a request, `occupy`, `report`, `exclude`,
    /// `resume`, `reload`). `None`: the rejection is ignored (an `inputRejected` debug
    /// event).
    pub fn call_of<'a>(&self, appender: &'a str) -> Option<&'a str> {
        let kind = self.kind.as_deref()?;
        CALLS.contains(&kind).then_some(appender)
    }

    /// A rejection with this code stops the replica: a `version` entry this core does
    /// not fold (the instance fences and needs a newer module).
    pub fn halts(&self, code: &str) -> bool {
        self.is("version") && code == "UNSUPPORTED_VERSION"
    }

    /// Folding this entry fences instance `me`: an `expireOwner` of `me` that `me` did
    /// not append (the log expired it).
    pub fn expires(&self, me: &str, appender: &str) -> bool {
        self.is("expireOwner") && self.owner.as_deref() == Some(me) && appender != me
    }
}

/// Who acts on an output of a folded entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// This instance (its id).
    Instance(String),
    /// The instance that holds the leader lease when it folds the output.
    Leader,
    /// Every instance (events, to its own listeners).
    Everyone,
    /// Nobody (`persist`: the log is the persistence).
    Nobody,
}

impl Actor {
    /// `{"instance": id}`, `"leader"`, `"everyone"` or `"nobody"`.
    pub fn to_json(&self) -> Value {
        match self {
            Actor::Instance(id) => json!({ "instance": id }),
            Actor::Leader => json!("leader"),
            Actor::Everyone => json!("everyone"),
            Actor::Nobody => json!("nobody"),
        }
    }

    /// Whether instance `me` (the leader when `leader`) acts.
    pub fn is(&self, me: &str, leader: bool) -> bool {
        match self {
            Actor::Instance(id) => id == me,
            Actor::Leader => leader,
            Actor::Everyone => true,
            Actor::Nobody => false,
        }
    }
}

/// Who acts on `output`, an output of entry `entry` appended by `appender`
/// (PROTOCOL.md, "Who acts on an output"): the output's `owner` (caller outputs,
/// machines), else the appender; the appender for every `deleteMachine` of an
/// `expireOwner` (its outputs name the gone owner); the leader for `probe`; everyone
/// for `event`; nobody for `persist`. A `preflight` (and a `startFailed`) names no
/// owner either, so the appender runs it: only a log whose genesis predates
/// [`genesis_options`] asks for preflights (a reload's, appended by the instance that
/// reloads), and they must be answered for its reload to apply.
pub fn actor(output: &Output, entry: &EntryFacts, appender: &str) -> Actor {
    let owner_or_appender = |owner: &Option<String>| {
        Actor::Instance(owner.clone().unwrap_or_else(|| appender.to_string()))
    };
    match output {
        Output::Granted { owner, .. }
        | Output::Exhausted { owner, .. }
        | Output::TimedOut { owner, .. }
        | Output::Unavailable { owner, .. }
        | Output::Cancelled { owner, .. }
        | Output::Waiting { owner, .. }
        | Output::CreateMachine { owner, .. } => owner_or_appender(owner),
        Output::DeleteMachine { .. } if entry.is("expireOwner") => {
            Actor::Instance(appender.to_string())
        }
        Output::DeleteMachine { owner, .. } => owner_or_appender(owner),
        Output::Probe { .. } => Actor::Leader,
        Output::Event { .. } => Actor::Everyone,
        Output::Preflight { .. } | Output::StartFailed { .. } => {
            Actor::Instance(appender.to_string())
        }
        Output::Persist { .. } => Actor::Nobody,
    }
}

/// Folds one entry (seq 2 on; seq 1 is [`read_genesis`]) appended by `appender` at log
/// time `now` into `policy`, answering as text:
/// - `{"skipped":true}`: a later genesis, not fed to the core;
/// - `{"outputs":[...],"wakeAt":n|null,"actors":[...],"type":t,"owner":o}`: the core's
///   answer, [`actor`] for each output (as [`Actor::to_json`]), and the entry's facts;
/// - `{"error":{...},"call":id|null,"halt":bool,"type":t,"owner":o}`: rejected,
///   the state unchanged; whose call it rejects ([`EntryFacts::call_of`]) and whether
///   the replica stops ([`EntryFacts::halts`]).
///
/// (`type`/`owner` are `null` when absent.)
pub fn fold_str(policy: &mut Policy, now: u64, entry: &str, appender: &str) -> String {
    let facts = EntryFacts::of(entry);
    if facts.skipped() {
        return "{\"skipped\":true}".into();
    }
    let facts_text = format!(
        ",\"type\":{},\"owner\":{}}}",
        to_text(&json!(facts.kind)),
        to_text(&json!(facts.owner))
    );
    let handled = parse_input_text(&fold_text(now, entry)).and_then(|input| policy.handle(input));
    if let Err(error) = handled {
        let head = to_text(&json!({
            "error": error.to_json(),
            "call": facts.call_of(appender),
            "halt": facts.halts(error.code()),
        }));
        return format!("{}{facts_text}", &head[..head.len() - 1]);
    }
    let outputs: Vec<Output> = std::iter::from_fn(|| policy.poll_output()).collect();
    let actors: Vec<Value> = outputs
        .iter()
        .map(|output| actor(output, &facts, appender).to_json())
        .collect();
    let head = answer_text(&outputs, policy.poll_timeout());
    format!(
        "{},\"actors\":{}{facts_text}",
        &head[..head.len() - 1],
        to_text(&Value::Array(actors))
    )
}

/// One of the rules above asked as JSON: `{"op": ..., ...}` answered `{"ok": value}`
/// or `{"error": {code, message}}`:
///
/// | op | fields | `ok` |
/// |---|---|---|
/// | `genesis` | `document`, `options` | the genesis entry's text |
/// | `readGenesis` | `entry` | `{document, options}` |
/// | `entry` | `input` (an input, with `now`) | the entry's text |
/// | `feed` | `now`, `entry` | the text fed to the core |
/// | `facts` | `entry`, `appender`, `me`?, `code`? | `{type, owner, skipped, call, expires, halt}`: `call` whose call a rejection rejects, `halt` whether a rejection with `code` stops the replica |
/// | `actors` | `entry`, `appender`, `outputs` | an actor per output |
pub fn answer(request: &Value) -> Value {
    match answer_ok(request) {
        Ok(value) => json!({ "ok": value }),
        Err(error) => json!({ "error": error.to_json() }),
    }
}

fn answer_ok(request: &Value) -> Result<Value, Error> {
    let op = request.get("op").and_then(Value::as_str).unwrap_or("");
    let null = Value::Null;
    let arg = |name: &str| request.get(name).unwrap_or(&null);
    let bad =
        |name: &str| Error::input(format!("log {op}: `{name}` is missing or not of its type"));
    let text = |name: &str| arg(name).as_str().ok_or_else(|| bad(name));
    match op {
        "genesis" => genesis_entry(arg("document"), arg("options")).map(Value::String),
        "readGenesis" => read_genesis(text("entry")?)
            .map(|genesis| json!({ "document": genesis.document, "options": genesis.options })),
        "entry" => entry_of_value(arg("input")).map(Value::String),
        "feed" => {
            let now = arg("now").as_u64().ok_or_else(|| bad("now"))?;
            Ok(Value::String(fold_text(now, text("entry")?)))
        }
        "facts" => {
            let facts = EntryFacts::of(text("entry")?);
            let appender = text("appender")?;
            let me = arg("me").as_str().unwrap_or(appender);
            Ok(json!({
                "type": facts.kind,
                "owner": facts.owner,
                "skipped": facts.skipped(),
                "call": facts.call_of(appender),
                "expires": facts.expires(me, appender),
                "halt": facts.halts(arg("code").as_str().unwrap_or("")),
            }))
        }
        "actors" => {
            let facts = EntryFacts::of(text("entry")?);
            let appender = text("appender")?;
            let outputs = arg("outputs").as_array().ok_or_else(|| bad("outputs"))?;
            outputs
                .iter()
                .map(|value| {
                    Output::from_json(value)
                        .map(|output| actor(&output, &facts, appender).to_json())
                        .map_err(|e| Error::input(format!("log actors: an output: {e}")))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array)
        }
        other => Err(Error::input(format!(
            "unknown log op '{other}' (genesis, readGenesis, entry, feed, facts, actors)"
        ))),
    }
}

#[cfg(test)]
mod tests;
