//! The page store: writes immutable pages into free slots, commits roots
//! (the store layer makes each durable), and reuses slots once nothing can
//! reach them.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::Mutex;

use super::alloc::SlotAllocator;
use super::cache::{CacheKey, PageCache, WHOLE_PAGE};
use super::codec::Geometry;
use super::prefetch::{PageRange, PrefetchPool};
use super::streamed::RingReads;
use super::versions::Retired;
use super::versions::{RootPin, Versions};
use super::{
    CachePriority, CachedObject, ObjectKind, PageId, PageIo, PageKind, PageStoreStats,
    StreamedReads,
};
use crate::error::DecodeError;
use crate::io::{AlignedBuf, File};
use crate::util::striped::StripedCounter;
use crate::{Error, Result};

/// What the page store is configured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageStoreOptions {
    pub node_size_bytes: u64,
    pub leaf_size_bytes: u64,
    pub cache_capacity_bytes: u64,
    pub direct_io: bool,
    /// Cache leaf and segment pages as they are written, while the cache
    /// has free room (see `write_page`).
    pub cache_written_leaves: bool,
}

/// Lists the page ids a node page references (the node format belongs to
/// the tree); used to rebuild the live set at open and by deep checks. An
/// error's offset is within the page's contents.
pub(crate) type ListChildren<'a> = &'a dyn Fn(&[u8]) -> Result<Vec<PageId>, DecodeError>;

/// One page file: its handle, geometry, and whether it has unsynced writes.
#[derive(Debug)]
pub(super) struct PageFile {
    pub file: Arc<dyn File>,
    pub path: PathBuf,
    pub geometry: Geometry,
    pub dirty: AtomicBool,
}

impl PageFile {
    /// File offset of a page's first block. Saturates rather than wraps
    /// for an id read from a damaged page, so that the error naming it
    /// does not panic (open rejects such ids before any read).
    pub fn offset_of(&self, id: PageId) -> u64 {
        id.slot().saturating_mul(self.geometry.slot_bytes)
    }

    /// File offset of byte `offset` of a page's contents.
    pub fn content_offset_of(&self, id: PageId, offset: u64) -> u64 {
        self.offset_of(id)
            .saturating_add(self.geometry.content_offset_in_image(offset))
    }
}

#[derive(Debug, Default)]
pub(super) struct IoCounters {
    /// Bumped by every read the cache answers: striped (`striped.rs`).
    pub cache_hits: StripedCounter,
    pub cache_misses: AtomicU64,
    pub leaf_head_misses: AtomicU64,
    pub filter_misses: AtomicU64,
    pub bytes_read: AtomicU64,
    pub read_ios: AtomicU64,
    pub bytes_written: AtomicU64,
    pub pages_written: AtomicU64,
    pub syncs: AtomicU64,
    pub commits: AtomicU64,
    pub bytes_punched: AtomicU64,
    pub dead_chunk_bytes_punched: AtomicU64,
    pub blocks_freed_cached: AtomicU64,
}

pub(super) fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// Index of a kind's file, allocator and geometry.
pub(super) fn kind_index(kind: PageKind) -> usize {
    match kind {
        PageKind::Node => 0,
        PageKind::Leaf => 1,
    }
}

/// The page store. Shared by reference (`Arc`) between the checkpoint
/// thread, which writes and commits, and readers.
pub(crate) struct PageStore {
    pub(super) files: [PageFile; 2],
    pub(super) options: PageStoreOptions,
    pub(super) alloc: Mutex<[SlotAllocator; 2]>,
    pub(super) versions: Arc<Versions>,
    pub(super) cache: PageCache,
    /// Serialises commits (and the reclaim that precedes each).
    pub(super) commit_lock: Mutex<()>,
    pub(super) poison: OnceLock<String>,
    pub(super) counters: IoCounters,
    pub(super) prefetch_pool: PrefetchPool,
    /// Freed leaf slot space to punch at the next commit (`page::punch`).
    pub(super) punches: Mutex<super::punch::DeferredPunches>,
}

