//! Point lookups: newest buffer level first, only segments active for the
//! key's pivot, filter before leaf, hits below a flushed bound ignored.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::values::Value;

use super::memo::Memo;
use super::probe::{LeafMemos, NodeIndex, NodeProbe, PivotTarget};
use crate::Result;
use crate::error::DecodeError;
use crate::filter;
use crate::key::compare_keys;
use crate::page::{CachePriority, PageId};
use crate::tree::CachedFilter;
use crate::tree::Tree;
use crate::tree::format::item::Item;
use crate::tree::format::leaf::LeafHead;
use crate::tree::format::node::LeafRef;

#[cfg(test)]
thread_local! {
    /// Lookups the filter let through to a leaf that lacks the key.
    pub(in crate::tree) static FILTER_FALSE_POSITIVES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// What a lookup does with one segment or leaf of a node.
pub(super) enum Probe {
    /// The key was flushed from the segment: nothing to read.
    Skip,
    /// Search it, with its filter read (`None`: the page has none).
    Search(Option<Arc<CachedFilter>>),
}

/// Where a lookup goes after one node.
enum Step {
    /// The answer: the value, or `None` for a tombstone or an absent key.
    Done(Option<Value>),
    /// On into the child node, whose index this is.
    Descend {
        id: PageId,
        index: Arc<NodeIndex>,
        height: u8,
    },
}

impl Tree {
    /// `get`, with the value as stored (a separated value's pointer), for
    /// tests that model values as bytes.
    #[cfg(test)]
    pub(crate) fn get_bytes(
        &self,
        root: Option<PageId>,
        key: &[u8],
    ) -> Result<Option<bytes::Bytes>> {
        Ok(self.get(root, key)?.map(|v| v.stored().clone()))
    }

    /// The value of `key` in the tree at `root`; `None` if absent or deleted.
    /// (Stored versions use `get_with_root_memo`.)
    #[cfg(test)]
    pub(crate) fn get(&self, root: Option<PageId>, key: &[u8]) -> Result<Option<Value>> {
        self.get_from(root, None, key)
    }

    /// `get`, with the root's index remembered in `root_memo`, which must
    /// belong to `root` alone (a stored version's).
    pub(crate) fn get_with_root_memo(
        &self,
        root: Option<PageId>,
        root_memo: &Memo<NodeIndex>,
        key: &[u8],
    ) -> Result<Option<Value>> {
        self.get_from(root, Some(root_memo), key)
    }

    fn get_from(
        &self,
        root: Option<PageId>,
        root_memo: Option<&Memo<NodeIndex>>,
        key: &[u8],
    ) -> Result<Option<Value>> {
        let Some(mut id) = root else {
            return Ok(None);
        };
        let hash = filter::key_hash(key);
        let mut index = match root_memo {
            Some(memo) => self.memoized_node_index(id, memo)?,
            None => self.read_node_index(id)?,
        };
        let mut expected_height = None;
        loop {
            match self.get_in_node(id, &index, expected_height, key, hash)? {
                Step::Done(value) => return Ok(value),
                Step::Descend {
                    id: child,
                    index: child_index,
                    height,
                } => {
                    (id, index) = (child, child_index);
                    expected_height = Some(height);
                }
            }
        }
    }

    /// One node of a lookup: its segments for the key's pivot, newest
    /// first, then the child.
    fn get_in_node(
        &self,
        id: PageId,
        index: &NodeIndex,
        expected_height: Option<u8>,
        key: &[u8],
        hash: u64,
    ) -> Result<Step> {
        let node = index.probe(PivotTarget::Holding(key));
        if expected_height.is_some_and(|h| h != node.height) {
            return Err(self.corrupt_height(id));
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
                seg.memos,
                filter.as_ref(),
                key,
                hash,
                seg.flushed_index,
            )? && index >= seg.flushed_index
            {
                return Ok(Step::Done(item.value));
            }
        }
        if let Some(leaf) = node.child_leaf {
            let filter = match probes.get(node.segments.len()) {
                Some(Probe::Search(filter)) => filter.as_ref(),
                _ => None,
            };
            let found =
                self.probe_leaf_filtered(&leaf, node.child_leaf_memos, filter, key, hash, 0)?;
            return Ok(Step::Done(found.and_then(|(_, it)| it.value)));
        }
        Ok(Step::Descend {
            id: node.child_node,
            index: self.memoized_node_index(node.child_node, node.child_node_memo)?,
            height: node.height - 1,
        })
    }

    /// The index of node `id`, remembered in `memo` (see `memo`).
    pub(in crate::tree) fn memoized_node_index(
        &self,
        id: PageId,
        memo: &Memo<NodeIndex>,
    ) -> Result<Arc<NodeIndex>> {
        memo.get_or_read(|| self.read_node_index_cached(id))
    }

    /// The filter of `r`, remembered in `memos` (see `memo`).
    pub(super) fn memoized_filter(
        &self,
        r: &LeafRef,
        memos: &LeafMemos,
    ) -> Result<Arc<CachedFilter>> {
        memos.filter.get_or_read(|| self.read_filter_cached(r))
    }

    /// The head of `r`, remembered in `memos` (see `memo`).
    pub(in crate::tree) fn memoized_head(
        &self,
        r: &LeafRef,
        memos: &LeafMemos,
    ) -> Result<Arc<LeafHead>> {
        memos.head.get_or_read(|| self.read_leaf_head_cached(r))
    }

    /// For every segment of `node`, then its child leaf: skipped (the key
    /// is flushed from the segment) or to probe, with the filter read and
    /// the fingerprints for `hash` prefetched. A lookup probes several
    /// filters per node, and each probe is otherwise a memory stall of its
    /// own.
    pub(super) fn prefetch_filters(
        &self,
        node: &NodeProbe<'_>,
        key: &[u8],
        hash: u64,
    ) -> Result<Vec<Probe>> {
        let segments = node.segments.iter().map(|seg| {
            let flushed = compare_keys(key, seg.flushed_key) == Ordering::Less;
            (!flushed).then_some((&seg.leaf, seg.memos))
        });
        let child = node
            .child_leaf
            .as_ref()
            .map(|leaf| Some((leaf, node.child_leaf_memos)));
        let mut probes = Vec::with_capacity(node.segments.len() + 1);
        for leaf in segments.chain(child) {
            probes.push(match leaf {
                None => Probe::Skip,
                Some((r, memos)) if r.filter_len > 0 => {
                    let filter = self.memoized_filter(r, memos)?;
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
        memos: &LeafMemos,
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
                    read = self.memoized_filter(r, memos)?;
                    &read
                }
            };
            let found = filter::may_contain(&filter.bytes, hash)
                .map_err(|e| self.corrupt(r.id, e.within(u64::from(r.head_len))))?;
            if !found {
                return Ok(None);
            }
        }
        let head = self.memoized_head(r, memos)?;
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
            return Err(self.corrupt(
                r.id,
                DecodeError::new(0, "leaf chunk read short").within(offset),
            ));
        }
        let found = head
            .find_in_chunk(chunk, &blocks, key)
            .map_err(|e| self.corrupt(r.id, e))?;
        #[cfg(test)]
        if r.filter_len > 0 && found.is_none() {
            FILTER_FALSE_POSITIVES.with(|c| c.set(c.get() + 1));
        }
        Ok(found)
    }
}
