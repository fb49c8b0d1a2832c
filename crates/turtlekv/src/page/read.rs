//! Reading pages: whole pages, or the blocks covering a byte range, through
//! the cache, verified before anything is returned or cached.

use std::io;
use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};

use super::cache::{CacheKey, WHOLE_PAGE};
use super::codec::PAGE_HEADER_BYTES;
use super::store::{PageFile, PageStore, bump};
use super::{CachePriority, PageId};
use crate::error::DecodeError;
use crate::io::{AlignedBuf, read_exact_at};
use crate::{Error, Result};

impl PageStore {
    /// The page's content; `priority: None` bypasses the cache entirely
    /// (deep checks must see the disk, not a cached copy).
    pub(super) fn read_whole(&self, id: PageId, priority: Option<CachePriority>) -> Result<Bytes> {
        let key = CacheKey {
            page: id.to_raw(),
            part: WHOLE_PAGE,
        };
        if priority.is_some() {
            if let Some(bytes) = self.cache.get(key) {
                self.counters.cache_hits.add(1);
                return Ok(bytes);
            }
            bump(&self.counters.cache_misses, 1);
            self.cache.recall_evicted(key);
        }
        let pf = self.checked_file(id)?;
        let image = self.read_image(pf, id, 0, id.blocks())?;
        let content = pf
            .geometry
            .decode(id, &image)
            .map_err(|bad| corruption(pf, id, bad))?;
        if let Some(priority) = priority {
            self.cache.insert(key, content.clone(), priority);
        }
        Ok(content)
    }

    /// Verifies every block of leaf page `id` straight from disk, but the
    /// holes punched out of it (all-zero blocks other than the first and
    /// the last, which hold the page's head and its last chunk): a
    /// segment's flushed chunks (`tree::write::dead_chunks`). The tree's
    /// own check reads every block a reader can read, so a hole where a
    /// live chunk belongs fails there. Returns the page's content length.
    pub(super) fn verify_leaf_blocks(&self, id: PageId) -> Result<u64> {
        let pf = self.checked_file(id)?;
        let image = self.read_image(pf, id, 0, id.blocks())?;
        let block_bytes = pf.geometry.block_bytes;
        for (index, block) in image.chunks_exact(block_bytes).enumerate() {
            let inner = index > 0 && index + 1 < id.blocks() as usize;
            if inner && block.iter().all(|&b| b == 0) {
                continue;
            }
            pf.geometry
                .verify_block(id, index as u32, block)
                .map_err(|bad| corruption(pf, id, bad))?;
        }
        let len = u32::from_le_bytes(image[4..8].try_into().expect("4 bytes"));
        Ok(u64::from(len))
    }

