//! The JSON boundary every host shares, so that the same input text gives the same
//! output text on native, wasmtime, Node and the browser.
//!
//! A step answers `{"outputs":[...],"wakeAt":n|null}` on success and
//! `{"error":{"code","message","violations"?}}` on failure.

use serde_json::{json, Value};

use crate::error::Error;
use crate::policy::Policy;
use crate::protocol::{Input, Options};

/// Parses an input from JSON, naming what is wrong and where.
pub fn parse_input(value: &Value) -> Result<Input, Error> {
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::input("an input is a JSON object with a string `type`"))?
        .to_string();
    serde_json::from_value(value.clone()).map_err(|e| Error::input(format!("{kind}: {e}")))
}

/// Parses options from JSON (`null` or absent fields take the defaults).
pub fn parse_options(value: &Value) -> Result<Options, Error> {
    if value.is_null() {
        return Ok(Options::default());
    }
    serde_json::from_value(value.clone()).map_err(|e| Error::input(format!("options: {e}")))
}

/// Feeds one input and drains every output: the result of one host call.
pub fn step(policy: &mut Policy, input: &Value) -> Value {
    match parse_input(input).and_then(|input| policy.handle(input)) {
        Ok(()) => drained(policy),
        Err(error) => json!({ "error": error.to_json() }),
    }
}

/// Feeds one input given as text.
pub fn step_str(policy: &mut Policy, input: &str) -> String {
    let value = match serde_json::from_str::<Value>(input) {
        Ok(value) => step(policy, &value),
        Err(e) => json!({ "error": Error::input(format!("the input is not JSON: {e}")).to_json() }),
    };
    value.to_string()
}

/// `{"outputs":[...],"wakeAt":...}` with every pending output.
pub fn drained(policy: &mut Policy) -> Value {
    let outputs: Vec<Value> = std::iter::from_fn(|| policy.poll_output())
        .map(|output| serde_json::to_value(output).unwrap_or(Value::Null))
        .collect();
    json!({ "outputs": outputs, "wakeAt": policy.poll_timeout() })
}
