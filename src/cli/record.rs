//! `relaysim record`: a recording proxy in front of a real relay.

use super::Exit;
use anyhow::{bail, Context, Result};

#[derive(clap::Args, Debug)]
pub(super) struct RecordArgs {
    /// The relay to put the proxy in front of (`ws://host:port`).
    #[arg(long)]
    upstream: String,
    /// Where clients connect (loopback by default).
    #[arg(long, default_value = "127.0.0.1:7001")]
    listen: std::net::SocketAddr,
    /// The trace file to write.
    #[arg(long)]
    out: std::path::PathBuf,
}

pub(super) fn record(args: RecordArgs) -> Result<Exit> {
    if !args.upstream.starts_with("ws://") {
        bail!(
            "--upstream must be a ws:// address, got {:?}",
            args.upstream
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let config = relaysim::live::record::RecordConfig {
            listen: args.listen,
            upstream: args.upstream.clone(),
            out: args.out.clone(),
        };
        let proxy = relaysim::live::record::record(config)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        eprintln!(
            "relaysim record: ws://{} -> {}, writing {}; Ctrl-C stops and closes the trace",
            proxy.local_addr,
            args.upstream,
            args.out.display()
        );
        tokio::signal::ctrl_c().await?;
        let lines = proxy.finish().await?;
        eprintln!(
            "relaysim record: {lines} lines written to {}",
            args.out.display()
        );
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(Exit::Success)
}
