//! Errors are data: each has a stable `code` that every host passes on unchanged.
//! A rejected input leaves the policy exactly as it was.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// One thing wrong with a document, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Violation {
    /// A JSON path into the document: `executors[1].cooldown.outage`.
    pub path: String,
    /// What is wrong, in the seed's wording: "executor 'a' is listed twice".
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The document (at creation, or in a reload or plan) has violations; all are listed.
    #[error("the roster document is invalid: {}", list(.violations))]
    InvalidDocument { violations: Vec<Violation> },
    #[error("unknown role '{role}' (roles: {known})")]
    UnknownRole { role: String, known: String },
    #[error("no lease {lease}: it was never granted")]
    UnknownLease { lease: u64 },
    #[error("no waiting request '{id}'")]
    UnknownRequest { id: String },
    #[error("request id '{id}' is already in use by a live request or lease")]
    DuplicateRequest { id: String },
    #[error("no executor '{id}' in the roster")]
    UnknownExecutor { id: String },
    /// The input is not one the core reads (wrong JSON shape, missing field, bad value).
    #[error("invalid input: {message}")]
    InvalidInput { message: String },
    /// An option is outside its range (`crate::limits`); the message names it and the
    /// range.
    #[error("invalid options: {message}")]
    InvalidOptions { message: String },
    /// A state to restore or import is not one the core reads.
    #[error("invalid state: {message}")]
    InvalidState { message: String },
    /// A log's `version` marker names a log version this core does not fold.
    #[error("log version {version} is not one this core folds (it folds version {supported}); switch to a module that does")]
    UnsupportedVersion { version: u64, supported: u64 },
    /// A shared roster's log that cannot be folded: its first entry is not a genesis,
    /// or a genesis cannot be read (`crate::log`).
    #[error("{message}")]
    InvalidLog { message: String },
}

fn list(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl Error {
    /// The stable code hosts expose (a JS `Error`'s `code`).
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidDocument { .. } => "INVALID_DOCUMENT",
            Error::UnknownRole { .. } => "UNKNOWN_ROLE",
            Error::UnknownLease { .. } => "UNKNOWN_LEASE",
            Error::UnknownRequest { .. } => "UNKNOWN_REQUEST",
            Error::DuplicateRequest { .. } => "DUPLICATE_REQUEST",
            Error::UnknownExecutor { .. } => "UNKNOWN_EXECUTOR",
            Error::InvalidInput { .. } => "INVALID_INPUT",
            Error::InvalidOptions { .. } => "INVALID_OPTIONS",
            Error::InvalidState { .. } => "INVALID_STATE",
            Error::UnsupportedVersion { .. } => "UNSUPPORTED_VERSION",
            Error::InvalidLog { .. } => "INVALID_LOG",
        }
    }

    /// `{ "code", "message", "violations"? }`, the error's JSON shape on every host.
    pub fn to_json(&self) -> Value {
        let mut value = json!({ "code": self.code(), "message": self.to_string() });
        if let Error::InvalidDocument { violations } = self {
            value["violations"] = crate::write::to_json_value(violations);
        }
        value
    }

    pub(crate) fn input(message: impl Into<String>) -> Error {
        Error::InvalidInput {
            message: message.into(),
        }
    }
}

/// A broken invariant: which one, and what breaks it (the executor, lease or
/// request involved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvariantViolation {
    /// The invariant's short name, e.g. `busy` or `grant pass`.
    pub invariant: &'static str,
    pub detail: String,
}

impl std::fmt::Display for InvariantViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invariant `{}` broken: {}", self.invariant, self.detail)
    }
}

impl std::error::Error for InvariantViolation {}
