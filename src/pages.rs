//! Handing back to the system the memory of a large buffer that is read once, front to back,
//! while it is still being read.
//!
//! A 1 GiB CEP-22 transfer passes through buffers that are each read once in order: the
//! response's largest string while it is serialised, the serialised text while the sender cuts
//! it into chunks. Each is a single allocation, freed only when its last byte has been read,
//! while the next buffer already holds most of the payload: two whole copies at once, which
//! is what bounded a simulated download at about 2× its payload. [`ReadOnce`] returns the
//! whole pages of the part already read (`madvise(MADV_DONTNEED)`), so the memory in use is
//! about one copy however large the transfer.
//!
//! Only on Linux, where the pages of private anonymous memory (all a heap is made of) read as
//! zeros once handed back, so the buffer stays memory the program owns: its released bytes
//! are zeros, which the reader never looks at again. Elsewhere nothing is handed back early.

/// Bytes read past the last release before [`ReadOnce::read_up_to`] releases again: one
/// system call per MiB read, not one per chunk.
const BATCH: usize = 1 << 20;

/// The front of a buffer read once, handed back to the system a whole page at a time as the
/// reading advances.
///
/// ```
/// use relaysim::pages::ReadOnce;
///
/// let mut buffer = vec![7u8; 8 << 20];
/// let mut front = ReadOnce::default();
/// for upto in (1 << 20..=buffer.len()).step_by(1 << 20) {
///     // ... read buffer[..upto] ...
///     front.read_up_to(&mut buffer, upto);
/// }
/// // Released bytes read as zeros where pages were handed back; the rest is untouched.
/// assert!(buffer.iter().all(|&b| b == 0 || b == 7));
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReadOnce {
    /// Offset into the buffer below which everything has been released.
    released: usize,
}

impl ReadOnce {
    /// Says that `buffer[..read]` will never be read again: the whole pages inside it go back
    /// to the system once a batch of them has been read (and may read as zeros from then on).
    /// Always the same buffer, which must not move (grow) between calls.
    pub fn read_up_to(&mut self, buffer: &mut [u8], read: usize) {
        let read = read.min(buffer.len());
        if read < self.released + BATCH {
            return;
        }
        // From where the last release ended, so the page it stopped short of goes this time.
        self.released += release(&mut buffer[self.released..read]);
    }
}

/// Hands back the whole pages inside `bytes`; the bytes of the pages it only partly covers are
/// left alone. Those of the pages handed back read as zeros afterwards (on Linux; elsewhere
/// nothing changes). Returns how far into `bytes` the last page handed back ends (0 if none).
pub fn release(bytes: &mut [u8]) -> usize {
    #[cfg(target_os = "linux")]
    {
        let Some(page) = page_size() else {
            return 0;
        };
        let start = bytes.as_mut_ptr() as usize;
        let first = start.next_multiple_of(page);
        let end = (start + bytes.len()) / page * page;
        if first >= end {
            return 0;
        }
        // SAFETY: `[first, end)` lies inside `bytes`, which this call borrows mutably, so no
        // other reference sees it change; it is heap memory (private and anonymous), whose
        // pages read as zeros after MADV_DONTNEED — the same as writing zeros through `bytes`.
        // An error (an unusual mapping) leaves the memory as it was, which is just as correct.
        unsafe {
            let at = bytes.as_mut_ptr().add(first - start);
            libc::madvise(at.cast::<libc::c_void>(), end - first, libc::MADV_DONTNEED);
        }
        end - start
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = bytes;
        0
    }
}

/// The system's page size, where pages can be handed back.
#[cfg(target_os = "linux")]
fn page_size() -> Option<usize> {
    // SAFETY: `sysconf` only reads a value.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).ok().filter(|&s| s > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_zeroes_only_whole_pages_inside_the_slice() {
        let mut buffer = vec![0xabu8; 1 << 20];
        // An unaligned slice: its partial first and last pages must keep their bytes.
        let (from, to) = (1000, (1 << 20) - 1000);
        release(&mut buffer[from..to]);
        assert!(
            buffer[..from].iter().all(|&b| b == 0xab),
            "before the slice"
        );
        assert!(buffer[to..].iter().all(|&b| b == 0xab), "after the slice");
        #[cfg(target_os = "linux")]
        {
            let page = page_size().expect("Linux has pages");
            let base = buffer.as_ptr() as usize;
            let first = (base + from).next_multiple_of(page) - base;
            assert!(
                buffer[from..first].iter().all(|&b| b == 0xab),
                "the page the slice starts inside keeps its bytes"
            );
            assert!(
                buffer[first..first + page].iter().all(|&b| b == 0),
                "a whole page inside the slice went back"
            );
        }
    }

    #[test]
    fn reading_once_releases_in_batches_and_never_past_what_was_read() {
        let mut buffer = vec![1u8; 4 * BATCH];
        let mut front = ReadOnce::default();
        front.read_up_to(&mut buffer, BATCH - 1);
        assert!(buffer.iter().all(|&b| b == 1), "less than a batch read");
        front.read_up_to(&mut buffer, 2 * BATCH + 5);
        assert!(
            buffer[2 * BATCH + 5..].iter().all(|&b| b == 1),
            "nothing past the read part"
        );
        #[cfg(target_os = "linux")]
        {
            // Up to a page short of the end read: the buffer need not start on a page.
            let page = page_size().expect("Linux has pages");
            assert!(buffer[BATCH..2 * BATCH - page].iter().all(|&b| b == 0));
        }
        front.read_up_to(&mut buffer, usize::MAX);
        assert_eq!(
            buffer.len(),
            4 * BATCH,
            "reading past the end is reading to it"
        );
    }
}
