//! Memory mapped straight from the kernel (`mmap`), for large buffers that
//! should go back to it when dropped: MemTable arena chunks, and copies of
//! whole pages in the page cache. From the allocator, buffers of a few
//! MiB freed at random times stay in its arenas as free memory the process
//! keeps (raising peak RSS by hundreds of MiB in measurements).

use std::ptr::NonNull;
use std::sync::Arc;

use bytes::Bytes;

/// One anonymous private mapping. Its pages are zeroed by the kernel, so
/// the whole mapping is initialised memory from the start.
#[derive(Debug)]
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len_bytes: usize,
}

// SAFETY: a mapping is plain memory; its users synchronise access to what
// they write in it.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len_bytes` (a multiple of the page size for no waste).
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
        }
    }

    pub fn base(&self) -> NonNull<u8> {
        self.base
    }

    pub fn len_bytes(&self) -> usize {
        self.len_bytes
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base..base + len_bytes` is exactly one mapping made in
        // `new`, and nothing refers to it once its last owner is dropped.
        let rc = unsafe { libc::munmap(self.base.as_ptr().cast(), self.len_bytes.max(1)) };
        debug_assert_eq!(rc, 0, "munmap of a mapping we made");
    }
}

/// Lends a mapping's bytes to `Bytes`; its holders must not write to it.
struct MappingView(Arc<Mapping>);

impl AsRef<[u8]> for MappingView {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the mapping is initialised (zeroed pages) and no longer
        // written once viewed; it lives as long as this view.
        unsafe { std::slice::from_raw_parts(self.0.base.as_ptr(), self.0.len_bytes) }
    }
}

/// `Bytes` over a whole mapping that will not be written again.
pub(crate) fn mapping_bytes(mapping: Arc<Mapping>) -> Bytes {
    Bytes::from_owner(MappingView(mapping))
}

/// A copy of `bytes` in a mapping of its own.
pub(crate) fn mapped_copy(bytes: &[u8]) -> Bytes {
    let mapping = Mapping::new(bytes.len());
    // SAFETY: the mapping is `bytes.len()` writable bytes, new and not
    // shared yet, so it cannot overlap `bytes`.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), mapping.base.as_ptr(), bytes.len());
    }
    mapping_bytes(Arc::new(mapping))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_copy_holds_the_bytes() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let copy = mapped_copy(&data);
        assert_eq!(&copy[..], &data[..]);
        assert_eq!(&copy.slice(1000..1010)[..], &data[1000..1010]);
        assert!(mapped_copy(&[]).is_empty());
    }
}
