//! A role's queue: its waiting requests' slots by order key (`keys::OrderKey`).
//!
//! Its traffic is at the ends, as a ready set's is: a new waiter's key is the
//! highest (arrival rises), and a grant takes the first. So it is a sorted list of
//! blocks (`blocks.rs`), whose ends cost no search and no rebalancing. It iterates in
//! key order.

use super::blocks::Blocks;
use super::keys::OrderKey;

/// A role's queue (see the module).
pub(super) type RoleQueue = Blocks<(OrderKey, u32)>;
