//! The per-page cursors of a scan and the choice of the next one to emit
//! from: each cursor walks one leaf or segment a chunk at a time within the
//! current leaf window.

use bytes::Bytes;

use super::scan::ScanCursor;
use crate::Result;
use crate::error::DecodeError;
use crate::key::{compare_keys, key_prefix};
use crate::page::PageRange;
use crate::tree::Tree;
use crate::tree::format::chunk::ChunkItems;
use crate::tree::format::leaf::LeafHead;
use crate::tree::format::node::LeafRef;
use std::ops::Bound;

/// A window's key range `[lo, hi)`: the pivot ranges of its path, narrowed
/// level by level, in buffers a scan reuses from window to window.
#[derive(Debug, Default)]
pub(in crate::tree) struct WindowRange {
    lo: Vec<u8>,
    hi: Vec<u8>,
    bounded_above: bool,
    /// `key_prefix` of `lo` and `hi`: every step of every source checks
    /// its key against both, and the bounds, being separators, are short
    /// keys, whose prefixes take more than a load to compute.
    lo_prefix: u64,
    hi_prefix: u64,
}

impl WindowRange {
    /// Starts a new window: the whole key space.
    pub(in crate::tree) fn start(&mut self) {
        self.lo.clear();
        self.hi.clear();
        self.bounded_above = false;
        (self.lo_prefix, self.hi_prefix) = (0, 0);
    }

    /// Narrows to a pivot's range: the first pivot starts, and the last
    /// ends, where its node does (`None`).
    pub(in crate::tree) fn narrow(&mut self, lo: Option<&[u8]>, hi: Option<&[u8]>) {
        if let Some(lo) = lo {
            self.lo.clear();
            self.lo.extend_from_slice(lo);
            self.lo_prefix = key_prefix(lo);
        }
        if let Some(hi) = hi {
            self.hi.clear();
            self.hi.extend_from_slice(hi);
            self.hi_prefix = key_prefix(hi);
            self.bounded_above = true;
        }
    }

    /// How `key`, whose `key_prefix` is `prefix`, compares with `lo`.
    #[inline]
    fn cmp_lo(&self, key: &[u8], prefix: u64) -> std::cmp::Ordering {
        if prefix == self.lo_prefix {
            compare_keys(key, &self.lo)
        } else {
            prefix.cmp(&self.lo_prefix)
        }
    }

    /// Whether `key` (prefix `prefix`) lies at or above `hi`; never
    /// without an upper bound.
    #[inline]
    fn at_or_above_hi(&self, key: &[u8], prefix: u64) -> bool {
        self.bounded_above
            && if prefix == self.hi_prefix {
                compare_keys(key, &self.hi).is_ge()
            } else {
                prefix > self.hi_prefix
            }
    }

    pub(in crate::tree) fn lo(&self) -> &[u8] {
        &self.lo
    }

    pub(in crate::tree) fn hi(&self) -> Option<&[u8]> {
        self.bounded_above.then_some(self.hi.as_slice())
    }
}

/// A cursor over one stored leaf or segment, limited to items at or above
/// `min_index` with keys in the window's range.
#[derive(Debug)]
pub(in crate::tree) struct Source {
    leaf: LeafRef,
    head: std::sync::Arc<LeafHead>,
    min_index: u32,
    chunk: usize,
    pub(in crate::tree) items: ChunkItems,
    /// Position in `items`; one past the end / `usize::MAX` before the start = move chunk.
    pub(in crate::tree) pos: usize,
    /// Whether the item at `pos` lies in the window and takes part in the
    /// merge; `false` once the source is done with the window.
    pub(in crate::tree) ready: bool,
}

/// A source whose first chunk is known (and, once `read_first_chunk` has
/// run, read) but not searched yet, and the key it starts from (`None`:
/// the end, in a reverse scan).
pub(in crate::tree) type PlannedSource = (Source, Option<Bytes>);

