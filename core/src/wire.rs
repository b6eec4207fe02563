//! Hand-written deserializers for the two internally tagged enums, [`Input`] and
//! [`Output`].
//!
//! serde's derive for `#[serde(tag = "type")]` buffers the whole object into its
//! private `Content` tree before it looks at the tag, then deserializes every field a
//! second time from that tree: slow on the hot path (every input is one), and about a
//! fifth of the WebAssembly module in generic code. Here an input is read in one pass,
//! field by field, straight from the JSON, with the messages serde's derive gives (the
//! same `unknown field`/`missing field`/`invalid type` wording and field lists), so
//! the canonical error texts of every host stay what they were.
//!
//! When the tag is known before the object is read ([`input_for_kind`], what
//! `json::parse_input` uses to word an error), each field is checked as it comes, in
//! the object's order, exactly as the derive did. Without it ([`Input`]'s
//! `Deserialize`, the fast path), a field that comes before `type` is checked once the
//! tag is known.

use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, Error as _, IgnoredAny, MapAccess, Unexpected, Visitor,
};
use serde::Deserialize;
use serde_json::Value;

use super::{ExclusionKind, Failure, Fields, Input, LeaseRequest, Level, Output, PersistedState};
use crate::read::{self, object, Read};

/// The `type` tags of the inputs, in declaration order (serde's `unknown variant` list).
pub(crate) const INPUT_TYPES: &[&str] = &[
    "lease",
    "tryLease",
    "cancel",
    "release",
    "occupy",
    "report",
    "exclude",
    "resume",
    "probeResult",
    "machineCreated",
    "machineFailed",
    "reload",
    "preflightResult",
    "restore",
    "tick",
];

/// An input's kind (its `type` tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Lease,
    TryLease,
    Cancel,
    Release,
    Occupy,
    Report,
    Exclude,
    Resume,
    ProbeResult,
    MachineCreated,
    MachineFailed,
    Reload,
    PreflightResult,
    Restore,
    Tick,
}

impl Kind {
    pub(crate) fn from_name(name: &str) -> Option<Kind> {
        Some(match name {
            "lease" => Kind::Lease,
            "tryLease" => Kind::TryLease,
            "cancel" => Kind::Cancel,
            "release" => Kind::Release,
            "occupy" => Kind::Occupy,
            "report" => Kind::Report,
            "exclude" => Kind::Exclude,
            "resume" => Kind::Resume,
            "probeResult" => Kind::ProbeResult,
            "machineCreated" => Kind::MachineCreated,
            "machineFailed" => Kind::MachineFailed,
            "reload" => Kind::Reload,
            "preflightResult" => Kind::PreflightResult,
            "restore" => Kind::Restore,
            "tick" => Kind::Tick,
            _ => return None,
        })
    }

    /// Its fields in declaration order (serde's `unknown field` list).
    fn fields(self) -> &'static [&'static str] {
        match self {
            Kind::Lease | Kind::TryLease => &[
                "now",
                "id",
                "role",
                "avoid",
                "prefer",
                "pin",
                "rank",
                "eventTime",
                "label",
                "deadline",
            ],
            Kind::Cancel => &["now", "id"],
            Kind::Release => &["now", "lease"],
            Kind::Occupy => &["now", "id", "executor", "role", "hold"],
            Kind::Report => &["now", "executor", "failure"],
            Kind::Exclude => &["now", "executor", "kind", "reason", "until"],
            Kind::Resume => &["now", "executor"],
            Kind::ProbeResult => &["now", "executor", "up"],
            Kind::MachineCreated => &["now", "id", "hold"],
            Kind::MachineFailed => &["now", "id", "message"],
            Kind::Reload => &["now", "document"],
            Kind::PreflightResult => &["now", "executor", "ok", "error"],
            Kind::Restore => &["now", "state"],
            Kind::Tick => &["now"],
        }
    }

    /// Whether `key` is one of its fields (or the tag): [`Kind::fields`] as a match,
    /// for the hot path (the tests check that the two agree).
    fn has(self, key: Key) -> bool {
        use Kind as K;
        match key {
            Key::Type | Key::Now => true,
            Key::Id => matches!(
                self,
                K::Lease
                    | K::TryLease
                    | K::Cancel
                    | K::Occupy
                    | K::MachineCreated
                    | K::MachineFailed
            ),
            Key::Role => matches!(self, K::Lease | K::TryLease | K::Occupy),
            Key::Avoid
            | Key::Prefer
            | Key::Pin
            | Key::Rank
            | Key::EventTime
            | Key::Label
            | Key::Deadline => matches!(self, K::Lease | K::TryLease),
            Key::Lease => self == K::Release,
            Key::Executor => matches!(
                self,
                K::Occupy
                    | K::Report
                    | K::Exclude
                    | K::Resume
                    | K::ProbeResult
                    | K::PreflightResult
            ),
            Key::Hold => matches!(self, K::Occupy | K::MachineCreated),
            Key::Failure => self == K::Report,
            Key::Kind | Key::Reason | Key::Until => self == K::Exclude,
            Key::Up => self == K::ProbeResult,
            Key::Message => self == K::MachineFailed,
            Key::Document => self == K::Reload,
            Key::Ok | Key::Error => self == K::PreflightResult,
            Key::State => self == K::Restore,
        }
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Kind, D::Error> {
        struct KindVisitor;
        impl Visitor<'_> for KindVisitor {
            type Value = Kind;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("variant identifier")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Kind, E> {
                Kind::from_name(name).ok_or_else(|| E::unknown_variant(name, INPUT_TYPES))
            }
        }
        deserializer.deserialize_identifier(KindVisitor)
    }
}

