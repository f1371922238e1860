//! Which subscriptions an event can match, found by its `p` tags instead of by trying every
//! subscription of the relay. Every ContextVM peer subscribes to the events `p`-tagged to it,
//! so with a thousand peers a broadcast tried a thousand filters to find one.
//!
//! The index only narrows: each candidate is still matched in full (`Filter::match_event`).
//! Candidates come out ordered by connection, then subscription id, the order in which the
//! relay walks its connections and their subscriptions, so deliveries keep their order.

use super::ConnId;
use nostr::prelude::{Filter, SingleLetterTag};
use std::collections::{BTreeMap, BTreeSet};

/// A subscription: its connection and id.
pub(super) type SubKey = (ConnId, String);

/// Subscriptions by the `p` values their filter asks for; those without a `#p` condition
/// apart, as candidates for every event.
#[derive(Debug, Default)]
pub(super) struct SubIndex {
    by_p: BTreeMap<String, BTreeSet<SubKey>>,
    any_p: BTreeSet<SubKey>,
}

fn wanted_p(filter: &Filter) -> Option<&BTreeSet<String>> {
    filter.generic_tags.get(&SingleLetterTag::LOWERCASE_P)
}

impl SubIndex {
    /// Adds subscription `key` with `filter` (after removing what it replaces).
    pub(super) fn insert(&mut self, key: SubKey, filter: &Filter) {
        match wanted_p(filter) {
            // An empty `#p` set matches nothing: indexed under no value, never a candidate.
            Some(values) => {
                for v in values {
                    self.by_p.entry(v.clone()).or_default().insert(key.clone());
                }
            }
            None => {
                self.any_p.insert(key);
            }
        }
    }

    /// Removes subscription `key`, which had `filter`.
    pub(super) fn remove(&mut self, key: &SubKey, filter: &Filter) {
        match wanted_p(filter) {
            Some(values) => {
                for v in values {
                    if let Some(set) = self.by_p.get_mut(v) {
                        set.remove(key);
                        if set.is_empty() {
                            self.by_p.remove(v);
                        }
                    }
                }
            }
            None => {
                self.any_p.remove(key);
            }
        }
    }

    /// The subscriptions an event with these `p` values can match, in connection and id
    /// order.
    pub(super) fn candidates(&self, recipients: &[&str]) -> BTreeSet<SubKey> {
        let mut out = self.any_p.clone();
        for p in recipients {
            if let Some(set) = self.by_p.get(*p) {
                out.extend(set.iter().cloned());
            }
        }
        out
    }

    /// Subscriptions indexed (for tests: nothing is left behind).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.any_p.len() + self.by_p.values().map(BTreeSet::len).sum::<usize>()
    }
}
