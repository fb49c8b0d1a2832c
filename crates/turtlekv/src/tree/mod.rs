//! The TurtleTree: a B-epsilon-plus tree whose nodes hold pivots and an
//! update buffer of level-tiered segments (`docs/design.md`; TurtleKV paper §3).
//!
//! The tree is updated only in sorted batches, copy-on-write: `apply_batch`
//! takes a root and returns a new root plus the pages it wrote and the pages
//! of the old version it no longer reaches. Reads (`get`, `scan`) and the
//! invariant checker work on any stored root. Storage is reached only through
//! [`PageIo`]. Byte layouts are in `docs/format.md`.
//!
//! Use from the store layer (`store::PagedTreeStore`):
//! - `Tree::new(io, TreeConfig::new(node_size, leaf_size, filter_bits, budget))`;
//! - `tree.apply_batch(root, &sorted_unique_batch)` with the whole frozen
//!   MemTable (it is cut into leaf-sized pieces internally and only the final
//!   state is written; new leaves are serialised in parallel with rayon) →
//!   `BatchOutcome { root, new_pages, dead_pages, events }`. Commit `root`
//!   (8 bytes, `PageId::to_raw`; `None` = empty tree), then free
//!   `dead_pages` once no reader holds the old root;
//! - `tree.get_with_root_memo(root, &root_memo, key)` (`tree.get(root, key)`
//!   in tests), `tree.scan(root, lower, upper, reverse)` (an
//!   iterator of `Result<(key, value)>`), `tree.check(root)` (deep, reads
//!   everything: `TreeStats`), `tree.shape(root)` (node pages only);
//! - `referenced_pages(node_page_bytes)` lists the pages a node page
//!   references, for the page store's live-set walk at open.
//!
//! The code is in three parts: `format/` (the byte layouts of items, leaf
//! pages and node pages, and their in-memory forms), `read/` (lookups and
//! scans) and `write/` (the batch update).

pub(crate) mod check;
pub(crate) mod count;
pub(crate) mod format;
#[cfg(any(test, feature = "sim"))]
pub(crate) mod fuzz_hook;
pub(crate) mod read;
pub(crate) mod shape;
#[cfg(test)]
mod tests;
pub(crate) mod write;

/// What a stored version remembers of its root's node index, so that its
/// gets need not ask the page cache even for that (`memo`).
pub(crate) type RootMemo = memo::Memo<probe::NodeIndex>;

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;

pub(crate) use format::item::Item;
pub(crate) use format::item_layout::ItemLayout;
pub(crate) use format::node_codec::referenced_pages;
pub(crate) use read::scan::ScanCursor;
pub(crate) use shape::{NodeSpace, TreeShape};
pub(crate) use write::space::ReclaimPlan;
pub(crate) use write::update::{BatchOutcome, UpdateEvents};

use format::{chunk, leaf, leaf_head, node};
use read::{memo, probe};

use crate::error::DecodeError;
use crate::page::{CachePriority, ObjectKind, PageId, PageIo, PageKind};
use crate::{Error, Result};

/// Sizes the tree works with, derived from the page sizes and the page
/// store's page format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TreeConfig {
    /// Largest leaf/segment page contents, in bytes.
    pub leaf_max_bytes: usize,
    /// A non-root leaf smaller than this is joined with a neighbour.
    pub leaf_min_bytes: usize,
    /// Largest node page contents, in bytes.
    pub node_max_bytes: usize,
    /// Block size inside leaves: the unit a point lookup reads.
    pub block_size_bytes: usize,
    /// Size of a page-store block of the leaf file, trailer included: what
    /// one block of a leaf or segment page occupies on disk.
    pub leaf_block_bytes: usize,
    /// Size of a leaf slot in the page file (`leaf_size_bytes`).
    pub leaf_slot_bytes: usize,
    pub filter_bits_per_key: u32,
    /// New leaves and high-level segments a batch update holds in memory
    /// before it writes them out, so that its memory does not grow with
    /// its output.
    pub spill_after_new_pages: usize,
    /// How new leaf and segment pages compress their chunks.
    pub compression: crate::Compression,
}