/// Every field any input has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Type,
    Now,
    Id,
    Role,
    Avoid,
    Prefer,
    Pin,
    Rank,
    EventTime,
    Label,
    Deadline,
    Lease,
    Executor,
    Hold,
    Failure,
    Kind,
    Reason,
    Until,
    Up,
    Message,
    Document,
    Ok,
    Error,
    State,
}

const KEYS: [(&str, Key); 24] = [
    ("type", Key::Type),
    ("now", Key::Now),
    ("id", Key::Id),
    ("role", Key::Role),
    ("avoid", Key::Avoid),
    ("prefer", Key::Prefer),
    ("pin", Key::Pin),
    ("rank", Key::Rank),
    ("eventTime", Key::EventTime),
    ("label", Key::Label),
    ("deadline", Key::Deadline),
    ("lease", Key::Lease),
    ("executor", Key::Executor),
    ("hold", Key::Hold),
    ("failure", Key::Failure),
    ("kind", Key::Kind),
    ("reason", Key::Reason),
    ("until", Key::Until),
    ("up", Key::Up),
    ("message", Key::Message),
    ("document", Key::Document),
    ("ok", Key::Ok),
    ("error", Key::Error),
    ("state", Key::State),
];

impl Key {
    fn name(self) -> &'static str {
        KEYS[self as usize].0
    }
}

/// A key of an input object: one of ours, or another (kept to name it).
enum Field {
    Known(Key),
    Other(String),
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Field, D::Error> {
        struct FieldVisitor;
        impl Visitor<'_> for FieldVisitor {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("field identifier")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Field, E> {
                Ok(match KEYS.iter().find(|(n, _)| *n == name) {
                    Some(&(_, key)) => Field::Known(key),
                    None => Field::Other(name.to_string()),
                })
            }
        }
        deserializer.deserialize_identifier(FieldVisitor)
    }
}

/// Every field of every input, as read.
#[derive(Default)]
struct Raw {
    now: Option<u64>,
    id: Option<String>,
    /// `null` reads as `Some(None)`: allowed for `occupy`, not for a lease.
    role: Option<Option<String>>,
    avoid: Option<Vec<String>>,
    prefer: Option<String>,
    pin: Option<String>,
    rank: Option<i64>,
    event_time: Option<u64>,
    label: Option<String>,
    deadline: Option<u64>,
    lease: Option<u64>,
    executor: Option<String>,
    hold: Option<Value>,
    failure: Option<Failure>,
    kind: Option<ExclusionKind>,
    reason: Option<String>,
    until: Option<u64>,
    up: Option<bool>,
    message: Option<String>,
    document: Option<Value>,
    ok: Option<bool>,
    error: Option<String>,
    state: Option<PersistedState>,
}

fn need<T, E: de::Error>(value: Option<T>, field: &'static str) -> Result<T, E> {
    value.ok_or_else(|| E::missing_field(field))
}

fn null_role<E: de::Error>() -> E {
    E::invalid_type(Unexpected::Unit, &"a string")
}

struct InputVisitor {
    kind: Option<Kind>,
}

