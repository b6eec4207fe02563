//! `ByName` as a B-tree of names (the builds without the feature `speed`: the web
//! build, whose code size is budgeted, brings the B-tree code for its indexes anyway).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// A name as a map key: its first eight bytes as a big-endian `u64` (zero-padded),
/// then its whole text. Two names compare as their texts do (where the padded heads
/// differ, they differ as the bytes do; equal heads fall back to the texts), so a map
/// of them iterates in id order; but a comparison is mostly one integer compare
/// rather than a call to `memcmp` (issue 15: request ids such as `r1041` differ in
/// their first bytes, and `memcmp` was a sixteenth of a waiting cycle in Node).
#[derive(Debug, Clone)]
struct Name<'a> {
    head: u64,
    text: Text<'a>,
}

/// A name's text: the map's own copy, or the one a lookup asks for.
#[derive(Debug, Clone)]
enum Text<'a> {
    Owned(Box<str>),
    Lent(&'a str),
}

impl Text<'_> {
    fn as_str(&self) -> &str {
        match self {
            Text::Owned(text) => text,
            Text::Lent(text) => text,
        }
    }
}

impl<'a> Name<'a> {
    /// For a lookup: no copy of the text.
    fn of(text: &'a str) -> Name<'a> {
        Name {
            head: head(text),
            text: Text::Lent(text),
        }
    }
}

fn head(text: &str) -> u64 {
    let bytes = text.as_bytes();
    (0..8).fold(0, |word, i| {
        word << 8 | u64::from(bytes.get(i).copied().unwrap_or(0))
    })
}

impl PartialEq for Name<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.head == other.head && self.text.as_str() == other.text.as_str()
    }
}

impl Eq for Name<'_> {}

impl PartialOrd for Name<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.head
            .cmp(&other.head)
            .then_with(|| self.text.as_str().cmp(other.text.as_str()))
    }
}

/// An owned `Name`, the key of `ByName`: lookups borrow it as a `Name` of the
/// text asked for (its lifetime shortened), so they copy nothing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct NameKey(Name<'static>);

impl<'a> Borrow<Name<'a>> for NameKey {
    fn borrow(&self) -> &Name<'a> {
        &self.0
    }
}

/// Names to numbers: request ids to slots or leases (`Requests::by_id`), executor ids
/// to indexes, a merge's entry positions. One map type for all (each distinct map
/// type is another copy of the B-tree code in the WebAssembly module). Iterates in
/// name order.
#[derive(Debug, Clone, Default)]
pub(crate) struct ByName(BTreeMap<NameKey, u64>);

impl ByName {
    /// Whether a walk in name order costs no more than the walk (a B-tree's does).
    pub(crate) const WALKS_IN_ORDER: bool = true;

    pub(crate) fn new() -> ByName {
        ByName::default()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn get(&self, name: &str) -> Option<&u64> {
        self.0.get(&Name::of(name))
    }

    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut u64> {
        self.0.get_mut(&Name::of(name))
    }

    pub(crate) fn contains_key(&self, name: &str) -> bool {
        self.0.contains_key(&Name::of(name))
    }

    /// The number `name` had before, if any.
    pub(crate) fn insert(&mut self, name: Box<str>, value: u64) -> Option<u64> {
        let key = NameKey(Name {
            head: head(&name),
            text: Text::Owned(name),
        });
        self.0.insert(key, value)
    }

    pub(crate) fn remove(&mut self, name: &str) -> Option<u64> {
        self.0.remove(&Name::of(name))
    }

    /// In name order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &u64)> {
        self.0
            .iter()
            .map(|(key, value)| (key.0.text.as_str(), value))
    }

    /// In name order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &u64> {
        self.0.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names compare exactly as their texts (see `Name`): heads that differ, heads
    /// equal up to their padding, long names equal in their first eight bytes,
    /// bytes above 0x7f.
    #[test]
    fn names_compare_as_their_texts() {
        for a in crate::names::tests::TEXTS {
            for b in crate::names::tests::TEXTS {
                assert_eq!(Name::of(a).cmp(&Name::of(b)), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(Name::of(a) == Name::of(b), a == b, "{a:?} == {b:?}");
            }
        }
    }
}
