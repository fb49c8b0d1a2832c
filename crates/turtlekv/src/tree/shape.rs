//! Cheap tree statistics from node pages alone (no leaf is read).

use std::collections::HashSet;

use bytes::Bytes;

use crate::Result;
use crate::page::PageId;
use crate::tree::Tree;
use crate::tree::format::node::{Child, LeafData};

/// What one node above the leaves holds in its buffer.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct NodeSpace {
    /// The node's lower bound: a key that leads a descent to it.
    pub key: Bytes,
    /// Blocks its segments occupy on disk (a segment shared with a sibling
    /// counts in both).
    pub segment_page_bytes: u64,
    /// Its unflushed items' bytes.
    pub pending_bytes: u64,
}

/// Shape of a tree version.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct TreeShape {
    /// Node levels above the leaves (0 for an empty tree).
    pub height: u32,
    pub node_pages: u64,
    pub leaf_pages: u64,
    /// Distinct buffer segment pages (a segment shared by two nodes counts once).
    pub segment_pages: u64,
    /// Bytes of unflushed buffered items, summed over all nodes.
    pub pending_bytes: u64,
    /// Of those, in nodes of height 1 (whose children are leaves).
    pub pending_bytes_above_leaves: u64,
    /// Blocks the leaf pages occupy on disk, in bytes.
    pub leaf_page_bytes: u64,
    /// Blocks the distinct segment pages occupy on disk, in bytes: their
    /// unflushed items and the flushed ones a page keeps until no pivot
    /// is active in it, but for the chunks punched out of it.
    pub segment_page_bytes: u64,
    /// Slots of the leaf pages, in bytes: what the leaves would occupy full.
    pub leaf_capacity_bytes: u64,
    /// Every node above the leaves, in key order.
    pub nodes_above_leaves: Vec<NodeSpace>,
}

impl Tree {
    /// Walks the node pages of the tree at `root` (they are small and cached
    /// with the highest priority) and counts pages by kind.
    pub(crate) fn shape(&self, root: Option<PageId>) -> Result<TreeShape> {
        let mut shape = TreeShape::default();
        let mut segments = HashSet::new();
        let mut stack: Vec<(PageId, Bytes)> =
            root.map(|id| (id, Bytes::new())).into_iter().collect();
        while let Some((id, lower)) = stack.pop() {
            let node = self.read_node(id)?;
            shape.height = shape.height.max(u32::from(node.height));
            shape.node_pages += 1;
            let pending = node.total_pending_bytes();
            shape.pending_bytes += pending;
            let mut node_segment_bytes = 0;
            for seg in &node.segments {
                if let LeafData::Stored(r) = &seg.data {
                    node_segment_bytes += self.stored_bytes(r.id);
                    if segments.insert(r.id) {
                        shape.segment_page_bytes += self.stored_bytes(r.id);
                    }
                }
            }
            if node.height == 1 {
                shape.pending_bytes_above_leaves += pending;
                shape.nodes_above_leaves.push(NodeSpace {
                    key: lower.clone(),
                    segment_page_bytes: node_segment_bytes,
                    pending_bytes: pending,
                });
            }
            // Pushed in reverse, so nodes are visited in key order.
            for pivot in node.pivots.iter().rev() {
                match &pivot.child {
                    Child::StoredNode(child) => {
                        let child_lower = if pivot.lower.is_empty() {
                            lower.clone()
                        } else {
                            pivot.lower.clone()
                        };
                        stack.push((*child, child_lower));
                    }
                    Child::Leaf(leaf) => {
                        shape.leaf_pages += 1;
                        shape.leaf_capacity_bytes += self.config.leaf_slot_bytes as u64;
                        if let LeafData::Stored(r) = leaf {
                            shape.leaf_page_bytes += self.stored_bytes(r.id);
                        }
                    }
                    Child::Node(_) => unreachable!("decoded nodes reference stored pages"),
                }
            }
        }
        shape.segment_pages = segments.len() as u64;
        Ok(shape)
    }

    /// Bytes a stored leaf or segment page occupies in its file: its id
    /// names its block count.
    /// Bytes the page occupies on disk: its blocks, less those punched out
    /// of it (a segment's flushed chunks).
    fn stored_bytes(&self, id: PageId) -> u64 {
        let blocks = id.blocks().saturating_sub(self.io.punched_blocks(id));
        u64::from(blocks) * self.config.leaf_block_bytes as u64
    }
}
