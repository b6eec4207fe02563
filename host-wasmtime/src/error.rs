//! The host's errors. The core's own errors come through unchanged (`Policy`, with the
//! core's stable `code`); everything else is about loading, running or feeding the
//! guest, or the IO around it.

use std::path::PathBuf;

use rota_core::Violation;
use serde_json::Value;

/// What can go wrong in the host; `Display` says what happened and, where it can, what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The crate was built without its policy module (`ROTA_POLICY_OPTIONAL=1`), and
    /// no module path was given.
    #[error(
        "this rota-host was built without its policy module (ROTA_POLICY_OPTIONAL=1): \
             give one with `RosterBuilder::module_path` (`rota --module FILE`), or run \
             `make wasm` in the rota checkout and build again without ROTA_POLICY_OPTIONAL"
    )]
    ModuleNotBuilt,

    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },

    /// A file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },

    /// wasmtime refused the module (not WebAssembly, failed validation, or missing
    /// an export the ABI needs).
    #[error("cannot load the policy module ({origin}): {message}")]
    Load {
        /// Where the module came from: a path, or "bundled".
        origin: String,
        /// wasmtime's reason.
        message: String,
    },

    /// The module's ABI version is not one this host speaks.
    #[error("the policy module speaks ABI {found_major}.{found_minor}; this host needs {want_major}.x (x >= {want_minor})")]
    AbiVersion {
        /// The module's major version.
        found_major: u32,
        /// The module's minor version.
        found_minor: u32,
        /// The major version this host speaks.
        want_major: u32,
        /// The lowest minor version this host accepts.
        want_minor: u32,
    },

    /// The startup preflight of an executor failed: the roster does not start.
    #[error("the roster does not start: the preflight of {executor} failed ({error})")]
    StartFailed {
        /// The executor whose preflight failed.
        executor: String,
        /// What its preflight said.
        error: String,
    },

    /// The guest answered something that is not the ABI's JSON.
    #[error("the policy module broke the ABI: {0}")]
    Abi(String),

    /// The guest trapped or ran past its deadline. The host dropped the instance and
    /// restored the last good state; only this call failed.
    #[error("the policy module {kind} during `{call}`: {message} (the host restored its last good state)")]
    Guest {
        /// A trap or an overrun.
        kind: GuestFailure,
        /// The export that was called (`rota_handle` ...).
        call: String,
        /// wasmtime's description.
        message: String,
    },

    /// The guest trapped and restoring the last good state failed too.
    #[error("the policy module could not be restored after a failure: {0}")]
    Unrecoverable(String),

    /// The core rejected the call; nothing changed.
    #[error("{message}")]
    Policy {
        /// The core's stable code (`INVALID_DOCUMENT`, `UNKNOWN_ROLE` ...).
        code: PolicyCode,
        /// The core's message.
        message: String,
        /// Every violation, for `INVALID_DOCUMENT`.
        violations: Vec<Violation>,
    },

    /// A live swap refused the new module; the old one keeps running.
    #[error("policy swap refused, the running module is kept: {0}")]
    SwapRefused(String),

    /// No executor outside the request's `avoid` can ever serve it.
    #[error("no executor can ever serve role '{role}': {}", reasons.join("; "))]
    Exhausted {
        /// The role asked for.
        role: String,
        /// Why each executor cannot, or why the roster cannot.
        reasons: Vec<String>,
    },

    /// The request's deadline passed before a slot came free; `Display` says why, one
    /// reason per executor (the core's `timedOut` output, as Node's `TimeoutError`).
    #[error(
        "the lease request '{request}' for role '{role}'{} timed out{}",
        label.as_ref().map(|l| format!(" ({l})")).unwrap_or_default(),
        if reasons.is_empty() { String::new() } else { format!(": {}", reasons.join("; ")) }
    )]
    TimedOut {
        /// The request id the host gave it.
        request: String,
        /// The role it asked for.
        role: String,
        /// Its label ([`crate::LeaseOptions::label`]), if it had one.
        label: Option<String>,
        /// Why no executor took it, one per executor its waiting report names
        /// ("a busy", "b until ..."): the core's reasons at the deadline.
        reasons: Vec<String>,
    },

    /// The request was cancelled.
    #[error("the lease request '{request}' was cancelled")]
    Cancelled {
        /// The request id the host gave it.
        request: String,
    },

    /// A roster file or document could not be used.
    #[error("{}", violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// Every violation, with its place (`FILE: $`, `executors[2].slots` ...).
        violations: Vec<Violation>,
    },

    /// The roster has shut down.
    #[error("the roster is closed")]
    Closed,

    /// A shared roster's instance fenced itself (code `FENCED`): it grants nothing
    /// until it rejoins, and a lease it still holds may already be another's.
    #[error("this instance of the shared roster is fenced since {since_ms} (epoch ms, the log's clock): {reason}; it grants nothing until it rejoins")]
    Fenced {
        /// Why: no heartbeat for the TTL, the log unreadable, or expired by the leader.
        reason: String,
        /// When it fenced (epoch ms, the log's clock as this instance estimates it).
        since_ms: u64,
    },

    /// A shared roster's log store failed (its code: `STALE_EPOCH`, `DATABASE` ...).
    #[cfg(feature = "shared")]
    #[error("{0}")]
    Log(#[from] crate::shared::log::LogError),
}

