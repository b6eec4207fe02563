//! The policy in its sandbox, synchronously: a [`Guest`] plus the last good state.
//!
//! A trap or a deadline overrun in the guest never takes the host down. The runtime
//! keeps a checkpoint (the guest's exported state) and a journal of the inputs
//! accepted since. A new checkpoint is taken when the journal has grown to four times
//! the checkpoint's size (so exporting costs a bounded share of the input volume), or
//! after `checkpoint_every` inputs, whichever comes first. When a call fails it
//! drops the instance, instantiates the module afresh, imports the checkpoint, replays
//! the journal (the core is deterministic, so this rebuilds the exact state before the
//! failed call), reports both as events, and fails only that one call.

use rota_core::{ExplainRequest, Explanation, Level, Plan, Snapshot, Violation};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::engine::PolicyModule;
use crate::error::{HostError, Result};
use crate::event::Event;
use crate::guest::{CallError, Guest};

/// One step's result: every output, and when to wake the core next.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The outputs, in order.
    pub outputs: Vec<Value>,
    /// When to feed the next `tick` (epoch ms).
    pub wake_at: Option<u64>,
}

impl Step {
    pub(crate) fn from_result(result: &Value) -> Result<Step> {
        if let Some(error) = result.get("error") {
            return Err(HostError::from_policy_json(error));
        }
        let outputs = result
            .get("outputs")
            .and_then(Value::as_array)
            .cloned()
            .ok_or_else(|| HostError::Abi("a step result without `outputs`".into()))?;
        let wake_at = result.get("wakeAt").and_then(Value::as_u64);
        Ok(Step { outputs, wake_at })
    }
}

/// The default largest number of accepted inputs between two checkpoints.
pub const CHECKPOINT_EVERY: usize = 4096;

/// A checkpoint is due when the journal holds this many times its size in bytes.
const JOURNAL_TO_CHECKPOINT_RATIO: usize = 4;

/// One policy in its sandbox: a guest instance, its last checkpoint and the journal since.
pub struct PolicyRuntime {
    module: PolicyModule,
    /// The live instance and its policy handle; `None` after a failed restore.
    live: Option<(Guest, u32)>,
    /// The exported state (JSON text) the journal starts from.
    checkpoint: Vec<u8>,
    /// Inputs accepted since the checkpoint, back to back in one buffer...
    journal: Vec<u8>,
    /// ...and where each one ends in it.
    journal_ends: Vec<usize>,
    checkpoint_every: usize,
    recoveries: u64,
    events: Vec<Event>,
}

impl std::fmt::Debug for PolicyRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyRuntime")
            .field("module", &self.module)
            .field("journal", &self.journal_ends.len())
            .field("recoveries", &self.recoveries)
            .finish_non_exhaustive()
    }
}

fn handle_of(result: &Value) -> Result<u32> {
    if let Some(error) = result.get("error") {
        return Err(HostError::from_policy_json(error));
    }
    result
        .get("handle")
        .and_then(Value::as_u64)
        .and_then(|h| u32::try_from(h).ok())
        .ok_or_else(|| HostError::Abi(format!("expected a handle, got {result}")))
}

/// `{"ok": value}` → value; `{"error"}` → the policy's error.
fn ok_of(result: Value) -> Result<Value> {
    match result {
        Value::Object(mut map) => {
            if let Some(error) = map.get("error") {
                return Err(HostError::from_policy_json(error));
            }
            map.remove("ok")
                .ok_or_else(|| HostError::Abi("a result with neither `ok` nor `error`".into()))
        }
        other => Err(HostError::Abi(format!(
            "a result that is not an object: {other}"
        ))),
    }
}

fn typed<T: DeserializeOwned>(value: Value, what: &str) -> Result<T> {
    serde_json::from_value(value).map_err(|e| HostError::Abi(format!("{what}: {e}")))
}

impl PolicyRuntime {
    /// A policy from a document and options (JSON; `null` options take the defaults).
    pub fn new(module: PolicyModule, document: &Value, options: &Value) -> Result<PolicyRuntime> {
        let mut guest = module.instantiate()?;
        let result = guest
            .create(
                document.to_string().as_bytes(),
                options.to_string().as_bytes(),
            )
            .map_err(|e| e.into_host("rota_create"))?;
        let handle = handle_of(&result)?;
        Self::started(module, guest, handle)
    }

