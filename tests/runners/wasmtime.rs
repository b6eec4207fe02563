//! The wasmtime runner: every vector and every random trace through the plain-ABI
//! module that `make wasm` built (`host-wasmtime/policy/rota_policy.wasm`), run by
//! `rota-host`'s `PolicyRuntime` (the sandbox the `rota` binary uses: epoch deadline,
//! memory cap, checkpoint and journal). Inputs go in as text (`step_text`) and the
//! guest's answer text comes back unparsed, so the comparison is byte for byte.

use std::path::PathBuf;
use std::sync::OnceLock;

use rota_conformance::host::{run_all, Host};
use rota_conformance::traces::{self, describe_mismatch, replay};
use rota_conformance::{load_vectors, out_dir, repo_root, vectors_dir};
use rota_host::{CacheDir, EngineConfig, HostEngine, HostError, PolicyModule, PolicyRuntime};
use serde_json::{json, Value};

struct WasmtimeHost {
    module: PolicyModule,
    runtime: Option<PolicyRuntime>,
}

fn policy_path() -> PathBuf {
    repo_root().join("host-wasmtime/policy/rota_policy.wasm")
}

/// One compiled module for every test in this binary (compiling it is the slow part).
fn load_module() -> PolicyModule {
    static MODULE: OnceLock<PolicyModule> = OnceLock::new();
    MODULE.get_or_init(compile_module).clone()
}

fn compile_module() -> PolicyModule {
    let path = policy_path();
    assert!(
        path.is_file(),
        "{} is missing: build it with `make wasm` (or run `make test`)",
        path.display()
    );
    let engine = HostEngine::new(EngineConfig {
        // Debug-built hosts are slow; the deadline guards against hangs, not speed.
        deadline: std::time::Duration::from_secs(30),
        cache: CacheDir::Dir(out_dir().join("wasmtime-cache")),
        ..EngineConfig::default()
    })
    .expect("a wasmtime engine");
    engine.load_file(&path).expect("the policy module loads")
}

/// A host error as the ABI's answer text (`{"error": {...}}`).
fn error_text(error: &HostError) -> String {
    match error {
        HostError::Policy {
            code,
            message,
            violations,
        } => {
            let mut body = json!({ "code": code, "message": message });
            if code == "INVALID_DOCUMENT" {
                body["violations"] = json!(violations);
            }
            json!({ "error": body }).to_string()
        }
        other => json!({ "error": { "code": "HOST", "message": other.to_string() } }).to_string(),
    }
}

impl Host for WasmtimeHost {
    fn name(&self) -> &str {
        "wasmtime"
    }

    fn create(&mut self, document: &str, options: &str) -> Result<(), String> {
        let parse = |text: &str| serde_json::from_str::<Value>(text).map_err(|e| e.to_string());
        let (document, options) = (parse(document)?, parse(options)?);
        match PolicyRuntime::new(self.module.clone(), &document, &options) {
            Ok(runtime) => {
                self.runtime = Some(runtime);
                Ok(())
            }
            Err(error) => {
                self.runtime = None;
                Err(error_text(&error))
            }
        }
    }

    fn step(&mut self, input: &str) -> String {
        match self.runtime.as_mut().map(|r| r.step_text(input)) {
            Some(Ok(text)) => text,
            Some(Err(error)) => error_text(&error),
            None => json!({"error": {"code": "NO_POLICY", "message": "create first"}}).to_string(),
        }
    }

    fn query(&mut self, query: &str) -> String {
        let Ok(query) = serde_json::from_str::<Value>(query) else {
            return json!({"error": {"code": "INVALID_INPUT", "message": "the query is not JSON"}})
                .to_string();
        };
        if query.get("query").and_then(Value::as_str) == Some("check") {
            // The module's `rota_check` (what `rota check` and the roster's warnings use).
            let options = match query.get("kinds") {
                Some(kinds) => json!({ "kinds": kinds }),
                None => json!({}),
            };
            let document = query.get("document").cloned().unwrap_or(Value::Null);
            return match self.runtime.as_mut().map(|r| r.check(&document, &options)) {
                Some(Ok(check)) => json!({ "ok": check }).to_string(),
                Some(Err(error)) => error_text(&error),
                None => {
                    json!({"error": {"code": "NO_POLICY", "message": "create first"}}).to_string()
                }
            };
        }
        match self.runtime.as_mut().map(|r| r.query(&query)) {
            Some(Ok(value)) => json!({ "ok": value }).to_string(),
            Some(Err(error)) => error_text(&error),
            None => json!({"error": {"code": "NO_POLICY", "message": "create first"}}).to_string(),
        }
    }
}

fn host() -> WasmtimeHost {
    WasmtimeHost {
        module: load_module(),
        runtime: None,
    }
}

#[test]
fn every_vector_on_wasmtime() {
    let vectors = load_vectors(&vectors_dir()).unwrap_or_else(|e| panic!("{e}"));
    let failures = run_all(&mut host(), &vectors);
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed on wasmtime:\n\n{}",
        failures.len(),
        vectors.len(),
        failures.join("\n\n")
    );
}

#[test]
fn random_traces_on_wasmtime_match_native() {
    // The native checks run in the native runner; here only the hashes matter.
    let (file, problems) =
        traces::generate_with(traces::DEFAULT_SEED, traces::DEFAULT_COUNT, false);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let mut host = host();
    let mut failures = Vec::new();
    for trace in &file.traces {
        if let Some(m) = replay(&mut host, trace) {
            failures.push(describe_mismatch("wasmtime", trace, &m));
            if failures.len() >= 3 {
                break;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "random traces differ between native and wasmtime:\n\n{}",
        failures.join("\n\n")
    );
}

/// The state-file rule through the guest's `rota_state_file` (answer text unparsed).
struct WasmtimeStateFile(PolicyRuntime);

impl rota_conformance::state_file::StateFileHost for WasmtimeStateFile {
    fn name(&self) -> &str {
        "wasmtime"
    }
    fn state_file(&mut self, request: &str) -> String {
        self.0
            .state_file_text(request)
            .unwrap_or_else(|error| error_text(&error))
    }
}

#[test]
fn every_state_file_vector_on_wasmtime() {
    use rota_conformance::state_file::{
        load_state_file_vectors, run_state_file_vectors, state_file_dir,
    };
    let vectors = load_state_file_vectors(&state_file_dir()).unwrap_or_else(|e| panic!("{e}"));
    let runtime = PolicyRuntime::new(load_module(), &json!({ "executors": [] }), &Value::Null)
        .expect("an empty roster");
    let failures = run_state_file_vectors(&mut WasmtimeStateFile(runtime), &vectors);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
