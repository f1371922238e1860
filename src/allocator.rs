//! Settings for mimalloc, the allocator of the `relaysim` binary and of the benches that
//! measure it (feature `mimalloc`).

/// mimalloc's `mi_option_purge_delay` (`mimalloc.h`), which `libmimalloc-sys` leaves unnamed
/// on purpose: options are passed by number.
#[cfg(feature = "mimalloc")]
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long mimalloc keeps freed memory before handing it back to the system, in ms.
///
/// Its default, 10 ms, is shorter than the gap between one world and the next of a sweep, so
/// each world's memory went back to the system and the next world faulted it in again (the
/// kernel zeroing every page): `relaysim run` of 10,000 clients took 28,000 page faults, and
/// `benches/clients.rs`, which runs three such worlds in a row, paid for the memory anew in
/// each (0.4 s of its 4.1 s at 10,000 clients). With a second, the next world reuses it:
/// about 680 faults, and 3.8 s. Memory still goes back a second after it is freed, so a long
/// `serve` does not keep its peak. (Measured on 2 cores of a shared VM; see README,
/// Performance.)
pub const PURGE_DELAY_MS: i64 = 1000;

/// Applies the settings above; call it first thing in `main`, before other threads start.
/// Does nothing without feature `mimalloc`. An environment variable `MIMALLOC_PURGE_DELAY`
/// (or its older name, `MIMALLOC_RESET_DELAY`) still wins, so the setting can be compared
/// with others without a rebuild.
pub fn tune() {
    #[cfg(feature = "mimalloc")]
    if ["MIMALLOC_PURGE_DELAY", "MIMALLOC_RESET_DELAY"]
        .iter()
        .all(|name| std::env::var_os(name).is_none())
    {
        // SAFETY: sets one integer option, before other threads start (mimalloc's option
        // setters are not synchronised).
        unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, PURGE_DELAY_MS as _) };
    }
}
