//! The read path's view of a node page: it parses only what a point lookup
//! or a scan window needs (one pivot, its key range and the segments active
//! for it) without building the whole in-memory node.

use super::node::LeafRef;
use super::node_codec::Header;
use crate::page::PageId;

/// A segment a lookup must probe: its page, its flushed bound for the key's
/// pivot and the matching flushed key (a smaller key is already flushed).
#[derive(Debug)]
pub(super) struct SegmentProbe<'a> {
    pub leaf: LeafRef,
    pub flushed_index: u32,
    pub flushed_key: &'a [u8],
}

/// Which pivot a probe follows.
#[derive(Debug, Clone, Copy)]
pub(super) enum PivotTarget<'k> {
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
pub(super) struct NodeProbe<'a> {
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
    /// Active segments for the pivot, newest level first.
    pub segments: Vec<SegmentProbe<'a>>,
}

/// Finds the key's pivot in a node page and its active segments. The
/// page's blocks were verified when read; its structure is checked here.
pub(super) fn probe_node<'a>(bytes: &'a [u8], key: &[u8]) -> Result<NodeProbe<'a>, String> {
    probe_node_at(bytes, PivotTarget::Holding(key))
}

/// Finds the target pivot in a node page, its key range and its active
/// segments.
pub(super) fn probe_node_at<'a>(
    bytes: &'a [u8],
    target: PivotTarget<'_>,
) -> Result<NodeProbe<'a>, String> {
    let (header, mut r) = Header::parse_trusted(bytes)?;
    let mut child_leaf = None;
    let mut child_node = PageId::from_raw(0);
    let mut pivot = 0;
    let (mut lo, mut hi) = (None, None);
    for i in 0..header.pivot_count {
        let (leaf, node) = if header.height == 1 {
            (Some(r.leaf_ref()?), None)
        } else {
            (None, Some(PageId::from_raw(r.u64()?)))
        };
        r.u64()?; // pending bytes
        let lower = if i == 0 {
            None
        } else {
            let len = r.u16()? as usize;
            Some(r.take(len)?)
        };
        // Pivot keys are ascending, so the pivots to take are a prefix:
        // past its end (`hi` found), no key needs comparing.
        let take = hi.is_none()
            && lower.is_none_or(|lower| match target {
                PivotTarget::Holding(key) => lower <= key,
                PivotTarget::Before(key) => lower < key,
                PivotTarget::Last => true,
            });
        if take {
            (pivot, lo) = (i, lower);
            child_leaf = leaf;
            child_node = node.unwrap_or(child_node);
        } else if hi.is_none() {
            hi = lower;
        }
    }
    let mut segments = Vec::new();
    for _ in 0..header.segment_count {
        r.u8()?; // level: segments are stored newest level first
        r.u8()?; // flags
        let leaf = r.leaf_ref()?;
        r.u32()?; // item count
        let first = r.u16()? as usize;
        let span = r.u16()? as usize;
        let bits = r.take(span.div_ceil(8))?;
        let active = (first..first + span).contains(&pivot)
            && bits[(pivot - first) / 8] >> ((pivot - first) % 8) & 1 == 1;
        let mut flushed_index = 0;
        let mut flushed_key: &[u8] = &[];
        for _ in 0..r.u16()? {
            let p = r.u16()? as usize;
            let index = r.u32()?;
            let len = r.u16()? as usize;
            let k = r.take(len)?;
            if p == pivot {
                (flushed_index, flushed_key) = (index, k);
            }
        }
        if active {
            segments.push(SegmentProbe {
                leaf,
                flushed_index,
                flushed_key,
            });
        }
    }
    Ok(NodeProbe {
        height: header.height,
        lo,
        hi,
        child_leaf,
        child_node,
        segments,
    })
}
