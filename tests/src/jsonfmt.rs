//! A small width-aware JSON printer for vector files and failure reports: a value
//! stays on one line when it fits, else its members go one per line. Keys come in a
//! fixed reading order (`type` and `now` first, ...), then alphabetically, so the
//! files read well without depending on serde_json's `preserve_order` feature (which
//! would change the core's own output text if it leaked into the workspace build).

use serde_json::Value;

/// The line width vector files are written to.
pub const WIDTH: usize = 100;

/// Keys printed first, in this order; every other key follows alphabetically.
const KEY_ORDER: &[&str] = &[
    "type",
    "now",
    "level",
    "name",
    "checks",
    "note",
    "document",
    "options",
    "create",
    "steps",
    "input",
    "inputText",
    "query",
    "expect",
    "snapshot",
    "id",
    "request",
    "lease",
    "executor",
    "executors",
    "harness",
    "model",
    "role",
    "roles",
    "kind",
    "failure",
    "reason",
    "until",
    "slots",
    "outputs",
    "wakeAt",
    "error",
    "code",
    "message",
    "fields",
];

fn key_rank(key: &str) -> (usize, &str) {
    match KEY_ORDER.iter().position(|k| *k == key) {
        Some(i) => (i, ""),
        None => (KEY_ORDER.len(), key),
    }
}

/// Object entries in reading order.
pub fn ordered(map: &serde_json::Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| key_rank(a.0).cmp(&key_rank(b.0)));
    entries
}

/// One line, keys in reading order, a space after `:` and `,`.
pub fn inline(value: &Value) -> String {
    let mut out = String::new();
    write_inline(value, &mut out);
    out
}

fn write_inline(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_inline(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in ordered(map).into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_inline(v, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The value printed to `WIDTH`, starting at column `indent`, with a trailing newline.
pub fn pretty(value: &Value) -> String {
    let mut out = String::new();
    write_pretty(value, 0, 0, &mut out);
    out.push('\n');
    out
}

/// `prefix` is the width already used on the current line (a key, say).
fn write_pretty(value: &Value, indent: usize, prefix: usize, out: &mut String) {
    let flat = inline(value);
    if indent + prefix + flat.len() <= WIDTH || !matches!(value, Value::Array(_) | Value::Object(_))
    {
        out.push_str(&flat);
        return;
    }
    let pad = " ".repeat(indent + 2);
    match value {
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Array(items) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                out.push_str(&pad);
                write_pretty(item, indent + 2, 1, out);
                if i + 1 < items.len() {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(&" ".repeat(indent));
            out.push(']');
        }
        Value::Object(map) => {
            out.push_str("{\n");
            let entries = ordered(map);
            let n = entries.len();
            for (i, (k, v)) in entries.into_iter().enumerate() {
                let key = format!("{}: ", Value::String(k.clone()));
                out.push_str(&pad);
                out.push_str(&key);
                match (k.as_str(), v) {
                    // An input, and each output, on a line of its own: steps read
                    // (and diff) one decision per line.
                    ("input", _) => out.push_str(&inline(v)),
                    ("outputs", Value::Array(items)) if !items.is_empty() => {
                        out.push_str("[\n");
                        for (i, item) in items.iter().enumerate() {
                            out.push_str(&" ".repeat(indent + 4));
                            out.push_str(&inline(item));
                            if i + 1 < items.len() {
                                out.push(',');
                            }
                            out.push('\n');
                        }
                        out.push_str(&pad);
                        out.push(']');
                    }
                    _ => write_pretty(v, indent + 2, key.len() + 1, out),
                }
                if i + 1 < n {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(&" ".repeat(indent));
            out.push('}');
        }
        _ => unreachable!("scalars are printed inline above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_and_orders_keys() {
        let v = json!({"z": 1, "type": "lease", "now": 5, "a": [1, 2.5, "x", null, true]});
        assert_eq!(
            inline(&v),
            r#"{"type": "lease", "now": 5, "a": [1, 2.5, "x", null, true], "z": 1}"#
        );
        let long = json!({"steps": (0..30).map(|i| json!({"input": {"type": "tick", "now": i}})).collect::<Vec<_>>()});
        let text = pretty(&long);
        assert!(text.lines().all(|l| l.len() <= WIDTH + 40), "{text}");
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), long);
    }
}
