//! Range scans: descend to the leaf covering the current position, open one
//! cursor per active segment on the path and one on the leaf (each bounded by
//! the leaf's key range and its flushed bound), merge them (newest source
//! wins), then re-descend at the leaf's range boundary.
//! When a window opens, every cursor's first chunks are read together, so
//! their disk reads overlap: the leaf's next 16 KiB, and each segment's
//! chunks as far in keys as that reaches. Past that reach cursors read one
//! chunk at a time, so `k` more items cost about `k/B` reads.

use std::ops::Bound;

use bytes::Bytes;

use super::probe::PivotTarget;
use super::scan_source::{PlannedSource, Source, WindowRange};
use crate::Result;
use crate::key::compare_keys;
use crate::memtable::Versioned;
use crate::page::{CachePriority, PageId, PageRange};
use crate::tree::Tree;
use crate::tree::format::chunk::ItemSpan;
use crate::tree::format::leaf::LeafHead;

/// Bytes of a leaf read at once when a scan opens it: 16 KiB holds about
/// 110 records of 128 bytes, the longest YCSB E scan from any point of its
/// first block. Reading them costs one I/O, about what one 4 KiB block
/// costs on this machine's disk; reading them block by block as the scan
/// advances cost a dependent read each.
const LEAF_READAHEAD_BYTES: u64 = 16 * 1024;

/// Most chunks a segment's cursor reads ahead when its window opens. A
/// YCSB E scan (at most 100 records) takes a few of a segment's chunks at
/// most; the cap bounds the bytes read for nothing when segments are dense
/// and the scan is short.
const SEGMENT_READAHEAD_MAX_CHUNKS: usize = 4;

/// Iterates live `(key, value)` pairs of a stored tree within a key range,
/// forward or in reverse.
#[derive(Debug)]
pub(crate) struct ScanCursor {
    pub(in crate::tree) tree: Tree,
    pub(in crate::tree) root: Option<PageId>,
    pub(in crate::tree) lower: Bound<Bytes>,
    pub(in crate::tree) upper: Bound<Bytes>,
    pub(in crate::tree) reverse: bool,
    /// The window's sources, newest first; emptied when the scan ends.
    pub(in crate::tree) sources: Vec<Source>,
    /// The window's key range, which bounds every source.
    pub(in crate::tree) window: WindowRange,
    /// Where the next leaf window starts; `None` when the scan is finished.
    pub(in crate::tree) next_window: Option<Bound<Bytes>>,
}

impl Tree {
    /// A cursor over `(lower, upper)` of the tree at `root`.
    pub(crate) fn scan(
        &self,
        root: Option<PageId>,
        lower: Bound<Bytes>,
        upper: Bound<Bytes>,
        reverse: bool,
    ) -> ScanCursor {
        let start = if reverse {
            upper.clone()
        } else {
            lower.clone()
        };
        ScanCursor {
            tree: self.clone(),
            root,
            lower,
            upper,
            reverse,
            sources: Vec::new(),
            window: WindowRange::default(),
            next_window: root.map(|_| start),
        }
    }
}

