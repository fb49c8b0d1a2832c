//! The update buffer of a node: level-tiered insertion (binary counter) and
//! the flush policy that keeps the buffer within its bounds.

use super::background_drop::drop_in_background;
use super::cut;
use super::level_merge::new_segment;
use super::merge::merge_runs;
use super::update::Update;
use crate::Result;
use crate::tree::format::item::Item;
use crate::tree::format::node::{MAX_LEVELS, Node, Segment};

impl Update<'_> {
    /// Inserts a sorted batch into the buffer and restores the buffer bounds
    /// by flushing.
    pub(in crate::tree) fn insert_and_flush(
        &mut self,
        node: &mut Node,
        batch: Vec<Item>,
    ) -> Result<()> {
        self.insert_batch(node, batch)?;
        let leaf_bytes = self.tree.config.leaf_max_bytes as u64;
        if let Some(p) = max_pending_pivot(node)
            && node.pivots[p].pending_bytes >= leaf_bytes
        {
            self.flush(node, p)?;
        }
        self.restore(node)
    }

    /// Flushes until the buffer holds at most `leaf_size * (pivots - 1)`
    /// bytes and its metadata fits the page (pivot overflow is left to a split).
    pub(in crate::tree) fn restore(&mut self, node: &mut Node) -> Result<()> {
        let config = self.tree.config;
        loop {
            let total = node.total_pending_bytes();
            let bound = config.leaf_max_bytes as u64 * (node.pivots.len() as u64 - 1);
            let splits_instead = node.should_split(&config);
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
        let mut segments = if merging.is_empty() {
            // Into a vacant level 0: the batch is the segment, no copy.
            cut::cut_leaves(batch, &self.tree.config)
                .into_iter()
                .filter(|part| !part.is_empty())
                .map(|part| new_segment(node, k, part))
                .collect()
        } else {
            self.merge_into_level(node, batch, merging, k)?
        };
        segments.extend(keep);
        node.segments = segments;
        Ok(())
    }

    /// Removes and returns (merged, newest first) every unflushed item of
    /// pivot `p`; the pivot is left with nothing pending.
    pub(in crate::tree) fn take_all_pending(
        &mut self,
        node: &mut Node,
        p: usize,
    ) -> Result<Vec<Item>> {
        let mut runs = Vec::new();
        for s in 0..node.segments.len() {
            if node.segments[s].bounds[p].is_none() {
                continue;
            }
            // Only the pivot's unflushed part: the rest of a stored
            // segment may be punched out of its page.
            runs.push(self.unflushed_items(node, &node.segments[s], p)?);
            node.segments[s].bounds[p] = None;
            node.segments[s].flushed_in_update = true;
        }
        node.pivots[p].pending_bytes = 0;
        let run_refs: Vec<&[Item]> = runs.iter().map(|u| u.slice()).collect();
        let merged = merge_runs(&run_refs, false);
        drop(run_refs);
        drop_in_background(runs);
        Ok(merged)
    }

    /// Drops segments no pivot is active for.
    pub(in crate::tree) fn drop_inactive_segments(&mut self, node: &mut Node) -> Result<()> {
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
pub(in crate::tree) fn max_pending_pivot(node: &Node) -> Option<usize> {
    node.pivots
        .iter()
        .enumerate()
        .rev()
        .max_by_key(|(_, p)| p.pending_bytes)
        .map(|(i, _)| i)
}
