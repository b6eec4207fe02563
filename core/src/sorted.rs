//! Sorted vectors in place of the policy's rarely used maps and sets keyed by a
//! string (abandoned machines, preflight records, the ids a run declared, a pending
//! reload's awaited executors, the pinned queues).
//!
//! Each distinct `BTreeMap`/`BTreeSet` type is another copy of the B-tree code in
//! the WebAssembly module (7–12 KB each, issue 4); these few functions over a `Vec`
//! cost a fraction of that. They keep the maps' semantics exactly: entries in key
//! order with unique keys (so iteration, export and every output that lists them
//! read the same), lookups by binary search. Inserting and removing move the tail,
//! which is fine for the sizes these hold (at most one entry per executor or per
//! request being created, and touched on cold paths only).

/// Entries in key order, keys unique.
pub(crate) type StrMap<V> = Vec<(String, V)>;

/// Strings in order, unique.
pub(crate) type StrSet = Vec<String>;

fn find<V>(map: &[(String, V)], key: &str) -> Result<usize, usize> {
    map.binary_search_by(|(k, _)| k.as_str().cmp(key))
}

pub(crate) fn get<'a, V>(map: &'a [(String, V)], key: &str) -> Option<&'a V> {
    find(map, key).ok().map(|i| &map[i].1)
}

pub(crate) fn get_mut<'a, V>(map: &'a mut [(String, V)], key: &str) -> Option<&'a mut V> {
    find(map, key).ok().map(|i| &mut map[i].1)
}

pub(crate) fn contains_key<V>(map: &[(String, V)], key: &str) -> bool {
    find(map, key).is_ok()
}

/// The entry for `key`, inserted with `V::default()` if it is missing.
pub(crate) fn entry<'a, V: Default>(map: &'a mut StrMap<V>, key: &str) -> &'a mut V {
    let i = match find(map, key) {
        Ok(i) => i,
        Err(i) => {
            map.insert(i, (key.to_string(), V::default()));
            i
        }
    };
    &mut map[i].1
}

/// Sets `key` to `value`; the value it replaced.
pub(crate) fn insert<V>(map: &mut StrMap<V>, key: String, value: V) -> Option<V> {
    match find(map, &key) {
        Ok(i) => Some(std::mem::replace(&mut map[i].1, value)),
        Err(i) => {
            map.insert(i, (key, value));
            None
        }
    }
}

pub(crate) fn remove<V>(map: &mut StrMap<V>, key: &str) -> Option<V> {
    find(map, key).ok().map(|i| map.remove(i).1)
}

/// A map from pairs in any order; of a repeated key the last value stands (as
/// collecting into a `BTreeMap` does).
pub(crate) fn map_from<V>(pairs: impl IntoIterator<Item = (String, V)>) -> StrMap<V> {
    let mut map = Vec::new();
    for (k, v) in pairs {
        insert(&mut map, k, v);
    }
    map
}

fn find_in(set: &[String], item: &str) -> Result<usize, usize> {
    set.binary_search_by(|s| s.as_str().cmp(item))
}

/// Adds `item`; whether it was missing.
pub(crate) fn set_insert(set: &mut StrSet, item: String) -> bool {
    match find_in(set, &item) {
        Ok(_) => false,
        Err(i) => {
            set.insert(i, item);
            true
        }
    }
}

/// Removes `item`; whether it was there.
pub(crate) fn set_remove(set: &mut StrSet, item: &str) -> bool {
    match find_in(set, item) {
        Ok(i) => {
            set.remove(i);
            true
        }
        Err(_) => false,
    }
}

/// A set from strings in any order (repeats once).
pub(crate) fn set_from(items: impl IntoIterator<Item = String>) -> StrSet {
    let mut set = Vec::new();
    for item in items {
        set_insert(&mut set, item);
    }
    set
}
