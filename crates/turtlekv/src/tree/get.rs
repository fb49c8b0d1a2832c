//! Point lookups: newest buffer level first, only segments active for the
//! key's pivot, filter before leaf, hits below a flushed bound ignored.

use std::cmp::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::item::Item;
use super::node::LeafRef;
use super::probe::{NodeProbe, PivotTarget};
use super::{CachedFilter, Tree, corrupt};
use crate::Result;
use crate::filter;
use crate::key::compare_keys;
use crate::page::{CachePriority, PageId};

#[cfg(test)]
thread_local! {
    /// Lookups the filter let through to a leaf that lacks the key.
    pub(super) static FILTER_FALSE_POSITIVES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// What a lookup does with one segment or leaf of a node.
enum Probe {
    /// The key was flushed from the segment: nothing to read.
    Skip,
    /// Search it, with its filter read (`None`: the page has none).
    Search(Option<Arc<CachedFilter>>),
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
            let probes = self.prefetch_filters(&node, key, hash)?;
            for (seg, probe) in node.segments.iter().zip(&probes) {
                let Probe::Search(filter) = probe else {
                    continue; // flushed already: skip the segment unread
                };
                // A hit below the flushed bound was already moved down;
                // a newer version, if any, is further down the tree.
                if let Some((index, item)) = self.probe_leaf_filtered(
                    &seg.leaf,
                    filter.as_ref(),
                    key,
                    hash,
                    seg.flushed_index,
                )? && index >= seg.flushed_index
                {
                    return Ok(item.value);
                }
            }
            match node.child_leaf {
                Some(leaf) => {
                    let filter = match probes.get(node.segments.len()) {
                        Some(Probe::Search(filter)) => filter.as_ref(),
                        _ => None,
                    };
                    return Ok(self
                        .probe_leaf_filtered(&leaf, filter, key, hash, 0)?
                        .and_then(|(_, it)| it.value));
                }
                None => {
                    id = node.child_node;
                    expected_height = Some(node.height - 1);
                }
            }
        }
    }

    /// For every segment of `node`, then its child leaf: skipped (the key
    /// is flushed from the segment) or to probe, with the filter read and
    /// the fingerprints for `hash` prefetched. A lookup probes several
    /// filters per node, and each probe is otherwise a memory stall of its
    /// own.
    fn prefetch_filters(&self, node: &NodeProbe<'_>, key: &[u8], hash: u64) -> Result<Vec<Probe>> {
        let segments = node.segments.iter().map(|seg| {
            let flushed = compare_keys(key, seg.flushed_key) == Ordering::Less;
            (!flushed).then_some(&seg.leaf)
        });
        let child = node.child_leaf.as_ref().map(Some);
        let mut probes = Vec::with_capacity(node.segments.len() + 1);
        for leaf in segments.chain(child) {
            probes.push(match leaf {
                None => Probe::Skip,
                Some(r) if r.filter_len > 0 => {
                    let filter = self.read_filter(r)?;
                    filter::prefetch_probe(&filter.bytes, hash);
                    Probe::Search(Some(filter))
                }
                Some(_) => Probe::Search(None),
            });
        }
        Ok(probes)
    }

    /// Looks `key` up in one stored leaf: filter, head, one chunk. Returns the
    /// item and its index in the leaf; items below `min_index` may be
    /// reported absent without reading their chunk. `filter` is the leaf's
    /// filter when the caller has read it already.
    fn probe_leaf_filtered(
        &self,
        r: &LeafRef,
        filter: Option<&Arc<CachedFilter>>,
        key: &[u8],
        hash: u64,
        min_index: u32,
    ) -> Result<Option<(u32, Item)>> {
        if r.filter_len > 0 {
            let read;
            let filter = match filter {
                Some(filter) => filter,
                None => {
                    read = self.read_filter(r)?;
                    &read
                }
            };
            if !filter::may_contain(&filter.bytes, hash).map_err(|reason| corrupt(r.id, reason))? {
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
