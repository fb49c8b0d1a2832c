//! Which old pages a batch update leaves unreachable. Replaced nodes and
//! leaves are dead outright; a dropped segment is dead unless it was shared
//! (by the two halves of an earlier split) and the other holder still has it.

use super::update::Update;
use crate::Result;
use crate::page::PageId;
use crate::tree::format::node::{Child, LeafData, Node};

impl Update<'_> {
    /// Shared segments dropped by this update that no node of the new tree
    /// references any more. Only nodes at the dropping node's height whose
    /// range meets the segment's keys can hold it (it came from a split).
    pub(in crate::tree) fn resolve_shared_dropped(&mut self, root: &Node) -> Result<Vec<PageId>> {
        let mut dead = Vec::new();
        for (id, height, first, last) in std::mem::take(&mut self.shared_dropped) {
            if !self.references_segment(root, height, &first, &last, id)? {
                dead.push(id);
            }
        }
        Ok(dead)
    }

    fn references_segment(
        &mut self,
        node: &Node,
        height: u8,
        first: &[u8],
        last: &[u8],
        id: PageId,
    ) -> Result<bool> {
        if node.height == height {
            return Ok(node
                .segments
                .iter()
                .any(|s| matches!(&s.data, LeafData::Stored(r) if r.id == id)));
        }
        if node.height < height {
            return Ok(false);
        }
        for p in node.pivot_for(first)..=node.pivot_for(last) {
            let found = match &node.pivots[p].child {
                Child::Node(child) => self.references_segment(child, height, first, last, id)?,
                Child::StoredNode(child_id) => {
                    let child = self.tree.read_node(*child_id)?;
                    self.references_segment(&child, height, first, last, id)?
                }
                Child::Leaf(_) => false,
            };
            if found {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
