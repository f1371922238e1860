//! A peer's clock (`clock_skew_secs`, `subscribe_since`) and publish pipeline (`publish`).

use super::diagnostic::{closest, Ctx, ScenarioError};
use super::spec;
use crate::peer::core::Clock;
use crate::relay::impair::Delay;
use crate::sim::publish::{PublishMode, PublishPipeline};
use std::time::Duration;

/// A peer's clock from its `clock_skew_secs` and `subscribe_since` keys.
pub(super) fn clock(
    ctx: &Ctx,
    key: &str,
    skew: Option<i64>,
    subscribe_since: bool,
) -> Result<Clock, ScenarioError> {
    const DAY: i64 = 86_400;
    let skew_secs = skew.unwrap_or(0);
    if !(-DAY..=DAY).contains(&skew_secs) {
        return Err(ctx.at(
            None,
            &format!("{key}.clock_skew_secs"),
            format!("must be within a day (-86400..=86400 seconds), got {skew_secs}"),
            None,
        ));
    }
    Ok(Clock {
        skew_secs,
        subscribe_since,
    })
}

/// A peer's publish pipeline from its `publish` table (instant when absent).
pub(super) fn publish(
    ctx: &Ctx,
    key: &str,
    spec: &Option<spec::PublishSpec>,
) -> Result<PublishPipeline, ScenarioError> {
    let Some(spec) = spec else {
        return Ok(PublishPipeline::default());
    };
    let mode = match spec.mode.as_ref().map(|m| (m, m.get_ref().as_str())) {
        None | Some((_, "sequential")) => PublishMode::Sequential,
        Some((_, "concurrent")) => PublishMode::Concurrent,
        Some((m, other)) => {
            let options = ["sequential", "concurrent"];
            return Err(ctx.spanned(
                m,
                &format!("{key}.mode"),
                format!(
                    "unknown publish mode {other:?}; expected one of {}",
                    options.join(", ")
                ),
                closest(other, options),
            ));
        }
    };
    Ok(PublishPipeline {
        mode,
        per_event: spec.per_event.map_or(Duration::ZERO, |d| d.0),
        per_kib: spec.per_kib.map_or(Duration::ZERO, |d| d.0),
        jitter: match &spec.jitter {
            Some(j) => super::relays::checked_delay(ctx, &format!("{key}.jitter"), j)?,
            None => Delay::Zero,
        },
    })
}
