//! Batch update driver: loads the nodes it touches (copy-on-write), applies
//! the batch in leaf-sized pieces, reshapes the root, writes the new pages and
//! works out which old pages the new version no longer reaches.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;

use super::cut;
use super::space::ReclaimPlan;
use crate::Result;
use crate::page::{PageId, PageKind, PageRange};
use crate::tree::Tree;
use crate::tree::format::item::{Item, edge_key};
use crate::tree::format::node::{Child, LeafData, Node, Pivot, Segment};

/// What one batch update produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchOutcome {
    /// The new root; `None` for an empty tree.
    pub root: Option<PageId>,
    /// Pages written by this update (all reachable from `root`).
    pub new_pages: Vec<PageId>,
    /// Pages reachable from the old root but not from the new one.
    pub dead_pages: Vec<PageId>,
    /// Content ranges of pages the new root still reaches that no reader
    /// of it reads: segment chunks holding only flushed items
    /// (`dead_chunks`). They may be punched once no reader needs the old
    /// root.
    pub dead_ranges: Vec<PageRange>,
    /// What the update did.
    pub events: UpdateEvents,
}

/// Counts of the structural operations one batch update performed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UpdateEvents {
    /// Batches inserted into a buffer level `k`, which merged levels `0..k`; index `k`.
    pub level_inserts: [u64; 8],
    /// Flushes out of nodes of height `h` (index `h`, capped at 7).
    pub flushes_by_height: [u64; 8],
    /// Leaves rewritten as more than one leaf.
    pub leaf_splits: u64,
    /// Nodes split in two.
    pub node_splits: u64,
    /// Joins of two leaves.
    pub leaf_joins: u64,
    /// Joins of two nodes.
    pub node_joins: u64,
    pub root_grows: u64,
    pub root_shrinks: u64,
    /// Times an update wrote out its new leaves and high-level segments
    /// before its end to bound its memory
    /// (`TreeConfig::spill_after_new_pages`).
    pub spills: u64,
    /// Times a merge into a high buffer level wrote some of its new
    /// segments before its end, to bound its memory (`level_merge.rs`).
    pub level_merge_writes: u64,
    /// Segments shared by two nodes (after a split) that one of them dropped;
    /// the other reference was looked for before reporting the page dead.
    pub shared_segments_dropped: u64,
    /// Leaf and segment pages written, and their content bytes (filters
    /// included).
    pub leaf_pages_written: u64,
    pub leaf_bytes_written: u64,
    /// Bytes of those leaf pages taken by filters.
    pub filter_bytes_written: u64,
    /// Node pages written, and their content bytes.
    pub node_pages_written: u64,
    pub node_bytes_written: u64,
    /// Item bytes buffer merges decoded from stored segments, and the
    /// unflushed ones among them (the rest were read only because they lay
    /// between or around those).
    pub merge_read_item_bytes: u64,
    pub merge_unflushed_item_bytes: u64,
    /// Bytes of puts flushed into leaves, and of the leaf items they
    /// replaced: their ratio estimates how much of what is buffered above
    /// the leaves shadows older data.
    pub leaf_flush_bytes: u64,
    pub leaf_flush_dead_bytes: u64,
    /// The same for tombstones, which are dead themselves and make the
    /// record they delete dead.
    pub leaf_flush_tombstone_bytes: u64,
    pub leaf_flush_tombstone_dead_bytes: u64,
    /// Bytes of tombstones in the update's batch.
    pub batch_tombstone_bytes: u64,
    /// Flushes made to reclaim space (`write/space.rs`).
    pub reclaim_flushes: u64,

    // Compression of the leaf and segment pages written.
    /// Item bytes of their chunks.
    pub compression_input_bytes: u64,
    /// Bytes those chunks take as stored (compressed or not).
    pub compression_output_bytes: u64,
}

