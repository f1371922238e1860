//! `relaysim completions` and `relaysim man`: shell completions (clap_complete) and man pages
//! (clap_mangen), generated from the same definitions the parser uses, so they cannot drift.

use super::{Cli, Exit};
use anyhow::{Context as _, Result};
use clap::CommandFactory;

#[derive(clap::Args, Debug)]
pub(super) struct CompletionsArgs {
    /// The shell.
    shell: clap_complete::Shell,
}

#[derive(clap::Args, Debug)]
pub(super) struct ManArgs {
    /// Write relaysim.1 and one page per subcommand (relaysim-run.1, ...) into this
    /// directory; without it, print relaysim.1.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

pub(super) fn completions(args: CompletionsArgs) -> Result<Exit> {
    let mut command = Cli::command();
    clap_complete::generate(args.shell, &mut command, "relaysim", &mut std::io::stdout());
    Ok(Exit::Success)
}

pub(super) fn man(args: ManArgs) -> Result<Exit> {
    let command = Cli::command();
    match &args.out {
        None => {
            clap_mangen::Man::new(command).render(&mut std::io::stdout())?;
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the directory {}", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .with_context(|| format!("cannot write man pages to {}", dir.display()))?;
            println!(
                "man pages written to {} (man -l {}/relaysim.1)",
                dir.display(),
                dir.display()
            );
        }
    }
    Ok(Exit::Success)
}
