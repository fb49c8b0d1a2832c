//! An in-memory [`PageIo`] for the tree's tests. It simulates a cache (a read
//! of bytes seen before is a hit), counts misses by kind, can drop its cache
//! (optionally keeping filters, as the real cache's priorities would), and
//! can free pages so a wrong dead-page list shows up as a failed read.
//! Like the page store, which checksums every block it reads, it refuses to
//! return bytes of a block `corrupt` flipped.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::page::{
    CachePriority, CachedObject, ObjectKind, PageId, PageIo, PageKind, PageRange, StreamedReads,
};
use crate::{Error, Result};

/// Reads that missed the simulated cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(in crate::tree) struct IoCounts {
    pub node_pages: u64,
    pub filters: u64,
    pub leaf_heads: u64,
    pub leaf_blocks: u64,
    pub whole_leaves: u64,
}

#[derive(Debug, Default)]
struct Inner {
    pages: HashMap<u64, (PageKind, Bytes)>,
    next_id: u64,
    cached: HashMap<(u64, u64, u64), CachePriority>,
    objects: HashMap<(u64, ObjectKind), CachedObject>,
    /// Calls of `cached_object` per kind, hits or not: what lookups ask
    /// the cache.
    object_lookups: HashMap<ObjectKind, u64>,
    /// Kinds of objects `cache_object` keeps nothing of, as a cache over
    /// its capacity refuses inserts.
    refused_objects: Vec<ObjectKind>,
    misses: IoCounts,
    /// While set, the ranges prefetched so far (`track_prefetches`).
    prefetched: Option<Vec<PageRange>>,
    /// Leaf block reads outside every prefetched range, while tracking.
    reads_not_prefetched: u64,
    /// `(page, byte offset)` of every bit `corrupt` flipped and did not
    /// flip back.
    flipped: HashSet<(u64, usize)>,
    /// `(page, unit)` of every `PUNCH_UNIT_BYTES` unit `punch` took out of
    /// a page.
    punched: HashSet<(u64, usize)>,
}

/// The page store verifies blocks of this many bytes (`docs/format.md`,
/// "Blocks"); the model checks the same spans of a page's contents.
const VERIFIED_BLOCK_BYTES: usize = 4096;
/// Punched ranges are tracked in units this small, finer than any leaf
/// block size the tests use: a read that strays into a dead chunk by a
/// single block fails.
const PUNCH_UNIT_BYTES: usize = 64;

#[derive(Debug, Default)]
pub(in crate::tree) struct MemPageIo {
    inner: Mutex<Inner>,
}

impl MemPageIo {
    pub(in crate::tree) fn misses(&self) -> IoCounts {
        self.inner.lock().misses
    }

    pub(in crate::tree) fn reset_misses(&self) {
        self.inner.lock().misses = IoCounts::default();
    }

    /// Calls of `cached_object` since the last call of this.
    pub(in crate::tree) fn take_object_lookups(&self) -> u64 {
        self.take_object_lookups_by_kind().values().sum()
    }

    /// Calls of `cached_object` per kind since the last take.
    pub(in crate::tree) fn take_object_lookups_by_kind(&self) -> HashMap<ObjectKind, u64> {
        std::mem::take(&mut self.inner.lock().object_lookups)
    }

    /// Makes `cache_object` keep nothing of these kinds (none: keep all).
    pub(in crate::tree) fn refuse_objects(&self, kinds: &[ObjectKind]) {
        self.inner.lock().refused_objects = kinds.to_vec();
    }

    /// Drops the cached objects of one kind, as evictions would.
    pub(in crate::tree) fn drop_objects(&self, kind: ObjectKind) {
        self.inner.lock().objects.retain(|(_, k), _| *k != kind);
    }

    /// Starts recording prefetched ranges anew, and counting the leaf block
    /// reads that none of them covers: reads a scan waits on one by one.
    pub(in crate::tree) fn track_prefetches(&self) {
        let mut inner = self.inner.lock();
        inner.prefetched = Some(Vec::new());
        inner.reads_not_prefetched = 0;
    }

    /// Leaf block reads since `track_prefetches` that no prefetched range
    /// covered.
    pub(in crate::tree) fn reads_not_prefetched(&self) -> u64 {
        self.inner.lock().reads_not_prefetched
    }

    /// Empties the simulated cache; filters survive if `keep_filters`.
    pub(in crate::tree) fn drop_cache(&self, keep_filters: bool) {
        self.inner
            .lock()
            .cached
            .retain(|_, priority| keep_filters && *priority == CachePriority::Filter);
        self.inner
            .lock()
            .objects
            .retain(|(_, kind), _| keep_filters && *kind == ObjectKind::Filter);
    }

