//! The one name-to-number map of the crate (`ByName`), and names shared by the
//! roster and its leases (`SharedName`).
//!
//! `ByName` maps request ids to slots or leases (`Requests::by_id`), executor ids to
//! indexes, a merge's entry positions: one map type for all (each distinct map type is
//! another copy of its code in the WebAssembly module). It is a hash table: a lookup
//! hashes the name once and compares one text, where a B-tree compares a name at each
//! step down (with 64 requests waiting, a quarter of a wait-and-grant cycle).
//!
//! Deterministic as the core must be: the hash has a fixed key (no seed, no
//! randomness), and nothing reads the table in its own order; the walks that callers
//! see (`iter`, `values`) sort by name first (they are rare: a reload, an import, the
//! invariants).

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

/// Names to numbers (see the module).
#[allow(clippy::disallowed_types)]
#[derive(Debug, Clone, Default)]
pub(crate) struct ByName(HashMap<Box<str>, u64, BuildHasherDefault<NameHash>>);

impl ByName {
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

impl FromIterator<(Box<str>, u64)> for ByName {
    fn from_iter<I: IntoIterator<Item = (Box<str>, u64)>>(pairs: I) -> ByName {
        let mut map = ByName::new();
        for (name, value) in pairs {
            map.insert(name, value);
        }
        map
    }
}

/// An executor's or a role's name as a lease holds it: one allocation shared by the
/// roster and every lease that names it, so a grant clones a pointer and a release
/// drops one. It reads as a `str`.
pub(crate) type SharedName = std::sync::Arc<str>;

/// An owned name as a `SharedName`.
pub(crate) fn shared(name: String) -> SharedName {
    name.into()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Names whose order is easy to get wrong: zero padding, shared eight-byte heads,
    /// digits, non-ASCII.
    pub(crate) const TEXTS: [&str; 22] = [
        "",
        "\0",
        "\0\0",
        "a",
        "a\0",
        "a\0b",
        "ab",
        "abcdefgh",
        "abcdefgh\0",
        "abcdefghi",
        "abcdefgi",
        "abcdefgha",
        "r1041",
        "r1041x",
        "r999",
        "r10410000000",
        "é",
        "e\u{301}",
        "\u{7f}",
        "\u{80}",
        "zzzzzzzzzzzz",
        "zzzzzzzz",
    ];

    /// The map iterates in text order and finds every name.
    #[test]
    fn the_map_iterates_in_name_order() {
        let map: ByName = TEXTS
            .iter()
            .enumerate()
            .map(|(i, t)| (Box::from(*t), i as u64))
            .collect();
        let mut sorted: Vec<&str> = TEXTS.to_vec();
        sorted.sort_unstable();
        assert_eq!(map.iter().map(|(t, _)| t).collect::<Vec<_>>(), sorted);
        let by_text = |t: &str| TEXTS.iter().position(|x| *x == t).map(|i| i as u64);
        let values: Vec<u64> = map.values().copied().collect();
        let expected: Vec<u64> = sorted.iter().filter_map(|t| by_text(t)).collect();
        assert_eq!(values, expected);
        for (i, t) in TEXTS.iter().enumerate() {
            assert_eq!(map.get(t), Some(&(i as u64)), "{t:?}");
        }
        assert_eq!(map.get("abcdefg"), None);
        assert_eq!(map.len(), TEXTS.len());
    }

    /// One operation on a map: names from a small alphabet, so that they collide.
    #[derive(Debug, Clone)]
    enum Op {
        Insert(String, u64),
        Remove(String),
        Bump(String),
    }

    fn op() -> impl Strategy<Value = Op> {
        let name = "[ab\\x00r1]{0,10}";
        prop_oneof![
            (name, any::<u64>()).prop_map(|(n, v)| Op::Insert(n, v)),
            name.prop_map(Op::Remove),
            name.prop_map(Op::Bump),
        ]
    }

    proptest! {
        // proptest prints the failing case and keeps its seed in
        // `proptest-regressions/` (it reproduces from there).
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The map answers as `BTreeMap<String, u64>` does, walks included.
        #[test]
        fn the_map_answers_as_a_btree_map(ops in proptest::collection::vec(op(), 0..200)) {
            let mut map = ByName::new();
            let mut model = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(n, v) => {
                        prop_assert_eq!(map.insert(n.as_str().into(), v), model.insert(n, v));
                    }
                    Op::Remove(n) => prop_assert_eq!(map.remove(&n), model.remove(&n)),
                    Op::Bump(n) => {
                        if let Some(v) = map.get_mut(&n) {
                            *v = v.wrapping_add(1);
                        }
                        if let Some(v) = model.get_mut(&n) {
                            *v = v.wrapping_add(1);
                        }
                        prop_assert_eq!(map.contains_key(&n), model.contains_key(&n));
                        prop_assert_eq!(map.get(&n), model.get(&n));
                    }
                }
                prop_assert_eq!(map.len(), model.len());
            }
            let walked: Vec<(&str, u64)> = map.iter().map(|(k, &v)| (k, v)).collect();
            let expected: Vec<(&str, u64)> = model.iter().map(|(k, &v)| (k.as_str(), v)).collect();
            prop_assert_eq!(walked, expected);
            let values: Vec<u64> = map.values().copied().collect();
            prop_assert_eq!(values, model.values().copied().collect::<Vec<_>>());
        }
    }
}

#[cfg(test)]
mod hash_tests {
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
