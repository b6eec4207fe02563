//! The contract every host runner meets, the native host, and the vector runner.
//!
//! A host creates a policy from document and options text, feeds it one input text at
//! a time and answers with the core's JSON text (`rota_core::json::step_str`: the
//! plain ABI's `rota_handle`, the npm package's `handleJson`), and answers queries in
//! the plain ABI's shape (`{"ok": value}` / `{"error": {...}}`).

use rota_core::json::{parse_options, step_str};
use rota_core::{Error, ExplainRequest, Input, PersistedState, Policy};
use serde_json::{json, Value};

use crate::matching::{answer_lines, equal, keyed_snapshot, normalize, restrict, subset};
use crate::vector::{Action, Vector};
use crate::{diff, jsonfmt};

/// One way of running the core.
pub trait Host {
    /// A short name for reports: `native`, `wasmtime`, `node`, `browser`.
    fn name(&self) -> &str;
    /// Creates a fresh policy. `Err` carries the answer text `{"error": {...}}`.
    fn create(&mut self, document: &str, options: &str) -> Result<(), String>;
    /// Feeds one input text; the answer text.
    fn step(&mut self, input: &str) -> String;
    /// Asks one query (the plain ABI's `rota_query` shape); the answer text.
    fn query(&mut self, query: &str) -> String;
    /// Problems a host found on its own after the last call (the native host checks
    /// more than the others can). Empty by default.
    fn take_problems(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// `rota-core` itself, through `rota_core::json` — the reference every other host is
/// compared with. Besides answering, it checks after every step what only it can see:
/// a rejected input leaves the whole exported state unchanged, and every persist
/// decision restores into a fresh policy as exactly the persisted exclusions
/// (DESIGN.md, Invariants). `Policy::check_invariants` runs inside every `handle` in
/// debug builds (tests).
pub struct NativeHost {
    policy: Option<Policy>,
    problems: Vec<String>,
    /// Whether to make the extra checks (off for plain replays, where they are slow).
    checks: bool,
    /// This roster's entries of the state file, as the persists so far wrote them
    /// (each replaces the entries of its `ids`); a restore resets it.
    file: PersistedState,
}

impl Default for NativeHost {
    fn default() -> Self {
        NativeHost::new()
    }
}

impl NativeHost {
    /// A native host that checks rejected inputs and persist decisions.
    pub fn new() -> NativeHost {
        NativeHost {
            policy: None,
            problems: Vec::new(),
            checks: true,
            file: PersistedState {
                version: 1,
                exclusions: Vec::new(),
            },
        }
    }

    /// A native host that only answers (`check_invariants` still runs in debug builds).
    pub fn unchecked() -> NativeHost {
        NativeHost {
            checks: false,
            ..NativeHost::new()
        }
    }

    pub fn policy(&self) -> Option<&Policy> {
        self.policy.as_ref()
    }

    /// DESIGN.md: "the state after a restore from a persist decision equals the
    /// persisted part of the state before": here, from the file the persists so far
    /// wrote (a persist carries only the entries that changed).
    fn check_restore(policy: &Policy, file: &PersistedState) -> Result<(), String> {
        let by_id = |mut state: PersistedState| {
            state.exclusions.sort_by(|a, b| a.id.cmp(&b.id));
            state
        };
        let persisted = by_id(file.clone());
        let before = by_id(policy.persisted_state());
        if before != persisted {
            return Err(format!(
                "the file the persists wrote is {}, the lasting state {}",
                serde_json::to_string(&persisted).unwrap_or_default(),
                serde_json::to_string(&before).unwrap_or_default()
            ));
        }
        let mut fresh = Policy::new(&policy.document(), policy.options().clone())
            .map_err(|e| format!("the running document does not build a policy: {e}"))?;
        fresh
            .handle(Input::Restore {
                now: policy.now(),
                state: persisted.clone(),
            })
            .map_err(|e| format!("restore of a persist decision failed: {e}"))?;
        while fresh.poll_output().is_some() {}
        let restored = by_id(fresh.persisted_state());
        if restored != persisted {
            return Err(format!(
                "a restore of the persist decision {} gives {}",
                serde_json::to_string(&persisted).unwrap_or_default(),
                serde_json::to_string(&restored).unwrap_or_default()
            ));
        }
        Ok(())
    }
}

impl Host for NativeHost {
    fn name(&self) -> &str {
        "native"
    }

    fn create(&mut self, document: &str, options: &str) -> Result<(), String> {
        let built = (|| -> Result<Policy, Error> {
            let document: Value =
                serde_json::from_str(document).map_err(|e| Error::InvalidInput {
                    message: format!("the document is not JSON: {e}"),
                })?;
            let options: Value =
                serde_json::from_str(options).map_err(|e| Error::InvalidInput {
                    message: format!("the options are not JSON: {e}"),
                })?;
            Policy::new(&document, parse_options(&options)?)
        })();
        match built {
            Ok(policy) => {
                self.policy = Some(policy);
                self.file.exclusions.clear();
                Ok(())
            }
            Err(error) => {
                self.policy = None;
                Err(json!({ "error": error.to_json() }).to_string())
            }
        }
    }

    fn step(&mut self, input: &str) -> String {
        let Some(policy) = self.policy.as_mut() else {
            return json!({"error": {"code": "NO_POLICY", "message": "create first"}}).to_string();
        };
        if !self.checks {
            return step_str(policy, input);
        }
        let before = policy.export_state();
        let answer = step_str(policy, input);
        let parsed: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
        if parsed.get("error").is_some() {
            let after = policy.export_state();
            if before != after {
                self.problems.push(format!(
                    "a rejected input changed the state:\n{}",
                    diff::lines(&jsonfmt::pretty(&before), &jsonfmt::pretty(&after))
                ));
            }
        }
        let kind = serde_json::from_str::<Value>(input)
            .ok()
            .map(|v| v["type"].clone());
        if kind == Some(json!("restore")) && parsed.get("outputs").is_some() {
            // What was read is what the file holds (of this roster's executors).
            self.file = policy.persisted_state();
        }
        if let Some(outputs) = parsed.get("outputs").and_then(Value::as_array) {
            for output in outputs {
                if output["type"] == "persist" {
                    let applied = serde_json::from_value::<Vec<String>>(output["ids"].clone())
                        .and_then(|ids| {
                            let state: PersistedState =
                                serde_json::from_value(output["state"].clone())?;
                            self.file.apply(&ids, &state.exclusions);
                            Ok(())
                        });
                    let checked = applied
                        .map_err(|e| format!("a persist output: {e}"))
                        .and_then(|()| NativeHost::check_restore(policy, &self.file));
                    if let Err(problem) = checked {
                        self.problems.push(problem);
                    }
                }
            }
        }
        answer
    }

    fn query(&mut self, query: &str) -> String {
        let Some(policy) = self.policy.as_ref() else {
            return json!({"error": {"code": "NO_POLICY", "message": "create first"}}).to_string();
        };
        native_query(policy, query).to_string()
    }

    fn take_problems(&mut self) -> Vec<String> {
        std::mem::take(&mut self.problems)
    }
}

/// The plain ABI's query dispatch (`wasm/src/abi.rs`, `query`), natively.
pub fn native_query(policy: &Policy, query: &str) -> Value {
    fn ok<T: serde::Serialize>(value: Result<T, Error>) -> Value {
        match value {
            Ok(value) => json!({ "ok": value }),
            Err(error) => json!({ "error": error.to_json() }),
        }
    }
    let input_error = |message: String| Error::InvalidInput { message };
    let query: Value = match serde_json::from_str(query) {
        Ok(query) => query,
        Err(e) => return ok::<()>(Err(input_error(format!("the query is not JSON: {e}")))),
    };
    let string_arg = |key: &str| -> Result<String, Error> {
        query
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| input_error(format!("the query needs a string `{key}`")))
    };
    match query.get("query").and_then(Value::as_str).unwrap_or("") {
        "snapshot" => ok(Ok(policy.snapshot())),
        "explain" => ok(serde_json::from_value::<ExplainRequest>(
            query.get("request").cloned().unwrap_or(Value::Null),
        )
        .map_err(|e| input_error(format!("query field `request`: {e}")))
        .and_then(|request| policy.explain(&request))),
        "plan" => ok(policy.plan(query.get("document").unwrap_or(&Value::Null))),
        "available" => ok(string_arg("role").and_then(|role| policy.available(&role))),
        "slots" => ok(string_arg("role").and_then(|role| policy.slots(&role))),
        "canEverServe" => ok(string_arg("role").and_then(|role| {
            let avoid: Vec<String> = match query.get("avoid") {
                None => Vec::new(),
                Some(value) => serde_json::from_value(value.clone())
                    .map_err(|e| input_error(format!("query field `avoid`: {e}")))?,
            };
            policy.can_ever_serve(&role, &avoid)
        })),
        "capacity" => ok(string_arg("role").and_then(|role| policy.capacity(&role))),
        "independenceBlocked" | "coderHeld" => ok(string_arg("role").and_then(|role| {
            let avoid: Vec<String> = match query.get("avoid") {
                None => Vec::new(),
                Some(value) => serde_json::from_value(value.clone())
                    .map_err(|e| input_error(format!("query field `avoid`: {e}")))?,
            };
            let blocked = policy.independence_blocked(&role, &avoid)?;
            Ok(match query.get("query").and_then(Value::as_str) {
                Some("coderHeld") => serde_json::json!(blocked == Some(rota_core::Because::Held)),
                _ => serde_json::json!(blocked),
            })
        })),
        "effortOf" => ok(string_arg("executor")
            .and_then(|executor| policy.effort_of(&executor, &string_arg("role")?))),
        "document" => ok(Ok(policy.document())),
        "now" => ok(Ok(policy.now())),
        "stateHash" => ok(Ok(policy.state_hash())),
        "probesInFlight" => ok(Ok(policy.probes_in_flight())),
        "log" => rota_core::log::answer(query.get("request").unwrap_or(&Value::Null)),
        "duplicateIds" => ok(string_arg("side").map(|side| {
            rota_core::duplicate_ids(query.get("document").unwrap_or(&Value::Null), &side)
        })),
        // `check` of a document (its violations and warnings); the policy is not read.
        "check" => {
            let kinds: Option<Vec<String>> = query
                .get("kinds")
                .and_then(|k| serde_json::from_value(k.clone()).ok());
            let check = rota_core::check(
                query.get("document").unwrap_or(&Value::Null),
                kinds.as_deref(),
            );
            json!({ "ok": check })
        }
        "classify" => {
            match rota_core::Failure::from_json(query.get("failure").unwrap_or(&Value::Null)) {
                Ok(failure) => json!({ "ok": policy.classify(&failure).to_json() }),
                Err(e) => ok::<()>(Err(input_error(format!("query field `failure`: {e}")))),
            }
        }
        other => {
            json!({"error": {"code": "UNKNOWN_QUERY", "message": format!("unknown query '{other}'")}})
        }
    }
}

/// How a vector went on a host.
#[derive(Debug)]
pub struct Failure {
    pub report: String,
}

fn parse_answer(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("the answer is not JSON ({e}): {text}"))
}

