//! One test per CEP-41 rule, named after it, plus the reordering choices of the session, and
//! writer → session round trips through a scripted relay.

use super::*;
use crate::protocol::jsonrpc::RequestId;
use std::collections::BTreeMap;
use std::time::Duration;

const T0: Duration = Duration::ZERO;
fn s(secs: u64) -> Duration {
    Duration::from_secs(secs)
}
fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn token() -> RequestId {
    RequestId::String("req-123".into())
}

fn writer(wait: bool) -> OpenStreamWriter {
    OpenStreamWriter::new(
        token(),
        WriterConfig {
            wait_for_accept: wait,
            ..WriterConfig::default()
        },
    )
}

fn drain(w: &mut OpenStreamWriter) -> Vec<StreamFrame> {
    std::iter::from_fn(|| w.poll_transmit(T0)).collect()
}

fn frame(progress: u64, body: StreamBody) -> StreamFrame {
    StreamFrame {
        token: token(),
        progress,
        message: None,
        body,
    }
}

fn start(progress: u64) -> StreamFrame {
    frame(
        progress,
        StreamBody::Start {
            content_type: None,
            metadata: Default::default(),
        },
    )
}

fn chunk(progress: u64, index: u64) -> StreamFrame {
    frame(
        progress,
        StreamBody::Chunk {
            chunk_index: index,
            data: format!("chunk{index}"),
        },
    )
}

fn close(progress: u64, last: Option<u64>) -> StreamFrame {
    frame(
        progress,
        StreamBody::Close {
            last_chunk_index: last,
        },
    )
}

fn session() -> OpenStreamSession {
    OpenStreamSession::new(
        start(1),
        StreamPolicy {
            send_accept: false,
            ..StreamPolicy::default()
        },
        T0,
    )
}

fn read_all(sess: &mut OpenStreamSession) -> Vec<u64> {
    std::iter::from_fn(|| sess.read())
        .map(|c| c.chunk_index)
        .collect()
}

fn sent(sess: &mut OpenStreamSession) -> Vec<StreamBody> {
    std::iter::from_fn(|| sess.poll_transmit())
        .map(|f| f.body)
        .collect()
}

fn failed(sess: &OpenStreamSession) -> Option<&StreamFailure> {
    match sess.state() {
        SessionState::Failed(f) => Some(f),
        _ => None,
    }
}

// ---- writer ----

#[test]
fn start_is_implicit_on_the_first_write() {
    let mut w = writer(false);
    assert_eq!(w.poll_transmit(T0), None);
    w.write("a", T0).unwrap();
    let frames = drain(&mut w);
    assert!(matches!(frames[0].body, StreamBody::Start { .. }));
    assert!(matches!(
        frames[1].body,
        StreamBody::Chunk { chunk_index: 0, .. }
    ));
}

#[test]
fn chunk_index_must_start_at_zero_and_increase_contiguously() {
    let mut w = writer(false);
    for i in 0..5 {
        assert_eq!(w.write(format!("{i}"), T0).unwrap(), i);
    }
    let indices: Vec<u64> = drain(&mut w)
        .into_iter()
        .filter_map(|f| match f.body {
            StreamBody::Chunk { chunk_index, .. } => Some(chunk_index),
            _ => None,
        })
        .collect();
    assert_eq!(indices, vec![0, 1, 2, 3, 4]);
}

#[test]
fn progress_must_increase_across_every_frame_pings_and_pongs_included() {
    let mut w = writer(false);
    w.write("a", T0).unwrap();
    let mut frames = drain(&mut w);
    w.handle_frame(&frame(50, StreamBody::Ping { nonce: "x".into() }), T0);
    w.write("b", T0).unwrap();
    w.handle_timeout(s(30)); // idle → ping
    w.close(s(30)).unwrap();
    frames.extend(std::iter::from_fn(|| w.poll_transmit(s(30))));
    let kinds: Vec<&str> = frames.iter().map(|f| f.body.frame_type()).collect();
    assert_eq!(kinds, ["start", "chunk", "pong", "chunk", "ping", "close"]);
    assert!(frames.windows(2).all(|p| p[1].progress > p[0].progress));
}

#[test]
fn a_writer_that_must_wait_sends_no_chunk_before_accept() {
    let mut w = writer(true);
    w.write("a", T0).unwrap();
    w.close(T0).unwrap();
    let first = drain(&mut w);
    assert_eq!(first.len(), 1);
    assert!(matches!(first[0].body, StreamBody::Start { .. }));
    assert!(w.awaiting_accept());
    w.handle_frame(&frame(2, StreamBody::Accept), T0);
    let rest = drain(&mut w);
    assert!(matches!(rest[0].body, StreamBody::Chunk { .. }));
    assert!(rest[0].progress > 2, "chunks follow the accept's progress");
    assert!(matches!(rest[1].body, StreamBody::Close { .. }));
}

#[test]
fn a_writer_that_knows_support_may_send_chunks_right_after_start() {
    let mut w = writer(false);
    w.write("a", T0).unwrap();
    assert_eq!(drain(&mut w).len(), 2);
}

#[test]
fn a_writer_waiting_for_accept_aborts_at_its_timeout() {
    let mut w = writer(true);
    w.write("a", T0).unwrap();
    drain(&mut w);
    let deadline = w.poll_timeout().unwrap();
    w.handle_timeout(deadline);
    assert_eq!(
        w.state(),
        &WriterState::Failed(StreamFailure::AcceptTimeout)
    );
    let out = drain(&mut w);
    assert!(matches!(
        out[..],
        [StreamFrame {
            body: StreamBody::Abort { .. },
            ..
        }]
    ));
}

