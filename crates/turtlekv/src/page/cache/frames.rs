//! Page-sized frames for the page cache's copies of blocks read from disk.
//!
//! From the allocator, cached blocks are 4 KiB chunks spread over the
//! arenas of the threads that read them. When the cache shrinks (a
//! MemTable grows, a checkpoint needs room), the evicted blocks' memory
//! stays in those arenas: freed chunks of 4 KiB plus a header rarely hold
//! a whole page the allocator could return, so the process keeps it, and
//! other threads cannot reuse it. Frames instead are whole pages of big
//! mappings: a freed frame is kept for the next block while few are free,
//! and beyond that handed back to the kernel (`MADV_DONTNEED`) and reused
//! later at the same address. The cache's resident memory then follows its
//! capacity down as well as up.

use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::mem::{Mapping, page_bytes};

/// Bytes per frame: one block of a page file (`page::codec`), and one
/// page of memory where the kernel's pages are that size.
pub(crate) const FRAME_BYTES: usize = 4096;
/// Frames per mapping: 2 MiB each, few enough mappings for any cache.
const CHUNK_FRAMES: usize = 512;
/// Free frames kept resident for the next blocks: a full cache frees one
/// frame per block it reads, so a few are enough to avoid a system call
/// per read; more than this go back to the kernel, in batches.
const WARM_FRAMES_MAX: usize = 256;

/// Where frames come from and go back to.
#[derive(Debug)]
pub(crate) struct FramePool {
    free: Mutex<FreeFrames>,
    /// Frames held by `Bytes` handles now.
    live_frames: AtomicU64,
    /// Frames handed back to the kernel so far.
    released_frames: AtomicU64,
    /// Length of the warm list, read without its lock.
    warm_frames: AtomicUsize,
    /// Whether a frame is a whole page of memory, so releasing one cannot
    /// touch its neighbours.
    can_release: bool,
}

#[derive(Debug, Default)]
struct FreeFrames {
    /// Address space frames are carved from; never unmapped while the
    /// pool lives (every frame holds the pool).
    chunks: Vec<Mapping>,
    /// Frames of the newest chunk not handed out yet.
    next_in_chunk: usize,
    /// Freed frames still resident.
    warm: Vec<FramePtr>,
    /// Freed frames the kernel has taken back: their addresses stay ours,
    /// and touching them again brings in zeroed pages.
    cold: Vec<FramePtr>,
}

/// A frame's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct FramePtr(NonNull<u8>);

// SAFETY: a frame is plain memory, owned by whoever took it from the pool.
unsafe impl Send for FramePtr {}

/// Counters of a pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FrameCounts {
    /// Frames held by handles.
    pub live_frames: u64,
    /// Free frames still resident.
    pub warm_frames: u64,
    /// Frames handed back to the kernel so far.
    pub released_frames: u64,
}

impl FramePool {
    pub fn new() -> Arc<FramePool> {
        Arc::new(FramePool {
            free: Mutex::new(FreeFrames::default()),
            live_frames: AtomicU64::new(0),
            released_frames: AtomicU64::new(0),
            warm_frames: AtomicUsize::new(0),
            can_release: page_bytes() == FRAME_BYTES,
        })
    }

    /// A copy of `bytes` (at most [`FRAME_BYTES`]) in a frame, which goes
    /// back to this pool when the last handle is dropped.
    pub fn copy(self: &Arc<Self>, bytes: &[u8]) -> Bytes {
        assert!(bytes.len() <= FRAME_BYTES, "a block fits a frame");
        let ptr = self.take();
        // SAFETY: the frame is FRAME_BYTES writable bytes that only this
        // call refers to, so it cannot overlap `bytes`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.0.as_ptr(), bytes.len()) };
        self.live_frames.fetch_add(1, Relaxed);
        Bytes::from_owner(Frame {
            ptr,
            len_bytes: bytes.len(),
            pool: self.clone(),
        })
    }

    pub fn counts(&self) -> FrameCounts {
        FrameCounts {
            live_frames: self.live_frames.load(Relaxed),
            warm_frames: self.warm_frames.load(Relaxed) as u64,
            released_frames: self.released_frames.load(Relaxed),
        }
    }

    /// A free frame: a resident one if there is one, else one whose
    /// memory the kernel took back, else a new one.
    fn take(&self) -> FramePtr {
        let mut free = self.free.lock();
        if let Some(ptr) = free.warm.pop() {
            self.warm_frames.store(free.warm.len(), Relaxed);
            return ptr;
        }
        if let Some(ptr) = free.cold.pop() {
            return ptr;
        }
        if free.chunks.is_empty() || free.next_in_chunk == CHUNK_FRAMES {
            free.chunks.push(Mapping::new(CHUNK_FRAMES * FRAME_BYTES));
            free.next_in_chunk = 0;
        }
        let base = free.chunks.last().expect("a chunk was just made").base();
        // SAFETY: the offset is within the chunk, which is CHUNK_FRAMES
        // frames long.
        let ptr = unsafe { base.add(free.next_in_chunk * FRAME_BYTES) };
        free.next_in_chunk += 1;
        FramePtr(ptr)
    }

    /// Takes back a frame no handle refers to any more. Its memory stays
    /// resident until [`FramePool::release_excess`]: frames are dropped
    /// where the cache evicts, under its locks, and giving memory back
    /// takes a system call per run of frames (about 4 µs each here).
    fn give_back(&self, ptr: FramePtr) {
        self.live_frames.fetch_sub(1, Relaxed);
        let mut free = self.free.lock();
        free.warm.push(ptr);
        self.warm_frames.store(free.warm.len(), Relaxed);
    }

