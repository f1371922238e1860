//! `relaysim probe`: characterise a running relay (or a built-in profile served in-process)
//! and list where it differs from a profile or a recorded probe.

use super::Exit;
use anyhow::{bail, Context, Result};
use relaysim::live::{serve, ServeConfig};
use relaysim::probe::{differences, probe, ProbeConfig, ProbeReport, MAX_BURST};
use relaysim::RelayProfile;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub(super) struct ProbeArgs {
    /// The relay's ws:// URL. Without it, --profile is served on loopback and probed.
    url: Option<String>,
    /// A built-in profile: served on loopback (as `serve --profile` does) and probed, alone
    /// without a URL, or beside the URL's relay with every difference listed.
    #[arg(long, visible_alias = "against")]
    profile: Option<String>,
    /// A probe report written earlier (`--json`): every difference from it is listed.
    #[arg(long, value_name = "REPORT.json")]
    expect: Option<PathBuf>,
    /// Events per burst (at most 1000; rising-created-at bursts take at most 500).
    #[arg(long, default_value_t = 200)]
    burst: usize,
    /// How long to wait for any one answer, in milliseconds (1 to 600000).
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    wait_ms: u64,
    /// Write the report (of the URL's relay, else of the profile) as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also listen this many seconds on two quiet connections for the relay's keepalive pings
    /// and closes (1 to 900; strfry pings every 55 s, so 120 shows its close of a connection
    /// that answers no ping). Off by default.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=900))]
    keepalive_wait: Option<u64>,
}

/// The wall clock and fresh randomness of a probe: real relays check `created_at`, and a
/// storing relay keeps the last probe's events, so every probe has keys of its own.
fn config(url: String, args: &ProbeArgs) -> ProbeConfig {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    ProbeConfig {
        url,
        now_secs: now.as_secs(),
        nonce: now.as_nanos() as u64 ^ u64::from(std::process::id()),
        burst: args.burst,
        wait: Duration::from_millis(args.wait_ms),
        keepalive: args.keepalive_wait.map(Duration::from_secs),
    }
}

async fn probe_profile(profile: RelayProfile, args: &ProbeArgs) -> Result<ProbeReport> {
    let listen = SocketAddr::from(([127, 0, 0, 1], 0));
    let relay = serve(ServeConfig::new(profile).listening_on(listen))
        .await
        .context("cannot serve the profile on loopback")?;
    let report = probe(config(format!("ws://{}", relay.local_addr), args)).await;
    relay.shutdown().await;
    Ok(report?)
}

pub(super) fn probe_relay(args: ProbeArgs) -> Result<Exit> {
    if args.burst > MAX_BURST || args.burst == 0 {
        bail!("--burst takes 1 to {MAX_BURST} events");
    }
    let profile = match &args.profile {
        Some(name) => Some(RelayProfile::built_in(name).with_context(|| {
            format!(
                "no built-in profile {name:?}; the built-in profiles are {}",
                RelayProfile::BUILT_IN.join(", ")
            )
        })?),
        None => None,
    };
    if args.url.is_none() && profile.is_none() {
        bail!("give a relay's ws:// URL, or --profile NAME to probe a built-in profile");
    }
    let expected: Option<ProbeReport> = match &args.expect {
        Some(path) => {
            let text = relaysim::limits::read_text(path, 16 << 20)?;
            Some(
                serde_json::from_str(&text)
                    .with_context(|| format!("{} is not a probe report", path.display()))?,
            )
        }
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (main, model) = runtime.block_on(async {
        let main = match &args.url {
            Some(url) => Some(probe(config(url.clone(), &args)).await?),
            None => None,
        };
        let model = match profile {
            Some(p) => Some(probe_profile(p, &args).await?),
            None => None,
        };
        anyhow::Ok((main, model))
    })?;
    let subject = main.as_ref().or(model.as_ref()).expect("one was probed");
    print!("{}", subject.to_text());
    if let Some(path) = &args.json {
        super::write_file(path, &serde_json::to_string_pretty(subject)?)?;
    }
    let mut against = Vec::new();
    if let (Some(_), Some(model), Some(name)) = (&main, &model, &args.profile) {
        against.push((format!("profile {name}"), model));
    }
    if let Some(expected) = &expected {
        against.push((expected.url.clone(), expected));
    }
    for (name, other) in against {
        let diffs = differences(subject, other);
        if diffs.is_empty() {
            println!("no difference from {name}");
        } else {
            println!("differences from {name} (this relay | {name}):");
            for d in diffs {
                println!("  {d}");
            }
        }
    }
    Ok(Exit::Success)
}