impl UpdateEvents {
    /// Adds `other`'s counts to these.
    pub(crate) fn add(&mut self, other: &UpdateEvents) {
        for k in 0..8 {
            self.level_inserts[k] += other.level_inserts[k];
            self.flushes_by_height[k] += other.flushes_by_height[k];
        }
        self.leaf_splits += other.leaf_splits;
        self.node_splits += other.node_splits;
        self.leaf_joins += other.leaf_joins;
        self.node_joins += other.node_joins;
        self.root_grows += other.root_grows;
        self.root_shrinks += other.root_shrinks;
        self.spills += other.spills;
        self.level_merge_writes += other.level_merge_writes;
        self.merge_read_item_bytes += other.merge_read_item_bytes;
        self.merge_unflushed_item_bytes += other.merge_unflushed_item_bytes;
        self.leaf_flush_bytes += other.leaf_flush_bytes;
        self.leaf_flush_dead_bytes += other.leaf_flush_dead_bytes;
        self.leaf_flush_tombstone_bytes += other.leaf_flush_tombstone_bytes;
        self.leaf_flush_tombstone_dead_bytes += other.leaf_flush_tombstone_dead_bytes;
        self.batch_tombstone_bytes += other.batch_tombstone_bytes;
        self.reclaim_flushes += other.reclaim_flushes;
        self.shared_segments_dropped += other.shared_segments_dropped;
        self.leaf_pages_written += other.leaf_pages_written;
        self.leaf_bytes_written += other.leaf_bytes_written;
        self.filter_bytes_written += other.filter_bytes_written;
        self.node_pages_written += other.node_pages_written;
        self.node_bytes_written += other.node_bytes_written;
        self.compression_input_bytes += other.compression_input_bytes;
        self.compression_output_bytes += other.compression_output_bytes;
    }
}

/// State of one batch update.
pub(in crate::tree) struct Update<'a> {
    pub tree: &'a Tree,
    /// Old pages replaced by this update.
    pub dead: Vec<PageId>,
    /// Dropped segments that another node may still reference:
    /// (page, height of the node that dropped it, first key, last key).
    pub shared_dropped: Vec<(PageId, u8, Bytes, Bytes)>,
    pub events: UpdateEvents,
    /// Decoded segments and leaves, so that an update rarely reads a page
    /// twice; bounded by `TreeConfig::decoded_cap_bytes` and emptied at each spill.
    items_cache: HashMap<PageId, (Arc<Vec<Item>>, usize)>,
    /// Item bytes in `items_cache`, kept under `TreeConfig::decoded_cap_bytes`.
    items_cache_bytes: usize,
    /// Pages written before the end of the update (see `write.rs`).
    pub spilled: Vec<PageId>,
}

impl<'a> Update<'a> {
    pub(in crate::tree) fn new(tree: &'a Tree) -> Self {
        Update {
            tree,
            dead: Vec::new(),
            shared_dropped: Vec::new(),
            events: UpdateEvents::default(),
            items_cache: HashMap::new(),
            items_cache_bytes: 0,
            spilled: Vec::new(),
        }
    }

    /// The items of a leaf or segment if this update has them decoded.
    pub(in crate::tree) fn decoded(&self, data: &LeafData) -> Option<Arc<Vec<Item>>> {
        match data {
            LeafData::New(items) => Some(items.clone()),
            LeafData::Stored(r) => self.items_cache.get(&r.id).map(|(items, _)| items.clone()),
        }
    }

    /// Drops the decoded pages kept so far; later reads decode again.
    pub(in crate::tree) fn forget_decoded(&mut self) {
        self.items_cache.clear();
        self.items_cache_bytes = 0;
    }

    /// The items of a leaf or segment.
    pub(in crate::tree) fn items(&mut self, data: &LeafData) -> Result<Arc<Vec<Item>>> {
        match data {
            LeafData::New(items) => Ok(items.clone()),
            LeafData::Stored(r) => {
                if let Some((items, _)) = self.items_cache.get(&r.id) {
                    return Ok(items.clone());
                }
                let items = Arc::new(self.tree.read_leaf_items(r)?);
                let item_bytes = crate::tree::format::item::total_size_bytes(&items);
                if self.items_cache_bytes + item_bytes > self.tree.config.decoded_cap_bytes() {
                    // Wholesale: the pages of the node being flushed come
                    // back at once, older ones are rarely needed again.
                    self.forget_decoded();
                }
                self.items_cache_bytes += item_bytes;
                self.items_cache.insert(r.id, (items.clone(), item_bytes));
                Ok(items)
            }
        }
    }

