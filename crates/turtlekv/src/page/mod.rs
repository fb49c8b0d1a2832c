//! The page store: immutable, checksummed pages in page files, a bounded page
//! cache, and the generations of committed roots that readers pin (the
//! store layer makes each root durable in its superblock).
//!
//! The tree sees pages only through [`PageIo`], so its tests can run on an
//! in-memory double and the engine on the real store.

mod alloc;
mod cache;
pub(crate) mod check;
mod codec;
mod copy;
pub(crate) mod id;
mod open;
mod prefetch;
mod punch;
pub(crate) use prefetch::PageRange;
mod read;
mod store;
mod streamed;
mod versions;

#[cfg(test)]
pub(crate) mod tests;

use std::fmt::Debug;

use bytes::Bytes;

use crate::error::DecodeError;
use crate::{Error, Result};

pub(crate) use self::{
    store::{ListChildren, PageStore, PageStoreOptions},
    versions::RootPin,
};
pub(crate) use cache::CachedObject;
pub(crate) use cache::frames::FRAME_BYTES;
use codec::Geometry;
pub(crate) use copy::CopyReport;
#[cfg(test)]
pub(crate) use open::PAGE_FILE_NAMES;

thread_local! {
    /// Page reads from disk made by this thread, so a caller can count the
    /// reads one operation caused.
    static THREAD_READ_IOS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Page reads from disk made by the calling thread so far.
pub(crate) fn thread_read_ios() -> u64 {
    THREAD_READ_IOS.with(std::cell::Cell::get)
}

/// Largest page content of `kind` for the given page sizes: a slot minus
/// the 8-byte trailer of each block and the 16-byte page header (4072 bytes
/// for a 4 KiB node, 2,093,040 for a 2 MiB leaf). The tree must size its
/// pages to this, not to the raw page size.
pub(crate) fn max_page_bytes(kind: PageKind, node_size_bytes: u64, leaf_size_bytes: u64) -> usize {
    Geometry::new(kind, node_size_bytes, leaf_size_bytes).capacity_bytes()
}

/// Size of one block of a `kind` page on disk, trailer included.
pub(crate) fn block_bytes(kind: PageKind, node_size_bytes: u64, leaf_size_bytes: u64) -> usize {
    Geometry::new(kind, node_size_bytes, leaf_size_bytes).block_bytes
}

/// Counters and gauges of a [`PageStore`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PageStoreStats {
    /// Reads served from the cache (a range read counts once, as a hit only
    /// when every block it needed was cached).
    pub cache_hits: u64,
    /// Reads that had to go to the file.
    pub cache_misses: u64,
    /// Leaf heads not cached decoded, so read again (from disk unless
    /// their blocks happen to be cached). Heads and filters should stay
    /// cached: they are small and every point read of their leaf needs them.
    pub cache_leaf_head_misses: u64,
    /// Leaf filters not cached decoded, so read again.
    pub cache_filter_misses: u64,
    /// Entries evicted to make room.
    pub cache_evictions: u64,
    /// Blocks read from disk that the cache had evicted within its ghost
    /// window: reads a cache larger by that window would have saved.
    pub cache_ghost_recalls: u64,
    /// Blocks still cached when their page was freed (rewritten by a
    /// checkpoint): reads of their records go to disk again.
    pub cache_blocks_freed_cached: u64,
    /// Bytes the cache holds, entry overhead included.
    pub cache_used_bytes: u64,
    /// Of those, kept mappings of written pages and MemTable chunks.
    pub cache_pooled_bytes: u64,
    /// Of those, decoded leaf and segment heads.
    pub cache_leaf_head_bytes: u64,
    /// Of those, leaf and segment filters.
    pub cache_filter_bytes: u64,
    /// Of those, node pages.
    pub cache_node_bytes: u64,
    /// Resident memory of the frames holding blocks read from disk, in
    /// use or kept free for the next reads.
    pub cache_frame_bytes: u64,
    /// Frames handed back to the kernel as the cache let go of them.
    pub cache_frames_released: u64,
    /// The cache's budget.
    pub cache_capacity_bytes: u64,
    /// Entries (whole pages and single blocks) cached.
    pub cache_entries: u64,
    /// Bytes read from page files.
    pub bytes_read: u64,
    /// Read calls on page files.
    pub read_ios: u64,
    /// Bytes written to page files (whole blocks).
    pub bytes_written: u64,
    /// Pages written.
    pub pages_written: u64,
    /// Bytes of freed leaf pages punched out of the leaf file.
    pub bytes_punched: u64,
    /// Of those, bytes of dead chunks punched out of live segment pages.
    pub dead_chunk_bytes_punched: u64,
    /// `fdatasync` calls on page and superblock files.
    pub syncs: u64,
    /// Commits made by this handle.
    pub commits: u64,
    /// Newest committed generation.
    pub generation: u64,
    /// Allocated node pages (live, or waiting for reuse).
    pub live_node_pages: u64,
    /// Allocated leaf pages (live, or waiting for reuse).
    pub live_leaf_pages: u64,
    /// Free node slots below the node file's high-water mark.
    pub free_node_slots: u64,
    /// Free leaf slots below the leaf file's high-water mark.
    pub free_leaf_slots: u64,
    /// Pages no longer reachable, waiting for older readers to unpin.
    pub pending_free_pages: u64,
    /// Live root pins.
    pub pinned_readers: u64,
}

/// Stable, cheap name of one page. Opaque to the tree, which stores it as
/// 8 little-endian bytes (`to_raw`/`from_raw`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PageId(u64);

impl PageId {
    pub(crate) const fn from_raw(raw: u64) -> Self {
        PageId(raw)
    }

    pub(crate) const fn to_raw(self) -> u64 {
        self.0
    }
}

