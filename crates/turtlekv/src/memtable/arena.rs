//! Memory for one MemTable's entries: large chunks mapped straight from the
//! kernel, carved by one writer, and returned whole when the MemTable goes.
//!
//! Why not the allocator: a MemTable's entries are allocated by the writer
//! and all freed at once by the checkpoint thread. Millions of small
//! cross-thread frees contend on the allocator's locks with the writers and
//! leave the freed memory in arenas the page cache's threads cannot reuse.
//! Chunks from `mmap` cost one call each way and give the memory back to the
//! kernel when the MemTable is dropped, or to the page cache's pool of
//! mappings (`io::mapping_pool`) while the cache has room for it; the next
//! MemTable's chunks then come from there, already faulted in.

use std::ptr::NonNull;
use std::sync::Arc;

use bytes::Bytes;

use crate::mem::{Mapping as Chunk, MappingPool, mapping_bytes, page_bytes};

/// Alignment of every allocation: nodes hold `u64`s and pointers.
pub(crate) const ALIGN_BYTES: usize = 8;

/// The entry chunk size for a MemTable of `capacity_bytes`: about 64
/// chunks per MemTable, so few map calls and little unused tail.
pub(crate) fn entry_chunk_bytes(capacity_bytes: u64) -> usize {
    (capacity_bytes / 64).clamp(64 << 10, 1 << 20) as usize
}

/// A bump allocator over chunks. Only one thread allocates at a time (the
/// caller holds a lock); what it hands out stays valid until the arena is
/// dropped.
#[derive(Debug)]
pub(crate) struct Arena {
    chunks: Vec<Arc<Chunk>>,
    /// The chunk small allocations are carved from.
    current: Option<usize>,
    /// Next free byte in the current chunk.
    used_bytes: usize,
    chunk_bytes: usize,
    mapped_bytes: u64,
    /// Bytes handed out, plus the tails of chunks left behind.
    charged_bytes: u64,
    /// Where chunks come from and go back to, if not straight the kernel.
    pool: Option<Arc<MappingPool>>,
}

/// Where an allocation is: its address and the chunk it is in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place {
    pub ptr: NonNull<u8>,
    pub chunk: u32,
}

impl Arena {
    /// An arena that maps chunks of `chunk_bytes` (rounded up to pages);
    /// allocations over a quarter of that get a chunk of their own. With a
    /// pool, chunks are taken from it and go back to it.
    pub fn new(chunk_bytes: usize, pool: Option<Arc<MappingPool>>) -> Self {
        Arena {
            chunks: Vec::new(),
            current: None,
            used_bytes: 0,
            chunk_bytes: chunk_bytes.next_multiple_of(page_bytes()),
            mapped_bytes: 0,
            charged_bytes: 0,
            pool,
        }
    }

    /// `len_bytes` of memory aligned to `ALIGN_BYTES`. Not zeroed: a chunk
    /// from the pool holds what its last user wrote.
    pub fn alloc(&mut self, len_bytes: usize) -> Place {
        let len_bytes = len_bytes.next_multiple_of(ALIGN_BYTES);
        if len_bytes > self.chunk_bytes / 4 {
            // A large entry would leave most of a shared chunk unused.
            let index = self.map(len_bytes.next_multiple_of(page_bytes()));
            self.charged_bytes += len_bytes as u64;
            return self.place(index, 0);
        }
        let index = match self.current {
            Some(i) if self.chunks[i].len_bytes() - self.used_bytes >= len_bytes => i,
            left => {
                if let Some(i) = left {
                    self.charged_bytes += (self.chunks[i].len_bytes() - self.used_bytes) as u64;
                }
                let i = self.map(self.chunk_bytes);
                self.current = Some(i);
                self.used_bytes = 0;
                i
            }
        };
        let place = self.place(index, self.used_bytes);
        self.used_bytes += len_bytes;
        self.charged_bytes += len_bytes as u64;
        place
    }

    fn map(&mut self, len_bytes: usize) -> usize {
        let chunk = match &self.pool {
            Some(pool) => pool.map(len_bytes),
            None => Chunk::new(len_bytes),
        };
        self.chunks.push(Arc::new(chunk));
        self.mapped_bytes += len_bytes as u64;
        self.chunks.len() - 1
    }

    fn place(&self, index: usize, offset: usize) -> Place {
        let chunk = &self.chunks[index];
        debug_assert!(offset < chunk.len_bytes());
        Place {
            // SAFETY: callers keep `offset` plus the allocation's length
            // within the chunk.
            ptr: unsafe { chunk.base().add(offset) },
            chunk: u32::try_from(index).expect("fewer than 2^32 chunks"),
        }
    }

    /// What the arena costs: bytes handed out, and chunk tails that will
    /// stay unused. The unused end of the current chunk is not counted
    /// (its pages are not touched until used).
    pub fn charged_bytes(&self) -> u64 {
        self.charged_bytes
    }

    /// Bytes mapped so far.
    #[cfg(test)]
    pub fn mapped_bytes(&self) -> u64 {
        self.mapped_bytes
    }

    /// Every chunk as `Bytes`, for zero-copy reads once nothing will be
    /// written to the arena again.
    pub fn share(&self) -> Vec<Bytes> {
        self.chunks
            .iter()
            .map(|c| mapping_bytes(c.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_zeroed_and_disjoint() {
        let mut arena = Arena::new(4096, None);
        let mut places = Vec::new();
        for len in [1, 7, 8, 100, 3000, 5000, 13] {
            let place = arena.alloc(len);
            assert_eq!(place.ptr.as_ptr() as usize % ALIGN_BYTES, 0);
            // SAFETY: `len` bytes were just allocated at `place`.
            let bytes = unsafe { std::slice::from_raw_parts_mut(place.ptr.as_ptr(), len) };
            assert!(bytes.iter().all(|&b| b == 0));
            bytes.fill(len as u8);
            places.push((place, len));
        }
        for (place, len) in &places {
            // SAFETY: as above; nothing else wrote there.
            let bytes = unsafe { std::slice::from_raw_parts(place.ptr.as_ptr(), *len) };
            assert!(bytes.iter().all(|&b| b == *len as u8));
        }
        // The small ones share a chunk; 3000 and 5000 bytes are over a
        // quarter of a chunk and get their own, rounded up to pages.
        assert_eq!(arena.mapped_bytes(), 4096 + 4096 + 8192);
        assert_eq!(arena.charged_bytes(), 8 + 8 + 8 + 104 + 16 + 3000 + 5000);
    }

    #[test]
    fn shared_chunks_outlive_the_arena() {
        let mut arena = Arena::new(4096, None);
        let place = arena.alloc(5);
        // SAFETY: 5 bytes were just allocated at `place`.
        unsafe { std::ptr::copy_nonoverlapping(b"hello".as_ptr(), place.ptr.as_ptr(), 5) };
        let shared = arena.share();
        drop(arena);
        let chunk = &shared[place.chunk as usize];
        let offset = place.ptr.as_ptr() as usize - chunk.as_ptr() as usize;
        assert_eq!(&chunk[offset..offset + 5], b"hello");
    }
}