/// A batch update's new pages in memory before it spills them: a
/// sixteenth of the memory budget, at most this many bytes...
const SPILL_MAX_BYTES: u64 = 32 << 20;
/// ...and at least this many pages.
const SPILL_MIN_PAGES: u64 = 2;

/// `TreeConfig::spill_after_new_pages` for a memory budget, fixed at
/// open: 8 pages of 2 MiB for the default 256 MiB budget.
fn spill_after_new_pages(leaf_size_bytes: u64, budget_bytes: u64) -> usize {
    let bytes = (budget_bytes / 16).min(SPILL_MAX_BYTES);
    (bytes / leaf_size_bytes).max(SPILL_MIN_PAGES) as usize
}

impl TreeConfig {
    /// The sizes of a tree on pages of `node_size_bytes` and
    /// `leaf_size_bytes` (the page store's slots), whose updates may hold
    /// a share of a `budget_bytes` memory budget.
    pub(crate) fn new(
        node_size_bytes: u64,
        leaf_size_bytes: u64,
        filter_bits_per_key: u32,
        budget_bytes: u64,
    ) -> Self {
        // The page store's largest page contents (its blocks and header take
        // the rest of a slot).
        let (node, leaf) = (node_size_bytes, leaf_size_bytes);
        let leaf_max_bytes = crate::page::max_page_bytes(PageKind::Leaf, node, leaf);
        let node_max_bytes = crate::page::max_page_bytes(PageKind::Node, node, leaf);
        // Blocks equal to the page store's block payload make a chunk read one
        // store block; small (test) leaves use proportionally small blocks.
        let block_size_bytes = if leaf_size_bytes >= 64 * 1024 {
            4088
        } else {
            (leaf_size_bytes / 16) as usize
        };
        TreeConfig {
            leaf_max_bytes,
            leaf_min_bytes: leaf_size_bytes as usize / 4,
            node_max_bytes,
            block_size_bytes,
            leaf_block_bytes: crate::page::block_bytes(PageKind::Leaf, node, leaf),
            leaf_slot_bytes: leaf as usize,
            filter_bits_per_key,
            spill_after_new_pages: spill_after_new_pages(leaf_size_bytes, budget_bytes),
            compression: crate::Compression::default(),
        }
    }

    /// These sizes with new pages compressed as `compression` says.
    pub(crate) fn with_compression(self, compression: crate::Compression) -> Self {
        TreeConfig {
            compression,
            ..self
        }
    }

    /// Most item bytes of decoded pages a batch update keeps for reuse:
    /// twice what it may hold in new pages. Beyond it, pages are read again.
    pub(crate) fn decoded_cap_bytes(&self) -> usize {
        2 * self.spill_after_new_pages * self.leaf_max_bytes
    }

    /// What one batch update may hold whatever its batch's size, as far as
    /// its caps count it: the new leaves and level-3+ segments it keeps
    /// before a spill, and its decoded pages. A flush that rewrites a few
    /// leaves for a small batch reaches it as readily as a full one, so a
    /// small checkpoint reserves it on top of its batch
    /// (`db::budget::checkpoint_reserve_bytes`). An estimate, not a bound: new
    /// segments of levels 0-2, the source pages that decoded items and new
    /// pages still point into, and each item's handle (64 bytes) come on
    /// top. Fixed at open, as the spill size is.
    pub(crate) fn update_memory_estimate_bytes(&self) -> u64 {
        (self.spill_after_new_pages * self.leaf_max_bytes + self.decoded_cap_bytes()) as u64
    }

