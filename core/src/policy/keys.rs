//! The one key shape of every ordered index, and the name-to-number map.

use std::borrow::{Borrow, Cow};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Lease order: ranked before unranked, then rank, then event time, then arrival.
/// The parts as requests are exported and imported; kept encoded as a `Key`.
pub(super) type KeyParts = (u8, i64, u64, u64);

/// The one key shape of every ordered index (issue 4: each distinct `BTreeMap`/
/// `BTreeSet` type is another copy of the B-tree code in the WebAssembly module, so
/// the queues, the ready sets and the timers all use `Index`).
///
/// Every key is a tuple of at most four parts encoded word by word, each part by a
/// map that is strictly increasing (and so one-to-one) from the part's own order
/// into `u64`'s: `u64` as itself, `u8` and `usize` widened, `i64` with its sign bit
/// flipped, a priority `f64` by the bits `f64::total_cmp` compares (`Priority::code`);
/// unused words are 0. Arrays compare word by word like tuples part by part, so two
/// keys compare exactly as the tuples they encode (equal only when the tuples are):
/// every iteration order, `first`, and range is the one the tuple sets had.
pub(super) type Key = [u64; 4];

/// Ordered keys, each with a request slot (queues) or 0 (sets).
pub(super) type Index = BTreeMap<Key, u32>;

/// A request's lease order (`KeyParts`) as a `Key`.
pub(super) type OrderKey = Key;

pub(super) const SIGN: u64 = 1 << 63;

pub(super) fn order_key((unranked, rank, time, arrival): KeyParts) -> OrderKey {
    [u64::from(unranked), rank as u64 ^ SIGN, time, arrival]
}

pub(super) fn key_parts(key: &OrderKey) -> KeyParts {
    // `order_key` wrote the first word from a `u8`.
    (key[0] as u8, (key[1] ^ SIGN) as i64, key[2], key[3])
}

/// A timer entry: `(time, executor)`.
pub(super) fn timer_key(t: u64, e: usize) -> Key {
    [t, e as u64, 0, 0]
}

/// A ready-set entry: `(priority, stamp, executor)`.
pub(super) fn ready_key(prio: Priority, stamp: u64, e: usize) -> Key {
    [prio.code(), stamp, e as u64, 0]
}

/// A priority with a total order, so it can key an ordered set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Priority(pub(super) f64);

impl Eq for Priority {}
impl PartialOrd for Priority {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Priority {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl Priority {
    /// A `u64` in the order of `f64::total_cmp`: the same bit flips it makes (all
    /// but the sign bit of a negative, so a more negative value compares lower as
    /// an `i64`), then the sign bit flipped to carry `i64` order into `u64`'s.
    pub(super) fn code(self) -> u64 {
        let bits = self.0.to_bits();
        let flipped = bits ^ ((((bits as i64) >> 63) as u64) >> 1);
        flipped ^ SIGN
    }
}

/// A name as a map key: its first eight bytes as a big-endian `u64` (zero-padded),
/// then its whole text. Two names compare as their texts do (where the padded heads
/// differ, they differ as the bytes do; equal heads fall back to the texts), so a map
/// of them iterates in id order; but a comparison is mostly one integer compare
/// rather than a call to `memcmp` (issue 15: request ids such as `r1041` differ in
/// their first bytes, and `memcmp` was a sixteenth of a waiting cycle in Node).
#[derive(Debug, Clone)]
pub(super) struct Name<'a> {
    head: u64,
    text: Cow<'a, str>,
}

impl<'a> Name<'a> {
    /// For a lookup: no copy of the text.
    fn of(text: &'a str) -> Name<'a> {
        Name {
            head: head(text),
            text: Cow::Borrowed(text),
        }
    }
}

fn head(text: &str) -> u64 {
    if let Some(word) = text.as_bytes().first_chunk::<8>() {
        return u64::from_be_bytes(*word);
    }
    let mut word = [0u8; 8];
    for (w, b) in word.iter_mut().zip(text.bytes()) {
        *w = b;
    }
    u64::from_be_bytes(word)
}

impl PartialEq for Name<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.head == other.head && self.text == other.text
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
            .then_with(|| self.text.cmp(&other.text))
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

/// Names to numbers: request ids to slots, request ids to leases, executor ids to
/// indexes. One map type for the three (each distinct map type is another copy of
/// the B-tree code in the WebAssembly module). Iterates in name order.
#[derive(Debug, Clone, Default)]
pub(super) struct ByName(BTreeMap<NameKey, u64>);

impl ByName {
    pub(super) fn new() -> ByName {
        ByName::default()
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn get(&self, name: &str) -> Option<&u64> {
        self.0.get(&Name::of(name))
    }

    pub(super) fn contains_key(&self, name: &str) -> bool {
        self.0.contains_key(&Name::of(name))
    }

    /// The number `name` had before, if any.
    pub(super) fn insert(&mut self, name: Box<str>, value: u64) -> Option<u64> {
        let key = NameKey(Name {
            head: head(&name),
            text: Cow::Owned(name.into_string()),
        });
        self.0.insert(key, value)
    }

    pub(super) fn remove(&mut self, name: &str) -> Option<u64> {
        self.0.remove(&Name::of(name))
    }

    /// In name order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &u64)> {
        self.0.iter().map(|(key, value)| (&*key.0.text, value))
    }

