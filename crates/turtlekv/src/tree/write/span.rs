//! Reading parts of a stored leaf or segment: the chunks that can hold a
//! key span, with one uncached read per run of nearby chunks (the page
//! store verifies their blocks, as for scans). A flush needs one pivot's
//! part of a segment; a buffer merge needs the unflushed parts of a
//! window's pivots, which flushed parts can separate.

use std::ops::Range;

use bytes::Bytes;

use crate::Result;
use crate::error::DecodeError;
use crate::tree::Item;
use crate::tree::Tree;
use crate::tree::format::item;
use crate::tree::format::item::edge_key;
use crate::tree::format::leaf::LeafHead;
use crate::tree::format::leaf_head::ITEM_COUNT_AT;
use crate::tree::format::node;

/// A key span `[lo, hi)`; `hi: None` = to the end.
pub(crate) type KeySpan<'a> = (&'a [u8], Option<&'a [u8]>);

/// Items read for a run of key spans that lie close together.
#[derive(Debug)]
pub(crate) struct SpanRead {
    /// Which of the spans asked for this read covers.
    pub spans: Range<usize>,
    /// Leaf index of `items[0]`.
    pub first_index: usize,
    /// Every item from the first span's `lo` to the last span's `hi`,
    /// including any between the spans.
    pub items: Vec<Item>,
}

impl Tree {
    /// The items with keys in `[lo, hi)`, and the leaf index of the first.
    pub(in crate::tree) fn read_leaf_span(
        &self,
        r: &node::LeafRef,
        lo: &[u8],
        hi: Option<&[u8]>,
    ) -> Result<(usize, Vec<Item>)> {
        let mut reads = self.read_leaf_spans(r, &[(lo, hi)], 0)?;
        Ok(reads
            .pop()
            .map_or((0, Vec::new()), |read| (read.first_index, read.items)))
    }

    /// Reads sorted, disjoint key spans. Spans whose chunks are at most
    /// `gap_bytes` apart share one read: another I/O costs more than
    /// reading a few blocks more.
    pub(in crate::tree) fn read_leaf_spans(
        &self,
        r: &node::LeafRef,
        spans: &[KeySpan<'_>],
        gap_bytes: u64,
    ) -> Result<Vec<SpanRead>> {
        debug_assert!(
            spans.iter().all(|&(lo, hi)| hi.is_none_or(|hi| lo <= hi))
                && spans
                    .windows(2)
                    .all(|w| w[0].1.is_some_and(|hi| hi <= w[1].0)),
            "key spans must be sorted and disjoint"
        );
        let head = self.read_leaf_head(r)?;
        let mut reads = Vec::new();
        for (covered, chunks) in chunk_runs(&head, spans, gap_bytes) {
            let (lo, hi) = (spans[covered.start].0, spans[covered.end - 1].1);
            let (first_index, items) = self.read_chunk_run(r, &head, chunks, lo, hi)?;
            reads.push(SpanRead {
                spans: covered,
                first_index,
                items,
            });
        }
        Ok(reads)
    }

    /// The first and last keys of a stored leaf or segment (empty when it
    /// holds no items), read from its first and last chunks.
    pub(in crate::tree) fn read_leaf_edge_keys(&self, r: &node::LeafRef) -> Result<(Bytes, Bytes)> {
        let head = self.read_leaf_head(r)?;
        let Some(last_chunk) = head.chunks.len().checked_sub(1) else {
            return Ok((Bytes::new(), Bytes::new()));
        };
        let (_, first_items) = self.read_chunk_run(r, &head, 0..1, &[], None)?;
        let first = edge_key(first_items.first());
        if last_chunk == 0 {
            return Ok((first, edge_key(first_items.last())));
        }
        let (_, last_items) =
            self.read_chunk_run(r, &head, last_chunk..last_chunk + 1, &[], None)?;
        Ok((first, edge_key(last_items.last())))
    }

    /// The items of `chunks` with keys in `[lo, hi)`, read with one I/O, and
    /// the leaf index of the first.
    pub(in crate::tree) fn read_chunk_run(
        &self,
        r: &node::LeafRef,
        head: &LeafHead,
        chunks: Range<usize>,
        lo: &[u8],
        hi: Option<&[u8]>,
    ) -> Result<(usize, Vec<Item>)> {
        let (offset, _) = head.chunk_range(chunks.start);
        let (last_offset, last_len) = head.chunk_range(chunks.end - 1);
        let bytes = self
            .io
            .read_range_uncached(r.id, offset, last_offset + last_len - offset)?;
        let mut items: Vec<Item> = Vec::new();
        for c in chunks.clone() {
            let (chunk_offset, len) = head.chunk_range(c);
            let at = (chunk_offset - offset) as usize;
            let blocks = bytes.slice(at..at + len as usize);
            let chunk = head
                .decode_chunk_trusted(c, &blocks)
                .map_err(|e| self.corrupt(r.id, e))?;
            let before = items.len();
            items.extend(chunk);
            let from = before.saturating_sub(1);
            if let Some(w) = items[from..].windows(2).find(|w| w[0].key >= w[1].key) {
                let at = head.key_offset(c, &blocks, &w[1].key);
                let e = DecodeError::new(0, "leaf: items out of order").within(at);
                return Err(self.corrupt(r.id, e));
            }
        }
        let first_index = head.chunk_items(chunks.start).0 as usize;
        let start = item::lower_bound(&items, lo);
        let end = hi.map_or(items.len(), |hi| item::lower_bound(&items, hi));
        if first_index + items.len() > head.item_count as usize {
            return Err(self.corrupt(
                r.id,
                DecodeError::new(
                    ITEM_COUNT_AT,
                    format!(
                        "leaf: chunks from item {first_index} hold {} items, the header counts {}",
                        items.len(),
                        head.item_count
                    ),
                ),
            ));
        }
        items.truncate(end.max(start));
        items.drain(..start);
        Ok((first_index + start, items))
    }
}

/// The runs of chunks `read_leaf_spans` reads for sorted, disjoint `spans`:
/// which spans each run covers, and its chunks. Spans whose chunks lie at
/// most `gap_bytes` apart share a run. Punching a segment's flushed chunks
/// (`dead_chunks`) keeps every chunk of these runs: a read of fewer spans
/// later (pivots flush, never the reverse) finds its gaps no smaller.
pub(in crate::tree) fn chunk_runs(
    head: &LeafHead,
    spans: &[KeySpan<'_>],
    gap_bytes: u64,
) -> Vec<(Range<usize>, Range<usize>)> {
    if head.chunks.is_empty() {
        return Vec::new();
    }
    let chunks_of = |&(lo, hi): &KeySpan<'_>| {
        let last = hi.map_or(head.chunks.len() - 1, |hi| head.chunk_for(hi));
        (head.chunk_for(lo), last)
    };
    let mut runs = Vec::new();
    let mut s = 0;
    while s < spans.len() {
        let (first_chunk, mut last_chunk) = chunks_of(&spans[s]);
        let mut e = s + 1;
        while let Some(next) = spans.get(e) {
            let (next_first, next_last) = chunks_of(next);
            let (offset, len) = head.chunk_range(last_chunk);
            if head.chunk_range(next_first).0.saturating_sub(offset + len) > gap_bytes {
                break;
            }
            last_chunk = last_chunk.max(next_last);
            e += 1;
        }
        runs.push((s..e, first_chunk..last_chunk + 1));
        s = e;
    }
    runs
}