    /// Largest item (encoded length) a leaf page can hold on its
    /// own: head, one-key filter and block alignment included. The engine
    /// should reject larger writes up front (a 4 KiB leaf holds ~3.7 KiB
    /// items; 2 MiB leaves hold `MAX_KEY_SIZE + MAX_INLINE_VALUE_BYTES` easily).
    pub(crate) fn max_item_bytes(&self) -> usize {
        let blocks = self.leaf_max_bytes / self.block_size_bytes;
        let head = leaf::HEADER_BYTES + leaf::INDEX_ENTRY_FIXED_BYTES + 4 * blocks;
        let filter = crate::filter::max_encoded_len(1, self.filter_bits_per_key);
        let data_offset = (head + filter + 16).next_multiple_of(self.block_size_bytes) - 16;
        (self.leaf_max_bytes - data_offset) / self.block_size_bytes * self.block_size_bytes
    }

    /// Longest stored key (keyspace tag included) this node size takes (at
    /// most `MAX_STORED_KEY_BYTES`): four
    /// pivots with such keys fit one node page. Then a node's buffer can
    /// always be flushed down to pivots that fit, and a node that must split
    /// has at least five pivots, so each half keeps two. With longer keys a
    /// root of two pivots could overflow its page and split at every level
    /// (docs/tuning.md, `node_size_bytes`). The engine refuses longer keys.
    pub(crate) fn max_key_bytes(&self) -> usize {
        let per_pivot_bytes = self.node_max_bytes.saturating_sub(node::HEADER_BYTES) / 4;
        let entry_overhead_bytes = node::pivot_entry_bytes(1, 1, &[]);
        per_pivot_bytes
            .saturating_sub(entry_overhead_bytes)
            .min(crate::key::MAX_STORED_KEY_BYTES)
    }

    /// A node whose pivots take more than this splits.
    pub(crate) fn node_pivot_max_bytes(&self) -> usize {
        self.node_max_bytes / 2
    }

    /// A non-root node whose pivots take less than this is joined or rebalanced
    /// (half of what a freshly split node holds).
    pub(crate) fn node_pivot_min_bytes(&self) -> usize {
        self.node_max_bytes / 8
    }
}

/// The tree over one page store. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Tree {
    io: Arc<dyn PageIo>,
    config: TreeConfig,
}

/// A copy of bytes the page cache keeps as (part of) a decoded object.
///
/// Why: a range read may return a slice of a whole cached page, and a slice
/// keeps all of its buffer alive. A head or filter cached as such a slice
/// would, once the page cache evicts the 2 MiB page, hold it resident while
/// charged only for its own ~20 KiB: measured out of cache, peak RSS rose
/// from 530-690 MiB to 825-900 MiB when whole pages began to be evicted
/// during reads.
fn owned(bytes: Bytes) -> Bytes {
    Bytes::copy_from_slice(&bytes)
}

/// A leaf's filter as the page cache keeps it, with where it was read
/// from: the offset comes from the node that referenced the page, and a
/// damaged node's must not decide what a healthy one's lookups read.
#[derive(Debug)]
struct CachedFilter {
    /// The filter starts at this offset of the page (the head's length).
    head_len: u32,
    bytes: Bytes,
}

impl Tree {
    /// The corruption error for damage a decoder found in page `id`'s
    /// contents: the page store names the page's file and the damaged
    /// byte's offset in it (`PageIo::corruption`).
    fn corrupt(&self, id: PageId, e: DecodeError) -> Error {
        self.io.corruption(id, e)
    }

    /// The corruption error for what page `id` shows as a whole (its place
    /// in the tree, or what the checker finds across its items), not one
    /// field of it: at the start of its contents.
    fn corrupt_page(&self, id: PageId, what: impl Into<Cow<'static, str>>) -> Error {
        self.corrupt(id, DecodeError::new(0, what))
    }

    /// A child whose height contradicts its parent's: at the child's
    /// height field.
    fn corrupt_height(&self, child: PageId) -> Error {
        self.corrupt(
            child,
            DecodeError::new(node::HEIGHT_AT, "node: height does not match its parent's"),
        )
    }

