//! The deep invariant checker: reads and verifies every page of a tree
//! version and every structural rule the update code relies on.

use std::collections::HashSet;

use bytes::Bytes;

use crate::Result;
use crate::error::DecodeError;
use crate::filter;
use crate::page::{CachePriority, PageId};
use crate::tree::Tree;
use crate::tree::format::item::{Item, total_size_bytes};
use crate::tree::format::leaf::LeafHead;
use crate::tree::format::node::{Child, LeafData, LeafRef, MAX_LEVELS, Node, Segment};
use crate::tree::write::cut;

/// Shape of a tree version, as the checker found it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TreeStats {
    /// Node levels above the leaves (0 for an empty tree).
    pub height: u32,
    pub node_pages: u64,
    pub leaf_pages: u64,
    /// Distinct segment pages (a shared segment counts once).
    pub segment_pages: u64,
    pub leaf_items: u64,
    /// Unflushed items in all buffers (several versions of a key count each).
    pub buffered_items: u64,
}

struct Checker<'a> {
    tree: &'a Tree,
    stats: TreeStats,
    segments_seen: HashSet<PageId>,
}

impl Tree {
    /// Verifies every page checksum and invariant of the tree at `root`:
    /// key order, pivot ranges, flushed bounds, active sets, pending bytes,
    /// buffer bound, node and leaf fill, page sizes.
    pub(crate) fn check(&self, root: Option<PageId>) -> Result<TreeStats> {
        let Some(root) = root else {
            return Ok(TreeStats::default());
        };
        let mut checker = Checker {
            tree: self,
            stats: TreeStats::default(),
            segments_seen: HashSet::new(),
        };
        let node = self.read_node(root)?;
        checker.stats.height = u32::from(node.height);
        if node.height > 1 && node.pivots.len() < 2 {
            return Err(self.corrupt_page(root, "root above height 1 with a single child"));
        }
        checker.node(root, node, Bytes::new(), None, true)?;
        Ok(checker.stats)
    }
}

