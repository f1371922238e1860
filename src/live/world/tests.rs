//! The world's flow control, driven directly with tokio's clock paused.

use super::*;
use crate::live::outbox::QueueBudget;
use crate::relay::impair::Delay;
use crate::relay::RelayProfile;
use tokio::sync::Semaphore;

/// A world of one relay whose up link takes `delay`.
fn world(delay: Duration) -> World {
    let mut profile = RelayProfile::ideal();
    profile.impairments.peer_to_relay.delay = Delay::Constant(delay);
    let streams = SeededStreams::new(1);
    let slot = RelaySlot::new("r".into(), profile, &streams);
    let config = WorldConfig {
        seed: 1,
        epoch_secs: Some(1_700_000_000),
        labels: BTreeMap::new(),
        outages_from: Duration::ZERO,
        subscription_budget: (1 << 20, 4),
    };
    World::new(vec![slot], config, Arc::default(), None)
}

/// Opens connection 1 on `world`; the receiver must stay alive for the outbox to take messages.
fn open(world: &mut World) -> mpsc::UnboundedReceiver<super::super::outbox::Queued> {
    let (out, rx) = Outbox::new(QueueBudget::new(1 << 20, 4, 1 << 20));
    let (kill, _) = oneshot::channel();
    world.handle(Inbound::Open {
        relay: 0,
        conn: 1,
        ip: [127, 0, 0, 1].into(),
        out,
        kill,
    });
    rx
}

#[tokio::test(start_paused = true)]
async fn a_frame_holds_its_read_credit_until_the_relay_has_handled_it() {
    let mut world = world(Duration::from_secs(2));
    let _rx = open(&mut world);
    let (mine, ours) = (Arc::new(Semaphore::new(4)), Arc::new(Semaphore::new(8)));
    let text = r#"["REQ","s",{"kinds":[1]}]"#;
    world.handle(Inbound::Text {
        conn: 1,
        bytes: text.len(),
        text: None,
        parsed: Parsed::frame(text, None),
        credit: Credit::new(
            mine.clone().try_acquire_many_owned(4).unwrap(),
            ours.clone().try_acquire_many_owned(3).unwrap(),
        ),
    });
    assert_eq!(
        (mine.available_permits(), ours.available_permits()),
        (0, 5),
        "the REQ is on the link for 2 s: its credit is still held"
    );
    tokio::time::advance(Duration::from_secs(2)).await;
    world.on_wake();
    assert_eq!(
        (mine.available_permits(), ours.available_permits()),
        (4, 8),
        "handled: both shares are back"
    );
}

/// A profile without a message limit meets serve's own, and the client is told whose it is
/// before the connection goes.
#[tokio::test(start_paused = true)]
async fn a_frame_over_serve_s_own_limit_is_answered_with_a_notice_naming_it() {
    let mut world = world(Duration::ZERO);
    let mut rx = open(&mut world);
    world.handle(Inbound::Oversize {
        conn: 1,
        size: 2 << 20,
    });
    let mut queued = rx.try_recv().expect("a NOTICE queued");
    let Some(tokio_tungstenite::tungstenite::Message::Text(text)) = queued.take() else {
        panic!("not a text frame")
    };
    let notice: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
    assert_eq!(notice[0], "NOTICE");
    assert_eq!(
        notice[1],
        format!(
            "relaysim: a frame of {} bytes is over the {} byte frame limit serve keeps for \
             profiles that set none; the connection is closed",
            2 << 20,
            crate::live::http::DEFAULT_FRAME_LIMIT
        )
    );
}
