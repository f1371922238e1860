//! The probes themselves, each on its own connections and bounded by the probe's wait.

use super::conn::Heard;
use super::{
    event_message, publish, Answer, Burst, Keepalive, Probe, ProbeError, Replay, KIND,
    MAX_SUBSCRIPTIONS_TRIED, SUB_ID_LENGTHS,
};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// Quiet time after which a probe takes it that nothing more is coming (at most the wait).
fn settle(p: &Probe) -> Duration {
    p.config.wait.min(Duration::from_secs(1))
}

/// Events with ids in `ids` that `heard` holds, in the order heard.
fn events_of<'a>(heard: &'a [Heard], ids: &'a [String]) -> impl Iterator<Item = &'a String> + 'a {
    heard.iter().filter_map(move |h| match h {
        Heard::Event { id, .. } if ids.contains(id) => Some(id),
        _ => None,
    })
}

/// The answer to a REQ: how its stored part ended, with `auth` first when the relay asked
/// for authentication.
fn req_answer(heard: &[Heard]) -> Answer {
    let auth = if heard.contains(&Heard::Auth) {
        "auth, "
    } else {
        ""
    };
    let end = heard.iter().rev().find_map(|h| match h {
        Heard::Eose(_) => Some("eose".to_owned()),
        Heard::Closed { message, .. } => Some(format!("closed: {message}")),
        Heard::Notice(m) => Some(format!("notice: {m}")),
        Heard::Gone => Some("connection closed".to_owned()),
        _ => None,
    });
    format!("{auth}{}", end.unwrap_or_else(|| "no answer".into()))
}

fn ends_req(h: &Heard) -> bool {
    matches!(
        h,
        Heard::Eose(_) | Heard::Closed { .. } | Heard::Notice(_) | Heard::Gone
    )
}

/// An event, its answer, the same event again and its answer, and whether a subscriber got
/// it twice.
pub(super) async fn resend(p: &mut Probe) -> Result<(Answer, Answer, bool), ProbeError> {
    let (mut sub, _) = p.subscriber("resend", KIND).await?;
    let mut publisher = p.open().await?;
    let e = p.event(KIND, 100, 0);
    let first = publish(&mut publisher, &e, p.config.wait).await;
    let again = publish(&mut publisher, &e, p.config.wait).await;
    let heard = sub.until(p.deadline(), settle(p), |_| false).await;
    let ids = [e.id.to_hex()];
    let copies = events_of(&heard, &ids).count();
    publisher.close().await;
    sub.close().await;
    Ok((first, again, copies >= 2))
}

/// Two events published (awaiting OKs), then a new subscription: what it replays.
pub(super) async fn replay(p: &mut Probe) -> Result<Replay, ProbeError> {
    let mut publisher = p.open().await?;
    let older = p.event(KIND, 100, 0);
    let newer = p.event(KIND, 100, 1);
    publish(&mut publisher, &older, p.config.wait).await;
    publish(&mut publisher, &newer, p.config.wait).await;
    let mut c = p.open().await?;
    c.send(p.req("replay", KIND, Some(10))).await;
    let heard = c.until(p.deadline(), p.config.wait, ends_req).await;
    let ids = [older.id.to_hex(), newer.id.to_hex()];
    let got: Vec<&String> = events_of(&heard, &ids).collect();
    publisher.close().await;
    c.close().await;
    Ok(Replay {
        replayed: got.len(),
        newest_first: got.len() == 2 && *got[0] == ids[1],
        ended_by: match heard.iter().rev().find(|h| ends_req(h)) {
            Some(_) => req_answer(&heard),
            None => "nothing".into(),
        },
    })
}

/// The median of `samples`, in milliseconds.
fn median_ms(mut samples: Vec<Duration>) -> Option<f64> {
    samples.sort();
    let mid = samples.get(samples.len() / 2)?;
    Some((mid.as_secs_f64() * 1e6).round() / 1e3)
}

/// Whether `seen` (ids) came in the order of `order`, and how many adjacent pairs did not.
fn order_of(seen: &[String], order: &BTreeMap<String, usize>) -> (bool, usize) {
    let index: Vec<usize> = seen
        .iter()
        .filter_map(|id| order.get(id).copied())
        .collect();
    let inversions = index.windows(2).filter(|w| w[1] < w[0]).count();
    (inversions == 0, inversions)
}

