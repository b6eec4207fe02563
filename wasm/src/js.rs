//! The wasm-bindgen exports for JS (Node and browsers): the policy class and the
//! document utilities, over `rota_core::json` so every host reads and writes the same
//! JSON. JS built-ins come from `js-sys`.
//!
//! Values go in as JSON text: a JS value is read exactly as `JSON.stringify` writes it
//! (fields holding `undefined` are absent, a `Date` is its ISO string) and parsed by
//! serde_json, so a JS caller and a wasmtime caller that send the same JSON get the
//! same outputs. `handleJson` is the shared step itself (`rota_core::json::step_str`):
//! the core's output text, byte for byte, for conformance vectors. In the Node module
//! (feature `binary`), the package's `Policy#handle` (objects in and out) takes the
//! binary step (`__ioBuffer`, `__step`: the common inputs and every output as compact
//! records in a buffer in the module's memory, `binary.rs`) and falls back to
//! `handleJson` wrapped in `JSON.stringify` and `JSON.parse` for every other input
//! (`npm/src/api.js`, `npm/src/binary.js`); the browser's module has `handleJson`
//! only. The same answers and errors either way, and no call back into JS from here.
//!
//! Answers come back as plain JS values: the core's JSON text parsed by the engine's
//! `JSON.parse`, one way for every answer. It is 1.1–1.4× faster than building the
//! value property by property for the large ones (a snapshot, an exported state, a
//! document at 1,000 and 10,000 executors); serde-wasm-bindgen built the small ones
//! within ±16 % of it (`npm/bench/crossing.mjs`) and cost the browser's module about
//! 3.5 KB gzipped of its budget.
//!
//! Errors are thrown as JS `Error`s (name `RotaError`) with the core's stable `code`,
//! a message saying what and where, and `violations` for `INVALID_DOCUMENT`. A
//! rejected call leaves the policy exactly as it was (the core guarantees it; this
//! layer converts before it calls).

use js_sys::{Array, Error as JsError, Reflect, JSON};
use rota_core::json::{from_value, parse_options, step_str};
use rota_core::write::to_json_text;
use rota_core::{Error, ExplainRequest, Policy as CorePolicy};
#[cfg(feature = "binary")]
use rota_core::{Level, Output, OutputRef};
use serde::Serialize;
use serde_json::Value;
use wasm_bindgen::prelude::*;

#[cfg(feature = "binary")]
use crate::binary::{self, Writer};

type JsResult<T> = Result<T, JsValue>;

/// A core error as a JS `Error` with `code` (and `violations`).
fn to_js_error(error: &Error) -> JsValue {
    let js = JsError::new(&error.to_string());
    js.set_name("RotaError");
    let shape = error.to_json();
    for field in ["code", "violations"] {
        if let Some(value) = shape.get(field) {
            let _ = Reflect::set(&js, &JsValue::from_str(field), &to_js_value(value));
        }
    }
    js.into()
}

fn invalid_input(message: String) -> Error {
    Error::InvalidInput { message }
}

/// A JS value's `JSON.stringify` text (`undefined` is `null`).
fn stringify(value: &JsValue, what: &str) -> Result<String, Error> {
    if value.is_undefined() {
        return Ok("null".to_string());
    }
    let text = JSON::stringify(value).map_err(|e| {
        let why = e
            .dyn_ref::<JsError>()
            .map(|e| String::from(e.message()))
            .unwrap_or_default();
        invalid_input(format!("{what} cannot be written as JSON ({why})"))
    })?;
    // JSON.stringify gives undefined for a function or a symbol.
    text.as_string()
        .ok_or_else(|| invalid_input(format!("{what} is not a JSON value")))
}

/// A JS value as serde_json reads its `JSON.stringify` text; `undefined` is `null`.
///
/// Values come in through `JSON.stringify`, not a deserializer walking the JS value:
/// the package reads a value exactly as `JSON.stringify` writes it (a `Date` is its
/// ISO string, `toJSON` is honoured, a field holding `undefined` is absent, NaN is
/// refused by name), which a field-by-field walk of the JS object would not give.
fn read(value: &JsValue, what: &str) -> Result<Value, Error> {
    let text = stringify(value, what)?;
    serde_json::from_str(&text).map_err(|e| invalid_input(format!("{what}: {e}")))
}

