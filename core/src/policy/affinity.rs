//! Affinity: the roster's memory of which executor last served a lease's `affinity`
//! key (a prompt or session cache lives there). Each key names the executor that got
//! its last grant and when; a key is live while it was used less than the document's
//! `affinityTtl` ago (the inputs' time, never a clock). A lease with a live key
//! prefers that executor while it is free, in the round and no worse in priority than
//! the best free one (`granting.rs`); every grant with a key moves the key to its
//! executor and refreshes it. At most `limits::MAX_AFFINITY_KEYS` keys are kept: the
//! one used least recently is forgotten first, and expired ones are dropped after
//! every input. Only executors in the running document are remembered: a reload that
//! removes one forgets its keys.

use crate::limits::MAX_AFFINITY_KEYS;

use super::keys::{ByName, Index, SharedName};

/// One remembered key.
#[derive(Debug, Clone)]
pub(super) struct Remembered {
    pub(super) key: Box<str>,
    pub(super) executor: SharedName,
    /// When the key was last granted (epoch ms).
    pub(super) used: u64,
    /// Its place in use order (greater: used later).
    stamp: u64,
}

/// The memory: entries in a slab, found by key and by use order.
#[derive(Debug, Clone, Default)]
pub(super) struct Affinity {
    entries: Vec<Remembered>,
    /// Key -> its entry's index.
    by_key: ByName,
    /// `[stamp, 0, 0, 0]` -> its entry's index: least recently used first.
    order: Index,
    next_stamp: u64,
}

fn order_key(stamp: u64) -> [u64; 4] {
    [stamp, 0, 0, 0]
}

impl Affinity {
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(super) fn knows(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    /// The executor `key` is remembered on and until when, if it is live at `now`.
    pub(super) fn live(&self, key: &str, now: u64, ttl: u64) -> Option<(&SharedName, u64)> {
        let x = &self.entries[*self.by_key.get(key)? as usize];
        let until = x.used.saturating_add(ttl);
        (until > now).then_some((&x.executor, until))
    }

    /// A grant of `key` on `executor` at `now`: the key moves there and is refreshed.
    /// Whether it stuck (its live memory named that executor already).
    pub(super) fn remember(&mut self, key: &str, executor: SharedName, now: u64, ttl: u64) -> bool {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        if let Some(&i) = self.by_key.get(key) {
            let x = &mut self.entries[i as usize];
            let stuck = x.used.saturating_add(ttl) > now && x.executor == executor;
            self.order.remove(&order_key(x.stamp));
            (x.executor, x.used, x.stamp) = (executor, now, stamp);
            self.order.insert(order_key(stamp), i as u32);
            return stuck;
        }
        if self.entries.len() >= MAX_AFFINITY_KEYS {
            if let Some((_, &i)) = self.order.first_key_value() {
                self.remove_at(i as usize);
            }
        }
        let i = self.entries.len();
        self.by_key.insert(Box::from(key), i as u64);
        self.order.insert(order_key(stamp), i as u32);
        self.entries.push(Remembered {
            key: Box::from(key),
            executor,
            used: now,
            stamp,
        });
        false
    }

    fn remove_at(&mut self, i: usize) {
        let gone = self.entries.swap_remove(i);
        self.by_key.remove(&gone.key);
        self.order.remove(&order_key(gone.stamp));
        if let Some(moved) = self.entries.get(i) {
            if let Some(at) = self.by_key.get_mut(&moved.key) {
                *at = i as u64;
            }
            if let Some(at) = self.order.get_mut(&order_key(moved.stamp)) {
                *at = i as u32;
            }
        }
    }

    /// Forgets the keys no longer live at `now` (oldest first, so it stops at the
    /// first live one).
    pub(super) fn expire(&mut self, now: u64, ttl: u64) {
        while let Some((_, &i)) = self.order.first_key_value() {
            if self.entries[i as usize].used.saturating_add(ttl) > now {
                break;
            }
            self.remove_at(i as usize);
        }
    }

    /// Keeps only the keys whose executor `keep` accepts (a reload). In place: a
    /// removal moves the last entry into the gap, which is looked at next.
    pub(super) fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        let mut i = 0;
        while i < self.entries.len() {
            if keep(&self.entries[i].executor) {
                i += 1;
            } else {
                self.remove_at(i);
            }
        }
    }

    /// The entries, least recently used first (the export's order).
    pub(super) fn in_order(&self) -> impl Iterator<Item = &Remembered> {
        self.order.values().map(|&i| &self.entries[i as usize])
    }

    /// The first entry (oldest first) that breaks the memory's rules at `now`, and
    /// how: its executor not in the round's document (`declared`), used after now,
    /// before the entry above it, or expired; too many keys; indexes out of step.
    pub(super) fn fault(
        &self,
        now: u64,
        ttl: u64,
        declared: &dyn Fn(&str) -> bool,
    ) -> Option<(usize, &'static str)> {
        if self.entries.len() > MAX_AFFINITY_KEYS {
            return Some((
                MAX_AFFINITY_KEYS,
                "more keys than limits::MAX_AFFINITY_KEYS",
            ));
        }
        if self.by_key.len() != self.entries.len() || self.order.len() != self.entries.len() {
            return Some((0, "the key and order indexes do not match the entries"));
        }
        let mut last = 0;
        for (n, x) in self.in_order().enumerate() {
            let fault = if !declared(&x.executor) {
                "its executor is not an executor of the running document"
            } else if x.used > now {
                "used after now"
            } else if x.used < last {
                "used before the entry above it (the list is oldest first)"
            } else if x.used.saturating_add(ttl) <= now {
                "expired (used affinityTtl or longer ago)"
            } else if x.key.is_empty() || x.key.len() > crate::limits::MAX_AFFINITY_KEY_BYTES {
                "an empty key, or one longer than limits::MAX_AFFINITY_KEY_BYTES"
            } else if self
                .by_key
                .get(&x.key)
                .map(|&i| &*self.entries[i as usize].key)
                != Some(&*x.key)
            {
                "its key is listed twice"
            } else {
                last = x.used;
                continue;
            };
            return Some((n, fault));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::shared;

    #[test]
    fn the_oldest_key_is_forgotten_first_at_the_bound() {
        let mut memory = Affinity::default();
        let ttl = 600_000;
        for k in 0..MAX_AFFINITY_KEYS {
            memory.remember(&format!("k{k}"), shared(format!("e{}", k % 3)), 1_000, ttl);
        }
        // k0 used again: k1 is now the least recently used.
        assert!(memory.remember("k0", shared("e0".into()), 2_000, ttl));
        memory.remember("new", shared("e1".into()), 2_000, ttl);
        assert_eq!(memory.entries.len(), MAX_AFFINITY_KEYS);
        assert!(memory.live("k1", 2_000, ttl).is_none(), "k1 was dropped");
        assert!(memory.live("k0", 2_000, ttl).is_some());
        assert!(memory.live("k2", 2_000, ttl).is_some());
        assert_eq!(
            memory.live("new", 2_000, ttl).map(|(e, _)| &**e),
            Some("e1")
        );
        assert_eq!(memory.fault(2_000, ttl, &|_| true), None);
        // The rest expire by time only, oldest first.
        memory.expire(601_000, ttl);
        assert_eq!(memory.entries.len(), 2);
        assert_eq!(memory.fault(601_000, ttl, &|_| true), None);
        memory.retain(|e| e != "e1");
        assert_eq!(
            memory.in_order().map(|x| &*x.key).collect::<Vec<_>>(),
            ["k0"]
        );
        assert_eq!(memory.fault(601_000, ttl, &|_| true), None);
    }
}
