#![cfg_attr(not(feature = "shared"), allow(dead_code))]
//! A remote log's entries (sql/PROTOCOL.md, "Entries"): an input as an entry, the
//! bytes the fold feeds the core for one, the genesis and what it holds.

use rota_core::Input;
use serde_json::Value;

use crate::error::{HostError, Result};

/// An input as a log entry: its JSON with `type` first and without `now` (the log's
/// `now` goes in at the fold). The core writes `{"type":"<kind>","now":<n>...`.
pub(crate) fn entry_of(input: &Input) -> Result<String> {
    let text = serde_json::to_string(input)
        .map_err(|e| HostError::Abi(format!("cannot encode an input: {e}")))?;
    let kind = input.kind();
    let head = format!("{{\"type\":\"{kind}\",\"now\":{}", input.now());
    match text.strip_prefix(&head) {
        Some(rest) => Ok(format!("{{\"type\":\"{kind}\"{rest}")),
        None => Err(HostError::Abi(format!(
            "an input that does not start with its type and now: {text}"
        ))),
    }
}

/// The bytes the fold feeds the core for an entry: `{"now":<now>,` + the entry's
/// bytes after its first, as text (PROTOCOL.md, "Entries").
pub(crate) fn fold_bytes(now: u64, entry: &str) -> String {
    let rest = entry.get(1..).unwrap_or_default();
    format!("{{\"now\":{now},{rest}")
}

/// The genesis entry, for an instance that finds the log empty.
pub(crate) fn genesis_entry(document: &Value, options: &Value) -> String {
    format!("{{\"type\":\"genesis\",\"log\":1,\"document\":{document},\"options\":{options}}}")
}

/// The document and options of a genesis entry (seq 1), or why the log is refused.
pub(crate) fn read_genesis(entry: &str) -> Result<(Value, Value)> {
    let invalid = |message: String| HostError::Policy {
        code: crate::error::PolicyCode::Other("INVALID_LOG".into()),
        message,
        violations: Vec::new(),
    };
    let value: Value = serde_json::from_str(entry)
        .map_err(|e| invalid(format!("the log's first entry is not JSON: {e}")))?;
    if value.get("type").and_then(Value::as_str) != Some("genesis") {
        return Err(invalid(format!(
            "the log's first entry is not a genesis: {}",
            short(entry)
        )));
    }
    if value.get("log").and_then(Value::as_u64) != Some(1) {
        return Err(HostError::Policy {
            code: crate::error::PolicyCode::Other("UNSUPPORTED_VERSION".into()),
            message: format!(
                "the log is version {}; this host folds log version 1",
                value.get("log").cloned().unwrap_or(Value::Null)
            ),
            violations: Vec::new(),
        });
    }
    let document = value.get("document").cloned().unwrap_or(Value::Null);
    let options = value.get("options").cloned().unwrap_or(Value::Null);
    Ok((document, options))
}

fn short(text: &str) -> &str {
    let end = text
        .char_indices()
        .nth(120)
        .map_or(text.len(), |(index, _)| index);
    &text[..end]
}

/// The entry's `type` and, for `expireOwner`, its `owner`: read only where the fold
/// must know (a later genesis is skipped; an expiry of this instance fences it).
pub(crate) fn entry_kind(entry: &str) -> Option<(String, Option<String>)> {
    if !entry.contains("genesis") && !entry.contains("expireOwner") && !entry.contains("version") {
        return None;
    }
    let value: Value = serde_json::from_str(entry).ok()?;
    let kind = value.get("type")?.as_str()?.to_string();
    let owner = value
        .get("owner")
        .and_then(Value::as_str)
        .map(str::to_string);
    Some((kind, owner))
}
