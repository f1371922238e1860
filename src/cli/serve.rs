//! `relaysim serve`: a live relay on a real socket.

use super::Exit;
use anyhow::{bail, Context, Result};

#[derive(clap::Args, Debug)]
pub(super) struct ServeArgs {
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1:7777")]
    listen: std::net::SocketAddr,
    /// Built-in relay profile.
    #[arg(long, default_value = "strfry")]
    profile: String,
    /// Seed of the impairments' random draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write every EVENT, OK and NOTICE to this trace (closed on Ctrl-C).
    #[arg(long)]
    trace: Option<std::path::PathBuf>,
}

pub(super) fn serve(args: ServeArgs) -> Result<Exit> {
    if let Some(path) = &args.trace {
        super::create_parent(path)?;
    }
    let Some(profile) = relaysim::relay::RelayProfile::built_in(&args.profile) else {
        bail!(
            "unknown relay profile {:?}; built-in profiles: {}",
            args.profile,
            relaysim::relay::RelayProfile::BUILT_IN.join(", ")
        );
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let config = relaysim::live::ServeConfig {
            listen: args.listen,
            seed: args.seed,
            trace: args.trace.clone(),
            ..relaysim::live::ServeConfig::new(profile)
        };
        let relay = relaysim::live::serve(config)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        eprintln!(
            "relaysim serve: {} relay on ws://{} (NIP-11 at http://{}); Ctrl-C stops it",
            args.profile, relay.local_addr, relay.local_addr
        );
        tokio::signal::ctrl_c().await?;
        relay.shutdown().await;
        eprintln!("relaysim serve: stopped");
        if let Some(path) = &args.trace {
            eprintln!("trace written to {}", path.display());
        }
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(Exit::Success)
}