    /// Hands free frames beyond the few kept for the next reads back to
    /// the kernel. Cheap when there are none; call it holding no lock that
    /// readers need.
    pub fn release_excess(&self) {
        if !self.can_release || self.warm_frames.load(Relaxed) <= 2 * WARM_FRAMES_MAX {
            return;
        }
        let mut excess = {
            let mut free = self.free.lock();
            // The oldest go; the newest are likeliest in the CPU's caches.
            let excess_frames = free.warm.len().saturating_sub(WARM_FRAMES_MAX);
            let excess: Vec<FramePtr> = free.warm.drain(..excess_frames).collect();
            self.warm_frames.store(free.warm.len(), Relaxed);
            excess
        };
        // Outside the lock, so reads can take frames meanwhile.
        for (first, count) in contiguous_runs(&mut excess) {
            release(first, count);
        }
        self.released_frames.fetch_add(excess.len() as u64, Relaxed);
        self.free.lock().cold.extend(excess);
    }
}

/// Groups frames into runs of adjacent addresses: (first, frames).
fn contiguous_runs(frames: &mut [FramePtr]) -> Vec<(FramePtr, usize)> {
    frames.sort_unstable();
    let mut runs: Vec<(FramePtr, usize)> = Vec::new();
    for &frame in frames.iter() {
        match runs.last_mut() {
            Some((first, count))
                if first.0.as_ptr() as usize + *count * FRAME_BYTES
                    == frame.0.as_ptr() as usize =>
            {
                *count += 1;
            }
            _ => runs.push((frame, 1)),
        }
    }
    runs
}

/// Hands the memory of `count` adjacent frames back to the kernel, keeping
/// the addresses.
fn release(first: FramePtr, count: usize) {
    // SAFETY: the range is whole pages of a mapping this pool owns, and no
    // handle refers to them; after MADV_DONTNEED they read as zeroes.
    let rc = unsafe {
        libc::madvise(
            first.0.as_ptr().cast(),
            count * FRAME_BYTES,
            libc::MADV_DONTNEED,
        )
    };
    // A refusal only leaves the memory resident.
    debug_assert_eq!(rc, 0, "madvise of frames we own");
}

/// One frame lent to `Bytes`; its holders only read it.
struct Frame {
    ptr: FramePtr,
    len_bytes: usize,
    pool: Arc<FramePool>,
}

impl AsRef<[u8]> for Frame {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the frame's first `len_bytes` were written in `copy` and
        // are not written again while this handle lives.
        unsafe { std::slice::from_raw_parts(self.ptr.0.as_ptr(), self.len_bytes) }
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        self.pool.give_back(self.ptr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_read_back_and_frames_are_reused() {
        let pool = FramePool::new();
        let a = pool.copy(b"first block");
        let b = pool.copy(&[7u8; FRAME_BYTES]);
        assert_eq!(&a[..], b"first block");
        assert!(b.iter().all(|&x| x == 7));
        assert_eq!(pool.counts().live_frames, 2);
        let address = a.as_ptr();
        drop(a);
        assert_eq!(pool.counts().live_frames, 1);
        assert_eq!(pool.counts().warm_frames, 1);
        let c = pool.copy(b"second");
        assert_eq!(c.as_ptr(), address, "the freed frame is reused");
        assert_eq!(&c[..], b"second");
        assert_eq!(&b[..4], &[7u8; 4]);
    }

    #[test]
    fn runs_group_adjacent_frames() {
        let base = NonNull::new(0x10_0000 as *mut u8).unwrap();
        // SAFETY: only addresses are computed, never dereferenced.
        let at = |i: usize| FramePtr(unsafe { base.add(i * FRAME_BYTES) });
        let runs = contiguous_runs(&mut [at(5), at(1), at(2), at(7), at(6), at(0)]);
        assert_eq!(runs, vec![(at(0), 3), (at(5), 3)]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn frames_beyond_the_warm_few_leave_the_resident_set() {
        let pool = FramePool::new();
        if !pool.can_release {
            return;
        }
        let frames = 64 * CHUNK_FRAMES; // 128 MiB
        let held: Vec<Bytes> = (0..frames)
            .map(|i| pool.copy(&[(i % 251) as u8 + 1; FRAME_BYTES]))
            .collect();
        let before = crate::mem::process_status_bytes("RssAnon:");
        drop(held);
        assert_eq!(
            pool.counts().warm_frames,
            frames as u64,
            "parked until released"
        );
        pool.release_excess();
        let after = crate::mem::process_status_bytes("RssAnon:");
        let counts = pool.counts();
        assert_eq!(counts.live_frames, 0);
        assert_eq!(counts.warm_frames, WARM_FRAMES_MAX as u64);
        assert_eq!(
            counts.released_frames + counts.warm_frames,
            frames as u64,
            "every freed frame is kept warm or released"
        );
        assert!(
            after + (64 << 20) <= before,
            "resident anonymous memory {before} B with the frames held, {after} B after"
        );
        // Released frames come back zeroed and usable.
        let again: Vec<Bytes> = (0..frames).map(|_| pool.copy(b"again")).collect();
        assert!(again.iter().all(|b| &b[..] == b"again"));
    }
}