    /// Makes the child at `p` an in-memory node (reading it if stored, which
    /// retires its old page) and returns it.
    pub(in crate::tree) fn child_node<'n>(
        &mut self,
        node: &'n mut Node,
        p: usize,
    ) -> Result<&'n mut Node> {
        let (lo, hi) = node.pivot_range(p);
        let (lo, hi) = (lo.clone(), hi.cloned());
        let (height, page) = (node.height, node.page);
        let child = &mut node.pivots[p].child;
        if let Child::StoredNode(id) = child {
            let id = *id;
            let mut loaded = self.tree.read_node(id)?;
            if loaded.height + 1 != height {
                return Err(self.tree.corrupt_height(id));
            }
            loaded.range_lo = lo;
            loaded.range_hi = hi;
            // Its range is known only now.
            loaded
                .check_range()
                .map_err(|reason| self.tree.corrupt_page(id, reason))?;
            self.dead.push(id);
            *child = Child::Node(Box::new(loaded));
        }
        match child {
            Child::Node(n) => Ok(n),
            _ => Err(self.tree.corrupt_buffer(
                page,
                height,
                format!("pivot {p} holds a leaf, not a node"),
            )),
        }
    }

    /// Takes a leaf child's items out, retiring its page.
    pub(in crate::tree) fn take_leaf(&mut self, child: &Child) -> Result<Arc<Vec<Item>>> {
        match child {
            Child::Leaf(data) => {
                let items = self.items(data)?;
                if let LeafData::Stored(r) = data {
                    self.dead.push(r.id);
                    // Taken leaves are not read again: keep no decoded copy.
                    if let Some((_, item_bytes)) = self.items_cache.remove(&r.id) {
                        self.items_cache_bytes -= item_bytes;
                    }
                }
                Ok(items)
            }
            // Never read from a page (a node of height 1 decodes to leaf
            // children only): a node this update built.
            _ => Err(self.tree.io.corruption_in_file(
                PageKind::Node,
                "an update's node holds a node where a leaf belongs (offset 0 stands for \
                 no page)"
                    .into(),
            )),
        }
    }

    /// Records that `seg` left a node of `height`.
    pub(in crate::tree) fn drop_segment(&mut self, seg: &Segment, height: u8) -> Result<()> {
        if let LeafData::Stored(r) = &seg.data {
            if seg.shared {
                // Only its edge keys are needed: two chunks, not the page.
                let (first, last) = match self.decoded(&seg.data) {
                    Some(items) => (edge_key(items.first()), edge_key(items.last())),
                    None => self.tree.read_leaf_edge_keys(r)?,
                };
                self.shared_dropped.push((r.id, height, first, last));
                self.events.shared_segments_dropped += 1;
            } else {
                self.dead.push(r.id);
            }
        }
        Ok(())
    }
}

fn empty_root() -> Node {
    Node {
        height: 1,
        pivots: vec![Pivot {
            lower: Bytes::new(),
            child: Child::Leaf(LeafData::New(Arc::new(Vec::new()))),
            pending_bytes: 0,
        }],
        segments: Vec::new(),
        range_lo: Bytes::new(),
        range_hi: None,
        page: None,
    }
}

impl Tree {
    #[cfg(test)]
    /// Applies `batch` (sorted by key, unique keys; `None` = delete) to the
    /// tree at `root` and writes the new version. The old version stays
    /// readable; its pages in `dead_pages` may be freed once no reader needs it.
    pub(crate) fn apply_batch<V: Clone + Into<crate::values::Value>>(
        &self,
        root: Option<PageId>,
        batch: &[(Bytes, Option<V>)],
    ) -> Result<BatchOutcome> {
        let items: Vec<Item> = batch
            .iter()
            .map(|(k, v)| Item {
                key: k.clone(),
                value: v.clone().map(Into::into),
            })
            .collect();
        self.apply_items(root, items, &ReclaimPlan::default())
    }

