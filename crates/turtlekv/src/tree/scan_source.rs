//! The per-page cursors of a scan and their heap entries: each cursor walks
//! one leaf or segment a chunk at a time within the current leaf window.

use std::cmp::Ordering;

use bytes::Bytes;

use super::item::{Item, compare_keys, lower_bound};
use super::leaf::LeafHead;
use super::node::LeafRef;
use super::scan::ScanCursor;
use crate::Result;
use crate::page::PageRange;
use std::ops::Bound;

#[derive(Debug)]
pub(super) struct HeapEntry {
    pub(super) key: Bytes,
    pub(super) rank: usize,
    pub(super) reverse: bool,
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
            compare_keys(&self.key, &other.key)
        } else {
            compare_keys(&other.key, &self.key)
        };
        by_key.then(other.rank.cmp(&self.rank))
    }
}

/// A cursor over one stored leaf or segment, limited to items at or above
/// `min_index` with keys in `[lo, hi)`.
#[derive(Debug)]
pub(super) struct Source {
    leaf: LeafRef,
    head: std::sync::Arc<LeafHead>,
    min_index: u32,
    lo: Bytes,
    hi: Option<Bytes>,
    chunk: usize,
    pub(super) items: Vec<Item>,
    /// Position in `items`; one past the end / `usize::MAX` before the start = move chunk.
    pub(super) pos: usize,
}

/// A source whose first chunk is known but not read yet, and the key it
/// starts from (`None`: the end, in a reverse scan).
pub(super) type PlannedSource = (Source, Option<Bytes>);

impl Source {
    /// `(page, offset, len)` of the chunk the source reads next.
    pub(super) fn chunk_range(&self) -> PageRange {
        let (offset, len) = self.head.chunk_range(self.chunk);
        (self.leaf.id, offset, len)
    }

    /// The next chunk's range extended to at least `bytes` in scan order,
    /// within the page's data.
    pub(super) fn readahead_range(&self, reverse: bool, bytes: u64) -> PageRange {
        let (offset, len) = self.head.chunk_range(self.chunk);
        let want = bytes.max(len);
        if reverse {
            let data_start = self.head.chunk_range(0).0;
            let start = (offset + len).saturating_sub(want).max(data_start);
            (self.leaf.id, start, offset + len - start)
        } else {
            let (last_offset, last_len) = self.head.chunk_range(self.head.chunks.len() - 1);
            let end = (offset + want).min(last_offset + last_len);
            (self.leaf.id, offset, end - offset)
        }
    }
}

impl ScanCursor {
    /// Finds where a source over `leaf` starts, from its (cached) head;
    /// `None` for an empty page.
    pub(super) fn plan_source(
        &self,
        leaf: LeafRef,
        min_index: u32,
        lo: &Bytes,
        hi: &Option<Bytes>,
    ) -> Result<Option<PlannedSource>> {
        let head = self.tree.read_leaf_head(&leaf)?;
        if head.chunks.is_empty() {
            return Ok(None);
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
        if !self.reverse {
            // Items below `min_index` were flushed: start no earlier than
            // the chunk holding the first live one, rather than reading a
            // flushed chunk and then jumping.
            source.chunk = source.chunk.max(source.head.chunk_of_item(min_index));
        }
        Ok(Some((source, seek)))
    }

    /// Reads a planned source's first chunk, positions it and puts its
    /// first item on the heap.
    pub(super) fn open_source(&mut self, (mut source, seek): PlannedSource) -> Result<()> {
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
                compare_keys(&key, &s.lo).is_lt() || index < s.min_index
            } else {
                s.hi.as_ref().is_some_and(|h| compare_keys(&key, h).is_ge())
            };
            if outside {
                return Ok(());
            }
            if !reverse && index < s.min_index {
                // Jump over flushed items without reading their chunks.
                let target = s.head.chunk_of_item(s.min_index);
                if target != s.chunk {
                    s.chunk = target;
                    s.items = self.tree.read_chunk(&s.leaf, &s.head, target)?;
                }
                s.pos = (s.min_index - s.head.chunks[target].first_item) as usize;
                continue;
            }
            let before_lo = || compare_keys(&key, &s.lo).is_lt();
            if (reverse && s.hi.as_ref().is_some_and(|h| compare_keys(&key, h).is_ge()))
                || (!reverse && before_lo())
            {
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

    pub(super) fn advance(&mut self, rank: usize) -> Result<()> {
        let s = &mut self.sources[rank];
        s.pos = if self.reverse {
            s.pos.wrapping_sub(1)
        } else {
            s.pos + 1
        };
        self.push_next(rank)
    }
}
