//! A batch's merge into buffer level `k`: the batch and the unflushed items
//! of levels `0..=k` become new level-`k` segments. It goes one window of
//! pivots at a time. From a stored segment it reads only the span the
//! window covers (through the chunk index, as flushes do); it cuts output
//! leaves as they fill, and writes those of high levels out at once. Its
//! memory is so bounded by a window and a few output pages, not by the
//! levels it merges, which can hold far more than the memory budget's
//! share for an update.

use std::ops::Range;
use std::sync::Arc;

use super::background_drop::drop_in_background;
use super::cut;
use super::merge::merge_runs;
use super::new_pages::SPILL_MIN_LEVEL;
use super::span::KeySpan;
use super::update::Update;
use crate::Result;
use crate::tree::Tree;
use crate::tree::format::item::{Item, lower_bound, total_size_bytes};
use crate::tree::format::node::{Flushed, LeafData, Node, Segment};

/// A window's input aims at this many leaves' worth of pending bytes (or
/// one pivot, if it alone holds more): enough items for the parallel merge
/// to pay off.
const WINDOW_LEAVES: u64 = 4;
/// New high-level segments a merge holds before it writes them together.
const WRITE_BATCH_PAGES: usize = 4;
/// A merge reads the unflushed spans of a segment that lie at most this far
/// apart with one I/O, flushed items between them included: a few blocks
/// more cost less than another read.
pub(in crate::tree) const SPAN_GAP_READ_BYTES: u64 = 32 * 1024;

/// A segment's items (whole or a span) and the ranges of them a window merges.
type WindowRuns = (Arc<Vec<Item>>, Vec<Range<usize>>);

/// The merge's output so far.
struct LevelOutput {
    level: u8,
    /// Merged items not yet cut into a leaf.
    tail: Vec<Item>,
    /// Item bytes in `tail`.
    tail_bytes: usize,
    segments: Vec<Segment>,
    /// New segments at the end of `segments` not yet written.
    unwritten: usize,
}

impl Update<'_> {
    /// Merges `batch` (newest) with the `merging` segments (all of levels
    /// `0..=k`, taken out of `node`) and returns the new level-`k`
    /// segments, in key order. Pending bytes follow the items.
    pub(in crate::tree) fn merge_into_level(
        &mut self,
        node: &mut Node,
        batch: Vec<Item>,
        mut merging: Vec<Segment>,
        k: u8,
    ) -> Result<Vec<Segment>> {
        // Newest first; within a level keys never repeat, so order there
        // does not matter to the merge.
        merging.sort_by_key(|s| s.level);
        let mut out = LevelOutput {
            level: k,
            tail: Vec::new(),
            tail_bytes: 0,
            segments: Vec::new(),
            unwritten: 0,
        };
        let windows = pivot_windows(node, WINDOW_LEAVES * self.tree.config.leaf_max_bytes as u64);
        let mut batch_rest = &batch[..];
        for (w, pivots) in windows.iter().enumerate() {
            // The last window takes what is left of the batch, so no item
            // can fall outside every window.
            let batch_end = match node.pivot_range(pivots.end - 1).1 {
                Some(hi) if w + 1 < windows.len() => lower_bound(batch_rest, hi),
                _ => batch_rest.len(),
            };
            let (batch_part, rest) = batch_rest.split_at(batch_end);
            batch_rest = rest;
            let sources = self.window_runs(node, &merging, pivots.clone())?;
            let mut runs: Vec<&[Item]> = vec![batch_part];
            for (items, ranges) in &sources {
                runs.extend(ranges.iter().map(|r| &items[r.clone()]));
            }
            let merged = merge_runs(&runs, false);
            drop(runs);
            drop_in_background(sources);
            out.tail_bytes += total_size_bytes(&merged);
            out.tail.extend(merged);
            if out.tail_bytes > 2 * self.tree.config.leaf_max_bytes {
                let parts = cut::take_full_leaves(&mut out.tail, &self.tree.config);
                out.tail_bytes = total_size_bytes(&out.tail);
                self.emit(node, &mut out, parts)?;
            }
        }
        let tail = std::mem::take(&mut out.tail);
        self.emit(node, &mut out, cut::cut_leaves(tail, &self.tree.config))?;
        for seg in &merging {
            self.drop_segment(seg, node.height)?;
        }
        drop_in_background((batch, merging));
        Ok(out.segments)
    }

    /// The unflushed items of `merging` within `pivots`, taking their bytes
    /// off the pivots' pending bytes.
    fn window_runs(
        &mut self,
        node: &mut Node,
        merging: &[Segment],
        pivots: Range<usize>,
    ) -> Result<Vec<WindowRuns>> {
        let mut sources = Vec::new();
        for seg in merging {
            let active: Vec<usize> = pivots
                .clone()
                .filter(|&p| seg.bounds[p].is_some())
                .collect();
            if active.is_empty() {
                continue;
            }
            if let Some(items) = self.decoded(&seg.data) {
                let ranges = take_unflushed(self.tree, node, seg, &active, &items, 0)?;
                sources.push((items, ranges));
                continue;
            }
            let LeafData::Stored(r) = &seg.data else {
                unreachable!("new segments are always decoded")
            };
            let spans: Vec<KeySpan<'_>> = active
                .iter()
                .map(|&p| unflushed_span(node, seg, p))
                .collect();
            let reads = self.tree.read_leaf_spans(r, &spans, SPAN_GAP_READ_BYTES)?;
            for read in reads {
                // A read starts where its first span does; where that is
                // the flushed key, the item at the bound's index must be
                // read (later spans read the items between anyway, and
                // the index decides).
                let first = active[read.spans.start];
                let bound_index = seg.bounds[first].as_ref().map_or(0, |b| b.index as usize);
                if node.unflushed_start(seg, first).1 && read.first_index > bound_index {
                    return Err(self.tree.corrupt_buffer(
                        node.page,
                        node.height,
                        format!(
                            "flushed key of pivot {first} lies above the item at its bound in \
                             segment {:#x}",
                            r.id.to_raw()
                        ),
                    ));
                }
                let items = Arc::new(read.items);
                let pivots = &active[read.spans];
                let ranges =
                    take_unflushed(self.tree, node, seg, pivots, &items, read.first_index)?;
                self.events.merge_read_item_bytes += total_size_bytes(&items) as u64;
                self.events.merge_unflushed_item_bytes += ranges
                    .iter()
                    .map(|r| total_size_bytes(&items[r.clone()]) as u64)
                    .sum::<u64>();
                sources.push((items, ranges));
            }
        }
        Ok(sources)
    }

    /// Adds `parts` as new level segments, activating the pivots they
    /// cover; writes high-level ones out once a batch of them is ready.
    fn emit(
        &mut self,
        node: &mut Node,
        out: &mut LevelOutput,
        parts: Vec<Vec<Item>>,
    ) -> Result<()> {
        for mut part in parts {
            if part.is_empty() {
                continue;
            }
            // The first part of a cut keeps the capacity of the whole run.
            if part.capacity() > 2 * part.len() {
                part.shrink_to_fit();
            }
            out.segments.push(new_segment(node, out.level, part));
            if out.level >= SPILL_MIN_LEVEL {
                out.unwritten += 1;
            }
        }
        if out.unwritten >= WRITE_BATCH_PAGES {
            let from = out.segments.len() - out.unwritten;
            self.write_segments_now(&mut out.segments[from..])?;
            self.events.level_merge_writes += 1;
            out.unwritten = 0;
        }
        Ok(())
    }
}

