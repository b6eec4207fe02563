//! The core's small hand-written JSON writer: the [`WriteJson`] trait, [`Obj`] (an
//! object being written), and the primitives (strings, numbers, lists, maps, JSON
//! values). A leaf: each shape's writer sits beside its type and its reader (the
//! snapshot's in `status.rs`, options and state files in `protocol.rs`, outputs in
//! `wire.rs`, violations in `document.rs`).
//!
//! Their text is, byte for byte, what serde_json writes over the types' derived
//! `Serialize` (fields in declaration order, the same `skip_serializing_if`s, numbers
//! and escapes as serde_json writes them): `core/tests/writer.rs` and the simulation
//! tests compare the two on many states. The hosts use this writer; the derives stay
//! for Rust callers (and as the tests' reference), and cost the WebAssembly modules
//! nothing unless something instantiates them.
//!
//! Why by hand: a derived `Serialize`, instantiated for serde_json's writer, is a few
//! hundred bytes of WebAssembly per type (one call per key, colon and comma, each with
//! its error path); here a field is one key write and one value write.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::Value;

/// A value the core writes as JSON text.
pub trait WriteJson {
    /// Appends the value's compact JSON text.
    fn write_json(&self, out: &mut Vec<u8>);
}

/// The value's compact JSON text.
pub fn to_json_text(value: &dyn WriteJson) -> String {
    let mut out = Vec::with_capacity(256);
    value.write_json(&mut out);
    // Only whole UTF-8 strings and ASCII went in.
    String::from_utf8(out).unwrap_or_default()
}

/// A JSON value's compact text (what its `Display` writes).
pub fn to_text(value: &Value) -> String {
    // Writing a Value cannot fail: its map keys are strings.
    serde_json::to_string(value).unwrap_or_default()
}

/// The value as a `serde_json::Value` (through its text).
pub fn to_json_value(value: &dyn WriteJson) -> Value {
    serde_json::from_str(&to_json_text(value)).unwrap_or(Value::Null)
}

/// A JSON object being written: `{"key":value,...}`.
pub(crate) struct Obj<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Obj<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Obj<'a> {
        out.push(b'{');
        Obj { out, first: true }
    }

    /// `"key":` (keys are plain ASCII names), after a comma unless it is the first.
    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    /// A field written always.
    pub(crate) fn field<T: WriteJson + ?Sized>(&mut self, key: &str, value: &T) -> &mut Self {
        value.write_json(self.key(key));
        self
    }

    /// A field left out while `None` (`skip_serializing_if = "Option::is_none"`).
    pub(crate) fn some<T: WriteJson>(&mut self, key: &str, value: &Option<T>) -> &mut Self {
        match value {
            Some(value) => self.field(key, value),
            None => self,
        }
    }

    /// A list left out while empty (`skip_serializing_if = "Vec::is_empty"`).
    pub(crate) fn nonempty<T: WriteJson>(&mut self, key: &str, value: &[T]) -> &mut Self {
        if value.is_empty() {
            return self;
        }
        self.field(key, &value)
    }

    /// A map written as an object: key/value pairs in the given order.
    pub(crate) fn pairs<'k, K, V, I>(&mut self, key: &str, pairs: I) -> &mut Self
    where
        K: MapKey + 'k,
        V: WriteJson + 'k,
        I: IntoIterator<Item = &'k (K, V)>,
    {
        write_map(self.key(key), pairs.into_iter().map(|(k, v)| (k, v)));
        self
    }

    pub(crate) fn end(&mut self) {
        self.out.push(b'}');
    }
}

/// A map key: serde_json writes string keys as strings and integer keys quoted.
pub(crate) trait MapKey {
    fn write_key(&self, out: &mut Vec<u8>);
}

impl MapKey for String {
    fn write_key(&self, out: &mut Vec<u8>) {
        write_str(out, self);
    }
}

impl MapKey for str {
    fn write_key(&self, out: &mut Vec<u8>) {
        write_str(out, self);
    }
}

impl MapKey for u64 {
    fn write_key(&self, out: &mut Vec<u8>) {
        out.push(b'"');
        write_u64(out, *self);
        out.push(b'"');
    }
}

/// Pairs as a JSON object.
pub(crate) fn write_map<'k, K: MapKey + 'k, V: WriteJson + 'k>(
    out: &mut Vec<u8>,
    pairs: impl Iterator<Item = (&'k K, &'k V)>,
) {
    out.push(b'{');
    for (i, (k, v)) in pairs.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        k.write_key(out);
        out.push(b':');
        v.write_json(out);
    }
    out.push(b'}');
}

/// Items as a JSON array.
fn write_seq<'t, T: WriteJson + 't>(out: &mut Vec<u8>, items: impl Iterator<Item = &'t T>) {
    out.push(b'[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        item.write_json(out);
    }
    out.push(b']');
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

impl WriteJson for str {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_str(out, self);
    }
}

impl WriteJson for crate::names::SharedName {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_str(out, self);
    }
}

impl WriteJson for String {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_str(out, self);
    }
}

impl WriteJson for u64 {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_u64(out, *self);
    }
}

impl WriteJson for u32 {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_u64(out, u64::from(*self));
    }
}

impl WriteJson for u8 {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_u64(out, u64::from(*self));
    }
}

impl WriteJson for i64 {
    fn write_json(&self, out: &mut Vec<u8>) {
        if *self < 0 {
            out.push(b'-');
        }
        write_u64(out, self.unsigned_abs());
    }
}

impl WriteJson for bool {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(if *self { b"true" } else { b"false" });
    }
}

impl WriteJson for f64 {
    fn write_json(&self, out: &mut Vec<u8>) {
        // serde_json's own float text (and `null` for a non-finite one).
        if serde_json::to_writer(&mut *out, self).is_err() {
            out.extend_from_slice(b"null");
        }
    }
}

impl WriteJson for Value {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_value(out, self);
    }
}

impl<T: WriteJson + ?Sized> WriteJson for &T {
    fn write_json(&self, out: &mut Vec<u8>) {
        (**self).write_json(out);
    }
}

impl<T: WriteJson> WriteJson for Option<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Some(value) => value.write_json(out),
            None => out.extend_from_slice(b"null"),
        }
    }
}

impl<T: WriteJson> WriteJson for [T] {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_seq(out, self.iter());
    }
}

impl<T: WriteJson> WriteJson for Vec<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_seq(out, self.iter());
    }
}

impl<T: WriteJson> WriteJson for VecDeque<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_seq(out, self.iter());
    }
}

impl<T: WriteJson> WriteJson for BTreeSet<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_seq(out, self.iter());
    }
}

impl<K: MapKey, V: WriteJson> WriteJson for BTreeMap<K, V> {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_map(out, self.iter());
    }
}

impl<A: WriteJson, B: WriteJson> WriteJson for (A, B) {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        self.0.write_json(out);
        out.push(b',');
        self.1.write_json(out);
        out.push(b']');
    }
}

impl<A: WriteJson, B: WriteJson, C: WriteJson, D: WriteJson> WriteJson for (A, B, C, D) {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        self.0.write_json(out);
        out.push(b',');
        self.1.write_json(out);
        out.push(b',');
        self.2.write_json(out);
        out.push(b',');
        self.3.write_json(out);
        out.push(b']');
    }
}
