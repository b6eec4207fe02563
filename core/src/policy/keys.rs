//! The one key shape of every ordered index, and the name-to-number map.

use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Lease order: ranked before unranked, then rank, then event time, then arrival.
/// The parts as requests are exported and imported; kept encoded as a `Key`.
pub(super) type KeyParts = (u8, i64, u64, u64);

/// The one key shape of every ordered index (each distinct `BTreeMap`/`BTreeSet`
/// type is another copy of the B-tree code in the WebAssembly module, so the pinned
/// queues and the timers use `Index`, and the blocks of the ready sets and role
/// queues hold the same keys).
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

/// Names to numbers (request ids to slots and to leases, executor ids to indexes).
pub(super) use crate::names::{shared, ByName, SharedName};

/// Pairs in key order, written as a JSON object (a sorted map's serializer).
pub(super) fn as_map<S: serde::Serializer, K: serde::Serialize, V: serde::Serialize>(
    pairs: &[(K, V)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(pairs.iter().map(|(k, v)| (k, v)))
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
}
