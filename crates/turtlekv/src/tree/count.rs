//! An estimate of how many keys a key range of the tree holds, from node
//! pages, leaf heads and the chunks the range's ends fall in, for
//! `Db::approximate_len`.
//!
//! Leaves are counted from their heads: every item of a leaf inside the
//! range, and in the (at most two) leaves at the range's ends the items
//! of it, ranked in the chunk each end falls in. Items buffered in nodes
//! for pivots wholly in the range are estimated from the pivots' pending
//! bytes at the leaves' bytes per item; for the pivots at the range's
//! ends (at most two per level), counted in their segments the same way. A key with versions in a buffer and in a leaf
//! counts twice, and a tombstone counts as a key, until a flush merges
//! them: the figure is an estimate of the stored records, as RocksDB's
//! `estimate-num-keys` is.

use bytes::Bytes;

use crate::Result;
use crate::error::DecodeError;
use crate::key::compare_keys;
use crate::page::CachePriority;
use crate::page::PageId;
use crate::tree::Tree;
use crate::tree::format::chunk::ChunkItems;
use crate::tree::format::leaf_head::LeafHead;
use crate::tree::format::node::{Child, LeafData, LeafRef, Node};

/// A key range: its lower end included, its upper end excluded (`None`:
/// unbounded).
pub(crate) type KeySpan<'a> = (&'a [u8], Option<&'a [u8]>);

/// What the walk gathers under one pivot.
#[derive(Default)]
struct Tally {
    /// Leaf items in the span.
    items: u64,
    /// Leaf items in all the leaves the walk met.
    items_met: u64,
    /// Raw bytes of those leaves: with `items_met`, the bytes per item.
    raw_bytes_met: u64,
    /// Bytes buffered above the leaves for pivots wholly in the span.
    pending_bytes: u64,
    /// Items buffered for the span by pivots partly in it, counted.
    buffered_items: u64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.items += other.items;
        self.items_met += other.items_met;
        self.raw_bytes_met += other.raw_bytes_met;
        self.pending_bytes += other.pending_bytes;
        self.buffered_items += other.buffered_items;
    }
}

impl Tree {
    /// About how many records the tree at `root` holds in `span`.
    pub(crate) fn approximate_items(&self, root: Option<PageId>, span: KeySpan<'_>) -> Result<u64> {
        let Some(root) = root else {
            return Ok(0);
        };
        let tally = self.tally_node(root, (Bytes::new(), None), span)?;
        let buffered = match tally.items_met {
            0 => 0,
            items => tally.pending_bytes * items / tally.raw_bytes_met.max(1),
        };
        Ok(tally.items + buffered + tally.buffered_items)
    }

    /// The tally of the subtree at node `id`, whose keys are `range`.
    /// What a pivot wholly in `span` buffers counts by its bytes; what one
    /// partly in it buffers (the span's ends: at most two per level) is
    /// counted in its segments.
    fn tally_node(
        &self,
        id: PageId,
        range: (Bytes, Option<Bytes>),
        span: KeySpan<'_>,
    ) -> Result<Tally> {
        let mut node = self.read_node(id)?;
        (node.range_lo, node.range_hi) = range;
        let mut tally = Tally::default();
        for p in 0..node.pivots.len() {
            let (lo, hi) = node.pivot_range(p);
            let (lo, hi) = (lo.clone(), hi.cloned());
            if !overlaps((&lo, hi.as_deref()), span) {
                continue;
            }
            let within = contains(span, (&lo, hi.as_deref()));
            if within {
                tally.pending_bytes += node.pivots[p].pending_bytes;
            } else {
                let part = (max_key(&lo, span.0), min_end(hi.as_deref(), span.1));
                tally.buffered_items += self.buffered_in(&node, p, part)?;
            }
            let below = match &node.pivots[p].child {
                Child::StoredNode(child) => self.tally_node(*child, (lo, hi), span)?,
                Child::Leaf(LeafData::Stored(leaf)) => self.tally_leaf(leaf, span, within)?,
                Child::Leaf(LeafData::New(_)) | Child::Node(_) => {
                    unreachable!("decoded nodes reference stored pages")
                }
            };
            tally.add(below);
        }
        Ok(tally)
    }

