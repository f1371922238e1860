//! The `relaysim` command: a thin front end over the library.

use relaysim::cli::Exit;
use std::process::ExitCode;

fn main() -> ExitCode {
    match relaysim::cli::run() {
        Ok(Exit::Success) => ExitCode::SUCCESS,
        Ok(Exit::ExpectationFailed) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