    /// A policy from a state exported by any module version.
    pub fn from_state(module: PolicyModule, state: &Value) -> Result<PolicyRuntime> {
        let mut guest = module.instantiate()?;
        let result = guest
            .import(state.to_string().as_bytes())
            .map_err(|e| e.into_host("rota_import"))?;
        let handle = handle_of(&result)?;
        Self::started(module, guest, handle)
    }

    fn started(module: PolicyModule, mut guest: Guest, handle: u32) -> Result<PolicyRuntime> {
        let checkpoint = guest
            .export_text(handle)
            .map_err(|e| e.into_host("rota_export"))
            .and_then(|text| state_text(&text))?;
        Ok(PolicyRuntime {
            module,
            live: Some((guest, handle)),
            checkpoint,
            journal: Vec::new(),
            journal_ends: Vec::new(),
            checkpoint_every: CHECKPOINT_EVERY,
            recoveries: 0,
            events: Vec::new(),
        })
    }

    /// The most accepted inputs between checkpoints (at least 1).
    pub fn set_checkpoint_every(&mut self, inputs: usize) {
        self.checkpoint_every = inputs.max(1);
    }

    /// The module it runs.
    pub fn module(&self) -> &PolicyModule {
        &self.module
    }

    /// How many times the guest failed and was restored.
    pub fn recoveries(&self) -> u64 {
        self.recoveries
    }

    /// The host events since the last call (guest failures and restores).
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    fn event(&mut self, event: Event) {
        event.log();
        self.events.push(event);
    }

    /// The live instance, restoring it first if a failure left none.
    fn live(&mut self) -> Result<(&mut Guest, u32)> {
        if self.live.is_none() {
            self.restore()?;
        }
        match self.live.as_mut() {
            Some((guest, handle)) => Ok((guest, *handle)),
            None => Err(HostError::Unrecoverable("no live instance".into())),
        }
    }

    fn restore(&mut self) -> Result<()> {
        let mut guest = self.module.instantiate()?;
        let handle = handle_of(
            &guest
                .import(&self.checkpoint)
                .map_err(|e| e.into_host("rota_import"))?,
        )?;
        let mut start = 0;
        for (index, &end) in self.journal_ends.iter().enumerate() {
            let input = self.journal.get(start..end).unwrap_or_default();
            start = end;
            let result = guest
                .handle_text(handle, input)
                .map_err(|e| e.into_host("rota_handle (replay)"))?;
            if is_error_text(&result) {
                return Err(HostError::Unrecoverable(format!(
                    "replaying input {index} of the journal was rejected: {result}"
                )));
            }
        }
        self.live = Some((guest, handle));
        Ok(())
    }

    /// After a failed call: drop the instance, restore, report; the error for the call.
    fn fail(&mut self, call: &str, error: CallError) -> HostError {
        let error = error.into_host(call);
        if !error.is_guest_failure() {
            return error;
        }
        self.live = None;
        self.recoveries += 1;
        self.event(
            Event::host(Level::Warn, "guestFailed", error.to_string())
                .with("call", call)
                .with("module", self.module.hash()),
        );
        match self.restore() {
            Ok(()) => {
                let replayed = self.journal_ends.len();
                self.event(
                    Event::host(
                        Level::Info,
                        "guestRestored",
                        format!(
                            "policy restored from its last good state ({replayed} inputs replayed)"
                        ),
                    )
                    .with("replayed", replayed),
                );
                error
            }
            Err(restore) => {
                let message = format!("{error}; restore failed: {restore}");
                self.event(Event::host(
                    Level::Warn,
                    "guestRestoreFailed",
                    message.clone(),
                ));
                HostError::Unrecoverable(message)
            }
        }
    }

    /// Feeds one input (JSON text) and returns the guest's result object as it is:
    /// `{"outputs","wakeAt"}` or `{"error"}`. `Err` only when the guest failed.
    pub fn step_value(&mut self, input: &[u8]) -> Result<Value> {
        let result = {
            let (guest, handle) = self.live()?;
            guest.handle(handle, input)
        };
        let result = match result {
            Ok(result) => result,
            Err(error) => return Err(self.fail("rota_handle", error)),
        };
        if result.get("error").is_none() {
            self.journaled(input);
        }
        Ok(result)
    }

