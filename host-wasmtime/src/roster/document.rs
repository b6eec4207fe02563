//! The roster document as a caller has it at hand ([`IntoDocument`]): JSON already
//! parsed, text of JSON or YAML, or the core's typed [`Document`]. A leaf of the roster.

use rota_core::{Document, Violation};
use serde_json::Value;

use crate::error::{HostError, Result};

/// What [`RosterBuilder::document`](crate::RosterBuilder::document) takes: a
/// `serde_json::Value`, a `&str` or `String` of JSON or YAML (JSON when it starts with
/// `{`), or a typed [`Document`] (`rota_core::Document`, as written).
///
/// ```
/// use rota_host::IntoDocument;
/// let text = "executors:\n  - id: a\n    roles: [coder]\n";
/// assert_eq!(text.into_document().unwrap()["executors"][0]["id"], "a");
/// let error = "executors: [".into_document().unwrap_err().to_string();
/// assert!(error.starts_with("$: the document text is not YAML (line "), "{error}");
/// ```
pub trait IntoDocument {
    /// The document as JSON, or what is wrong with the text and where
    /// ([`HostError::Invalid`]).
    fn into_document(self) -> Result<Value>;
}

impl IntoDocument for Value {
    fn into_document(self) -> Result<Value> {
        Ok(self)
    }
}

impl IntoDocument for &Value {
    fn into_document(self) -> Result<Value> {
        Ok(self.clone())
    }
}

impl IntoDocument for &str {
    fn into_document(self) -> Result<Value> {
        parse_text(self)
    }
}

impl IntoDocument for String {
    fn into_document(self) -> Result<Value> {
        parse_text(&self)
    }
}

impl IntoDocument for &String {
    fn into_document(self) -> Result<Value> {
        parse_text(self)
    }
}

impl IntoDocument for Document {
    fn into_document(self) -> Result<Value> {
        Ok(self.as_written())
    }
}

impl IntoDocument for &Document {
    fn into_document(self) -> Result<Value> {
        Ok(self.as_written())
    }
}

/// JSON when the text starts with `{` (after white space), else YAML (JSON's
/// superset); an error names the format, the line and the column.
fn parse_text(text: &str) -> Result<Value> {
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Err(invalid("the document text is empty".into()));
    }
    if trimmed.starts_with('{') {
        return serde_json::from_str(text).map_err(|e| {
            invalid(format!(
                "the document text is not JSON (line {}, column {}): {e}",
                e.line(),
                e.column()
            ))
        });
    }
    serde_norway::from_str(text).map_err(|e| {
        let at = e
            .location()
            .map(|l| format!(" (line {}, column {})", l.line(), l.column()))
            .unwrap_or_default();
        invalid(format!("the document text is not YAML{at}: {e}"))
    })
}

fn invalid(message: String) -> HostError {
    HostError::Invalid {
        violations: vec![Violation {
            path: "$".into(),
            message,
        }],
    }
}
