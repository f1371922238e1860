//! A bounded first-in-first-out memo: values kept by key until taken, the oldest dropped once
//! the kept values' sizes pass a byte bound or their number an entry bound. What the memos of
//! things this thread's peers sent (`sent_chunks`, `sent_messages`) keep their values in; a
//! dropped value only costs its receiver the work the memo would have saved.

use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::hash::Hash;

/// Values by key, with their sizes, within `max_bytes` and `max_entries`.
pub(crate) struct Kept<K, V> {
    values: FxHashMap<K, (V, usize)>,
    /// Keys, oldest first; some may have been taken already.
    order: VecDeque<K>,
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
            bytes: 0,
            max_bytes,
            max_entries,
        }
    }

    /// Keeps `value`, of `size` bytes, under `key` (replacing what was there), then drops the
    /// oldest values until both bounds hold again.
    pub(crate) fn keep(&mut self, key: K, value: V, size: usize) {
        self.bytes += size;
        match self.values.insert(key.clone(), (value, size)) {
            Some((_, old)) => self.bytes -= old,
            None => self.order.push_back(key),
        }
        while self.bytes > self.max_bytes || self.values.len() > self.max_entries {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some((_, gone)) = self.values.remove(&oldest) {
                self.bytes -= gone;
            }
        }
        // Taken values leave their keys behind; drop those once they outnumber the rest.
        if self.order.len() > 2 * self.values.len() + 64 {
            let values = &self.values;
            self.order.retain(|k| values.contains_key(k));
        }
    }

    /// The value under `key`, which is kept no longer.
    pub(crate) fn take(&mut self, key: &K) -> Option<V> {
        let (value, size) = self.values.remove(key)?;
        self.bytes -= size;
        Some(value)
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
    fn taken_keys_do_not_pile_up() {
        let mut kept = Kept::new(usize::MAX, usize::MAX);
        for i in 0..10_000 {
            kept.keep(i, (), 1);
            assert_eq!(kept.take(&i), Some(()));
        }
        assert!(kept.order.len() <= 64 + 1);
    }
}