    /// Damage found while an update works on a node in memory (a node
    /// read from a page whose checksum holds: a crafted file or a writer's
    /// bug), the node's `page` and `height` given. It names the page the
    /// node's pivots and counts were read from, at the start of its
    /// contents; a node this update built or joined from two stored nodes
    /// has no one such page, and the error says so and names the node
    /// file only.
    fn corrupt_buffer(
        &self,
        page: Option<PageId>,
        height: u8,
        what: impl std::fmt::Display,
    ) -> Error {
        match page {
            Some(id) => {
                self.corrupt_page(id, format!("node of height {height} being updated: {what}"))
            }
            None => self.io.corruption_in_file(
                PageKind::Node,
                format!(
                    "node of height {height} being updated, built or joined from two pages by \
                     the update (no one page to name; offset 0 stands for none): {what}"
                ),
            ),
        }
    }
}

impl Tree {
    pub(crate) fn new(io: Arc<dyn PageIo>, config: TreeConfig) -> Self {
        Tree { io, config }
    }

    pub(crate) fn config(&self) -> &TreeConfig {
        &self.config
    }

    /// Reads and decodes a node page.
    fn read_node(&self, id: PageId) -> Result<node::Node> {
        let bytes = self.io.read_page(id, CachePriority::Node)?;
        let mut node = node::Node::decode(&bytes).map_err(|e| self.corrupt(id, e))?;
        node.page = Some(id);
        Ok(node)
    }

    /// A node page's lookup index: from the page cache, or read (its blocks
    /// verified), parsed and cached. The raw page is not cached besides.
    fn read_node_index(&self, id: PageId) -> Result<Arc<probe::NodeIndex>> {
        Ok(self.read_node_index_cached(id)?.0)
    }

    /// `read_node_index`, and whether the index came from the page cache
    /// (a memo remembers only what the cache holds: `memo`).
    fn read_node_index_cached(&self, id: PageId) -> Result<(Arc<probe::NodeIndex>, bool)> {
        if let Some(index) = self.io.cached_object(id, ObjectKind::NodeIndex)
            && let Ok(index) = index.downcast::<probe::NodeIndex>()
        {
            return Ok((index, true));
        }
        let bytes = self.io.read_page_uncached(id)?;
        let index = probe::NodeIndex::parse(bytes).map_err(|e| self.corrupt(id, e))?;
        let index = Arc::new(index);
        let size_bytes = index.memory_bytes();
        self.io.cache_object(
            id,
            ObjectKind::NodeIndex,
            index.clone(),
            size_bytes,
            CachePriority::Node,
        );
        Ok((index, false))
    }

    /// The decoded head of a stored leaf: from the page cache, where it is
    /// kept decoded and verified, or read, verified and cached.
    fn read_leaf_head(&self, r: &node::LeafRef) -> Result<Arc<leaf::LeafHead>> {
        Ok(self.read_leaf_head_cached(r)?.0)
    }

    /// `read_leaf_head`, and whether the head came from the page cache.
    fn read_leaf_head_cached(&self, r: &node::LeafRef) -> Result<(Arc<leaf::LeafHead>, bool)> {
        // A head cached through another reference to the page (a damaged
        // node's) with other lengths is read again as on a miss: the
        // cache must not change what a reference reads.
        if let Some(head) = self.io.cached_object(r.id, ObjectKind::LeafHead)
            && let Ok(head) = head.downcast::<leaf::LeafHead>()
            && head.filter_len == r.filter_len
            && head.head_len == r.head_len
        {
            return Ok((head, true));
        }
        let bytes = owned(
            self.io
                .read_range_uncached(r.id, 0, u64::from(r.head_len))?,
        );
        let decoded = leaf::LeafHead::decode(&bytes).map_err(|e| self.corrupt(r.id, e))?;
        self.check_lens(r, &decoded)?;
        let head = Arc::new(decoded);
        let size_bytes = head.memory_bytes();
        self.io.cache_object(
            r.id,
            ObjectKind::LeafHead,
            head.clone(),
            size_bytes,
            CachePriority::LeafHead,
        );
        Ok((head, false))
    }