/// A string argument, or INVALID_INPUT naming the argument.
fn read_string(value: &JsValue, what: &str) -> Result<String, Error> {
    value
        .as_string()
        .ok_or_else(|| invalid_input(format!("{what} must be a string")))
}

/// A list of strings; `undefined`/`null` is the empty list.
fn read_strings(value: &JsValue, what: &str) -> Result<Vec<String>, Error> {
    let text = stringify(value, what)?;
    serde_json::from_str::<Option<Vec<String>>>(&text)
        .map(Option::unwrap_or_default)
        .map_err(|_| invalid_input(format!("{what} must be a list of strings")))
}

/// JSON text as a plain JS value, by the engine's `JSON.parse`: for the large values
/// (a snapshot, an exported state, a document), where it measures faster than
/// building the value property by property (`npm/bench/README.md`, "crossing").
fn parse_text(text: &str) -> JsValue {
    // The text is serde_json's own: JSON.parse cannot refuse it.
    JSON::parse(text).unwrap_or(JsValue::NULL)
}

/// A value as a plain JS value (objects, arrays, numbers, strings, null), through its
/// JSON text (see `parse_text`).
fn to_js_value<T: Serialize + ?Sized>(value: &T) -> JsValue {
    parse_text(&to_json_text(value))
}

/// A large value (a snapshot, an exported state, a document) as a plain JS value,
/// through its JSON text (see `parse_text`).
fn to_js_text<T: Serialize + ?Sized>(value: &T) -> JsValue {
    parse_text(&to_json_text(value))
}

/// The rota policy: a deterministic, sans-IO state machine. Feed one input with
/// `handleJson` (or the package's `handle`, objects in and out); it returns every
/// output the input caused and the next wake-up time.
#[wasm_bindgen(js_name = Policy)]
pub struct JsPolicy {
    inner: CorePolicy,
    /// The buffer of the binary step (`binary.rs`): the input JS wrote, then the answer.
    #[cfg(feature = "binary")]
    io: Vec<u8>,
    /// The strings the binary step's answers send by reference.
    #[cfg(feature = "binary")]
    strings: binary::Strings,
}

impl JsPolicy {
    fn wrap(inner: CorePolicy) -> JsPolicy {
        JsPolicy {
            inner,
            #[cfg(feature = "binary")]
            io: Vec::new(),
            #[cfg(feature = "binary")]
            strings: binary::Strings::default(),
        }
    }
}

#[wasm_bindgen(js_class = Policy)]
impl JsPolicy {
    /// Builds a policy from a roster document and options (`undefined` for defaults).
    /// Throws `INVALID_DOCUMENT` with every violation, or `INVALID_INPUT` for options.
    #[wasm_bindgen(constructor)]
    pub fn new(document: JsValue, options: JsValue) -> JsResult<JsPolicy> {
        let build = || -> Result<CorePolicy, Error> {
            let document = read(&document, "the document")?;
            let options = parse_options(&read(&options, "options")?)?;
            CorePolicy::from_value(document, options)
        };
        build().map(JsPolicy::wrap).map_err(|e| to_js_error(&e))
    }

    /// Feeds one input given as JSON text and returns the core's answer as JSON text,
    /// exactly as every other host writes it: `{"outputs":[...],"wakeAt":...}` or
    /// `{"error":{...}}`. Never throws.
    #[wasm_bindgen(js_name = handleJson)]
    pub fn handle_json(&mut self, input: &str) -> String {
        step_str(&mut self.inner, input)
    }

    /// The last input's time (epoch ms).
    #[wasm_bindgen(getter)]
    pub fn now(&self) -> f64 {
        self.inner.now() as f64
    }

