//! The read path's view of a node page: what a point lookup or a scan
//! window needs (one pivot, its key range and the segments active for it),
//! from an index parsed once per cached page, without building the whole
//! in-memory node.

use std::ops::Range;

use bytes::Bytes;

use super::memo::Memo;
use crate::error::DecodeError;
use crate::page::PageId;
use crate::tree::CachedFilter;
use crate::tree::format::leaf::LeafHead;
use crate::tree::format::node::LeafRef;
use crate::tree::format::node_reader::{Header, check_flushed_key, is_active};

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

impl NodeIndex {
    /// Parses a node page whose blocks the page store verified, through
    /// the reader the full decode uses (`node_reader`), so that a page a
    /// checkpoint would refuse is not answered from: a lookup would follow
    /// the wrong pivot or skip a segment. The node checksum is not
    /// recomputed (`Header::parse_trusted`). Every flushed key entry is
    /// checked against its pivot's range, as lookups keep every entry.
    pub(crate) fn parse(page: Bytes) -> Result<Self, DecodeError> {
        let (header, mut r) = Header::parse_trusted(&page)?;
        let mut pivots: Vec<PivotEntry> =
            Vec::with_capacity(header.pivot_count.min(page.len() / 16));
        for _ in 0..header.pivot_count {
            let field = r.next_pivot()?;
            pivots.push(PivotEntry {
                child_leaf: field.child_leaf(),
                child_node: field.child_id(),
                lower: field.lower,
                leaf_memos: LeafMemos::default(),
                node_memo: Memo::default(),
            });
        }
        let mut segments = Vec::with_capacity(header.segment_count.min(page.len() / 16));
        for _ in 0..header.segment_count {
            let seg = r.next_segment()?;
            let mut bounds = Vec::with_capacity(seg.bound_count.min(page.len() / 8));
            for _ in 0..seg.bound_count {
                let b = r.next_bound(&seg)?;
                let next = pivots.get(b.pivot + 1).map(|next| r.bytes(&next.lower));
                check_flushed_key(b.pivot, r.bytes(&b.key), b.key.start as usize, next)?;
                bounds.push((b.pivot, b.index, b.key));
            }
            segments.push(SegmentEntry {
                leaf: seg.leaf,
                memos: LeafMemos::default(),
                first_pivot: seg.first_pivot,
                pivot_span: seg.pivot_span,
                active_bits: seg.active_bits,
                bounds,
            });
        }
        r.finish()?;
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
        is_active(
            self.bytes(&s.active_bits),
            s.first_pivot,
            s.pivot_span,
            pivot,
        )
    }
}
