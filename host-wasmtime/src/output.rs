//! The policy module's outputs, typed.
//!
//! The guest answers JSON; each output of a step is read into the core's [`Output`],
//! and every dispatcher in this crate (the roster, the shared roster's replica, the
//! simulator) matches it without a wildcard arm, so a new output of the core does not
//! compile until each of them says what it does with it. An output this host cannot
//! read (a newer module's new kind, a malformed one) becomes an `outputUnreadable`
//! warning that names it, for the caller to publish; the step's other outputs are
//! carried out as usual. Traces and `rota replay` keep the JSON as the guest wrote it.

use rota_core::{Level, Output};
use serde_json::Value;

use crate::event::Event;

/// One output of the guest, typed; or the `outputUnreadable` event saying why not.
///
/// Read by the core's own reader (`Output::from_json`, what its `Deserialize` calls)
/// straight from the borrowed JSON: going through `Deserialize` would copy the whole
/// output first, which costs a roster call about a sixth more.
pub fn read(output: &Value) -> Result<Output, Event> {
    Output::from_json(output).map_err(|error| unreadable(output, &error))
}

/// The warning for an output that [`read`] could not read: its `type` (or `?`), the
/// reader's error, and the output itself.
pub fn unreadable(output: &Value, error: &str) -> Event {
    let kind = output
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    Event::host(
        Level::Warn,
        "outputUnreadable",
        format!("the policy module gave an output this host cannot read ({kind}): {error}; ignoring that output"),
    )
    .with("kind", kind)
    .with("error", error)
    .with("output", output.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_an_output_of_the_core() {
        let output = json!({ "type": "probe", "executor": "a", "url": "http://a/health" });
        assert_eq!(
            read(&output),
            Ok(Output::Probe {
                executor: "a".into(),
                url: "http://a/health".into()
            })
        );
    }

    #[test]
    fn an_unknown_or_malformed_output_is_a_warning_naming_it() {
        let newer = json!({ "type": "teleport", "executor": "a" });
        let event = read(&newer).expect_err("not an output of this core");
        assert_eq!(event.name, "outputUnreadable");
        assert_eq!(event.level, Level::Warn);
        assert_eq!(event.text("kind"), Some("teleport"));
        assert!(event.message.contains("teleport"), "{}", event.message);
        assert!(event
            .text("error")
            .is_some_and(|e| e.contains("unknown variant")));
        assert_eq!(event.fields.get("output"), Some(&newer));

        let malformed = json!({ "type": "granted", "request": "r1" });
        let event = read(&malformed).expect_err("a grant without its lease");
        assert_eq!(event.text("kind"), Some("granted"));
        assert!(event.text("error").is_some_and(|e| e.contains("lease")));

        let event = read(&json!(7)).expect_err("not an object");
        assert_eq!(event.text("kind"), Some("?"));
    }
}