    /// When the core wants a `tick` (epoch ms), or `undefined`.
    #[wasm_bindgen(getter, js_name = wakeAt)]
    pub fn wake_at(&self) -> Option<f64> {
        self.inner.poll_timeout().map(|t| t as f64)
    }

    /// Every executor, the queue, machines being created, a pending reload.
    pub fn snapshot(&self) -> JsResult<JsValue> {
        Ok(to_js_text(&self.inner.snapshot()))
    }

    /// Free slots for `role` now. Throws `UNKNOWN_ROLE`.
    pub fn available(&self, role: JsValue) -> JsResult<u32> {
        read_string(&role, "the role")
            .and_then(|role| self.inner.available(&role))
            .map_err(|e| to_js_error(&e))
    }

    /// Configured slots for `role`. Throws `UNKNOWN_ROLE`.
    pub fn slots(&self, role: JsValue) -> JsResult<u32> {
        read_string(&role, "the role")
            .and_then(|role| self.inner.slots(&role))
            .map_err(|e| to_js_error(&e))
    }

    /// Whether an executor outside `avoid` has the role and is not out for the run.
    #[wasm_bindgen(js_name = canEverServe)]
    pub fn can_ever_serve(&self, role: JsValue, avoid: JsValue) -> JsResult<bool> {
        let run = || -> Result<bool, Error> {
            let role = read_string(&role, "the role")?;
            let avoid = read_strings(&avoid, "avoid")?;
            self.inner.can_ever_serve(&role, &avoid)
        };
        run().map_err(|e| to_js_error(&e))
    }

    /// Slots for `role` on the executors in the round, held or not. Throws `UNKNOWN_ROLE`.
    pub fn capacity(&self, role: JsValue) -> JsResult<u32> {
        read_string(&role, "the role")
            .and_then(|role| self.inner.capacity(&role))
            .map_err(|e| to_js_error(&e))
    }

    /// Why a request for `role` outside `avoid` cannot be served by a call ending:
    /// `"held"`, `"out"`, or `undefined`.
    #[wasm_bindgen(js_name = independenceBlocked)]
    pub fn independence_blocked(&self, role: JsValue, avoid: JsValue) -> JsResult<JsValue> {
        let run = || -> Result<JsValue, Error> {
            let role = read_string(&role, "the role")?;
            let avoid = read_strings(&avoid, "avoid")?;
            let blocked = self.inner.independence_blocked(&role, &avoid)?;
            Ok(blocked.map_or(JsValue::UNDEFINED, |b| JsValue::from_str(b.as_str())))
        };
        run().map_err(|e| to_js_error(&e))
    }

    /// Why each executor can or cannot take a request (waiting or hypothetical) now.
    pub fn explain(&self, request: JsValue) -> JsResult<JsValue> {
        let run = || -> Result<_, Error> {
            let value = read(&request, "the explain request")?;
            let request = ExplainRequest::from_json(&value)
                .map_err(|e| invalid_input(format!("explain: {e}")))?;
            self.inner.explain(&request)
        };
        Ok(to_js_value(&run().map_err(|e| to_js_error(&e))?))
    }

    /// A dry run of a reload to `document`; changes nothing.
    pub fn plan(&self, document: JsValue) -> JsResult<JsValue> {
        let run = || -> Result<_, Error> {
            let document = read(&document, "the document")?;
            self.inner.plan(&document)
        };
        Ok(to_js_value(&run().map_err(|e| to_js_error(&e))?))
    }

    /// Everything, for `Policy.importState` (a live swap, or a checkpoint).
    #[wasm_bindgen(js_name = exportState)]
    pub fn export_state(&self) -> JsValue {
        to_js_text(&self.inner.export_state())
    }

    /// A copy of this policy, in the same state (a checkpoint to step from again):
    /// what `importState(exportState())` gives, without reading the export.
    #[wasm_bindgen(js_name = clone)]
    pub fn clone_policy(&self) -> JsPolicy {
        JsPolicy::wrap(self.inner.clone())
    }

