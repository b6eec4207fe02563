//! The vector format (README.md has the full description).
//!
//! ```json
//! {
//!   "name": "prefer-taken-first-while-free",
//!   "checks": "DESIGN.md 'Among the free executors for a request: prefer first' ...",
//!   "document": { "executors": [ ... ] },
//!   "options": { "canProbe": false },
//!   "steps": [
//!     { "input": { "type": "lease", "now": 1800000000000, ... },
//!       "expect": { "outputs": [ ... ], "wakeAt": null },
//!       "snapshot": { "executors": { "a": { "busy": 1 } } } },
//!     { "inputText": "not json", "expect": { "error": { "code": "INVALID_INPUT", ... } } },
//!     { "query": { "query": "available", "role": "coder" }, "expect": { "ok": 1 } }
//!   ]
//! }
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One conformance vector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Vector {
    /// Unique; the file is `vectors/<name>.json`.
    pub name: String,
    /// What it shows, citing DESIGN.md or a seed.
    pub checks: String,
    /// The roster document the policy is created with.
    pub document: Value,
    /// Options (absent: the defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Value>,
    /// When creation itself must fail: the expected `{"error": {...}}`. A vector with
    /// `create` has no steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create: Option<Value>,
    #[serde(default)]
    pub steps: Vec<Step>,
    #[serde(skip)]
    pub file: PathBuf,
}

/// One step: an input (as JSON, or as raw text for inputs that are not JSON) or a
/// query, and what must come back.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Step {
    /// A remark for the reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// An input, sent as its JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// An input sent exactly as this text (for text that is not JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_text: Option<String>,
    /// A query in the plain ABI's shape: `{"query": "snapshot" | "explain" | "plan" |
    /// "available" | "slots" | "canEverServe" | "effortOf" | "document" | "now", ...}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<Value>,
    /// The exact answer: `{"outputs": [...], "wakeAt": n|null}` or `{"error": {...}}`
    /// for an input; `{"ok": value}` or `{"error": {...}}` for a query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Value>,
    /// After the step, the snapshot must contain this (executors keyed by id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<Value>,
}

/// What a step sends.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Input(String),
    Query(String),
}

impl Step {
    pub fn action(&self) -> Result<Action, String> {
        match (&self.input, &self.input_text, &self.query) {
            (Some(input), None, None) => Ok(Action::Input(input.to_string())),
            (None, Some(text), None) => Ok(Action::Input(text.clone())),
            (None, None, Some(query)) => Ok(Action::Query(query.to_string())),
            _ => Err("a step has exactly one of `input`, `inputText`, `query`".into()),
        }
    }

    /// The text shown in reports.
    pub fn describe(&self) -> String {
        match (&self.input, &self.input_text, &self.query) {
            (Some(input), _, _) => format!("input {}", crate::jsonfmt::inline(input)),
            (_, Some(text), _) => format!("input text {text:?}"),
            (_, _, Some(query)) => format!("query {}", crate::jsonfmt::inline(query)),
            _ => "an empty step".into(),
        }
    }
}

impl Vector {
    /// The options text every host is given (`null`: the defaults).
    pub fn options_text(&self) -> String {
        self.options.as_ref().unwrap_or(&Value::Null).to_string()
    }

    pub fn document_text(&self) -> String {
        self.document.to_string()
    }

    /// Checks the shape (one action per step, an expectation everywhere).
    pub fn check_shape(&self) -> Result<(), String> {
        let stem = self.file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if !stem.is_empty() && stem != self.name {
            return Err(format!("the file of vector '{}' is {stem}.json", self.name));
        }
        if self.checks.trim().is_empty() {
            return Err(format!("vector '{}' says nothing in `checks`", self.name));
        }
        if self.create.is_some() && !self.steps.is_empty() {
            return Err(format!("vector '{}' has `create` and steps", self.name));
        }
        if self.create.is_none() && self.steps.is_empty() {
            return Err(format!("vector '{}' has no steps", self.name));
        }
        for (i, step) in self.steps.iter().enumerate() {
            step.action()
                .map_err(|e| format!("vector '{}' step {}: {e}", self.name, i + 1))?;
            if step.expect.is_none() {
                return Err(format!(
                    "vector '{}' step {} has no `expect` (record it: cargo run -p rota-conformance -- record)",
                    self.name,
                    i + 1
                ));
            }
        }
        Ok(())
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Reads one vector file.
pub fn load_vector(path: &Path) -> Result<Vector, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut vector: Vector =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    vector.file = path.to_path_buf();
    Ok(vector)
}

/// Every `*.json` in `dir`, sorted by file name.
pub fn vector_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Ok(files)
}

/// Every vector in `dir`, shape-checked, with unique names.
pub fn load_vectors(dir: &Path) -> Result<Vec<Vector>, String> {
    let mut vectors = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for file in vector_files(dir)? {
        let vector = load_vector(&file)?;
        vector.check_shape()?;
        if !names.insert(vector.name.clone()) {
            return Err(format!("two vectors are named '{}'", vector.name));
        }
        vectors.push(vector);
    }
    Ok(vectors)
}

/// A vector as a `rota replay` trace (host-wasmtime/src/trace.rs: `{"format":
/// "rota-trace", "version": 1, "document", "options", "steps": [{input, outputs,
/// wakeAt} | {input, error}]}`), with the vector's expected answers as the recorded
/// ones. Queries are not inputs and are left out, and so is an `inputText` that is not
/// JSON (a trace step's input is a JSON value). `None` for a vector whose creation
/// fails. Also returns how many steps were left out.
pub fn replay_trace(vector: &Vector) -> Option<(Value, usize)> {
    if vector.create.is_some() {
        return None;
    }
    let mut steps = Vec::new();
    let mut skipped = 0;
    for step in &vector.steps {
        let input = match (&step.input, &step.input_text) {
            (Some(input), _) => input.clone(),
            (None, Some(text)) => match serde_json::from_str::<Value>(text) {
                Ok(input) => input,
                Err(_) => {
                    skipped += 1;
                    continue;
                }
            },
            _ => {
                skipped += 1;
                continue;
            }
        };
        let expect = step.expect.clone().unwrap_or(Value::Null);
        steps.push(match expect.get("error") {
            Some(error) => serde_json::json!({ "input": input, "error": error }),
            None => serde_json::json!({
                "input": input,
                "outputs": expect.get("outputs").cloned().unwrap_or(Value::Array(Vec::new())),
                "wakeAt": expect.get("wakeAt").cloned().unwrap_or(Value::Null),
            }),
        });
    }
    let trace = serde_json::json!({
        "format": "rota-trace",
        "version": 1,
        "document": vector.document,
        "options": vector.options.clone().unwrap_or(Value::Null),
        "steps": steps,
    });
    Some((trace, skipped))
}
