//! The `relaysim` command: a thin front end over the library (`src/cli/`, one file per
//! subcommand). It is not part of the library, so a library user does not build it.

// Safe code only, but for restoring SIGPIPE's default action (`quiet_on_closed_pipe`).
#![deny(unsafe_code)]

mod cli;

use cli::Exit;
use std::process::ExitCode;

/// mimalloc rather than the system allocator: a world allocates and frees many small objects
/// (events, frames, timers), where it took 28–31 % off the CPU time of many clients (README,
/// Performance).
///
/// Feature `mimalloc` (default); without it, the system allocator, which malloc-intercepting
/// profilers see.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    quiet_on_closed_pipe();
    match cli::run() {
        Ok(Exit::Success) => ExitCode::SUCCESS,
        Ok(Exit::ExpectationFailed) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Rust ignores SIGPIPE, so writing to a closed pipe (`relaysim compare … | head`) makes
/// `println!` panic. A command-line tool should end quietly instead, as the default action does.
#[allow(unsafe_code)]
fn quiet_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in `main`, before any thread exists; setting a signal's
    // disposition to its default has no other precondition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
