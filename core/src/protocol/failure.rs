//! A failure report's facts (`Failure`) and the kind they decide (`FailureKind`), with
//! their readers: the shape of a `report` input's `failure`.

use serde::Serialize;
use serde_json::Value;

use crate::read::{self, object, unit_names, Read};

/// The kind of a failure, which decides the exclusion it earns. The core decides it
/// from a failure's facts ([`crate::classify::classify`]); a host may also give it
/// outright.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FailureKind {
    UsageLimit,
    RateLimit,
    Authentication,
    Outage,
    ModelUnavailable,
    Other,
}

/// A failed call on an executor, as the host saw it: the facts it could extract from
/// what its caller threw (`{ tag?, status?, code?, message, resetAt?, retryAfterMs? }`),
/// or an already-classified failure (`{ kind, message, ... }`). The core classifies it
/// ([`crate::classify`]); an explicit `kind` wins over the other facts.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// The kind, when the host already decided it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FailureKind>,
    /// An @llm4ts/core error's `_tag`: `UsageLimitError`, `RateLimitError`,
    /// `AuthenticationError`, `ProviderError`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The HTTP status of the failed call (100–599).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// An error code: `ECONNREFUSED`, `UND_ERR_SOCKET`, `ConnectionRefused`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default)]
    pub message: String,
    /// A usage limit's reset instant (epoch ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_at: Option<u64>,
    /// A `Retry-After` (milliseconds from `now`) on a rate or usage limit: it sets
    /// the exclusion's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl Failure {
    /// Facts with only a message.
    pub fn new(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            ..Failure::default()
        }
    }

    /// An already-classified failure.
    pub fn of_kind(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind: Some(kind),
            ..Failure::new(message)
        }
    }
}

unit_names!(FailureKind {
    UsageLimit = "usageLimit",
    RateLimit = "rateLimit",
    Authentication = "authentication",
    Outage = "outage",
    ModelUnavailable = "modelUnavailable",
    Other = "other",
});

impl Failure {
    pub fn from_json(value: &Value) -> Read<Failure> {
        const FIELDS: &[&str] = &[
            "kind",
            "tag",
            "status",
            "code",
            "message",
            "resetAt",
            "retryAfterMs",
        ];
        let o = object(value, "struct Failure")?;
        // In key order, as serde's derive read them: the first problem is named.
        for (key, v) in o.0 {
            match key.as_str() {
                _ if v.is_null() && key != "message" && FIELDS.contains(&key.as_str()) => {}
                "kind" => FailureKind::from_json(v).map(drop)?,
                "message" | "tag" | "code" => read::string(v).map(drop)?,
                "status" => http_status(v).map(drop)?,
                "resetAt" | "retryAfterMs" => read::u64(v).map(drop)?,
                _ => return Err(read::unknown_field(key, FIELDS)),
            }
        }
        Ok(Failure {
            kind: o.opt("kind", FailureKind::from_json)?,
            tag: o.opt("tag", read::string)?,
            status: o.opt("status", http_status)?,
            code: o.opt("code", read::string)?,
            message: o.or("message", read::string, String::new())?,
            reset_at: o.opt("resetAt", read::u64)?,
            retry_after_ms: o.opt("retryAfterMs", read::u64)?,
        })
    }
}

/// An HTTP status: a whole number from 100 to 599.
fn http_status(value: &Value) -> Read<u16> {
    read::u64(value)
        .ok()
        .filter(|s| (100..=599).contains(s))
        .map(|s| s as u16)
        .ok_or_else(|| {
            format!(
                "status: {} is not an HTTP status (100 to 599)",
                crate::write::to_text(value)
            )
        })
}
