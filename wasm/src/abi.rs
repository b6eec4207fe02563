//! The plain ABI: bytes in, bytes out, zero imports.
//!
//! For hosts that are not JavaScript (the wasmtime host in `host-wasmtime/`). Every
//! argument and every result is UTF-8 JSON in the same schema as the JS build
//! (`rota_core::json`), so one set of conformance vectors tests both.
//!
//! # Calling convention
//!
//! - `rota_abi_version() -> u32`: `major << 16 | minor`. A host refuses a module whose
//!   major differs from its own, or whose minor is lower.
//! - `alloc(len) -> ptr` / `dealloc(ptr, len)`: the host allocates a buffer in guest
//!   memory, writes its JSON there and passes `(ptr, len)`. The guest only reads the
//!   buffer during the call; the host frees it (or reuses it) afterwards.
//! - Every other export returns a `u64`: `ptr << 32 | len` of a result buffer that the
//!   guest owns. It stays valid until the next ABI call that returns a result; the host
//!   copies it out at once and never frees it.
//! - A result is `{"error": {"code", "message", "violations"?}}` on failure, else:
//!   - `rota_create(doc, opts)` and `rota_import(state)`: `{"handle": n}`;
//!   - `rota_handle(h, input)`: `{"outputs": [...], "wakeAt": n|null}` (exactly
//!     [`rota_core::json::step`]);
//!   - `rota_query(h, query)`, `rota_export(h)`, `rota_validate(doc, opts)`:
//!     `{"ok": value}`.
//! - `rota_destroy(h) -> u32`: 1 when the handle existed.
//! - `rota_state_file(request)` (minor 1): the state file's rule
//!   ([`rota_core::state_file::answer`]: `{"op": "parse"|"restore"|"merge"|"render",
//!   ...}`), answered `{"ok": ...}` or `{"error"}` with no policy handle.
//! - `rota_check(doc, opts)` (minor 2): `rota_validate`'s violations and the warnings
//!   of a document that stays valid (a literal secret in `env`,
//!   [`rota_core::secrets::warnings`]): `{"ok": {"violations": [...], "warnings":
//!   [...]}}`. `rota_validate` answers as before.
//!
//! # Queries
//!
//! `rota_query` takes `{"query": name, ...}`:
//!
//! | query | arguments | value |
//! |---|---|---|
//! | `snapshot` | | the [`rota_core::Snapshot`] |
//! | `explain` | `request`: an [`rota_core::ExplainRequest`] | an [`rota_core::Explanation`] |
//! | `plan` | `document` | a [`rota_core::status::Plan`] |
//! | `available` | `role` | free slots for the role now |
//! | `slots` | `role` | configured slots for the role |
//! | `canEverServe` | `role`, `avoid`? | a boolean |
//! | `capacity` | `role` | slots for the role on the executors in the round, held or not |
//! | `independenceBlocked` | `role`, `avoid`? | `"held"`, `"out"` or null |
//! | `coderHeld` | `role`, `avoid`? | a boolean: `independenceBlocked` is `"held"` |
//! | `effortOf` | `executor`, `role` | the effort the role runs at on the executor (`"low"`, `"medium"`, `"high"`, `"max"`), or `null` when it sets none ([`rota_core::Policy::effort_of`]) |
//! | `document` | | the running document as written |
//! | `now` | | the last input's time |
//! | `classify` | `failure`: a report's failure (facts or a kind); `now`? (epoch ms: when a reset time in its message is read; default the last input's) | `{kind, rule, resetAt?}`: the kind the core gives it with this document's signals ([`rota_core::classify`]) |
//! | `stateHash` | | the state's hash, 16 hex digits ([`rota_core::Policy::state_hash`]): replicas that folded the same inputs agree on it |
//! | `probesInFlight` | | the `probe` outputs of the probes in flight ([`rota_core::Policy::probes_in_flight`]): what a shared roster's new leader redoes |
//! | `duplicateIds` | `document`, `side` | the executor ids a roster lists twice, as violations at `<side>: executors[i].id` ([`rota_core::duplicate_ids`]: refused before a merge); the policy is not read |
//! | `log` | `request`: `{"op": ...}` | a shared log's rule ([`rota_core::log::answer`]: the genesis, an entry, the text fed, who acts); the policy is not read |
//!
//! Version 1.1 added the `classify` query; version 1.2 the `stateHash` query; version
//! 1.3 the `probesInFlight`, `log` and `duplicateIds` queries.
//!
//! `rota_export(h)` gives everything a live swap needs (`Policy::export_state`);
//! `rota_import(state)` builds a policy from it in this module.
//!
//! # Safety
//!
//! The module imports nothing. A panic aborts (the `wasm-speed` profile), which a host sees
//! as a trap; the core never panics on input, so that is a bug, not a code path.

