//! Relays in a scenario: profiles with their overrides, links (delays, bandwidth, the
//! datagram stress mode), intake, rate limits and outages.

use super::diagnostic::{closest, Ctx, ScenarioError};
use super::spec::{self, DelaySpec, LinkSpec, RelaySpec};
use crate::relay::impair::{Delay, Direction, Loss, Ordering, Outage, OutageKind};
use crate::relay::profile::{Intake, RateAction, RateLimit, RateScope, Refill};
use crate::relay::RelayProfile;
use std::time::Duration;

/// The knobs that act on single messages, which only a link in the datagram stress mode has.
pub(crate) const DATAGRAM_KNOBS: [&str; 4] = ["reorder", "duplicate", "loss", "burst_loss"];

/// The relay `r` (the `i`-th `[[relays]]` table) with its overrides; `taken` are the relays
/// before it.
pub(super) fn relay(
    ctx: &Ctx,
    i: usize,
    r: &RelaySpec,
    taken: &[(String, RelayProfile)],
) -> Result<RelayProfile, ScenarioError> {
    let key = format!("relays[{i}]");
    let name = r.name.get_ref().clone();
    if taken.iter().any(|(n, _)| *n == name) {
        return Err(ctx.spanned(
            &r.name,
            &format!("{key}.name"),
            format!("a second relay named {name:?}"),
            None,
        ));
    }
    // Each part of a relay's table is checked on its own, so one problem does not hide the next.
    let mut profile = match &r.profile {
        None => RelayProfile::ideal(),
        Some(p) => ctx
            .attempt(|| {
                RelayProfile::built_in(p.get_ref()).ok_or_else(|| {
                    ctx.spanned(
                        p,
                        &format!("{key}.profile"),
                        format!(
                            "unknown relay profile {:?}; built-in profiles: {}",
                            p.get_ref(),
                            RelayProfile::BUILT_IN.join(", ")
                        ),
                        closest(p.get_ref(), RelayProfile::BUILT_IN),
                    )
                })
            })
            .unwrap_or_else(RelayProfile::ideal),
    };
    if let Some(s) = r.max_event_bytes {
        profile.max_event_bytes = Some(s.0);
    }
    if let Some(s) = r.max_message_bytes {
        profile.max_message_bytes = Some(s.0);
    }
    if let Some(rate) = &r.rate_limit {
        let scope = match rate.scope.get_ref().as_str() {
            "connection" => RateScope::Connection,
            "pubkey" => RateScope::Pubkey,
            "ip" => RateScope::Ip,
            "server" => RateScope::Server,
            other => {
                let options = ["connection", "pubkey", "ip", "server"];
                return Err(ctx.spanned(
                    &rate.scope,
                    &format!("{key}.rate_limit.scope"),
                    format!(
                        "unknown scope {other:?}; expected one of {}",
                        options.join(", ")
                    ),
                    closest(other, options),
                ));
            }
        };
        let action = match rate.action.get_ref().as_str() {
            "reject" => RateAction::Reject(
                rate.message
                    .clone()
                    .unwrap_or_else(|| "rate-limited: slow down".into()),
            ),
            "delay" => RateAction::Delay,
            "drop" => RateAction::Drop,
            other => {
                let options = ["reject", "delay", "drop"];
                return Err(ctx.spanned(
                    &rate.action,
                    &format!("{key}.rate_limit.action"),
                    format!(
                        "unknown action {other:?}; expected one of {}",
                        options.join(", ")
                    ),
                    closest(other, options),
                ));
            }
        };
        if !(rate.per_minute > 0.0 && rate.per_minute.is_finite()) {
            return Err(ctx.at(
                None,
                &format!("{key}.rate_limit.per_minute"),
                "must be a positive number".into(),
                None,
            ));
        }
        let refill = rate_refill(ctx, &format!("{key}.rate_limit"), rate)?;
        profile.rate_limit = Some(RateLimit {
            scope,
            capacity: rate.burst.unwrap_or(rate.per_minute).max(1.0),
            refill_per_sec: rate.per_minute / 60.0,
            refill,
            action,
        });
    }
    if let Some(p) = r.processing {
        profile.processing = p.0;
    }
    if let Some(i) = &r.intake {
        if let Some(intake) = ctx.attempt(|| intake(ctx, &format!("{key}.intake"), i)) {
            profile.intake = intake;
        }
    }
    let impairments = &mut profile.impairments;
    for (way, spec, direction) in [
        ("up", &r.up, &mut impairments.peer_to_relay),
        ("down", &r.down, &mut impairments.relay_to_peer),
    ] {
        if let Some(spec) = spec {
            if let Some(d) = ctx.attempt(|| link(ctx, &format!("{key}.{way}"), spec, direction)) {
                *direction = d;
            }
        }
    }
    for (j, o) in r.outages.iter().enumerate() {
        let kind = match o.kind.get_ref().as_str() {
            "relay-restart" => OutageKind::RelayRestart,
            "connection-drop" => OutageKind::ConnectionDrop {
                peer: o.peer.clone(),
            },
            "partition" => OutageKind::Partition {
                peer: o.peer.clone(),
            },
            other => {
                let options = OutageKind::NAMES;
                return Err(ctx.spanned(
                    &o.kind,
                    &format!("{key}.outages[{j}].kind"),
                    format!(
                        "unknown outage kind {other:?}; expected one of {}",
                        options.join(", ")
                    ),
                    closest(other, options),
                ));
            }
        };
        profile.impairments.outages.scheduled.push(Outage {
            at: o.at.0,
            duration: o.duration.0,
            kind,
        });
    }
    if let Some(every) = r.connection_drop_every {
        if every.0 < Duration::from_secs(1) {
            return Err(ctx.at(
                None,
                &format!("{key}.connection_drop_every"),
                "must be at least 1s".into(),
                None,
            ));
        }
        profile.impairments.outages.connection_drop_every = Some(every.0);
    }
    if let Some([lo, hi]) = r.connection_down_for {
        profile.impairments.outages.connection_down_for = (lo.0, hi.0);
    }
    Ok(profile)
}

