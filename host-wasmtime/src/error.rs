//! The host's errors. The core's own errors come through unchanged (`Policy`, with the
//! core's stable `code`); everything else is about loading, running or feeding the
//! guest, or the IO around it.

use std::path::PathBuf;

use rota_core::Violation;
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The crate was compiled before `make wasm` built the policy module, and no
    /// module path was given.
    #[error("policy module not built; run `make wasm` (or pass a module path)")]
    ModuleNotBuilt,

    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// wasmtime refused the module (not WebAssembly, failed validation, or missing
    /// an export the ABI needs).
    #[error("cannot load the policy module ({origin}): {message}")]
    Load { origin: String, message: String },

    /// The module's ABI version is not one this host speaks.
    #[error("the policy module speaks ABI {found_major}.{found_minor}; this host needs {want_major}.x (x >= {want_minor})")]
    AbiVersion {
        found_major: u32,
        found_minor: u32,
        want_major: u32,
        want_minor: u32,
    },

    /// The startup preflight of an executor failed: the roster does not start.
    #[error("the roster does not start: the preflight of {executor} failed ({error})")]
    StartFailed { executor: String, error: String },

    /// The guest answered something that is not the ABI's JSON.
    #[error("the policy module broke the ABI: {0}")]
    Abi(String),

    /// The guest trapped or ran past its deadline. The host dropped the instance and
    /// restored the last good state; only this call failed.
    #[error("the policy module {kind} during `{call}`: {message} (the host restored its last good state)")]
    Guest {
        kind: GuestFailure,
        call: String,
        message: String,
    },

    /// The guest trapped and restoring the last good state failed too.
    #[error("the policy module could not be restored after a failure: {0}")]
    Unrecoverable(String),

    /// The core rejected the call; nothing changed. `code` is the core's stable code
    /// (`INVALID_DOCUMENT`, `UNKNOWN_ROLE` ...).
    #[error("{message}")]
    Policy {
        code: String,
        message: String,
        violations: Vec<Violation>,
    },

    /// A live swap refused the new module; the old one keeps running.
    #[error("policy swap refused, the running module is kept: {0}")]
    SwapRefused(String),

    /// No executor outside the request's `avoid` can ever serve it.
    #[error("no executor can ever serve role '{role}': {}", reasons.join("; "))]
    Exhausted { role: String, reasons: Vec<String> },

    /// The request's deadline passed before a slot came free.
    #[error("the lease request '{request}' timed out")]
    TimedOut { request: String },

    /// The request was cancelled.
    #[error("the lease request '{request}' was cancelled")]
    Cancelled { request: String },

    /// A roster file or document could not be used.
    #[error("{}", violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid { violations: Vec<Violation> },

    /// The roster has shut down.
    #[error("the roster is closed")]
    Closed,
}

/// How the guest failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestFailure {
    /// A WebAssembly trap (a panic in the core aborts into one).
    Trapped,
    /// It ran past its epoch deadline or out of fuel.
    Overran,
}

impl std::fmt::Display for GuestFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GuestFailure::Trapped => "trapped",
            GuestFailure::Overran => "ran past its deadline",
        })
    }
}

impl HostError {
    /// The core's error JSON `{code, message, violations?}` as a host error.
    pub(crate) fn from_policy_json(error: &Value) -> HostError {
        let code = error
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("UNKNOWN")
            .to_string();
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("the policy rejected the call")
            .to_string();
        let violations = error
            .get("violations")
            .cloned()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        HostError::Policy {
            code,
            message,
            violations,
        }
    }

    /// The core's stable code, for a `Policy` error.
    pub fn code(&self) -> Option<&str> {
        match self {
            HostError::Policy { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether the guest failed (trap or overrun) on this call.
    pub fn is_guest_failure(&self) -> bool {
        matches!(self, HostError::Guest { .. })
    }
}

pub type Result<T, E = HostError> = std::result::Result<T, E>;
