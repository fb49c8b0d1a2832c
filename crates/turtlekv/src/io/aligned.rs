//! Heap buffers aligned for `O_DIRECT`.

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Alignment of buffer addresses, file offsets and lengths for `O_DIRECT`.
/// 4096 satisfies both 512-byte and 4 KiB logical-sector devices.
pub const DIRECT_IO_ALIGN_BYTES: usize = 4096;

/// A zero-initialised byte buffer whose address is aligned to
/// [`DIRECT_IO_ALIGN_BYTES`], usable for `O_DIRECT` reads and writes.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    layout: Layout,
}

// SAFETY: the buffer owns its allocation exclusively, like a `Vec<u8>`.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`, like a `Vec<u8>`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `len` zero bytes. The allocation is rounded up to a whole number of
    /// alignment units (at least one), so `len == 0` is fine.
    pub fn zeroed(len: usize) -> Self {
        let capacity = len
            .div_ceil(DIRECT_IO_ALIGN_BYTES)
            .max(1)
            .saturating_mul(DIRECT_IO_ALIGN_BYTES);
        let layout = Layout::from_size_align(capacity, DIRECT_IO_ALIGN_BYTES)
            .expect("buffer size overflows isize");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        AlignedBuf { ptr, len, layout }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` points to `layout.size() >= len` initialised bytes
        // owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with exactly this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .finish()
    }
}

/// `true` when `buf`, `offset` and the length fit `O_DIRECT`'s rules.
#[cfg(any(test, feature = "sim"))]
pub(crate) fn is_direct_aligned(buf: &[u8], offset: u64) -> bool {
    let align = DIRECT_IO_ALIGN_BYTES;
    (buf.as_ptr() as usize).is_multiple_of(align)
        && buf.len().is_multiple_of(align)
        && offset.is_multiple_of(align as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_zeroed_and_writable() {
        for len in [0, 1, 4095, 4096, 4097, 3 * 4096] {
            let mut buf = AlignedBuf::zeroed(len);
            assert_eq!(buf.len(), len);
            assert!(buf.iter().all(|&b| b == 0));
            assert_eq!(buf.as_ptr() as usize % DIRECT_IO_ALIGN_BYTES, 0);
            buf.fill(7);
            assert!(buf.iter().all(|&b| b == 7));
        }
        assert!(is_direct_aligned(&AlignedBuf::zeroed(8192), 4096));
        assert!(!is_direct_aligned(&AlignedBuf::zeroed(8192)[1..4097], 0));
        assert!(!is_direct_aligned(&AlignedBuf::zeroed(100), 0));
    }
}
