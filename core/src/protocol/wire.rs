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
//! tag is known. Each input's tag and fields are written once, in the `keys!` and
//! `inputs!` tables below; a read input is then checked against `crate::limits`
//! (`Input::check_limits`). [`Output`]'s reader and writer follow.

use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, Error as _, IgnoredAny, MapAccess, Unexpected, Visitor,
};
use serde::Deserialize;
use serde_json::Value;

use super::{ExclusionKind, Failure, Fields, Input, LeaseRequest, Level, Output, PersistedState};
use crate::read::{self, object, Read};
use crate::write::{write_serialized, write_str, write_u64, write_value};

// ---- The inputs, once -------------------------------------------------------------
//
// `keys!` lists every field any input has (its `Raw` slot, JSON name and the type it is
// read as); `inputs!` lists each input's tag and its fields in declaration order, with
// how each is taken from `Raw`. From these two tables come the tag list, `Kind`, the
// field lists and masks, `Key`, `Raw` and `build`: nothing else to keep in step. A
// field the table gives an input that its `Input` variant lacks, or the reverse, does
// not compile (`build` writes every variant's struct literal).

macro_rules! keys {
    ($($key:ident $name:literal: $t:ty,)*) => {
        /// Every field any input has (the tag aside), named as its `Raw` slot.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Key {
            $($key,)*
        }

        impl Key {
            const ALL: &'static [Key] = &[$(Key::$key,)*];

            const fn name(self) -> &'static str {
                match self {
                    $(Key::$key => $name,)*
                }
            }

            fn from_name(name: &str) -> Option<Key> {
                match name {
                    $($name => Some(Key::$key),)*
                    _ => None,
                }
            }

            const fn bit(self) -> u32 {
                1 << self as u32
            }
        }

        /// Every field of every input, as read (`None`: absent).
        #[derive(Default)]
        struct Raw {
            $($key: Option<$t>,)*
        }

        impl Raw {
            /// Reads `key`'s value into its slot.
            fn read<'de, A: MapAccess<'de>>(&mut self, key: Key, map: &mut A) -> Result<(), A::Error> {
                match key {
                    $(Key::$key => self.$key = Some(map.next_value()?),)*
                }
                Ok(())
            }
        }
    };
}

/// How `build` takes a field from its `Raw` slot.
macro_rules! take {
    // Must be there.
    (need, $slot:expr, $key:ident) => {
        need($slot, Key::$key.name())?
    };
    // Must be there and not `null` (a lease's role).
    (need_some, $slot:expr, $key:ident) => {
        need($slot, Key::$key.name())?.ok_or_else(null_role)?
    };
    // Absent or `null`: `None`.
    (opt, $slot:expr, $key:ident) => {
        $slot.flatten()
    };
    // Absent: `None` (a field whose `null` is an error).
    (some, $slot:expr, $key:ident) => {
        $slot
    };
    // Absent: the type's default.
    (default, $slot:expr, $key:ident) => {
        $slot.unwrap_or_default()
    };
    // Absent or `null`: `None` (a JSON value slot).
    (non_null, $slot:expr, $key:ident) => {
        $slot.filter(|value: &Value| !value.is_null())
    };
    // Absent: `manual` (an exclusion's kind).
    (manual, $slot:expr, $key:ident) => {
        $slot.unwrap_or(ExclusionKind::Manual)
    };
}

