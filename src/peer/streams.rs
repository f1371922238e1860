//! How resumable streams ride on Nostr events: a message on a stream carries the tag
//! `["stream", <streamId>, <sequence>]`, and a copy sent again by `stream/resume` adds a fourth
//! element `replay-<n>` (the stream's n-th replay). The tag keeps the JSON-RPC message as it
//! is (CEP-22 and CEP-41 frames are unchanged), and the replay mark makes every copy a new
//! event: a relay or peer that drops events it has seen by id would otherwise drop the
//! replay, since relaysim signs deterministically.

use nostr::prelude::{Event, Tag};

/// The tag name.
pub const STREAM_TAG: &str = "stream";

/// Room kept in an event's size budget for the stream tag.
pub const STREAM_TAG_ROOM: usize = 96;

/// The stream tag of a message: `replay` is the replay number for a copy sent again.
pub fn stream_tag(stream_id: &str, seq: u64, replay: Option<u64>) -> Tag {
    let seq = seq.to_string();
    match replay {
        None => Tag::parse([STREAM_TAG, stream_id, seq.as_str()]),
        Some(n) => {
            let mark = format!("replay-{n}");
            Tag::parse([STREAM_TAG, stream_id, seq.as_str(), mark.as_str()])
        }
    }
    .expect("a tag with a name")
}

/// An event's JSON as traces store it: with any `resumeToken` in its content redacted. The
/// signature no longer matches such a content; traces are records, not events to re-publish.
pub fn redact_event_json(event: &mut serde_json::Value) {
    let redacted = event
        .get("content")
        .and_then(|c| c.as_str())
        .and_then(crate::protocol::resumable::messages::redact_tokens);
    if let Some(content) = redacted {
        event["content"] = content.into();
    }
}

/// The (stream id, sequence) an event carries, if it is on a stream.
pub fn stream_position(event: &Event) -> Option<(String, u64)> {
    event.tags.iter().find_map(|t| match t.as_slice() {
        [name, id, seq, ..] if name == STREAM_TAG => Some((id.clone(), seq.parse().ok()?)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nip01::Identity;

    #[test]
    fn the_tag_round_trips_and_a_replay_is_another_event() {
        let who = Identity::derive(1, "server");
        let sign = |tag| who.sign(25910, 1, vec![tag], "{}".into());
        let first = sign(stream_tag("abc", 7, None));
        let again = sign(stream_tag("abc", 7, Some(1)));
        assert_eq!(stream_position(&first), Some(("abc".into(), 7)));
        assert_eq!(stream_position(&again), Some(("abc".into(), 7)));
        assert_ne!(first.id, again.id);
        assert_eq!(
            stream_position(&who.sign(25910, 1, vec![], "{}".into())),
            None
        );
    }
}
