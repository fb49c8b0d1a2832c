//! A MemTable's range tombstones: the deletions of key ranges
//! (`Db::delete_range`) it holds beside its point entries.
//!
//! A range tombstone `(start, end, seq)` hides every version numbered
//! below `seq` of every key `k` with `start <= k < end`, from a reader at
//! `seq` or later. Versions in this MemTable, in older MemTables and in the
//! tree all fall under it; versions numbered above it do not. Readers ask
//! for the newest tombstone covering a key (`covering_seq`) and compare it
//! with the sequence number of the version they found.
//!
//! The structure is a vector sorted by start, behind a lock that only the
//! group commit's leader takes for writing. Range deletions are expected
//! to be few per MemTable (a checkpoint empties it): a lookup scans the
//! tombstones whose start is at or below the key, so its cost grows with
//! their number; a MemTable without any costs readers one atomic load.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;
use parking_lot::RwLock;

/// Charged per tombstone on top of its two keys: the vector slot and the
/// keys' shared-buffer headers.
const TOMBSTONE_OVERHEAD_BYTES: u64 = 96;

/// One deleted range: every key `k` with `start <= k < end`, as of `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RangeTombstone {
    pub start: Bytes,
    pub end: Bytes,
    pub seq: u64,
}

impl RangeTombstone {
    pub fn covers(&self, key: &[u8]) -> bool {
        self.start.as_ref() <= key && key < self.end.as_ref()
    }

    /// Whether some key of the range lies within `(lower, upper)`.
    pub fn overlaps(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> bool {
        let below_upper = match upper {
            Bound::Included(u) => self.start.as_ref() <= u,
            Bound::Excluded(u) => self.start.as_ref() < u,
            Bound::Unbounded => true,
        };
        // The range's last key is below `end`: any key below `end` above
        // the lower bound is in both (keys have no largest element below a
        // bound, so `Excluded(l)` with `l < end` leaves keys `l + 0x00..`).
        let above_lower = match lower {
            Bound::Included(l) | Bound::Excluded(l) => l < self.end.as_ref(),
            Bound::Unbounded => true,
        };
        below_upper && above_lower
    }
}

/// The range tombstones of one MemTable.
#[derive(Debug, Default)]
pub(crate) struct RangeTombstones {
    /// Sorted by `(start, seq)`.
    list: RwLock<Vec<RangeTombstone>>,
    /// `list.len()`, read without the lock: most MemTables hold none.
    count: AtomicUsize,
    bytes: AtomicU64,
}

impl RangeTombstones {
    /// Adds a tombstone. Only the writer (the group commit's leader, or
    /// the replay that rebuilds a MemTable) calls it, before `seq` is
    /// visible.
    pub fn insert(&self, start: Bytes, end: Bytes, seq: u64) {
        debug_assert!(start < end, "an empty range is refused before it is logged");
        let charge = (start.len() + end.len()) as u64 + TOMBSTONE_OVERHEAD_BYTES;
        let mut list = self.list.write();
        let at = list.partition_point(|t| (&t.start, t.seq) <= (&start, seq));
        list.insert(at, RangeTombstone { start, end, seq });
        self.count.store(list.len(), Ordering::Release);
        self.bytes.fetch_add(charge, Ordering::Relaxed);
    }

    /// Number of tombstones held.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes charged for the tombstones (part of the MemTable's size).
    pub fn size_bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The highest sequence number at or below `read_seq` of a tombstone
    /// covering `key`, if any.
    pub fn covering_seq(&self, key: &[u8], read_seq: u64) -> Option<u64> {
        if self.is_empty() {
            return None;
        }
        let list = self.list.read();
        let candidates = list.partition_point(|t| t.start.as_ref() <= key);
        list[..candidates]
            .iter()
            .filter(|t| t.seq <= read_seq && t.covers(key))
            .map(|t| t.seq)
            .max()
    }

