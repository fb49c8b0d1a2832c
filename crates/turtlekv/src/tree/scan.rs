//! Range scans: descend to the leaf covering the current position, open one
//! cursor per active segment on the path and one on the leaf (each bounded by
//! the leaf's key range and its flushed bound), merge them with a heap
//! (newest source wins), then re-descend at the leaf's range boundary.
//! Cursors read one chunk at a time, so `k` items cost about `k/B` reads.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::ops::Bound;

use bytes::Bytes;

use super::Tree;
use super::item::{Item, lower_bound};
use super::leaf::LeafHead;
use super::node::{Child, LeafData, LeafRef};
use crate::Result;
use crate::page::PageId;

/// Iterates live `(key, value)` pairs of a stored tree within a key range,
/// forward or in reverse.
#[derive(Debug)]
pub(crate) struct ScanCursor {
    tree: Tree,
    root: Option<PageId>,
    lower: Bound<Bytes>,
    upper: Bound<Bytes>,
    reverse: bool,
    sources: Vec<Source>,
    heap: BinaryHeap<HeapEntry>,
    /// Where the next leaf window starts; `None` when the scan is finished.
    next_window: Option<Bound<Bytes>>,
}

#[derive(Debug)]
struct HeapEntry {
    key: Bytes,
    rank: usize,
    reverse: bool,
}

impl PartialEq for HeapEntry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for HeapEntry {}
impl PartialOrd for HeapEntry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for HeapEntry {
    // Max-heap: the next key in scan order, then the newest source (lowest rank).
    fn cmp(&self, other: &Self) -> Ordering {
        let by_key = if self.reverse {
            self.key.cmp(&other.key)
        } else {
            other.key.cmp(&self.key)
        };
        by_key.then(other.rank.cmp(&self.rank))
    }
}

/// A cursor over one stored leaf or segment, limited to items at or above
/// `min_index` with keys in `[lo, hi)`.
#[derive(Debug)]
struct Source {
    leaf: LeafRef,
    head: LeafHead,
    min_index: u32,
    lo: Bytes,
    hi: Option<Bytes>,
    chunk: usize,
    items: Vec<Item>,
    /// Position in `items`; one past the end / `usize::MAX` before the start = move chunk.
    pos: usize,
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
            heap: BinaryHeap::new(),
            next_window: root.map(|_| start),
        }
    }
}

impl ScanCursor {
    /// Descends to the leaf at the window position and opens its sources.
    fn open_window(&mut self, at: Bound<Bytes>) -> Result<()> {
        self.sources.clear();
        self.heap.clear();
        let Some(mut id) = self.root else {
            self.next_window = None;
            return Ok(());
        };
        let (mut lo, mut hi): (Bytes, Option<Bytes>) = (Bytes::new(), None);
        // Sources newest first (root buffer first, leaf last), opened once the
        // leaf's range, which bounds all of them, is known.
        let mut path = Vec::new();
        loop {
            let mut node = self.tree.read_node(id)?;
            node.range_lo = lo.clone();
            node.range_hi = hi.clone();
            let p = match (&at, self.reverse) {
                (Bound::Unbounded, false) => 0,
                (Bound::Unbounded, true) => node.pivots.len() - 1,
                (Bound::Excluded(k), true) => node.pivots[1..].partition_point(|q| q.lower < *k),
                (Bound::Included(k) | Bound::Excluded(k), _) => node.pivot_for(k),
            };
            let (plo, phi) = node.pivot_range(p);
            (lo, hi) = (plo.clone(), phi.cloned());
            for seg in &node.segments {
                if let (Some(bound), LeafData::Stored(r)) = (&seg.bounds[p], &seg.data) {
                    path.push((*r, bound.index));
                }
            }
            match &node.pivots[p].child {
                Child::StoredNode(child) => id = *child,
                Child::Leaf(LeafData::Stored(r)) => {
                    path.push((*r, 0));
                    break;
                }
                Child::Leaf(LeafData::New(_)) | Child::Node(_) => {
                    unreachable!("decoded nodes reference stored pages")
                }
            }
        }
        for (r, bound) in path {
            self.open_source(r, bound, &lo, &hi)?;
        }
        self.next_window = if self.reverse {
            (!lo.is_empty()).then(|| Bound::Excluded(lo))
        } else {
            hi.map(Bound::Included)
        };
        Ok(())
    }