    /// Feeds one input; the core's rejection is an error.
    pub fn step(&mut self, input: &Value) -> Result<Step> {
        let result = self.step_value(input.to_string().as_bytes())?;
        Step::from_result(&result)
    }

    /// Feeds one input given as text; returns the guest's result text unparsed (for
    /// byte-for-byte comparisons and benchmarks). Journals like `step_value`.
    pub fn step_text(&mut self, input: &str) -> Result<String> {
        let result = {
            let (guest, handle) = self.live()?;
            guest.handle_text(handle, input.as_bytes())
        };
        match result {
            Ok(text) => {
                if !is_error_text(&text) {
                    self.journaled(input.as_bytes());
                }
                Ok(text)
            }
            Err(error) => Err(self.fail("rota_handle", error)),
        }
    }

    /// Records an accepted input; takes a checkpoint when one is due.
    fn journaled(&mut self, input: &[u8]) {
        self.journal.extend_from_slice(input);
        self.journal_ends.push(self.journal.len());
        if self.journal_ends.len() >= self.checkpoint_every
            || self.journal.len() >= JOURNAL_TO_CHECKPOINT_RATIO * self.checkpoint.len()
        {
            self.checkpoint();
        }
    }

    fn clear_journal(&mut self) {
        self.journal.clear();
        self.journal_ends.clear();
    }

    /// Drops the live instance and rebuilds it from the last good state (checkpoint +
    /// journal), as after a failure. Sheds a grown linear memory; tests use it to
    /// check that a restore rebuilds the exact state.
    pub fn restart(&mut self) -> Result<()> {
        self.live = None;
        self.restore()
    }

    /// Inputs accepted since the last checkpoint.
    pub fn journal_len(&self) -> usize {
        self.journal_ends.len()
    }

    /// Takes a checkpoint now: the journal empties. The state stays the guest's text
    /// (it only ever goes back into a guest), so the host neither parses nor writes it.
    pub fn checkpoint(&mut self) {
        match self.export_text() {
            Ok(state) => {
                self.checkpoint = state;
                self.clear_journal();
            }
            Err(error) => tracing::warn!(target: "rota::host", %error, "checkpoint failed"),
        }
    }

    /// The exported state as the guest wrote it.
    fn export_text(&mut self) -> Result<Vec<u8>> {
        let result = {
            let (guest, handle) = self.live()?;
            guest.export_text(handle)
        };
        match result {
            Ok(text) => state_text(&text),
            Err(error) => Err(self.fail("rota_export", error)),
        }
    }

    /// A read-only query (`{"query": ...}`, see the ABI); the value.
    pub fn query(&mut self, query: &Value) -> Result<Value> {
        let result = {
            let (guest, handle) = self.live()?;
            guest.query(handle, query.to_string().as_bytes())
        };
        match result {
            Ok(result) => ok_of(result),
            Err(error) => Err(self.fail("rota_query", error)),
        }
    }

    /// The core's snapshot, as JSON.
    pub fn snapshot_json(&mut self) -> Result<Value> {
        self.query(&json!({ "query": "snapshot" }))
    }

    /// The kind the guest gives a failure with the running document's signals:
    /// `{"kind", "rule"}` (the ABI's `classify` query).
    pub fn classify(&mut self, failure: &rota_core::Failure) -> Result<Value> {
        self.query(&json!({ "query": "classify", "failure": failure }))
    }

    /// [`PolicyRuntime::classify`], a reset time in the message (`resetTime:
    /// "message"`) read at `now_ms` rather than at the last input's time:
    /// `{"kind", "rule", "resetAt"?}`.
    pub fn classify_at(&mut self, failure: &rota_core::Failure, now_ms: u64) -> Result<Value> {
        self.query(&json!({ "query": "classify", "failure": failure, "now": now_ms }))
    }

    /// The core's snapshot.
    pub fn snapshot(&mut self) -> Result<Snapshot> {
        typed(self.snapshot_json()?, "snapshot")
    }

    /// Why each executor can or cannot take the request now.
    pub fn explain(&mut self, request: &ExplainRequest) -> Result<Explanation> {
        let value = self.query(&json!({ "query": "explain", "request": request }))?;
        typed(value, "explain")
    }

