//! Node pages: pivots (child, pending bytes, separator key) and the update
//! buffer (segments by level with active pivots and flushed bounds). The same
//! struct is the in-memory node a batch update edits; `encode` needs every
//! reference stored (`node_codec`). Layout in `docs/format.md`, "Node pages".

use std::sync::Arc;

use bytes::Bytes;

use super::item::Item;
use crate::page::PageId;

/// Bytes of the fixed node page header.
pub(in crate::tree) const HEADER_BYTES: usize = 20;
/// Where the header keeps the node's height.
pub(in crate::tree) const HEIGHT_AT: usize = 5;
/// Most buffer levels; a batch arriving with all of them occupied merges into the last.
pub(crate) const MAX_LEVELS: u8 = 8;

/// A stored leaf or segment page and what a reader needs to probe it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LeafRef {
    pub id: PageId,
    pub head_len: u32,
    pub filter_len: u32,
}

/// A leaf or segment: stored, or built by the current batch update.
#[derive(Clone, Debug)]
pub(crate) enum LeafData {
    Stored(LeafRef),
    New(Arc<Vec<Item>>),
}

/// A child subtree.
#[derive(Clone, Debug)]
pub(crate) enum Child {
    Leaf(LeafData),
    StoredNode(PageId),
    Node(Box<Node>),
}

#[derive(Clone, Debug)]
pub(crate) struct Pivot {
    /// Lower bound of the child's keys; empty for pivot 0 (the node's own bound).
    pub lower: Bytes,
    pub child: Child,
    /// Size of this pivot's unflushed buffered items.
    pub pending_bytes: u64,
}

/// How far a segment has been flushed to one pivot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Flushed {
    /// Index of the first unflushed item.
    pub index: u32,
    /// A key `k` with (item `index - 1`) < `k` <= (item `index`): a lookup of
    /// a smaller key skips the segment without reading it. Empty when
    /// `index` is 0.
    pub key: Bytes,
}

#[derive(Clone, Debug)]
pub(crate) struct Segment {
    pub level: u8,
    /// Another node (the other half of a split) may reference the page.
    pub shared: bool,
    pub data: LeafData,
    pub item_count: u32,
    /// Per pivot: `None` = inactive, `Some(f)` = active, items below `f.index` flushed.
    pub bounds: Vec<Option<Flushed>>,
    /// The current batch update flushed items from it, so chunks of its
    /// page may have died (`write::dead_chunks`). Not stored.
    pub flushed_in_update: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct Node {
    /// 1: children are leaves; h: children are nodes of height h-1.
    pub height: u8,
    pub pivots: Vec<Pivot>,
    /// Level 0 (newest) first, key order within a level.
    pub segments: Vec<Segment>,
    /// The node's key range, from its parent (not stored in the page; empty =
    /// unbounded below, as keys are never empty). Needed because a segment
    /// shared with a sibling holds keys outside this node's range.
    pub range_lo: Bytes,
    /// Exclusive upper end of the node's range; `None` = unbounded.
    pub range_hi: Option<Bytes>,
    /// The stored page this node's pivots and buffer counts were read from,
    /// as an update edits it (not stored in the page): what a corruption
    /// error found in memory names. `None` for a node the update built, or
    /// joined from two stored nodes.
    pub page: Option<PageId>,
}

pub(in crate::tree) fn pivot_entry_bytes(height: u8, index: usize, key: &[u8]) -> usize {
    let child = if height == 1 { 16 } else { 8 };
    let key_bytes = if index == 0 { 0 } else { 2 + key.len() };
    child + 8 + key_bytes
}

fn segment_entry_bytes(seg: &Segment) -> usize {
    let first = seg.bounds.iter().position(Option::is_some);
    let last = seg.bounds.iter().rposition(Option::is_some);
    let span = match (first, last) {
        (Some(first), Some(last)) => last - first + 1,
        _ => 0,
    };
    let flushed: usize = seg
        .bounds
        .iter()
        .flatten()
        .filter(|f| f.index > 0)
        .map(|f| 8 + f.key.len())
        .sum();
    1 + 1 + 16 + 4 + 2 + 2 + span.div_ceil(8) + 2 + flushed
}

impl Node {
    /// Where a split cuts the pivots: `(bytes, m)`, pivot `m` the right
    /// half's first, chosen so that the smaller half's pivot entries
    /// (`bytes`) take the most. Pivot `m` gives its key to the parent, so
    /// with keys of very different lengths a cut by the pivots' running
    /// sum could leave one half far below the other, under a node's
    /// minimum. With 4 pivots or more each half keeps two (a half of one
    /// child could not join an underfull child). `(0, 0)` for fewer than 2
    /// pivots.
    pub(crate) fn best_split(&self) -> (usize, usize) {
        let n = self.pivots.len();
        if n < 2 {
            return (0, 0);
        }
        let (first, last) = if n >= 4 { (2, n - 2) } else { (1, n - 1) };
        let entry = |i: usize| pivot_entry_bytes(self.height, i, &self.pivots[i].lower);
        let first_entry = pivot_entry_bytes(self.height, 0, &[]);
        let total = self.pivot_bytes();
        let mut left: usize = (0..first).map(entry).sum();
        let mut best = (0, first);
        for m in first..=last {
            let right = total - left - entry(m) + first_entry;
            if left.min(right) > best.0 {
                best = (left.min(right), m);
            }
            left += entry(m);
        }
        best
    }

