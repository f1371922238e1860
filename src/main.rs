//! The `relaysim` command: a thin front end over the library (`src/cli/`, one file per
//! subcommand). It is not part of the library, so a library user does not build it.

mod cli;

use cli::Exit;
use std::process::ExitCode;

fn main() -> ExitCode {
    match cli::run() {
        Ok(Exit::Success) => ExitCode::SUCCESS,
        Ok(Exit::ExpectationFailed) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
