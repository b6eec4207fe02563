//! The roster's labelled metrics, per executor and role: leases granted, failures
//! reported by kind and budget waits (counted here as the roster folds), and slots in
//! use, capacity and exclusions by kind (gauges read from the roster as folded). Each
//! goes to the [`metrics`] facade under the names of [`crate::telemetry`] and, for
//! [`crate::Roster::metrics`], into the Prometheus text the npm package's
//! `roster.metrics()` writes for the same series.
//!
//! Labels are bounded: executor ids and roles come from the running document, a
//! failure's kind from the core's six; never a request id or free text. An executor a
//! reload removed is forgotten once it has left (its series leave the text; through
//! the facade, which cannot drop a series, its gauges read 0).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use rota_core::status::ExecutorStatus;
use rota_core::{Exclusion, ExclusionKind, Snapshot};
use serde_json::Value;

use crate::telemetry;

/// The kinds of exclusion, each a series of `rota_excluded` per executor.
const EXCLUSION_KINDS: [ExclusionKind; 4] = [
    ExclusionKind::Until,
    ExclusionKind::Health,
    ExclusionKind::Run,
    ExclusionKind::Manual,
];

/// Counts per executor and a second label (a role, a failure kind).
type Counts = BTreeMap<(String, String), u64>;

/// What the roster counted, per executor.
#[derive(Debug, Default)]
pub(crate) struct Labelled {
    grants: Counts,
    failures: Counts,
    budget_waits: Counts,
    /// The executors whose gauges the facade was given, with their roles (set to 0
    /// once they leave).
    gauged: BTreeMap<String, BTreeSet<String>>,
}

fn add(counts: &mut Counts, executor: &str, label: &str) {
    *counts
        .entry((executor.to_string(), label.to_string()))
        .or_default() += 1;
}

impl Labelled {
    /// A lease granted (or occupied) on `executor` for `role` (`""` without one).
    pub(crate) fn granted(&mut self, executor: &str, role: &str) {
        add(&mut self.grants, executor, role);
    }

    /// A failure reported on `executor`, of the kind the core gave it.
    pub(crate) fn failed(&mut self, executor: &str, kind: &str) {
        add(&mut self.failures, executor, kind);
        telemetry::failed(executor, kind);
    }

    /// A lease request for `role` that waited because `executor`'s budget had no
    /// room (the core's `Output::Waiting::spent`).
    pub(crate) fn budget_waited(&mut self, executor: &str, role: &str) {
        add(&mut self.budget_waits, executor, role);
        telemetry::budget_waited(executor, role);
    }

