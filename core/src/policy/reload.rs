//! Reload: the pending reload while its preflights run, and the startup preflight's
//! state (the flows are `reloading.rs`'s).

use crate::document::Document;
use crate::sorted::{self, StrMap, StrSet};
use crate::status::PreflightRecord;

#[derive(Debug, Clone)]
pub(super) struct PendingReload {
    pub(super) document: Document,
    pub(super) awaiting: StrSet,
    pub(super) since: u64,
}

/// The startup preflight (the scheduler seed preflights every worker before it
/// schedules, and a failure stops the start).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) enum Startup {
    /// Serving (no startup preflight, or every one passed).
    #[default]
    Serving,
    /// Waiting for the preflights of these executors; requests wait.
    Preflighting(StrSet),
    /// A preflight failed: the roster does not start, and serves nothing.
    Failed,
}

/// Reloads: the one waiting for preflights, the preflights' records, and every
/// executor id a document of this run declared.
#[derive(Debug, Clone, Default)]
pub(super) struct Reloads {
    pub(super) pending: Option<PendingReload>,
    pub(super) startup: Startup,
    /// Executors whose preflight answers a failure cut short (the seed's first
    /// failure interrupts the others): their late answers are ignored.
    pub(super) cut_short: StrSet,
    pub(super) preflights: StrMap<PreflightRecord>,
    /// Every executor id any document of this run declared. Persists no longer need
    /// it (`Persistence::last` names what the file holds); kept so that exports keep
    /// their shape for modules that read it.
    pub(super) known_ids: StrSet,
}

impl Reloads {
    pub(super) fn new(document: &Document) -> Reloads {
        Reloads {
            known_ids: sorted::set_from(document.executors.iter().map(|e| e.id.clone())),
            ..Reloads::default()
        }
    }
}
