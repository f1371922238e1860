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
    /// Name the peer connecting from ADDR in the trace; bind each client to its own
    /// 127.x.y.z address to tell them apart (their upstream connections leave from it too).
    #[arg(long, value_name = "ADDR=NAME", value_parser = super::serve::parse_label)]
    label: Vec<(std::net::IpAddr, String)>,
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
            labels: args.label.iter().cloned().collect(),
            log: relaysim::live::record::Log::to(|line| eprintln!("{line}")),
            ..relaysim::live::record::RecordConfig::new(
                args.listen,
                &args.upstream,
                args.out.clone(),
            )
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
