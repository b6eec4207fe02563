//! `ByName` as a hash table (the builds with the feature `speed`).
//!
//! Deterministic as the core must be: the hash has a fixed key (no seed, no
//! randomness), and nothing reads the table in its own order; the walks that callers
//! see (`iter`, `values`) sort by name first, as the B-tree walks (they are rare: a
//! reload, an import, the invariants).

// The one hash table of the core (clippy.toml bars `HashMap` for its order): its
// hash is fixed and no walk reads its order (see the module).
#[allow(clippy::disallowed_types)]
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A name's hash: a multiply over its eight-byte words (its length first, so that
/// names equal up to zero padding differ), then a mix that brings the product's
/// high bits down, since the table takes both the bucket and the tag from the low 32
/// bits on wasm32. A few instructions for a short id; not keyed against chosen
/// collisions, which cost time only (the table compares the texts).
#[derive(Default)]
struct NameHash(u64);

const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

impl NameHash {
    fn add(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(MULTIPLIER);
    }
}

impl Hasher for NameHash {
    fn write(&mut self, bytes: &[u8]) {
        self.add(bytes.len() as u64);
        // Eight bytes a word, the last one zero-padded.
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    /// `str`'s end marker (the length is in already).
    fn write_u8(&mut self, _: u8) {}

    fn finish(&self) -> u64 {
        let h = self.0 ^ (self.0 >> 29);
        let h = h.wrapping_mul(MULTIPLIER);
        h ^ (h >> 32)
    }
}

/// Names to numbers (see the parent module).
#[allow(clippy::disallowed_types)]
#[derive(Debug, Clone, Default)]
pub(crate) struct ByName(HashMap<Box<str>, u64, BuildHasherDefault<NameHash>>);

impl ByName {
    /// Whether a walk in name order costs no more than the walk (it sorts here).
    pub(crate) const WALKS_IN_ORDER: bool = false;

    pub(crate) fn new() -> ByName {
        ByName::default()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn get(&self, name: &str) -> Option<&u64> {
        self.0.get(name)
    }

    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut u64> {
        self.0.get_mut(name)
    }

    pub(crate) fn contains_key(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// The number `name` had before, if any.
    pub(crate) fn insert(&mut self, name: Box<str>, value: u64) -> Option<u64> {
        self.0.insert(name, value)
    }

    pub(crate) fn remove(&mut self, name: &str) -> Option<u64> {
        self.0.remove(name)
    }

    /// In name order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &u64)> {
        let mut pairs: Vec<(&str, &u64)> = self.0.iter().map(|(k, v)| (&**k, v)).collect();
        pairs.sort_unstable_by(|a, b| a.0.cmp(b.0));
        pairs.into_iter()
    }

    /// In name order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &u64> {
        self.iter().map(|(_, value)| value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    fn hash(text: &str) -> u64 {
        BuildHasherDefault::<NameHash>::default().hash_one(text)
    }

    /// Names equal up to zero padding hash apart (the length goes in first), and ids
    /// that differ in one digit spread over the low bits that pick a bucket and a tag.
    #[test]
    fn the_hash_tells_close_names_apart() {
        assert_ne!(hash("a"), hash("a\0"));
        assert_ne!(hash("abcdefgh"), hash("abcdefgh\0"));
        let buckets: std::collections::BTreeSet<u64> =
            (0..256).map(|i| hash(&format!("r{i}")) & 0xff).collect();
        // 256 ids into 256 buckets: a uniform hash fills about 162 (1 - 1/e).
        assert!(buckets.len() > 140, "{} buckets of 256", buckets.len());
        let tags: std::collections::BTreeSet<u64> = (0..256)
            .map(|i| (hash(&format!("r{i}")) >> 25) & 0x7f)
            .collect();
        assert!(tags.len() > 100, "{} tags of 128", tags.len());
    }
}
