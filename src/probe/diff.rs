//! Where two probe reports disagree: every behaviour the probes saw, compared as words, with
//! burst orders compared as "in order or not" (which events a sort shuffles depends on their
//! random ids) and latency left out (it is the machine's as much as the relay's).

use super::ProbeReport;

/// Each behaviour where `a` and `b` differ, as `what: a's | b's`.
pub fn differences(a: &ProbeReport, b: &ProbeReport) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |what: &str, x: String, y: String| {
        if x != y {
            out.push(format!("{what}: {x} | {y}"));
        }
    };
    check("ephemeral event", a.ephemeral.clone(), b.ephemeral.clone());
    check("re-sent event", a.resend.clone(), b.resend.clone());
    check(
        "re-sent event delivered again",
        a.resend_delivered_again.to_string(),
        b.resend_delivered_again.to_string(),
    );
    let replay = |r: &super::Replay| {
        format!(
            "{} of 2 replayed{}, ended by {}",
            r.replayed,
            if r.newest_first { ", newest first" } else { "" },
            r.ended_by
        )
    };
    check("new subscription", replay(&a.replay), replay(&b.replay));
    for (x, y) in a.bursts.iter().zip(&b.bursts) {
        let words = |burst: &super::Burst| {
            format!(
                "{} of {} delivered {}, {} OKs {}",
                burst.delivered,
                burst.sent,
                if burst.in_order {
                    "in order"
                } else {
                    "reordered"
                },
                burst.oks,
                if burst.oks_in_order {
                    "in order"
                } else {
                    "reordered"
                },
            )
        };
        check(&format!("burst {}", x.name), words(x), words(y));
        let refusals = |burst: &super::Burst| {
            let words: Vec<&str> = burst.refused.keys().map(String::as_str).collect();
            format!("refused {words:?}")
        };
        check(
            &format!("burst {} refusals", x.name),
            refusals(x),
            refusals(y),
        );
    }
    for ((bytes, x), (_, y)) in a.sizes.iter().zip(&b.sizes) {
        check(&format!("{bytes}-byte event"), x.clone(), y.clone());
    }
    for ((len, x), (_, y)) in a.subscription_ids.iter().zip(&b.subscription_ids) {
        check(
            &format!("{len}-character subscription id"),
            x.clone(),
            y.clone(),
        );
    }
    let limit = |l: &Option<(usize, String)>| match l {
        Some((n, answer)) => format!("subscription {n} refused ({answer})"),
        None => format!("all {} subscriptions taken", super::MAX_SUBSCRIPTIONS_TRIED),
    };
    check(
        "subscriptions on one connection",
        limit(&a.subscription_limit),
        limit(&b.subscription_limit),
    );
    check(
        "REQ for gift wraps",
        a.gift_wrap_req.clone(),
        b.gift_wrap_req.clone(),
    );
    check(
        "gift wrap delivered",
        a.gift_wrap_delivered.to_string(),
        b.gift_wrap_delivered.to_string(),
    );
    // Recorded reports may lack the storage probe: compared only where both have it.
    let pairs = [
        (
            "gift wrap sent again",
            &a.gift_wrap_resend,
            &b.gift_wrap_resend,
        ),
        (
            "new REQ for gift wraps",
            &a.gift_wrap_replay,
            &b.gift_wrap_replay,
        ),
    ];
    for (what, x, y) in pairs {
        if let (Some(x), Some(y)) = (x, y) {
            check(what, x.clone(), y.clone());
        }
    }
    // Keepalives compared when both listened as long: a ping or none, and which connection
    // was closed.
    if let (Some(x), Some(y)) = (&a.keepalive, &b.keepalive) {
        if x.waited_s == y.waited_s {
            check("keepalive", x.compared(), y.compared());
        }
    }
    if let (Some(x), Some(y)) = (a.gift_wrap_mixed_delivered, b.gift_wrap_mixed_delivered) {
        check(
            "gift wrap delivered to a REQ for kinds 1059 and 25910",
            x.to_string(),
            y.to_string(),
        );
    }
    out
}
