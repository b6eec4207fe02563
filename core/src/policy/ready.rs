//! A role's ready set: the executors that can take an unpinned request of it now,
//! keyed (priority, stamp, executor) (`keys::ready_key`); the first is the pick.
//!
//! Its traffic is at the ends: a grant takes the first key (or re-keys it with the
//! newest stamp, the last of its priority), a release puts the newest stamp back.
//! So it is a sorted list of blocks (`blocks.rs`), whose ends cost no search and no
//! rebalancing; a key elsewhere (another priority, an old stamp coming back) costs a
//! search of the blocks' first keys and a shift within one block (and of the list of
//! blocks, at most len / 8 + 1, when a block splits or goes). It iterates in key order.

use super::blocks::Blocks;
use super::keys::Key;

/// A ready set (see the module).
pub(super) type ReadySet = Blocks<Key>;

/// What the roster asks of a ready set.
pub(super) trait Ready {
    /// False if `key` was in already.
    fn add(&mut self, key: Key) -> bool;
    /// False if `key` was not in.
    fn take(&mut self, key: &Key) -> bool;
    fn has(&self, key: &Key) -> bool;
    /// The first key, in key order, that `wanted` takes.
    fn first_where(&self, wanted: impl FnMut(&&Key) -> bool) -> Option<&Key>;
}

impl Ready for Blocks<Key> {
    fn add(&mut self, key: Key) -> bool {
        self.insert(key)
    }

    fn take(&mut self, key: &Key) -> bool {
        self.remove(key).is_some()
    }

    fn has(&self, key: &Key) -> bool {
        self.contains(key)
    }

    fn first_where(&self, wanted: impl FnMut(&&Key) -> bool) -> Option<&Key> {
        self.find_first(wanted)
    }
}