    /// `apply_batch` on items it may consume (no copy of the batch), then
    /// the space reclamation `plan` asks for (`write/space.rs`).
    pub(crate) fn apply_items(
        &self,
        root: Option<PageId>,
        items: Vec<Item>,
        plan: &ReclaimPlan,
    ) -> Result<BatchOutcome> {
        debug_assert!(
            items.windows(2).all(|w| w[0].key < w[1].key),
            "batch must be sorted with unique keys"
        );
        let reclaims = plan.budget_bytes > 0 && !plan.targets.is_empty();
        if items.is_empty() && (!reclaims || root.is_none()) {
            return Ok(BatchOutcome {
                root,
                new_pages: Vec::new(),
                dead_pages: Vec::new(),
                dead_ranges: Vec::new(),
                events: UpdateEvents::default(),
            });
        }
        let mut up = Update::new(self);
        up.events.batch_tombstone_bytes = items
            .iter()
            .filter(|it| it.value.is_none())
            .map(|it| it.size_bytes() as u64)
            .sum();
        let mut node = match root {
            Some(id) => {
                up.dead.push(id);
                self.read_node(id)?
            }
            None => empty_root(),
        };
        for piece in cut::cut_batch(items, self.config.leaf_max_bytes) {
            up.insert_and_flush(&mut node, piece)?;
            up.spill_if_large(&mut node)?;
        }
        if reclaims {
            up.reclaim(&mut node, plan)?;
        }
        // Grow: split the root until it fits, adding a level each time.
        loop {
            let height = node.height;
            let pieces = up.split_node(node)?;
            if pieces.len() == 1 {
                node = pieces.into_iter().next().expect("one piece").1;
                break;
            }
            let pivots = pieces
                .into_iter()
                .map(|(lower, n)| Pivot {
                    lower,
                    child: Child::Node(Box::new(n)),
                    pending_bytes: 0,
                })
                .collect();
            up.events.root_grows += 1;
            if height >= 32 {
                // Only keys too long for the node size keep a root splitting.
                return Err(crate::Error::InvalidOptions(format!(
                    "node_size_bytes is too small for these keys: the root still overflows at height {height}"
                )));
            }
            node = Node {
                height: height + 1,
                pivots,
                segments: Vec::new(),
                range_lo: Bytes::new(),
                range_hi: None,
                page: None,
            };
            // A half can be left small: a split joins a small leaf that
            // becomes the last of its half with its left neighbour. Below
            // any other parent, the flush that split it looks at it again.
            let children = node.pivots.len();
            up.fix_underfull(&mut node, 0, children)?;
        }
        // Shrink: a root with one child and an empty buffer is replaced by it.
        while node.height > 1 && node.pivots.len() == 1 && node.segments.is_empty() {
            up.child_node(&mut node, 0)?;
            match node.pivots.pop().map(|p| p.child) {
                Some(Child::Node(child)) => {
                    up.events.root_shrinks += 1;
                    node = *child;
                }
                _ => unreachable!("child_node made pivot 0 an in-memory node"),
            }
        }
        let empty = node.height == 1
            && node.pivots.len() == 1
            && node.segments.is_empty()
            && up.leaf_is_empty(&node.pivots[0].child)?;
        if empty && let Child::Leaf(LeafData::Stored(r)) = &node.pivots[0].child {
            up.dead.push(r.id);
        }
        let dead_shared = up.resolve_shared_dropped(&node)?;
        let dead_ranges = if empty {
            Vec::new()
        } else {
            up.dead_segment_ranges(&node)?
        };
        let (root, mut new_pages) = if empty {
            (None, Vec::new())
        } else {
            let (id, pages) = up.write_tree(node)?;
            (Some(id), pages)
        };
        let mut seen = HashSet::new();
        let dead_pages: Vec<PageId> = up
            .dead
            .into_iter()
            .chain(dead_shared)
            .filter(|id| seen.insert(*id))
            .collect();
        // Spilled pages that the update replaced later are dead already;
        // the others are part of the new version.
        new_pages.extend(up.spilled.into_iter().filter(|id| !seen.contains(id)));
        Ok(BatchOutcome {
            root,
            new_pages,
            dead_pages,
            dead_ranges,
            events: up.events,
        })
    }
}

impl Update<'_> {
    fn leaf_is_empty(&mut self, child: &Child) -> Result<bool> {
        match child {
            Child::Leaf(data) => Ok(self.items(data)?.is_empty()),
            _ => Ok(false),
        }
    }
}
