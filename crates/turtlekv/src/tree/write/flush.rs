//! Flushing one pivot: the lowest-key prefix of its unflushed items (about a
//! leaf) goes to the child; segments are not rewritten, their flushed bounds
//! advance. The child is updated in memory and may come back as several
//! pieces, which replace the pivot.

use std::sync::Arc;

use bytes::Bytes;

use super::background_drop::drop_in_background;
use super::cut;
use super::merge::merge_runs;
use super::update::Update;
use crate::Result;
use crate::tree::format::item::{
    Item, lower_bound, merge_prefix, shortest_separator, total_size_bytes,
};
use crate::tree::format::node::{Child, Flushed, LeafData, Node, Pivot, Segment};

/// A replacement for one child: its lower key (empty = keep the pivot's) and subtree.
pub(in crate::tree) type Piece = (Bytes, Child);

/// A segment's items not yet flushed to one pivot.
pub(in crate::tree) struct Unflushed {
    items: Arc<Vec<Item>>,
    range: std::ops::Range<usize>,
    /// Index in the segment of `items[range.start]`.
    first_index: usize,
}

impl Unflushed {
    pub(in crate::tree) fn slice(&self) -> &[Item] {
        &self.items[self.range.clone()]
    }
}

impl Update<'_> {
    pub(in crate::tree) fn flush(&mut self, node: &mut Node, p: usize) -> Result<()> {
        let leaf_bytes = self.tree.config.leaf_max_bytes;
        let mut sources = Vec::new();
        for (s, seg) in node.segments.iter().enumerate() {
            if seg.bounds[p].is_some() {
                sources.push((s, self.unflushed_items(node, seg, p)?));
            }
        }
        let runs: Vec<&[Item]> = sources.iter().map(|(_, u)| u.slice()).collect();
        let (prefix, cut_key) = merge_prefix(&runs, leaf_bytes);
        let pending = node.pivots[p].pending_bytes;
        if prefix.is_empty() && pending > 0 {
            // The count says the buffer holds items for the pivot, its
            // segments hold none. Moving nothing would leave the count as
            // it is, and `restore` would pick this pivot again, forever.
            return Err(self.tree.corrupt_buffer(
                node.page,
                node.height,
                format!("pivot {p} counts {pending} pending bytes, its segments hold none"),
            ));
        }
        let mut removed = 0u64;
        // What stays unflushed, per segment: a split of the child below
        // spreads it over the new pivots without reading it again.
        let mut remaining: Vec<Option<Unflushed>> = std::iter::repeat_with(|| None)
            .take(node.segments.len())
            .collect();
        for (s, unflushed) in sources {
            let items = unflushed.slice();
            let taken = match &cut_key {
                Some(k) => lower_bound(items, k),
                None => items.len(),
            };
            removed += total_size_bytes(&items[..taken]) as u64;
            node.segments[s].flushed_in_update |= taken > 0;
            let bound = &mut node.segments[s].bounds[p];
            if taken >= items.len() {
                *bound = None;
                continue;
            }
            if taken > 0 {
                let key = shortest_separator(&items[taken - 1].key, &items[taken].key);
                *bound = Some(Flushed {
                    index: (unflushed.first_index + taken) as u32,
                    key,
                });
            }
            // Nothing taken: the bound stays where it was.
            remaining[s] = Some(Unflushed {
                range: unflushed.range.start + taken..unflushed.range.end,
                first_index: unflushed.first_index + taken,
                items: unflushed.items,
            });
        }
        // The count comes from the page: it may be short of the items. (The
        // bounds above are changed already; an error drops the update's
        // in-memory nodes, the stored tree is untouched.)
        let Some(left) = pending.checked_sub(removed) else {
            return Err(self.tree.corrupt_buffer(
                node.page,
                node.height,
                format!("pivot {p} counts {pending} pending bytes, a flush took {removed}"),
            ));
        };
        node.pivots[p].pending_bytes = left;
        self.events.flushes_by_height[usize::from(node.height).min(7)] += 1;
        let pieces = self.apply_to_child(node, p, prefix)?;
        let count = pieces.len();
        self.replace_pivot_with(node, p, pieces, remaining)?;
        // The neighbours too: a changed child may now fit with one of them.
        self.fix_underfull(node, p.saturating_sub(1), count + 2)?;
        self.drop_inactive_segments(node)
    }

    /// The items of `seg` not yet flushed to pivot `p`: from the decoded
    /// segment when this update has it, else only the chunks that hold
    /// them (a pivot's part of a stored segment, not all of it).
    pub(in crate::tree) fn unflushed_items(
        &mut self,
        node: &Node,
        seg: &Segment,
        p: usize,
    ) -> Result<Unflushed> {
        let bound = seg.bounds[p].as_ref().expect("an active pivot");
        if let Some(items) = self.decoded(&seg.data) {
            let range = node.unflushed_range(seg, p, &items);
            return Ok(Unflushed {
                first_index: range.start,
                items,
                range,
            });
        }
        let LeafData::Stored(r) = &seg.data else {
            unreachable!("new segments are always decoded")
        };
        // Keys from the flushed bound on, within the pivot.
        let (lo, from_key) = node.unflushed_start(seg, p);
        let hi = node.pivot_range(p).1;
        let (first_index, items) = self.tree.read_leaf_span(r, lo, hi.map(|h| h.as_ref()))?;
        if from_key && first_index > bound.index as usize {
            // The key lies above the item at the bound's index: the items
            // between would leave the buffer unread, their bytes counted.
            return Err(self.tree.corrupt_buffer(
                node.page,
                node.height,
                format!(
                    "flushed key of pivot {p} lies above the item at its bound in segment {:#x}",
                    r.id.to_raw()
                ),
            ));
        }
        // The span starts at the first unflushed item, unless the bound's
        // index lies above its key (then the index rules, as for decoded ones).
        let skip = (bound.index as usize).saturating_sub(first_index);
        if skip > items.len() {
            return Err(self.tree.corrupt_buffer(
                node.page,
                node.height,
                format!(
                    "flushed bound of pivot {p} beyond segment {:#x}",
                    r.id.to_raw()
                ),
            ));
        }
        Ok(Unflushed {
            range: skip..items.len(),
            first_index: first_index + skip,
            items: Arc::new(items),
        })
    }

    /// Applies a sorted batch to child `p` and returns what replaces it.
    pub(in crate::tree) fn apply_to_child(
        &mut self,
        node: &mut Node,
        p: usize,
        batch: Vec<Item>,
    ) -> Result<Vec<Piece>> {
        if node.height == 1 {
            let old = self.take_leaf(&node.pivots[p].child)?;
            self.count_dead(&batch, &old);
            let merged = merge_runs(&[&batch, &old], true);
            drop_in_background((batch, old));
            return Ok(self.leaf_pieces(merged));
        }
        let leaf_bytes = self.tree.config.leaf_max_bytes;
        let child = self.child_node(node, p)?;
        for piece in cut::cut_batch(batch, leaf_bytes) {
            self.insert_and_flush(child, piece)?;
            // One flush from above can cascade through deep merges below:
            // bound what this subtree holds in memory as it goes.
            self.spill_if_large(child)?;
        }
        let child = take_child_node(&mut node.pivots[p]);
        Ok(self
            .split_node(child)?
            .into_iter()
            .map(|(lower, n)| (lower, Child::Node(Box::new(n))))
            .collect())
    }

    /// Counts what merging `batch` into a leaf of `old` items makes dead,
    /// for puts and tombstones apart: the old items they replace, and the
    /// tombstones themselves. Both runs are sorted: one walk.
    fn count_dead(&mut self, batch: &[Item], old: &[Item]) {
        let e = &mut self.events;
        let mut below = old.iter().peekable();
        for item in batch {
            while below.next_if(|o| o.key < item.key).is_some() {}
            let shadowed = below
                .next_if(|o| o.key == item.key)
                .map_or(0, |o| o.size_bytes());
            let size = item.size_bytes() as u64;
            if item.value.is_some() {
                e.leaf_flush_bytes += size;
                e.leaf_flush_dead_bytes += shadowed as u64;
            } else {
                e.leaf_flush_tombstone_bytes += size;
                e.leaf_flush_tombstone_dead_bytes += size + shadowed as u64;
            }
        }
    }

    /// Cuts leaf items into new leaves with separators between them.
    pub(in crate::tree) fn leaf_pieces(&mut self, items: Vec<Item>) -> Vec<Piece> {
        let parts = cut::cut_leaves(items, &self.tree.config);
        self.events.leaf_splits += u64::from(parts.len() > 1);
        let mut pieces = Vec::with_capacity(parts.len());
        let mut previous_last: Option<Bytes> = None;
        for part in parts {
            let lower = match (&previous_last, part.first()) {
                (Some(prev), Some(first)) => shortest_separator(prev, &first.key),
                _ => Bytes::new(),
            };
            previous_last = part.last().map(|it| it.key.clone());
            pieces.push((lower, Child::Leaf(LeafData::New(Arc::new(part)))));
        }
        pieces
    }

    /// Replaces pivot `p` by `pieces`, spreading its segments' flushed bounds
    /// and pending bytes over the new pivots.
    pub(in crate::tree) fn replace_pivot(
        &mut self,
        node: &mut Node,
        p: usize,
        pieces: Vec<Piece>,
    ) -> Result<()> {
        // Each active segment's unflushed items of the old pivot, read
        // before the pivot is split (its range is the union of the new ones).
        let mut spans = Vec::with_capacity(node.segments.len());
        for seg in &node.segments {
            spans.push(match (pieces.len() > 1, &seg.bounds[p]) {
                (true, Some(_)) => Some(self.unflushed_items(node, seg, p)?),
                _ => None,
            });
        }
        self.replace_pivot_with(node, p, pieces, spans)
    }

    /// `replace_pivot` given, per segment, its items not yet flushed to
    /// pivot `p` (`None` where it is inactive; unused for a single piece).
    fn replace_pivot_with(
        &mut self,
        node: &mut Node,
        p: usize,
        pieces: Vec<Piece>,
        spans: Vec<Option<Unflushed>>,
    ) -> Result<()> {
        let count = pieces.len();
        let old_lower = node.pivots[p].lower.clone();
        let new_pivots: Vec<Pivot> = pieces
            .into_iter()
            .enumerate()
            .map(|(j, (lower, child))| Pivot {
                lower: if j == 0 { old_lower.clone() } else { lower },
                child,
                pending_bytes: 0,
            })
            .collect();
        let old_pending = node.pivots[p].pending_bytes;
        node.pivots.splice(p..=p, new_pivots);
        if count == 1 {
            node.pivots[p].pending_bytes = old_pending;
            return Ok(());
        }
        debug_assert_eq!(spans.len(), node.segments.len());
        for (s, span) in spans.iter().enumerate() {
            let old = node.segments[s].bounds[p].clone();
            node.segments[s]
                .bounds
                .splice(p..=p, std::iter::repeat_n(old, count));
            let Some(span) = span else { continue };
            for j in p..p + count {
                let r = node.pivot_index_range(j, span.slice());
                if r.is_empty() {
                    node.segments[s].bounds[j] = None;
                } else {
                    node.pivots[j].pending_bytes += total_size_bytes(&span.slice()[r]) as u64;
                }
            }
        }
        // The new counts come from the items; the old one from the page,
        // which may claim more.
        let new_pending: u64 = node.pivots[p..p + count]
            .iter()
            .map(|q| q.pending_bytes)
            .sum();
        if new_pending != old_pending {
            return Err(self.tree.corrupt_buffer(
                node.page,
                node.height,
                format!(
                    "pivot {p} counts {old_pending} pending bytes, its segments hold {new_pending}"
                ),
            ));
        }
        Ok(())
    }
}

/// Moves an in-memory child node out of its pivot.
pub(in crate::tree) fn take_child_node(pivot: &mut Pivot) -> Node {
    match std::mem::replace(
        &mut pivot.child,
        Child::Leaf(LeafData::New(Arc::new(Vec::new()))),
    ) {
        Child::Node(n) => *n,
        _ => unreachable!("the child was made an in-memory node before"),
    }
}