    /// Punches the blocks wholly inside `ranges` out of their pages (as
    /// the page store would after a commit): reading one is an error, so
    /// a reader that strays into a dead chunk fails its test.
    pub(in crate::tree) fn punch(&self, ranges: &[PageRange]) {
        let mut inner = self.inner.lock();
        for &(id, offset, len) in ranges {
            assert!(
                inner.pages.contains_key(&id.to_raw()),
                "punching page {id:?}, which is not live"
            );
            let first = (offset as usize).div_ceil(PUNCH_UNIT_BYTES);
            let end = (offset + len) as usize / PUNCH_UNIT_BYTES;
            for block in first..end {
                inner.punched.insert((id.to_raw(), block));
            }
        }
        inner.cached.clear();
    }

    /// The length of a live page, punched or not.
    pub(in crate::tree) fn page_len(&self, id: PageId) -> usize {
        self.inner.lock().pages[&id.to_raw()].1.len()
    }

    /// Whether the byte at `offset` of page `id` was punched out.
    pub(in crate::tree) fn is_punched(&self, id: PageId, offset: usize) -> bool {
        let unit = offset / PUNCH_UNIT_BYTES;
        self.inner.lock().punched.contains(&(id.to_raw(), unit))
    }

    /// Frees pages (as the page store would after a commit).
    pub(in crate::tree) fn free(&self, ids: &[PageId]) {
        let mut inner = self.inner.lock();
        for id in ids {
            assert!(
                inner.pages.remove(&id.to_raw()).is_some(),
                "page {id:?} freed twice or never written"
            );
        }
        inner
            .cached
            .retain(|(id, _, _), _| !ids.iter().any(|d| d.to_raw() == *id));
        inner
            .punched
            .retain(|(id, _)| !ids.iter().any(|d| d.to_raw() == *id));
        inner
            .objects
            .retain(|(id, _), _| !ids.iter().any(|d| d.to_raw() == *id));
    }

    pub(in crate::tree) fn page_ids(&self) -> Vec<PageId> {
        self.inner
            .lock()
            .pages
            .keys()
            .map(|id| PageId::from_raw(*id))
            .collect()
    }

    pub(in crate::tree) fn kind(&self, id: PageId) -> Option<PageKind> {
        self.inner
            .lock()
            .pages
            .get(&id.to_raw())
            .map(|(kind, _)| *kind)
    }

    /// Flips one bit of a stored page.
    pub(in crate::tree) fn corrupt(&self, id: PageId, offset: usize) {
        let mut inner = self.inner.lock();
        let (_, bytes) = inner.pages.get_mut(&id.to_raw()).expect("page exists");
        let mut copy = bytes.to_vec();
        copy[offset] ^= 0x40;
        *bytes = Bytes::from(copy);
        if !inner.flipped.remove(&(id.to_raw(), offset)) {
            inner.flipped.insert((id.to_raw(), offset));
        }
        inner.cached.clear();
        inner.objects.clear();
    }

    fn read(
        &self,
        id: PageId,
        offset: u64,
        len: Option<u64>,
        priority: CachePriority,
    ) -> Result<Bytes> {
        let mut inner = self.inner.lock();
        let Some((kind, bytes)) = inner.pages.get(&id.to_raw()).cloned() else {
            return Err(Error::Io(io::Error::new(
                io::ErrorKind::NotFound,
                format!("page {id:?} is not allocated"),
            )));
        };
        // Offsets and lengths may come from damaged pages: as the page
        // store does, refuse a range past the page, however far.
        let len = len.unwrap_or_else(|| (bytes.len() as u64).saturating_sub(offset));
        if offset
            .checked_add(len)
            .is_none_or(|end| end > bytes.len() as u64)
        {
            return Err(Error::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of a page",
            )));
        }
        let blocks = offset as usize / VERIFIED_BLOCK_BYTES
            ..=(offset + len.max(1) - 1) as usize / VERIFIED_BLOCK_BYTES;
        if let Some(&(_, at)) = inner.flipped.iter().find(|&&(page, at)| {
            page == id.to_raw() && blocks.contains(&(at / VERIFIED_BLOCK_BYTES))
        }) {
            return Err(Error::corruption(
                format!("page {:#x}", id.to_raw()),
                at as u64,
                "block checksum mismatch",
            ));
        }
        let mut units = offset as usize / PUNCH_UNIT_BYTES
            ..=(offset + len.max(1) - 1) as usize / PUNCH_UNIT_BYTES;
        if let Some(unit) = units.find(|&u| inner.punched.contains(&(id.to_raw(), u))) {
            return Err(Error::corruption(
                format!("page {:#x}", id.to_raw()),
                (unit * PUNCH_UNIT_BYTES) as u64,
                "read of a punched block",
            ));
        }
        let whole = offset == 0 && len == bytes.len() as u64;
        if inner
            .cached
            .insert((id.to_raw(), offset, len), priority)
            .is_none()
        {
            let m = &mut inner.misses;
            match (kind, priority, whole) {
                (PageKind::Node, _, _) => m.node_pages += 1,
                (PageKind::Leaf, CachePriority::Filter, _) => m.filters += 1,
                (PageKind::Leaf, CachePriority::LeafHead, _) => m.leaf_heads += 1,
                (PageKind::Leaf, _, true) => m.whole_leaves += 1,
                (PageKind::Leaf, _, false) => m.leaf_blocks += 1,
            }
        }
        Ok(bytes.slice(offset as usize..(offset + len) as usize))
    }
}

