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
use serde::Serialize;
use serde_json::{json, Value};

use crate::error::Error;
use crate::policy::Policy;
use crate::protocol::wire::{input_for_kind, Kind, INPUT_TYPES};
use crate::protocol::{Input, Options};

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
    let text = value.to_string();
    let mut reader = serde_json::Deserializer::from_str(&text);
    input_for_kind(tag, &mut reader).map_err(|e| Error::input(format!("{kind}: {}", message(&e))))
}

/// A `T` from a JSON value, through its text: the same result and message as
/// `serde_json::from_value`, without a second set of deserializers (one per source)
/// for every type in the WebAssembly modules.
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, String> {
    serde_json::from_str(&value.to_string()).map_err(|e| message(&e))
}

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

/// Parses options from JSON (`null` or absent fields take the defaults).
pub fn parse_options(value: &Value) -> Result<Options, Error> {
    if value.is_null() {
        return Ok(Options::default());
    }
    from_value(value).map_err(|e| Error::input(format!("options: {e}")))
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
    // The typed parse is the fast path; on failure the generic one names the problem.
    let parsed = serde_json::from_str::<Input>(input).or_else(|_| {
        match serde_json::from_str::<Value>(input) {
            Ok(value) => parse_input(&value),
            Err(e) => Err(Error::input(format!("the input is not JSON: {e}"))),
        }
    });
    match parsed.and_then(|input| policy.handle(input)) {
        Ok(()) => drained_str(policy),
        Err(error) => json!({ "error": error.to_json() }).to_string(),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Drained {
    outputs: Vec<crate::protocol::Output>,
    wake_at: Option<u64>,
}

/// `{"outputs":[...],"wakeAt":...}` with every pending output, as canonical text.
pub fn drained_str(policy: &mut Policy) -> String {
    let drained = Drained {
        outputs: std::iter::from_fn(|| policy.poll_output()).collect(),
        wake_at: policy.poll_timeout(),
    };
    serde_json::to_string(&drained).unwrap_or_else(|e| {
        json!({ "error": Error::input(format!("an output could not be written: {e}")).to_json() })
            .to_string()
    })
}

/// `{"outputs":[...],"wakeAt":...}` with every pending output.
pub fn drained(policy: &mut Policy) -> Value {
    let outputs: Vec<Value> = std::iter::from_fn(|| policy.poll_output())
        .map(|output| serde_json::to_value(output).unwrap_or(Value::Null))
        .collect();
    json!({ "outputs": outputs, "wakeAt": policy.poll_timeout() })
}
