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
