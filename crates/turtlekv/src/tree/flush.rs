//! Flushing one pivot: the lowest-key prefix of its unflushed items (about a
//! leaf) goes to the child; segments are not rewritten, their flushed bounds
//! advance. The child is updated in memory and may come back as several
//! pieces, which replace the pivot.

use std::sync::Arc;

use bytes::Bytes;

use super::cut;
use super::item::{Item, lower_bound, merge_prefix, shortest_separator, total_size_bytes};
use super::merge::merge_runs;
use super::node::{Child, Flushed, LeafData, Node, Pivot};
use super::update::Update;
use crate::Result;

/// A replacement for one child: its lower key (empty = keep the pivot's) and subtree.
pub(super) type Piece = (Bytes, Child);

impl Update<'_> {
    pub(super) fn flush(&mut self, node: &mut Node, p: usize) -> Result<()> {
        let leaf_bytes = self.tree.config.leaf_max_bytes;
        let mut sources = Vec::new();
        for (s, seg) in node.segments.iter().enumerate() {
            if seg.bounds[p].is_some() {
                let items = self.items(&seg.data)?;
                let r = node.unflushed_range(seg, p, &items);
                sources.push((s, items, r));
            }
        }
        let runs: Vec<&[Item]> = sources
            .iter()
            .map(|(_, items, r)| &items[r.clone()])
            .collect();
        let (prefix, cut_key) = merge_prefix(&runs, leaf_bytes);
        let mut removed = 0u64;
        for (s, items, r) in &sources {
            let end = match &cut_key {
                Some(k) => r.start + lower_bound(&items[r.clone()], k),
                None => r.end,
            };
            removed += total_size_bytes(&items[r.start..end]) as u64;
            node.segments[*s].bounds[p] = if end >= r.end {
                None
            } else if end == 0 {
                Some(Flushed::default())
            } else {
                let key = shortest_separator(&items[end - 1].key, &items[end].key);
                Some(Flushed {
                    index: end as u32,
                    key,
                })
            };
        }
        debug_assert!(
            node.pivots[p].pending_bytes >= removed,
            "pending bytes undercount"
        );
        node.pivots[p].pending_bytes = node.pivots[p].pending_bytes.saturating_sub(removed);
        self.events.flushes_by_height[usize::from(node.height).min(7)] += 1;
        let pieces = self.apply_to_child(node, p, prefix)?;
        let count = pieces.len();
        self.replace_pivot(node, p, pieces)?;
        // The neighbours too: a changed child may now fit with one of them.
        self.fix_underfull(node, p.saturating_sub(1), count + 2)?;
        self.drop_inactive_segments(node)
    }

    /// Applies a sorted batch to child `p` and returns what replaces it.
    pub(super) fn apply_to_child(
        &mut self,
        node: &mut Node,
        p: usize,
        batch: Vec<Item>,
    ) -> Result<Vec<Piece>> {
        if node.height == 1 {
            let old = self.take_leaf(&node.pivots[p].child)?;
            let merged = merge_runs(&[&batch, &old], true);
            return Ok(self.leaf_pieces(merged));
        }
        let leaf_bytes = self.tree.config.leaf_max_bytes;
        let child = self.child_node(node, p)?;
        for piece in cut::cut_batch(batch, leaf_bytes) {
            self.insert_and_flush(child, piece)?;
        }
        let child = take_child_node(&mut node.pivots[p]);
        Ok(self
            .split_node(child)?
            .into_iter()
            .map(|(lower, n)| (lower, Child::Node(Box::new(n))))
            .collect())
    }

    /// Cuts leaf items into new leaves with separators between them.
    pub(super) fn leaf_pieces(&mut self, items: Vec<Item>) -> Vec<Piece> {
        let parts = cut::cut_leaves(items, &self.tree.config);
        self.events.leaf_splits += u64::from(parts.len() > 1);
        let mut pieces = Vec::with_capacity(parts.len());
        let mut previous_last: Option<Bytes> = None;
        for part in parts {
            let lower = match (&previous_last, part.first()) {
                (Some(prev), Some(first)) => shortest_separator(prev, &first.key),
                _ => Bytes::new(),
            };
            previous_last = part.last().map(|it| it.key.clone());
            pieces.push((lower, Child::Leaf(LeafData::New(Arc::new(part)))));
        }
        pieces
    }

    /// Replaces pivot `p` by `pieces`, spreading its segments' flushed bounds
    /// and pending bytes over the new pivots.
    pub(super) fn replace_pivot(
        &mut self,
        node: &mut Node,
        p: usize,
        pieces: Vec<Piece>,
    ) -> Result<()> {
        let count = pieces.len();
        let old_lower = node.pivots[p].lower.clone();
        let new_pivots: Vec<Pivot> = pieces
            .into_iter()
            .enumerate()
            .map(|(j, (lower, child))| Pivot {
                lower: if j == 0 { old_lower.clone() } else { lower },
                child,
                pending_bytes: 0,
            })
            .collect();
        let old_pending = node.pivots[p].pending_bytes;
        node.pivots.splice(p..=p, new_pivots);
        if count == 1 {
            node.pivots[p].pending_bytes = old_pending;
            return Ok(());
        }
        for s in 0..node.segments.len() {
            let old = node.segments[s].bounds[p].clone();
            node.segments[s]
                .bounds
                .splice(p..=p, std::iter::repeat_n(old.clone(), count));
            if old.is_none() {
                continue;
            }
            let items = self.items(&node.segments[s].data)?;
            for j in p..p + count {
                let r = node.unflushed_range(&node.segments[s], j, &items);
                if r.is_empty() {
                    node.segments[s].bounds[j] = None;
                } else {
                    node.pivots[j].pending_bytes += total_size_bytes(&items[r]) as u64;
                }
            }
        }
        debug_assert_eq!(
            node.pivots[p..p + count]
                .iter()
                .map(|q| q.pending_bytes)
                .sum::<u64>(),
            old_pending
        );
        Ok(())
    }
}

/// Moves an in-memory child node out of its pivot.
pub(super) fn take_child_node(pivot: &mut Pivot) -> Node {
    match std::mem::replace(
        &mut pivot.child,
        Child::Leaf(LeafData::New(Arc::new(Vec::new()))),
    ) {
        Child::Node(n) => *n,
        _ => unreachable!("the child was made an in-memory node before"),
    }
}