    /// Whether the node's pivots take more than their share of a page and
    /// a split would leave both halves at least at a node's minimum (with
    /// a few pivots of very different lengths, none may: the node then
    /// stays whole while its page holds it). The split policy and the
    /// checker both go by it.
    pub(crate) fn should_split(&self, config: &crate::tree::TreeConfig) -> bool {
        self.pivot_bytes() > config.node_pivot_max_bytes()
            && self.pivots.len() >= 4
            && self.best_split().0 >= config.node_pivot_min_bytes()
    }

    /// Bytes of the pivot entries: the node's fill measure.
    pub(crate) fn pivot_bytes(&self) -> usize {
        self.pivots
            .iter()
            .enumerate()
            .map(|(i, p)| pivot_entry_bytes(self.height, i, &p.lower))
            .sum()
    }

    /// Size of the encoded page.
    pub(crate) fn encoded_len(&self) -> usize {
        HEADER_BYTES
            + self.pivot_bytes()
            + self.segments.iter().map(segment_entry_bytes).sum::<usize>()
    }

    pub(crate) fn total_pending_bytes(&self) -> u64 {
        self.pivots.iter().map(|p| p.pending_bytes).sum()
    }

    /// Key range `[lo, hi)` of pivot `p` (`hi = None`: unbounded).
    pub(crate) fn pivot_range(&self, p: usize) -> (&Bytes, Option<&Bytes>) {
        let lo = if p == 0 {
            &self.range_lo
        } else {
            &self.pivots[p].lower
        };
        let hi = match self.pivots.get(p + 1) {
            Some(next) => Some(&next.lower),
            None => self.range_hi.as_ref(),
        };
        (lo, hi)
    }

    /// Indexes of `items` (sorted) within pivot `p`'s key range.
    pub(crate) fn pivot_index_range(&self, p: usize, items: &[Item]) -> std::ops::Range<usize> {
        let (lo, hi) = self.pivot_range(p);
        let start = super::item::lower_bound(items, lo);
        let end = hi.map_or(items.len(), |hi| super::item::lower_bound(items, hi));
        start..end.max(start)
    }

    /// Indexes of segment items not yet flushed to pivot `p`.
    pub(crate) fn unflushed_range(
        &self,
        seg: &Segment,
        p: usize,
        items: &[Item],
    ) -> std::ops::Range<usize> {
        self.unflushed_range_in_span(seg, p, items, 0)
    }

    /// `unflushed_range` on a span of the segment's items that starts at
    /// its item `first_index` (indexes into the span).
    pub(crate) fn unflushed_range_in_span(
        &self,
        seg: &Segment,
        p: usize,
        span: &[Item],
        first_index: usize,
    ) -> std::ops::Range<usize> {
        match &seg.bounds[p] {
            None => 0..0,
            Some(bound) => {
                let r = self.pivot_index_range(p, span);
                let flushed_end = (bound.index as usize).saturating_sub(first_index);
                r.start.max(flushed_end).min(r.end)..r.end
            }
        }
    }

    /// Where pivot `p`'s unflushed items in `seg` start, as a key: its
    /// flushed key when that lies above the pivot's lower bound (the key
    /// lies between the last flushed item and the first unflushed one),
    /// else the lower bound. The flag says which.
    pub(crate) fn unflushed_start<'a>(&'a self, seg: &'a Segment, p: usize) -> (&'a Bytes, bool) {
        let (lo, _) = self.pivot_range(p);
        match &seg.bounds[p] {
            Some(bound) if bound.index > 0 && bound.key > *lo => (&bound.key, true),
            _ => (lo, false),
        }
    }

    /// Checks that every flushed key of an active pivot lies below the
    /// pivot's upper bound, where it is known (the last pivot's is the
    /// node's own, from its parent). A writer never stores one above: the
    /// key is at most the first unflushed item, which lies in the range.
    /// Updates read a pivot's unflushed items from its flushed key up to
    /// that bound, a span that must not end before it starts.
    pub(crate) fn check_flushed_keys(&self) -> Result<(), String> {
        for seg in &self.segments {
            for (p, bound) in seg.bounds.iter().enumerate() {
                let Some(bound) = bound.as_ref().filter(|b| b.index > 0) else {
                    continue;
                };
                if self.pivot_range(p).1.is_some_and(|hi| bound.key >= *hi) {
                    return Err(format!("node: flushed key of pivot {p} beyond its range"));
                }
            }
        }
        Ok(())
    }

    /// Checks what a node's page cannot show on its own, once its parent
    /// has given it its range: its pivot keys lie within that range, and
    /// its last pivot's flushed keys below the range's end (the others'
    /// are checked at decode). Otherwise a pivot's range could end before
    /// it starts, and so could the spans updates read its items in.
    pub(crate) fn check_range(&self) -> Result<(), String> {
        let keys = self.pivots.get(1..).unwrap_or_default();
        let above_lo = keys
            .first()
            .is_none_or(|first| self.range_lo.is_empty() || first.lower > self.range_lo);
        let below_hi = match (keys.last(), &self.range_hi) {
            (Some(last), Some(hi)) => last.lower < *hi,
            _ => true,
        };
        if !above_lo || !below_hi {
            return Err("node: pivot keys outside the node's range".into());
        }
        self.check_flushed_keys()
    }

    /// The pivot whose range holds `key`.
    pub(crate) fn pivot_for(&self, key: &[u8]) -> usize {
        self.pivots[1..].partition_point(|p| p.lower.as_ref() <= key)
    }
}
