//! Cheap tree statistics from node pages alone (no leaf is read).

use std::collections::HashSet;

use crate::Result;
use crate::page::PageId;
use crate::tree::Tree;
use crate::tree::format::node::{Child, LeafData};

/// Shape of a tree version.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TreeShape {
    /// Node levels above the leaves (0 for an empty tree).
    pub height: u32,
    pub node_pages: u64,
    pub leaf_pages: u64,
    /// Distinct buffer segment pages (a segment shared by two nodes counts once).
    pub segment_pages: u64,
    /// Bytes of unflushed buffered items, summed over all nodes.
    pub pending_bytes: u64,
}

impl Tree {
    /// Walks the node pages of the tree at `root` (they are small and cached
    /// with the highest priority) and counts pages by kind.
    pub(crate) fn shape(&self, root: Option<PageId>) -> Result<TreeShape> {
        let mut shape = TreeShape::default();
        let mut segments = HashSet::new();
        let mut stack: Vec<PageId> = root.into_iter().collect();
        while let Some(id) = stack.pop() {
            let node = self.read_node(id)?;
            shape.height = shape.height.max(u32::from(node.height));
            shape.node_pages += 1;
            shape.pending_bytes += node.total_pending_bytes();
            for seg in &node.segments {
                if let LeafData::Stored(r) = &seg.data {
                    segments.insert(r.id);
                }
            }
            for pivot in &node.pivots {
                match &pivot.child {
                    Child::StoredNode(child) => stack.push(*child),
                    Child::Leaf(_) => shape.leaf_pages += 1,
                    Child::Node(_) => unreachable!("decoded nodes reference stored pages"),
                }
            }
        }
        shape.segment_pages = segments.len() as u64;
        Ok(shape)
    }
}