use std::cell::RefCell;
use std::collections::BTreeMap;

use rota_core::json::{parse_options, step, step_str};
use rota_core::{Error, ExplainRequest, Failure, Policy};
use serde_json::{json, Value};

/// ABI version, major in the high 16 bits, minor in the low 16 bits.
pub const ABI_VERSION: u32 = (1 << 16) | 3;

/// Live policies by handle, and the result buffer of the last call.
#[derive(Default)]
struct Abi {
    policies: BTreeMap<u32, Policy>,
    next_handle: u32,
    result: Vec<u8>,
}

thread_local! {
    static ABI: RefCell<Abi> = RefCell::new(Abi::default());
}

/// Errors of the ABI layer itself (not the core's): a stable code and a message.
fn abi_error(code: &str, message: impl Into<String>) -> Value {
    json!({ "error": { "code": code, "message": message.into() } })
}

fn core_error(error: &Error) -> Value {
    json!({ "error": error.to_json() })
}

fn parse_json(bytes: &[u8], what: &str) -> Result<Value, Value> {
    serde_json::from_slice(bytes).map_err(|e| {
        core_error(&Error::InvalidInput {
            message: format!("{what} is not JSON: {e}"),
        })
    })
}

/// Parses a JSON argument where an empty buffer means `null`.
fn parse_optional(bytes: &[u8], what: &str) -> Result<Value, Value> {
    if bytes.is_empty() {
        Ok(Value::Null)
    } else {
        parse_json(bytes, what)
    }
}

fn insert(policy: Policy) -> Value {
    ABI.with(|abi| {
        let mut abi = abi.borrow_mut();
        abi.next_handle = abi.next_handle.wrapping_add(1).max(1);
        while abi.policies.contains_key(&abi.next_handle) {
            abi.next_handle = abi.next_handle.wrapping_add(1).max(1);
        }
        let handle = abi.next_handle;
        abi.policies.insert(handle, policy);
        json!({ "handle": handle })
    })
}

fn with_policy(handle: u32, f: impl FnOnce(&mut Policy) -> Value) -> Value {
    ABI.with(|abi| match abi.borrow_mut().policies.get_mut(&handle) {
        Some(policy) => f(policy),
        None => abi_error("UNKNOWN_HANDLE", format!("no policy with handle {handle}")),
    })
}

fn ok<T: serde::Serialize>(value: Result<T, Error>) -> Value {
    match value {
        Ok(value) => match serde_json::to_value(value) {
            Ok(value) => json!({ "ok": value }),
            Err(e) => abi_error("INTERNAL", format!("cannot serialize a result: {e}")),
        },
        Err(error) => core_error(&error),
    }
}

fn string_arg(query: &Value, key: &str) -> Result<String, Error> {
    query
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| Error::InvalidInput {
            message: format!("the query needs a string `{key}`"),
        })
}

fn field<T: serde::de::DeserializeOwned>(query: &Value, key: &str) -> Result<T, Error> {
    serde_json::from_value(query.get(key).cloned().unwrap_or(Value::Null)).map_err(|e| {
        Error::InvalidInput {
            message: format!("query field `{key}`: {e}"),
        }
    })
}