#[test]
fn close_last_chunk_index_must_equal_the_greatest_chunk_index_sent() {
    let mut w = writer(false);
    for _ in 0..3 {
        w.write("x", T0).unwrap();
    }
    w.close(T0).unwrap();
    let last = drain(&mut w).pop().unwrap();
    assert_eq!(
        last.body,
        StreamBody::Close {
            last_chunk_index: Some(2)
        }
    );
    assert_eq!(w.state(), &WriterState::Closed);
}

#[test]
fn close_last_chunk_index_must_be_omitted_for_a_zero_chunk_stream() {
    let mut w = writer(false);
    w.close(T0).unwrap();
    let frames = drain(&mut w);
    assert!(matches!(frames[0].body, StreamBody::Start { .. }));
    assert_eq!(
        frames[1].body,
        StreamBody::Close {
            last_chunk_index: None
        }
    );
}

#[test]
fn close_may_omit_last_chunk_index_for_an_unbounded_stream() {
    let mut w = OpenStreamWriter::new(
        token(),
        WriterConfig {
            declare_bound: false,
            ..WriterConfig::default()
        },
    );
    w.write("x", T0).unwrap();
    w.close(T0).unwrap();
    assert_eq!(
        drain(&mut w).pop().unwrap().body,
        StreamBody::Close {
            last_chunk_index: None
        }
    );
}

#[test]
fn nothing_may_follow_a_terminal_frame() {
    let mut w = writer(false);
    w.write("x", T0).unwrap();
    w.close(T0).unwrap();
    assert_eq!(w.write("y", T0), Err(WriteError::Ended));
    assert_eq!(w.close(T0), Err(WriteError::Ended));
    drain(&mut w);
    w.handle_frame(&frame(9, StreamBody::Ping { nonce: "p".into() }), T0);
    w.abort("late");
    assert_eq!(drain(&mut w), vec![], "no pong or abort after close");
    assert!(w.is_done());
}

#[test]
fn abort_drops_unsent_chunks_and_is_the_last_frame() {
    let mut w = writer(true);
    w.write("a", T0).unwrap();
    drain(&mut w); // start only: waiting for accept
    w.write("b", T0).unwrap();
    w.abort("changed my mind");
    let out = drain(&mut w);
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0].body,
        StreamBody::Abort {
            reason: Some("changed my mind".into())
        }
    );
    assert_eq!(w.write("c", T0), Err(WriteError::Ended));
}

#[test]
fn the_receiver_of_a_ping_must_answer_with_a_pong_carrying_its_nonce() {
    let mut w = writer(false);
    w.write("a", T0).unwrap();
    drain(&mut w);
    assert!(w.handle_frame(
        &frame(
            3,
            StreamBody::Ping {
                nonce: "n-7".into()
            }
        ),
        T0
    ));
    assert_eq!(
        drain(&mut w)[0].body,
        StreamBody::Pong {
            nonce: "n-7".into()
        }
    );
    // The session answers too.
    let mut sess = session();
    sess.handle_frame(frame(2, StreamBody::Ping { nonce: "w1".into() }), T0);
    assert_eq!(
        sent(&mut sess),
        vec![StreamBody::Pong { nonce: "w1".into() }]
    );
}

#[test]
fn a_keepalive_frame_never_overtakes_a_chunk_written_before_it() {
    let mut w = writer(true);
    w.write("a", T0).unwrap();
    drain(&mut w); // start
    w.write("b", T0).unwrap();
    // A ping from the reader while chunks wait for accept: the pong queues behind them.
    w.handle_frame(&frame(2, StreamBody::Ping { nonce: "r1".into() }), T0);
    assert_eq!(drain(&mut w), vec![]);
    w.handle_frame(&frame(3, StreamBody::Accept), T0);
    let kinds: Vec<&str> = drain(&mut w).iter().map(|f| f.body.frame_type()).collect();
    assert_eq!(kinds, ["chunk", "chunk", "pong"]);
    // An idle ping queues behind chunks written before the timer fired.
    w.write("c", s(29)).unwrap();
    w.handle_timeout(s(30));
    let kinds: Vec<&str> = drain(&mut w).iter().map(|f| f.body.frame_type()).collect();
    assert_eq!(kinds, ["chunk", "ping"]);
}

#[test]
fn an_idle_writer_pings_and_fails_after_the_probe_timeout() {
    let mut w = writer(false);
    w.write("a", T0).unwrap();
    drain(&mut w);
    assert_eq!(w.poll_timeout(), Some(s(30)));
    w.handle_timeout(s(30));
    let ping = drain(&mut w).pop().unwrap();
    let StreamBody::Ping { nonce } = &ping.body else {
        panic!("{ping:?}")
    };
    assert!(nonce.len() <= 64);
    assert_eq!(w.poll_timeout(), Some(s(50)));
    w.handle_timeout(s(50));
    assert_eq!(w.state(), &WriterState::Failed(StreamFailure::ProbeTimeout));
    assert!(matches!(
        drain(&mut w)[..],
        [StreamFrame {
            body: StreamBody::Abort { .. },
            ..
        }]
    ));
}

