//! The state-file vectors (`vectors/state-file/*.json`): the core's state-file rule
//! (`rota_core::state_file`: parse, restore, merge, render, the set-aside name), asked
//! through each host's entry to it — `rota_core::state_file::answer` natively, the
//! plain ABI's `rota_state_file` in wasmtime, the npm package's `stateFile.json` in
//! Node and Chromium — with the exact answer expected.
//!
//! ```json
//! { "name": "state-file-merge", "checks": "...",
//!   "cases": [ { "note": "...", "request": {"op": "merge", ...}, "expect": {"ok": "..."} } ] }
//! ```
//!
//! `request` is sent as its JSON text (`requestText` instead: exactly that text);
//! `expect` is the whole answer, `{"ok": value}` or `{"error": {code, message}}`,
//! compared as JSON (a rendered file is a string: compared byte for byte).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::matching::equal;
use crate::vector::vector_files;

/// One way of asking the rule.
pub trait StateFileHost {
    fn name(&self) -> &str;
    /// The request's text in, the answer's text out.
    fn state_file(&mut self, request: &str) -> String;
}

/// `rota-core` itself.
pub struct NativeStateFile;

impl StateFileHost for NativeStateFile {
    fn name(&self) -> &str {
        "native"
    }
    fn state_file(&mut self, request: &str) -> String {
        rota_core::state_file::answer(request)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub request: Option<Value>,
    #[serde(default, rename = "requestText")]
    pub request_text: Option<String>,
    #[serde(default)]
    pub expect: Option<Value>,
}

impl Case {
    pub fn text(&self) -> Result<String, String> {
        match (&self.request, &self.request_text) {
            (Some(request), None) => Ok(request.to_string()),
            (None, Some(text)) => Ok(text.clone()),
            _ => Err("a case has exactly one of `request` and `requestText`".into()),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateFileVector {
    pub name: String,
    pub checks: String,
    pub cases: Vec<Case>,
    #[serde(skip)]
    pub file: PathBuf,
}

/// Where they live.
pub fn state_file_dir() -> PathBuf {
    crate::vectors_dir().join("state-file")
}

/// Every state-file vector, with unique names equal to their file names.
pub fn load_state_file_vectors(dir: &Path) -> Result<Vec<StateFileVector>, String> {
    let mut vectors: Vec<StateFileVector> = Vec::new();
    for file in vector_files(dir)? {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let mut vector: StateFileVector =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned());
        if stem.as_deref() != Some(vector.name.as_str()) {
            return Err(format!("{}: the name is '{}'", file.display(), vector.name));
        }
        if vector.cases.is_empty() {
            return Err(format!("{}: no cases", file.display()));
        }
        vector.file = file;
        vectors.push(vector);
    }
    Ok(vectors)
}

/// Runs every case; a report for each that differs.
pub fn run_state_file_vectors(
    host: &mut dyn StateFileHost,
    vectors: &[StateFileVector],
) -> Vec<String> {
    let mut failures = Vec::new();
    for vector in vectors {
        for (i, case) in vector.cases.iter().enumerate() {
            let place = format!(
                "state-file vector '{}' ({}) on {}, case {} of {}{}",
                vector.name,
                vector.file.display(),
                host.name(),
                i + 1,
                vector.cases.len(),
                case.note
                    .as_ref()
                    .map_or(String::new(), |n| format!(" ({n})"))
            );
            let text = match case.text() {
                Ok(text) => text,
                Err(e) => {
                    failures.push(format!("{place}: {e}"));
                    continue;
                }
            };
            let answer = host.state_file(&text);
            let actual: Value = match serde_json::from_str(&answer) {
                Ok(value) => value,
                Err(e) => {
                    failures.push(format!("{place}: the answer is not JSON ({e}): {answer}"));
                    continue;
                }
            };
            let expected = case.expect.clone().unwrap_or(Value::Null);
            if !equal(&expected, &actual) {
                failures.push(format!(
                    "{place}:\n  request: {text}\n  expected: {expected}\n  actual:   {actual}"
                ));
            }
        }
    }
    failures
}
