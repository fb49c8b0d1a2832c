//! Batched point lookups: the leaf chunks several lookups are about to
//! read are fetched together, so that their disk reads overlap (one
//! io_uring submission, `PageIo::prefetch`), and each lookup then runs as
//! usual from the page cache.
//!
//! Why not a lookup that suspends on a miss: a lookup out of cache finds
//! node indexes, filters and leaf heads cached (they are small and kept
//! with priority) and misses on one leaf chunk, the one this module
//! predicts. A prediction that is wrong (a filter's false positive, an
//! eviction in between) costs only the synchronous read the lookup would
//! have made anyway; answers never depend on it.

use super::get::Probe;
use super::memo::Memo;
use super::probe::{NodeIndex, PivotTarget};
use crate::Result;
use crate::filter;
use crate::page::{CachePriority, PageId, PageRange};
use crate::tree::Tree;

impl Tree {
    /// Reads into the page cache, all at once, the leaf chunk a lookup of
    /// each of `keys` in the tree at `root` is expected to read.
    pub(crate) fn prefetch_lookups(
        &self,
        root: Option<PageId>,
        root_memo: &Memo<NodeIndex>,
        keys: &[&[u8]],
    ) -> Result<()> {
        let Some(root) = root else {
            return Ok(());
        };
        let root_index = self.memoized_node_index(root, root_memo)?;
        let mut ranges = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(range) = self.expected_chunk(&root_index, key)? {
                ranges.push(range);
            }
        }
        self.io.prefetch(&ranges, CachePriority::LeafBlock)
    }

    /// The chunk a lookup of `key` reads first: in the newest segment or
    /// leaf on its path whose filter may hold the key. `None` when no
    /// filter lets it through (the lookup reads no chunk).
    fn expected_chunk(
        &self,
        root_index: &std::sync::Arc<NodeIndex>,
        key: &[u8],
    ) -> Result<Option<PageRange>> {
        let hash = filter::key_hash(key);
        let mut index = root_index.clone();
        loop {
            let node = index.probe(PivotTarget::Holding(key));
            let probes = self.prefetch_filters(&node, key, hash)?;
            let segments = node
                .segments
                .iter()
                .map(|s| (&s.leaf, s.memos, s.flushed_index));
            let child = node
                .child_leaf
                .as_ref()
                .map(|l| (l, node.child_leaf_memos, 0));
            for ((leaf, memos, min_index), probe) in segments.chain(child).zip(&probes) {
                let Probe::Search(filter) = probe else {
                    continue;
                };
                if let Some(filter) = filter {
                    let may_hold = filter::may_contain(&filter.bytes, hash)
                        .map_err(|e| self.corrupt(leaf.id, e.within(u64::from(leaf.head_len))))?;
                    if !may_hold {
                        continue;
                    }
                }
                let head = self.memoized_head(leaf, memos)?;
                if head.chunks.is_empty() {
                    continue;
                }
                let chunk = head.chunk_for(key);
                if head.chunk_items(chunk).1 <= min_index {
                    continue;
                }
                let (offset, len) = head.chunk_range(chunk);
                return Ok(Some((leaf.id, offset, len)));
            }
            if node.child_leaf.is_some() {
                return Ok(None);
            }
            let child = self.memoized_node_index(node.child_node, node.child_node_memo)?;
            drop(node);
            index = child;
        }
    }
}