/// The core's stable error codes (`rota_core::Error::code`), as the ABI sends them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum PolicyCode {
    /// `INVALID_DOCUMENT`: the roster document breaks a rule (see the violations).
    InvalidDocument,
    /// `UNKNOWN_ROLE`: no executor of the document has that role.
    UnknownRole,
    /// `UNKNOWN_LEASE`: no such lease is out.
    UnknownLease,
    /// `UNKNOWN_REQUEST`: no such request is waiting.
    UnknownRequest,
    /// `DUPLICATE_REQUEST`: a request with that id is already waiting or leased.
    DuplicateRequest,
    /// `UNKNOWN_EXECUTOR`: no executor has that id.
    UnknownExecutor,
    /// `INVALID_INPUT`: an input the core cannot read.
    InvalidInput,
    /// `INVALID_STATE`: a state to import that the core cannot read.
    InvalidState,
    /// A code this host does not know (a newer policy module's).
    Other(String),
}

impl PolicyCode {
    const KNOWN: [(PolicyCode, &'static str); 8] = [
        (PolicyCode::InvalidDocument, "INVALID_DOCUMENT"),
        (PolicyCode::UnknownRole, "UNKNOWN_ROLE"),
        (PolicyCode::UnknownLease, "UNKNOWN_LEASE"),
        (PolicyCode::UnknownRequest, "UNKNOWN_REQUEST"),
        (PolicyCode::DuplicateRequest, "DUPLICATE_REQUEST"),
        (PolicyCode::UnknownExecutor, "UNKNOWN_EXECUTOR"),
        (PolicyCode::InvalidInput, "INVALID_INPUT"),
        (PolicyCode::InvalidState, "INVALID_STATE"),
    ];

    /// The code for the core's text (`Other` for one this host does not know).
    pub fn from_code(code: &str) -> PolicyCode {
        PolicyCode::KNOWN
            .iter()
            .find(|(_, text)| *text == code)
            .map(|(known, _)| known.clone())
            .unwrap_or_else(|| PolicyCode::Other(code.to_string()))
    }

    /// The core's text of the code (`UNKNOWN_ROLE` ...).
    pub fn as_str(&self) -> &str {
        match self {
            PolicyCode::Other(code) => code,
            known => PolicyCode::KNOWN
                .iter()
                .find(|(k, _)| k == known)
                .map_or("UNKNOWN", |(_, text)| text),
        }
    }
}

impl std::fmt::Display for PolicyCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for PolicyCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for PolicyCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl serde::Serialize for PolicyCode {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
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
        let code = PolicyCode::from_code(
            error
                .get("code")
                .and_then(Value::as_str)
                .unwrap_or("UNKNOWN"),
        );
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

    /// The stable code: the core's for a `Policy` error, `FENCED`, or a log store's.
    pub fn code(&self) -> Option<&str> {
        match self {
            HostError::Policy { code, .. } => Some(code.as_str()),
            HostError::Fenced { .. } => Some("FENCED"),
            #[cfg(feature = "shared")]
            HostError::Log(error) => Some(error.code()),
            _ => None,
        }
    }

    /// Whether the guest failed (trap or overrun) on this call.
    pub fn is_guest_failure(&self) -> bool {
        matches!(self, HostError::Guest { .. })
    }
}

impl From<rota_core::Error> for HostError {
    /// A rule of the core run natively (a shared log's entry, its genesis) refused.
    fn from(error: rota_core::Error) -> HostError {
        HostError::from_policy_json(&error.to_json())
    }
}

/// The host's `Result`.
pub type Result<T, E = HostError> = std::result::Result<T, E>;