    fn open_source(
        &mut self,
        leaf: LeafRef,
        min_index: u32,
        lo: &Bytes,
        hi: &Option<Bytes>,
    ) -> Result<()> {
        let head = self.tree.read_leaf_head(&leaf)?;
        if head.chunks.is_empty() {
            return Ok(());
        }
        let mut source = Source {
            leaf,
            head,
            min_index,
            lo: lo.clone(),
            hi: hi.clone(),
            chunk: 0,
            items: Vec::new(),
            pos: 0,
        };
        // Seek to the first item in scan order within the window.
        let seek: Option<Bytes> = if self.reverse {
            match (&self.upper, hi) {
                (Bound::Included(u) | Bound::Excluded(u), Some(h)) => {
                    Some(u.clone().min(h.clone()))
                }
                (Bound::Included(u) | Bound::Excluded(u), None) => Some(u.clone()),
                (Bound::Unbounded, h) => h.clone(),
            }
        } else {
            match &self.lower {
                Bound::Included(l) | Bound::Excluded(l) => Some(l.clone().max(lo.clone())),
                Bound::Unbounded => Some(lo.clone()),
            }
        };
        source.chunk = match &seek {
            Some(k) => source.head.chunk_for(k),
            None => source.head.chunks.len() - 1,
        };
        source.items = self
            .tree
            .read_chunk(&source.leaf, &source.head, source.chunk)?;
        source.pos = match (&seek, self.reverse) {
            (Some(k), false) => lower_bound(&source.items, k),
            // Reverse starts at the last item <= the upper bound (the
            // emission check drops it when the bound is exclusive).
            (Some(k), true) => source
                .items
                .partition_point(|it| it.key <= *k)
                .wrapping_sub(1),
            (None, _) => source.items.len().wrapping_sub(1),
        };
        let rank = self.sources.len();
        self.sources.push(source);
        self.push_next(rank)?;
        Ok(())
    }

    /// Pushes source `rank`'s current item (moving across chunks) onto the heap.
    fn push_next(&mut self, rank: usize) -> Result<()> {
        let reverse = self.reverse;
        loop {
            let s = &mut self.sources[rank];
            if s.pos >= s.items.len() {
                let next_chunk = if reverse {
                    s.chunk.checked_sub(1)
                } else {
                    Some(s.chunk + 1).filter(|c| *c < s.head.chunks.len())
                };
                let Some(c) = next_chunk else {
                    return Ok(());
                };
                if reverse && s.head.chunk_items(c).1 <= s.min_index {
                    return Ok(()); // everything earlier is flushed
                }
                s.chunk = c;
                s.items = self.tree.read_chunk(&s.leaf, &s.head, c)?;
                s.pos = if reverse {
                    s.items.len().wrapping_sub(1)
                } else {
                    0
                };
                continue;
            }
            let index = s.head.chunk_items(s.chunk).0 + s.pos as u32;
            let key = s.items[s.pos].key.clone();
            let outside = if reverse {
                key < s.lo || index < s.min_index
            } else {
                s.hi.as_ref().is_some_and(|h| key >= *h)
            };
            if outside {
                return Ok(());
            }
            if !reverse && index < s.min_index {
                // Jump over flushed items without reading their chunks.
                let target = s
                    .head
                    .chunks
                    .partition_point(|c| c.first_item <= s.min_index)
                    - 1;
                if target != s.chunk {
                    s.chunk = target;
                    s.items = self.tree.read_chunk(&s.leaf, &s.head, target)?;
                }
                s.pos = (s.min_index - s.head.chunks[target].first_item) as usize;
                continue;
            }
            if (reverse && s.hi.as_ref().is_some_and(|h| key >= *h)) || (!reverse && key < s.lo) {
                s.pos = if reverse {
                    s.pos.wrapping_sub(1)
                } else {
                    s.pos + 1
                };
                continue;
            }
            self.heap.push(HeapEntry { key, rank, reverse });
            return Ok(());
        }
    }

    fn advance(&mut self, rank: usize) -> Result<()> {
        let s = &mut self.sources[rank];
        s.pos = if self.reverse {
            s.pos.wrapping_sub(1)
        } else {
            s.pos + 1
        };
        self.push_next(rank)
    }

    fn next_item(&mut self) -> Result<Option<(Bytes, Bytes)>> {
        loop {
            let Some(top) = self.heap.pop() else {
                match self.next_window.take() {
                    Some(at) => {
                        self.open_window(at)?;
                        continue;
                    }
                    None => return Ok(None),
                }
            };
            let s = &self.sources[top.rank];
            let item = s.items[s.pos].clone();
            self.advance(top.rank)?;
            // Older versions of the same key in other sources are skipped.
            while self.heap.peek().is_some_and(|e| e.key == top.key) {
                let older = self.heap.pop().expect("peeked");
                self.advance(older.rank)?;
            }
            let before_start = if self.reverse {
                !below_upper(&item.key, &self.upper)
            } else {
                !above_lower(&item.key, &self.lower)
            };
            let past_end = if self.reverse {
                !above_lower(&item.key, &self.lower)
            } else {
                !below_upper(&item.key, &self.upper)
            };
            if past_end {
                self.heap.clear();
                self.next_window = None;
                return Ok(None);
            }
            if before_start {
                continue;
            }
            if let Some(value) = item.value {
                return Ok(Some((item.key, value)));
            }
        }
    }
}

fn above_lower(key: &Bytes, lower: &Bound<Bytes>) -> bool {
    match lower {
        Bound::Included(l) => key >= l,
        Bound::Excluded(l) => key > l,
        Bound::Unbounded => true,
    }
}

fn below_upper(key: &Bytes, upper: &Bound<Bytes>) -> bool {
    match upper {
        Bound::Included(u) => key <= u,
        Bound::Excluded(u) => key < u,
        Bound::Unbounded => true,
    }
}

impl Iterator for ScanCursor {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_item() {
            Ok(pair) => pair.map(Ok),
            Err(e) => {
                self.heap.clear();
                self.next_window = None;
                Some(Err(e))
            }
        }
    }
}
