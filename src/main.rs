//! The `relaysim` command: a thin front end over the library.

fn main() -> anyhow::Result<()> {
    relaysim_cli::run()
}

mod relaysim_cli {
    use clap::Parser;

    /// Deterministic record-and-replay simulator of Nostr relays carrying ContextVM traffic.
    #[derive(Parser, Debug)]
    #[command(version, about)]
    struct Cli {}

    pub fn run() -> anyhow::Result<()> {
        let _ = Cli::parse();
        Ok(())
    }
}