macro_rules! inputs {
    ($($kind:ident $tag:literal $($request:ident)? { $($key:ident: $how:ident,)* })*) => {
        /// The `type` tags of the inputs, in declaration order (serde's `unknown
        /// variant` list).
        pub(crate) const INPUT_TYPES: &[&str] = &[$($tag,)*];

        /// An input's kind (its `type` tag).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Kind {
            $($kind,)*
        }

        impl Kind {
            pub(crate) fn from_name(name: &str) -> Option<Kind> {
                match name {
                    $($tag => Some(Kind::$kind),)*
                    _ => None,
                }
            }

            /// The input's kind.
            pub(crate) fn of(input: &Input) -> Kind {
                match input {
                    $(Input::$kind { .. } => Kind::$kind,)*
                }
            }

            /// Its `type` tag.
            pub(crate) fn name(self) -> &'static str {
                INPUT_TYPES[self as usize]
            }

            /// Its fields in declaration order (serde's `unknown field` list).
            pub(crate) fn fields(self) -> &'static [&'static str] {
                match self {
                    $(Kind::$kind => {
                        const FIELDS: &[&str] = &[$(Key::$key.name(),)*];
                        FIELDS
                    })*
                }
            }

            /// Whether `key` is one of its fields.
            fn has(self, key: Key) -> bool {
                let mask = match self {
                    $(Kind::$kind => 0 $(| Key::$key.bit())*,)*
                };
                mask & key.bit() != 0
            }
        }

        /// The input of `kind` from its fields; a missing one is named in declaration
        /// order (a struct literal's fields are evaluated in the order written).
        fn build<E: de::Error>(kind: Kind, raw: Raw) -> Result<Input, E> {
            Ok(match kind {
                $(Kind::$kind => inputs!(@variant $kind $($request)? { $($key: take!($how, raw.$key, $key),)* }),)*
            })
        }
    };
    (@variant $kind:ident request { $($fields:tt)* }) => {
        Input::$kind(LeaseRequest { $($fields)* })
    };
    (@variant $kind:ident { $($fields:tt)* }) => {
        Input::$kind { $($fields)* }
    };
}

keys! {
    now "now": u64,
    id "id": String,
    // `null` is kept (`Some(None)`): allowed for `occupy`, named for a lease.
    role "role": Option<String>,
    avoid "avoid": Vec<String>,
    prefer "prefer": Option<String>,
    pin "pin": Option<String>,
    rank "rank": Option<i64>,
    event_time "eventTime": Option<u64>,
    label "label": Option<String>,
    purpose "purpose": Option<String>,
    deadline "deadline": Option<u64>,
    lease "lease": u64,
    executor "executor": String,
    hold "hold": Value,
    failure "failure": Failure,
    kind "kind": ExclusionKind,
    reason "reason": String,
    until "until": Option<u64>,
    up "up": bool,
    message "message": String,
    document "document": Value,
    ok "ok": bool,
    error "error": Option<String>,
    state "state": PersistedState,
    checked "checked": Value,
    timeout_ms "timeoutMs": Option<u64>,
    // Optional on a lease and `occupy`; required (`need_some`) by `expireOwner`.
    owner "owner": Option<String>,
    log "log": u64,
    borrow "borrow": Option<String>,
    tenant "tenant": Option<String>,
    affinity "affinity": Option<String>,
}