    /// A policy from `exportState`'s value. Throws `INVALID_STATE`. The Node module's
    /// (feature `import`): the browser module leaves it out for its download size.
    #[cfg(feature = "import")]
    #[wasm_bindgen(js_name = importState)]
    pub fn import_state(state: JsValue) -> JsResult<JsPolicy> {
        read(&state, "the state")
            .and_then(|state| CorePolicy::import_state(&state))
            .map(JsPolicy::wrap)
            .map_err(|e| to_js_error(&e))
    }

    /// The state's hash (16 hex digits): replicas that folded the same inputs, on any
    /// host, agree on it.
    #[wasm_bindgen(js_name = stateHash)]
    pub fn state_hash(&self) -> String {
        self.inner.state_hash()
    }

    /// The running document as written.
    pub fn document(&self) -> JsValue {
        parse_text(&self.inner.document_text())
    }

    /// The effort `role` runs at on `executor` (its `effort`), or `undefined` when it
    /// sets none. Throws `UNKNOWN_EXECUTOR`, `UNKNOWN_ROLE`.
    #[wasm_bindgen(js_name = effortOf)]
    pub fn effort_of(&self, executor: &str, role: &str) -> JsResult<Option<String>> {
        self.inner
            .effort_of(executor, role)
            .map(|effort| effort.map(str::to_string))
            .map_err(|e| to_js_error(&e))
    }

    /// The kind a report of `failure` (facts or a kind) gets with this document's
    /// signals: `{ kind, rule }` (and `resetAt`, a reset time read from its message at
    /// `now`, epoch ms, default the last input's). Throws `INVALID_INPUT`.
    pub fn classify(&self, failure: JsValue, now: Option<f64>) -> JsResult<JsValue> {
        // A time past what JSON numbers hold exactly is no time: the last input's.
        let now = now
            .filter(|t| t.fract() == 0.0 && *t >= 0.0 && *t <= 9_007_199_254_740_991.0)
            .map_or(self.inner.now(), |t| t as u64);
        read_failure(&failure)
            .map(|failure| to_js_value(&self.inner.classify_at(&failure, now).to_json()))
            .map_err(|e| to_js_error(&e))
    }
}

#[wasm_bindgen(js_class = Policy)]
impl JsPolicy {
    /// The executor ids `document` lists twice, as violations at `<side>:
    /// executors[i].id` (`rota_core::duplicate_ids`): a roster refuses them before it
    /// merges (merging keeps one entry per id).
    #[wasm_bindgen(js_name = duplicateIds)]
    pub fn duplicate_ids(document: JsValue, side: &str) -> JsResult<JsValue> {
        read(&document, "the document")
            .map(|document| to_js_value(&rota_core::duplicate_ids(&document, side)))
            .map_err(|e| to_js_error(&e))
    }
}

/// A shared roster's log (`rota_core::log`): the fold and what a new leader redoes.
/// Feature `log`: the Node module's (a shared roster runs on PostgreSQL, from Node);
/// the browser module leaves them out (about 4.8 KB gzipped).
#[cfg(feature = "log")]
#[wasm_bindgen(js_class = Policy)]
impl JsPolicy {
    /// The `probe` outputs of the probes in flight: what a new leader redoes.
    #[wasm_bindgen(js_name = probesInFlight)]
    pub fn probes_in_flight(&self) -> JsValue {
        // Through the answer's writer (no second serializer for outputs in the module).
        let text = rota_core::json::answer_text(&self.inner.probes_in_flight(), None);
        Reflect::get(&parse_text(&text), &JsValue::from_str("outputs")).unwrap_or(JsValue::NULL)
    }

    /// A shared log's rule asked as JSON text (`rota_core::log::answer`: `{"op":
    /// "genesis"|"readGenesis"|"entry"|"feed"|"facts"|"actors", ...}`),
    /// answered as JSON text (`{"ok": ...}` or `{"error": {code, message}}`). Never
    /// throws.
    #[wasm_bindgen(js_name = logJson)]
    pub fn log_json(request: &str) -> String {
        let answer = match serde_json::from_str::<Value>(request) {
            Ok(request) => rota_core::log::answer(&request),
            Err(e) => serde_json::json!({ "error":
                invalid_input(format!("the log request is not JSON: {e}")).to_json() }),
        };
        rota_core::write::to_text(&answer)
    }
}

