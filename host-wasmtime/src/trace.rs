//! Input traces: what `rota simulate --trace` writes and `rota replay` checks.
//!
//! A trace is one JSON object:
//!
//! ```json
//! {
//!   "format": "rota-trace",
//!   "version": 1,
//!   "document": { "executors": [ ... ] },
//!   "options": { ... },
//!   "steps": [
//!     { "input": { "type": "lease", "now": 1767225600000, ... },
//!       "outputs": [ { "type": "granted", ... }, { "type": "event", ... } ],
//!       "wakeAt": 1767225615000 },
//!     { "input": { ... }, "error": { "code": "UNKNOWN_LEASE", "message": "..." } }
//!   ]
//! }
//! ```
//!
//! `document` and `options` build the policy (`Policy::new`); each step is one input
//! and exactly what the core answered: its outputs in order and its wake-up time, or
//! the error that rejected it. Replaying feeds the inputs in order to a fresh policy
//! (through wasmtime, or the native core) and compares every answer; the outputs must
//! be the same JSON on every host.

use std::io::{BufWriter, Write};
use std::path::Path;

use serde_json::{json, Value};

use crate::error::{HostError, Result};
use crate::runtime::PolicyRuntime;

/// The `format` of a trace file.
pub const TRACE_FORMAT: &str = "rota-trace";
/// The `version` of the trace format this host writes and reads.
pub const TRACE_VERSION: u64 = 1;

/// One recorded step: `{input, outputs, wakeAt}` or `{input, error}`.
pub fn step_record(input: &Value, result: &Value) -> Value {
    match result.get("error") {
        Some(error) => json!({ "input": input, "error": error }),
        None => json!({
            "input": input,
            "outputs": result.get("outputs").cloned().unwrap_or(Value::Array(Vec::new())),
            "wakeAt": result.get("wakeAt").cloned().unwrap_or(Value::Null),
        }),
    }
}

/// The answer part of a step record, shaped as the core's step result.
fn expected_result(step: &Value) -> Value {
    match step.get("error") {
        Some(error) => json!({ "error": error }),
        None => json!({
            "outputs": step.get("outputs").cloned().unwrap_or(Value::Array(Vec::new())),
            "wakeAt": step.get("wakeAt").cloned().unwrap_or(Value::Null),
        }),
    }
}

/// Streams a trace to a file, step by step (memory stays flat on long runs).
pub struct TraceWriter {
    out: BufWriter<std::fs::File>,
    path: std::path::PathBuf,
    steps: u64,
}

impl TraceWriter {
    /// Starts a trace file at `path` for a policy built from `document` and `options`,
    /// written with its `env` literals
    /// redacted (`rota_core::secrets::redact`): a trace is a file to share, and env
    /// values decide nothing, so it replays the same.
    pub fn create(path: &Path, document: &Value, options: &Value) -> Result<TraceWriter> {
        let document = &rota_core::secrets::redact(document);
        let write_error = |source| HostError::Write {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::create(path).map_err(write_error)?;
        let mut out = BufWriter::new(file);
        let head = format!(
            "{{\"format\":\"{TRACE_FORMAT}\",\"version\":{TRACE_VERSION},\"document\":{document},\"options\":{options},\"steps\":["
        );
        out.write_all(head.as_bytes()).map_err(write_error)?;
        Ok(TraceWriter {
            out,
            path: path.to_path_buf(),
            steps: 0,
        })
    }

    /// Records a step from values (a reload's document redacted).
    pub fn step(&mut self, input: &Value, result: &Value) -> Result<()> {
        let redacted;
        let input = if input["type"] == "reload" {
            let mut copy = input.clone();
            copy["document"] = rota_core::secrets::redact(&input["document"]);
            redacted = copy;
            &redacted
        } else {
            input
        };
        let record = step_record(input, result).to_string();
        self.write_record(&record)
    }

    /// Records a step from the texts as they crossed the boundary, keeping the
    /// core's bytes (`{"input":INPUT,"outputs":...,"wakeAt":...}`).
    pub fn step_text(&mut self, input: &str, result: &str) -> Result<()> {
        // A reload carries a document: through `step`, which redacts it.
        let reload = input.contains("\"reload\"");
        match result.strip_prefix('{') {
            Some(rest) if rest.starts_with('"') && !reload => {
                let record = format!("{{\"input\":{input},{rest}");
                self.write_record(&record)
            }
            _ => {
                let input: Value = serde_json::from_str(input)
                    .map_err(|e| HostError::Abi(format!("a traced input is not JSON: {e}")))?;
                let result: Value = serde_json::from_str(result)
                    .map_err(|e| HostError::Abi(format!("a traced result is not JSON: {e}")))?;
                self.step(&input, &result)
            }
        }
    }

    fn write_record(&mut self, record: &str) -> Result<()> {
        let separator = if self.steps == 0 { "\n" } else { ",\n" };
        self.steps += 1;
        self.out
            .write_all(separator.as_bytes())
            .and_then(|()| self.out.write_all(record.as_bytes()))
            .map_err(|source| HostError::Write {
                path: self.path.clone(),
                source,
            })
    }

    /// Ends the file; the number of steps written.
    pub fn finish(mut self) -> Result<u64> {
        self.out
            .write_all(b"\n]}\n")
            .and_then(|()| self.out.flush())
            .map_err(|source| HostError::Write {
                path: self.path.clone(),
                source,
            })?;
        Ok(self.steps)
    }
}

/// A parsed trace.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The roster document the policy was built from.
    pub document: Value,
    /// The policy's options.
    pub options: Value,
    /// Every step: `{input, outputs, wakeAt}` or `{input, error}`.
    pub steps: Vec<Value>,
}