impl Source {
    /// The next chunk's range extended to at least `bytes` in scan order,
    /// within the page's data, and how far in keys it reaches.
    pub(in crate::tree) fn readahead_range(&self, reverse: bool, bytes: u64) -> (PageRange, Reach) {
        let (offset, len) = self.head.chunk_range(self.chunk);
        let want = bytes.max(len);
        let (start, end) = if reverse {
            let data_start = self.head.chunk_range(0).0;
            (
                (offset + len).saturating_sub(want).max(data_start),
                offset + len,
            )
        } else {
            let (last_offset, last_len) = self.head.chunk_range(self.head.chunks.len() - 1);
            (offset, (offset + want).min(last_offset + last_len))
        };
        (
            (self.leaf.id, start, end - start),
            self.reach(reverse, start, end),
        )
    }

    /// The key bound of the chunks that lie wholly within `start..end` of
    /// the page (the next chunk counts whatever its size).
    fn reach(&self, reverse: bool, start: u64, end: u64) -> Reach {
        let chunks = &self.head.chunks;
        let within = |c: usize| {
            let (offset, len) = self.head.chunk_range(c);
            start <= offset && offset + len <= end
        };
        if reverse {
            let mut first = self.chunk;
            while first > 0 && within(first - 1) {
                first -= 1;
            }
            // Chunk 0's separator is empty: the read reaches the page's start.
            (first > 0).then(|| self.head.separator_bytes(first))
        } else {
            let mut last = self.chunk;
            while last + 1 < chunks.len() && within(last + 1) {
                last += 1;
            }
            (last + 1 < chunks.len()).then(|| self.head.separator_bytes(last + 1))
        }
    }

    /// The next chunk's range, extended in scan order over the chunks that
    /// may hold keys short of `reach` (at most `max_chunks` in all), within
    /// the source's window and its unflushed items.
    pub(in crate::tree) fn range_to(
        &self,
        (window, reverse): (&WindowRange, bool),
        reach: &Reach,
        max_chunks: usize,
    ) -> PageRange {
        let chunks = &self.head.chunks;
        let (mut first, mut last) = (self.chunk, self.chunk);
        if reverse {
            // Chunk `first` holds keys from its separator up: an earlier
            // chunk is needed while that separator lies above the reach.
            while first > 0
                && last - first + 1 < max_chunks
                && above(self.head.separator(first), reach.as_deref())
                && self.may_hold_live_items(window, first - 1, true)
            {
                first -= 1;
            }
        } else {
            // The next chunk is needed while it starts below the reach.
            while last + 1 < chunks.len()
                && last - first + 1 < max_chunks
                && below(self.head.separator(last + 1), reach.as_deref())
                && self.may_hold_live_items(window, last + 1, false)
            {
                last += 1;
            }
        }
        let (offset, _) = self.head.chunk_range(first);
        let (last_offset, last_len) = self.head.chunk_range(last);
        (self.leaf.id, offset, last_offset + last_len - offset)
    }
}

impl Source {
    /// Whether chunk `c`, the neighbour the source would step into next in
    /// scan order, may hold items it emits: not when its keys lie past the
    /// window's edge (a chunk's separator bounds the keys on either side of
    /// it, so the chunks beyond lie past it too), nor, going in reverse,
    /// when all of them were flushed.
    fn may_hold_live_items(&self, window: &WindowRange, c: usize, reverse: bool) -> bool {
        // Chunk entries keep their separators' prefixes.
        let separator = |c: usize| (self.head.separator(c), self.head.chunks[c].separator_prefix);
        if reverse {
            let (key, prefix) = separator(c + 1);
            window.cmp_lo(key, prefix).is_gt() && self.head.chunk_items(c).1 > self.min_index
        } else {
            let (key, prefix) = separator(c);
            !window.at_or_above_hi(key, prefix)
        }
    }
}

/// How far a window's leaf readahead reaches in keys, in scan order: below
/// this key going forward, at or above it in reverse; `None`: to the leaf's
/// end in that direction.
pub(in crate::tree) type Reach = Option<Bytes>;

