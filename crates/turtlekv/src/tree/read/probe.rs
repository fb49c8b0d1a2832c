//! The read path's view of a node page: what a point lookup or a scan
//! window needs (one pivot, its key range and the segments active for it),
//! from an index parsed once per cached page, without building the whole
//! in-memory node.

use std::ops::Range;

use bytes::Bytes;

use super::memo::Memo;
use crate::page::PageId;
use crate::tree::CachedFilter;
use crate::tree::format::leaf::LeafHead;
use crate::tree::format::node::{LeafRef, MAX_LEVELS};
use crate::tree::format::node_codec::{Header, Reader};

/// What lookups remember of a leaf this node references (`memo`).
#[derive(Debug, Default)]
pub(in crate::tree) struct LeafMemos {
    pub filter: Memo<CachedFilter>,
    pub head: Memo<LeafHead>,
}

/// A segment a lookup must probe: its page, its flushed bound for the key's
/// pivot and the matching flushed key (a smaller key is already flushed).
#[derive(Debug)]
pub(in crate::tree) struct SegmentProbe<'a> {
    pub leaf: LeafRef,
    pub flushed_index: u32,
    pub flushed_key: &'a [u8],
    pub memos: &'a LeafMemos,
}

/// Which pivot a probe follows.
#[derive(Debug, Clone, Copy)]
pub(in crate::tree) enum PivotTarget<'k> {
    /// The last pivot whose lower key is `<=` the key: the one holding it.
    Holding(&'k [u8]),
    /// The last pivot whose lower key is `<` the key (a reverse scan from
    /// an exclusive bound).
    Before(&'k [u8]),
    /// The last pivot (a reverse scan from the end).
    Last,
}

/// Where a lookup of one key goes in one node.
#[derive(Debug)]
pub(in crate::tree) struct NodeProbe<'a> {
    pub height: u8,
    /// The pivot's lower key; `None` for the first pivot, whose range
    /// starts where the node's does.
    pub lo: Option<&'a [u8]>,
    /// The next pivot's lower key; `None` for the last pivot, whose range
    /// ends where the node's does.
    pub hi: Option<&'a [u8]>,
    /// The key's pivot: a leaf (height 1) or a node page.
    pub child_leaf: Option<LeafRef>,
    pub child_node: PageId,
    /// Memos of the child leaf's filter and head (height 1).
    pub child_leaf_memos: &'a LeafMemos,
    /// Memo of the child node's index (height 2 and up).
    pub child_node_memo: &'a Memo<NodeIndex>,
    /// Active segments for the pivot, newest level first.
    pub segments: Vec<SegmentProbe<'a>>,
}

/// A node page parsed once for lookups and scans, and cached beside leaf
/// heads (`Tree::read_node_index`): every pivot's lower key and child, and
/// every segment's active pivots and flushed bounds, keys as ranges of
/// the page. A probe is then a binary search and a pass over segments
/// instead of a parse of the whole page.
#[derive(Debug)]
pub(crate) struct NodeIndex {
    page: Bytes,
    height: u8,
    pivots: Vec<PivotEntry>,
    segments: Vec<SegmentEntry>,
}

#[derive(Debug)]
struct PivotEntry {
    /// The lower key's bytes in the page; empty for pivot 0, which has none.
    lower: Range<u32>,
    child_leaf: Option<LeafRef>,
    child_node: PageId,
    leaf_memos: LeafMemos,
    node_memo: Memo<NodeIndex>,
}

#[derive(Debug)]
struct SegmentEntry {
    leaf: LeafRef,
    memos: LeafMemos,
    first_pivot: usize,
    pivot_span: usize,
    /// The active bit set's bytes in the page.
    active_bits: Range<u32>,
    /// Flushed bounds: pivot, flushed index, flushed key's bytes.
    bounds: Vec<(usize, u32, Range<u32>)>,
}

/// A span of the page as a range to index it with.
fn span_range(span: &Range<u32>) -> Range<usize> {
    span.start as usize..span.end as usize
}

/// The next `len` bytes of the page, as offsets (pages are far below 4 GiB).
fn take_span(r: &mut Reader<'_>, len: usize) -> Result<Range<u32>, String> {
    let start = r.offset();
    r.take(len)?;
    Ok(start as u32..r.offset() as u32)
}