impl PageIo for MemPageIo {
    fn write_page(&self, kind: PageKind, bytes: &[u8]) -> Result<PageId> {
        let mut inner = self.inner.lock();
        inner.next_id += 1;
        // The block count a page store of 4 KiB blocks would give it, so
        // that sizes computed from ids (`Tree::shape`) mean something.
        let blocks = (16 + bytes.len()).div_ceil(4096 - 8).max(1) as u32;
        let id = PageId::new(kind, inner.next_id, blocks, 0);
        inner
            .pages
            .insert(id.to_raw(), (kind, Bytes::copy_from_slice(bytes)));
        Ok(id)
    }

    fn read_page(&self, id: PageId, priority: CachePriority) -> Result<Bytes> {
        self.read(id, 0, None, priority)
    }

    fn read_range(
        &self,
        id: PageId,
        offset: u64,
        len: u64,
        priority: CachePriority,
    ) -> Result<Bytes> {
        if priority == CachePriority::LeafBlock {
            let mut inner = self.inner.lock();
            let Inner {
                prefetched,
                reads_not_prefetched,
                ..
            } = &mut *inner;
            let covered = |&(p, o, l): &PageRange| p == id && o <= offset && offset + len <= o + l;
            if prefetched
                .as_ref()
                .is_some_and(|ranges| !ranges.iter().any(covered))
            {
                *reads_not_prefetched += 1;
            }
        }
        self.read(id, offset, Some(len), priority)
    }

    fn prefetch(&self, ranges: &[PageRange], _priority: CachePriority) -> Result<()> {
        if let Some(prefetched) = self.inner.lock().prefetched.as_mut() {
            prefetched.extend_from_slice(ranges);
        }
        Ok(())
    }

    /// Counts each pushed range as prefetched, and reports it at once.
    fn streamed_reads(&self, priority: CachePriority) -> Box<dyn StreamedReads + '_> {
        Box::new(MemStreamedReads {
            io: self,
            priority,
            ready: VecDeque::new(),
        })
    }

    /// The tree reads only leaf heads (at offset 0) and filters (right
    /// after the head) this way; each such read is a miss of that kind.
    fn read_range_uncached(&self, id: PageId, offset: u64, len: u64) -> Result<Bytes> {
        let priority = if offset == 0 {
            CachePriority::LeafHead
        } else {
            CachePriority::Filter
        };
        let bytes = self.read(id, offset, Some(len), priority)?;
        self.inner.lock().cached.remove(&(id.to_raw(), offset, len));
        Ok(bytes)
    }

    fn cached_object(&self, id: PageId, kind: ObjectKind) -> Option<CachedObject> {
        let mut inner = self.inner.lock();
        *inner.object_lookups.entry(kind).or_default() += 1;
        inner.objects.get(&(id.to_raw(), kind)).cloned()
    }

    fn cache_object(
        &self,
        id: PageId,
        kind: ObjectKind,
        object: CachedObject,
        _size_bytes: u64,
        _priority: CachePriority,
    ) {
        let mut inner = self.inner.lock();
        if !inner.refused_objects.contains(&kind) {
            inner.objects.insert((id.to_raw(), kind), object);
        }
    }
}

/// `MemPageIo`'s streamed reads: a pushed range counts as prefetched.
struct MemStreamedReads<'a> {
    io: &'a MemPageIo,
    priority: CachePriority,
    ready: VecDeque<usize>,
}

impl StreamedReads for MemStreamedReads<'_> {
    fn push(&mut self, range: PageRange, tag: usize) -> Result<()> {
        self.io.prefetch(&[range], self.priority)?;
        self.ready.push_back(tag);
        Ok(())
    }

    fn next_ready(&mut self) -> Result<Option<usize>> {
        Ok(self.ready.pop_front())
    }
}