pub(super) fn check_probability(
    ctx: &Ctx,
    key: &str,
    p: Option<f64>,
) -> Result<f64, ScenarioError> {
    let p = p.unwrap_or(0.0);
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(ctx.at(
            None,
            key,
            format!("must be a probability between 0 and 1, got {p}"),
            None,
        ))
    }
}

fn delay(spec: &DelaySpec) -> Delay {
    match spec {
        DelaySpec::Constant { value } => Delay::Constant(value.0),
        DelaySpec::Uniform { min, max } => Delay::Uniform {
            min: min.0,
            max: max.0,
        },
        DelaySpec::Normal { mean, sd } => Delay::Normal {
            mean: mean.0,
            sd: sd.0,
        },
        DelaySpec::Lognormal { median, sigma } => Delay::LogNormal {
            median: median.0,
            sigma: *sigma,
        },
        DelaySpec::Pareto { scale, shape } => Delay::Pareto {
            scale: scale.0,
            shape: *shape,
        },
        DelaySpec::Empirical { samples } => Delay::Empirical(samples.iter().map(|d| d.0).collect()),
    }
}

pub(super) fn checked_delay(
    ctx: &Ctx,
    key: &str,
    spec: &DelaySpec,
) -> Result<Delay, ScenarioError> {
    let d = delay(spec);
    d.validate()
        .map_err(|e| ctx.at(None, key, e.to_string(), None))?;
    Ok(d)
}