/// One burst (see [`Burst::name`]) and its latency median: publish→OK for `await-ok`,
/// publish→delivery for `spaced-5ms`.
pub(super) async fn burst(p: &mut Probe, name: &str) -> Result<(Burst, Option<f64>), ProbeError> {
    // Rising created_at stays within the 900 s ahead that strfry accepts.
    let n = match name {
        "rising-created-at" => p.config.burst.min(500),
        _ => p.config.burst,
    };
    let events: Vec<_> = (0..n)
        .map(|i| {
            let ahead = if name == "rising-created-at" {
                i as u64
            } else {
                0
            };
            p.event(KIND, 100, ahead)
        })
        .collect();
    let order: BTreeMap<String, usize> = events
        .iter()
        .enumerate()
        .map(|(i, e)| (e.id.to_hex(), i))
        .collect();
    let ids: Vec<String> = events.iter().map(|e| e.id.to_hex()).collect();
    let (mut sub, _) = p.subscriber(&format!("burst-{name}"), KIND).await?;
    let mut publisher = p.open().await?;
    let (wait, quiet) = (p.config.wait, settle(p));
    let send = async {
        let mut sent_at = BTreeMap::new();
        let mut ok_latency = Vec::new();
        let mut oks = Vec::new();
        let mut refused: BTreeMap<String, usize> = BTreeMap::new();
        let first = Instant::now();
        let mut last_ok = None;
        let mut awaiting = name == "await-ok";
        for e in &events {
            let start = Instant::now();
            sent_at.insert(e.id.to_hex(), start);
            publisher.send(event_message(e)).await;
            if awaiting {
                let id = e.id.to_hex();
                let heard = publisher
                    .until(
                        start + wait,
                        wait,
                        |h| matches!(h, Heard::Ok { id: i, .. } if *i == id),
                    )
                    .await;
                oks.extend(heard.iter().filter_map(ok_id));
                for words in heard.iter().filter_map(refusal) {
                    *refused.entry(words).or_default() += 1;
                }
                last_ok = Some(first.elapsed());
                match heard.last() {
                    Some(Heard::Ok { .. }) => ok_latency.push(start.elapsed()),
                    // A relay that does not answer is not waited on again.
                    _ => awaiting = false,
                }
            } else if name == "spaced-5ms" {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        // The rest of the OKs, each timed as it comes.
        let until = Instant::now() + wait * 4;
        while oks.len() < n {
            match publisher.next(until.min(Instant::now() + quiet)).await {
                Some(Heard::Ok {
                    id,
                    accepted,
                    message,
                }) => {
                    if !accepted && ids.contains(&id) {
                        *refused.entry(message).or_default() += 1;
                    }
                    oks.push(id);
                    last_ok = Some(first.elapsed());
                }
                Some(Heard::Gone) | None => break,
                Some(_) => {}
            }
        }
        (sent_at, ok_latency, oks, last_ok, refused)
    };
    let receive = async {
        let mut got = Vec::new();
        let deadline = Instant::now() + wait * 4 + quiet * (n as u32 / 100 + 1);
        while got.len() < n {
            match sub
                .next(deadline.min(Instant::now() + quiet.max(wait)))
                .await
            {
                Some(Heard::Event { id, .. }) if order.contains_key(&id) => {
                    got.push((id, Instant::now()))
                }
                Some(Heard::Gone) | None => break,
                Some(_) => {}
            }
        }
        got
    };
    let ((sent_at, ok_latency, oks, last_ok, refused), got) = tokio::join!(send, receive);
    let seen: Vec<String> = got.iter().map(|(id, _)| id.clone()).collect();
    let (in_order, inversions) = order_of(&seen, &order);
    let ok_ids: Vec<String> = oks.into_iter().filter(|id| ids.contains(id)).collect();
    let (oks_in_order, _) = order_of(&ok_ids, &order);
    let delivery_latency = got
        .iter()
        .filter_map(|(id, at)| Some(at.saturating_duration_since(*sent_at.get(id)?)))
        .collect();
    publisher.close().await;
    sub.close().await;
    let latency = match name {
        "await-ok" => median_ms(ok_latency),
        "spaced-5ms" => median_ms(delivery_latency),
        _ => None,
    };
    Ok((
        Burst {
            name: name.to_owned(),
            sent: n,
            delivered: seen.len(),
            in_order,
            inversions,
            oks: ok_ids.len(),
            oks_in_order,
            last_ok_ms: last_ok.and_then(|d| median_ms(vec![d])),
            refused,
        },
        latency,
    ))
}

/// The relay's words, for an `OK false`.
fn refusal(h: &Heard) -> Option<String> {
    match h {
        Heard::Ok {
            accepted: false,
            message,
            ..
        } => Some(message.clone()),
        _ => None,
    }
}

fn ok_id(h: &Heard) -> Option<String> {
    match h {
        Heard::Ok { id, .. } => Some(id.clone()),
        _ => None,
    }
}

/// The answer to a REQ whose id has each of [`SUB_ID_LENGTHS`].
pub(super) async fn subscription_ids(p: &Probe) -> Result<Vec<(usize, Answer)>, ProbeError> {
    let mut out = Vec::new();
    for len in SUB_ID_LENGTHS {
        let mut c = p.open().await?;
        let sub: String = "s".repeat(len);
        c.send(p.req(&sub, KIND, None)).await;
        let heard = c.until(p.deadline(), p.config.wait, ends_req).await;
        out.push((len, req_answer(&heard)));
        c.close().await;
    }
    Ok(out)
}

/// Subscriptions opened one after another on one connection until the relay refuses one.
pub(super) async fn subscription_limit(p: &Probe) -> Result<Option<(usize, Answer)>, ProbeError> {
    let mut c = p.open().await?;
    for i in 1..=MAX_SUBSCRIPTIONS_TRIED {
        c.send(p.req(&format!("limit-{i}"), KIND, None)).await;
        let heard = c.until(p.deadline(), p.config.wait, ends_req).await;
        match heard.last() {
            Some(Heard::Eose(_)) => {}
            // strfry answers the first REQ over its limit with its replay and EOSE, then a
            // NOTICE: a NOTICE followed by this REQ's EOSE refused the one before; a NOTICE
            // alone refused this one.
            Some(Heard::Notice(m)) if i > 1 => {
                let sub = format!("limit-{i}");
                let more = c
                    .until(
                        p.deadline(),
                        settle(p),
                        |h| matches!(h, Heard::Eose(s) if *s == sub),
                    )
                    .await;
                c.close().await;
                return Ok(Some(if matches!(more.last(), Some(Heard::Eose(_))) {
                    (i - 1, format!("eose, then notice: {m}"))
                } else {
                    (i, format!("notice: {m}"))
                }));
            }
            _ => {
                c.close().await;
                return Ok(Some((i, req_answer(&heard))));
            }
        }
    }
    c.close().await;
    Ok(None)
}

/// What the gift-wrap probe saw.
pub(super) struct GiftWrapSeen {
    pub req: Answer,
    pub delivered: bool,
    pub resend: Answer,
    pub replay: Answer,
    pub mixed_delivered: bool,
}

/// A REQ for gift wraps (kind 1059) without authenticating, and whether a gift wrap
/// published meanwhile reaches it; then, since kind 1059 is a regular (storable) kind, the
/// answer to that gift wrap sent again and what a new REQ gets of it.
pub(super) async fn gift_wrap(p: &mut Probe) -> Result<GiftWrapSeen, ProbeError> {
    const GIFT_WRAP: u16 = 1059;
    let (mut sub, heard) = p.subscriber("gift-wrap", GIFT_WRAP).await?;
    let (mut mixed, _) = p.subscriber_of("mixed", &[GIFT_WRAP, KIND]).await?;
    let mut publisher = p.open().await?;
    let e = p.event(GIFT_WRAP, 100, 0);
    publish(&mut publisher, &e, p.config.wait).await;
    let later = sub.until(p.deadline(), settle(p), |_| false).await;
    let ids = [e.id.to_hex()];
    let delivered = events_of(&later, &ids).next().is_some();
    let to_mixed = mixed.until(p.deadline(), settle(p), |_| false).await;
    let mixed_delivered = events_of(&to_mixed, &ids).next().is_some();
    mixed.close().await;
    let resend = publish(&mut publisher, &e, p.config.wait).await;
    publisher.close().await;
    sub.close().await;
    let mut c = p.open().await?;
    c.send(p.req("gift-wrap-replay", GIFT_WRAP, Some(10))).await;
    let replayed = c.until(p.deadline(), p.config.wait, ends_req).await;
    c.close().await;
    let got = if events_of(&replayed, &ids).next().is_some() {
        "replayed"
    } else {
        "not replayed"
    };
    Ok(GiftWrapSeen {
        req: req_answer(&heard),
        delivered,
        resend,
        replay: format!("{got}, ended by {}", req_answer(&replayed)),
        mixed_delivered,
    })
}

/// Two quiet connections, each after one REQ: one reads and answers the relay's pings, the
/// other reads nothing for `wait` (so answers none); when the first ping came and which
/// connection the relay closed.
pub(super) async fn keepalive(p: &Probe, wait: Duration) -> Result<Keepalive, ProbeError> {
    let started = Instant::now();
    let deadline = started + wait;
    let mut answering = p.open().await?.reporting_pings();
    answering.send(p.req("keepalive", KIND, Some(0))).await;
    let mut silent = p.open().await?;
    silent.send(p.req("keepalive-silent", KIND, Some(0))).await;
    let mut first_ping_s = None;
    let mut answering_closed = false;
    while let Some(h) = answering.next(deadline).await {
        match h {
            Heard::Ping if first_ping_s.is_none() => {
                first_ping_s = Some((started.elapsed().as_secs_f64() * 10.0).round() / 10.0);
            }
            Heard::Gone => {
                answering_closed = true;
                break;
            }
            _ => {}
        }
    }
    // The silent connection is read only now: whatever it holds, and whether it ended.
    let heard = silent
        .until(Instant::now() + settle(p), settle(p), |_| false)
        .await;
    let silent_closed = heard.contains(&Heard::Gone);
    answering.close().await;
    silent.close().await;
    Ok(Keepalive {
        waited_s: wait.as_secs(),
        first_ping_s,
        answering_closed,
        silent_closed,
    })
}
