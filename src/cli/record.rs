//! `relaysim record`: a recording proxy in front of a real relay, optionally around a command
//! (your SDK's peers) that runs through it.

use super::command::{check_command, report_outcomes, run_command, CommandSpec};
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
    /// A command to run through the proxy (after `--`); the recording stops when it exits.
    /// It gets RELAYSIM_RELAYS (the proxy's ws:// URL) and RELAYSIM_OUTCOMES (a file for one
    /// JSON line per call, as for `serve`); its calls' outcomes are printed with why each
    /// failed call failed, and written into the trace.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

pub(super) fn record(args: RecordArgs) -> Result<Exit> {
    if !args.upstream.starts_with("ws://") {
        bail!(
            "--upstream must be a ws:// address, got {:?}",
            args.upstream
        );
    }
    // Before anything listens: a command that cannot start says so, with the fix.
    if !args.command.is_empty() {
        check_command(&args.command)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let command = runtime.block_on(async {
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
        let url = format!("ws://{}", proxy.local_addr);
        let command = if args.command.is_empty() {
            eprintln!(
                "relaysim record: {url} -> {}, writing {}; Ctrl-C stops and closes the trace",
                args.upstream,
                args.out.display()
            );
            tokio::signal::ctrl_c()
                .await
                .map(|_| None)
                .map_err(anyhow::Error::from)
        } else {
            eprintln!(
                "relaysim record: {url} -> {}, writing {}",
                args.upstream,
                args.out.display()
            );
            let spec = CommandSpec {
                command: &args.command,
                out: None,
                stdout_to_stderr: false,
            };
            run_command(&spec, &[url], proxy.started_unix_us)
                .await
                .map(Some)
        };
        // Closed whatever happened to the command, so the trace is whole.
        let lines = proxy.finish().await?;
        eprintln!(
            "relaysim record: {lines} lines written to {}",
            args.out.display()
        );
        Ok::<_, anyhow::Error>(command)
    })?;
    let Some(run) = command? else {
        return Ok(Exit::Success);
    };
    // What the relay did, read back from the recording: refusals in its own words, events it
    // never answered, tokens written again.
    let trace = relaysim::trace::Trace::from_file(&args.out)
        .with_context(|| format!("cannot read the recording {}", args.out.display()))?;
    let disturbances = relaysim::replay::traffic::traffic(&trace).disturbances();
    drop(trace);
    let (text, all_completed) = report_outcomes(&run, &disturbances, Some(&args.out))?;
    print!("{text}");
    eprintln!("trace written to {}", args.out.display());
    Ok(if all_completed {
        Exit::Success
    } else {
        Exit::ExpectationFailed
    })
}
