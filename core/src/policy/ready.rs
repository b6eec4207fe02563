//! A role's ready set: the executors that can take an unpinned request of it now,
//! keyed (priority, stamp, executor) (`keys::ready_key`); the first is the pick.
//!
//! Its traffic is at the ends: a grant takes the first key (or re-keys it with the
//! newest stamp, the last of its priority), a release puts the newest stamp back.
//! With the feature `speed` (the Node and wasmtime builds) it is a sorted list of
//! blocks (`Blocks`), whose ends cost no search and no rebalancing; a key elsewhere
//! (another priority, an old stamp coming back) costs a search of the blocks' first
//! keys and a shift within one block (and of the list of blocks, at most len / 8 + 1,
//! when a block splits or goes). Without it (the web build, whose code size
//! is budgeted) it is the crate's one ordered index (`keys::Index`), whose B-tree code
//! the queues and the timers already bring. Both iterate in key order.

#[cfg(feature = "speed")]
use std::collections::VecDeque;

#[cfg(not(feature = "speed"))]
use super::keys::Index;
use super::keys::Key;

/// A ready set (see the module).
#[cfg(feature = "speed")]
pub(super) type ReadySet = Blocks;
/// A ready set (see the module): the index type itself, so that the web build gains no
/// other copy of the vector code its tables use.
#[cfg(not(feature = "speed"))]
pub(super) type ReadySet = Index;

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

#[cfg(not(feature = "speed"))]
impl Ready for Index {
    fn add(&mut self, key: Key) -> bool {
        self.insert(key, 0).is_none()
    }

    fn take(&mut self, key: &Key) -> bool {
        self.remove(key).is_some()
    }

    fn has(&self, key: &Key) -> bool {
        self.contains_key(key)
    }

    fn first_where(&self, wanted: impl FnMut(&&Key) -> bool) -> Option<&Key> {
        self.keys().find(wanted)
    }
}

#[cfg(feature = "speed")]
impl Ready for Blocks {
    fn add(&mut self, key: Key) -> bool {
        self.insert(key)
    }

    fn take(&mut self, key: &Key) -> bool {
        self.remove(key)
    }

    fn has(&self, key: &Key) -> bool {
        self.contains(key)
    }

    fn first_where(&self, wanted: impl FnMut(&&Key) -> bool) -> Option<&Key> {
        Blocks::first_where(self, wanted)
    }
}

/// The most keys a block holds; a block that grows past it splits in two.
#[cfg(feature = "speed")]
const BLOCK: usize = 64;

/// A block this small merges with a neighbour that has room. Splits make blocks of
/// `BLOCK / 2` keys or more, so only a removal makes one small, and it merges then if
/// it can: no two neighbours are both small, and there are at most len / 8 + 1 blocks.
#[cfg(feature = "speed")]
const SMALL: usize = BLOCK / 4;

/// A sorted set of keys as a sorted list of sorted blocks: every block holds 1 to
/// `BLOCK` keys, all below the next block's. Each end is a deque's end; any other key
/// is a binary search of the blocks' first keys, then of one block, and a shift of
/// at most `BLOCK` keys (and of the block list when a block splits or goes).
#[cfg(feature = "speed")]
#[derive(Debug, Clone, Default)]
pub(super) struct Blocks {
    blocks: VecDeque<VecDeque<Key>>,
}

#[cfg(feature = "speed")]
impl Blocks {
    /// The block that holds `key` or would: the last whose first key is at most `key`
    /// (the first block for a key below them all). `None` when there are no blocks.
    fn block_of(&self, key: &Key) -> Option<usize> {
        let last = self.blocks.len().checked_sub(1)?;
        // The newest stamp goes to the last block, the pick comes from the first: no
        // search for either.
        if self.blocks[last].front().is_some_and(|first| first <= key) {
            return Some(last);
        }
        if self
            .blocks
            .get(1)
            .is_some_and(|second| second.front() > Some(key))
        {
            return Some(0);
        }
        let after = self
            .blocks
            .partition_point(|b| b.front().is_some_and(|first| first <= key));
        Some(after.saturating_sub(1))
    }

    fn insert(&mut self, key: Key) -> bool {
        let Some(b) = self.block_of(&key) else {
            self.blocks.push_back(VecDeque::from([key]));
            return true;
        };
        let block = &mut self.blocks[b];
        if block.back().is_some_and(|last| *last < key) {
            block.push_back(key);
        } else {
            match block.binary_search(&key) {
                Ok(_) => return false,
                Err(i) => block.insert(i, key),
            }
        }
        if block.len() > BLOCK {
            let upper = block.split_off(BLOCK / 2);
            self.blocks.insert(b + 1, upper);
        }
        true
    }