#[test]
fn a_matching_pong_keeps_the_writer_alive() {
    let mut w = writer(false);
    w.write("a", T0).unwrap();
    drain(&mut w);
    w.handle_timeout(s(30));
    let StreamBody::Ping { nonce } = drain(&mut w).pop().unwrap().body else {
        panic!()
    };
    assert!(!w.handle_frame(
        &frame(
            5,
            StreamBody::Pong {
                nonce: "bogus".into()
            }
        ),
        s(31)
    ));
    assert!(w.handle_frame(&frame(6, StreamBody::Pong { nonce }), s(31)));
    w.handle_timeout(s(50));
    assert_eq!(w.state(), &WriterState::Open);
    assert_eq!(w.poll_timeout(), Some(s(61)));
}

#[test]
fn a_peer_abort_is_terminal_for_the_writer() {
    let mut w = writer(false);
    w.write("a", T0).unwrap();
    drain(&mut w);
    w.handle_frame(
        &frame(
            4,
            StreamBody::Abort {
                reason: Some("no".into()),
            },
        ),
        T0,
    );
    assert!(matches!(
        w.state(),
        WriterState::Failed(StreamFailure::AbortedByPeer { .. })
    ));
    assert_eq!(w.write("b", T0), Err(WriteError::Ended));
    assert_eq!(drain(&mut w), vec![]);
}

// ---- session ----

#[test]
fn a_session_sends_accept_after_start_when_asked_to() {
    let mut sess = OpenStreamSession::new(start(1), StreamPolicy::default(), T0);
    let out = sess.poll_transmit().unwrap();
    assert_eq!((out.progress, out.body), (2, StreamBody::Accept));
}

#[test]
fn a_zero_chunk_stream_must_be_valid() {
    let mut sess = session();
    sess.handle_frame(close(2, None), T0);
    assert_eq!(sess.state(), &SessionState::Completed);
    assert!(sess.is_finished());
}

#[test]
fn a_second_start_for_an_active_token_must_fail_the_stream() {
    let mut sess = session();
    assert_eq!(sess.handle_frame(start(1), T0), FrameVerdict::Duplicate);
    sess.handle_frame(start(7), T0);
    assert_eq!(
        failed(&sess),
        Some(&StreamFailure::Sequence(
            "a second start for an active stream"
        ))
    );
    assert_eq!(failed(&sess).unwrap().kind(), StreamErrorKind::Sequence);
}

#[test]
fn close_numbered_before_start_must_fail_the_stream() {
    let mut sess = OpenStreamSession::new(start(5), StreamPolicy::default(), T0);
    sess.handle_frame(close(4, None), T0);
    assert_eq!(
        failed(&sess),
        Some(&StreamFailure::Sequence("frame numbered before start"))
    );
}

#[test]
fn abort_must_be_terminal() {
    let mut sess = session();
    sess.handle_frame(chunk(2, 0), T0);
    sess.handle_frame(
        frame(
            3,
            StreamBody::Abort {
                reason: Some("bye".into()),
            },
        ),
        T0,
    );
    assert_eq!(
        failed(&sess),
        Some(&StreamFailure::AbortedByPeer {
            reason: Some("bye".into())
        })
    );
    assert_eq!(sent(&mut sess), vec![], "no abort is echoed back");
    assert_eq!(
        sess.handle_frame(chunk(4, 1), T0),
        FrameVerdict::Ignored("stream has ended")
    );
    assert_eq!(
        sess.handle_frame(close(5, Some(1)), T0),
        FrameVerdict::Ignored("stream has ended")
    );
    assert_eq!(
        read_all(&mut sess),
        vec![0],
        "what was released before the abort stays readable"
    );
}

#[test]
fn later_frames_for_a_terminated_stream_must_be_ignored() {
    let mut sess = session();
    sess.handle_frame(chunk(2, 0), T0);
    sess.handle_frame(close(3, Some(0)), T0);
    assert_eq!(sess.state(), &SessionState::Completed);
    assert_eq!(
        sess.handle_frame(chunk(4, 1), T0),
        FrameVerdict::Ignored("stream has ended")
    );
    assert_eq!(
        sess.handle_frame(frame(5, StreamBody::Ping { nonce: "p".into() }), T0),
        FrameVerdict::Ignored("stream has ended")
    );
    assert_eq!(
        sent(&mut sess),
        vec![],
        "no pong after the stream terminated"
    );
}

#[test]
fn receivers_must_use_chunk_index_for_contiguity_releasing_in_order() {
    let mut sess = session();
    for (p, i) in [(4, 2), (2, 0), (5, 3), (3, 1)] {
        sess.handle_frame(chunk(p, i), T0);
    }
    assert_eq!(read_all(&mut sess), vec![0, 1, 2, 3]);
}

#[test]
fn chunks_are_exposed_incrementally() {
    let mut sess = session();
    sess.handle_frame(chunk(2, 0), T0);
    assert_eq!(read_all(&mut sess), vec![0]);
    sess.handle_frame(chunk(4, 2), T0);
    assert_eq!(read_all(&mut sess), Vec::<u64>::new(), "index 1 is missing");
    sess.handle_frame(chunk(3, 1), T0);
    assert_eq!(read_all(&mut sess), vec![1, 2]);
}