    /// The filter of a stored leaf as one contiguous buffer (it may span
    /// several blocks), cached whole. Handed out as the cache's own `Arc`:
    /// a lookup probes several filters, and cloning the `Bytes` inside
    /// each would touch one more shared counter, on a cache line of its
    /// own, per probe.
    /// Returned with whether it came from the page cache (`memo`).
    fn read_filter_cached(&self, r: &node::LeafRef) -> Result<(Arc<CachedFilter>, bool)> {
        // As for heads: a filter cached through a reference that placed it
        // elsewhere in the page is not what this one reads.
        if let Some(filter) = self.io.cached_object(r.id, ObjectKind::Filter)
            && let Ok(filter) = filter.downcast::<CachedFilter>()
            && filter.head_len == r.head_len
            && filter.bytes.len() as u64 == u64::from(r.filter_len)
        {
            return Ok((filter, true));
        }
        let bytes = owned(self.io.read_range_uncached(
            r.id,
            u64::from(r.head_len),
            u64::from(r.filter_len),
        )?);
        let size_bytes = bytes.len() as u64;
        let filter = Arc::new(CachedFilter {
            head_len: r.head_len,
            bytes,
        });
        self.io.cache_object(
            r.id,
            ObjectKind::Filter,
            filter.clone(),
            size_bytes,
            CachePriority::Filter,
        );
        Ok((filter, false))
    }

    /// Reads one chunk of a stored leaf into `out`.
    fn read_chunk(
        &self,
        r: &node::LeafRef,
        head: &leaf::LeafHead,
        chunk: usize,
        out: &mut chunk::ChunkItems,
    ) -> Result<()> {
        let (offset, len) = head.chunk_range(chunk);
        let bytes = self
            .io
            .read_range(r.id, offset, len, CachePriority::LeafBlock)?;
        head.open_chunk(chunk, bytes, out)
            .map_err(|e| self.corrupt(r.id, e))
    }

    /// Checks a leaf head against the node's reference to its page: a
    /// lookup reads the head and the filter by the reference's lengths,
    /// and a damaged node's must not decide what a healthy one's read. At
    /// the page's length field that differs.
    fn check_lens(&self, r: &node::LeafRef, head: &leaf::LeafHead) -> Result<()> {
        let at = if head.head_len != r.head_len {
            leaf_head::HEAD_LEN_AT
        } else if head.filter_len != r.filter_len {
            leaf_head::FILTER_LEN_AT
        } else {
            return Ok(());
        };
        Err(self.corrupt(
            r.id,
            DecodeError::new(
                at,
                format!(
                    "leaf head: head or filter length ({}, {}) differs from the node's reference ({}, {})",
                    head.head_len, head.filter_len, r.head_len, r.filter_len
                ),
            ),
        ))
    }

    /// Reads every item of a stored leaf.
    /// Batch updates read whole leaves once and keep their items; caching
    /// the pages as well would flush the blocks that point reads keep hot.
    fn read_leaf_items(&self, r: &node::LeafRef) -> Result<Vec<Item>> {
        let page: Bytes = self.io.read_page_uncached(r.id)?;
        if page.len() < r.head_len as usize {
            return Err(self.corrupt_page(
                r.id,
                format!(
                    "leaf page of {} bytes is shorter than the {}-byte head its node names",
                    page.len(),
                    r.head_len
                ),
            ));
        }
        let head = leaf::LeafHead::decode(&page.slice(..r.head_len as usize))
            .map_err(|e| self.corrupt(r.id, e))?;
        // As for lookups (`read_leaf_head`): `check()` reads pages this way,
        // and must not pass a reference that lookups refuse.
        if head.filter_len != r.filter_len {
            self.check_lens(r, &head)?;
        }
        head.decode_all(&page).map_err(|e| self.corrupt(r.id, e))
    }
}