    /// The Prometheus text of the labelled series, for the roster as folded (its
    /// snapshot, and `capacity` of each role); sets the facade's gauges to the same
    /// values, and forgets every executor the snapshot no longer lists.
    pub(crate) fn render(&mut self, snapshot: &Snapshot, capacity: &[(String, u32)]) -> String {
        let ids: BTreeSet<String> = snapshot.executors.iter().map(|e| e.id.clone()).collect();
        for counts in [&mut self.grants, &mut self.failures, &mut self.budget_waits] {
            counts.retain(|(executor, _), _| ids.contains(executor));
        }
        self.gauged.retain(|executor, roles| {
            let stays = ids.contains(executor);
            if !stays {
                set_gauges_to_zero(executor, roles);
            }
            stays
        });
        for e in &snapshot.executors {
            self.gauged.insert(e.id.clone(), roles_of(e).collect());
        }

        let mut text = String::new();
        let per_role = |text: &mut String, name: &str, help: &str, counts: &Counts| {
            head(text, name, help, "counter");
            for e in &snapshot.executors {
                let counted = counts
                    .range((e.id.clone(), String::new())..)
                    .take_while(|((id, _), _)| *id == e.id)
                    .map(|((_, role), _)| role.clone());
                let roles: BTreeSet<String> = roles_of(e).chain(counted).collect();
                for role in roles {
                    let value = counts.get(&(e.id.clone(), role.clone())).copied();
                    sample(
                        text,
                        name,
                        &[("executor", &e.id), ("role", &role)],
                        value.unwrap_or(0),
                    );
                }
            }
        };
        per_role(
            &mut text,
            telemetry::LEASES_GRANTED,
            "Leases granted (occupy included), per executor and role.",
            &self.grants,
        );
        head(
            &mut text,
            telemetry::FAILURES,
            "Failures reported, per executor and the kind the core gave them.",
            "counter",
        );
        for ((executor, kind), count) in &self.failures {
            sample(
                &mut text,
                telemetry::FAILURES,
                &[("executor", executor), ("kind", kind)],
                *count,
            );
        }
        per_role(
            &mut text,
            telemetry::BUDGET_WAITS,
            "Lease requests that waited for an executor's budget, per executor and role.",
            &self.budget_waits,
        );
        head(
            &mut text,
            telemetry::SLOTS_IN_USE,
            "Slots held, per executor and role.",
            "gauge",
        );
        for e in &snapshot.executors {
            for role in roles_of(e).collect::<BTreeSet<_>>() {
                let held = e.busy_by_role.get(&role).copied().unwrap_or(0);
                telemetry::slots_in_use(&e.id, &role, held);
                sample(
                    &mut text,
                    telemetry::SLOTS_IN_USE,
                    &[("executor", &e.id), ("role", &role)],
                    u64::from(held),
                );
            }
        }
        head(
            &mut text,
            telemetry::CAPACITY,
            "Slots for the role on the executors in the round, held or not.",
            "gauge",
        );
        for (role, slots) in capacity {
            telemetry::capacity(role, *slots);
            sample(
                &mut text,
                telemetry::CAPACITY,
                &[("role", role)],
                u64::from(*slots),
            );
        }
        head(
            &mut text,
            telemetry::EXCLUDED,
            "Whether the executor is out of the round, per exclusion kind (1 or 0).",
            "gauge",
        );
        for e in &snapshot.executors {
            for kind in EXCLUSION_KINDS {
                let out = e.exclusion.as_ref().is_some_and(|x| x.kind == kind);
                telemetry::excluded_now(&e.id, kind.name(), out);
                sample(
                    &mut text,
                    telemetry::EXCLUDED,
                    &[("executor", &e.id), ("kind", kind.name())],
                    u64::from(out),
                );
            }
        }
        text
    }
}

/// The kind of a reported failure for `rota_failures_total`: the core's
/// classification (`{"kind", "rule"}`), and `outage` for a call that could not reach
/// its engine when the report took the executor out for its health check (the core's
/// `unreachable` rule); `other` when it could not be classified.
pub(crate) fn failure_kind<'a>(
    classified: Option<&'a Value>,
    exclusion: Option<&Exclusion>,
) -> &'a str {
    let text = |key: &str| classified.and_then(|c| c.get(key)).and_then(Value::as_str);
    let health = exclusion.is_some_and(|x| x.kind == ExclusionKind::Health);
    match (text("kind"), text("rule")) {
        (_, Some("unreachable")) if health => "outage",
        (Some(kind), _) => kind,
        (None, _) => "other",
    }
}

/// The roles an executor's series cover: its own, and any it holds a slot of.
fn roles_of(e: &ExecutorStatus) -> impl Iterator<Item = String> + '_ {
    e.roles
        .iter()
        .cloned()
        .chain(e.busy_by_role.iter().map(|(role, _)| role.clone()))
}

/// An executor that left: its gauges through the facade read 0 (it cannot drop them).
fn set_gauges_to_zero(executor: &str, roles: &BTreeSet<String>) {
    for role in roles {
        telemetry::slots_in_use(executor, role, 0);
    }
    for kind in EXCLUSION_KINDS {
        telemetry::excluded_now(executor, kind.name(), false);
    }
}

fn head(text: &mut String, name: &str, help: &str, kind: &str) {
    let _ = write!(text, "# HELP {name} {help}\n# TYPE {name} {kind}\n");
}

fn sample(text: &mut String, name: &str, labels: &[(&str, &str)], value: u64) {
    text.push_str(name);
    text.push('{');
    for (i, (key, value)) in labels.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        let _ = write!(text, "{key}=\"");
        for c in value.chars() {
            match c {
                '\\' => text.push_str("\\\\"),
                '"' => text.push_str("\\\""),
                '\n' => text.push_str("\\n"),
                c => text.push(c),
            }
        }
        text.push('"');
    }
    let _ = writeln!(text, "}} {value}");
}