    /// Whether a tombstone numbered in `(after_seq, upto_seq]` overlaps
    /// the key range `(lower, upper)` (a transaction's conflict check).
    pub fn any_between(
        &self,
        (after_seq, upto_seq): (u64, u64),
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> bool {
        if self.is_empty() {
            return false;
        }
        self.list
            .read()
            .iter()
            .any(|t| t.seq > after_seq && t.seq <= upto_seq && t.overlaps(lower, upper))
    }

    /// Every tombstone, sorted by start (a checkpoint, `Db::check`).
    pub fn all(&self) -> Vec<RangeTombstone> {
        if self.is_empty() {
            return Vec::new();
        }
        self.list.read().clone()
    }

    /// The union of the ranges, as disjoint `(start, end)` pairs in key
    /// order: what a checkpoint deletes from the tree.
    pub fn merged_ranges(&self) -> Vec<(Bytes, Bytes)> {
        merge_ranges(self.all())
    }

    /// Deep check: sorted by `(start, seq)`, every range non-empty, the
    /// count exact.
    pub fn check(&self) -> Result<(), String> {
        let list = self.list.read();
        if list.len() != self.len() {
            return Err(format!(
                "range tombstone count {} but {} held",
                self.len(),
                list.len()
            ));
        }
        if let Some(t) = list.iter().find(|t| t.start >= t.end) {
            return Err(format!("empty range tombstone at sequence {}", t.seq));
        }
        let sorted = list
            .windows(2)
            .all(|w| (&w[0].start, w[0].seq) < (&w[1].start, w[1].seq));
        if !sorted {
            return Err("range tombstones out of order".into());
        }
        Ok(())
    }
}

/// The union of `tombstones`' ranges, as disjoint `(start, end)` pairs in
/// key order.
pub(crate) fn merge_ranges(mut tombstones: Vec<RangeTombstone>) -> Vec<(Bytes, Bytes)> {
    tombstones.sort_by(|a, b| a.start.cmp(&b.start));
    let mut merged: Vec<(Bytes, Bytes)> = Vec::new();
    for t in tombstones {
        match merged.last_mut() {
            Some((_, end)) if t.start <= *end => {
                if t.end > *end {
                    *end = t.end;
                }
            }
            _ => merged.push((t.start, t.end)),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    fn filled() -> RangeTombstones {
        let t = RangeTombstones::default();
        t.insert(b("c"), b("f"), 10);
        t.insert(b("a"), b("d"), 20);
        t.insert(b("e"), b("g"), 30);
        t.insert(b("c"), b("d"), 40);
        t
    }

    #[test]
    fn covering_seq_is_the_newest_visible_cover() {
        let t = filled();
        assert_eq!(t.covering_seq(b"a", u64::MAX), Some(20));
        assert_eq!(t.covering_seq(b"c", u64::MAX), Some(40));
        assert_eq!(t.covering_seq(b"c", 39), Some(20));
        assert_eq!(t.covering_seq(b"c", 19), Some(10));
        assert_eq!(t.covering_seq(b"c", 9), None);
        // Ends are exclusive, starts inclusive.
        assert_eq!(t.covering_seq(b"d", u64::MAX), Some(10));
        assert_eq!(t.covering_seq(b"f", u64::MAX), Some(30));
        assert_eq!(t.covering_seq(b"g", u64::MAX), None);
        assert_eq!(t.covering_seq(b"", u64::MAX), None);
        assert_eq!(t.covering_seq(b"fzz", 29), None);
    }

    #[test]
    fn matches_a_brute_force_model() {
        let keys: Vec<Vec<u8>> = (0u8..12).map(|i| vec![b'a' + i / 3, i % 3]).collect();
        let t = RangeTombstones::default();
        let mut model = Vec::new();
        let mut state = 7u64;
        for seq in 1..40u64 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let (i, j) = ((state >> 33) as usize % 12, (state >> 45) as usize % 12);
            if i == j {
                continue;
            }
            let (lo, hi) = (keys[i.min(j)].clone(), keys[i.max(j)].clone());
            t.insert(Bytes::from(lo.clone()), Bytes::from(hi.clone()), seq);
            model.push((lo, hi, seq));
            for key in &keys {
                for read_seq in [seq / 2, seq] {
                    let want = model
                        .iter()
                        .filter(|(l, h, s)| *s <= read_seq && l <= key && key < h)
                        .map(|m| m.2)
                        .max();
                    assert_eq!(t.covering_seq(key, read_seq), want);
                }
            }
        }
        t.check().unwrap();
        assert_eq!(t.len(), model.len());
    }

    #[test]
    fn merged_ranges_are_disjoint_and_cover_the_union() {
        let t = filled();
        assert_eq!(t.merged_ranges(), vec![(b("a"), b("g"))]);
        let apart = RangeTombstones::default();
        apart.insert(b("m"), b("n"), 1);
        apart.insert(b("a"), b("b"), 2);
        apart.insert(b("b"), b("c"), 3);
        assert_eq!(
            apart.merged_ranges(),
            vec![(b("a"), b("c")), (b("m"), b("n"))]
        );
    }

    #[test]
    fn overlap_and_newer_than() {
        let t = filled();
        let inc = |s: &'static str| Bound::Included(s.as_bytes());
        let exc = |s: &'static str| Bound::Excluded(s.as_bytes());
        assert!(t.any_between((0, 100), inc("f"), exc("h")));
        assert!(!t.any_between((0, 100), inc("g"), exc("h")));
        assert!(!t.any_between((30, 100), inc("e"), Bound::Unbounded));
        assert!(t.any_between((29, 100), exc("e"), inc("f")));
        assert!(!t.any_between((0, 100), Bound::Unbounded, exc("a")));
        assert!(!t.any_between((0, 9), Bound::Unbounded, Bound::Unbounded));
    }

    #[test]
    fn an_empty_set_answers_without_its_lock() {
        let t = RangeTombstones::default();
        assert_eq!(t.covering_seq(b"a", u64::MAX), None);
        assert!(t.merged_ranges().is_empty());
        assert_eq!(t.size_bytes(), 0);
        t.check().unwrap();
    }
}
