//! A bounded first-in-first-out memo: values kept by key until taken, the oldest dropped once
//! the kept values' sizes pass a byte bound or their number an entry bound. What the memos of
//! things this thread's peers sent (`sent_chunks`, `sent_messages`) keep their values in; a
//! dropped value only costs its receiver the work the memo would have saved.

use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::hash::Hash;

/// Values by key, with their sizes, within `max_bytes` and `max_entries`.
pub(crate) struct Kept<K, V> {
    /// Each value, its size, and the number it was kept under (see `order`).
    values: FxHashMap<K, (V, usize, u64)>,
    /// Keys with the number their value was kept under, oldest first. A key whose value was
    /// taken, or kept again since, is left behind; the number tells it from the live entry.
    order: VecDeque<(K, u64)>,
    kept: u64,
    bytes: usize,
    max_bytes: usize,
    max_entries: usize,
}

impl<K: Hash + Eq + Clone, V> Kept<K, V> {
    /// An empty memo with these bounds.
    pub(crate) fn new(max_bytes: usize, max_entries: usize) -> Self {
        Kept {
            values: FxHashMap::default(),
            order: VecDeque::new(),
            kept: 0,
            bytes: 0,
            max_bytes,
            max_entries,
        }
    }

    /// Keeps `value`, of `size` bytes, under `key` (replacing what was there), then drops the
    /// oldest values until both bounds hold again.
    pub(crate) fn keep(&mut self, key: K, value: V, size: usize) {
        self.kept += 1;
        self.bytes += size;
        if let Some((_, old, _)) = self.values.insert(key.clone(), (value, size, self.kept)) {
            self.bytes -= old;
        }
        self.order.push_back((key, self.kept));
        while self.bytes > self.max_bytes || self.values.len() > self.max_entries {
            let Some((oldest, number)) = self.order.pop_front() else {
                break;
            };
            if self.values.get(&oldest).is_some_and(|v| v.2 == number) {
                if let Some((_, gone, _)) = self.values.remove(&oldest) {
                    self.bytes -= gone;
                }
            }
        }
        // Keys left behind pile up; drop them once they outnumber the live ones.
        if self.order.len() > 2 * self.values.len() + 64 {
            let values = &self.values;
            self.order
                .retain(|(k, number)| values.get(k).is_some_and(|v| v.2 == *number));
        }
    }

    /// The value under `key`, which is kept no longer.
    pub(crate) fn take(&mut self, key: &K) -> Option<V> {
        let (value, size, _) = self.values.remove(key)?;
        self.bytes -= size;
        Some(value)
    }

    /// Forgets every value.
    pub(crate) fn clear(&mut self) {
        self.values.clear();
        self.order.clear();
        self.bytes = 0;
    }

    /// Whether a value is kept under `key`.
    #[cfg(test)]
    pub(crate) fn holds(&self, key: &K) -> bool {
        self.values.contains_key(key)
    }

    /// How many values are kept, and their bytes.
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        (self.values.len(), self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_taken_once_and_the_oldest_go_past_either_bound() {
        let mut kept = Kept::new(10, 3);
        kept.keep(1, "a", 4);
        kept.keep(2, "b", 4);
        assert_eq!(kept.take(&1), Some("a"));
        assert_eq!(kept.take(&1), None);
        kept.keep(3, "c", 4);
        kept.keep(4, "d", 4);
        assert_eq!(kept.held(), (2, 8), "2 went when 4 passed the byte bound");
        assert!(!kept.holds(&2));
        kept.keep(5, "e", 0);
        kept.keep(6, "f", 0);
        assert_eq!(
            kept.held(),
            (3, 4),
            "3 went when a fourth value passed the entry bound"
        );
        assert!(!kept.holds(&3) && kept.holds(&4) && kept.holds(&6));
        kept.keep(4, "d2", 1);
        assert_eq!(
            kept.held(),
            (3, 1),
            "a value kept again replaces the old one's size"
        );
        assert_eq!(kept.take(&4), Some("d2"));
    }

    #[test]
    fn a_key_kept_again_after_being_taken_is_as_new() {
        let mut kept = Kept::new(usize::MAX, 2);
        kept.keep(1, "a", 0);
        assert_eq!(kept.take(&1), Some("a"));
        kept.keep(2, "b", 0);
        kept.keep(1, "a again", 0);
        // The third value passes the entry bound: the oldest live one (2) goes, not 1's new
        // value behind 1's stale place at the front.
        kept.keep(3, "c", 0);
        assert!(kept.holds(&1) && !kept.holds(&2) && kept.holds(&3));
    }

    #[test]
    fn taken_keys_do_not_pile_up() {
        let mut kept = Kept::new(usize::MAX, usize::MAX);
        for i in 0..10_000 {
            kept.keep(i, (), 1);
            assert_eq!(kept.take(&i), Some(()));
        }
        assert!(kept.order.len() <= 64 + 1);
    }
}