impl ScanCursor {
    /// Descends to the leaf at the window position and opens its sources.
    fn open_window(&mut self, at: Bound<Bytes>) -> Result<()> {
        self.sources.clear();
        let Some(mut id) = self.root else {
            self.next_window = None;
            return Ok(());
        };
        // The range is copied out of the node pages into buffers the
        // cursor reuses: slices of the pages would cost every window, and
        // every source holding them, reference counts on pages that all
        // scans share.
        self.window.start();
        // Sources newest first (root buffer first, leaf last), opened once the
        // leaf's range, which bounds all of them, is known.
        let mut path = Vec::new();
        let mut expected_height = None;
        let mut index = self.tree.read_node_index(id)?;
        loop {
            // Only the window's pivot is needed: probe the page rather
            // than decode the whole node (every pivot key, every segment's
            // bounds), as gets do.
            let target = match (&at, self.reverse) {
                (Bound::Unbounded, false) => PivotTarget::Holding(b""),
                (Bound::Unbounded, true) => PivotTarget::Last,
                (Bound::Excluded(k), true) => PivotTarget::Before(k),
                (Bound::Included(k) | Bound::Excluded(k), _) => PivotTarget::Holding(k),
            };
            let node = index.probe(target);
            if expected_height.is_some_and(|h| h != node.height) {
                return Err(self.tree.corrupt_height(id));
            }
            // The first pivot starts, and the last ends, where the node does.
            self.window.narrow(node.lo, node.hi);
            // Heads and the child's index through the node's memos, as
            // gets reach them (`tree::memo`).
            for seg in &node.segments {
                let head = self.tree.memoized_head(&seg.leaf, seg.memos)?;
                path.push((seg.leaf, seg.flushed_index, head));
            }
            if let Some(leaf) = node.child_leaf {
                let head = self.tree.memoized_head(&leaf, node.child_leaf_memos)?;
                path.push((leaf, 0, head));
                break;
            }
            let child = self
                .tree
                .memoized_node_index(node.child_node, node.child_node_memo)?;
            (id, expected_height) = (node.child_node, Some(node.height - 1));
            drop(node);
            index = child;
        }
        let seek = self.window_seek();
        let heads: Vec<&LeafHead> = path.iter().map(|(_, _, head)| &**head).collect();
        let first_chunks = Self::first_chunks(&heads, seek.as_ref());
        drop(heads);
        let mut planned = Vec::with_capacity(path.len());
        let mut leaf = None;
        let leaf_at = path.len() - 1; // pushed last, before the loop ended
        for (i, ((r, bound, head), chunk)) in path.into_iter().zip(first_chunks).enumerate() {
            if let Some(source) = self.plan_source((r, head, bound), (&seek, chunk)) {
                if i == leaf_at {
                    leaf = Some(planned.len());
                }
                planned.push(source);
            }
        }
        let ranges = self.window_reads(&planned, leaf);
        self.tree.io.prefetch(&ranges, CachePriority::LeafBlock)?;
        // Every source's first chunk is read (and its bytes prefetched into
        // the CPU cache) before any is searched: see `ChunkItems::prefetch`.
        for source in &mut planned {
            self.read_first_chunk(source)?;
        }
        for source in planned {
            self.open_source(source)?;
        }
        // The next window only if it can hold keys of the range: a scan
        // ending at or just past this window's edge would otherwise descend
        // again and read a leaf and its segments' first chunks for nothing.
        let (lo, hi) = (self.window.lo(), self.window.hi());
        self.next_window = if self.reverse {
            (!lo.is_empty() && may_lie_below(&self.lower, lo))
                .then(|| Bound::Excluded(Bytes::copy_from_slice(lo)))
        } else {
            hi.filter(|hi| below_upper(hi, &self.upper))
                .map(|hi| Bound::Included(Bytes::copy_from_slice(hi)))
        };
        Ok(())
    }

    /// What a window reads at once. Every source needs its first chunk
    /// before the merge can start: the uncached ones are read together
    /// rather than one after another. The leaf holds most of the window's
    /// items, so a scan usually goes on into its next chunks: its read
    /// goes on ahead in the same I/O. The segments' reads go on as far in
    /// keys as the leaf's does, so that a scan crossing from one of a
    /// segment's chunks into the next, within that reach, does not wait on
    /// a read of its own halfway.
    fn window_reads(&self, planned: &[PlannedSource], leaf: Option<usize>) -> Vec<PageRange> {
        let (leaf_range, reach) = match leaf {
            Some(l) => {
                let (range, reach) = planned[l]
                    .0
                    .readahead_range(self.reverse, LEAF_READAHEAD_BYTES);
                (Some(range), reach)
            }
            None => (None, None),
        };
        planned
            .iter()
            .enumerate()
            .map(|(i, (source, _))| match leaf_range {
                Some(range) if Some(i) == leaf => range,
                _ => source.range_to(
                    (&self.window, self.reverse),
                    &reach,
                    SEGMENT_READAHEAD_MAX_CHUNKS,
                ),
            })
            .collect()
    }