#[test]
fn progress_gaps_are_not_errors() {
    let mut sess = session();
    sess.handle_frame(chunk(10, 0), T0);
    sess.handle_frame(chunk(20, 1), T0);
    sess.handle_frame(close(30, Some(1)), T0);
    assert_eq!(sess.state(), &SessionState::Completed);
}

#[test]
fn identical_duplicates_are_dropped() {
    let mut sess = session();
    for f in [
        chunk(2, 0),
        chunk(2, 0),
        chunk(4, 2),
        chunk(4, 2),
        chunk(3, 1),
        chunk(2, 0),
    ] {
        sess.handle_frame(f, T0);
    }
    let ping = frame(5, StreamBody::Ping { nonce: "p".into() });
    sess.handle_frame(ping.clone(), T0);
    sess.handle_frame(ping, T0);
    assert_eq!(read_all(&mut sess), vec![0, 1, 2]);
    assert_eq!(sess.duplicates(), 4);
    assert_eq!(
        sent(&mut sess).len(),
        1,
        "a duplicated ping is answered once"
    );
    assert_eq!(sess.state(), &SessionState::Open);
}

#[test]
fn two_different_chunks_with_one_index_fail_the_stream() {
    let mut sess = session();
    sess.handle_frame(chunk(2, 0), T0);
    let mut forged = chunk(2, 0);
    forged.body = StreamBody::Chunk {
        chunk_index: 0,
        data: "other".into(),
    };
    sess.handle_frame(forged, T0);
    assert!(matches!(failed(&sess), Some(StreamFailure::Sequence(_))));
    assert_eq!(sent(&mut sess).len(), 1, "an abort goes to the writer");
}

#[test]
fn two_different_frames_with_one_progress_fail_the_stream() {
    let mut sess = session();
    sess.handle_frame(frame(3, StreamBody::Ping { nonce: "a".into() }), T0);
    sess.handle_frame(frame(3, StreamBody::Ping { nonce: "b".into() }), T0);
    assert!(matches!(failed(&sess), Some(StreamFailure::Sequence(_))));
}

#[test]
fn chunk_index_order_disagreeing_with_progress_order_fails() {
    let mut sess = session();
    sess.handle_frame(chunk(5, 1), T0);
    sess.handle_frame(chunk(6, 0), T0);
    assert_eq!(
        failed(&sess),
        Some(&StreamFailure::Sequence(
            "chunkIndex order disagrees with progress order"
        ))
    );
}

#[test]
fn a_gap_alone_must_not_be_terminal_while_the_stream_is_active() {
    let mut sess = session();
    sess.handle_frame(chunk(3, 1), T0);
    // Keep the stream alive with pings; the gap stays open for minutes.
    for t in 1..10 {
        sess.handle_frame(
            frame(
                100 + t,
                StreamBody::Ping {
                    nonce: format!("{t}"),
                },
            ),
            s(t * 20),
        );
        sess.handle_timeout(s(t * 20));
    }
    assert_eq!(sess.state(), &SessionState::Open);
    sess.handle_frame(chunk(2, 0), s(200));
    assert_eq!(read_all(&mut sess), vec![0, 1]);
}

#[test]
fn close_last_chunk_index_is_the_completeness_bound() {
    let mut sess = session();
    sess.handle_frame(chunk(2, 0), T0);
    sess.handle_frame(close(5, Some(2)), T0);
    assert_eq!(
        sess.state(),
        &SessionState::Closing,
        "chunks 1 and 2 are still due"
    );
    sess.handle_frame(chunk(3, 1), T0);
    assert_eq!(sess.state(), &SessionState::Closing);
    sess.handle_frame(chunk(4, 2), T0);
    assert_eq!(sess.state(), &SessionState::Completed);
    assert_eq!(read_all(&mut sess), vec![0, 1, 2]);
}

#[test]
fn gaps_at_close_wait_for_the_grace_period_then_fail() {
    let mut sess = session();
    sess.handle_frame(chunk(2, 0), T0);
    sess.handle_frame(chunk(4, 2), T0);
    sess.handle_frame(close(5, Some(2)), s(1));
    assert_eq!(sess.poll_timeout(), Some(s(6)));
    sess.handle_timeout(s(6));
    assert_eq!(
        failed(&sess),
        Some(&StreamFailure::GapAtClose { missing: 1 })
    );
    assert!(matches!(sent(&mut sess)[..], [StreamBody::Abort { .. }]));
}

#[test]
fn a_missing_tail_chunk_also_gets_the_grace_period() {
    let mut sess = session();
    sess.handle_frame(chunk(2, 0), T0);
    sess.handle_frame(close(4, Some(1)), T0);
    sess.handle_timeout(s(4));
    assert_eq!(sess.state(), &SessionState::Closing);
    sess.handle_frame(chunk(3, 1), s(4));
    assert_eq!(sess.state(), &SessionState::Completed);

    let mut sess = session();
    sess.handle_frame(chunk(2, 0), T0);
    sess.handle_frame(close(4, Some(1)), T0);
    sess.handle_timeout(s(5));
    assert_eq!(
        failed(&sess),
        Some(&StreamFailure::GapAtClose { missing: 1 })
    );
}