impl Trace {
    /// Reads a trace file.
    pub fn read(path: &Path) -> Result<Trace> {
        let value = crate::source::read_json(path)?;
        Trace::from_value(value).map_err(|message| HostError::Invalid {
            violations: vec![rota_core::Violation {
                path: format!("{}: $", path.display()),
                message,
            }],
        })
    }

    /// A trace from its JSON (`Err`: why it is not one).
    pub fn from_value(mut value: Value) -> std::result::Result<Trace, String> {
        match value.get("format") {
            Some(format) if format.as_str() == Some(TRACE_FORMAT) => {}
            Some(other) => {
                return Err(format!("`format` is {other}, not \"{TRACE_FORMAT}\""));
            }
            None if value.is_object() => {
                return Err(format!(
                    "`format` is missing (\"{TRACE_FORMAT}\" in a trace)"
                ));
            }
            None => return Err("the top level is not an object".into()),
        }
        if value.get("version").and_then(Value::as_u64) != Some(TRACE_VERSION) {
            return Err(format!(
                "`version` is {}; this host reads version {TRACE_VERSION}",
                value.get("version").unwrap_or(&Value::Null)
            ));
        }
        let document = value
            .get_mut("document")
            .map(Value::take)
            .ok_or("the trace has no `document`")?;
        let options = value
            .get_mut("options")
            .map(Value::take)
            .unwrap_or(Value::Null);
        let steps = match value.get_mut("steps").map(Value::take) {
            Some(Value::Array(steps)) => steps,
            _ => return Err("the trace has no `steps` array".into()),
        };
        for (index, step) in steps.iter().enumerate() {
            if step.get("input").is_none() {
                return Err(format!("steps[{index}] has no `input`"));
            }
        }
        Ok(Trace {
            document,
            options,
            steps,
        })
    }
}

/// The first step whose answer differs.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// Its index in the trace.
    pub step: usize,
    /// The input fed.
    pub input: Value,
    /// The answer the trace holds.
    pub expected: Value,
    /// The answer the engine gave.
    pub actual: Value,
    /// Where inside the answer: `outputs[3]`, `wakeAt`, `outputs (length)`, `error`.
    pub at: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "step {} differs at {}", self.step, self.at)?;
        writeln!(f, "  input:    {}", self.input)?;
        let (expected, actual) = focus(&self.expected, &self.actual, &self.at);
        writeln!(f, "  expected: {expected}")?;
        write!(f, "  actual:   {actual}")
    }
}

/// The parts of two answers that `at` names.
fn focus(expected: &Value, actual: &Value, at: &str) -> (String, String) {
    let pick = |v: &Value| -> String {
        if let Some(index) = at
            .strip_prefix("outputs[")
            .and_then(|rest| rest.strip_suffix(']'))
            .and_then(|i| i.parse::<usize>().ok())
        {
            return v["outputs"]
                .get(index)
                .map_or("(none)".into(), Value::to_string);
        }
        if at == "wakeAt" {
            return v["wakeAt"].to_string();
        }
        v.to_string()
    };
    (pick(expected), pick(actual))
}

/// Where two step answers first differ.
fn first_difference(expected: &Value, actual: &Value) -> Option<String> {
    if expected == actual {
        return None;
    }
    match (expected.get("outputs"), actual.get("outputs")) {
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for (index, (x, y)) in a.iter().zip(b).enumerate() {
                if x != y {
                    return Some(format!("outputs[{index}]"));
                }
            }
            if a.len() != b.len() {
                return Some(format!("outputs[{}]", a.len().min(b.len())));
            }
            Some("wakeAt".into())
        }
        _ => Some("error".into()),
    }
}

/// What a replay engine must do: answer one input as the core's step result.
pub trait StepEngine {
    /// Answers one input as the core's step result (`{outputs, wakeAt}` or `{error}`).
    fn step(&mut self, input: &Value) -> Result<Value>;
}

impl StepEngine for PolicyRuntime {
    fn step(&mut self, input: &Value) -> Result<Value> {
        self.step_value(input.to_string().as_bytes())
    }
}

/// The native core, for cross-checking a trace without wasm.
pub struct NativeEngine(pub rota_core::Policy);

impl NativeEngine {
    /// The native core built from a trace's document and options.
    pub fn new(document: &Value, options: &Value) -> Result<NativeEngine> {
        let options = rota_core::json::parse_options(options)
            .map_err(|e| HostError::from_policy_json(&e.to_json()))?;
        rota_core::Policy::new(document, options)
            .map(NativeEngine)
            .map_err(|e| HostError::from_policy_json(&e.to_json()))
    }
}

impl StepEngine for NativeEngine {
    fn step(&mut self, input: &Value) -> Result<Value> {
        Ok(rota_core::json::step(&mut self.0, input))
    }
}

/// Feeds every step; the first mismatch, if any. `progress` sees (done, total).
pub fn replay(
    engine: &mut dyn StepEngine,
    trace: &Trace,
    mut progress: impl FnMut(usize, usize),
) -> Result<Option<Mismatch>> {
    let total = trace.steps.len();
    for (index, step) in trace.steps.iter().enumerate() {
        let input = &step["input"];
        let actual = engine.step(input)?;
        let expected = expected_result(step);
        if let Some(at) = first_difference(&expected, &actual) {
            return Ok(Some(Mismatch {
                step: index,
                input: input.clone(),
                expected,
                actual,
                at,
            }));
        }
        progress(index + 1, total);
    }
    Ok(None)
}