    /// `len` content bytes at `offset`, reading only uncached covering blocks.
    pub(super) fn read_blocks_range(
        &self,
        id: PageId,
        offset: u64,
        len: u64,
        priority: Option<CachePriority>,
    ) -> Result<Bytes> {
        let pf = self.checked_file(id)?;
        let beyond = || {
            Error::corruption(
                &pf.path,
                pf.offset_of(id),
                format!(
                    "range {offset}+{len} lies beyond the end of page {:#x}",
                    id.to_raw()
                ),
            )
        };
        let whole_key = CacheKey {
            page: id.to_raw(),
            part: WHOLE_PAGE,
        };
        // A whole page is cached only as a checkpoint wrote it, while the
        // cache had room. Reads of a range take from it without renewing
        // it: every read of any of its ~15K records would otherwise keep a
        // 2 MiB page cached for good, a random sample of blocks that pins
        // the cache once it is full. Left to age, it goes at the hand's
        // next pass, and the blocks reads then want come back one by one.
        if let Some(whole) = self.cache.peek(whole_key) {
            self.counters.cache_hits.add(1);
            let end = offset.checked_add(len).filter(|&e| e <= whole.len() as u64);
            let end = end.ok_or_else(beyond)?;
            return Ok(whole.slice(offset as usize..end as usize));
        }
        let payload = pf.geometry.payload_bytes() as u64;
        let start = PAGE_HEADER_BYTES as u64 + offset;
        let end = start.checked_add(len).ok_or_else(beyond)?;
        let first = (start / payload) as u32;
        let last = (end.max(start + 1) - 1) / payload;
        if last >= u64::from(id.blocks()) {
            return Err(beyond());
        }
        let last = last as u32;
        let mut blocks: Vec<Option<Bytes>> = (first..=last)
            .map(|b| {
                self.cache.get(CacheKey {
                    page: id.to_raw(),
                    part: b,
                })
            })
            .collect();
        let all_cached = blocks.iter().all(Option::is_some);
        if all_cached {
            self.counters.cache_hits.add(1);
        } else {
            bump(&self.counters.cache_misses, 1);
        }
        let skip = (start - u64::from(first) * payload) as usize;
        if priority.is_none() && blocks.iter().all(Option::is_none) {
            let image = self.read_image(pf, id, first, last - first + 1)?;
            let out = self.verified_range(pf, id, first, &image, skip, len as usize)?;
            return out.ok_or_else(beyond);
        }
        self.fill_missing(pf, id, first, &mut blocks, priority)?;
        let blocks: Vec<Bytes> = blocks.into_iter().map(|b| b.expect("filled")).collect();
        // Only the last block may be short; the range must end within it.
        let last_used = blocks.last().map_or(0, |b| b.len() as u64);
        if end - u64::from(last) * payload > last_used {
            return Err(beyond());
        }
        if blocks.len() == 1 {
            return Ok(blocks[0].slice(skip..skip + len as usize));
        }
        let mut out = BytesMut::with_capacity(len as usize);
        for (i, block) in blocks.iter().enumerate() {
            let from = if i == 0 { skip } else { 0 };
            let want = (len as usize - out.len()).min(block.len() - from);
            out.extend_from_slice(&block[from..from + want]);
        }
        debug_assert_eq!(out.len() as u64, len);
        Ok(out.freeze())
    }

    /// Verifies the blocks of an image read from block `first` on and
    /// copies `len` payload bytes from `skip` on out of them: an uncached
    /// read makes one copy, not a copy per block and another to join them.
    /// `None` when the range ends beyond the last block's payload.
    fn verified_range(
        &self,
        pf: &PageFile,
        id: PageId,
        first: u32,
        image: &AlignedBuf,
        skip: usize,
        len: usize,
    ) -> Result<Option<Bytes>> {
        let mut out = BytesMut::with_capacity(len);
        for (k, block) in image.chunks_exact(pf.geometry.block_bytes).enumerate() {
            let used = pf
                .geometry
                .verify_block(id, first + k as u32, block)
                .map_err(|bad| corruption(pf, id, bad))?;
            let from = if k == 0 { skip } else { 0 };
            let want = (len - out.len()).min(used.len().saturating_sub(from));
            out.extend_from_slice(&used[from.min(used.len())..][..want]);
        }
        Ok((out.len() == len).then(|| out.freeze()))
    }

    /// Reads each run of consecutive missing blocks with one I/O, verifies
    /// every block, caches it, and fills it in.
    fn fill_missing(
        &self,
        pf: &PageFile,
        id: PageId,
        first: u32,
        blocks: &mut [Option<Bytes>],
        priority: Option<CachePriority>,
    ) -> Result<()> {
        let mut i = 0;
        while i < blocks.len() {
            if blocks[i].is_some() {
                i += 1;
                continue;
            }
            let run_end = (i..blocks.len())
                .find(|&j| blocks[j].is_some())
                .unwrap_or(blocks.len());
            let run_first = first + i as u32;
            if priority.is_some() {
                self.recall_evicted_run(id, run_first, (run_end - i) as u32);
            }
            let image = self.read_image(pf, id, run_first, (run_end - i) as u32)?;
            let verified = self.accept_image(pf, id, run_first, &image, priority)?;
            for (k, bytes) in verified.into_iter().enumerate() {
                blocks[i + k] = Some(bytes);
            }
            i = run_end;
        }
        Ok(())
    }

