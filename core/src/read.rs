//! Small, non-generic readers for the JSON shapes that are read rarely (options,
//! explain requests, state files, failures, exported states, outputs).
//!
//! serde's derived `Deserialize`, instantiated for serde_json's text reader, costs a
//! few kilobytes of WebAssembly per type; these readers take a `serde_json::Value`
//! (parsed once by the one `Value` reader every host already has) and share a handful
//! of helpers, so a type costs little more than its field list. The messages are
//! serde's own wording (`missing field`, `unknown field`, `invalid type`, `unknown
//! variant`), written by serde_json's error type, so the texts hosts see stay what the
//! derives gave.

use serde::de::{Error as _, Unexpected};
use serde_json::{Map, Value};

/// A read value, or what is wrong with it.
pub(crate) type Read<T> = Result<T, String>;

fn unexpected(value: &Value) -> Unexpected<'_> {
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Unexpected::Unsigned(u),
            (None, Some(i)) => Unexpected::Signed(i),
            _ => Unexpected::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

/// "invalid type: integer `7`, expected a string".
pub(crate) fn invalid_type(value: &Value, expected: &str) -> String {
    serde_json::Error::invalid_type(unexpected(value), &expected).to_string()
}

/// "invalid value: integer `-5`, expected u64".
fn invalid_value(value: &Value, expected: &str) -> String {
    serde_json::Error::invalid_value(unexpected(value), &expected).to_string()
}

/// Prefixes a nested reader's message with where it was read: "requests[2]: ...".
pub(crate) fn at<T>(place: impl std::fmt::Display, read: Read<T>) -> Read<T> {
    read.map_err(|e| format!("{place}: {e}"))
}

pub(crate) fn u64(value: &Value) -> Read<u64> {
    match value {
        Value::Number(n) => match n.as_u64() {
            Some(u) => Ok(u),
            None if n.is_i64() => Err(invalid_value(value, "u64")),
            None => Err(invalid_type(value, "u64")),
        },
        _ => Err(invalid_type(value, "u64")),
    }
}

pub(crate) fn u32(value: &Value) -> Read<u32> {
    let n = u64(value).map_err(|_| match value {
        Value::Number(n) if n.is_i64() => invalid_value(value, "u32"),
        _ => invalid_type(value, "u32"),
    })?;
    std::primitive::u32::try_from(n).map_err(|_| invalid_value(value, "u32"))
}

pub(crate) fn i64(value: &Value) -> Read<i64> {
    match value {
        Value::Number(n) => match n.as_i64() {
            Some(i) => Ok(i),
            None if n.is_u64() => Err(invalid_value(value, "i64")),
            None => Err(invalid_type(value, "i64")),
        },
        _ => Err(invalid_type(value, "i64")),
    }
}

pub(crate) fn bool(value: &Value) -> Read<bool> {
    value
        .as_bool()
        .ok_or_else(|| invalid_type(value, "a boolean"))
}

pub(crate) fn string(value: &Value) -> Read<String> {
    value
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| invalid_type(value, "a string"))
}

pub(crate) fn value(value: &Value) -> Read<Value> {
    Ok(value.clone())
}

/// The items of a JSON array.
pub(crate) fn array(value: &Value) -> Read<&Vec<Value>> {
    value
        .as_array()
        .ok_or_else(|| invalid_type(value, "a sequence"))
}

/// A list, each item read by `item`.
pub(crate) fn list<T>(value: &Value, item: fn(&Value) -> Read<T>) -> Read<Vec<T>> {
    array(value)?.iter().map(item).collect()
}

/// A list in field `name` of `obj`, an item's error naming its place: "requests[2]: ...".
pub(crate) fn list_in<T>(
    obj: Obj<'_>,
    name: &'static str,
    item: fn(&Value) -> Read<T>,
) -> Read<Vec<T>> {
    let items = at(name, obj.need(name).and_then(array))?;
    items
        .iter()
        .enumerate()
        .map(|(i, v)| at(format_args!("{name}[{i}]"), item(v)))
        .collect()
}

/// The entries of an object in field `name` of `obj`, a value's error naming its key:
/// "runtime.a: ...".
pub(crate) fn map_in<T>(
    obj: Obj<'_>,
    name: &'static str,
    item: fn(&Value) -> Read<T>,
) -> Read<Vec<(String, T)>> {
    let entries = at(name, obj.need(name).and_then(|v| object(v, "a map")))?;
    entries
        .0
        .iter()
        .map(|(k, v)| Ok((k.clone(), at(format_args!("{name}.{k}"), item(v))?)))
        .collect()
}

pub(crate) fn strings(value: &Value) -> Read<Vec<String>> {
    list(value, string)
}

/// A unit variant by name: its index in `names`.
pub(crate) fn variant(value: &Value, names: &'static [&'static str]) -> Read<usize> {
    match value {
        Value::String(s) => names
            .iter()
            .position(|n| n == s)
            .ok_or_else(|| serde_json::Error::unknown_variant(s, names).to_string()),
        _ => Err(invalid_type(value, "string or map")),
    }
}

/// `from_json` and `name` for a unit enum, from its variants' JSON names.
macro_rules! unit_names {
    ($t:ident { $($variant:ident = $name:literal),* $(,)? }) => {
        impl $t {
            /// Every variant's JSON name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($name),*];
            /// Every variant, in declaration order.
            pub const ALL: &'static [$t] = &[$($t::$variant),*];

            pub fn from_json(value: &serde_json::Value) -> $crate::read::Read<$t> {
                $crate::read::variant(value, Self::NAMES).map(|i| Self::ALL[i])
            }

            /// Its JSON name.
            pub fn name(self) -> &'static str {
                match self {
                    $($t::$variant => $name,)*
                }
            }
        }
    };
}
pub(crate) use unit_names;

/// "unknown field `x`, expected one of `a`, `b`".
pub(crate) fn unknown_field(name: &str, fields: &'static [&'static str]) -> String {
    serde_json::Error::unknown_field(name, fields).to_string()
}

/// A JSON object read field by field.
#[derive(Clone, Copy)]
pub(crate) struct Obj<'a>(pub(crate) &'a Map<String, Value>);

/// `value` as an object (`what` names the expected shape: "struct Options").
pub(crate) fn object<'a>(value: &'a Value, what: &str) -> Read<Obj<'a>> {
    value
        .as_object()
        .map(Obj)
        .ok_or_else(|| invalid_type(value, what))
}

impl<'a> Obj<'a> {
    /// A field that must be there.
    pub(crate) fn need(&self, name: &'static str) -> Read<&'a Value> {
        self.0
            .get(name)
            .ok_or_else(|| serde_json::Error::missing_field(name).to_string())
    }

    /// A field that must be there (`null` is read as a value).
    pub(crate) fn req<T>(&self, name: &'static str, read: fn(&Value) -> Read<T>) -> Read<T> {
        self.need(name).and_then(read)
    }

    /// An optional field: absent or `null` is `None`.
    pub(crate) fn opt<T>(&self, name: &str, read: fn(&Value) -> Read<T>) -> Read<Option<T>> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => read(v).map(Some),
        }
    }

    /// A field with a default when absent (`null` is read as a value).
    pub(crate) fn or<T>(&self, name: &str, read: fn(&Value) -> Read<T>, default: T) -> Read<T> {
        match self.0.get(name) {
            None => Ok(default),
            Some(v) => read(v),
        }
    }
}
