//! Memory mapped straight from the kernel (`mmap`), for large buffers that
//! should go back to it when dropped: MemTable arena chunks, and copies of
//! whole pages in the page cache. From the allocator, buffers of a few
//! MiB freed at random times stay in its arenas as free memory the process
//! keeps (raising peak RSS by hundreds of MiB in measurements). A mapping
//! made by a [`MappingPool`] goes back to that pool instead, while the
//! pool's budget has room for it.

use std::ptr::NonNull;
use std::sync::{Arc, Weak};

use bytes::Bytes;

use super::mapping_pool::MappingPool;

/// One anonymous private mapping. Its memory is initialised from the start:
/// the kernel zeroes a new mapping's pages, and a reused one holds what its
/// last user wrote.
#[derive(Debug)]
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len_bytes: usize,
    /// The pool it goes back to when dropped, if any.
    home: Option<Weak<MappingPool>>,
}

// SAFETY: a mapping is plain memory; its users synchronise access to what
// they write in it.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len_bytes` (a multiple of the page size for no waste), zeroed.
    pub fn new(len_bytes: usize) -> Mapping {
        // SAFETY: an anonymous private mapping with no address hint has no
        // preconditions; failure is checked below.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len_bytes.max(1),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        // Out of address space is an allocation failure like any other.
        if addr == libc::MAP_FAILED {
            let layout = std::alloc::Layout::from_size_align(len_bytes.max(1), 8)
                .expect("a mapping's layout is valid");
            std::alloc::handle_alloc_error(layout);
        }
        Mapping {
            base: NonNull::new(addr.cast()).expect("mmap does not return null on success"),
            len_bytes,
            home: None,
        }
    }

    pub fn base(&self) -> NonNull<u8> {
        self.base
    }

    pub fn len_bytes(&self) -> usize {
        self.len_bytes
    }

    /// The memory the mapping holds: its length rounded up to whole pages.
    pub fn mapped_bytes(&self) -> usize {
        self.len_bytes.max(1).next_multiple_of(page_bytes())
    }

    /// This mapping, to be offered to `pool` when dropped.
    pub(super) fn returning_to(mut self, pool: Weak<MappingPool>) -> Mapping {
        self.home = Some(pool);
        self
    }

    /// The same memory, `len_bytes` long: shrinking unmaps the pages past
    /// the new end, growing may move the mapping and adds zeroed pages.
    /// The contents up to the shorter length stay. Pages it keeps are not
    /// faulted in or zeroed again, which is what reusing a mapping saves.
    #[cfg(target_os = "linux")]
    pub(super) fn resized(self, len_bytes: usize) -> Mapping {
        let mut old = std::mem::ManuallyDrop::new(self);
        let home = old.home.take();
        // SAFETY: `base..base + len_bytes` is exactly one mapping made in
        // `new`, owned by value here, so nothing else refers to it; on
        // failure the kernel leaves it as it was.
        let addr = unsafe {
            libc::mremap(
                old.base.as_ptr().cast(),
                old.len_bytes.max(1),
                len_bytes.max(1),
                libc::MREMAP_MAYMOVE,
            )
        };
        if addr == libc::MAP_FAILED {
            drop(std::mem::ManuallyDrop::into_inner(old));
            let mut fresh = Mapping::new(len_bytes);
            fresh.home = home;
            return fresh;
        }
        Mapping {
            base: NonNull::new(addr.cast()).expect("mremap does not return null on success"),
            len_bytes,
            home,
        }
    }

    /// Without `mremap`, a mapping is reused only at its own length.
    #[cfg(not(target_os = "linux"))]
    pub(super) fn resized(self, len_bytes: usize) -> Mapping {
        if self.len_bytes == len_bytes {
            self
        } else {
            Mapping::new(len_bytes)
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Some(pool) = self.home.take().and_then(|home| home.upgrade()) {
            // The memory moves to a mapping the pool owns (or unmaps, if
            // the pool has no room for it).
            pool.keep(Mapping {
                base: self.base,
                len_bytes: self.len_bytes,
                home: None,
            });
            return;
        }
        // SAFETY: `base..base + len_bytes` is exactly one mapping made in
        // `new`, and nothing refers to it once its last owner is dropped.
        let rc = unsafe { libc::munmap(self.base.as_ptr().cast(), self.len_bytes.max(1)) };
        debug_assert_eq!(rc, 0, "munmap of a mapping we made");
    }
}

/// The kernel's page size.
pub(crate) fn page_bytes() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).unwrap_or(4096)
}

/// Lends a mapping's bytes to `Bytes`; its holders must not write to it.
struct MappingView(Arc<Mapping>);

impl AsRef<[u8]> for MappingView {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the mapping is initialised and no longer written once
        // viewed; it lives as long as this view.
        unsafe { std::slice::from_raw_parts(self.0.base.as_ptr(), self.0.len_bytes) }
    }
}

/// `Bytes` over a whole mapping that will not be written again.
pub(crate) fn mapping_bytes(mapping: Arc<Mapping>) -> Bytes {
    Bytes::from_owner(MappingView(mapping))
}
