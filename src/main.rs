//! The `relaysim` command: a thin front end over the library.

use std::process::ExitCode;

fn main() -> ExitCode {
    match relaysim::cli::run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