#[test]
fn a_chunk_beyond_last_chunk_index_or_after_close_fails() {
    let mut sess = session();
    sess.handle_frame(close(5, Some(1)), T0);
    sess.handle_frame(chunk(4, 2), T0);
    assert_eq!(
        failed(&sess),
        Some(&StreamFailure::Sequence("a chunk beyond lastChunkIndex"))
    );

    let mut sess = session();
    sess.handle_frame(close(5, Some(1)), T0);
    sess.handle_frame(chunk(6, 1), T0);
    assert_eq!(
        failed(&sess),
        Some(&StreamFailure::Sequence("a chunk numbered after close"))
    );
}

#[test]
fn the_reorder_buffer_is_bounded() {
    let policy = StreamPolicy {
        send_accept: false,
        max_buffered_chunks_per_stream: 2,
        ..StreamPolicy::default()
    };
    let mut sess = OpenStreamSession::new(start(1), policy, T0);
    sess.handle_frame(chunk(3, 1), T0);
    sess.handle_frame(chunk(4, 2), T0);
    assert_eq!(sess.state(), &SessionState::Open);
    sess.handle_frame(chunk(5, 3), T0);
    assert_eq!(failed(&sess), Some(&StreamFailure::ReorderBufferFull));
    assert_eq!(failed(&sess).unwrap().kind(), StreamErrorKind::Policy);

    let policy = StreamPolicy {
        send_accept: false,
        max_buffered_bytes_per_stream: 10,
        ..StreamPolicy::default()
    };
    let mut sess = OpenStreamSession::new(start(1), policy, T0);
    sess.handle_frame(chunk(3, 1), T0);
    sess.handle_frame(chunk(4, 2), T0);
    assert_eq!(failed(&sess), Some(&StreamFailure::ReorderBufferFull));
}

#[test]
fn a_slow_consumer_is_told_apart_from_reordering() {
    let policy = StreamPolicy {
        send_accept: false,
        max_unread_chunks_per_stream: 3,
        max_buffered_chunks_per_stream: 1,
        ..StreamPolicy::default()
    };
    let mut sess = OpenStreamSession::new(start(1), policy, T0);
    for i in 0..3 {
        sess.handle_frame(chunk(2 + i, i), T0);
    }
    assert_eq!(
        sess.state(),
        &SessionState::Open,
        "3 unread chunks are within the limit"
    );
    assert_eq!(sess.read().unwrap().chunk_index, 0);
    sess.handle_frame(chunk(5, 3), T0);
    assert_eq!(sess.state(), &SessionState::Open);
    sess.handle_frame(chunk(6, 4), T0);
    assert_eq!(failed(&sess), Some(&StreamFailure::SlowConsumer));
}

#[test]
fn any_valid_frame_must_reset_the_idle_timeout() {
    let mut sess = session();
    assert_eq!(sess.poll_timeout(), Some(s(30)));
    sess.handle_frame(chunk(2, 0), s(10));
    assert_eq!(sess.poll_timeout(), Some(s(40)));
    sess.handle_frame(frame(3, StreamBody::Ping { nonce: "p".into() }), s(20));
    assert_eq!(sess.poll_timeout(), Some(s(50)));
    sess.handle_frame(close(9, Some(5)), s(25)); // a close with gaps: grace runs out first
    assert_eq!(sess.poll_timeout(), Some(s(30)));
}

#[test]
fn an_idle_stream_must_ping_and_fail_without_a_matching_pong() {
    let mut sess = session();
    sess.handle_timeout(s(30));
    let ping = sent(&mut sess);
    let [StreamBody::Ping { nonce }] = &ping[..] else {
        panic!("{ping:?}")
    };
    assert!(nonce.len() <= 64);
    sess.handle_timeout(s(50));
    assert_eq!(failed(&sess), Some(&StreamFailure::ProbeTimeout));
    assert!(
        matches!(sent(&mut sess)[..], [StreamBody::Abort { .. }]),
        "abort is sent when possible"
    );
}

#[test]
fn a_reprobe_resends_the_outstanding_ping_and_either_copys_pong_satisfies_it() {
    let mut sess = session();
    sess.reprobe();
    assert!(
        sent(&mut sess).is_empty(),
        "no probe outstanding, nothing to resend"
    );
    sess.handle_timeout(s(30));
    let [StreamBody::Ping { nonce }] = &sent(&mut sess)[..] else {
        panic!()
    };
    let nonce = nonce.clone();
    sess.reprobe();
    assert_eq!(
        sent(&mut sess),
        vec![StreamBody::Ping {
            nonce: nonce.clone()
        }]
    );
    sess.handle_frame(frame(3, StreamBody::Pong { nonce }), s(40));
    sess.handle_timeout(s(50));
    assert_eq!(failed(&sess), None, "the probe was satisfied");
}

#[test]
fn invalid_pongs_must_not_count_as_liveness() {
    let mut sess = session();
    sess.handle_timeout(s(30));
    let [StreamBody::Ping { nonce }] = &sent(&mut sess)[..] else {
        panic!()
    };
    let nonce = nonce.clone();
    let v = sess.handle_frame(
        frame(
            3,
            StreamBody::Pong {
                nonce: "unknown".into(),
            },
        ),
        s(31),
    );
    assert_eq!(v, FrameVerdict::Ignored("pong matches no outstanding ping"));
    assert_eq!(
        sess.poll_timeout(),
        Some(s(50)),
        "an unknown nonce neither satisfies nor resets"
    );
    assert_eq!(
        sess.handle_frame(
            frame(
                4,
                StreamBody::Pong {
                    nonce: nonce.clone()
                }
            ),
            s(32)
        ),
        FrameVerdict::Accepted
    );
    assert_eq!(sess.poll_timeout(), Some(s(62)));
    // The same nonce again is already satisfied: no liveness.
    assert_eq!(
        sess.handle_frame(frame(5, StreamBody::Pong { nonce }), s(40)),
        FrameVerdict::Ignored("pong matches no outstanding ping")
    );
    assert_eq!(sess.poll_timeout(), Some(s(62)));
}