impl Checker<'_> {
    fn node(
        &mut self,
        id: PageId,
        mut node: Node,
        lo: Bytes,
        hi: Option<Bytes>,
        is_root: bool,
    ) -> Result<()> {
        let config = self.tree.config;
        let tree = self.tree;
        let fail = |reason: String| Err(tree.corrupt_page(id, reason));
        self.stats.node_pages += 1;
        node.range_lo = lo;
        node.range_hi = hi;
        node.check_range()
            .map_err(|reason| self.tree.corrupt_page(id, reason))?;
        if node.encoded_len() > config.node_max_bytes || node.should_split(&config) {
            return fail(format!(
                "node of {} bytes ({} in pivots) overflows",
                node.encoded_len(),
                node.pivot_bytes()
            ));
        }
        if !is_root && node.pivot_bytes() < config.node_pivot_min_bytes() {
            return fail(format!(
                "non-root node underfull: {} pivot bytes",
                node.pivot_bytes()
            ));
        }
        for p in 1..node.pivots.len() {
            let key = &node.pivots[p].lower;
            let above_lo = node.range_lo.is_empty() || *key > node.range_lo;
            if !above_lo || node.range_hi.as_ref().is_some_and(|h| key >= h) {
                return fail(format!("pivot {p} key outside the node's range"));
            }
        }
        let bound = config.leaf_max_bytes as u64 * (node.pivots.len() as u64 - 1);
        if node.total_pending_bytes() > bound {
            return fail(format!(
                "buffer holds {} bytes, bound {bound}",
                node.total_pending_bytes()
            ));
        }
        self.buffer(id, &node)?;
        // Leaf fill: an underfull leaf is allowed only when joining it with
        // the neighbour the update joins it with (the right one, else the
        // left) would not fit a page, e.g. next to a leaf of huge values.
        let (mut underfull, mut joinable, mut prev_items) = (Vec::new(), Vec::new(), None);
        for p in 0..node.pivots.len() {
            let (plo, phi) = node.pivot_range(p);
            let (plo, phi) = (plo.clone(), phi.cloned());
            match &node.pivots[p].child {
                Child::StoredNode(child) => {
                    let child_node = self.tree.read_node(*child)?;
                    if child_node.height + 1 != node.height {
                        return Err(self.tree.corrupt_height(*child));
                    }
                    self.node(*child, child_node, plo, phi, false)?;
                }
                Child::Leaf(LeafData::Stored(r)) if node.height == 1 => {
                    let items = self.leaf(r, &plo, phi.as_ref())?;
                    let config = &self.tree.config;
                    underfull.push(cut::leaf_page_bytes(&items, config) < config.leaf_min_bytes);
                    if let Some(prev) = prev_items.take() {
                        let mut both: Vec<Item> = prev;
                        both.extend(items.iter().cloned());
                        joinable.push(cut::leaf_page_bytes(&both, config) <= config.leaf_max_bytes);
                    }
                    prev_items = Some(items);
                }
                _ => return fail("child kind does not match the node's height".into()),
            }
        }
        for (i, small) in underfull.iter().enumerate() {
            let pair = if i < joinable.len() {
                Some(i)
            } else {
                i.checked_sub(1)
            };
            if *small && pair.is_some_and(|j| joinable[j]) {
                return fail(format!(
                    "leaf {i} of {} is underfull and could join its neighbour",
                    underfull.len()
                ));
            }
        }
        Ok(())
    }

    /// Segments: levels, active sets, flushed bounds, pending bytes, and
    /// uniqueness of live keys within a level. A segment is read pivot by
    /// pivot, from the chunk below its flushed bound to its upper bound:
    /// the chunks that only hold flushed items may be punched out of the
    /// page (`write::dead_chunks`), and no reader reads them.
    fn buffer(&mut self, id: PageId, node: &Node) -> Result<()> {
        let mut pending = vec![0u64; node.pivots.len()];
        let mut level_last: Vec<Option<Bytes>> = vec![None; MAX_LEVELS as usize];
        for seg in &node.segments {
            let LeafData::Stored(r) = &seg.data else {
                unreachable!("decoded nodes reference stored segments");
            };
            let head = self.tree.read_leaf_head(r)?;
            if head.item_count != seg.item_count {
                return Err(self.tree.corrupt_page(
                    r.id,
                    format!(
                        "segment of {} items, its entry in node {:#x} says {}",
                        head.item_count,
                        id.to_raw(),
                        seg.item_count
                    ),
                ));
            }
            if self.segments_seen.insert(r.id) {
                self.stats.segment_pages += 1;
            }
            let filter = self.filter(r)?;
            for (p, pivot_pending) in pending.iter_mut().enumerate() {
                if seg.bounds[p].is_none() {
                    continue;
                }
                let (first_index, items) = self.pivot_part(node, seg, r, p)?;
                let live = node.unflushed_range_in_span(seg, p, &items, first_index);
                self.flushed_bound(id, seg, (r, &head), p)?;
                if live.is_empty() {
                    return Err(self.tree.corrupt_page(
                        id,
                        format!(
                            "segment {:#x}: pivot {p} active flag disagrees with its unflushed items",
                            r.id.to_raw()
                        ),
                    ));
                }
                let live_items = &items[live.clone()];
                if let Some(f) = &filter
                    && !live_items
                        .iter()
                        .all(|it| f.may_contain(filter::key_hash(&it.key)))
                {
                    let at = DecodeError::new(0, "filter rejects a key the page holds");
                    return Err(self.tree.corrupt(r.id, at.within(u64::from(r.head_len))));
                }
                *pivot_pending += total_size_bytes(live_items) as u64;
                self.stats.buffered_items += live.len() as u64;
                if let Some(first) = live_items.first() {
                    let last_key = &mut level_last[seg.level as usize];
                    if last_key.as_ref().is_some_and(|k| *k >= first.key) {
                        return Err(self.tree.corrupt_page(
                            id,
                            format!("level {} holds a key twice or out of order", seg.level),
                        ));
                    }
                    *last_key = Some(items[live.end - 1].key.clone());
                }
            }
        }
        for (p, bytes) in pending.iter().enumerate() {
            if *bytes != node.pivots[p].pending_bytes {
                return Err(self.tree.corrupt_page(
                    id,
                    format!(
                        "pivot {p}: pending bytes {} but buffer holds {bytes}",
                        node.pivots[p].pending_bytes
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Pivot `p`'s part of segment `seg` from its unflushed start, and the
    /// index of the first item: what a flush of the pivot reads.
    fn pivot_part(
        &mut self,
        node: &Node,
        seg: &Segment,
        r: &LeafRef,
        p: usize,
    ) -> Result<(usize, Vec<Item>)> {
        let (lo, _) = node.unflushed_start(seg, p);
        let hi = node.pivot_range(p).1;
        self.tree.read_leaf_span(r, lo, hi.map(|h| h.as_ref()))
    }

    /// The flushed bound of pivot `p`, if any, separates the items around
    /// it: read from the chunks that hold them.
    fn flushed_bound(
        &mut self,
        id: PageId,
        seg: &Segment,
        (r, head): (&LeafRef, &LeafHead),
        p: usize,
    ) -> Result<()> {
        let Some(f) = seg.bounds[p].as_ref().filter(|f| f.index > 0) else {
            return Ok(());
        };
        let first = head.chunk_of_item_from(0, f.index - 1);
        let last = head.chunk_of_item_from(first, f.index);
        let (first_index, items) = self
            .tree
            .read_chunk_run(r, head, first..last + 1, &[], None)?;
        let i = (f.index as usize)
            .checked_sub(first_index)
            .filter(|&i| i > 0);
        let separates = i.is_some_and(|i| {
            items.get(i - 1).is_some_and(|below| below.key < f.key)
                && items.get(i).is_none_or(|it| it.key >= f.key)
        });
        if separates {
            return Ok(());
        }
        Err(self.tree.corrupt_page(
            id,
            format!(
                "segment {:#x}: flushed key of pivot {p} does not separate its bound",
                r.id.to_raw()
            ),
        ))
    }

    /// A segment's filter, verified, if it has one.
    fn filter(&mut self, r: &LeafRef) -> Result<Option<filter::KeyFilter>> {
        if r.filter_len == 0 {
            return Ok(None);
        }
        let bytes = self.tree.io.read_range_uncached(
            r.id,
            u64::from(r.head_len),
            u64::from(r.filter_len),
        )?;
        let at = |e: DecodeError| self.tree.corrupt(r.id, e.within(u64::from(r.head_len)));
        filter::KeyFilter::decode(&bytes).map(Some).map_err(at)
    }

    /// Checks one leaf and returns its items.
    fn leaf(&mut self, r: &LeafRef, lo: &Bytes, hi: Option<&Bytes>) -> Result<Vec<Item>> {
        let items = self.page_items(r)?;
        self.stats.leaf_pages += 1;
        self.stats.leaf_items += items.len() as u64;
        let in_range = |it: &Item| it.key >= *lo && hi.is_none_or(|h| it.key < *h);
        if !items.iter().all(in_range) {
            return Err(self
                .tree
                .corrupt_page(r.id, "leaf key outside its pivot's range"));
        }
        if items.iter().any(|it| it.value.is_none()) {
            return Err(self.tree.corrupt_page(r.id, "tombstone in a leaf"));
        }
        Ok(items)
    }

    /// Reads a whole leaf, verifying head, blocks and filter.
    fn page_items(&mut self, r: &LeafRef) -> Result<Vec<Item>> {
        let items = self.tree.read_leaf_items(r)?;
        let page = self.tree.io.read_page(r.id, CachePriority::LeafBlock)?;
        if page.len() > self.tree.config.leaf_max_bytes {
            return Err(self
                .tree
                .corrupt_page(r.id, "leaf page larger than the page limit"));
        }
        if r.filter_len > 0 {
            // Errors are at the filter's start, or within it.
            let start = r.head_len as usize;
            let at = |e: DecodeError| self.tree.corrupt(r.id, e.within(u64::from(r.head_len)));
            let bytes = page
                .get(start..start + r.filter_len as usize)
                .ok_or_else(|| at(DecodeError::new(0, "filter overruns the page")))?;
            let f = filter::KeyFilter::decode(bytes).map_err(at)?;
            if !items
                .iter()
                .all(|it| f.may_contain(filter::key_hash(&it.key)))
            {
                return Err(at(DecodeError::new(
                    0,
                    "filter rejects a key the page holds",
                )));
            }
        }
        Ok(items)
    }
}
