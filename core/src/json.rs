//! The JSON boundary every host shares, so that the same input text gives the same
//! output text on native, wasmtime, Node and the browser.
//!
//! A step answers `{"outputs":[...],"wakeAt":n|null}` on success and
//! `{"error":{"code","message","violations"?}}` on failure.
//!
//! The text of [`step_str`] is the canonical form that conformance compares byte for
//! byte (fields in declaration order, `type` first); [`step`] gives the same content
//! as a `serde_json::Value`.

use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::error::Error;
use crate::policy::Policy;
use crate::protocol::wire::{input_for_kind, write_output, Kind, INPUT_TYPES};
use crate::protocol::{Input, Options, Output};
use crate::write::write_u64;

/// Parses an input from JSON, naming what is wrong and where.
pub fn parse_input(value: &Value) -> Result<Input, Error> {
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::input("an input is a JSON object with a string `type`"))?;
    let Some(tag) = Kind::from_name(kind) else {
        let e = <serde_json::Error as serde::de::Error>::unknown_variant(kind, INPUT_TYPES);
        return Err(Error::input(format!("{kind}: {e}")));
    };
    // Read from the value's text (keys in the value's order), so that one reader, the
    // text one, serves every type: the messages are those of reading the value itself.
    let text = to_text(value);
    let mut reader = serde_json::Deserializer::from_str(&text);
    input_for_kind(tag, &mut reader).map_err(|e| Error::input(format!("{kind}: {}", message(&e))))
}

/// A `T` from a JSON value, through its text: the same result and message as
/// `serde_json::from_value`, without a second set of deserializers (one per source)
/// for every type in the WebAssembly modules.
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, String> {
    serde_json::from_str(&to_text(value)).map_err(|e| message(&e))
}

pub use crate::write::to_text;

/// A serde_json error's message without the position in a text only we wrote.
fn message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    if e.line() == 0 {
        return text;
    }
    let position = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&position) {
        Some(message) => message.to_string(),
        None => text,
    }
}

/// Each input's `type` tag and its fields, `type` aside, in declaration order.
pub fn input_fields() -> impl Iterator<Item = (&'static str, &'static [&'static str])> {
    INPUT_TYPES
        .iter()
        .filter_map(|&tag| Kind::from_name(tag).map(|kind| (tag, kind.fields())))
}

/// Reads one input given as text, as [`step_str`] does.
pub fn parse_input_text(input: &str) -> Result<Input, Error> {
    // The typed parse is the fast path; on failure the generic one names the problem.
    serde_json::from_str::<Input>(input).or_else(|_| match serde_json::from_str::<Value>(input) {
        Ok(value) => parse_input(&value),
        Err(e) => Err(Error::input(format!("the input is not JSON: {e}"))),
    })
}

/// Parses options from JSON (`null` or absent fields take the defaults).
pub fn parse_options(value: &Value) -> Result<Options, Error> {
    if value.is_null() {
        return Ok(Options::default());
    }
    let options = Options::read_json(value).map_err(|e| Error::input(format!("options: {e}")))?;
    options.check()?;
    Ok(options)
}

/// Feeds one input and drains every output: the result of one host call.
pub fn step(policy: &mut Policy, input: &Value) -> Value {
    match parse_input(input).and_then(|input| policy.handle(input)) {
        Ok(()) => drained(policy),
        Err(error) => json!({ "error": error.to_json() }),
    }
}

/// Feeds one input given as text; answers with the canonical text.
pub fn step_str(policy: &mut Policy, input: &str) -> String {
    match parse_input_text(input).and_then(|input| policy.handle(input)) {
        Ok(()) => drained_str(policy),
        Err(error) => to_text(&json!({ "error": error.to_json() })),
    }
}

/// `{"outputs":[...],"wakeAt":...}` with every pending output, as canonical text.
pub fn drained_str(policy: &mut Policy) -> String {
    let outputs: Vec<Output> = std::iter::from_fn(|| policy.poll_output()).collect();
    answer_text(&outputs, policy.poll_timeout())
}

/// The canonical answer text for these outputs and wake-up: what serde_json writes for
/// `{"outputs": outputs, "wakeAt": wake_at}` with the derived `Serialize` of
/// [`Output`] (type first, then the fields in declaration order), byte for byte. It is
/// written by hand because it is the hot path of every host: a few literal pieces per
/// output instead of one call per key, colon and comma.
pub fn answer_text(outputs: &[Output], wake_at: Option<u64>) -> String {
    let mut out = Vec::with_capacity(64 + 160 * outputs.len());
    out.extend_from_slice(b"{\"outputs\":[");
    for (i, output) in outputs.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_output(&mut out, output);
    }
    out.extend_from_slice(b"],\"wakeAt\":");
    match wake_at {
        Some(t) => write_u64(&mut out, t),
        None => out.extend_from_slice(b"null"),
    }
    out.push(b'}');
    // Only whole UTF-8 strings and ASCII went in.
    String::from_utf8(out).unwrap_or_default()
}

/// `{"outputs":[...],"wakeAt":...}` with every pending output.
pub fn drained(policy: &mut Policy) -> Value {
    let outputs: Vec<Value> = std::iter::from_fn(|| policy.poll_output())
        .map(|output| serde_json::to_value(output).unwrap_or(Value::Null))
        .collect();
    json!({ "outputs": outputs, "wakeAt": policy.poll_timeout() })
}