#[test]
fn an_expired_pong_does_not_rescue_the_stream() {
    let mut sess = session();
    sess.handle_timeout(s(30));
    let [StreamBody::Ping { nonce }] = &sent(&mut sess)[..] else {
        panic!()
    };
    let nonce = nonce.clone();
    sess.handle_frame(frame(3, StreamBody::Pong { nonce }), s(51));
    sess.handle_timeout(s(51));
    assert_eq!(failed(&sess), Some(&StreamFailure::ProbeTimeout));
}

#[test]
fn oversized_nonces_are_ignored_by_local_policy() {
    let mut sess = session();
    let v = sess.handle_frame(
        frame(
            3,
            StreamBody::Ping {
                nonce: "n".repeat(65),
            },
        ),
        s(10),
    );
    assert_eq!(v, FrameVerdict::Ignored("nonce over the size limit"));
    assert_eq!(sent(&mut sess), vec![]);
    assert_eq!(sess.poll_timeout(), Some(s(30)), "not activity either");
    let mut w = writer(false);
    w.write("a", T0).unwrap();
    drain(&mut w);
    assert!(!w.handle_frame(
        &frame(
            3,
            StreamBody::Ping {
                nonce: "n".repeat(65)
            }
        ),
        T0
    ));
    assert_eq!(drain(&mut w), vec![]);
}

#[test]
fn an_optional_hard_lifetime_ends_long_streams() {
    let policy = StreamPolicy {
        send_accept: false,
        max_lifetime: Some(s(100)),
        ..StreamPolicy::default()
    };
    let mut sess = OpenStreamSession::new(start(1), policy, T0);
    for t in 1..=5 {
        sess.handle_frame(chunk(1 + t, t - 1), s(t * 20));
        sess.handle_timeout(s(t * 20));
    }
    assert_eq!(failed(&sess), Some(&StreamFailure::LifetimeExceeded));
}

// ---- registry ----

fn registry(policy: StreamPolicy) -> OpenStreamRegistry<&'static str> {
    OpenStreamRegistry::new(policy)
}

