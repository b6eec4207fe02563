//! Flows that emit: events (with the host's floor) and outputs, queued and drained.

use crate::protocol::{Fields, Level, Output};
use serde_json::Value;

use super::events::{event_output, EventName};
use super::outputs::{resolve, OutputRef, Queued};
use super::Policy;

impl Policy {
    /// Whether an event at `level` is emitted: at or above the options'
    /// `minEventLevel` and the host's floor. A hot path asks before it builds one.
    pub(super) fn wants_event(&self, level: Level) -> bool {
        level >= self.options.min_event_level && level >= self.event_floor
    }

    /// Events below `level` are neither built nor emitted until the floor is set again
    /// (`Level::Debug`, the default, leaves only `minEventLevel`). For a host that
    /// reads none of them for a while (the npm Roster while nobody listens): every
    /// decision, the state, exports and snapshots are the same; only those events are
    /// missing from the outputs. Not part of the state (an export does not carry it).
    pub fn set_event_floor(&mut self, level: Level) {
        self.event_floor = level;
    }

    pub(super) fn event(
        &mut self,
        level: Level,
        name: EventName,
        message: String,
        fields: Vec<(&'static str, Value)>,
    ) {
        if !self.wants_event(level) {
            return;
        }
        self.emit(level, name, message, Fields::from_static(fields));
    }

    /// As `event`, with the fields already built in key order (a hot path's event:
    /// the caller asked `wants_event` before building anything).
    pub(super) fn emit(&mut self, level: Level, name: EventName, message: String, fields: Fields) {
        self.push_output(event_output(level, name, message, fields));
    }
}

impl Policy {
    /// Queues a built output.
    pub(super) fn push_output(&mut self, output: Output) {
        self.outputs.push_back(Queued::Built(output));
    }

    /// The next output, until `None`, read in place: a host that writes outputs out
    /// itself borrows the hot ones from the state instead of taking built copies.
    pub fn poll_output_ref(&mut self) -> Option<OutputRef<'_>> {
        loop {
            let reference = match self.outputs.pop_front()? {
                Queued::Built(output) => return Some(OutputRef::Output(output)),
                reference => reference,
            };
            let output = resolve(&reference, &self.leases.open, &self.roster.executors);
            debug_assert!(output.is_some(), "a queued reference resolves");
            // (One that does not, which cannot be, is passed over.)
            if output.is_some() {
                return output;
            }
        }
    }

    /// Builds every queued reference in place: before a lease closes or the executors
    /// move (an undrained queue's references would dangle).
    #[inline]
    pub(super) fn settle_outputs(&mut self) {
        // Most inputs find the queue drained (every host drains after each input):
        // inlined, they pay one comparison.
        if !self.outputs.is_empty() {
            self.build_queued();
        }
    }

    #[inline(never)]
    fn build_queued(&mut self) {
        for queued in self.outputs.iter_mut() {
            if let Some(output) = resolve(queued, &self.leases.open, &self.roster.executors) {
                *queued = Queued::Built(output.into_output());
            }
        }
    }

    /// The queued outputs, built (for an export; the queue keeps its references).
    pub(super) fn built_outputs(&self) -> Vec<Output> {
        let mut built = Vec::with_capacity(self.outputs.len());
        for queued in &self.outputs {
            match (
                queued,
                resolve(queued, &self.leases.open, &self.roster.executors),
            ) {
                (Queued::Built(output), _) => built.push(output.clone()),
                (_, Some(output)) => built.push(output.into_output()),
                (_, None) => {}
            }
        }
        built
    }

    /// Whether every queued reference resolves (the invariants, `invariants.rs`).
    #[cfg(debug_assertions)]
    pub(super) fn queued_references_resolve(&self) -> bool {
        let (leases, executors) = (&self.leases.open, &self.roster.executors);
        self.outputs
            .iter()
            .all(|q| matches!(q, Queued::Built(_)) || resolve(q, leases, executors).is_some())
    }
}