/// `key` below `bound` (`None`: no bound).
fn below(key: &[u8], bound: Option<&[u8]>) -> bool {
    bound.is_none_or(|b| compare_keys(key, b).is_lt())
}

/// `key` above `bound` (`None`: no bound).
fn above(key: &[u8], bound: Option<&[u8]>) -> bool {
    bound.is_none_or(|b| compare_keys(key, b).is_gt())
}

impl Source {
    /// Damage in the chunk the source reads, at an offset of its page.
    fn corrupt(&self, tree: &Tree, e: DecodeError) -> crate::Error {
        let what = format!("leaf chunk {}: {}", self.chunk, e.what);
        tree.corrupt(self.leaf.id, DecodeError::new(0, what).within(e.offset))
    }
}

impl ScanCursor {
    /// Where a window's sources start in scan order: the scan's bound or
    /// the window's edge, whichever is nearer; `None`: the end, in a
    /// reverse scan without an upper bound, in the last window.
    pub(in crate::tree) fn window_seek(&self) -> Option<Bytes> {
        let (lo, hi) = (self.window.lo(), self.window.hi());
        // The scan's bound, or a copy of the window's edge where that is
        // nearer (the scan goes on past its first window).
        if self.reverse {
            match (&self.upper, hi) {
                (Bound::Included(u) | Bound::Excluded(u), Some(h)) if h < u.as_ref() => {
                    Some(Bytes::copy_from_slice(h))
                }
                (Bound::Included(u) | Bound::Excluded(u), _) => Some(u.clone()),
                (Bound::Unbounded, h) => h.map(Bytes::copy_from_slice),
            }
        } else {
            match &self.lower {
                Bound::Included(l) | Bound::Excluded(l) if l.as_ref() >= lo => Some(l.clone()),
                _ => Some(Bytes::copy_from_slice(lo)),
            }
        }
    }

    /// The chunk of each head where its source starts: the one holding
    /// `seek` (`LeafHead::chunks_for`, all heads searched together), or
    /// the last.
    pub(in crate::tree) fn first_chunks(heads: &[&LeafHead], seek: Option<&Bytes>) -> Vec<usize> {
        let mut chunks = Vec::with_capacity(heads.len());
        match seek {
            Some(key) => LeafHead::chunks_for(heads, key, &mut chunks),
            None => chunks.extend(heads.iter().map(|h| h.chunks.len().saturating_sub(1))),
        }
        chunks
    }

    /// A source over `leaf` starting in chunk `chunk` of its head (found
    /// for `seek` by `first_chunks`); `None` for an empty page.
    pub(in crate::tree) fn plan_source(
        &self,
        (leaf, head, min_index): (LeafRef, std::sync::Arc<LeafHead>, u32),
        (seek, chunk): (&Option<Bytes>, usize),
    ) -> Option<PlannedSource> {
        if head.chunks.is_empty() {
            return None;
        }
        let mut source = Source {
            leaf,
            head,
            min_index,
            chunk,
            items: ChunkItems::default(),
            pos: 0,
            ready: false,
        };
        if !self.reverse {
            // Items below `min_index` were flushed: start no earlier than
            // the chunk holding the first live one, rather than reading a
            // flushed chunk and then jumping.
            source.chunk = source.head.chunk_of_item_from(source.chunk, min_index);
        } else if source.head.chunk_items(source.chunk).1 <= min_index {
            // Every item up to the seek key was flushed, and the chunk
            // may be punched out of the page (`write::dead_chunks`).
            return None;
        }
        Some((source, seek.clone()))
    }

    /// Reads a planned source's first chunk and prefetches its bytes.
    pub(in crate::tree) fn read_first_chunk(&self, (source, _): &mut PlannedSource) -> Result<()> {
        self.tree
            .read_chunk(&source.leaf, &source.head, source.chunk, &mut source.items)?;
        source.items.prefetch();
        Ok(())
    }