fn reg_events(r: &mut OpenStreamRegistry<&'static str>) -> Vec<RegistryEvent<&'static str>> {
    std::iter::from_fn(|| r.poll_event()).collect()
}

#[test]
fn streams_must_be_tracked_by_token_and_writer() {
    let mut r = registry(StreamPolicy {
        send_accept: false,
        ..StreamPolicy::default()
    });
    r.handle_frame(&"alice", start(1), T0);
    r.handle_frame(&"bob", start(1), T0);
    r.handle_frame(&"alice", chunk(2, 0), T0);
    r.handle_frame(&"bob", close(2, None), T0);
    let evs = reg_events(&mut r);
    assert!(evs.contains(&RegistryEvent::Completed {
        peer: "bob",
        token: token()
    }));
    assert_eq!(r.active_streams(), 1);
    assert_eq!(r.read(&"alice", &token()).unwrap().data, "chunk0");
}

#[test]
fn admission_limits_concurrent_streams() {
    let mut r = registry(StreamPolicy {
        max_concurrent_streams: 1,
        ..StreamPolicy::default()
    });
    r.handle_frame(&"alice", start(1), T0);
    r.handle_frame(&"bob", start(1), T0);
    let evs = reg_events(&mut r);
    assert!(evs.contains(&RegistryEvent::Failed {
        peer: "bob",
        token: token(),
        failure: StreamFailure::TooManyStreams
    }));
    let out: Vec<_> = std::iter::from_fn(|| r.poll_transmit()).collect();
    assert!(out
        .iter()
        .any(|(p, f)| *p == "bob" && matches!(f.body, StreamBody::Abort { .. })));
    assert!(out
        .iter()
        .any(|(p, f)| *p == "alice" && f.body == StreamBody::Accept));
}

#[test]
fn frames_that_overtake_start_are_held_and_replayed_in_order() {
    let mut r = registry(StreamPolicy {
        send_accept: false,
        ..StreamPolicy::default()
    });
    r.handle_frame(&"alice", close(4, Some(1)), T0);
    r.handle_frame(&"alice", chunk(3, 1), T0);
    r.handle_frame(&"alice", chunk(2, 0), T0);
    assert!(reg_events(&mut r).is_empty());
    r.handle_frame(&"alice", start(1), T0);
    let evs = reg_events(&mut r);
    assert_eq!(
        evs.last(),
        Some(&RegistryEvent::Completed {
            peer: "alice",
            token: token()
        })
    );
    assert_eq!(r.read(&"alice", &token()).unwrap().chunk_index, 0);
    assert_eq!(r.read(&"alice", &token()).unwrap().chunk_index, 1);
    assert!(
        r.session(&"alice", &token()).is_none(),
        "finished and forgotten"
    );
    assert_eq!(
        r.handle_frame(&"alice", chunk(2, 0), T0),
        FrameVerdict::Ignored("stream has ended")
    );
}

#[test]
fn held_frames_expire_when_no_start_comes() {
    let mut r = registry(StreamPolicy::default());
    r.handle_frame(&"alice", chunk(2, 0), T0);
    let t = r.poll_timeout().unwrap();
    r.handle_timeout(t);
    assert_eq!(r.orphans_dropped(), 1);
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn registry_failures_carry_countable_causes() {
    let mut r = registry(StreamPolicy {
        send_accept: false,
        ..StreamPolicy::default()
    });
    r.handle_frame(&"alice", start(1), T0);
    let t = r.poll_timeout().unwrap();
    r.handle_timeout(t);
    let t = r.poll_timeout().unwrap();
    r.handle_timeout(t);
    let failure = reg_events(&mut r).into_iter().find_map(|e| match e {
        RegistryEvent::Failed { failure, .. } => Some(failure),
        _ => None,
    });
    assert_eq!(failure.map(|f| f.cause()), Some("probe-timeout"));
}

// ---- writer → session through a scripted relay ----

/// A two-endpoint harness in the style of quinn-proto's `Pair`: frames travel through a
/// scripted relay (per-frame delays, drops and copies), and virtual time jumps to the next
/// delivery or wake-up.
struct Pair {
    writer: OpenStreamWriter,
    registry: OpenStreamRegistry<&'static str>,
    now: Duration,
    in_flight: BTreeMap<(Duration, u64), (bool, StreamFrame)>,
    seq: u64,
    /// For the n-th frame the writer sends: the delays of its copies (empty = dropped).
    script: Box<dyn FnMut(u64) -> Vec<Duration>>,
    sent: u64,
    received: Vec<StreamChunk>,
}

impl Pair {
    fn new(
        writer: OpenStreamWriter,
        policy: StreamPolicy,
        script: impl FnMut(u64) -> Vec<Duration> + 'static,
    ) -> Self {
        Pair {
            writer,
            registry: OpenStreamRegistry::new(policy),
            now: T0,
            in_flight: BTreeMap::new(),
            seq: 0,
            script: Box::new(script),
            sent: 0,
            received: Vec::new(),
        }
    }

    fn flush(&mut self) {
        while let Some(f) = self.writer.poll_transmit(self.now) {
            for delay in (self.script)(self.sent) {
                self.seq += 1;
                self.in_flight
                    .insert((self.now + delay, self.seq), (true, f.clone()));
            }
            self.sent += 1;
        }
        while let Some((_, f)) = self.registry.poll_transmit() {
            self.seq += 1;
            self.in_flight
                .insert((self.now + ms(50), self.seq), (false, f));
        }
        while let Some(c) = self.registry.read(&"w", &token()) {
            self.received.push(c);
        }
    }

    /// Runs until nothing is in flight and no timer is due before `until`.
    fn run(&mut self, until: Duration) {
        loop {
            self.flush();
            let next_delivery = self.in_flight.keys().next().map(|(t, _)| *t);
            let next = [
                next_delivery,
                self.writer.poll_timeout(),
                self.registry.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next.filter(|t| *t <= until) else {
                break;
            };
            self.now = self.now.max(next);
            if next_delivery == Some(next) {
                let (_, (to_reader, f)) = self.in_flight.pop_first().unwrap();
                if to_reader {
                    self.registry.handle_frame(&"w", f, self.now);
                } else {
                    self.writer.handle_frame(&f, self.now);
                }
            }
            self.writer.handle_timeout(self.now);
            self.registry.handle_timeout(self.now);
        }
    }

    fn outcome(&mut self) -> Option<RegistryEvent<&'static str>> {
        std::iter::from_fn(|| self.registry.poll_event())
            .filter(|e| !matches!(e, RegistryEvent::Opened { .. }))
            .last()
    }
}

#[test]
fn round_trip_through_a_relay_that_swaps_duplicates_and_delays() {
    let mut w = writer(true);
    for i in 0..40 {
        w.write(format!("part {i} \"quoted\" é"), T0).unwrap();
    }
    w.close(T0).unwrap();
    // Every 3rd frame is late by 300 ms (swapped past its successors), every 5th is duplicated.
    let mut pair = Pair::new(w, StreamPolicy::default(), |n| {
        let base = if n % 3 == 1 { ms(300) } else { ms(20) };
        if n % 5 == 0 {
            vec![base, base + ms(40)]
        } else {
            vec![base]
        }
    });
    pair.run(s(600));
    assert_eq!(
        pair.outcome(),
        Some(RegistryEvent::Completed {
            peer: "w",
            token: token()
        })
    );
    let expected: Vec<String> = (0..40).map(|i| format!("part {i} \"quoted\" é")).collect();
    let got: Vec<String> = pair.received.iter().map(|c| c.data.clone()).collect();
    assert_eq!(got, expected);
}

#[test]
fn a_long_idle_stream_survives_through_keepalive() {
    let mut w = writer(false);
    w.write("first", T0).unwrap();
    let mut pair = Pair::new(w, StreamPolicy::default(), |_| vec![ms(30)]);
    pair.run(s(600)); // ten idle minutes: pings and pongs keep both sides alive
    assert_eq!(pair.writer.state(), &WriterState::Open);
    assert_eq!(pair.registry.active_streams(), 1);
    pair.writer.write("second", pair.now).unwrap();
    pair.writer.close(pair.now).unwrap();
    pair.run(s(601));
    assert_eq!(
        pair.outcome(),
        Some(RegistryEvent::Completed {
            peer: "w",
            token: token()
        })
    );
    assert_eq!(pair.received.len(), 2);
}

#[test]
fn a_dropped_tail_chunk_fails_after_the_grace_period() {
    let mut w = writer(false);
    for i in 0..5 {
        w.write(format!("{i}"), T0).unwrap();
    }
    w.close(T0).unwrap();
    // Frame 5 is chunk 4, the tail: dropped.
    let mut pair = Pair::new(w, StreamPolicy::default(), |n| {
        if n == 5 {
            vec![]
        } else {
            vec![ms(10)]
        }
    });
    pair.run(s(60));
    assert_eq!(
        pair.outcome(),
        Some(RegistryEvent::Failed {
            peer: "w",
            token: token(),
            failure: StreamFailure::GapAtClose { missing: 1 }
        })
    );
    assert_eq!(
        pair.received.len(),
        4,
        "the four chunks before the gap were delivered in order"
    );
    assert!(
        matches!(pair.writer.state(), WriterState::Closed),
        "the writer had already closed"
    );
}

#[test]
fn an_unbounded_close_that_overtakes_the_last_chunk_waits_for_it() {
    let mut sess = session();
    sess.handle_frame(chunk(2, 0), T0);
    sess.handle_frame(close(4, None), T0);
    assert_eq!(
        sess.state(),
        &SessionState::Closing,
        "progress 3 is unaccounted for"
    );
    sess.handle_frame(chunk(3, 1), ms(10));
    assert_eq!(sess.state(), &SessionState::Completed);
    assert_eq!(read_all(&mut sess), vec![0, 1]);
}

#[test]
fn an_unbounded_close_completes_after_the_grace_period_when_no_gap_is_known() {
    let mut sess = session();
    sess.handle_frame(chunk(2, 0), T0);
    sess.handle_frame(close(4, None), T0);
    sess.handle_timeout(s(5));
    assert_eq!(sess.state(), &SessionState::Completed);
}

#[test]
fn an_unbounded_close_after_accounted_control_frames_completes_at_once() {
    // The writer's chunk took progress 3 and its ping 4.
    let mut sess = OpenStreamSession::new(start(1), StreamPolicy::default(), T0);
    sess.handle_frame(chunk(3, 0), T0);
    sess.handle_frame(frame(4, StreamBody::Pong { nonce: "x".into() }), T0);
    sess.handle_frame(frame(5, StreamBody::Ping { nonce: "y".into() }), T0);
    sess.handle_frame(close(6, None), T0);
    assert_eq!(
        sess.state(),
        &SessionState::Closing,
        "a pong matching nothing is not a seen frame"
    );
    let mut sess = OpenStreamSession::new(start(1), StreamPolicy::default(), T0);
    sess.handle_frame(chunk(3, 0), T0);
    sess.handle_frame(frame(4, StreamBody::Ping { nonce: "y".into() }), T0);
    sess.handle_frame(close(5, None), T0);
    assert_eq!(sess.state(), &SessionState::Completed);
}

#[test]
fn frames_with_out_of_range_numbers_never_panic_and_are_ignored() {
    let mut r = registry(StreamPolicy::default());
    assert_eq!(
        r.handle_frame(&"a", start(u64::MAX), T0),
        FrameVerdict::Ignored("number out of range")
    );
    r.handle_frame(&"a", start(1), T0);
    assert_eq!(
        r.handle_frame(&"a", chunk(2, u64::MAX), T0),
        FrameVerdict::Ignored("number out of range")
    );
    assert_eq!(
        r.handle_frame(&"a", close(3, Some(u64::MAX)), T0),
        FrameVerdict::Ignored("number out of range")
    );
    let mut w = writer(true);
    w.write("a", T0).unwrap();
    drain(&mut w);
    assert!(!w.handle_frame(&frame(u64::MAX, StreamBody::Accept), T0));
    assert!(w.awaiting_accept());
}

#[test]
fn a_chunk_sharing_its_progress_with_close_fails() {
    let mut sess = session();
    sess.handle_frame(chunk(5, 0), T0);
    sess.handle_frame(close(5, None), T0);
    assert_eq!(
        failed(&sess),
        Some(&StreamFailure::Sequence("a chunk numbered after close"))
    );
}

#[test]
fn the_close_grace_period_restarts_while_missing_chunks_keep_arriving() {
    let mut sess = session();
    sess.handle_frame(close(10, Some(4)), T0);
    for i in 0..5 {
        let t = s(4 * (i + 1));
        sess.handle_timeout(t);
        sess.handle_frame(chunk(2 + i, i), t);
    }
    assert_eq!(sess.state(), &SessionState::Completed);
}

#[test]
fn a_pong_answered_while_close_is_queued_goes_out_before_close() {
    let mut w = writer(true);
    w.write("a", T0).unwrap();
    w.close(T0).unwrap();
    drain(&mut w); // start; chunk and close wait for accept
    w.handle_frame(&frame(2, StreamBody::Ping { nonce: "r".into() }), T0);
    w.handle_frame(&frame(3, StreamBody::Accept), T0);
    let kinds: Vec<&str> = drain(&mut w).iter().map(|f| f.body.frame_type()).collect();
    assert_eq!(kinds, ["chunk", "pong", "close"]);
}
