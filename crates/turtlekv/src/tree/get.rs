//! Point lookups: newest buffer level first, only segments active for the
//! key's pivot, filter before leaf, hits below a flushed bound ignored.

use bytes::Bytes;

use super::item::Item;
use super::node::LeafRef;
use super::probe::PivotTarget;
use super::{Tree, corrupt};
use crate::Result;
use crate::filter;
use crate::page::{CachePriority, PageId};

#[cfg(test)]
thread_local! {
    /// Lookups the filter let through to a leaf that lacks the key.
    pub(super) static FILTER_FALSE_POSITIVES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl Tree {
    /// The value of `key` in the tree at `root`; `None` if absent or deleted.
    pub(crate) fn get(&self, root: Option<PageId>, key: &[u8]) -> Result<Option<Bytes>> {
        let Some(mut id) = root else {
            return Ok(None);
        };
        let hash = filter::key_hash(key);
        let mut expected_height = None;
        loop {
            let index = self.read_node_index(id)?;
            let node = index.probe(PivotTarget::Holding(key));
            if expected_height.is_some_and(|h| h != node.height) {
                return Err(corrupt(id, "child height does not match its parent"));
            }
            for seg in &node.segments {
                if key < seg.flushed_key {
                    continue; // flushed already: skip the segment unread
                }
                // A hit below the flushed bound was already moved down;
                // a newer version, if any, is further down the tree.
                if let Some((index, item)) =
                    self.probe_leaf(&seg.leaf, key, hash, seg.flushed_index)?
                {
                    if index >= seg.flushed_index {
                        return Ok(item.value);
                    }
                }
            }
            match node.child_leaf {
                Some(leaf) => {
                    return Ok(self
                        .probe_leaf(&leaf, key, hash, 0)?
                        .and_then(|(_, it)| it.value));
                }
                None => {
                    id = node.child_node;
                    expected_height = Some(node.height - 1);
                }
            }
        }
    }

    /// Looks `key` up in one stored leaf: filter, head, one chunk. Returns the
    /// item and its index in the leaf; items below `min_index` may be
    /// reported absent without reading their chunk.
    pub(super) fn probe_leaf(
        &self,
        r: &LeafRef,
        key: &[u8],
        hash: u64,
        min_index: u32,
    ) -> Result<Option<(u32, Item)>> {
        if r.filter_len > 0 {
            let bytes = self.read_filter(r)?;
            if !filter::may_contain(&bytes, hash).map_err(|reason| corrupt(r.id, reason))? {
                return Ok(None);
            }
        }
        let head = self.read_leaf_head(r)?;
        if head.chunks.is_empty() {
            return Ok(None);
        }
        let chunk = head.chunk_for(key);
        if head.chunk_items(chunk).1 <= min_index {
            return Ok(None); // the whole chunk was flushed: skip its read
        }
        let (offset, len) = head.chunk_range(chunk);
        let blocks = self
            .io
            .read_range(r.id, offset, len, CachePriority::LeafBlock)?;
        if blocks.len() as u64 != len {
            return Err(corrupt(r.id, "leaf chunk read short"));
        }
        let found = head
            .find_in_chunk(chunk, &blocks, key)
            .map_err(|reason| corrupt(r.id, reason))?;
        #[cfg(test)]
        if r.filter_len > 0 && found.is_none() {
            FILTER_FALSE_POSITIVES.with(|c| c.set(c.get() + 1));
        }
        Ok(found)
    }
}