fn read_failure(failure: &JsValue) -> Result<rota_core::Failure, Error> {
    let value = read(failure, "the failure")?;
    rota_core::Failure::from_json(&value).map_err(|e| invalid_input(format!("failure: {e}")))
}

/// Whether a health probe's HTTP status means up (2xx; redirects are not followed,
/// so a 3xx is down): the one probe rule of every host.
#[wasm_bindgen(js_name = probeIsUp)]
pub fn probe_is_up(status: u32) -> bool {
    u16::try_from(status).is_ok_and(rota_core::probe_is_up)
}

/// Every violation of a document (empty when valid). `kinds`: the executor kinds the
/// host can run (`undefined` accepts any).
#[wasm_bindgen]
pub fn validate(document: JsValue, kinds: JsValue) -> JsResult<JsValue> {
    let run = || -> Result<_, Error> {
        let document = read(&document, "the document")?;
        let kinds = read_kinds(&kinds)?;
        Ok(rota_core::validate(&document, kinds.as_deref()))
    };
    Ok(to_js_value(&run().map_err(|e| to_js_error(&e))?))
}

/// `{ violations, warnings }`: `validate`'s violations, and beside them the warnings
/// of a document that stays valid (a literal secret in `env`).
#[wasm_bindgen]
pub fn check(document: JsValue, kinds: JsValue) -> JsResult<JsValue> {
    let run = || -> Result<_, Error> {
        let document = read(&document, "the document")?;
        let kinds = read_kinds(&kinds)?;
        let check = rota_core::check(&document, kinds.as_deref());
        Ok(serde_json::json!({ "violations": check.violations, "warnings": check.warnings }))
    };
    Ok(to_js_value(&run().map_err(|e| to_js_error(&e))?))
}

/// Each executor's `[id, entry]`, in the document's order: an `executors` entry as
/// written, a worker's declaration with its `name`, `id` and `maxConcurrentAttempts`
/// (`rota_core::document::entries`): what the driver hands `preflight`, a lease's
/// `executor` and `roster.executors`.
#[wasm_bindgen(js_name = executorEntries)]
pub fn executor_entries(document: JsValue) -> JsResult<JsValue> {
    let document = read(&document, "the document").map_err(|e| to_js_error(&e))?;
    Ok(to_js_value(&rota_core::document::entries(&document)))
}

/// The document with every `env` value that is not a `${VAR}` reference replaced by
/// `[redacted]`: for traces, logs and displays (env values decide nothing).
#[wasm_bindgen]
pub fn redact(document: JsValue) -> JsResult<JsValue> {
    let document = read(&document, "the document").map_err(|e| to_js_error(&e))?;
    Ok(to_js_text(&rota_core::secrets::redact(&document)))
}

fn read_kinds(kinds: &JsValue) -> Result<Option<Vec<String>>, Error> {
    match read(kinds, "kinds")? {
        Value::Null => Ok(None),
        other => from_value::<Vec<String>>(&other)
            .map(Some)
            .map_err(|_| invalid_input("kinds must be a list of strings".into())),
    }
}

/// A repository roster over the user's (either may be `null`). Throws
/// `INVALID_DOCUMENT` when a side has no `executors` array or an entry has no id.
#[wasm_bindgen]
pub fn merge(user: JsValue, repo: JsValue) -> JsResult<JsValue> {
    let run = || -> Result<Value, Error> {
        let user = read(&user, "the user roster")?;
        let repo = read(&repo, "the repository roster")?;
        rota_core::merge_owned(user, repo)
            .map_err(|violations| Error::InvalidDocument { violations })
    };
    Ok(to_js_text(&run().map_err(|e| to_js_error(&e))?))
}