    /// Unflushed items pivot `p` of `node` buffers in `span`.
    fn buffered_in(&self, node: &Node, p: usize, span: KeySpan<'_>) -> Result<u64> {
        let mut items = 0;
        for segment in &node.segments {
            let (Some(Some(flushed)), LeafData::Stored(r)) = (segment.bounds.get(p), &segment.data)
            else {
                continue;
            };
            let head = self.read_leaf_head(r)?;
            if head.chunks.is_empty() {
                continue;
            }
            let first = self.rank(r, &head, span.0)?.max(flushed.index);
            let end = match span.1 {
                Some(hi) => self.rank(r, &head, hi)?,
                None => head.item_count,
            };
            items += u64::from(end.saturating_sub(first));
        }
        Ok(items)
    }

    /// A leaf's items in `span` (all of them when the leaf lies `within`
    /// it; else those of the chunks the span meets).
    fn tally_leaf(&self, leaf: &LeafRef, span: KeySpan<'_>, within: bool) -> Result<Tally> {
        let head = self.read_leaf_head(leaf)?;
        let mut tally = Tally {
            items_met: u64::from(head.item_count),
            raw_bytes_met: u64::from(head.raw_page_bytes),
            ..Tally::default()
        };
        if within || head.chunks.is_empty() {
            tally.items = tally.items_met;
            return Ok(tally);
        }
        let first = self.rank(leaf, &head, span.0)?;
        let end = match span.1 {
            Some(hi) => self.rank(leaf, &head, hi)?,
            None => head.item_count,
        };
        tally.items = u64::from(end.saturating_sub(first));
        Ok(tally)
    }

    /// How many items of the leaf (or segment) have keys below `key`:
    /// from the chunk that would hold `key`, read.
    fn rank(&self, leaf: &LeafRef, head: &LeafHead, key: &[u8]) -> Result<u32> {
        let chunk = head.chunk_for(key);
        let (offset, len) = head.chunk_range(chunk);
        let blocks = self
            .io
            .read_range(leaf.id, offset, len, CachePriority::LeafBlock)?;
        let mut items = ChunkItems::default();
        let corrupt = |e: DecodeError| self.corrupt(leaf.id, e);
        head.open_chunk(chunk, blocks, &mut items)
            .map_err(corrupt)?;
        let below = items.lower_bound(key).map_err(corrupt)?;
        Ok(head.chunk_items(chunk).0 + below as u32)
    }
}

/// The larger of two lower ends.
fn max_key<'a>(a: &'a [u8], b: &'a [u8]) -> &'a [u8] {
    if compare_keys(a, b).is_ge() { a } else { b }
}

/// The smaller of two exclusive upper ends (`None`: unbounded).
fn min_end<'a>(a: Option<&'a [u8]>, b: Option<&'a [u8]>) -> Option<&'a [u8]> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if compare_keys(x, y).is_le() { x } else { y }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Whether `[lo, hi)` and `span` share a key.
fn overlaps((lo, hi): (&[u8], Option<&[u8]>), (span_lo, span_hi): KeySpan<'_>) -> bool {
    let starts_before_span_ends = span_hi.is_none_or(|h| compare_keys(lo, h).is_lt());
    let ends_after_span_starts = hi.is_none_or(|h| compare_keys(span_lo, h).is_lt());
    starts_before_span_ends && ends_after_span_starts
}

/// Whether `span` holds every key of `[lo, hi)`.
fn contains((span_lo, span_hi): KeySpan<'_>, (lo, hi): (&[u8], Option<&[u8]>)) -> bool {
    let from = compare_keys(span_lo, lo).is_le();
    let to = match (span_hi, hi) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(s), Some(h)) => compare_keys(h, s).is_le(),
    };
    from && to
}
