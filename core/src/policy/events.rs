//! Events: every decision's human message and structured fields.

use serde_json::Value;

use crate::protocol::{Level, Output};

use super::Policy;

impl Policy {
    pub(super) fn event(
        &mut self,
        level: Level,
        name: &str,
        message: String,
        fields: Vec<(&'static str, Value)>,
    ) {
        if level < self.options.min_event_level {
            return;
        }
        self.outputs.push_back(Output::Event {
            level,
            name: name.to_string(),
            message,
            fields: crate::protocol::Fields::from_static(fields),
        });
    }
}

pub(super) fn for_label(label: Option<&str>) -> String {
    label.map(|l| format!(" for {l}")).unwrap_or_default()
}

/// "1 running lease", "2 running leases".
pub(super) fn plural(n: u32, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}