    /// What a reload to `document` would do (changes nothing).
    pub fn plan(&mut self, document: &Value) -> Result<Plan> {
        let value = self.query(&json!({ "query": "plan", "document": document }))?;
        typed(value, "plan")
    }

    /// Free slots for `role` now.
    pub fn available(&mut self, role: &str) -> Result<u32> {
        typed(
            self.query(&json!({ "query": "available", "role": role }))?,
            "available",
        )
    }

    /// Configured slots for `role`.
    pub fn slots(&mut self, role: &str) -> Result<u32> {
        typed(
            self.query(&json!({ "query": "slots", "role": role }))?,
            "slots",
        )
    }

    /// Slots for `role` on the executors in the round, held or not.
    pub fn capacity(&mut self, role: &str) -> Result<u32> {
        let query = json!({ "query": "capacity", "role": role });
        typed(self.query(&query)?, "capacity")
    }

    /// Why a request for `role` outside `avoid` cannot be served by a call ending:
    /// `Held`, `Out`, or `None`.
    pub fn independence_blocked(
        &mut self,
        role: &str,
        avoid: &[String],
    ) -> Result<Option<rota_core::Because>> {
        let query = json!({ "query": "independenceBlocked", "role": role, "avoid": avoid });
        typed(self.query(&query)?, "independenceBlocked")
    }

    /// Whether an executor outside `avoid` could ever serve `role`.
    pub fn can_ever_serve(&mut self, role: &str, avoid: &[String]) -> Result<bool> {
        let query = json!({ "query": "canEverServe", "role": role, "avoid": avoid });
        typed(self.query(&query)?, "canEverServe")
    }

    /// The effort `role` runs at on `executor` (its `effort`), or `None` when it sets
    /// none (the ABI's `effortOf` query).
    pub fn effort_of(&mut self, executor: &str, role: &str) -> Result<Option<String>> {
        let query = json!({ "query": "effortOf", "executor": executor, "role": role });
        typed(self.query(&query)?, "effortOf")
    }

    /// The state's hash, 16 hex digits (the ABI's `stateHash` query, minor 2):
    /// replicas that folded the same inputs agree on it.
    pub fn state_hash(&mut self) -> Result<String> {
        typed(self.query(&json!({ "query": "stateHash" }))?, "stateHash")
    }

    /// The running document as written.
    pub fn document(&mut self) -> Result<Value> {
        self.query(&json!({ "query": "document" }))
    }

    /// Every violation of `document` (none when valid), by this module's rules.
    pub fn validate(&mut self, document: &Value, options: &Value) -> Result<Vec<Violation>> {
        let result = {
            let (guest, _) = self.live()?;
            guest.validate(
                document.to_string().as_bytes(),
                options.to_string().as_bytes(),
            )
        };
        match result {
            Ok(result) => typed(ok_of(result)?, "validate"),
            Err(error) => Err(self.fail("rota_validate", error)),
        }
    }

    /// `validate`'s violations and the warnings beside them (a literal secret in
    /// `env`), by this module's rules (`rota_check`).
    pub fn check(&mut self, document: &Value, options: &Value) -> Result<rota_core::Check> {
        let result = {
            let (guest, _) = self.live()?;
            guest.check(
                document.to_string().as_bytes(),
                options.to_string().as_bytes(),
            )
        };
        match result {
            Ok(result) => crate::engine::check_of(result),
            Err(error) => Err(self.fail("rota_check", error)),
        }
    }

