//! Batched point lookups: each lookup walks its path through node
//! indexes, filters and leaf heads (cached: small and kept with priority)
//! to the chunk it must read, starts that chunk's read at once, and is
//! answered from the chunk as soon as the read is in, while the reads of
//! the lookups walked after it are still in flight
//! (`PageIo::streamed_reads`): the device serves them together, and the
//! walks and answers run while it does.
//!
//! A lookup's walk is the one `get` makes, stopped at the first segment
//! or leaf whose filter lets the key through (with a chunk not wholly
//! flushed): what `get` would read first. When that chunk holds the key
//! at or above the segment's flushed bound, or is the leaf's, it is the
//! answer `get` gives. Otherwise (a filter's false positive in a segment,
//! an item already flushed) the lookup walks again to the next place
//! `get` would look and starts that read, without waiting for the other
//! lookups; so answers never depend on the batching, and no lookup waits
//! on a read of its own while the others wait on it.

use std::sync::Arc;

use super::get::Probe;
use super::memo::Memo;
use super::probe::{NodeIndex, PivotTarget};
use crate::Result;
use crate::error::DecodeError;
use crate::filter;
use crate::page::{CachePriority, PageId, PageRange};
use crate::tree::Tree;
use crate::tree::format::leaf::LeafHead;
use crate::tree::format::node::LeafRef;
use crate::values::Value;

/// The chunk a lookup reads first, and how to read its answer there.
struct Planned {
    leaf: LeafRef,
    head: Arc<LeafHead>,
    chunk: usize,
    /// Items below this index were flushed from the segment (0 in a leaf).
    min_index: u32,
    /// A leaf: its answer is final, found or not.
    is_leaf: bool,
}

impl Planned {
    fn range(&self) -> PageRange {
        let (offset, len) = self.head.chunk_range(self.chunk);
        (self.leaf.id, offset, len)
    }
}

impl Tree {
    /// The values of `keys` in the tree at `root` (whose index `root_memo`
    /// remembers), in order, as `get` gives them, with the chunk reads of
    /// all the lookups in flight together.
    pub(crate) fn get_many(
        &self,
        root: Option<PageId>,
        root_memo: &Memo<NodeIndex>,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Value>>> {
        let Some(root_id) = root else {
            return Ok(vec![None; keys.len()]);
        };
        let root_index = self.memoized_node_index(root_id, root_memo)?;
        let mut values = vec![None; keys.len()];
        // Each lookup's plan, and how many places on its path it has
        // looked in so far (the next walk skips them).
        let mut plans: Vec<Option<Planned>> = Vec::with_capacity(keys.len());
        let mut skips = vec![0; keys.len()];
        let mut reads = self.io.streamed_reads(CachePriority::LeafBlock);
        for (i, key) in keys.iter().enumerate() {
            // No place on the path whose filter lets the key through: absent.
            let plan = self.plan_lookup(root_id, &root_index, key, 0)?;
            if let Some(plan) = &plan {
                reads.push(plan.range(), i)?;
            }
            plans.push(plan);
        }
        while let Some(i) = reads.next_ready()? {
            let plan = plans[i].as_ref().expect("only planned lookups read");
            match self.answer_in(plan, keys[i])? {
                Some(value) => values[i] = value,
                None => {
                    skips[i] += 1;
                    let next = self.plan_lookup(root_id, &root_index, keys[i], skips[i])?;
                    if let Some(next) = &next {
                        reads.push(next.range(), i)?;
                    }
                    plans[i] = next;
                }
            }
        }
        Ok(values)
    }

    /// The walk of a lookup of `key` down to the chunk it reads: in the
    /// newest segment or leaf on its path whose filter may hold the key,
    /// past the first `skip` such places. `None` when no other filter lets
    /// it through.
    fn plan_lookup(
        &self,
        root: PageId,
        root_index: &Arc<NodeIndex>,
        key: &[u8],
        mut skip: usize,
    ) -> Result<Option<Planned>> {
        let hash = filter::key_hash(key);
        let (mut id, mut index) = (root, root_index.clone());
        let mut expected_height = None;
        loop {
            let node = index.probe(PivotTarget::Holding(key));
            if expected_height.is_some_and(|h| h != node.height) {
                return Err(self.corrupt_height(id));
            }
            let probes = self.prefetch_filters(&node, key, hash)?;
            let segments = node
                .segments
                .iter()
                .map(|s| (&s.leaf, s.memos, s.flushed_index, false));
            let child = node
                .child_leaf
                .as_ref()
                .map(|l| (l, node.child_leaf_memos, 0, true));
            for ((leaf, memos, min_index, is_leaf), probe) in segments.chain(child).zip(&probes) {
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
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                return Ok(Some(Planned {
                    leaf: *leaf,
                    head,
                    chunk,
                    min_index,
                    is_leaf,
                }));
            }
            if node.child_leaf.is_some() {
                return Ok(None);
            }
            let child = self.memoized_node_index(node.child_node, node.child_node_memo)?;
            expected_height = Some(node.height - 1);
            id = node.child_node;
            drop(node);
            index = child;
        }
    }

    /// `Some(value)` when the planned chunk gives `get`'s answer for `key`
    /// (`value` `None`: a tombstone, or absent from a leaf); `None` when
    /// the lookup must go on to the next place on its path.
    fn answer_in(&self, plan: &Planned, key: &[u8]) -> Result<Option<Option<Value>>> {
        let (_, offset, len) = plan.range();
        let id = plan.leaf.id;
        let blocks = self
            .io
            .read_range(id, offset, len, CachePriority::LeafBlock)?;
        if blocks.len() as u64 != len {
            let short = DecodeError::new(0, "leaf chunk read short").within(offset);
            return Err(self.corrupt(id, short));
        }
        let found = plan
            .head
            .find_in_chunk(plan.chunk, &blocks, key)
            .map_err(|e| self.corrupt(id, e))?;
        Ok(match found {
            Some((index, item)) if index >= plan.min_index => Some(item.value),
            _ if plan.is_leaf => Some(None),
            _ => None,
        })
    }
}