/// A new segment of `level` holding `items`, active (with nothing flushed)
/// for the pivots it has items for, whose pending bytes grow by them.
pub(in crate::tree) fn new_segment(node: &mut Node, level: u8, items: Vec<Item>) -> Segment {
    let mut bounds = vec![None; node.pivots.len()];
    for (p, bound) in bounds.iter_mut().enumerate() {
        let r = node.pivot_index_range(p, &items);
        if !r.is_empty() {
            *bound = Some(Flushed::default());
            node.pivots[p].pending_bytes += total_size_bytes(&items[r]) as u64;
        }
    }
    Segment {
        level,
        shared: false,
        item_count: items.len() as u32,
        data: LeafData::New(Arc::new(items)),
        bounds,
        flushed_in_update: false,
    }
}

/// Consecutive pivot ranges holding about `window_bytes` of pending bytes
/// each (at least one pivot); they cover every pivot.
fn pivot_windows(node: &Node, window_bytes: u64) -> Vec<Range<usize>> {
    let mut windows = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (p, pivot) in node.pivots.iter().enumerate() {
        if p > start && bytes + pivot.pending_bytes > window_bytes {
            windows.push(start..p);
            (start, bytes) = (p, 0);
        }
        bytes += pivot.pending_bytes;
    }
    windows.push(start..node.pivots.len());
    windows
}

/// Pivot `p`'s unflushed keys in `seg`: from its flushed bound's key (which
/// lies between the last flushed item and the first unflushed one) or the
/// pivot's lower bound, whichever is higher, to the pivot's upper bound.
fn unflushed_span<'a>(node: &'a Node, seg: &'a Segment, p: usize) -> KeySpan<'a> {
    let (lo, _) = node.unflushed_start(seg, p);
    let hi = node.pivot_range(p).1;
    (lo.as_ref(), hi.map(|h| h.as_ref()))
}

/// The ranges of `items` (from leaf index `first_index` on) that hold the
/// unflushed items of `pivots`, joined where they touch; their bytes come
/// off the pivots' pending bytes. As for flushes, a flushed bound's index
/// rules where it and its key disagree. A count short of the items is
/// corruption: it comes from the node's page.
fn take_unflushed(
    tree: &Tree,
    node: &mut Node,
    seg: &Segment,
    pivots: &[usize],
    items: &[Item],
    first_index: usize,
) -> Result<Vec<Range<usize>>> {
    let mut ranges: Vec<Range<usize>> = Vec::new();
    for &p in pivots {
        let r = node.unflushed_range_in_span(seg, p, items, first_index);
        let bytes = total_size_bytes(&items[r.clone()]) as u64;
        let pending = node.pivots[p].pending_bytes;
        let Some(left) = pending.checked_sub(bytes) else {
            return Err(tree.corrupt_buffer(
                node.page,
                node.height,
                format!("pivot {p} counts {pending} pending bytes, a merge took {bytes}"),
            ));
        };
        node.pivots[p].pending_bytes = left;
        match ranges.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ if r.is_empty() => {}
            _ => ranges.push(r),
        }
    }
    Ok(ranges)
}