/// A relay's intake from its `intake` table.
fn intake(ctx: &Ctx, key: &str, spec: &spec::IntakeSpec) -> Result<Intake, ScenarioError> {
    let mode = spec.mode.get_ref().as_str();
    let concurrent = spec.handling.is_some() || spec.per_kib.is_some();
    let batch = spec.per_batch.is_some() || spec.per_event.is_some();
    let misplaced = match mode {
        "serial" if concurrent || batch => Some(
            "`handling` and `per_kib` apply to a concurrent intake, `per_batch` and `per_event` \
             to a batch-commit one; a serial one takes the relay's `processing` time",
        ),
        "concurrent" if batch => Some("`per_batch` and `per_event` apply to a batch-commit intake"),
        "batch-commit" if concurrent => {
            Some("`handling` and `per_kib` apply to a concurrent intake")
        }
        _ => None,
    };
    if let Some(message) = misplaced {
        return Err(ctx.spanned(&spec.mode, key, message.into(), None));
    }
    match mode {
        "serial" => Ok(Intake::Serial),
        "concurrent" => Ok(Intake::Concurrent {
            handling: match &spec.handling {
                Some(h) => checked_delay(ctx, &format!("{key}.handling"), h)?,
                None => Delay::Zero,
            },
            per_kib: spec.per_kib.map_or(Duration::ZERO, |d| d.0),
        }),
        "batch-commit" => Ok(Intake::BatchCommit {
            per_batch: spec.per_batch.map_or(Duration::ZERO, |d| d.0),
            per_event: spec.per_event.map_or(Duration::ZERO, |d| d.0),
        }),
        other => {
            let options = Intake::MODES;
            Err(ctx.spanned(
                &spec.mode,
                &format!("{key}.mode"),
                format!(
                    "unknown intake {other:?}; expected one of {}",
                    options.join(", ")
                ),
                closest(other, options),
            ))
        }
    }
}

fn link(
    ctx: &Ctx,
    key: &str,
    spec: &LinkSpec,
    base: &Direction,
) -> Result<Direction, ScenarioError> {
    let mut d = base.clone();
    if let Some(ordering) = &spec.ordering {
        d.ordering = match ordering.get_ref().as_str() {
            "connection" => Ordering::Connection,
            "datagram" => Ordering::Datagram,
            other => {
                let options = ["connection", "datagram"];
                return Err(ctx.spanned(
                    ordering,
                    &format!("{key}.ordering"),
                    format!(
                        "unknown ordering {other:?}; expected one of {}",
                        options.join(", ")
                    ),
                    closest(other, options),
                ));
            }
        };
    }
    // Per-message disturbances exist only in the stress mode: a WebSocket over TCP delivers
    // in order and loses nothing while the connection is up.
    if d.ordering == Ordering::Connection {
        let per_message: [(&str, bool); DATAGRAM_KNOBS.len()] = [
            (
                "reorder",
                spec.reorder.is_some() || spec.reorder_delay.is_some(),
            ),
            (
                "duplicate",
                spec.duplicate.is_some()
                    || spec.duplicate_copies.is_some()
                    || spec.duplicate_spacing.is_some(),
            ),
            ("loss", spec.loss.is_some()),
            ("burst_loss", spec.burst_loss.is_some()),
        ];
        if let Some((name, _)) = per_message.iter().find(|(_, set)| *set) {
            return Err(ctx.at(
                None,
                &format!("{key}.{name}"),
                format!(
                    "`{name}` acts on single messages, but one WebSocket connection never \
                     reorders, duplicates or loses a message while it is up. For the stress \
                     mode, add `ordering = \"datagram\"` to this link; for causes a real \
                     deployment has, use several relays, `connection_drop_every`, outages, \
                     `[relays.intake]` or `publish` on a peer (docs/physics.md)"
                ),
                None,
            ));
        }
    }
    if let Some(spec) = &spec.delay {
        d.delay = checked_delay(ctx, &format!("{key}.delay"), spec)?;
    }
    if spec.reorder.is_some() {
        d.reorder = check_probability(ctx, &format!("{key}.reorder"), spec.reorder)?;
    }
    if let Some(r) = spec.reorder_delay {
        d.reorder_delay = r.0;
    }
    if spec.duplicate.is_some() {
        d.duplicate = check_probability(ctx, &format!("{key}.duplicate"), spec.duplicate)?;
    }
    if let Some(c) = spec.duplicate_copies {
        if c > 100 {
            return Err(ctx.at(
                None,
                &format!("{key}.duplicate_copies"),
                format!("at most 100 extra copies, got {c}"),
                None,
            ));
        }
        d.duplicate_copies = c;
    }
    if let Some(s) = spec.duplicate_spacing {
        d.duplicate_spacing = s.0;
    }
    if spec.loss.is_some() {
        d.loss = Loss::Iid(check_probability(ctx, &format!("{key}.loss"), spec.loss)?);
    }
    if let Some(b) = &spec.burst_loss {
        for (name, p) in [
            ("good_to_bad", b.good_to_bad),
            ("bad_to_good", b.bad_to_good),
            ("loss_in_good", b.loss_in_good),
            ("loss_in_bad", b.loss_in_bad),
        ] {
            check_probability(ctx, &format!("{key}.burst_loss.{name}"), Some(p))?;
        }
        d.loss = Loss::GilbertElliott {
            good_to_bad: b.good_to_bad,
            bad_to_good: b.bad_to_good,
            loss_in_good: b.loss_in_good,
            loss_in_bad: b.loss_in_bad,
        };
    }
    if let Some(bw) = &spec.bandwidth {
        let text = bw.get_ref();
        let bytes = text
            .strip_suffix("/s")
            .and_then(|size| spec::parse_size(size).ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| ctx.spanned(bw, &format!("{key}.bandwidth"), format!("{text:?} is not a bandwidth: write bytes per second, e.g. \"1MB/s\" or \"512KiB/s\""), None))?;
        d.bandwidth = Some(bytes as u64);
    }
    Ok(d)
}

