//! Workloads in a scenario: which tool each client calls, how often, and when. What a call
//! does and what its correct result is lives in the tool catalogue
//! ([`crate::peer::tools`]); this file reads a workload's keys and turns it into calls.

use super::diagnostic::{closest, Ctx, ScenarioError};
use super::spec::WorkloadSpec;
use crate::peer::content::ContentClass;
use crate::peer::tools::ToolCall;
pub use crate::peer::tools::WorkloadKind;
use crate::rng::SeededStreams;
use crate::sim::world::Call;
use std::time::Duration;
use toml::Spanned;

/// The workload kinds, by their names in scenarios.
pub(crate) const KINDS: [&str; 5] = ["request", "download", "upload", "stream", "slow"];
const CONTENTS: [&str; 4] = crate::peer::content::ContentClass::NAMES;

/// A workload, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Its name in reports.
    pub name: String,
    /// What it does.
    pub kind: WorkloadKind,
    /// Client indices it runs on.
    pub clients: Vec<usize>,
    /// Calls per client.
    pub count: u32,
    /// First call.
    pub at: Duration,
    /// Between calls.
    pub every: Duration,
    /// Send a progress token.
    pub progress: bool,
    /// Streams: the client reads one chunk per this interval.
    pub consume_every: Option<Duration>,
}

/// The name of the `i`-th workload in reports and expectations: its `name`, or `<kind>-<i>`.
pub(super) fn declared_name(i: usize, w: &WorkloadSpec) -> String {
    w.name
        .clone()
        .unwrap_or_else(|| format!("{}-{i}", w.kind.get_ref()))
}

/// The `i`-th workload, its clients looked up in `groups` (clients by their table's name).
pub(super) fn workload(
    ctx: &Ctx,
    i: usize,
    w: &Spanned<WorkloadSpec>,
    clients: usize,
    groups: &[(String, Vec<usize>)],
) -> Result<Workload, ScenarioError> {
    let key = format!("workloads[{i}]");
    let ws = w.get_ref();
    let kind_name = ws.kind.get_ref().as_str();
    let need = |field: &str| {
        ctx.spanned(
            w,
            &format!("{key}.{field}"),
            format!("a {kind_name} workload needs `{field}`"),
            None,
        )
    };
    let content = match &ws.content {
        None => ContentClass::Ascii,
        Some(c) => c.get_ref().parse().map_err(|m: String| {
            ctx.spanned(
                c,
                &format!("{key}.content"),
                m,
                closest(c.get_ref(), CONTENTS),
            )
        })?,
    };
    let kind = match kind_name {
        "request" => WorkloadKind::Request {
            bytes: ws.bytes.map_or(16, |b| b.0),
        },
        "download" => WorkloadKind::Fixed(ToolCall::LargeResult {
            bytes: ws.bytes.ok_or_else(|| need("bytes"))?.0,
            content,
        }),
        "upload" => WorkloadKind::Upload {
            bytes: ws.bytes.ok_or_else(|| need("bytes"))?.0,
            content,
        },
        "stream" => WorkloadKind::Fixed(ToolCall::Stream {
            chunks: ws.chunks.ok_or_else(|| need("chunks"))?,
            chunk_bytes: ws.chunk_bytes.map_or(64, |b| b.0),
            interval: ws.interval.map_or(Duration::ZERO, |d| d.0),
        }),
        "slow" => WorkloadKind::Fixed(ToolCall::Slow {
            duration: ws.work.ok_or_else(|| need("work"))?.0,
            progress_every: ws.progress_every.map(|d| d.0).filter(|d| !d.is_zero()),
        }),
        other => {
            return Err(ctx.spanned(
                &ws.kind,
                &format!("{key}.kind"),
                format!(
                    "unknown workload kind {other:?}; expected one of {}",
                    KINDS.join(", ")
                ),
                closest(other, KINDS),
            ));
        }
    };
    let targets = match &ws.client {
        None => (0..clients).collect(),
        Some(name) => groups
            .iter()
            .find(|(n, _)| n == name.get_ref())
            .map(|(_, g)| g.clone())
            .ok_or_else(|| {
                let names: Vec<&str> = groups.iter().map(|(n, _)| n.as_str()).collect();
                ctx.spanned(
                    name,
                    &format!("{key}.client"),
                    format!(
                        "no client named {:?}; clients: {}",
                        name.get_ref(),
                        names.join(", ")
                    ),
                    closest(name.get_ref(), names),
                )
            })?,
    };
    check_payload(ctx, w, &key, &kind)?;
    Ok(Workload {
        name: declared_name(i, ws),
        kind,
        clients: targets,
        count: match ws.count.unwrap_or(1) {
            n @ 1..=1_000_000 => n,
            n => {
                return Err(ctx.spanned(
                    w,
                    &format!("{key}.count"),
                    format!("must be between 1 and 1000000, got {n}"),
                    None,
                ))
            }
        },
        at: ws.at.map_or(Duration::ZERO, |d| d.0),
        every: ws.every.map_or(Duration::ZERO, |d| d.0),
        progress: ws.progress.unwrap_or(true),
        consume_every: ws.consume_interval.map(|d| d.0).filter(|d| !d.is_zero()),
    })
}

/// Refuses payloads the simulated peers would refuse at run time, with the bound.
fn check_payload(
    ctx: &Ctx,
    w: &Spanned<WorkloadSpec>,
    key: &str,
    kind: &WorkloadKind,
) -> Result<(), ScenarioError> {
    use crate::limits::{MAX_CHUNK_BYTES, MAX_PAYLOAD_BYTES, MAX_STREAM_CHUNKS};
    let too_big = |field: &str, message: String| {
        Err(ctx.spanned(w, &format!("{key}.{field}"), message, None))
    };
    match kind {
        WorkloadKind::Request { bytes }
        | WorkloadKind::Upload { bytes, .. }
        | WorkloadKind::Fixed(ToolCall::LargeResult { bytes, .. })
            if *bytes > MAX_PAYLOAD_BYTES =>
        {
            too_big(
                "bytes",
                format!("at most {MAX_PAYLOAD_BYTES} bytes (1 GiB), got {bytes}"),
            )
        }
        WorkloadKind::Fixed(ToolCall::Stream { chunks, .. }) if *chunks > MAX_STREAM_CHUNKS => {
            too_big(
                "chunks",
                format!("at most {MAX_STREAM_CHUNKS} chunks, got {chunks}"),
            )
        }
        WorkloadKind::Fixed(ToolCall::Stream { chunk_bytes, .. })
            if *chunk_bytes > MAX_CHUNK_BYTES =>
        {
            too_big(
                "chunk_bytes",
                format!("at most {MAX_CHUNK_BYTES} bytes (1 MiB), got {chunk_bytes}"),
            )
        }
        _ => Ok(()),
    }
}

/// Every call of `workloads` in a run with `seed`: when, which client, what.
pub(super) fn calls(workloads: &[Workload], seed: u64) -> Vec<(Duration, usize, Call)> {
    let mut calls = Vec::new();
    let streams = SeededStreams::new(seed);
    for (w_index, w) in workloads.iter().enumerate() {
        for &client in &w.clients {
            for k in 0..w.count {
                let at = w.at + w.every * k;
                // One stream per call, so a workload's payloads never depend on another's.
                let mut rng = streams.stream(&format!("workload/{w_index}/{client}/{k}"));
                calls.push((
                    at,
                    client,
                    Call {
                        tool: w.kind.call(&mut rng),
                        progress: w.progress,
                        workload: w_index,
                        consume_every: w.consume_every,
                    },
                ));
            }
        }
    }
    calls
}