// ---- the operations, as safe functions over byte slices (tested natively) -------------

/// `rota_create`: a policy from a document and options (empty options = defaults).
pub fn create(document: &[u8], options: &[u8]) -> Value {
    let document = match parse_json(document, "the document") {
        Ok(value) => value,
        Err(error) => return error,
    };
    let options = match parse_optional(options, "the options")
        .and_then(|value| parse_options(&value).map_err(|e| core_error(&e)))
    {
        Ok(options) => options,
        Err(error) => return error,
    };
    match Policy::new(&document, options) {
        Ok(policy) => insert(policy),
        Err(error) => core_error(&error),
    }
}

/// `rota_import`: a policy from an exported state.
pub fn import(state: &[u8]) -> Value {
    match parse_json(state, "the state") {
        Ok(state) => match Policy::import_state(&state) {
            Ok(policy) => insert(policy),
            Err(error) => core_error(&error),
        },
        Err(error) => error,
    }
}

/// `rota_destroy`.
pub fn destroy(handle: u32) -> bool {
    ABI.with(|abi| abi.borrow_mut().policies.remove(&handle).is_some())
}

/// `rota_handle`: one input, every output.
pub fn handle(handle: u32, input: &[u8]) -> Value {
    match parse_json(input, "the input") {
        Ok(input) => with_policy(handle, |policy| step(policy, &input)),
        Err(error) => error,
    }
}

/// `rota_handle`: the canonical answer text of `rota_core::json::step_str`, so a
/// wasmtime host reads the same bytes as every other host.
pub fn handle_text(handle: u32, input: &[u8]) -> String {
    let Ok(text) = std::str::from_utf8(input) else {
        return core_error(&Error::InvalidInput {
            message: "the input is not UTF-8 text".into(),
        })
        .to_string();
    };
    ABI.with(|abi| match abi.borrow_mut().policies.get_mut(&handle) {
        Some(policy) => step_str(policy, text),
        None => abi_error("UNKNOWN_HANDLE", format!("no policy with handle {handle}")).to_string(),
    })
}

/// `rota_export`.
pub fn export(handle: u32) -> Value {
    with_policy(handle, |policy| json!({ "ok": policy.export_state() }))
}

/// `rota_query`: a read-only question (the table in the module docs).
pub fn query(handle: u32, query: &[u8]) -> Value {
    let query = match parse_json(query, "the query") {
        Ok(query) => query,
        Err(error) => return error,
    };
    let name = query.get("query").and_then(Value::as_str).unwrap_or("");
    with_policy(handle, |policy| match name {
        "snapshot" => ok(Ok(policy.snapshot())),
        "explain" => {
            ok(field::<ExplainRequest>(&query, "request")
                .and_then(|request| policy.explain(&request)))
        }
        "plan" => ok(policy.plan(query.get("document").unwrap_or(&Value::Null))),
        "available" => ok(string_arg(&query, "role").and_then(|role| policy.available(&role))),
        "slots" => ok(string_arg(&query, "role").and_then(|role| policy.slots(&role))),
        "canEverServe" => ok(string_arg(&query, "role").and_then(|role| {
            let avoid: Vec<String> = if query.get("avoid").is_some() {
                field(&query, "avoid")?
            } else {
                Vec::new()
            };
            policy.can_ever_serve(&role, &avoid)
        })),
        "capacity" => ok(string_arg(&query, "role").and_then(|role| policy.capacity(&role))),
        "independenceBlocked" | "coderHeld" => ok(string_arg(&query, "role").and_then(|role| {
            let avoid: Vec<String> = if query.get("avoid").is_some() {
                field(&query, "avoid")?
            } else {
                Vec::new()
            };
            let blocked = policy.independence_blocked(&role, &avoid)?;
            Ok(match name {
                "coderHeld" => json!(blocked == Some(rota_core::Because::Held)),
                _ => json!(blocked),
            })
        })),
        "effortOf" => ok(string_arg(&query, "executor")
            .and_then(|executor| policy.effort_of(&executor, &string_arg(&query, "role")?))),
        "document" => ok(Ok(policy.document())),
        "now" => ok(Ok(policy.now())),
        "stateHash" => ok(Ok(policy.state_hash())),
        "probesInFlight" => ok(Ok(policy.probes_in_flight())),
        "log" => rota_core::log::answer(query.get("request").unwrap_or(&Value::Null)),
        "duplicateIds" => ok(string_arg(&query, "side").map(|side| {
            rota_core::duplicate_ids(query.get("document").unwrap_or(&Value::Null), &side)
        })),
        "classify" => match Failure::from_json(query.get("failure").unwrap_or(&Value::Null)) {
            Ok(failure) => {
                let now = query.get("now").and_then(Value::as_u64);
                let now = now.unwrap_or_else(|| policy.now());
                json!({ "ok": policy.classify_at(&failure, now).to_json() })
            }
            Err(e) => core_error(&Error::InvalidInput {
                message: format!("query field `failure`: {e}"),
            }),
        },
        other => abi_error(
            "UNKNOWN_QUERY",
            format!(
                "unknown query '{other}' (snapshot, explain, plan, available, slots, \
                 canEverServe, capacity, independenceBlocked, coderHeld, effortOf, document, now, \
                 classify, stateHash, probesInFlight, log, duplicateIds)"
            ),
        ),
    })
}