/// Only the named executors; an empty list keeps all: `{ document, unknown, warnings }`, a
/// warning naming the ids the document does not have (ignored, as the seed does).
/// Throws `INVALID_DOCUMENT` only for a document without an `executors` array.
#[wasm_bindgen]
pub fn narrow(document: JsValue, ids: JsValue) -> JsResult<JsValue> {
    let run = || -> Result<Value, Error> {
        let document = read(&document, "the document")?;
        let ids = read_strings(&ids, "ids")?;
        let narrowed = rota_core::narrow(&document, &ids)
            .map_err(|violations| Error::InvalidDocument { violations })?;
        let warnings: Vec<rota_core::Violation> = narrowed.warning().into_iter().collect();
        Ok(serde_json::json!({
            "document": narrowed.document,
            "unknown": narrowed.unknown,
            "warnings": warnings,
        }))
    };
    Ok(to_js_text(&run().map_err(|e| to_js_error(&e))?))
}

/// "30 minutes", "90s", "2h" in milliseconds, or `undefined` when unreadable.
#[wasm_bindgen(js_name = parseDuration)]
pub fn parse_duration(text: JsValue) -> Option<f64> {
    text.as_string()
        .and_then(|text| rota_core::parse_duration(&text))
        .map(|ms| ms as f64)
}

/// Milliseconds as events say them: "10 minutes", "90 seconds", "1500 ms".
#[wasm_bindgen(js_name = formatDuration)]
pub fn format_duration(ms: f64) -> String {
    let ms = if ms.is_finite() && ms > 0.0 {
        ms.round() as u64
    } else {
        0
    };
    rota_core::format_duration(ms)
}

/// The options a policy takes, with their defaults.
#[wasm_bindgen(js_name = defaultOptions)]
pub fn default_options() -> JsResult<JsValue> {
    let text = to_json_text(&rota_core::Options::default());
    let mut options: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    // Left out of the options' JSON at its default (an exported state reads as before),
    // but an option like the others.
    options["minEventLevel"] = Value::from("debug");
    Ok(to_js_value(&options))
}

/// The seed's five roles: a document's role list when it declares none.
#[wasm_bindgen(js_name = defaultRoles)]
pub fn default_roles() -> Array {
    let roles = Array::new();
    for role in rota_core::document::DEFAULT_ROLES {
        roles.push(&JsValue::from_str(role));
    }
    roles
}

/// The state file's rule (`rota_core::state_file::answer`): a request as JSON text
/// (`{"op": "parse"|"restore"|"merge"|"render", ...}`), the answer as JSON text
/// (`{"ok": ...}` or `{"error": {code, message}}`). Never throws. The package's
/// `stateFileMerge`/`stateFileRestore` wrap it (`npm/src/state-rule.js`).
#[wasm_bindgen(js_name = stateFileJson)]
pub fn state_file_json(request: &str) -> String {
    rota_core::state_file::answer(request)
}

/// This build's crate version.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// The package's own calls: one-call creation from two rosters, and the binary step
/// behind its `Policy#handle` (`binary.rs`; the same answers as `handleJson`).
#[wasm_bindgen(js_class = Policy)]
impl JsPolicy {
    /// `merge(user, repo)` and `new Policy` of the result in one call (the package's
    /// `Roster.create` when it narrows nothing): the merged document never crosses
    /// into JS and back as text (issue 15: half of `Roster.create` at 10,000
    /// executors). Throws the errors `merge` and the constructor throw.
    #[wasm_bindgen(js_name = __fromRosters)]
    pub fn from_rosters(user: JsValue, repo: JsValue, options: JsValue) -> JsResult<JsPolicy> {
        let build = || -> Result<CorePolicy, Error> {
            let user = read(&user, "the user roster")?;
            let repo = read(&repo, "the repository roster")?;
            // Taken: the entries move into the merged document (one copy in memory).
            let document = rota_core::merge_owned(user, repo)
                .map_err(|violations| Error::InvalidDocument { violations })?;
            let options = parse_options(&read(&options, "options")?)?;
            CorePolicy::from_value(document, options)
        };
        build().map(JsPolicy::wrap).map_err(|e| to_js_error(&e))
    }
}

