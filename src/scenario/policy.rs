//! Endpoint policies: the `[policy]` table, read into the server's configuration when the
//! scenario is read and into each client's when its world is built.

use super::diagnostic::Ctx;
use super::spec::PolicySpec;
use super::{Scenario, MIN_BUDGET};
use crate::peer::client::ClientConfig;
use crate::peer::server::ServerConfig;

/// The servers' configuration from `policy`, each problem recorded.
pub(super) fn server_config(ctx: &Ctx, policy: &PolicySpec) -> ServerConfig {
    let mut server_config = ServerConfig::default();
    if let Some(b) = policy.budget {
        if b.0 < MIN_BUDGET {
            ctx.record(ctx.at(
                None,
                "policy.budget",
                format!(
                    "budget {} is too small: a signed kind-25910 event with an empty content \
                     already publishes as about 650 bytes; use at least {MIN_BUDGET}",
                    b.0
                ),
                None,
            ));
        }
        server_config.budget = b.0;
    }
    apply_oversized_policy(policy, &mut server_config.oversized);
    if let Some(d) = policy.idle_timeout {
        server_config.writer.idle_timeout = d.0;
    }
    if let Some(d) = policy.probe_timeout {
        server_config.writer.probe_timeout = d.0;
    }
    for (key, value) in [
        ("policy.resume_min", policy.resume_min),
        ("policy.resume_max", policy.resume_max),
    ] {
        if value.is_some_and(|d| d.0.subsec_nanos() != 0 || d.0.is_zero()) {
            ctx.record(ctx.at(
                None,
                key,
                "must be a positive whole number of seconds (resumeInterval is in seconds)".into(),
                None,
            ));
        }
    }
    let resume = &mut server_config.streams.resume_interval;
    if let Some(d) = policy.resume_min {
        resume.min = Some(d.0.as_secs());
    }
    if let Some(d) = policy.resume_max {
        resume.max = Some(d.0.as_secs());
    }
    if let Some(n) = policy.stream_buffer_events {
        server_config.streams.max_messages_per_stream = n.max(1);
    }
    server_config
}

impl Scenario {
    /// A client's configuration: the policy over `config`'s defaults.
    pub(super) fn client_config(
        &self,
        config: &mut ClientConfig,
        stateless: bool,
        resumable: bool,
    ) {
        let p = &self.policy;
        config.stateless = stateless;
        if let Some(b) = p.budget {
            config.budget = b.0;
        }
        if let Some(d) = p.request_timeout {
            config.request_timeout = d.0;
        }
        if let Some(d) = p.max_request_timeout {
            config.max_request_timeout = d.0;
        }
        apply_oversized_policy(p, &mut config.oversized);
        let s = &mut config.stream_policy;
        if let Some(d) = p.idle_timeout {
            s.idle_timeout = d.0;
        }
        if let Some(d) = p.probe_timeout {
            s.probe_timeout = d.0;
        }
        if let Some(d) = p.close_grace {
            s.close_grace = d.0;
        }
        if let Some(n) = p.max_buffered_chunks {
            s.max_buffered_chunks_per_stream = n;
        }
        if let Some(b) = p.max_buffered_bytes {
            s.max_buffered_bytes_per_stream = b.0;
        }
        if let Some(n) = p.max_unread_chunks {
            s.max_unread_chunks_per_stream = n;
        }
        if resumable {
            // Last: a resumable client's probe timeout is at least the resume bound.
            *config = config.clone().with_resumable_streams();
            if let Some(max) = p.resume_max {
                let s = &mut config.stream_policy;
                s.probe_timeout = s.probe_timeout.max(max.0);
            }
        }
    }
}

fn apply_oversized_policy(p: &PolicySpec, r: &mut crate::protocol::oversized::ReceiverConfig) {
    if let Some(d) = p.transfer_timeout {
        r.transfer_timeout = d.0;
    }
    if let Some(d) = p.end_grace {
        r.end_grace = d.0;
    }
    if let Some(n) = p.reorder_window {
        r.reorder_window = n;
    }
    if let Some(n) = p.max_out_of_order_chunks {
        r.max_out_of_order_chunks = n;
    }
    if let Some(n) = p.max_transfer_bytes {
        r.max_total_bytes = n.0 as u64;
    }
    if let Some(n) = p.max_transfer_chunks {
        r.max_total_chunks = n;
    }
}