/// `rota_validate`: every violation of a document (`[]` when valid), with the options'
/// `kinds` checked.
pub fn validate(document: &[u8], options: &[u8]) -> Value {
    match check_of(document, options) {
        Ok(check) => ok(Ok(check.violations)),
        Err(error) => error,
    }
}

/// `rota_check` (ABI 1.2): `{"violations", "warnings"}`, `rota_validate`'s violations
/// and the warnings beside them.
pub fn check(document: &[u8], options: &[u8]) -> Value {
    match check_of(document, options) {
        Ok(check) => ok(Ok(
            json!({ "violations": check.violations, "warnings": check.warnings }),
        )),
        Err(error) => error,
    }
}

fn check_of(document: &[u8], options: &[u8]) -> Result<rota_core::Check, Value> {
    let document = parse_json(document, "the document")?;
    let options = parse_optional(options, "the options")
        .and_then(|value| parse_options(&value).map_err(|e| core_error(&e)))?;
    Ok(rota_core::check(&document, options.kinds.as_deref()))
}

/// `rota_state_file`: the state file's rule, as text.
pub fn state_file(request: &[u8]) -> String {
    match std::str::from_utf8(request) {
        Ok(text) => rota_core::state_file::answer(text),
        Err(_) => core_error(&Error::InvalidInput {
            message: "the state file request is not UTF-8 text".into(),
        })
        .to_string(),
    }
}

// ---- the exports ---------------------------------------------------------------------

/// Stores `value` as the result buffer and returns `ptr << 32 | len`.
fn publish(value: &Value) -> u64 {
    publish_bytes(value.to_string().into_bytes())
}

fn publish_bytes(bytes: Vec<u8>) -> u64 {
    ABI.with(|abi| {
        let mut abi = abi.borrow_mut();
        abi.result = bytes;
        pack(abi.result.as_ptr(), abi.result.len())
    })
}

fn pack(ptr: *const u8, len: usize) -> u64 {
    ((ptr as usize as u64) << 32) | (len as u64 & 0xffff_ffff)
}

/// Reads a host-written buffer.
///
/// # Safety
/// `(ptr, len)` must be a buffer the host wrote through [`alloc`] (or null/0).
unsafe fn arg<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: the caller passes a live buffer of `len` bytes from `alloc`.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

#[no_mangle]
pub extern "C" fn rota_abi_version() -> u32 {
    ABI_VERSION
}

