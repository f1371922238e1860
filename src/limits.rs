//! Upper bounds on every number relaysim accepts from a file or a flag, and on the files
//! themselves. Each is checked when the input is read or validated, so absurd input gets a
//! clear error (exit 2, with the bound) instead of a run that grows without end or fails late.
//! `docs/scenario-reference.md` lists them for users.

use std::io::Read;
use std::path::Path;

/// Runs of one scenario (`runs`, `--runs`).
pub const MAX_RUNS: u32 = 100_000;
/// A byte size anywhere in a scenario (`bytes`, `chunk_bytes`, limits): 4 GiB.
pub const MAX_SIZE: usize = 4 << 30;
/// Chunks of one stream workload (and of a stream the simulated server agrees to write).
pub const MAX_STREAM_CHUNKS: u64 = 1_000_000;
/// Bytes of one stream chunk.
pub const MAX_CHUNK_BYTES: usize = 1 << 20;
/// Bytes of one request, result or upload payload: 1 GiB.
pub const MAX_PAYLOAD_BYTES: usize = 1 << 30;
/// Calls in one run, over every workload and client.
pub const MAX_CALLS: u64 = 1_000_000;
/// Cells of one sweep (the product of its axes' lengths).
pub const MAX_SWEEP_CELLS: u64 = 10_000;
/// Seeds per sweep cell.
pub const MAX_SWEEP_SEEDS: u32 = 10_000;
/// Runs of one sweep: cells × seeds.
pub const MAX_SWEEP_RUNS: u64 = 1_000_000;
/// Copies one trace `link` line may give a message (a duplicated event has at most 100
/// extra copies).
pub const MAX_TRACE_COPIES: usize = 101;
/// A scenario or sweep file.
pub const MAX_SPEC_FILE_BYTES: u64 = 1 << 20;
/// A trace file.
pub const MAX_TRACE_FILE_BYTES: u64 = 1 << 30;

/// Why an input file was refused.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Not a regular file (a directory, a device such as `/dev/zero`, a pipe).
    #[error("not a regular file")]
    NotRegular,
    /// Larger than its kind of file may be.
    #[error("{size} bytes; files of this kind are refused above {max} bytes")]
    TooLarge {
        /// Its size (at least; a growing file is not read past the bound).
        size: u64,
        /// The bound.
        max: u64,
    },
    /// Not UTF-8 text: the first byte that is not, by line and column (both from 1).
    #[error("not UTF-8 text (line {line}, column {column})")]
    NotText {
        /// Its line.
        line: usize,
        /// Its column, in characters.
        column: usize,
    },
    /// The file could not be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Opens the file at `path` for reading, refusing anything but a regular file of at most
/// `max` bytes; what it gives never runs past `max + 1` bytes, whatever the file claims or
/// becomes meanwhile (the caller refuses the extra byte).
pub fn open_regular(
    path: &Path,
    max: u64,
) -> Result<std::io::BufReader<std::io::Take<std::fs::File>>, InputError> {
    // Looked at before it is opened: opening a named pipe blocks until someone writes to it.
    if !std::fs::metadata(path)?.is_file() {
        return Err(InputError::NotRegular);
    }
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(InputError::NotRegular);
    }
    if meta.len() > max {
        return Err(InputError::TooLarge {
            size: meta.len(),
            max,
        });
    }
    Ok(std::io::BufReader::new(file.take(max + 1)))
}

/// Reads the text file at `path`, refusing anything but a regular file of at most `max` bytes.
/// Never reads more than `max + 1` bytes, whatever the file claims or becomes meanwhile.
pub fn read_text(path: &Path, max: u64) -> Result<String, InputError> {
    let mut bytes = Vec::new();
    open_regular(path, max)?.read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(InputError::TooLarge {
            size: bytes.len() as u64,
            max,
        });
    }
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let good = std::str::from_utf8(good).unwrap_or_default();
        let line = good.matches('\n').count() + 1;
        let column = good.rsplit('\n').next().unwrap_or_default().chars().count() + 1;
        InputError::NotText { line, column }
    })
}

/// The same, as an I/O error (for error types that carry one).
pub fn read_text_io(path: &Path, max: u64) -> std::io::Result<String> {
    read_text(path, max).map_err(|e| match e {
        InputError::Io(e) => e,
        other => std::io::Error::new(std::io::ErrorKind::InvalidData, other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_directories_and_oversized_files_are_refused_before_reading() {
        assert!(matches!(
            read_text(Path::new("/dev/zero"), 10),
            Err(InputError::NotRegular)
        ));
        assert!(matches!(
            read_text(Path::new("/tmp"), 10),
            Err(InputError::NotRegular)
        ));
        let path = std::env::temp_dir().join(format!("relaysim-limits-{}", std::process::id()));
        std::fs::write(&path, "x".repeat(11)).unwrap();
        assert!(matches!(
            read_text(&path, 10),
            Err(InputError::TooLarge { size: 11, max: 10 })
        ));
        assert_eq!(read_text(&path, 11).unwrap().len(), 11);
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn text_that_is_not_utf8_is_refused_with_its_place() {
        let path = std::env::temp_dir().join(format!("relaysim-utf8-{}", std::process::id()));
        std::fs::write(&path, b"name = \"x\"\nseed = \xff1\n").unwrap();
        assert!(matches!(
            read_text(&path, 100),
            Err(InputError::NotText { line: 2, column: 8 })
        ));
        let _ = std::fs::remove_file(path);
    }

    #[test]
    #[cfg(unix)]
    fn a_named_pipe_is_refused_without_waiting_for_a_writer() {
        let path = std::env::temp_dir().join(format!("relaysim-fifo-{}", std::process::id()));
        let made = std::process::Command::new("mkfifo").arg(&path).status();
        if !made.is_ok_and(|s| s.success()) {
            return; // no mkfifo here: nothing to check
        }
        // Opening it would block this test for ever; refusing it returns at once.
        assert!(matches!(read_text(&path, 10), Err(InputError::NotRegular)));
        let _ = std::fs::remove_file(path);
    }
}
