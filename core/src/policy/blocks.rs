//! A sorted list of sorted blocks: an ordered set of entries, each with a `Key`,
//! made for traffic at the ends.
//!
//! The ready sets (`ready.rs`, bare keys) and the role queues (`role_queue.rs`, a key and
//! a request slot) use it: a grant takes the first entry, a release or a new waiter
//! puts one after the last. Both ends cost no search, no rebalancing and, once the
//! set has held an entry, no allocation; an entry elsewhere costs a search of the
//! blocks' first keys, then of one block, and a shift of at most `BLOCK` entries (and
//! of the block list, at most len / 8 + 1, when a block splits or goes). A B-tree
//! pays a node search, a shift and a rebalance at either end, and compares the
//! four-word keys along the way (a quarter of the core's instructions in a lease that
//! waits and the release that grants it).

use std::collections::VecDeque;

use super::keys::Key;

/// An entry of a set: its key orders it (unique within the set).
pub(super) trait Entry: Copy {
    fn key(&self) -> &Key;
}

/// A ready set's entry: the key alone.
impl Entry for Key {
    fn key(&self) -> &Key {
        self
    }
}

/// A queue's entry: a request's order key and its slot.
impl Entry for (Key, u32) {
    fn key(&self) -> &Key {
        &self.0
    }
}

/// The most entries a block holds; a block that grows past it splits in two.
const BLOCK: usize = 64;

/// A block this small merges with a neighbour that has room. Splits make blocks of
/// `BLOCK / 2` entries or more, so only a removal makes one small, and it merges then
/// if it can: no two neighbours are both small, and there are at most len / 8 + 1
/// blocks.
const SMALL: usize = BLOCK / 4;

/// Entries in key order as a sorted list of sorted blocks: every block holds 1 to
/// `BLOCK` entries (a sole block may be empty: its set's last entry went, and it
/// keeps its room for the next), all below the next block's.
#[derive(Debug, Clone)]
pub(super) struct Blocks<T> {
    blocks: VecDeque<VecDeque<T>>,
    len: usize,
}

impl<T> Default for Blocks<T> {
    fn default() -> Blocks<T> {
        Blocks {
            blocks: VecDeque::new(),
            len: 0,
        }
    }
}

impl<T: Entry> Blocks<T> {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The block that holds `key` or would: the last whose first key is at most `key`
    /// (the first block for a key below them all). `None` when there are no blocks.
    fn block_of(&self, key: &Key) -> Option<usize> {
        let last = self.blocks.len().checked_sub(1)?;
        // The newest entry goes to the last block, the pick comes from the first: no
        // search for either.
        if self.blocks[last]
            .front()
            .is_some_and(|first| first.key() <= key)
        {
            return Some(last);
        }
        if self
            .blocks
            .get(1)
            .and_then(VecDeque::front)
            .is_some_and(|second| second.key() > key)
        {
            return Some(0);
        }
        let after = self
            .blocks
            .partition_point(|b| b.front().is_some_and(|first| first.key() <= key));
        Some(after.saturating_sub(1))
    }

    /// Puts `entry` in its place; false if its key was in already (that entry is
    /// replaced, as a map's insert does).
    pub(super) fn insert(&mut self, entry: T) -> bool {
        let key = *entry.key();
        let Some(b) = self.block_of(&key) else {
            self.blocks.push_back(VecDeque::from([entry]));
            self.len += 1;
            return true;
        };
        let block = &mut self.blocks[b];
        // After the last entry, or the first of a set emptied before.
        if block.back().is_none_or(|last| *last.key() < key) {
            block.push_back(entry);
        } else {
            match block.binary_search_by(|e| e.key().cmp(&key)) {
                Ok(i) => {
                    block[i] = entry;
                    return false;
                }
                Err(i) => block.insert(i, entry),
            }
        }
        if block.len() > BLOCK {
            let upper = block.split_off(BLOCK / 2);
            self.blocks.insert(b + 1, upper);
        }
        self.len += 1;
        true
    }

