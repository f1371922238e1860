use super::*;

fn shipped(name: &str) -> Trace {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces")
        .join(name);
    Trace::from_file(&path).expect("a shipped trace")
}

#[test]
fn lanes_are_clients_then_relays_then_other_peers() {
    let t = Timeline::new(
        &shipped("khatru-drop-mid-stream.shrunk.jsonl"),
        Window::default(),
    )
    .unwrap();
    let lanes: Vec<(&str, LaneKind)> = t.lanes.iter().map(|l| (l.name.as_str(), l.kind)).collect();
    assert_eq!(
        lanes,
        [
            ("client", LaneKind::Client),
            ("khatru", LaneKind::Relay),
            ("server", LaneKind::Peer)
        ]
    );
}

#[test]
fn a_shrunk_trace_shows_its_one_outage_and_the_failing_call() {
    let trace = shipped("khatru-drop-mid-stream.shrunk.jsonl");
    let t = Timeline::new(&trace, Window::default()).unwrap();
    assert_eq!(t.outages.len(), 1);
    assert_eq!(t.outages[0].from_us, 2_050_000);
    assert_eq!(t.outages[0].to_us, 4_050_000);
    assert_eq!(t.lanes[t.outages[0].lane].name, "client");
    assert!(t.outages[0].label.contains("connection-drop"));
    assert_eq!(t.failing_calls.len(), 1);
    let f = &t.failing_calls[0];
    assert!(f.label.contains("stream-gap-at-close"), "{}", f.label);
    assert_eq!(f.to_us, 10_131_359, "from the call to its failure report");
    assert!(t.title.contains("shrunk to 1 of 10"));
    // Every delivery and publication of the trace is a mark.
    let deliveries = trace
        .lines
        .iter()
        .filter(|l| matches!(l, Line::Delivered { .. }))
        .count();
    let shown: usize = [
        MarkKind::Delivered,
        MarkKind::Reordered,
        MarkKind::Duplicate,
    ]
    .iter()
    .map(|k| t.counts.get(k).copied().unwrap_or(0))
    .sum();
    assert_eq!(shown, deliveries);
    assert_eq!(t.counts[&MarkKind::Failed], 1);
    assert!(t.summary().contains("failing call on client"));
}

#[test]
fn a_delivery_starts_at_its_relay_when_it_was_published() {
    let trace = shipped("khatru-drop-mid-stream.shrunk.jsonl");
    let t = Timeline::new(&trace, Window::default()).unwrap();
    let relay = t.lanes.iter().position(|l| l.name == "khatru").unwrap();
    let d = t
        .marks
        .iter()
        .find(|m| m.kind == MarkKind::Delivered)
        .unwrap();
    let (start, lane) = d.from.unwrap();
    assert_eq!(lane, relay);
    assert!(start < d.at.0, "published before delivered");
}

#[test]
fn reordered_and_duplicate_copies_are_their_own_marks_with_the_mechanism() {
    let trace = shipped("contextvm-sdk/stream-reader-reorder.jsonl");
    let t = Timeline::new(&trace, Window::default()).unwrap();
    let reordered: Vec<&Mark> = t
        .marks
        .iter()
        .filter(|m| m.kind == MarkKind::Reordered)
        .collect();
    assert!(!reordered.is_empty());
    assert!(
        reordered.iter().all(|m| m.label.is_some()),
        "each names its mechanism"
    );
}

#[test]
fn a_window_keeps_only_what_happened_in_it_and_a_call_window_its_call() {
    let trace = shipped("khatru-drop-mid-stream.shrunk.jsonl");
    let all = Timeline::new(&trace, Window::default()).unwrap();
    let part = Timeline::new(
        &trace,
        Window {
            from_us: Some(2_000_000),
            to_us: Some(4_000_000),
            call: None,
        },
    )
    .unwrap();
    assert!(part.marks.len() < all.marks.len());
    assert!(part
        .marks
        .iter()
        .all(|m| (2_000_000..=4_000_000).contains(&m.at.0)));
    let call = Timeline::new(
        &trace,
        Window {
            call: Some(1),
            ..Window::default()
        },
    )
    .unwrap();
    assert!(call.from_us <= 171_940 && call.to_us >= 10_131_359);
    assert_eq!(
        Timeline::new(
            &trace,
            Window {
                call: Some(99),
                ..Window::default()
            }
        )
        .unwrap_err(),
        ShowError::NoSuchCall {
            call: 99,
            known: "1".into()
        }
    );
    assert!(matches!(
        Timeline::new(
            &trace,
            Window {
                from_us: Some(900_000_000),
                to_us: Some(900_000_001),
                call: None
            }
        ),
        Err(ShowError::EmptyWindow { .. })
    ));
}

#[cfg(feature = "plots")]
#[test]
fn reorderings_by_a_relay_writer_s_batch_sort_are_drawn_apart_and_counted() {
    let trace = shipped("lossy-download.jsonl");
    let t = Timeline::new(&trace, Window::default()).unwrap();
    let sorted = t
        .marks
        .iter()
        .filter(|m| {
            m.kind == MarkKind::Reordered && m.label.as_deref() == Some("writer-batch-sort")
        })
        .count();
    assert!(sorted > 0, "the shipped trace has batch-sorted deliveries");
    let dir = std::env::temp_dir().join(format!("relaysim-show-sort-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (svg, png) = (dir.join("t.svg"), dir.join("t.png"));
    draw::write(&t, &svg, &png).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains(&format!("reordered by batch sort ({sorted})")),
        "the legend counts them"
    );
    // Drawn in their own colour (sky blue, #56B4E9).
    assert!(text.to_ascii_uppercase().contains("#56B4E9"), "drawn apart");
    std::fs::remove_dir_all(&dir).ok();
}

/// A failed call's good answer (here the response came at 5.13 s, then the stream before it
/// turned out to have a gap) is drawn as a hollow ring, "answered, but the call failed", and
/// never as a completion.
#[cfg(feature = "plots")]
#[test]
fn a_failed_call_s_answer_is_a_hollow_ring_not_a_completion() {
    let trace = shipped("khatru-drop-mid-stream.shrunk.jsonl");
    let t = Timeline::new(&trace, Window::default()).unwrap();
    assert_eq!(t.counts.get(&MarkKind::Completed), None);
    let answered: Vec<&Mark> = t
        .marks
        .iter()
        .filter(|m| m.kind == MarkKind::Answered)
        .collect();
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0].at.0, 5_131_359, "where the response-ok line is");
    assert_eq!(t.lanes[answered[0].at.1].name, "client");
    let dir = std::env::temp_dir().join(format!("relaysim-show-answered-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (svg, png) = (dir.join("t.svg"), dir.join("t.png"));
    draw::write(&t, &svg, &png).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("answered, but the call failed (1)"),
        "the legend names it"
    );
    assert!(
        text.contains("completed (0)"),
        "the legend counts no completion"
    );
    std::fs::remove_dir_all(&dir).ok();
}