impl<'de> Visitor<'de> for InputVisitor {
    type Value = Input;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("internally tagged enum Input")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Input, A::Error> {
        let mut kind = self.kind;
        let mut raw = Raw::default();
        let mut seen: u32 = 0;
        // Without a known tag: the first key no input has, named once the tag is known.
        let mut other: Option<String> = None;
        while let Some(field) = map.next_key::<Field>()? {
            let key = match field {
                Field::Known(key) => key,
                Field::Other(name) => {
                    if let Some(kind) = kind {
                        return Err(A::Error::unknown_field(&name, kind.fields()));
                    }
                    other.get_or_insert(name);
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            let bit = 1u32 << key as u32;
            if seen & bit != 0 {
                return Err(A::Error::duplicate_field(key.name()));
            }
            seen |= bit;
            if let Some(kind) = kind {
                if !kind.has(key) {
                    return Err(A::Error::unknown_field(key.name(), kind.fields()));
                }
            }
            match key {
                Key::Type => {
                    let tag: Kind = map.next_value()?;
                    kind.get_or_insert(tag);
                }
                Key::Now => raw.now = Some(map.next_value()?),
                Key::Id => raw.id = Some(map.next_value()?),
                Key::Role => {
                    let role: Option<String> = map.next_value()?;
                    if role.is_none() && matches!(kind, Some(Kind::Lease | Kind::TryLease)) {
                        return Err(null_role());
                    }
                    raw.role = Some(role);
                }
                Key::Avoid => raw.avoid = Some(map.next_value()?),
                Key::Prefer => raw.prefer = map.next_value()?,
                Key::Pin => raw.pin = map.next_value()?,
                Key::Rank => raw.rank = map.next_value()?,
                Key::EventTime => raw.event_time = map.next_value()?,
                Key::Label => raw.label = map.next_value()?,
                Key::Deadline => raw.deadline = map.next_value()?,
                Key::Lease => raw.lease = Some(map.next_value()?),
                Key::Executor => raw.executor = Some(map.next_value()?),
                Key::Hold => raw.hold = Some(map.next_value()?),
                Key::Failure => raw.failure = Some(map.next_value()?),
                Key::Kind => raw.kind = Some(map.next_value()?),
                Key::Reason => raw.reason = Some(map.next_value()?),
                Key::Until => raw.until = map.next_value()?,
                Key::Up => raw.up = Some(map.next_value()?),
                Key::Message => raw.message = Some(map.next_value()?),
                Key::Document => raw.document = Some(map.next_value()?),
                Key::Ok => raw.ok = Some(map.next_value()?),
                Key::Error => raw.error = map.next_value()?,
                Key::State => raw.state = Some(map.next_value()?),
            }
        }
        let Some(kind) = kind else {
            return Err(A::Error::missing_field("type"));
        };
        // What could not be checked before the tag was known.
        if let Some(name) = other {
            return Err(A::Error::unknown_field(&name, kind.fields()));
        }
        if let Some(&(name, _)) = KEYS
            .iter()
            .find(|(_, key)| seen & (1u32 << *key as u32) != 0 && !kind.has(*key))
        {
            return Err(A::Error::unknown_field(name, kind.fields()));
        }
        build(kind, raw)
    }
}

/// The input of `kind` from its fields; a missing one is named in declaration order.
fn build<E: de::Error>(kind: Kind, raw: Raw) -> Result<Input, E> {
    let now = need(raw.now, "now")?;
    Ok(match kind {
        Kind::Lease | Kind::TryLease => {
            let id = need(raw.id, "id")?;
            let role = need(raw.role, "role")?.ok_or_else(null_role)?;
            let request = LeaseRequest {
                now,
                id,
                role,
                avoid: raw.avoid.unwrap_or_default(),
                prefer: raw.prefer,
                pin: raw.pin,
                rank: raw.rank,
                event_time: raw.event_time,
                label: raw.label,
                deadline: raw.deadline,
            };
            if kind == Kind::Lease {
                Input::Lease(request)
            } else {
                Input::TryLease(request)
            }
        }
        Kind::Cancel => Input::Cancel {
            now,
            id: need(raw.id, "id")?,
        },
        Kind::Release => Input::Release {
            now,
            lease: need(raw.lease, "lease")?,
        },
        Kind::Occupy => Input::Occupy {
            now,
            id: need(raw.id, "id")?,
            executor: need(raw.executor, "executor")?,
            role: raw.role.flatten(),
            hold: raw.hold.filter(|hold| !hold.is_null()),
        },
        Kind::Report => Input::Report {
            now,
            executor: need(raw.executor, "executor")?,
            failure: need(raw.failure, "failure")?,
        },
        Kind::Exclude => Input::Exclude {
            now,
            executor: need(raw.executor, "executor")?,
            kind: raw.kind.unwrap_or(ExclusionKind::Manual),
            reason: raw.reason.unwrap_or_default(),
            until: raw.until,
        },
        Kind::Resume => Input::Resume {
            now,
            executor: need(raw.executor, "executor")?,
        },
        Kind::ProbeResult => Input::ProbeResult {
            now,
            executor: need(raw.executor, "executor")?,
            up: need(raw.up, "up")?,
        },
        Kind::MachineCreated => Input::MachineCreated {
            now,
            id: need(raw.id, "id")?,
            hold: need(raw.hold, "hold")?,
        },
        Kind::MachineFailed => Input::MachineFailed {
            now,
            id: need(raw.id, "id")?,
            message: raw.message.unwrap_or_default(),
        },
        Kind::Reload => Input::Reload {
            now,
            document: need(raw.document, "document")?,
        },
        Kind::PreflightResult => Input::PreflightResult {
            now,
            executor: need(raw.executor, "executor")?,
            ok: need(raw.ok, "ok")?,
            error: raw.error,
        },
        Kind::Restore => Input::Restore {
            now,
            state: need(raw.state, "state")?,
        },
        Kind::Tick => Input::Tick { now },
    })
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Input, D::Error> {
        deserializer.deserialize_map(InputVisitor { kind: None })
    }
}

/// Reads an input whose tag is already known, checking each field as it comes (what
/// `json::parse_input` uses to word an error as serde's derive did).
pub(crate) fn input_for_kind<'de, D: Deserializer<'de>>(
    kind: Kind,
    deserializer: D,
) -> Result<Input, D::Error> {
    struct Seed(Kind);
    impl<'de> DeserializeSeed<'de> for Seed {
        type Value = Input;
        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Input, D::Error> {
            deserializer.deserialize_map(InputVisitor { kind: Some(self.0) })
        }
    }
    Seed(kind).deserialize(deserializer)
}

// ---- Output ----------------------------------------------------------------------

const OUTPUT_TYPES: &[&str] = &[
    "granted",
    "exhausted",
    "timedOut",
    "unavailable",
    "cancelled",
    "waiting",
    "probe",
    "createMachine",
    "deleteMachine",
    "preflight",
    "persist",
    "event",
];

impl Output {
    /// An output from JSON (outputs come back only in an exported state).
    pub fn from_json(value: &Value) -> Read<Output> {
        let r = object(value, "a map")?;
        let kind = r.req("type", read::string)?;
        let string = read::string;
        Ok(match kind.as_str() {
            "granted" => Output::Granted {
                request: r.req("request", string)?,
                lease: r.req("lease", read::u64)?,
                executor: r.req("executor", string)?,
                role: r.req("role", string)?,
                hold: r.opt("hold", read::value)?,
                passed: r.req("passed", read::u32)?,
                occupied: r.or("occupied", read::bool, false)?,
            },
            "exhausted" => Output::Exhausted {
                request: r.req("request", string)?,
                role: r.req("role", string)?,
                reasons: r.req("reasons", read::strings)?,
            },
            "timedOut" => Output::TimedOut {
                request: r.req("request", string)?,
                reasons: r.or("reasons", read::strings, Vec::new())?,
            },
            "unavailable" => Output::Unavailable {
                request: r.req("request", string)?,
            },
            "cancelled" => Output::Cancelled {
                request: r.req("request", string)?,
            },
            "waiting" => Output::Waiting {
                request: r.req("request", string)?,
                role: r.req("role", string)?,
                report: r.req("report", string)?,
                ahead: r.req("ahead", read::u32)?,
            },
            "probe" => Output::Probe {
                executor: r.req("executor", string)?,
                url: r.req("url", string)?,
            },
            "createMachine" => Output::CreateMachine {
                request: r.req("request", string)?,
                executor: r.req("executor", string)?,
            },
            "deleteMachine" => Output::DeleteMachine {
                executor: r.req("executor", string)?,
                hold: r.req("hold", read::value)?,
            },
            "preflight" => Output::Preflight {
                executor: r.req("executor", string)?,
            },
            "persist" => Output::Persist {
                ids: r.req("ids", read::strings)?,
                state: r.req("state", PersistedState::from_json)?,
            },
            "event" => Output::Event {
                level: r.req("level", Level::from_json)?,
                name: r.req("name", string)?,
                message: r.req("message", string)?,
                fields: r.req("fields", Fields::from_json)?,
            },
            other => {
                return Err(serde_json::Error::unknown_variant(other, OUTPUT_TYPES).to_string())
            }
        })
    }
}

super::deserialize_from_json!(Output);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_agrees_with_the_field_lists() {
        for name in INPUT_TYPES {
            let kind = Kind::from_name(name).expect("a kind");
            for &(key_name, key) in &KEYS {
                let listed = key == Key::Type || kind.fields().contains(&key_name);
                assert_eq!(kind.has(key), listed, "{name}.{key_name}");
            }
            for field in kind.fields() {
                assert!(
                    KEYS.iter().any(|(n, _)| n == field),
                    "{name}.{field} is a key"
                );
            }
        }
    }

    #[test]
    fn the_keys_table_is_in_key_order() {
        for (i, &(_, key)) in KEYS.iter().enumerate() {
            assert_eq!(key as usize, i);
        }
    }
}