/// Runs one vector; `Err` is a readable report naming the host, vector, step and diff.
pub fn run_vector(host: &mut dyn Host, vector: &Vector) -> Result<(), Failure> {
    let host_name = host.name().to_string();
    let fail = |step: Option<usize>, what: String| {
        let place = match step {
            Some(i) => format!(
                "step {} of {} ({})",
                i + 1,
                vector.steps.len(),
                vector.steps[i].describe()
            ),
            None => "creation".to_string(),
        };
        Failure {
            report: format!(
                "vector '{}' ({}) on {}, {place}:\n{what}",
                vector.name,
                vector.file.display(),
                host_name
            ),
        }
    };
    let created = host.create(&vector.document_text(), &vector.options_text());
    match (&vector.create, created) {
        (None, Ok(())) => {}
        (None, Err(answer)) => return Err(fail(None, format!("creation failed: {answer}"))),
        (Some(expected), Ok(())) => {
            return Err(fail(
                None,
                format!("creation succeeded, but the vector expects {expected}"),
            ))
        }
        (Some(expected), Err(answer)) => {
            let answer = parse_answer(&answer).map_err(|e| fail(None, e))?;
            if !equal(expected, &answer) {
                return Err(fail(None, answer_diff(expected, &answer)));
            }
            return Ok(());
        }
    }
    let snapshot = |host: &mut dyn Host| -> Result<Value, String> {
        let answer = parse_answer(&host.query(r#"{"query":"snapshot"}"#))?;
        answer
            .get("ok")
            .cloned()
            .ok_or_else(|| format!("the snapshot query failed: {answer}"))
    };
    for (i, step) in vector.steps.iter().enumerate() {
        let expected = step.expect.clone().unwrap_or(Value::Null);
        let action = step.action().map_err(|e| fail(Some(i), e))?;
        let rejected = expected.get("error").is_some();
        match action {
            Action::Input(text) => {
                let before = if rejected {
                    Some(snapshot(host).map_err(|e| fail(Some(i), e))?)
                } else {
                    None
                };
                let answer = parse_answer(&host.step(&text)).map_err(|e| fail(Some(i), e))?;
                if !equal(&expected, &answer) {
                    return Err(fail(Some(i), answer_diff(&expected, &answer)));
                }
                if let Some(before) = before {
                    let after = snapshot(host).map_err(|e| fail(Some(i), e))?;
                    if !equal(&before, &after) {
                        return Err(fail(
                            Some(i),
                            format!(
                                "a rejected input changed the snapshot (- before, + after):\n{}",
                                diff::lines(&jsonfmt::pretty(&before), &jsonfmt::pretty(&after))
                            ),
                        ));
                    }
                }
            }
            Action::Query(text) => {
                let answer = parse_answer(&host.query(&text)).map_err(|e| fail(Some(i), e))?;
                if !equal(&expected, &answer) {
                    return Err(fail(Some(i), answer_diff(&expected, &answer)));
                }
            }
        }
        let problems = host.take_problems();
        if !problems.is_empty() {
            return Err(fail(Some(i), problems.join("\n")));
        }
        if let Some(want) = &step.snapshot {
            let actual = keyed_snapshot(&snapshot(host).map_err(|e| fail(Some(i), e))?);
            if !subset(want, &actual) {
                let shown = restrict(want, &actual);
                return Err(fail(
                    Some(i),
                    format!(
                        "the snapshot differs (- expected, + actual):\n{}",
                        diff::lines(
                            &jsonfmt::pretty(&normalize(want)),
                            &jsonfmt::pretty(&normalize(&shown))
                        )
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `- expected` / `+ actual`, one output per line.
pub fn answer_diff(expected: &Value, actual: &Value) -> String {
    format!(
        "the answer differs (- expected, + actual):\n{}",
        diff::lines(&answer_lines(expected), &answer_lines(actual))
    )
}

/// Runs every vector on a host; the reports of those that failed.
pub fn run_all(host: &mut dyn Host, vectors: &[Vector]) -> Vec<String> {
    vectors
        .iter()
        .filter_map(|v| run_vector(host, v).err().map(|f| f.report))
        .collect()
}