    /// Positions a source whose first chunk is read and readies its first
    /// item for the merge.
    pub(in crate::tree) fn open_source(&mut self, (mut source, seek): PlannedSource) -> Result<()> {
        let pos = match (&seek, self.reverse) {
            (Some(k), false) => source.items.lower_bound(k),
            // Reverse starts at the last item <= the upper bound (the
            // emission check drops it when the bound is exclusive).
            (Some(k), true) => source.items.upper_bound(k).map(|i| i.wrapping_sub(1)),
            (None, _) => Ok(source.items.len().wrapping_sub(1)),
        };
        source.pos = pos.map_err(|e| source.corrupt(&self.tree, e))?;
        source.settle(&self.tree, &self.window, self.reverse)?;
        self.sources.push(source);
        Ok(())
    }
}

impl Source {
    /// Moves the source from `pos` to the next item in scan order that
    /// lies in the window (across chunks), and marks it ready; or marks it
    /// not ready when there is none.
    fn settle(&mut self, tree: &Tree, window: &WindowRange, reverse: bool) -> Result<()> {
        let s = self;
        s.ready = false;
        loop {
            if s.pos >= s.items.len() {
                let next_chunk = if reverse {
                    s.chunk.checked_sub(1)
                } else {
                    Some(s.chunk + 1).filter(|c| *c < s.head.chunks.len())
                };
                let Some(c) = next_chunk else {
                    return Ok(());
                };
                if !s.may_hold_live_items(window, c, reverse) {
                    return Ok(());
                }
                s.chunk = c;
                tree.read_chunk(&s.leaf, &s.head, c, &mut s.items)?;
                s.pos = if reverse {
                    s.items.len().wrapping_sub(1)
                } else {
                    0
                };
                continue;
            }
            let index = s.head.chunk_items(s.chunk).0 + s.pos as u32;
            if let Err(e) = s.items.locate_to(s.pos) {
                return Err(s.corrupt(tree, e));
            }
            let key = s.items.key(s.pos);
            let prefix = key_prefix(key);
            let below_lo = window.cmp_lo(key, prefix).is_lt();
            let at_or_above_hi = window.at_or_above_hi(key, prefix);
            let outside = if reverse {
                below_lo || index < s.min_index
            } else {
                at_or_above_hi
            };
            if outside {
                return Ok(());
            }
            if !reverse && index < s.min_index {
                // Jump over flushed items without reading their chunks.
                let target = s.head.chunk_of_item_from(s.chunk, s.min_index);
                if target != s.chunk {
                    s.chunk = target;
                    tree.read_chunk(&s.leaf, &s.head, target, &mut s.items)?;
                }
                s.pos = (s.min_index - s.head.chunks[target].first_item) as usize;
                continue;
            }
            if (reverse && at_or_above_hi) || (!reverse && below_lo) {
                s.pos = if reverse {
                    s.pos.wrapping_sub(1)
                } else {
                    s.pos + 1
                };
                continue;
            }
            s.ready = true;
            return Ok(());
        }
    }

    /// Moves the source past its current item.
    pub(in crate::tree) fn step(
        &mut self,
        tree: &Tree,
        window: &WindowRange,
        reverse: bool,
    ) -> Result<()> {
        self.pos = if reverse {
            self.pos.wrapping_sub(1)
        } else {
            self.pos + 1
        };
        self.settle(tree, window, reverse)
    }
}

impl ScanCursor {
    /// The rank of the ready source whose key comes next in scan order;
    /// on equal keys the newest source (lowest rank). Sources are few (one
    /// per segment on the path, and the leaf), so a linear pass over them
    /// costs less than keeping a heap of owned keys.
    pub(in crate::tree) fn next_rank(&self) -> Option<usize> {
        let mut best: Option<(usize, &[u8])> = None;
        for (rank, s) in self.sources.iter().enumerate() {
            if !s.ready {
                continue;
            }
            let key = s.items.key(s.pos);
            let better = best.is_none_or(|(_, b)| {
                let order = compare_keys(key, b);
                if self.reverse {
                    order.is_gt()
                } else {
                    order.is_lt()
                }
            });
            if better {
                best = Some((rank, key));
            }
        }
        best.map(|(rank, _)| rank)
    }
}
