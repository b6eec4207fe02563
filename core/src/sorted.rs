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

/// Whether `item` is in the set.
pub(crate) fn set_contains(set: &[String], item: &str) -> bool {
    find_in(set, item).is_ok()
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

/// A map keyed by a string, as a sorted `Vec` (the snapshot's and a spec's per-role
/// caps, priorities and busy counts; issue 4: not a `BTreeMap<String, _>` per value
/// type). Entries in key order, keys unique; of a repeated key the last value stands,
/// as collecting into a `BTreeMap` does. Written and read as a JSON object.
#[derive(Debug, Clone, PartialEq)]
pub struct SortedMap<V>(StrMap<V>);

impl<V> Default for SortedMap<V> {
    fn default() -> Self {
        SortedMap(Vec::new())
    }
}

impl<V> SortedMap<V> {
    pub fn new() -> Self {
        SortedMap::default()
    }

    pub fn get(&self, key: &str) -> Option<&V> {
        get(&self.0, key)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        contains_key(&self.0, key)
    }

    /// Sets `key` to `value`; the value it replaced.
    pub fn insert(&mut self, key: String, value: V) -> Option<V> {
        insert(&mut self.0, key, value)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The entries in key order, as pairs.
    pub fn as_slice(&self) -> &[(String, V)] {
        &self.0
    }
}

impl<V> FromIterator<(String, V)> for SortedMap<V> {
    fn from_iter<I: IntoIterator<Item = (String, V)>>(pairs: I) -> Self {
        SortedMap(map_from(pairs))
    }
}

impl<V: serde::Serialize> serde::Serialize for SortedMap<V> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de, V: serde::Deserialize<'de>> serde::Deserialize<'de> for SortedMap<V> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<V>(std::marker::PhantomData<V>);
        impl<'de, V: serde::Deserialize<'de>> serde::de::Visitor<'de> for Visit<V> {
            type Value = SortedMap<V>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut access: A,
            ) -> Result<Self::Value, A::Error> {
                let mut map = SortedMap::new();
                while let Some((k, v)) = access.next_entry::<String, V>()? {
                    map.insert(k, v);
                }
                Ok(map)
            }
        }
        deserializer.deserialize_map(Visit(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn sorted_map_reads_and_writes_as_the_btree_map_did() {
        let pairs = [("b", 2u32), ("a", 1), ("c", 3), ("a", 9), ("", 0)];
        let own: SortedMap<u32> = pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let btree: BTreeMap<String, u32> = pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert!(own.iter().eq(btree.iter()));
        assert_eq!(own.len(), 4);
        assert_eq!(own.get("a"), Some(&9));
        assert_eq!(own.get("z"), None);
        let text = serde_json::to_string(&own).ok();
        assert_eq!(text, serde_json::to_string(&btree).ok());
        let read: Option<SortedMap<u32>> =
            serde_json::from_str(r#"{"b":2,"a":1,"c":3,"a":9,"":0}"#).ok();
        assert_eq!(read, Some(own));
        let wrong = serde_json::from_str::<SortedMap<u32>>("[1]").map_err(|e| e.to_string());
        let wrong_btree =
            serde_json::from_str::<BTreeMap<String, u32>>("[1]").map_err(|e| e.to_string());
        assert_eq!(wrong.err(), wrong_btree.err());
    }
}