impl std::fmt::Debug for PageStore {
    // Short on purpose: the file handles of a test file system print its
    // whole contents.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageStore")
            .field("leaf_file", &self.files[1].path)
            .field("options", &self.options)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl PageStore {
    /// The file a page lives in.
    pub(super) fn file_of(&self, id: PageId) -> &PageFile {
        &self.files[kind_index(id.kind())]
    }

    #[cfg(test)]
    /// Largest page content `kind` can hold (slot size minus block trailers
    /// and page header; see `docs/format.md`).
    pub fn max_page_bytes(&self, kind: PageKind) -> usize {
        self.files[kind_index(kind)].geometry.capacity_bytes()
    }

    /// The corruption error for damage a decoder of page `id`'s contents
    /// found at `e.offset` of them: the page's file, and the offset in it
    /// of that byte of the contents.
    pub(super) fn content_corruption(&self, id: PageId, e: DecodeError) -> Error {
        let pf = self.file_of(id);
        Error::corruption(
            &pf.path,
            pf.content_offset_of(id, e.offset),
            format!(
                "page {:#x}, byte {} of its contents: {}",
                id.to_raw(),
                e.offset,
                e.what
            ),
        )
    }

    /// Refuses writes after an earlier write or sync failed.
    pub(super) fn check_writable(&self) -> Result<()> {
        match self.poison.get() {
            Some(cause) => Err(Error::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Records a write or sync failure: from now on the store is read-only,
    /// since the state of the failed write on disk is unknown.
    pub(super) fn poison_with(&self, e: io::Error) -> Error {
        self.poison.get_or_init(|| e.to_string());
        Error::Io(e)
    }

    /// Pins the newest committed root: pages it reaches stay intact until
    /// the pin (and every clone of it) is dropped.
    pub fn pin(&self) -> RootPin {
        self.versions.pin()
    }

    #[cfg(test)]
    /// The newest committed generation and root.
    pub fn current(&self) -> (u64, Option<PageId>) {
        self.versions.current()
    }

    /// Calls `f` with the newest committed generation while no commit
    /// runs (a check of what the commits write).
    pub fn without_commits<T>(&self, f: impl FnOnce(u64) -> T) -> T {
        let _serial = self.commit_lock.lock();
        f(self.versions.current().0)
    }

    /// Makes `root` the committed root: syncs the pages written so far,
    /// then has `make_durable` record the root durably as the next
    /// generation (the store layer writes and syncs its superblock: that is
    /// the commit point). `unreachable` lists the pages the new root no
    /// longer reaches (but the previous root did, or that were written and
    /// never linked); their slots are reused once no reader pins an older
    /// generation. Returns the new generation.
    #[cfg(test)]
    pub fn commit(
        &self,
        root: Option<PageId>,
        unreachable: &[PageId],
        make_durable: &mut dyn FnMut(u64) -> io::Result<()>,
    ) -> Result<u64> {
        self.commit_retiring(root, unreachable, Vec::new(), make_durable)
    }

    /// `commit`, which also leaves `dead_ranges` of pages `root` still
    /// reaches to no reader of it (a segment's flushed chunks): their
    /// blocks are punched once no reader of an older root remains.
    pub fn commit_retiring(
        &self,
        root: Option<PageId>,
        unreachable: &[PageId],
        dead_ranges: Vec<PageRange>,
        make_durable: &mut dyn FnMut(u64) -> io::Result<()>,
    ) -> Result<u64> {
        let _serial = self.commit_lock.lock();
        self.check_writable()?;
        self.reclaim_locked()?;
        self.punch_deferred()?;
        self.debug_check_unreachable(root, unreachable);
        for pf in &self.files {
            // Cleared before the sync: a write finishing during it sets the
            // flag again, and the next commit syncs it.
            if pf.dirty.swap(false, Ordering::AcqRel) {
                pf.file.sync_data().map_err(|e| self.poison_with(e))?;
                bump(&self.counters.syncs, 1);
            }
        }
        let next = self.versions.current().0 + 1;
        make_durable(next).map_err(|e| self.poison_with(e))?;
        bump(&self.counters.commits, 1);
        let cached_blocks: usize = unreachable.iter().map(|&id| self.cached_blocks(id)).sum();
        bump(&self.counters.blocks_freed_cached, cached_blocks as u64);
        let retired = Retired {
            pages: unreachable.to_vec(),
            dead_ranges,
        };
        self.versions.publish(next, root, retired);
        Ok(next)
    }

    /// How many of the page's blocks the cache holds.
    fn cached_blocks(&self, id: PageId) -> usize {
        (0..id.blocks())
            .filter(|&part| {
                self.cache.contains(CacheKey {
                    page: id.to_raw(),
                    part,
                })
            })
            .count()
    }

    fn debug_check_unreachable(&self, root: Option<PageId>, unreachable: &[PageId]) {
        if cfg!(debug_assertions) {
            let alloc = self.alloc.lock();
            let pending: std::collections::HashSet<PageId> =
                self.versions.pending_pages().into_iter().collect();
            for id in unreachable {
                debug_assert!(
                    alloc[kind_index(id.kind())].is_live(*id) && !pending.contains(id),
                    "page {:#x} freed twice or never allocated",
                    id.to_raw()
                );
                debug_assert_ne!(Some(*id), root, "freeing the new root");
            }
        }
    }

    /// Returns to the free lists the pages no pinned reader can reach and
    /// drops them from the cache. Their leaf slots are punched out of the
    /// file at the next commit unless a write reuses them first
    /// (`page::punch`). Runs before each commit and before a write when
    /// pages wait; call it after dropping old pins to reuse slots sooner.
    /// (The engine calls `punch_surplus`, which also punches.)
    #[cfg(test)]
    pub fn reclaim(&self) -> Result<()> {
        let _serial = self.commit_lock.lock();
        self.check_writable()?;
        self.reclaim_locked()
    }

    /// `reclaim`, then punches the freed leaf slots at once instead of at
    /// the next commit: for a database whose writes have stopped, so that
    /// no commit may come.
    pub fn release_freed_space(&self) -> Result<()> {
        let _serial = self.commit_lock.lock();
        self.check_writable()?;
        self.reclaim_locked()?;
        self.punch_deferred()
    }

    pub(super) fn reclaim_locked(&self) -> Result<()> {
        let Retired { pages, dead_ranges } = self.versions.take_reusable();
        self.queue_dead_ranges(&pages, dead_ranges);
        if pages.is_empty() {
            return Ok(());
        }
        for &id in &pages {
            self.cache.remove(CacheKey {
                page: id.to_raw(),
                part: WHOLE_PAGE,
            });
            let objects = ObjectKind::ALL.map(ObjectKind::part);
            for part in (0..id.blocks()).chain(objects) {
                self.cache.remove(CacheKey {
                    page: id.to_raw(),
                    part,
                });
            }
        }
        // Marked dirty before they are free, so a write that takes one
        // knows its tail may hold old bytes. The whole slot is punched
        // later, not just the page's blocks: after an open that had to
        // leave stale bytes (a damaged superblock slot) those of slots freed
        // since go too. Slots already free at such an open keep theirs (space
        // only; no read goes past a page's blocks) until an open that cleans
        // up. Node slots are small and rewritten whole.
        let mut punches = self.punches.lock();
        for id in pages.iter().filter(|id| id.kind() == PageKind::Leaf) {
            punches.slot_freed(*id);
        }
        drop(punches);
        let mut alloc = self.alloc.lock();
        for id in pages {
            let freed = alloc[kind_index(id.kind())].free(id);
            debug_assert_eq!(freed, Ok(()), "bad free");
        }
        Ok(())
    }

    /// The cache's pool of mappings (see `io::mapping_pool`).
    pub fn mapping_pool(&self) -> Arc<crate::mem::MappingPool> {
        self.cache.mapping_pool()
    }

    /// Changes the cache budget; shrinking evicts at once.
    #[cfg(test)]
    pub fn set_cache_capacity(&self, capacity_bytes: u64) {
        self.cache.set_capacity(capacity_bytes);
    }

    /// Changes the cache budget, leaving a shrink's evictions to
    /// `evict_cache_to_capacity` (see `PageCache::store_capacity`).
    pub fn store_cache_capacity(&self, capacity_bytes: u64) {
        self.cache.store_capacity(capacity_bytes);
    }

    /// Evicts until the cache is within its budget.
    pub fn evict_cache_to_capacity(&self) {
        self.cache.evict_to_capacity();
    }

    /// Every whole leaf page the cache holds.
    #[cfg(test)]
    pub(crate) fn cached_leaf_pages(&self) -> Vec<(PageId, bytes::Bytes)> {
        self.cache.whole_leaf_pages()
    }

    /// Bytes of recently evicted blocks the cache's ghost list covers.
    pub fn set_cache_ghost_window_bytes(&self, bytes: u64) {
        self.cache.set_ghost_window_bytes(bytes);
    }

    /// Counters and gauges.
    pub fn stats(&self) -> PageStoreStats {
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let cache = self.cache.counts();
        let (pending_free_pages, pinned_readers) = self.versions.counts();
        let alloc = self.alloc.lock();
        PageStoreStats {
            cache_hits: c.cache_hits.load(),
            cache_misses: load(&c.cache_misses),
            cache_leaf_head_misses: load(&c.leaf_head_misses),
            cache_filter_misses: load(&c.filter_misses),
            cache_evictions: cache.evictions,
            cache_ghost_recalls: cache.ghost_recalls,
            cache_blocks_freed_cached: load(&c.blocks_freed_cached),
            cache_used_bytes: cache.used_bytes,
            cache_pooled_bytes: cache.pooled_bytes,
            cache_frame_bytes: (cache.frames.live_frames + cache.frames.warm_frames)
                * crate::page::FRAME_BYTES as u64,
            cache_frames_released: cache.frames.released_frames,
            cache_leaf_head_bytes: cache.bytes_of(CachePriority::LeafHead),
            cache_filter_bytes: cache.bytes_of(CachePriority::Filter),
            cache_node_bytes: cache.bytes_of(CachePriority::Node),
            cache_capacity_bytes: cache.capacity_bytes,
            cache_entries: cache.entries,
            bytes_read: load(&c.bytes_read),
            read_ios: load(&c.read_ios),
            bytes_written: load(&c.bytes_written),
            pages_written: load(&c.pages_written),
            bytes_punched: load(&c.bytes_punched),
            dead_chunk_bytes_punched: load(&c.dead_chunk_bytes_punched),
            syncs: load(&c.syncs),
            commits: load(&c.commits),
            generation: self.versions.current().0,
            live_node_pages: alloc[0].live_count(),
            live_leaf_pages: alloc[1].live_count(),
            free_node_slots: alloc[0].free_count(),
            free_leaf_slots: alloc[1].free_count(),
            pending_free_pages,
            pinned_readers,
        }
    }
}

impl PageIo for PageStore {
    fn write_page(&self, kind: PageKind, bytes: &[u8]) -> Result<PageId> {
        self.check_writable()?;
        if self.versions.has_pending() {
            // Skipped while a commit runs: it reclaims itself, and waiting
            // for its fsyncs would stall the writer.
            if let Some(_serial) = self.commit_lock.try_lock() {
                self.reclaim_locked()?;
            }
        }
        let pf = &self.files[kind_index(kind)];
        let g = pf.geometry;
        if bytes.len() > g.capacity_bytes() {
            return Err(Error::InvalidOptions(format!(
                "a {kind:?} page of {} bytes exceeds the {} bytes a slot holds",
                bytes.len(),
                g.capacity_bytes()
            )));
        }
        let blocks = g.blocks_for(bytes.len());
        // Pages are committed by the next generation; the id's tag says so.
        let generation = self.versions.current().0 + 1;
        let id = self.alloc.lock()[kind_index(kind)]
            .allocate(blocks, generation)
            .ok_or_else(|| Error::Io(io::Error::other("page file has no free slot ids left")))?;
        let mut image = AlignedBuf::zeroed(blocks as usize * g.block_bytes);
        g.encode(id, bytes, &mut image);
        pf.file
            .write_at(&image, pf.offset_of(id))
            .map_err(|e| self.poison_with(e))?;
        pf.dirty.store(true, Ordering::Release);
        if kind == PageKind::Leaf {
            self.punches.lock().page_written(id, g.slot_blocks());
        }
        bump(&self.counters.bytes_written, image.len() as u64);
        bump(&self.counters.pages_written, 1);
        let key = CacheKey {
            page: id.to_raw(),
            part: WHOLE_PAGE,
        };
        if kind == PageKind::Node {
            // The tree reads freshly written nodes on its next batch.
            self.cache
                .insert(key, Bytes::copy_from_slice(bytes), CachePriority::Node);
        } else if self.options.cache_written_leaves && self.cache.has_room_for(bytes.len()) {
            // While the cache has free room (a cache larger than the data,
            // or warming up), leaves and segments go in as they are written,
            // so reads after a checkpoint do not go to disk for them. A full
            // cache keeps what reads put there. The copy is mapped, so its
            // memory goes back to the kernel when it is evicted (or to the
            // next copy, while the cache has room for it).
            let copy = self.cache.mapped_copy(bytes);
            self.cache.insert(key, copy, CachePriority::LeafBlock);
        }
        Ok(id)
    }

    fn read_page(&self, id: PageId, priority: CachePriority) -> Result<Bytes> {
        self.read_whole(id, Some(priority))
    }

    fn prefetch(&self, ranges: &[PageRange], priority: CachePriority) -> Result<()> {
        self.prefetch_ranges(ranges, priority)
    }

    fn streamed_reads(&self, priority: CachePriority) -> Box<dyn StreamedReads + '_> {
        Box::new(RingReads::new(self, priority))
    }

    fn read_range(
        &self,
        id: PageId,
        offset: u64,
        len: u64,
        priority: CachePriority,
    ) -> Result<Bytes> {
        self.read_blocks_range(id, offset, len, Some(priority))
    }

    fn read_page_uncached(&self, id: PageId) -> Result<Bytes> {
        // A cached copy is still used; only a miss is not cached.
        let key = CacheKey {
            page: id.to_raw(),
            part: WHOLE_PAGE,
        };
        match self.cache.get(key) {
            Some(bytes) => Ok(bytes),
            None => self.read_whole(id, None),
        }
    }

    fn read_range_uncached(&self, id: PageId, offset: u64, len: u64) -> Result<Bytes> {
        self.read_blocks_range(id, offset, len, None)
    }

    fn corruption(&self, id: PageId, e: DecodeError) -> Error {
        self.content_corruption(id, e)
    }

    fn corruption_in_file(&self, kind: PageKind, what: String) -> Error {
        Error::corruption(&self.files[kind_index(kind)].path, 0, what)
    }

    fn punched_blocks(&self, id: PageId) -> u32 {
        self.punches.lock().punched_blocks(id)
    }

    fn cached_object(&self, id: PageId, kind: ObjectKind) -> Option<CachedObject> {
        let key = CacheKey {
            page: id.to_raw(),
            part: kind.part(),
        };
        let found = self.cache.get_object(key);
        let miss_counter = match kind {
            ObjectKind::LeafHead => &self.counters.leaf_head_misses,
            ObjectKind::Filter => &self.counters.filter_misses,
            ObjectKind::NodeIndex => &self.counters.cache_misses,
        };
        match found {
            Some(_) => self.counters.cache_hits.add(1),
            None => bump(miss_counter, 1),
        }
        found
    }

    fn cache_object(
        &self,
        id: PageId,
        kind: ObjectKind,
        object: CachedObject,
        size_bytes: u64,
        priority: CachePriority,
    ) {
        let key = CacheKey {
            page: id.to_raw(),
            part: kind.part(),
        };
        self.cache.insert_object(key, object, size_bytes, priority);
    }
}
