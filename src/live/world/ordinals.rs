//! Numbers for the order tracker's readers and authors that stay bounded however long a live
//! relay runs: a reader that will not come back (an unlabelled connection) and an author none of
//! whose events are remembered any more are forgotten. Numbers are never reused, so a forgotten
//! name can never be mistaken for a new one.

use std::collections::BTreeMap;

/// Reader and author numbers; see the module documentation.
#[derive(Debug, Default)]
pub(super) struct Ordinals {
    next: u64,
    readers: BTreeMap<String, u64>,
    /// By key: the author's number and how many of its events are remembered.
    authors: BTreeMap<String, (u64, usize)>,
    /// The key of each author number in `authors`.
    author_keys: BTreeMap<u64, String>,
}

impl Ordinals {
    fn fresh(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// The number of the reader called `peer` (the same for every connection of a labelled
    /// peer).
    pub(super) fn reader(&mut self, peer: &str) -> u64 {
        if let Some(&n) = self.readers.get(peer) {
            return n;
        }
        let n = self.fresh();
        self.readers.insert(peer.to_owned(), n);
        n
    }

    /// The reader called `peer` will not read again.
    pub(super) fn reader_gone(&mut self, peer: &str) {
        self.readers.remove(peer);
    }

    /// The number of the author with key `key`.
    pub(super) fn author(&mut self, key: &str) -> u64 {
        if let Some(&(n, _)) = self.authors.get(key) {
            return n;
        }
        let n = self.fresh();
        self.authors.insert(key.to_owned(), (n, 0));
        self.author_keys.insert(n, key.to_owned());
        n
    }

    /// One more of `author`'s events is remembered.
    pub(super) fn published(&mut self, author: u64) {
        if let Some((_, events)) = self
            .author_keys
            .get(&author)
            .and_then(|key| self.authors.get_mut(key))
        {
            *events += 1;
        }
    }

    /// One of `author`'s events is forgotten; with none left, so is the author.
    pub(super) fn forgotten(&mut self, author: u64) {
        let Some(key) = self.author_keys.get(&author) else {
            return;
        };
        let Some((_, events)) = self.authors.get_mut(key) else {
            return;
        };
        *events = events.saturating_sub(1);
        if *events == 0 {
            self.authors.remove(key);
            self.author_keys.remove(&author);
        }
    }

    /// Names held: readers and authors.
    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        (self.readers.len(), self.authors.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_keeps_its_number_until_it_is_gone_and_numbers_are_never_reused() {
        let mut o = Ordinals::default();
        let alice = o.reader("alice");
        assert_eq!(o.reader("alice"), alice, "a labelled peer's reconnection");
        let client = o.reader("client-7");
        o.reader_gone("client-7");
        assert_eq!(o.held(), (1, 0));
        let next = o.reader("client-8");
        assert!(
            next != alice && next != client,
            "no number is handed out twice"
        );
        assert_ne!(
            o.reader("client-7"),
            client,
            "a forgotten name gets a new number"
        );
    }

    #[test]
    fn an_author_is_forgotten_with_its_last_remembered_event() {
        let mut o = Ordinals::default();
        let a = o.author("key-a");
        o.published(a);
        o.published(a);
        o.forgotten(a);
        assert_eq!(o.author("key-a"), a, "one event still remembered");
        o.forgotten(a);
        assert_eq!(o.held(), (0, 0));
        assert_ne!(o.author("key-a"), a);
    }
}
