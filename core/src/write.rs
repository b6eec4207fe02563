//! The core's JSON text: [`to_json_text`] (serde_json over a type's derived
//! `Serialize`), and the few primitives of the hand-written writer of the outputs
//! (`protocol/wire.rs`: strings, numbers, JSON values), the hot path of every host's
//! answer, whose text is byte for byte what serde_json writes over the derived
//! `Serialize` of `Output` (`core/tests/answer_text.rs` compares the two).

use serde::Serialize;
use serde_json::Value;

/// The value's compact JSON text, as serde_json writes it.
pub fn to_json_text<T: Serialize + ?Sized>(value: &T) -> String {
    // The core's values have string map keys and finite numbers: writing cannot fail.
    serde_json::to_string(value).unwrap_or_default()
}

/// A JSON value's compact text (what its `Display` writes).
pub fn to_text(value: &Value) -> String {
    to_json_text(value)
}

/// The value as a `serde_json::Value` (through its text).
pub fn to_json_value<T: Serialize + ?Sized>(value: &T) -> Value {
    serde_json::from_str(&to_json_text(value)).unwrap_or(Value::Null)
}

/// Appends the value's compact JSON text (`null` if it cannot be written).
pub(crate) fn write_serialized<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(b"null");
    }
}

// ---- Scalars ----------------------------------------------------------------------

/// A JSON string as serde_json writes it: plain bytes as they are; a string with a
/// quote, a backslash or a control character goes through serde_json's escaping.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else if serde_json::to_writer(&mut *out, s).is_err() {
        out.extend_from_slice(b"null");
    }
}

pub(crate) fn write_u64(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let at = decimal(&mut digits, n);
    out.extend_from_slice(&digits[at..]);
}

/// `n` in decimal onto a message, without the formatting machinery (hot paths).
pub(crate) fn push_u64(out: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    let at = decimal(&mut digits, n);
    // ASCII digits: always UTF-8.
    out.push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
}

/// Writes `n`'s digits at the end of `digits`; returns where they start.
fn decimal(digits: &mut [u8; 20], mut n: u64) -> usize {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return at;
        }
    }
}

/// A JSON value as serde_json writes it (objects in the map's key order).
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::String(s) => write_str(out, s),
        Value::Number(n) if n.is_u64() => write_u64(out, n.as_u64().unwrap_or_default()),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Null => out.extend_from_slice(b"null"),
        other => {
            if serde_json::to_writer(&mut *out, other).is_err() {
                out.extend_from_slice(b"null");
            }
        }
    }
}
