//! Comparing answers: exact equality for answers and query results, subset matching for
//! snapshots. Numbers compare by value (`1` equals `1.0`: JS has one number type, and a
//! JS host's query results come back through `JSON.stringify`). Object keys compare
//! regardless of order; arrays in order.

use serde_json::{Map, Value};

use crate::jsonfmt;

/// Exact equality of two JSON values, numbers by value.
pub fn equal(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Number(a), Value::Number(b)) => match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        },
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| equal(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| equal(v, w)))
        }
        (a, b) => a == b,
    }
}

/// Whether `actual` has everything `expected` names: objects may have more keys,
/// arrays must have the same length with each element a match, scalars must be equal.
pub fn subset(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(a), Value::Object(b)) => a
            .iter()
            .all(|(k, v)| b.get(k).is_some_and(|w| subset(v, w))),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| subset(x, y))
        }
        (a, b) => equal(a, b),
    }
}

/// A snapshot as vectors name it: `executors` keyed by id (so a vector names only the
/// executors it is about), everything else as the core writes it.
pub fn keyed_snapshot(snapshot: &Value) -> Value {
    let mut snapshot = snapshot.clone();
    if let Some(executors) = snapshot.get("executors").and_then(Value::as_array) {
        let keyed: Map<String, Value> = executors
            .iter()
            .filter_map(|x| Some((x.get("id")?.as_str()?.to_string(), x.clone())))
            .collect();
        snapshot["executors"] = Value::Object(keyed);
    }
    snapshot
}

/// The part of `actual` that `expected` talks about (for readable subset diffs).
pub fn restrict(expected: &Value, actual: &Value) -> Value {
    match (expected, actual) {
        (Value::Object(a), Value::Object(b)) => Value::Object(
            a.iter()
                .map(|(k, v)| {
                    let w = b
                        .get(k)
                        .map_or(Value::String("<missing>".into()), |w| restrict(v, w));
                    (k.clone(), w)
                })
                .collect(),
        ),
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            Value::Array(a.iter().zip(b).map(|(x, y)| restrict(x, y)).collect())
        }
        (_, b) => b.clone(),
    }
}

/// Whole floats as integers, so `1.0` and `1` print alike in diffs.
pub fn normalize(value: &Value) -> Value {
    match value {
        Value::Number(n) if !n.is_u64() && !n.is_i64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => value.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(normalize).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), normalize(v))).collect())
        }
        _ => value.clone(),
    }
}

/// An answer as lines for a diff: one line per output, then `wakeAt`; any other value
/// pretty-printed.
pub fn answer_lines(answer: &Value) -> String {
    let answer = normalize(answer);
    match (
        answer.get("outputs").and_then(Value::as_array),
        answer.as_object(),
    ) {
        (Some(outputs), Some(map)) if map.len() == 2 && map.contains_key("wakeAt") => {
            let mut text = String::from("outputs:\n");
            for output in outputs {
                text.push_str("  ");
                text.push_str(&jsonfmt::inline(output));
                text.push('\n');
            }
            text.push_str(&format!("wakeAt: {}\n", answer["wakeAt"]));
            text
        }
        _ => jsonfmt::pretty(&answer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_by_value_and_subsets() {
        assert!(equal(
            &json!({"a": 1, "b": [1.0]}),
            &json!({"b": [1], "a": 1.0})
        ));
        assert!(!equal(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(subset(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(!subset(&json!({"a": [1]}), &json!({"a": [1, 2]})));
        let snap = json!({"executors": [{"id": "x", "busy": 1}], "queue": []});
        assert!(subset(
            &json!({"executors": {"x": {"busy": 1}}}),
            &keyed_snapshot(&snap)
        ));
    }
}
