//! A role's queue: its waiting requests' slots by order key (`keys::OrderKey`).
//!
//! Its traffic is at the ends, as a ready set's is: a new waiter's key is the
//! highest (arrival rises), and a grant takes the first. So it is a sorted list of
//! blocks (`blocks.rs`), whose ends cost no search and no rebalancing. It iterates in
//! key order.

use std::cmp::Ordering;

use super::blocks::Blocks;
use super::keys::OrderKey;

/// A role's queue (see the module).
pub(super) type RoleQueue = Blocks<(OrderKey, u32)>;

/// What the queue asks of a role's queue.
pub(super) trait Waiters {
    /// Queues slot `s` under `key`; false if `key` was queued (its slot replaced: a
    /// bug, which the callers assert).
    fn put(&mut self, key: OrderKey, s: u32) -> bool;
    /// Takes `key` out; false if it was not queued.
    fn cut(&mut self, key: &OrderKey) -> bool;
    fn count(&self) -> usize;
    fn first_key(&self) -> Option<&OrderKey>;
    fn last_key(&self) -> Option<&OrderKey>;
    /// Every (key, slot), in key order.
    fn entries(&self) -> impl Iterator<Item = (&OrderKey, u32)> + '_;
    /// The waiting requests earlier in lease order than `key` (any key: a search).
    fn below(&self, key: &OrderKey) -> usize;

    /// As `below`, with the head (a grant) and the tail (a new waiter, queued before
    /// its place is counted) answered without a walk or a search.
    fn count_before(&self, key: &OrderKey) -> u32 {
        if self.first_key().is_none_or(|first| key <= first) {
            return 0; // nobody waits for this role (the common case of a grant), or the head
        }
        let len = self.count() as u32;
        match self.last_key().map(|last| key.cmp(last)) {
            Some(Ordering::Greater) => len,
            Some(Ordering::Equal) => len - 1,
            _ => self.below(key) as u32,
        }
    }
}

impl Waiters for Blocks<(OrderKey, u32)> {
    fn put(&mut self, key: OrderKey, s: u32) -> bool {
        self.insert((key, s))
    }

    fn cut(&mut self, key: &OrderKey) -> bool {
        self.remove(key).is_some()
    }

    fn count(&self) -> usize {
        self.len()
    }

    fn first_key(&self) -> Option<&OrderKey> {
        self.first().map(|(key, _)| key)
    }

    fn last_key(&self) -> Option<&OrderKey> {
        self.last().map(|(key, _)| key)
    }

    fn entries(&self) -> impl Iterator<Item = (&OrderKey, u32)> + '_ {
        self.iter().map(|(key, s)| (key, *s))
    }

    fn below(&self, key: &OrderKey) -> usize {
        self.count_below(key)
    }
}