    /// In name order.
    pub(super) fn values(&self) -> impl Iterator<Item = &u64> {
        self.0.values()
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

#[cfg(test)]
mod key_tests {
    use super::*;

    /// The encodings keep the tuples' order exactly (see `Key`).
    #[test]
    pub(super) fn keys_compare_as_the_tuples_they_encode() {
        let floats = [
            f64::NEG_INFINITY,
            -1e300,
            -1.5,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            0.5,
            1.0,
            1e300,
            f64::INFINITY,
            f64::NAN,
            -f64::NAN,
        ];
        for &a in &floats {
            for &b in &floats {
                assert_eq!(
                    Priority(a).code().cmp(&Priority(b).code()),
                    Priority(a).cmp(&Priority(b)),
                    "{a} vs {b}"
                );
            }
        }
        let parts: Vec<KeyParts> = [0u8, 1, 255]
            .iter()
            .flat_map(|&u| {
                [i64::MIN, -1, 0, 1, i64::MAX]
                    .into_iter()
                    .flat_map(move |r| [0, 7, u64::MAX].map(|t| (u, r, t, t / 2)))
            })
            .collect();
        for a in &parts {
            assert_eq!(key_parts(&order_key(*a)), *a);
            for b in &parts {
                assert_eq!(
                    order_key(*a).cmp(&order_key(*b)),
                    a.cmp(b),
                    "{a:?} vs {b:?}"
                );
            }
        }
        assert!(timer_key(5, 9) < timer_key(6, 0) && timer_key(6, 0) < timer_key(6, 1));
    }

    /// Names compare exactly as their texts (see `Name`), and the map iterates in
    /// text order: heads that differ, heads equal up to their padding, long names
    /// equal in their first eight bytes, bytes above 0x7f.
    #[test]
    fn names_compare_as_their_texts() {
        let texts = [
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
        for a in texts {
            for b in texts {
                assert_eq!(Name::of(a).cmp(&Name::of(b)), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(Name::of(a) == Name::of(b), a == b, "{a:?} == {b:?}");
            }
        }
        let map: ByName = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (Box::from(*t), i as u64))
            .collect();
        let mut sorted: Vec<&str> = texts.to_vec();
        sorted.sort_unstable();
        assert_eq!(map.iter().map(|(t, _)| t).collect::<Vec<_>>(), sorted);
        for (i, t) in texts.iter().enumerate() {
            assert_eq!(map.get(t), Some(&(i as u64)), "{t:?}");
        }
        assert_eq!(map.get("abcdefg"), None);
    }
}
