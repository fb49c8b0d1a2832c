//! The chunks of a segment that no reader of the new version reads: those
//! holding only items flushed to every pivot they belong to. A segment page
//! stays until all its pivots have flushed it, but its flushed chunks can
//! leave the disk before that: the update lists them, and once no reader
//! of an older version can need them the page store punches their blocks
//! out of the file (`docs/format.md`, "Page files").
//!
//! Every reader of a segment goes through its chunk index and starts no
//! lower than a pivot's flushed bound: flushes and merges read the spans
//! of `span::chunk_runs` (gaps included), lookups skip keys below the
//! flushed key, scans jump to the first unflushed item. Those are the
//! chunks kept, with three more kinds: the chunk holding the item just
//! below each flushed bound (`check()` verifies the bound against it), and
//! the first and last chunks (a shared segment's edge keys are read from
//! them). Shared segments are left whole: the other node's bounds decide
//! about their chunks too. Pivots only ever flush further, so a chunk
//! dead in one version stays dead in every later one.

use super::level_merge::SPAN_GAP_READ_BYTES;
use super::span::{KeySpan, chunk_runs};
use super::update::Update;
use crate::Result;
use crate::page::PageRange;
use crate::tree::format::leaf::LeafHead;
use crate::tree::format::node::{Child, LeafData, LeafRef, Node, Segment};

impl Update<'_> {
    /// The dead chunk ranges of the stored segments this update flushed
    /// from, in the in-memory nodes under `node`.
    pub(in crate::tree) fn dead_segment_ranges(&self, node: &Node) -> Result<Vec<PageRange>> {
        let mut out = Vec::new();
        self.collect_dead(node, &mut out)?;
        Ok(out)
    }

    fn collect_dead(&self, node: &Node, out: &mut Vec<PageRange>) -> Result<()> {
        for seg in node
            .segments
            .iter()
            .filter(|s| s.flushed_in_update && !s.shared)
        {
            if let LeafData::Stored(r) = &seg.data {
                let head = self.tree.read_leaf_head(r)?;
                out.extend(dead_ranges(node, seg, r, &head));
            }
        }
        for pivot in &node.pivots {
            if let Child::Node(child) = &pivot.child {
                self.collect_dead(child, out)?;
            }
        }
        Ok(())
    }
}

/// The content ranges of `seg`'s page (`r`, whose head is `head`) that
/// hold only chunks no reader of `node` reads.
fn dead_ranges(node: &Node, seg: &Segment, r: &LeafRef, head: &LeafHead) -> Vec<PageRange> {
    let chunks = head.chunks.len();
    if chunks < 3 {
        return Vec::new();
    }
    let mut live = vec![false; chunks];
    live[0] = true;
    live[chunks - 1] = true;
    let active: Vec<usize> = (0..node.pivots.len())
        .filter(|&p| seg.bounds[p].is_some())
        .collect();
    let spans: Vec<KeySpan<'_>> = active
        .iter()
        .map(|&p| {
            let (lo, _) = node.unflushed_start(seg, p);
            let hi = node.pivot_range(p).1;
            (lo.as_ref(), hi.map(|h| h.as_ref()))
        })
        .collect();
    for (_, run) in chunk_runs(head, &spans, SPAN_GAP_READ_BYTES) {
        live[run].fill(true);
    }
    for bound in active.iter().filter_map(|&p| seg.bounds[p].as_ref()) {
        // The bound's index rules where it and its key disagree, and the
        // item below it is checked against the key.
        let below = bound.index.saturating_sub(1);
        live[head.chunk_of_item_from(0, below)] = true;
        live[head.chunk_of_item_from(0, bound.index)] = true;
    }
    let mut ranges = Vec::new();
    let mut c = 0;
    while c < chunks {
        if live[c] {
            c += 1;
            continue;
        }
        let first = c;
        while c < chunks && !live[c] {
            c += 1;
        }
        let (offset, _) = head.chunk_range(first);
        let (last_offset, last_len) = head.chunk_range(c - 1);
        ranges.push((r.id, offset, last_offset + last_len - offset));
    }
    ranges
}