    /// Verifies the blocks of an image read from block `first` on, and
    /// caches them unless `priority` is `None`.
    pub(super) fn accept_image(
        &self,
        pf: &PageFile,
        id: PageId,
        first: u32,
        image: &AlignedBuf,
        priority: Option<CachePriority>,
    ) -> Result<Vec<Bytes>> {
        let mut verified = Vec::with_capacity(image.len() / pf.geometry.block_bytes);
        for (k, block) in image.chunks_exact(pf.geometry.block_bytes).enumerate() {
            let index = first + k as u32;
            let used = pf
                .geometry
                .verify_block(id, index, block)
                .map_err(|bad| corruption(pf, id, bad))?;
            if let Some(priority) = priority {
                let bytes = self.cache.framed_copy(used);
                let key = CacheKey {
                    page: id.to_raw(),
                    part: index,
                };
                self.cache.insert(key, bytes.clone(), priority);
                verified.push(bytes);
            } else {
                verified.push(Bytes::copy_from_slice(used));
            }
        }
        Ok(verified)
    }

    /// Tells the cache's ghost list that these blocks are being read again
    /// (each is forgotten; the ghost counts one recall per block it held).
    pub(super) fn recall_evicted_run(&self, id: PageId, first: u32, count: u32) {
        for part in first..first + count {
            self.cache.recall_evicted(CacheKey {
                page: id.to_raw(),
                part,
            });
        }
    }

    /// The page's file, after checking the id could name a page in it.
    pub(super) fn checked_file(&self, id: PageId) -> Result<&PageFile> {
        let pf = self.file_of(id);
        if id.blocks() > pf.geometry.slot_blocks() {
            return Err(Error::corruption(
                &pf.path,
                pf.offset_of(id),
                format!(
                    "page id {:#x} claims {} blocks, a slot holds {}",
                    id.to_raw(),
                    id.blocks(),
                    pf.geometry.slot_blocks()
                ),
            ));
        }
        Ok(pf)
    }

    /// Reads `count` blocks of a page starting at block `first`.
    pub(super) fn read_image(
        &self,
        pf: &PageFile,
        id: PageId,
        first: u32,
        count: u32,
    ) -> Result<AlignedBuf> {
        let read = read_raw(pf, id, first, count);
        self.finish_read(pf, id, image_span(pf, id, first, count).0, read)
    }

    /// Turns the outcome of an image read at `offset` into the page store's
    /// result, and counts it (on the calling thread, whichever thread did
    /// the read: the caller's operation caused it).
    pub(super) fn finish_read(
        &self,
        pf: &PageFile,
        id: PageId,
        offset: u64,
        read: io::Result<AlignedBuf>,
    ) -> Result<AlignedBuf> {
        let image = match read {
            Ok(image) => image,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(Error::corruption(
                    &pf.path,
                    offset,
                    format!("page {:#x} lies beyond the end of the file", id.to_raw()),
                ));
            }
            Err(e) => return Err(e.into()),
        };
        bump(&self.counters.read_ios, 1);
        super::THREAD_READ_IOS.with(|n| n.set(n.get() + 1));
        self.counters
            .bytes_read
            .fetch_add(image.len() as u64, Ordering::Relaxed);
        Ok(image)
    }
}

/// Reads `count` blocks of a page from block `first`, uncounted and
/// unverified (see `finish_read` and `accept_image`).
pub(super) fn read_raw(
    pf: &PageFile,
    id: PageId,
    first: u32,
    count: u32,
) -> io::Result<AlignedBuf> {
    let (offset, len) = image_span(pf, id, first, count);
    let mut image = AlignedBuf::zeroed(len);
    read_exact_at(&*pf.file, &mut image, offset).map(|()| image)
}

/// `(file offset, length)` of `count` blocks of page `id` from block `first`.
pub(super) fn image_span(pf: &PageFile, id: PageId, first: u32, count: u32) -> (u64, usize) {
    let block_bytes = pf.geometry.block_bytes as u64;
    let offset = pf.offset_of(id) + u64::from(first) * block_bytes;
    (offset, (u64::from(count) * block_bytes) as usize)
}

/// A failed check of page `id`'s image, at an offset within it.
pub(super) fn corruption(pf: &PageFile, id: PageId, bad: DecodeError) -> Error {
    bad.into_corruption(&pf.path, pf.offset_of(id))
}