/// What a page holds, which decides its size class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PageKind {
    /// A tree node: at most `node_size_bytes`.
    Node,
    /// A leaf or buffer segment: at most `leaf_size_bytes`.
    Leaf,
}

/// Eviction priority of cached bytes; higher survives longer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum CachePriority {
    LeafBlock,
    LeafHead,
    Filter,
    Node,
}

/// Decoded forms of a page that the tree builds once, verifies once and
/// keeps in the page cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ObjectKind {
    LeafHead,
    Filter,
    /// A node page parsed for lookups and scans (`tree::probe::NodeIndex`).
    NodeIndex,
}

impl ObjectKind {
    pub(crate) const ALL: [ObjectKind; 3] = [
        ObjectKind::LeafHead,
        ObjectKind::Filter,
        ObjectKind::NodeIndex,
    ];

    /// Cache key part; block numbers and `WHOLE_PAGE` never reach these.
    pub(crate) fn part(self) -> u32 {
        match self {
            ObjectKind::LeafHead => u32::MAX - 1,
            ObjectKind::Filter => u32::MAX - 2,
            ObjectKind::NodeIndex => u32::MAX - 3,
        }
    }
}

/// Range reads in flight (`PageIo::streamed_reads`).
pub(crate) trait StreamedReads {
    /// Starts reading the blocks of `range` that are not cached; `tag`
    /// comes back from `next_ready` once they are (at once when all are).
    fn push(&mut self, range: PageRange, tag: usize) -> Result<()>;

    /// The tag of a pushed range that is now in the cache, waiting for one
    /// if none is; `None` once every pushed range has been reported. An
    /// error is one the range's own read would return.
    fn next_ready(&mut self) -> Result<Option<usize>>;
}

/// Reports every range as soon as it is pushed, reading nothing.
#[derive(Default)]
struct ReportedAtOnce(std::collections::VecDeque<usize>);

impl StreamedReads for ReportedAtOnce {
    fn push(&mut self, _range: PageRange, tag: usize) -> Result<()> {
        self.0.push_back(tag);
        Ok(())
    }

    fn next_ready(&mut self) -> Result<Option<usize>> {
        Ok(self.0.pop_front())
    }
}

/// What the tree needs from storage.
pub(crate) trait PageIo: Send + Sync + Debug {
    /// Writes a new immutable page and returns its id. The page is durable
    /// only once the page store commits a root that reaches it.
    fn write_page(&self, kind: PageKind, bytes: &[u8]) -> Result<PageId>;

    /// The whole page, verified against its checksums.
    fn read_page(&self, id: PageId, priority: CachePriority) -> Result<Bytes>;

    /// `len` bytes at `offset` of the page, reading and verifying only the
    /// blocks that cover them (a leaf lookup reads its head and one block).
    fn read_range(
        &self,
        id: PageId,
        offset: u64,
        len: u64,
        priority: CachePriority,
    ) -> Result<Bytes>;

    /// Reads those of `ranges` (page, offset, length) that are not cached
    /// into the cache at once, so that their disk reads overlap; the caller
    /// then reads each as usual. A store whose reads do not wait on a
    /// device (the tree's in-memory test store) has nothing to overlap.
    fn prefetch(&self, _ranges: &[PageRange], _priority: CachePriority) -> Result<()> {
        Ok(())
    }

    /// Reads of ranges into the cache that start as each is pushed and are
    /// reported as each is in, so that the caller works on one while the
    /// others are in flight (`Tree::get_many`). A store whose reads do not
    /// wait on a device reports each range at once, uncached: the caller's
    /// own read of it reads it.
    fn streamed_reads(&self, _priority: CachePriority) -> Box<dyn StreamedReads + '_> {
        Box::new(ReportedAtOnce::default())
    }

    /// The whole page, verified, read past the cache (bulk reads that would
    /// only evict what point reads use).
    fn read_page_uncached(&self, id: PageId) -> Result<Bytes> {
        self.read_page(id, CachePriority::LeafBlock)
    }

    /// Like `read_range`, without caching the blocks read (the caller caches
    /// a decoded form instead).
    fn read_range_uncached(&self, id: PageId, offset: u64, len: u64) -> Result<Bytes> {
        self.read_range(id, offset, len, CachePriority::LeafBlock)
    }

    /// The corruption error for damage that a decoder of page `id`'s
    /// contents found at byte `e.offset` of them: it names the file the
    /// page lives in and that byte's offset in the file (past the page
    /// header and the trailers of the blocks before it). A store without
    /// files names the page and the offset in its contents.
    fn corruption(&self, id: PageId, e: DecodeError) -> Error {
        Error::corruption(format!("page {:#x}", id.to_raw()), e.offset, e.what)
    }

    /// The corruption error for damage in a page of `kind` that cannot be
    /// named (`what` says why): it names the file pages of that kind live
    /// in, at offset 0.
    fn corruption_in_file(&self, kind: PageKind, what: String) -> Error {
        Error::corruption(format!("{kind:?} pages"), 0, what)
    }

    /// Blocks punched out of live page `id` so far (a segment's flushed
    /// chunks) that this handle knows of.
    fn punched_blocks(&self, _id: PageId) -> u32 {
        0
    }

    /// A decoded form of page `id` cached by `cache_object`.
    fn cached_object(&self, _id: PageId, _kind: ObjectKind) -> Option<CachedObject> {
        None
    }

    /// Caches a decoded form of page `id` costing about `size_bytes`; it
    /// goes when the page is freed or evicted.
    fn cache_object(
        &self,
        _id: PageId,
        _kind: ObjectKind,
        _object: CachedObject,
        _size_bytes: u64,
        _priority: CachePriority,
    ) {
    }
}
