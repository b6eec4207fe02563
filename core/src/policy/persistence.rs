//! Persistence: what the next persist must carry, one per input at most (the flows
//! are `persisting.rs`'s).

use crate::protocol::Exclusion;

/// What the state file holds, as far as this run's persists said, and what may
/// have changed since.
#[derive(Debug, Clone, Default)]
pub(super) struct Persistence {
    /// What the state file holds for this roster's ids, as far as our persists
    /// said: a persist carries only the entries that differ from it. Per executor,
    /// index-aligned with `Roster::executors` (issue 4: not a `BTreeMap<String,
    /// Exclusion>`); a reload or a departure moves indexes but also sets `all`, whose
    /// full comparison reads the entries by the ids they carry and aligns them again.
    pub(super) last: Vec<Option<Exclusion>>,
    /// Executors whose lasting exclusion may have changed during this input.
    pub(super) touched: Vec<usize>,
    /// Compare every entry at the next flush (a reload moved or removed executors).
    pub(super) all: bool,
}

impl Persistence {
    /// Executor `e`'s lasting exclusion may have changed.
    pub(super) fn touch(&mut self, e: usize) {
        self.touched.push(e);
    }

    /// Nothing is waiting to be written (true after every input).
    pub(super) fn settled(&self) -> bool {
        self.touched.is_empty() && !self.all
    }
}