/// A buffer of `len` bytes for the host to write into.
#[no_mangle]
pub extern "C" fn alloc(len: usize) -> *mut u8 {
    let mut buffer = std::mem::ManuallyDrop::new(Vec::<u8>::with_capacity(len));
    buffer.as_mut_ptr()
}

/// Frees a buffer from [`alloc`].
///
/// # Safety
/// `(ptr, len)` must come from one `alloc(len)` call and be freed once.
#[no_mangle]
pub unsafe extern "C" fn dealloc(ptr: *mut u8, len: usize) {
    if !ptr.is_null() {
        // SAFETY: `ptr` came from `alloc(len)`: a Vec of capacity `len`, length 0.
        drop(unsafe { Vec::from_raw_parts(ptr, 0, len) });
    }
}

/// # Safety
/// The buffers must come from [`alloc`].
#[no_mangle]
pub unsafe extern "C" fn rota_create(
    doc_ptr: *const u8,
    doc_len: usize,
    opts_ptr: *const u8,
    opts_len: usize,
) -> u64 {
    // SAFETY: forwarded from the caller.
    let (document, options) = unsafe { (arg(doc_ptr, doc_len), arg(opts_ptr, opts_len)) };
    publish(&create(document, options))
}

/// # Safety
/// The buffer must come from [`alloc`].
#[no_mangle]
pub unsafe extern "C" fn rota_import(ptr: *const u8, len: usize) -> u64 {
    // SAFETY: forwarded from the caller.
    publish(&import(unsafe { arg(ptr, len) }))
}

#[no_mangle]
pub extern "C" fn rota_destroy(handle_id: u32) -> u32 {
    u32::from(destroy(handle_id))
}

/// # Safety
/// The buffer must come from [`alloc`].
#[no_mangle]
pub unsafe extern "C" fn rota_handle(handle_id: u32, ptr: *const u8, len: usize) -> u64 {
    // SAFETY: forwarded from the caller.
    publish_bytes(handle_text(handle_id, unsafe { arg(ptr, len) }).into_bytes())
}

/// # Safety
/// The buffer must come from [`alloc`].
#[no_mangle]
pub unsafe extern "C" fn rota_query(handle_id: u32, ptr: *const u8, len: usize) -> u64 {
    // SAFETY: forwarded from the caller.
    publish(&query(handle_id, unsafe { arg(ptr, len) }))
}

/// # Safety
/// The buffer must come from [`alloc`].
#[no_mangle]
pub unsafe extern "C" fn rota_state_file(ptr: *const u8, len: usize) -> u64 {
    // SAFETY: forwarded from the caller.
    publish_bytes(state_file(unsafe { arg(ptr, len) }).into_bytes())
}

#[no_mangle]
pub extern "C" fn rota_export(handle_id: u32) -> u64 {
    publish(&export(handle_id))
}

/// # Safety
/// The buffers must come from [`alloc`].
#[no_mangle]
pub unsafe extern "C" fn rota_validate(
    doc_ptr: *const u8,
    doc_len: usize,
    opts_ptr: *const u8,
    opts_len: usize,
) -> u64 {
    // SAFETY: forwarded from the caller.
    let (document, options) = unsafe { (arg(doc_ptr, doc_len), arg(opts_ptr, opts_len)) };
    publish(&validate(document, options))
}

