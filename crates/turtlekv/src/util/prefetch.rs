//! Cache prefetch hints, for searches whose next load depends on the last
//! one (the skiplist MemTable, a leaf chunk's items) and for loads better
//! started together (a lookup's filter probes). Shared by the MemTable,
//! the tree and the filters, like `key.rs`.

/// How close to the core a prefetched line should come.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Locality {
    /// Every cache level: the line is about to be read (x86 `T0`).
    Nearest,
    /// The second level and beyond: the line is read soon, after other
    /// work (x86 `T1`).
    Near,
}

/// Asks the CPU to fetch the cache line holding `at`. A hint: any address
/// will do, null included; a no-op where the architecture has no hint.
#[inline]
pub(crate) fn prefetch(at: *const u8, locality: Locality) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _MM_HINT_T1, _mm_prefetch};
        match locality {
            Locality::Nearest => _mm_prefetch::<_MM_HINT_T0>(at.cast()),
            Locality::Near => _mm_prefetch::<_MM_HINT_T1>(at.cast()),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (at, locality);
}