    fn remove(&mut self, key: &Key) -> bool {
        let Some(b) = self.block_of(key) else {
            return false;
        };
        let block = &mut self.blocks[b];
        if block.front() == Some(key) {
            block.pop_front();
        } else {
            match block.binary_search(key) {
                Ok(i) => {
                    block.remove(i);
                }
                Err(_) => return false,
            }
        }
        let len = block.len();
        if len == 0 {
            self.blocks.remove(b);
        } else if len < SMALL {
            self.merge_small(b);
        }
        true
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

    fn contains(&self, key: &Key) -> bool {
        self.block_of(key)
            .is_some_and(|b| self.blocks[b].binary_search(key).is_ok())
    }

    /// The first key itself, before any iterator (a grant's pick takes it unless the
    /// request avoids its executor); then a loop per block.
    fn first_where(&self, mut wanted: impl FnMut(&&Key) -> bool) -> Option<&Key> {
        let first = self.blocks.front()?.front()?;
        if wanted(&first) {
            return Some(first);
        }
        self.blocks.iter().find_map(|b| b.iter().find(&mut wanted))
    }

    #[cfg(test)]
    fn iter(&self) -> impl Iterator<Item = &Key> {
        self.blocks.iter().flatten()
    }

    /// Every block holds 1 to `BLOCK` keys, in order, all below the next block's; no
    /// two neighbours are both below `SMALL`.
    #[cfg(test)]
    fn well_formed(&self) -> bool {
        let sizes = self.blocks.iter().all(|b| (1..=BLOCK).contains(&b.len()));
        let small = |b: &VecDeque<Key>| b.len() < SMALL;
        let neighbours =
            (1..self.blocks.len()).all(|i| !(small(&self.blocks[i - 1]) && small(&self.blocks[i])));
        let keys: Vec<&Key> = self.iter().collect();
        sizes && neighbours && keys.windows(2).all(|w| w[0] < w[1])
    }
}

#[cfg(all(test, feature = "speed"))]
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
            let mut blocks = Blocks::default();
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
                        prop_assert_eq!(blocks.remove(&key), model.remove(&key));
                    }
                    Op::Contains(p, s) => {
                        let key = [p, s, s % 7, 0];
                        prop_assert_eq!(blocks.contains(&key), model.contains(&key));
                    }
                    Op::TakeFirst => {
                        let first = blocks.iter().next().copied();
                        prop_assert_eq!(first.as_ref(), model.first());
                        if let Some(key) = first {
                            prop_assert!(blocks.remove(&key) && model.remove(&key));
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

        /// Many keys in order, then most of them removed in any order (what makes
        /// blocks small): the blocks stay well formed and agree with the model.
        #[test]
        fn blocks_stay_well_formed_as_they_empty(
            (n, order) in (100u64..1500).prop_flat_map(|n| (Just(n), Just((0..n).collect::<Vec<u64>>()).prop_shuffle())),
            keep in 0usize..50,
        ) {
            let mut blocks = Blocks::default();
            let mut model = BTreeSet::new();
            for s in 0..n {
                blocks.insert([0, s, 0, 0]);
                model.insert([0, s, 0, 0]);
            }
            for s in order.iter().skip(keep) {
                let key = [0, *s, 0, 0];
                prop_assert_eq!(blocks.remove(&key), model.remove(&key));
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
        let mut blocks = Blocks::default();
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
        zero.iter().for_each(|k| assert!(blocks.remove(k)));
        assert_eq!(blocks.blocks[0].len(), 15);
        // Block 1 goes small too: its next (60) has no room, block 0 has.
        let one: Vec<Key> = blocks.blocks[1].iter().copied().take(45).collect();
        one.iter().for_each(|k| assert!(blocks.remove(k)));
        assert!(
            blocks.well_formed(),
            "{:?}",
            blocks.blocks.iter().map(VecDeque::len).collect::<Vec<_>>()
        );
        assert_eq!(blocks.blocks[0].len(), 30);
    }

    /// The blocks stay few whatever the order of removals (each small block merges
    /// when it can), so a split's or a removal's shift of the block list stays short.
    #[test]
    fn blocks_stay_few_after_scattered_removals() {
        let mut blocks = Blocks::default();
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