inputs! {
    Lease "lease" request {
        now: need, id: need, role: need_some, avoid: default, prefer: opt, pin: opt,
        rank: opt, event_time: opt, label: opt, purpose: opt, deadline: opt, timeout_ms: opt,
        owner: opt, borrow: opt, tenant: opt, affinity: opt,
    }
    TryLease "tryLease" request {
        now: need, id: need, role: need_some, avoid: default, prefer: opt, pin: opt,
        rank: opt, event_time: opt, label: opt, purpose: opt, deadline: opt, timeout_ms: opt,
        owner: opt, borrow: opt, tenant: opt, affinity: opt,
    }
    Cancel "cancel" { now: need, id: need, }
    Release "release" { now: need, lease: need, }
    Occupy "occupy" { now: need, id: need, executor: need, role: opt, hold: non_null, owner: opt, }
    Report "report" { now: need, executor: need, failure: need, }
    Exclude "exclude" { now: need, executor: need, kind: manual, reason: default, until: opt, }
    Resume "resume" { now: need, executor: need, }
    ProbeResult "probeResult" { now: need, executor: need, up: need, }
    MachineCreated "machineCreated" { now: need, id: need, hold: need, checked: non_null, }
    MachineFailed "machineFailed" { now: need, id: need, message: default, reason: some, }
    MachineDeleted "machineDeleted" { now: need, lease: need, ok: need, error: opt, }
    Reload "reload" { now: need, document: need, }
    PreflightResult "preflightResult" { now: need, executor: need, ok: need, error: opt, }
    Restore "restore" { now: need, state: need, }
    Tick "tick" { now: need, }
    ExpireOwner "expireOwner" { now: need, owner: need_some, }
    DropCreation "dropCreation" { now: need, id: need, }
    Version "version" { now: need, log: need, }
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

/// A key of an input object: the tag, one of the fields, or another (kept to name it).
enum Field {
    Type,
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
                Ok(match Key::from_name(name) {
                    Some(key) => Field::Known(key),
                    None if name == "type" => Field::Type,
                    None => Field::Other(name.to_string()),
                })
            }
        }
        deserializer.deserialize_identifier(FieldVisitor)
    }
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
        let mut seen_type = false;
        // Without a known tag: the first key no input has, named once the tag is known.
        let mut other: Option<String> = None;
        while let Some(field) = map.next_key::<Field>()? {
            let key = match field {
                Field::Type => {
                    if seen_type {
                        return Err(A::Error::duplicate_field("type"));
                    }
                    seen_type = true;
                    let tag: Kind = map.next_value()?;
                    kind.get_or_insert(tag);
                    continue;
                }
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
            if seen & key.bit() != 0 {
                return Err(A::Error::duplicate_field(key.name()));
            }
            seen |= key.bit();
            if let Some(kind) = kind {
                if !kind.has(key) {
                    return Err(A::Error::unknown_field(key.name(), kind.fields()));
                }
            }
            raw.read(key, &mut map)?;
            if key == Key::role
                && matches!(raw.role, Some(None))
                && matches!(kind, Some(Kind::Lease | Kind::TryLease))
            {
                return Err(null_role());
            }
        }
        let Some(kind) = kind else {
            return Err(A::Error::missing_field("type"));
        };
        // What could not be checked before the tag was known.
        if let Some(name) = other {
            return Err(A::Error::unknown_field(&name, kind.fields()));
        }
        if let Some(key) = Key::ALL
            .iter()
            .find(|key| seen & key.bit() != 0 && !kind.has(**key))
        {
            return Err(A::Error::unknown_field(key.name(), kind.fields()));
        }
        let input = build(kind, raw)?;
        // The bounds of `crate::limits` (the same check the binary step makes).
        match input.limit_violation() {
            Some(message) => Err(A::Error::custom(message)),
            None => Ok(input),
        }
    }
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
    "startFailed",
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
                clone: r.opt("clone", read::u32)?,
                role: r.req("role", string)?,
                hold: r.opt("hold", read::value)?,
                passed: r.req("passed", read::u32)?,
                occupied: r.or("occupied", read::bool, false)?,
                borrowed: r.or("borrowed", read::bool, false)?,
                because: r.opt("because", super::Because::from_json)?,
                owner: r.opt("owner", string)?,
            },
            "exhausted" => Output::Exhausted {
                request: r.req("request", string)?,
                role: r.req("role", string)?,
                reasons: r.req("reasons", read::strings)?,
                owner: r.opt("owner", string)?,
            },
            "timedOut" => Output::TimedOut {
                request: r.req("request", string)?,
                reasons: r.or("reasons", read::strings, Vec::new())?,
                owner: r.opt("owner", string)?,
            },
            "unavailable" => Output::Unavailable {
                request: r.req("request", string)?,
                owner: r.opt("owner", string)?,
            },
            "cancelled" => Output::Cancelled {
                request: r.req("request", string)?,
                owner: r.opt("owner", string)?,
            },
            "waiting" => Output::Waiting {
                request: r.req("request", string)?,
                role: r.req("role", string)?,
                report: r.req("report", string)?,
                ahead: r.req("ahead", read::u32)?,
                spent: r.opt("spent", read::strings)?.unwrap_or_default(),
                owner: r.opt("owner", string)?,
            },
            "probe" => Output::Probe {
                executor: r.req("executor", string)?,
                url: r.req("url", string)?,
            },
            "createMachine" => Output::CreateMachine {
                request: r.req("request", string)?,
                executor: r.req("executor", string)?,
                owner: r.opt("owner", string)?,
            },
            "deleteMachine" => Output::DeleteMachine {
                executor: r.req("executor", string)?,
                hold: r.req("hold", read::value)?,
                lease: r.opt("lease", read::u64)?,
                owner: r.opt("owner", string)?,
            },
            "preflight" => Output::Preflight {
                executor: r.req("executor", string)?,
            },
            "startFailed" => Output::StartFailed {
                executor: r.req("executor", string)?,
                error: r.req("error", string)?,
            },
            "persist" => Output::Persist {
                ids: r.req("ids", read::strings)?,
                state: r.req("state", PersistedState::from_json)?,
            },
            "event" => Output::Event {
                level: r.req("level", Level::from_json)?,
                name: r.req("name", string)?.into(),
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

// ---- Output writer ------------------------------------------------------------

/// An output's canonical text: what serde_json writes over the derived `Serialize` of
/// [`Output`] (type first, then the fields in declaration order), byte for byte: the
/// outputs of every lease, release and report (the hot path of every host's answer) in
/// a few literal pieces each, the rare ones by serde_json itself.
pub(crate) fn write_output(out: &mut Vec<u8>, output: &Output) {
    match output {
        Output::Granted {
            request,
            lease,
            executor,
            clone,
            role,
            hold,
            passed,
            occupied,
            borrowed,
            because,
            owner,
        } => {
            out.extend_from_slice(b"{\"type\":\"granted\",\"request\":");
            write_str(out, request);
            out.extend_from_slice(b",\"lease\":");
            write_u64(out, *lease);
            out.extend_from_slice(b",\"executor\":");
            write_str(out, executor);
            if let Some(clone) = clone {
                out.extend_from_slice(b",\"clone\":");
                write_u64(out, u64::from(*clone));
            }
            out.extend_from_slice(b",\"role\":");
            write_str(out, role);
            if let Some(hold) = hold {
                out.extend_from_slice(b",\"hold\":");
                write_value(out, hold);
            }
            out.extend_from_slice(b",\"passed\":");
            write_u64(out, u64::from(*passed));
            if *occupied {
                out.extend_from_slice(b",\"occupied\":true");
            }
            if *borrowed {
                out.extend_from_slice(b",\"borrowed\":true");
            }
            if let Some(because) = because {
                out.extend_from_slice(b",\"because\":");
                write_str(out, because.as_str());
            }
            write_owner(out, owner);
        }
        Output::Waiting {
            request,
            role,
            report,
            ahead,
            spent,
            owner,
        } => {
            out.extend_from_slice(b"{\"type\":\"waiting\",\"request\":");
            write_str(out, request);
            out.extend_from_slice(b",\"role\":");
            write_str(out, role);
            out.extend_from_slice(b",\"report\":");
            write_str(out, report);
            out.extend_from_slice(b",\"ahead\":");
            write_u64(out, u64::from(*ahead));
            if !spent.is_empty() {
                out.extend_from_slice(b",\"spent\":[");
                for (i, id) in spent.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_str(out, id);
                }
                out.push(b']');
            }
            write_owner(out, owner);
        }
        Output::Persist { ids, state } => {
            write_persist(out, ids, state);
            return;
        }
        Output::Event {
            level,
            name,
            message,
            fields,
        } => {
            out.extend_from_slice(match level {
                Level::Debug => b"{\"type\":\"event\",\"level\":\"debug\",\"name\":",
                Level::Info => b"{\"type\":\"event\",\"level\":\"info\",\"name\":",
                Level::Warn => b"{\"type\":\"event\",\"level\":\"warn\",\"name\":",
            });
            write_str(out, name);
            out.extend_from_slice(b",\"message\":");
            write_str(out, message);
            out.extend_from_slice(b",\"fields\":{");
            for (i, (key, value)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                write_value(out, value);
            }
            out.push(b'}');
        }
        // The rare outputs: serde_json over the derive.
        _ => return write_serialized(out, output),
    }
    out.push(b'}');
}

/// `,"owner":…` when there is one (outputs without an owner read as before).
fn write_owner(out: &mut Vec<u8>, owner: &Option<String>) {
    if let Some(owner) = owner {
        out.extend_from_slice(b",\"owner\":");
        write_str(out, owner);
    }
}

/// The `persist` output.
fn write_persist(out: &mut Vec<u8>, ids: &[String], state: &PersistedState) {
    out.extend_from_slice(b"{\"type\":\"persist\",\"ids\":");
    write_serialized(out, ids);
    out.extend_from_slice(b",\"state\":");
    write_serialized(out, state);
    out.push(b'}');
}