    /// Takes out the entry with `key`, if there is one.
    pub(super) fn remove(&mut self, key: &Key) -> Option<T> {
        let b = self.block_of(key)?;
        let block = &mut self.blocks[b];
        let entry = if block.front().is_some_and(|first| first.key() == key) {
            block.pop_front()?
        } else {
            let i = block.binary_search_by(|e| e.key().cmp(key)).ok()?;
            block.remove(i)?
        };
        self.len -= 1;
        let len = block.len();
        if len == 0 && self.blocks.len() == 1 {
            // The set's last entry: the block stays, empty, for the next one (a roster
            // whose slots are all taken empties and refills its ready set on every
            // release and grant; freeing the block made that an allocation each).
        } else if len == 0 {
            self.blocks.remove(b);
        } else if len < SMALL {
            self.merge_small(b);
        }
        Some(entry)
    }

    /// Block `b`, below `SMALL`, joins its next neighbour if the two fit in one
    /// block; then, if it is still small, its previous one if they fit. (Either
    /// neighbour may be small too: only their join keeps two small blocks apart.)
    fn merge_small(&mut self, b: usize) {
        let len = self.blocks[b].len();
        if self
            .blocks
            .get(b + 1)
            .is_some_and(|next| len + next.len() <= BLOCK)
        {
            if let Some(mut next) = self.blocks.remove(b + 1) {
                self.blocks[b].append(&mut next);
            }
        }
        let len = self.blocks[b].len();
        if len < SMALL && b > 0 && self.blocks[b - 1].len() + len <= BLOCK {
            if let Some(mut block) = self.blocks.remove(b) {
                self.blocks[b - 1].append(&mut block);
            }
        }
    }

    pub(super) fn contains(&self, key: &Key) -> bool {
        self.block_of(key).is_some_and(|b| {
            self.blocks[b]
                .binary_search_by(|e| e.key().cmp(key))
                .is_ok()
        })
    }

    pub(super) fn first(&self) -> Option<&T> {
        self.blocks.front()?.front()
    }

    pub(super) fn last(&self) -> Option<&T> {
        self.blocks.back()?.back()
    }

    /// How many entries have a key below `key`: the blocks before its block counted
    /// by their lengths, then a search of that block.
    pub(super) fn count_below(&self, key: &Key) -> usize {
        let Some(b) = self.block_of(key) else {
            return 0;
        };
        let before: usize = self.blocks.iter().take(b).map(VecDeque::len).sum();
        before + self.blocks[b].partition_point(|e| e.key() < key)
    }

    /// The first entry itself, before any iterator (a grant's pick takes it unless the
    /// request avoids its executor); then a loop per block.
    pub(super) fn find_first(&self, mut wanted: impl FnMut(&&T) -> bool) -> Option<&T> {
        let first = self.first()?;
        if wanted(&first) {
            return Some(first);
        }
        self.blocks.iter().find_map(|b| b.iter().find(&mut wanted))
    }