/// The binary step behind the Node module's `Policy#handle` (`binary.rs`; the same
/// answers as `handleJson`). The browser's module leaves it out (it costs about 3 KB
/// of its download, gzipped): its `handle` takes the JSON step for every input.
#[cfg(feature = "binary")]
#[wasm_bindgen(js_class = Policy)]
impl JsPolicy {
    /// The binary step's buffer, grown to at least `size` bytes: its address in the
    /// module's memory. Used by the package's `handle` (`npm/src/binary.js`).
    #[wasm_bindgen(js_name = __ioBuffer)]
    pub fn io_buffer(&mut self, size: u32) -> u32 {
        let size = (size as usize).max(binary::header::OUTPUTS);
        if self.io.len() < size {
            self.io.resize(size, 0);
        }
        self.io.as_ptr() as usize as u32
    }

    /// Feeds the input JS wrote in the first `len` bytes of the buffer and writes the
    /// answer over it (the format: `binary.rs`); returns the buffer's address, which
    /// moves when the answer needs a larger buffer. Never throws.
    ///
    /// `min_level` (a level of `binary::level`) leaves out of the answer the events
    /// below it: the core does not build them (`set_event_floor`; every decision, the
    /// state and exports are the same), for a driver with nobody listening for them
    /// (the Roster). Its bit `binary::step::NO_PERSIST` leaves out the `persist`
    /// outputs too, for a driver with no state file (it would drop them unread). The
    /// public `Policy#handle` passes `debug`: every output.
    #[wasm_bindgen(js_name = __step)]
    pub fn step(&mut self, len: u32, min_level: u8) -> u32 {
        let (min_level, no_persist) = binary::step_level(min_level);
        let input = self.io.get(..len as usize).and_then(binary::read_input);
        self.strings.answering(input.as_ref());
        // Not built at all in the core (for this input only: `handleJson` answers whole).
        self.inner.set_event_floor(min_level);
        let result = input.map(|input| self.inner.handle(input));
        self.inner.set_event_floor(Level::Debug);
        match result {
            // Not read, or refused (nothing changed): the JSON step feeds it again and
            // words the error, so every error has the JSON step's text.
            None | Some(Err(_)) => {
                Writer::new(&mut self.io, &mut self.strings, binary::status::REFUSED)
                    .finish(0, None)
            }
            Some(Ok(())) => {
                let mut writer =
                    Writer::new(&mut self.io, &mut self.strings, binary::status::OUTPUTS);
                let mut count = 0;
                // The grant just written (its event repeats the grant's fields).
                let mut last_grant = None;
                while let Some(output) = self.inner.poll_output_ref() {
                    let skipped = match &output {
                        OutputRef::Output(Output::Event { level, .. })
                        | OutputRef::GrantedEvent(level, _)
                        | OutputRef::Released { level, .. } => *level < min_level,
                        OutputRef::Output(Output::Persist { .. }) => no_persist,
                        _ => false,
                    };
                    if skipped {
                        continue;
                    }
                    writer.output_ref(&output, &mut last_grant);
                    count += 1;
                }
                writer.finish(count, self.inner.poll_timeout());
            }
        }
        self.io.as_ptr() as usize as u32
    }

    /// Forgets the strings the binary step's answers share with JS (JS lost its
    /// copies: it could not read an answer to the end).
    #[wasm_bindgen(js_name = __ioReset)]
    pub fn io_reset(&mut self) {
        self.strings.clear();
    }
}

/// The module's memory (the binary step's buffer lives in it).
#[cfg(feature = "binary")]
#[wasm_bindgen(js_name = __memory)]
pub fn wasm_memory() -> JsValue {
    wasm_bindgen::memory()
}

/// The binary step's format (`binary.rs`'s table) as JSON text, which
/// `npm/src/binary.js` reads once at load: every tag, flag, offset and slot it uses.
#[cfg(feature = "binary")]
#[wasm_bindgen(js_name = __wireFormat)]
pub fn wire_format() -> String {
    binary::format_json()
}
