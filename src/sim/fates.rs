//! Recorded fates: what a real relay did with each publication, imposed on a des run.
//!
//! A schedule replay of a des trace reuses the n-th decision of each link. A recording of a
//! real relay (`relaysim record`, `relaysim serve --trace`, the turmoil engine) has no link
//! decisions, only publications and deliveries, and a rerun signs its events at other times,
//! so event ids differ. What stays the same is *what* each peer published: its key, the
//! recipient and the content. So a publication is known by its author, its recipient (first
//! `p` tag), the SHA-256 of its content and which publication of those it is
//! ([`PublicationKey`]). (Without the recipient, a server's identical frames to two clients,
//! such as the same keepalive ping on two streams with the same token, would trade fates
//! whenever the two were published in the other order.) The recording says,
//! for each recipient, how long after publication each copy arrived, or that none did.

use nostr::prelude::{Event, EventId, PublicKey};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::time::Duration;

/// One publication, known across runs by what was published rather than by its event id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PublicationKey {
    /// The event's author.
    pub author: PublicKey,
    /// The event's recipient (its first `p` tag).
    pub recipient: Option<PublicKey>,
    /// SHA-256 of the event's content.
    pub content_sha256: [u8; 32],
    /// 0 for the author's first publication of this content, 1 for the second, and so on.
    pub occurrence: u32,
}

impl PublicationKey {
    /// The key of the `occurrence`-th publication of `content` by `author` to `recipient`.
    /// Content is hashed as traces store it (resume tokens redacted), so a recording and a
    /// rerun agree.
    pub fn new(
        author: PublicKey,
        recipient: Option<PublicKey>,
        content: &str,
        occurrence: u32,
    ) -> Self {
        let redacted = crate::protocol::resumable::messages::redact_tokens(content);
        let content = redacted.as_deref().unwrap_or(content);
        PublicationKey {
            author,
            recipient,
            content_sha256: Sha256::digest(content.as_bytes()).into(),
            occurrence,
        }
    }
}

/// What the recorded relay did with each publication.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordedFates {
    /// For each recorded publication, each recipient's copies: their latencies after the
    /// publication, in arrival order. A recipient that is absent received nothing.
    pub by_publication: BTreeMap<PublicationKey, BTreeMap<PublicKey, Vec<Duration>>>,
}

impl RecordedFates {
    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.by_publication.is_empty()
    }
}

/// The world's side: numbers its publications the way [`PublicationKey`] does and looks up
/// their recorded fates.
#[derive(Debug, Default)]
pub(crate) struct FateTracker {
    fates: RecordedFates,
    /// The relay the recording was made at.
    relay: usize,
    keys: BTreeMap<EventId, PublicationKey>,
    occurrences: BTreeMap<(PublicKey, Option<PublicKey>, [u8; 32]), u32>,
    /// (publication, recipient) pairs whose recorded copies were scheduled already.
    used: std::collections::BTreeSet<(PublicationKey, PublicKey)>,
}

impl FateTracker {
    pub(crate) fn new(relay: usize, fates: RecordedFates) -> Self {
        FateTracker {
            fates,
            relay,
            ..FateTracker::default()
        }
    }

    /// Whether a recording is imposed (then the rerun's network is the recording's: no
    /// outages, no uplink disturbance).
    pub(crate) fn active(&self) -> bool {
        !self.fates.is_empty()
    }

    /// The relay the recording was made at.
    pub(crate) fn relay(&self) -> usize {
        self.relay
    }

    /// Notes a publication as the recorded relay received it (the recording counts
    /// occurrences there too). The same event again is the same publication.
    pub(crate) fn published(&mut self, event: &Event) {
        if self.fates.is_empty() || self.keys.contains_key(&event.id) {
            return;
        }
        let recipient = event.tags.public_keys().next();
        let first = PublicationKey::new(event.pubkey, recipient, &event.content, 0);
        let n = self
            .occurrences
            .entry((first.author, first.recipient, first.content_sha256))
            .or_insert(0);
        let key = PublicationKey {
            occurrence: *n,
            ..first
        };
        *n += 1;
        self.keys.insert(event.id, key);
    }

    /// The delays, from `now`, of the copies of `event` that `relay` delivers to `recipient`,
    /// when the recording says: the recorded latencies counted from `published` (a copy whose
    /// time has passed goes at once), or no copies if the recording delivered none. The
    /// recorded copies are handed out once: a relay that sends the event to the same recipient
    /// again (a second subscription, stored events after a reconnection) gets none, since the
    /// recording's list already holds every copy that recipient got. `None` when the recording
    /// has no such publication, so the link decides.
    pub(crate) fn delays(
        &mut self,
        relay: usize,
        event: &EventId,
        recipient: &PublicKey,
        published: Duration,
        now: Duration,
    ) -> Option<Vec<Duration>> {
        if relay != self.relay {
            return None;
        }
        let key = *self.keys.get(event)?;
        let recipients = self.fates.by_publication.get(&key)?;
        if !self.used.insert((key, *recipient)) {
            return Some(Vec::new());
        }
        Some(
            recipients
                .get(recipient)
                .map(|latencies| {
                    latencies
                        .iter()
                        .map(|l| (published + *l).saturating_sub(now))
                        .collect()
                })
                .unwrap_or_default(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nip01::Identity;

    fn event(who: &Identity, content: &str, created_at: u64) -> Event {
        who.sign(25910, created_at, Vec::new(), content.into())
    }

    #[test]
    fn a_publication_is_known_by_author_content_and_occurrence_not_by_id() {
        let alice = Identity::derive(1, "alice");
        let bob = Identity::derive(1, "bob");
        let recorded = PublicationKey::new(alice.public_key(), None, "hello", 1);
        let mut fates = RecordedFates::default();
        fates.by_publication.insert(
            recorded,
            BTreeMap::from([(bob.public_key(), vec![Duration::from_millis(50)])]),
        );
        let mut tracker = FateTracker::new(0, fates);
        // Signed at other times than in the recording: other ids, same content.
        let first = event(&alice, "hello", 100);
        let second = event(&alice, "hello", 200);
        tracker.published(&first);
        tracker.published(&first); // the same event to a second relay: still the first
        tracker.published(&second);
        let at = Duration::from_secs(1);
        assert_eq!(
            tracker.delays(0, &second.id, &bob.public_key(), at, at),
            Some(vec![Duration::from_millis(50)])
        );
        // The first publication of "hello" is not in the recording: the link decides.
        assert_eq!(
            tracker.delays(0, &first.id, &bob.public_key(), at, at),
            None
        );
        // A recipient the recording never delivered to gets nothing.
        assert_eq!(
            tracker.delays(0, &second.id, &alice.public_key(), at, at),
            Some(vec![])
        );
        // Copies are handed out once; other relays are not covered.
        assert_eq!(
            tracker.delays(0, &second.id, &bob.public_key(), at, at),
            Some(vec![]),
            "already scheduled"
        );
        assert_eq!(
            tracker.delays(1, &second.id, &bob.public_key(), at, at),
            None
        );
    }
}