/// # Safety
/// The buffers must come from [`alloc`].
#[no_mangle]
pub unsafe extern "C" fn rota_check(
    doc_ptr: *const u8,
    doc_len: usize,
    opts_ptr: *const u8,
    opts_len: usize,
) -> u64 {
    // SAFETY: forwarded from the caller.
    let (document, options) = unsafe { (arg(doc_ptr, doc_len), arg(opts_ptr, opts_len)) };
    publish(&check(document, options))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{"executors":[{"id":"a","harness":"pi","roles":["coder"],"slots":2}]}"#;

    fn handle_of(value: &Value) -> u32 {
        let h = value["handle"].as_u64().expect("a handle");
        u32::try_from(h).expect("fits")
    }

    #[test]
    fn create_then_step_matches_the_shared_boundary() {
        let h = handle_of(&create(DOC.as_bytes(), b""));
        let input = r#"{"type":"tick","now":5}"#;
        let via_abi = handle(h, input.as_bytes());
        let mut native =
            Policy::new(&serde_json::from_str(DOC).unwrap(), Default::default()).unwrap();
        let direct = step(&mut native, &serde_json::from_str(input).unwrap());
        assert_eq!(via_abi.to_string(), direct.to_string());
        assert!(destroy(h));
        assert!(!destroy(h));
    }

    #[test]
    fn errors_are_json_with_codes() {
        assert_eq!(create(b"{", b"")["error"]["code"], "INVALID_INPUT");
        assert_eq!(handle(9999, b"{}")["error"]["code"], "UNKNOWN_HANDLE");
        let h = handle_of(&create(DOC.as_bytes(), b"null"));
        assert_eq!(handle(h, b"not json")["error"]["code"], "INVALID_INPUT");
        assert_eq!(
            query(h, br#"{"query":"nope"}"#)["error"]["code"],
            "UNKNOWN_QUERY"
        );
        assert_eq!(
            query(h, br#"{"query":"slots"}"#)["error"]["code"],
            "INVALID_INPUT"
        );
        assert_eq!(
            create(DOC.as_bytes(), b"{\"bogus\":1}")["error"]["code"],
            "INVALID_INPUT"
        );
    }

    #[test]
    fn validate_lists_violations() {
        let value = validate(br#"{"executors":[{"id":"","roles":[]}]}"#, b"");
        assert!(
            value["ok"].as_array().is_some_and(|v| !v.is_empty()),
            "{value}"
        );
        assert_eq!(validate(DOC.as_bytes(), b"")["ok"], json!([]));
    }

    #[test]
    fn check_carries_the_warnings_validate_leaves_out() {
        let doc = r#"{"executors":[{"id":"a","harness":"pi","roles":["coder"],"env":{"API_KEY":"sk-ant-api03-secretsecret"}}]}"#;
        assert_eq!(validate(doc.as_bytes(), b"")["ok"], json!([]));
        let answer = check(doc.as_bytes(), b"");
        assert_eq!(answer["ok"]["violations"], json!([]), "{answer}");
        let warnings = answer["ok"]["warnings"].as_array().expect("warnings");
        assert_eq!(warnings.len(), 1, "{answer}");
        assert_eq!(warnings[0]["path"], "executors[0].env.API_KEY");
        let bad = check(br#"{"executors":[{"id":"","roles":[]}]}"#, b"");
        assert!(bad["ok"]["violations"]
            .as_array()
            .is_some_and(|v| !v.is_empty()));
        assert_eq!(check(b"{", b"")["error"]["code"], "INVALID_INPUT");
    }

    #[test]
    fn classify_uses_the_documents_signals() {
        let doc = r#"{"signals":{"outage":["service unavailable"]},"executors":[{"id":"a","harness":"pi","roles":["coder"]}]}"#;
        let h = handle_of(&create(doc.as_bytes(), b""));
        let answer = query(
            h,
            br#"{"query":"classify","failure":{"tag":"ProviderError","message":"503 Service Unavailable"}}"#,
        );
        assert_eq!(
            answer,
            json!({"ok": {"kind": "outage", "rule": "outageSignal"}})
        );
        let answer = query(h, br#"{"query":"classify","failure":{"status":99}}"#);
        assert_eq!(answer["error"]["code"], "INVALID_INPUT", "{answer}");
    }

    #[test]
    fn pack_splits_pointer_and_length() {
        let packed = pack(std::ptr::null::<u8>().wrapping_add(0x10), 7);
        assert_eq!(packed >> 32, 0x10);
        assert_eq!(packed & 0xffff_ffff, 7);
    }
}