    /// Every entry, in key order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.blocks.iter().flatten()
    }

    /// Every block holds 1 to `BLOCK` entries (a sole block may be empty), in order,
    /// all below the next block's; no two neighbours are both below `SMALL`; the
    /// length is counted right.
    #[cfg(test)]
    pub(super) fn well_formed(&self) -> bool {
        let least = usize::from(self.blocks.len() > 1);
        let sizes = self
            .blocks
            .iter()
            .all(|b| (least..=BLOCK).contains(&b.len()));
        let small = |b: &VecDeque<T>| b.len() < SMALL;
        let neighbours =
            (1..self.blocks.len()).all(|i| !(small(&self.blocks[i - 1]) && small(&self.blocks[i])));
        let keys: Vec<&Key> = self.iter().map(Entry::key).collect();
        let counted = keys.len() == self.len;
        sizes && neighbours && counted && keys.windows(2).all(|w| w[0] < w[1])
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    /// An operation on both sets: insert, remove or look up a key of few values (so
    /// that the three meet the same keys often), or take the first key (a grant).
    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u64),
        Remove(u64, u64),
        Contains(u64, u64),
        TakeFirst,
        /// The newest stamp at priority p (a grant's re-key).
        PushNewest(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u64..3, 0u64..400).prop_map(|(p, s)| Op::Insert(p, s)),
            (0u64..3, 0u64..400).prop_map(|(p, s)| Op::Remove(p, s)),
            (0u64..3, 0u64..400).prop_map(|(p, s)| Op::Contains(p, s)),
            Just(Op::TakeFirst),
            (0u64..3).prop_map(Op::PushNewest),
        ]
    }

    proptest! {
        // proptest prints the failing case and keeps its seed in
        // `proptest-regressions/` (it reproduces from there).
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The blocks answer as a `BTreeSet` does, iterate in its order and stay
        /// well formed, over any sequence of operations.
        #[test]
        fn blocks_agree_with_a_btree_set(ops in proptest::collection::vec(op(), 1..3000)) {
            let mut blocks = Blocks::<Key>::default();
            let mut model = BTreeSet::new();
            let mut newest = 1_000;
            for op in ops {
                match op {
                    Op::Insert(p, s) => {
                        let key = [p, s, s % 7, 0];
                        prop_assert_eq!(blocks.insert(key), model.insert(key));
                    }
                    Op::Remove(p, s) => {
                        let key = [p, s, s % 7, 0];
                        prop_assert_eq!(blocks.remove(&key).is_some(), model.remove(&key));
                    }
                    Op::Contains(p, s) => {
                        let key = [p, s, s % 7, 0];
                        prop_assert_eq!(blocks.contains(&key), model.contains(&key));
                    }
                    Op::TakeFirst => {
                        let first = blocks.iter().next().copied();
                        prop_assert_eq!(first.as_ref(), model.first());
                        if let Some(key) = first {
                            prop_assert!(blocks.remove(&key).is_some() && model.remove(&key));
                        }
                    }
                    Op::PushNewest(p) => {
                        newest += 1;
                        let key = [p, newest, 0, 0];
                        prop_assert_eq!(blocks.insert(key), model.insert(key));
                    }
                }
                prop_assert!(blocks.well_formed(), "ill-formed: {:?}", blocks);
            }
            prop_assert!(blocks.iter().eq(model.iter()));
        }

        /// As a queue (a key and a slot each), the blocks answer as a `BTreeMap` does:
        /// an insert of a key in use replaces its slot, a removal gives the entry back,
        /// the ends and the count below any key agree, and so does the order.
        #[test]
        fn queue_blocks_agree_with_a_btree_map(ops in proptest::collection::vec(op(), 1..3000)) {
            let mut blocks = Blocks::<(Key, u32)>::default();
            let mut model = std::collections::BTreeMap::new();
            let mut newest = 1_000;
            for (i, op) in ops.into_iter().enumerate() {
                let slot = i as u32;
                match op {
                    Op::Insert(p, s) => {
                        let key = [p, s, s % 7, 0];
                        let fresh = model.insert(key, slot).is_none();
                        prop_assert_eq!(blocks.insert((key, slot)), fresh);
                    }
                    Op::Remove(p, s) => {
                        let key = [p, s, s % 7, 0];
                        prop_assert_eq!(blocks.remove(&key), model.remove(&key).map(|v| (key, v)));
                    }
                    Op::Contains(p, s) => {
                        let key = [p, s, s % 7, 0];
                        prop_assert_eq!(blocks.contains(&key), model.contains_key(&key));
                        prop_assert_eq!(blocks.count_below(&key), model.range(..key).count());
                    }
                    Op::TakeFirst => {
                        prop_assert_eq!(blocks.first().copied(), model.first_key_value().map(|(k, v)| (*k, *v)));
                        prop_assert_eq!(blocks.last().copied(), model.last_key_value().map(|(k, v)| (*k, *v)));
                        if let Some((key, _)) = blocks.first().copied() {
                            prop_assert!(blocks.remove(&key).is_some() && model.remove(&key).is_some());
                        }
                    }
                    Op::PushNewest(p) => {
                        newest += 1;
                        let key = [p, newest, 0, 0];
                        model.insert(key, slot);
                        prop_assert!(blocks.insert((key, slot)));
                    }
                }
                prop_assert!(blocks.well_formed(), "ill-formed: {:?}", blocks);
                prop_assert_eq!(blocks.len(), model.len());
            }
            prop_assert!(blocks.iter().copied().eq(model.iter().map(|(k, v)| (*k, *v))));
        }

        /// Many keys in order, then most of them removed in any order (what makes
        /// blocks small): the blocks stay well formed and agree with the model.
        #[test]
        fn blocks_stay_well_formed_as_they_empty(
            (n, order) in (100u64..1500).prop_flat_map(|n| (Just(n), Just((0..n).collect::<Vec<u64>>()).prop_shuffle())),
            keep in 0usize..50,
        ) {
            let mut blocks = Blocks::<Key>::default();
            let mut model = BTreeSet::new();
            for s in 0..n {
                blocks.insert([0, s, 0, 0]);
                model.insert([0, s, 0, 0]);
            }
            for s in order.iter().skip(keep) {
                let key = [0, *s, 0, 0];
                prop_assert_eq!(blocks.remove(&key).is_some(), model.remove(&key));
                prop_assert!(blocks.well_formed(), "ill-formed: {:?}", blocks);
            }
            prop_assert!(blocks.iter().eq(model.iter()));
            prop_assert!(blocks.blocks.len() <= model.len() / 8 + 1);
        }
    }

    /// A block that goes small between a small block and a full one joins the small
    /// one (so no two small blocks stand side by side).
    #[test]
    fn a_small_block_joins_its_small_neighbour() {
        let key = |s: u64| [0, s, 0, 0];
        let mut blocks = Blocks::<Key>::default();
        // Even stamps in order: blocks of 32 (each split leaves the lower half).
        for s in (0..400).step_by(2) {
            blocks.insert(key(s));
        }
        let firsts: Vec<u64> = blocks.blocks.iter().map(|b| b[0][1]).collect();
        // Blocks 1 and 2 grow to 60 with odd stamps (no split below 65).
        for b in [1, 2] {
            let from = firsts[b];
            for s in (from + 1..).step_by(2).take(28) {
                blocks.insert(key(s));
            }
        }
        assert_eq!(blocks.blocks[1].len(), 60);
        assert_eq!(blocks.blocks[2].len(), 60);
        // Block 0 goes small; its only neighbour (60) has no room for it.
        let zero: Vec<Key> = blocks.blocks[0].iter().copied().take(17).collect();
        zero.iter()
            .for_each(|k| assert!(blocks.remove(k).is_some()));
        assert_eq!(blocks.blocks[0].len(), 15);
        // Block 1 goes small too: its next (60) has no room, block 0 has.
        let one: Vec<Key> = blocks.blocks[1].iter().copied().take(45).collect();
        one.iter().for_each(|k| assert!(blocks.remove(k).is_some()));
        assert!(
            blocks.well_formed(),
            "{:?}",
            blocks.blocks.iter().map(VecDeque::len).collect::<Vec<_>>()
        );
        assert_eq!(blocks.blocks[0].len(), 30);
    }

    /// The set's last key taken, its block stays (empty, with its room) and takes the
    /// next key: a full roster's release and grant allocate nothing.
    #[test]
    fn the_last_block_stays_for_the_next_key() {
        let mut blocks = Blocks::<Key>::default();
        assert!(blocks.insert([0, 1, 0, 0]));
        let room = blocks.blocks[0].capacity();
        assert_eq!(blocks.remove(&[0, 1, 0, 0]), Some([0, 1, 0, 0]));
        assert_eq!(blocks.blocks.len(), 1);
        assert!(blocks.well_formed());
        assert_eq!(blocks.find_first(|_| true), None);
        assert!(!blocks.contains(&[0, 1, 0, 0]));
        assert_eq!(blocks.remove(&[0, 1, 0, 0]), None);
        assert!(blocks.insert([0, 2, 0, 0]));
        assert_eq!(blocks.blocks[0].capacity(), room);
        assert_eq!(blocks.iter().collect::<Vec<_>>(), [&[0, 2, 0, 0]]);
    }

    /// The blocks stay few whatever the order of removals (each small block merges
    /// when it can), so a split's or a removal's shift of the block list stays short.
    #[test]
    fn blocks_stay_few_after_scattered_removals() {
        let mut blocks = Blocks::<Key>::default();
        for s in 0..10_000u64 {
            blocks.insert([0, s, 0, 0]);
        }
        // Remove nine keys of every ten, scattered (a stride prime to 10,000).
        let mut s = 0u64;
        for _ in 0..9_000 {
            s = (s + 7_919) % 10_000;
            if s % 10 != 0 {
                blocks.remove(&[0, s, 0, 0]);
            }
        }
        let len = blocks.iter().count();
        assert!(blocks.well_formed());
        assert!(
            blocks.blocks.len() <= len / 8 + 1,
            "{} blocks for {len} keys",
            blocks.blocks.len()
        );
    }
}