    /// The state file's rule (`rota_core::state_file::answer`, through the guest's
    /// `rota_state_file`): the `ok` value; a corrupt file is a `Policy` error with the
    /// code `STATE_FILE_CORRUPT`.
    pub fn state_file(&mut self, request: &Value) -> Result<Value> {
        let text = self.state_file_text(&request.to_string())?;
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| HostError::Abi(format!("rota_state_file: the result is not JSON: {e}")))?;
        ok_of(value)
    }

    /// `rota_state_file` with the guest's answer text unparsed (conformance).
    pub fn state_file_text(&mut self, request: &str) -> Result<String> {
        let result = {
            let (guest, _) = self.live()?;
            guest.state_file(request.as_bytes())
        };
        result.map_err(|error| self.fail("rota_state_file", error))
    }

    /// The text to write: `existing` (the file's text, `None` when there is none)
    /// after `persists` (`persist` outputs, in order) at `now`.
    pub fn state_file_merge(
        &mut self,
        existing: Option<&str>,
        persists: &[Value],
        now: u64,
    ) -> Result<String> {
        let request =
            json!({ "op": "merge", "existing": existing, "persists": persists, "now": now });
        match self.state_file(&request)? {
            Value::String(text) => Ok(text),
            other => Err(HostError::Abi(format!(
                "rota_state_file merge answered {other}"
            ))),
        }
    }

    /// The `state` of a `restore` input from a file's text.
    pub fn state_file_restore(&mut self, text: &str, now: u64) -> Result<Value> {
        self.state_file(&json!({ "op": "restore", "text": text, "now": now }))
    }

    /// Everything the policy holds, for a live swap.
    pub fn export_state(&mut self) -> Result<Value> {
        let result = {
            let (guest, handle) = self.live()?;
            guest.export(handle)
        };
        match result {
            Ok(result) => ok_of(result),
            Err(error) => Err(self.fail("rota_export", error)),
        }
    }

    /// Moves the live state into `module`: export from the running instance, import
    /// into a fresh instance of the new module, and check that both describe the same
    /// state (their snapshots). On any failure the running module stays.
    pub fn swap(&mut self, module: PolicyModule) -> Result<()> {
        let refused = |reason: String| HostError::SwapRefused(reason);
        let state = self.export_state()?;
        let before = self.snapshot_json()?;
        let mut guest = module
            .instantiate()
            .map_err(|e| refused(format!("cannot instantiate: {e}")))?;
        let handle = guest
            .import(state.to_string().as_bytes())
            .map_err(|e| refused(e.into_host("rota_import").to_string()))
            .and_then(|result| handle_of(&result).map_err(|e| refused(format!("import: {e}"))))?;
        let after = guest
            .query(handle, br#"{"query":"snapshot"}"#)
            .map_err(|e| refused(e.into_host("rota_query").to_string()))
            .and_then(|result| ok_of(result).map_err(|e| refused(format!("snapshot: {e}"))))?;
        if !same_snapshot(&before, &after) {
            return Err(refused(format!(
                "the new module's snapshot differs after the import\n  before: {before}\n  after:  {after}"
            )));
        }
        if let Some((mut old, old_handle)) = self.live.take() {
            // Best effort: the old instance is dropped either way.
            let _ = old.destroy(old_handle);
        }
        let from = self.module.hash().to_string();
        self.module = module;
        self.live = Some((guest, handle));
        self.checkpoint = state.to_string().into_bytes();
        self.clear_journal();
        self.event(
            Event::host(
                Level::Info,
                "policySwapped",
                format!(
                    "policy module swapped ({} -> {})",
                    short(&from),
                    short(self.module.hash())
                ),
            )
            .with("from", from)
            .with("to", self.module.hash())
            .with("source", self.module.source()),
        );
        Ok(())
    }
}

/// Whether a step's result text is the core's rejection (`{"error": ...}`): the
/// canonical text starts with that key, as `rota_core::json::step_str` writes it.
fn is_error_text(text: &str) -> bool {
    text.starts_with("{\"error\"")
}

/// The state in `rota_export`'s result text `{"ok":STATE}`, as text. Anything else
/// (an error, or a shape this host does not expect) goes through the JSON parser.
fn state_text(result: &[u8]) -> Result<Vec<u8>> {
    if let Some(state) = result
        .strip_prefix(b"{\"ok\":")
        .and_then(|rest| rest.strip_suffix(b"}"))
    {
        return Ok(state.to_vec());
    }
    let value: Value = serde_json::from_slice(result)
        .map_err(|e| HostError::Abi(format!("rota_export: the result is not JSON: {e}")))?;
    Ok(ok_of(value)?.to_string().into_bytes())
}

fn short(hash: &str) -> &str {
    &hash[..12.min(hash.len())]
}

/// Snapshots compare by what this host knows of them (a newer module may add fields),
/// and as raw JSON when either is not a snapshot this host reads.
fn same_snapshot(before: &Value, after: &Value) -> bool {
    match (
        serde_json::from_value::<Snapshot>(before.clone()),
        serde_json::from_value::<Snapshot>(after.clone()),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => before == after,
    }
}