    /// Finds the next live item and hands it to `emit` as the chunk bytes
    /// it lies in and its span there; `false` when the scan is over.
    /// Older versions of the same key, in older sources, are skipped.
    fn next_with(&mut self, emit: &mut impl FnMut(&Bytes, ItemSpan)) -> Result<bool> {
        loop {
            let Some(rank) = self.next_rank() else {
                match self.next_window.take() {
                    Some(at) => {
                        self.open_window(at)?;
                        continue;
                    }
                    None => return Ok(false),
                }
            };
            let (upto, older) = self.sources.split_at_mut(rank + 1);
            let winner = &upto[rank];
            let span = winner.items.span(winner.pos);
            let key = span.key(winner.items.bytes());
            let (before_start, past_end) = if self.reverse {
                (
                    !below_upper(key, &self.upper),
                    !above_lower(key, &self.lower),
                )
            } else {
                (
                    !above_lower(key, &self.lower),
                    !below_upper(key, &self.upper),
                )
            };
            if past_end {
                self.sources.clear();
                self.next_window = None;
                return Ok(false);
            }
            for s in older {
                if s.ready && compare_keys(s.items.key(s.pos), key).is_eq() {
                    s.step(&self.tree, &self.window, self.reverse)?;
                }
            }
            let emitted = !before_start && span.is_put();
            if emitted {
                emit(winner.items.bytes(), span);
            }
            upto[rank].step(&self.tree, &self.window, self.reverse)?;
            if emitted {
                return Ok(true);
            }
        }
    }

    /// Appends up to `limit` live pairs to `out` (fewer only at the end of
    /// the scan), as slices of their pages.
    pub(crate) fn fill(&mut self, limit: usize, out: &mut Vec<Versioned>) -> Result<()> {
        let mut emit = |chunk: &Bytes, span: ItemSpan| {
            let item = span.item(chunk);
            out.push((item.key, item.value));
        };
        for _ in 0..limit {
            match self.next_with(&mut emit) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    self.end();
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Ends the scan (after an error: it yields nothing more).
    fn end(&mut self) {
        self.sources.clear();
        self.next_window = None;
    }
}

fn above_lower(key: &[u8], lower: &Bound<Bytes>) -> bool {
    match lower {
        Bound::Included(l) => compare_keys(key, l).is_ge(),
        Bound::Excluded(l) => compare_keys(key, l).is_gt(),
        Bound::Unbounded => true,
    }
}

/// Whether keys below `edge` may lie within `lower`.
fn may_lie_below(lower: &Bound<Bytes>, edge: &[u8]) -> bool {
    match lower {
        Bound::Included(l) | Bound::Excluded(l) => compare_keys(l, edge).is_lt(),
        Bound::Unbounded => true,
    }
}

fn below_upper(key: &[u8], upper: &Bound<Bytes>) -> bool {
    match upper {
        Bound::Included(u) => compare_keys(key, u).is_le(),
        Bound::Excluded(u) => compare_keys(key, u).is_lt(),
        Bound::Unbounded => true,
    }
}

impl Iterator for ScanCursor {
    type Item = Result<(Bytes, Bytes)>;

    /// One pair at a time, its value as stored (a separated value's
    /// pointer), for checks and tests (`Db::range` takes pairs in
    /// batches, through `fill`).
    fn next(&mut self) -> Option<Self::Item> {
        let mut pair = None;
        let mut emit = |chunk: &Bytes, span: ItemSpan| {
            let item = span.item(chunk);
            pair = item.value.map(|value| (item.key, value.stored().clone()));
        };
        match self.next_with(&mut emit) {
            Ok(true) => pair.map(Ok),
            Ok(false) => None,
            Err(e) => {
                self.end();
                Some(Err(e))
            }
        }
    }
}
