//! A request's `avoid` list: kept as given (exports, snapshots and explanations show
//! it so), and indexed for membership.
//!
//! Membership is asked once per executor a decision looks at, so a linear scan made
//! a lease with n avoided ids cost O(n²) (32,000 ids took 1.75 s). The index sorts
//! the positions once, O(n log n), and each question is a binary search.

use std::cmp::Ordering;

#[derive(Debug, Clone, Default)]
pub(super) struct Avoid {
    /// As given: repeats and order kept.
    ids: Vec<String>,
    /// Positions in `ids` in id order, each id once; empty when `ids` is already
    /// strictly in id order (the common case: one id, or none).
    order: Vec<u32>,
}

/// The avoid list of a request that has none.
pub(super) static NO_AVOID: Avoid = Avoid {
    ids: Vec::new(),
    order: Vec::new(),
};

impl Avoid {
    pub(super) fn new(ids: Vec<String>) -> Avoid {
        let sorted = ids.windows(2).all(|w| w[0] < w[1]);
        let order = if sorted {
            Vec::new()
        } else {
            // Sorted as (id, position) pairs: the ids sit beside their positions, so
            // the comparisons read memory in order (an index sort chased each id).
            let mut pairs: Vec<(&str, u32)> = ids
                .iter()
                .enumerate()
                .map(|(i, id)| (id.as_str(), i as u32))
                .collect();
            pairs.sort_unstable();
            pairs.dedup_by(|a, b| a.0 == b.0);
            pairs.into_iter().map(|(_, i)| i).collect()
        };
        Avoid { ids, order }
    }

    /// The list as given.
    pub(super) fn as_given(&self) -> &[String] {
        &self.ids
    }

    /// How many ids it names, each once.
    pub(super) fn distinct_len(&self) -> usize {
        if self.order.is_empty() {
            self.ids.len()
        } else {
            self.order.len()
        }
    }

    /// Each avoided id once, in id order.
    pub(super) fn distinct(&self) -> impl Iterator<Item = &str> {
        let direct = self.order.is_empty();
        (0..self.distinct_len()).map(move |i| self.at(i, direct))
    }

    fn at(&self, i: usize, direct: bool) -> &str {
        if direct {
            &self.ids[i]
        } else {
            &self.ids[self.order[i] as usize]
        }
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        if self.order.is_empty() {
            return self.ids.binary_search_by(|x| x.as_str().cmp(id)).is_ok();
        }
        self.order
            .binary_search_by(|&i| -> Ordering { self.ids[i as usize].as_str().cmp(id) })
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::Avoid;

    fn avoid(ids: &[&str]) -> Avoid {
        Avoid::new(ids.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn membership_and_distinct_ids_whatever_the_order() {
        for ids in [
            &[][..],
            &["a"],
            &["a", "b", "c"],
            &["c", "a", "b", "a", "c"],
            &["b", "b"],
        ] {
            let list = avoid(ids);
            assert_eq!(list.as_given(), ids);
            for probe in ["a", "b", "c", "d", ""] {
                assert_eq!(
                    list.contains(probe),
                    ids.contains(&probe),
                    "{ids:?} {probe}"
                );
            }
            let mut want: Vec<&str> = ids.to_vec();
            want.sort_unstable();
            want.dedup();
            assert_eq!(list.distinct().collect::<Vec<_>>(), want);
        }
    }
}
