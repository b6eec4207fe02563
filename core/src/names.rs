//! The one name-to-number map of the crate (`ByName`), and names shared by the
//! roster and its leases (`SharedName`).
//!
//! `ByName` maps request ids to slots or leases (`Requests::by_id`), executor ids to
//! indexes, a merge's entry positions: one map type for all (each distinct map type is
//! another copy of its code in the WebAssembly module). It iterates in name order
//! either way. With the feature `speed` (the Node and wasmtime builds) it is a hash
//! table (`hashed.rs`): a lookup hashes the name once and compares one text, where the
//! B-tree compares a name at each step down (issue 15: with 64 requests waiting, a
//! quarter of a wait-and-grant cycle), and its rare ordered walks sort. Without it (the
//! web build) it is the B-tree (`ordered.rs`).

#[cfg(feature = "speed")]
mod hashed;
#[cfg(not(feature = "speed"))]
mod ordered;

#[cfg(feature = "speed")]
pub(crate) use hashed::ByName;
#[cfg(not(feature = "speed"))]
pub(crate) use ordered::ByName;

impl FromIterator<(Box<str>, u64)> for ByName {
    fn from_iter<I: IntoIterator<Item = (Box<str>, u64)>>(pairs: I) -> ByName {
        let mut map = ByName::new();
        for (name, value) in pairs {
            map.insert(name, value);
        }
        map
    }
}

/// An executor's or a role's name as a lease holds it. With the feature
/// `speed` (the Node and the wasmtime builds), one allocation shared by the
/// roster and every lease that names it: a grant clones a pointer, a release drops
/// one. Without it (the web build, whose code size is budgeted), each lease owns a
/// copy, as before the feature (the same code). Either way it reads as a `str`.
#[cfg(feature = "speed")]
pub(crate) type SharedName = std::sync::Arc<str>;
#[cfg(not(feature = "speed"))]
pub(crate) type SharedName = String;

/// An owned name as a `SharedName` (a move when names are not shared).
#[allow(clippy::useless_conversion)] // the identity without `speed`
pub(crate) fn shared(name: String) -> SharedName {
    name.into()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Names whose order is easy to get wrong (see `ordered::Name`).
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

    /// The map iterates in text order and finds every name, whichever it is.
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

        /// Either build's map answers as `BTreeMap<String, u64>` does, walks included.
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
