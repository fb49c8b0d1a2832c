//! The update buffer of a node: level-tiered insertion (binary counter) and
//! the flush policy that keeps the buffer within its bounds.

use std::sync::Arc;

use super::cut;
use super::item::{Item, total_size_bytes};
use super::merge::merge_runs;
use super::node::{Flushed, LeafData, MAX_LEVELS, Node, Segment};
use super::update::Update;
use crate::Result;

/// A segment's items and the ranges of them still unflushed.
type LiveRanges = (Arc<Vec<Item>>, Vec<std::ops::Range<usize>>);

impl Update<'_> {
    /// Inserts a sorted batch into the buffer and restores the buffer bounds
    /// by flushing.
    pub(super) fn insert_and_flush(&mut self, node: &mut Node, batch: Vec<Item>) -> Result<()> {
        self.insert_batch(node, batch)?;
        let leaf_bytes = self.tree.config.leaf_max_bytes as u64;
        if let Some(p) = max_pending_pivot(node) {
            if node.pivots[p].pending_bytes >= leaf_bytes {
                self.flush(node, p)?;
            }
        }
        self.restore(node)
    }

    /// Flushes until the buffer holds at most `leaf_size * (pivots - 1)`
    /// bytes and its metadata fits the page (pivot overflow is left to a split).
    pub(super) fn restore(&mut self, node: &mut Node) -> Result<()> {
        let config = self.tree.config;
        loop {
            let total = node.total_pending_bytes();
            let bound = config.leaf_max_bytes as u64 * (node.pivots.len() as u64 - 1);
            let splits_instead =
                node.pivot_bytes() > config.node_pivot_max_bytes() && node.pivots.len() >= 4;
            let buffer_overflows = node.encoded_len() > config.node_max_bytes && !splits_instead;
            if node.segments.is_empty() || (total <= bound && !buffer_overflows) {
                return Ok(());
            }
            let p = max_pending_pivot(node).expect("a node has pivots");
            if node.pivots[p].pending_bytes == 0 {
                // Segments without pending bytes hold only empty ranges.
                self.drop_inactive_segments(node)?;
                return Ok(());
            }
            self.flush(node, p)?;
        }
    }

    /// Merges the batch with the occupied levels `0..k` into level `k`, the
    /// first vacant one (or the last level when all are occupied).
    fn insert_batch(&mut self, node: &mut Node, batch: Vec<Item>) -> Result<()> {
        let vacant = (0..MAX_LEVELS).find(|l| !node.segments.iter().any(|s| s.level == *l));
        let k = vacant.unwrap_or(MAX_LEVELS - 1);
        self.events.level_inserts[k as usize] += 1;
        let (merging, keep): (Vec<Segment>, Vec<Segment>) = std::mem::take(&mut node.segments)
            .into_iter()
            .partition(|s| s.level <= k);
        // Runs newest first: the batch, then the live ranges of level 0, 1,
        // ... (slices, not copies). Ranges of one level never share a key,
        // so their order among themselves does not matter to the merge.
        let mut sources: Vec<LiveRanges> = Vec::new();
        for level in 0..=k {
            for seg in merging.iter().filter(|s| s.level == level) {
                let items = self.items(&seg.data)?;
                let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
                for p in 0..node.pivots.len() {
                    let r = node.unflushed_range(seg, p, &items);
                    let bytes = total_size_bytes(&items[r.clone()]) as u64;
                    debug_assert!(
                        node.pivots[p].pending_bytes >= bytes,
                        "pending bytes undercount"
                    );
                    node.pivots[p].pending_bytes =
                        node.pivots[p].pending_bytes.saturating_sub(bytes);
                    match ranges.last_mut() {
                        Some(last) if last.end == r.start => last.end = r.end,
                        _ if r.is_empty() => {}
                        _ => ranges.push(r),
                    }
                }
                sources.push((items, ranges));
            }
        }
        for seg in &merging {
            self.drop_segment(seg, node.height)?;
        }
        let merged = if sources.is_empty() {
            // Into a vacant level 0: the batch is the segment, no copy.
            batch
        } else {
            let mut run_refs: Vec<&[Item]> = vec![&batch];
            for (items, ranges) in &sources {
                run_refs.extend(ranges.iter().map(|r| &items[r.clone()]));
            }
            merge_runs(&run_refs, false)
        };
        drop(sources);
        let mut segments = Vec::new();
        for part in cut::cut_leaves(merged, &self.tree.config) {
            if part.is_empty() {
                continue;
            }
            let mut bounds = vec![None; node.pivots.len()];
            for (p, bound) in bounds.iter_mut().enumerate() {
                let r = node.pivot_index_range(p, &part);
                if !r.is_empty() {
                    *bound = Some(Flushed::default());
                    node.pivots[p].pending_bytes += total_size_bytes(&part[r]) as u64;
                }
            }
            segments.push(Segment {
                level: k,
                shared: false,
                item_count: part.len() as u32,
                data: LeafData::New(Arc::new(part)),
                bounds,
            });
        }
        segments.extend(keep);
        node.segments = segments;
        Ok(())
    }

    /// Removes and returns (merged, newest first) every unflushed item of
    /// pivot `p`; the pivot is left with nothing pending.
    pub(super) fn take_all_pending(&mut self, node: &mut Node, p: usize) -> Result<Vec<Item>> {
        let mut runs = Vec::new();
        for s in 0..node.segments.len() {
            if node.segments[s].bounds[p].is_none() {
                continue;
            }
            let items = self.items(&node.segments[s].data)?;
            let r = node.unflushed_range(&node.segments[s], p, &items);
            runs.push((items, r));
            node.segments[s].bounds[p] = None;
        }
        node.pivots[p].pending_bytes = 0;
        let run_refs: Vec<&[Item]> = runs.iter().map(|(items, r)| &items[r.clone()]).collect();
        Ok(merge_runs(&run_refs, false))
    }

    /// Drops segments no pivot is active for.
    pub(super) fn drop_inactive_segments(&mut self, node: &mut Node) -> Result<()> {
        let (keep, gone): (Vec<Segment>, Vec<Segment>) = std::mem::take(&mut node.segments)
            .into_iter()
            .partition(|s| s.bounds.iter().any(Option::is_some));
        node.segments = keep;
        for seg in &gone {
            self.drop_segment(seg, node.height)?;
        }
        Ok(())
    }
}

/// The pivot with the most pending bytes (the lowest on ties).
pub(super) fn max_pending_pivot(node: &Node) -> Option<usize> {
    node.pivots
        .iter()
        .enumerate()
        .rev()
        .max_by_key(|(_, p)| p.pending_bytes)
        .map(|(i, _)| i)
}