/// Records every outage that names a peer the scenario does not have.
pub(super) fn check_outage_peers(ctx: &Ctx, relays: &[(String, RelayProfile)], peers: &[&str]) {
    for (i, (relay_name, profile)) in relays.iter().enumerate() {
        for (j, o) in profile.impairments.outages.scheduled.iter().enumerate() {
            if let OutageKind::ConnectionDrop { peer: Some(p) }
            | OutageKind::Partition { peer: Some(p) } = &o.kind
            {
                if !peers.contains(&p.as_str()) {
                    ctx.record(ctx.at(
                        None,
                        &format!("relays[{i}].outages[{j}].peer"),
                        format!(
                            "relay {relay_name:?}: no peer named {p:?}; peers: {}",
                            peers.join(", ")
                        ),
                        closest(p, peers.iter().copied()),
                    ));
                }
            }
        }
    }
}

/// A rate limit's `refill` and `tick`, checked against each other and `burst`.
fn rate_refill(ctx: &Ctx, key: &str, rate: &spec::RateSpec) -> Result<Refill, ScenarioError> {
    let refill = rate
        .refill
        .as_ref()
        .map_or("smooth", |r| r.get_ref().as_str());
    let refill = match (refill, &rate.tick) {
        ("smooth", None) => Refill::Smooth,
        ("ticks", Some(tick)) if !tick.0.is_zero() => Refill::Ticks { every: tick.0 },
        ("ticks", _) => {
            return Err(ctx.at(
                None,
                &format!("{key}.tick"),
                "refill = \"ticks\" needs a tick = \"…\" longer than zero".into(),
                None,
            ))
        }
        ("whole-seconds", None) if rate.burst.is_none_or(|b| b == rate.per_minute) => {
            Refill::WholeSeconds
        }
        ("whole-seconds", None) => {
            return Err(ctx.at(
                None,
                &format!("{key}.burst"),
                "refill = \"whole-seconds\" fills its bucket with one minute's worth: leave \
                 burst out"
                    .into(),
                None,
            ))
        }
        ("smooth" | "whole-seconds", Some(_)) => {
            return Err(ctx.at(
                None,
                &format!("{key}.tick"),
                "tick is for refill = \"ticks\"".into(),
                None,
            ))
        }
        (other, _) => {
            let options = ["smooth", "ticks", "whole-seconds"];
            let spanned = rate.refill.as_ref().expect("a named refill");
            return Err(ctx.spanned(
                spanned,
                &format!("{key}.refill"),
                format!(
                    "unknown refill {other:?}; expected one of {}",
                    options.join(", ")
                ),
                closest(other, options),
            ));
        }
    };
    Ok(refill)
}
