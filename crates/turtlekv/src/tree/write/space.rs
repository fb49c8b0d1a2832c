//! Space reclamation: draining the buffers of the nodes above the leaves
//! that hold the most garbage (`docs/tuning.md`, "Disk space").
//!
//! A node's segments keep their flushed items on disk until every pivot
//! they cover has flushed, and the items still buffered shadow older
//! versions in the leaves (and tombstones shadow keys that may not exist
//! below). Flushing every pivot of such a node to its leaves drops all of
//! it: the segments go, the leaves keep one version per key, tombstones
//! vanish. The caller picks the nodes (worst first) and a byte budget.

use bytes::Bytes;

use super::buffer::max_pending_pivot;
use super::flush::take_child_node;
use super::update::Update;
use crate::Result;
use crate::tree::format::node::{Child, LeafData, Node};

/// What one batch update does to reclaim space: from the shape of the
/// version it starts from, chosen by the store layer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ReclaimPlan {
    /// A key within each node above the leaves to drain, worst first.
    pub targets: Vec<Bytes>,
    /// Leaf and buffered bytes the update may rewrite for it; 0 = none.
    pub budget_bytes: u64,
}

impl Update<'_> {
    /// Drains the plan's nodes, worst first, until its budget is spent.
    pub(in crate::tree) fn reclaim(&mut self, root: &mut Node, plan: &ReclaimPlan) -> Result<()> {
        let mut budget = plan.budget_bytes;
        for key in &plan.targets {
            if budget == 0 {
                break;
            }
            self.drain_on_path(root, key, &mut budget)?;
            self.spill_if_large(root)?;
        }
        Ok(())
    }

    /// Drains the node above the leaves whose range holds `key`, then
    /// reshapes every node on the way back up, as a flush would.
    fn drain_on_path(&mut self, node: &mut Node, key: &[u8], budget: &mut u64) -> Result<()> {
        if node.height == 1 {
            return self.drain(node, budget);
        }
        // What this node buffers for the child goes down first, so the
        // drained node's leaves end up with every key's newest version
        // (tombstones included, which then vanish).
        loop {
            let p = node.pivot_for(key);
            let pending = node.pivots[p].pending_bytes;
            if pending == 0 || *budget == 0 {
                break;
            }
            self.flush(node, p)?;
            self.events.reclaim_flushes += 1;
            *budget = budget.saturating_sub(pending.min(self.leaf_max()));
        }
        let p = node.pivot_for(key);
        let child = self.child_node(node, p)?;
        self.drain_on_path(child, key, budget)?;
        let child = take_child_node(&mut node.pivots[p]);
        let pieces: Vec<_> = self
            .split_node(child)?
            .into_iter()
            .map(|(lower, n)| (lower, Child::Node(Box::new(n))))
            .collect();
        let count = pieces.len();
        self.replace_pivot(node, p, pieces)?;
        self.fix_underfull(node, p.saturating_sub(1), count + 2)?;
        Ok(())
    }

    /// Flushes the pivots of `node` (height 1), fullest first, until none
    /// has pending items or the budget is spent; each flush costs the
    /// bytes it moves plus the leaf it rewrites.
    fn drain(&mut self, node: &mut Node, budget: &mut u64) -> Result<()> {
        debug_assert_eq!(node.height, 1);
        while *budget > 0 {
            let Some(p) = max_pending_pivot(node) else {
                break;
            };
            let pending = node.pivots[p].pending_bytes;
            if pending == 0 {
                break;
            }
            let leaf_bytes = self.leaf_cost_bytes(&node.pivots[p].child);
            self.flush(node, p)?;
            self.events.reclaim_flushes += 1;
            *budget = budget.saturating_sub(pending.min(self.leaf_max()) + leaf_bytes);
            self.spill_if_large(node)?;
        }
        self.drop_inactive_segments(node)
    }

    /// What rewriting a leaf child costs: its page's size.
    fn leaf_cost_bytes(&self, child: &Child) -> u64 {
        match child {
            Child::Leaf(LeafData::Stored(r)) => {
                u64::from(r.id.blocks()) * self.tree.config.leaf_block_bytes as u64
            }
            Child::Leaf(LeafData::New(items)) => {
                crate::tree::format::item::total_size_bytes(items) as u64
            }
            _ => 0,
        }
    }

    fn leaf_max(&self) -> u64 {
        self.tree.config.leaf_max_bytes as u64
    }
}