impl NodeIndex {
    /// Parses a node page whose blocks the page store verified. Every field
    /// is bounds-checked; the node checksum is not recomputed (see
    /// `Header::parse_trusted`). The structure is checked as `Node::decode`
    /// checks it (pivot keys in order, segment spans and levels, flushed
    /// bounds on active pivots, within the item count and below the next
    /// pivot), so that a page a checkpoint would refuse is not answered
    /// from: a lookup would follow the wrong pivot or skip a segment.
    pub(crate) fn parse(page: Bytes) -> Result<Self, String> {
        let (header, mut r) = Header::parse_trusted(&page)?;
        let mut pivots: Vec<PivotEntry> =
            Vec::with_capacity(header.pivot_count.min(page.len() / 16));
        for i in 0..header.pivot_count {
            let (child_leaf, child_node) = if header.height == 1 {
                let leaf = r.leaf_ref()?;
                (Some(leaf), leaf.id)
            } else {
                (None, PageId::from_raw(r.u64()?))
            };
            r.u64()?; // pending bytes
            let lower = if i == 0 {
                take_span(&mut r, 0)?
            } else {
                let len = r.u16()? as usize;
                take_span(&mut r, len)?
            };
            // Pivot 0 has no key; the others are not empty and ascend.
            let key = &page[span_range(&lower)];
            let ordered = match pivots.last() {
                None => true,
                Some(_) if i == 1 => !key.is_empty(),
                Some(prev) => page[span_range(&prev.lower)] < *key,
            };
            if !ordered {
                return Err("node: pivot keys out of order".into());
            }
            pivots.push(PivotEntry {
                lower,
                child_leaf,
                child_node,
                leaf_memos: LeafMemos::default(),
                node_memo: Memo::default(),
            });
        }
        let mut segments = Vec::with_capacity(header.segment_count.min(page.len() / 16));
        let mut previous_level = 0;
        for _ in 0..header.segment_count {
            // Segments are stored newest level first.
            let level = r.u8()?;
            r.u8()?; // flags
            let leaf = r.leaf_ref()?;
            let item_count = r.u32()?;
            let first_pivot = r.u16()? as usize;
            let pivot_span = r.u16()? as usize;
            if first_pivot + pivot_span > header.pivot_count
                || level >= MAX_LEVELS
                || level < previous_level
                || pivot_span == 0
            {
                return Err("node: segment pivot span or level out of range".into());
            }
            previous_level = level;
            let active_bits = take_span(&mut r, pivot_span.div_ceil(8))?;
            let bound_count = r.u16()? as usize;
            let mut bounds = Vec::with_capacity(bound_count.min(page.len() / 8));
            for _ in 0..bound_count {
                let pivot = r.u16()? as usize;
                let index = r.u32()?;
                let len = r.u16()? as usize;
                let key = take_span(&mut r, len)?;
                let bits = &page[span_range(&active_bits)];
                let active = (first_pivot..first_pivot + pivot_span).contains(&pivot)
                    && bits[(pivot - first_pivot) / 8] >> ((pivot - first_pivot) % 8) & 1 == 1;
                if !active || index == 0 || index > item_count {
                    return Err("node: flushed bound for an inactive pivot".into());
                }
                // Below the next pivot's key (`Node::check_flushed_keys`).
                if let Some(next) = pivots.get(pivot + 1)
                    && page[span_range(&key)] >= page[span_range(&next.lower)]
                {
                    return Err(format!(
                        "node: flushed key of pivot {pivot} beyond its range"
                    ));
                }
                bounds.push((pivot, index, key));
            }
            segments.push(SegmentEntry {
                leaf,
                memos: LeafMemos::default(),
                first_pivot,
                pivot_span,
                active_bits,
                bounds,
            });
        }
        if r.offset() != page.len() {
            return Err("node: trailing bytes".into());
        }
        Ok(NodeIndex {
            height: header.height,
            page,
            pivots,
            segments,
        })
    }

    /// Memory the index takes beside its page, for the cache's accounting,
    /// counting each memo that can be set as if its object had died while
    /// remembered (pivots remember a leaf's filter and head at height 1, a
    /// child's index above).
    pub(crate) fn memory_bytes(&self) -> u64 {
        let bounds: usize = self.segments.iter().map(|s| s.bounds.len()).sum();
        let leaf_memos =
            Memo::<CachedFilter>::dead_object_bytes() + Memo::<LeafHead>::dead_object_bytes();
        let pivot_memos = if self.height == 1 {
            leaf_memos
        } else {
            Memo::<NodeIndex>::dead_object_bytes()
        };
        let memos = self.pivots.len() * pivot_memos + self.segments.len() * leaf_memos;
        (std::mem::size_of::<Self>()
            + self.page.len()
            + self.pivots.len() * std::mem::size_of::<PivotEntry>()
            + self.segments.len() * std::mem::size_of::<SegmentEntry>()
            + bounds * std::mem::size_of::<(usize, u32, Range<u32>)>()
            + memos) as u64
    }

    fn bytes(&self, at: &Range<u32>) -> &[u8] {
        &self.page[span_range(at)]
    }

    /// The key's pivot (`Holding`), the one before it, or the last, with
    /// its key range and its active segments.
    pub(in crate::tree) fn probe(&self, target: PivotTarget<'_>) -> NodeProbe<'_> {
        // Pivot keys ascend, so the pivots a target takes are a prefix;
        // pivot 0, without a key, is always taken.
        let taken = 1 + self.pivots[1..].partition_point(|p| {
            let lower = self.bytes(&p.lower);
            match target {
                PivotTarget::Holding(key) => lower <= key,
                PivotTarget::Before(key) => lower < key,
                PivotTarget::Last => true,
            }
        });
        let pivot = taken - 1;
        let entry = &self.pivots[pivot];
        let segments = self
            .segments
            .iter()
            .filter(|s| self.is_active(s, pivot))
            .map(|s| {
                let bound = s.bounds.iter().rev().find(|(p, _, _)| *p == pivot);
                SegmentProbe {
                    leaf: s.leaf,
                    flushed_index: bound.map_or(0, |(_, index, _)| *index),
                    flushed_key: bound.map_or(&[][..], |(_, _, key)| self.bytes(key)),
                    memos: &s.memos,
                }
            })
            .collect();
        NodeProbe {
            height: self.height,
            lo: (pivot > 0).then(|| self.bytes(&entry.lower)),
            hi: self
                .pivots
                .get(pivot + 1)
                .map(|next| self.bytes(&next.lower)),
            child_leaf: entry.child_leaf,
            child_node: entry.child_node,
            child_leaf_memos: &entry.leaf_memos,
            child_node_memo: &entry.node_memo,
            segments,
        }
    }

    fn is_active(&self, s: &SegmentEntry, pivot: usize) -> bool {
        let bits = self.bytes(&s.active_bits);
        (s.first_pivot..s.first_pivot + s.pivot_span).contains(&pivot)
            && bits[(pivot - s.first_pivot) / 8] >> ((pivot - s.first_pivot) % 8) & 1 == 1
    }
}
