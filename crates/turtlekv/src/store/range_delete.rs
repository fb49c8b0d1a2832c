//! Reading the tree's keys within deleted ranges, for the checkpoint that
//! applies a MemTable's range tombstones: the tree format has no range
//! tombstone, so each key the tree holds in a deleted range becomes a
//! point tombstone in the checkpoint's batch.
//!
//! A range may hold any number of keys, so they are read in chunks of
//! `step_bytes`: a leaf's worth of tombstones, at most `MAX_STEP_BYTES`.
//! A store applies each full chunk as an update of its own before the
//! checkpoint's batch (`PagedTreeStore`: a commit at the unchanged
//! coverage, like a reclamation step); only the last, partial chunk joins
//! the batch. The memory a range deletion takes is thus one chunk and one
//! update's working set, whatever its size.

use std::ops::Bound;

use bytes::Bytes;

use super::TreeVersion;
use crate::Result;
use crate::memtable::{Direction, Versioned};

/// The most bytes of tombstones (keys plus `TOMBSTONE_OVERHEAD_BYTES`
/// each) one chunk holds, whatever the leaf size.
const MAX_STEP_BYTES: usize = 4 << 20;
/// The fewest, for the smallest leaves.
const MIN_STEP_BYTES: usize = 4 << 10;
/// What a tombstone costs beside its key: the item and its key's buffer
/// header.
const TOMBSTONE_OVERHEAD_BYTES: usize = 64;
/// Keys asked of the tree's cursor at a time.
const FILL_KEYS: usize = 256;

/// Bytes of tombstones one chunk holds with leaves of `leaf_bytes`: a
/// leaf's worth (2 MiB with the default leaves, about 27,000 tombstones
/// of 12-byte keys), so that a step's update and its commit are of the
/// size the tree writes in anyway, within `MIN_STEP_BYTES..=MAX_STEP_BYTES`.
pub(crate) fn step_bytes(leaf_bytes: usize) -> usize {
    leaf_bytes.clamp(MIN_STEP_BYTES, MAX_STEP_BYTES)
}

/// Where a reading of the deleted ranges stands: the range being read,
/// and the last key read in it, which the next chunk starts after.
#[derive(Debug, Default)]
pub(crate) struct RangeKeys {
    range: usize,
    resume: Option<Bytes>,
}

impl RangeKeys {
    /// Appends to `out` the next keys of `version` within `ranges`
    /// (disjoint, in key order), copied, up to about `budget_bytes` of
    /// tombstones. Returns `true` when every range is read to its end.
    pub fn next_chunk(
        &mut self,
        version: &dyn TreeVersion,
        ranges: &[(Bytes, Bytes)],
        budget_bytes: usize,
        out: &mut Vec<Bytes>,
    ) -> Result<bool> {
        let mut used = 0;
        let mut fetched: Vec<Versioned> = Vec::with_capacity(FILL_KEYS);
        while let Some((start, end)) = ranges.get(self.range) {
            let lower = match self.resume.take() {
                Some(last) => Bound::Excluded(last),
                None => Bound::Included(start.clone()),
            };
            let mut cursor =
                version.cursor(lower, Bound::Excluded(end.clone()), Direction::Forward);
            loop {
                fetched.clear();
                cursor.fill(FILL_KEYS, &mut fetched)?;
                for (key, _) in &fetched {
                    // A copy: the tree's key is a slice of a cached block,
                    // which it would keep alive.
                    let key = Bytes::copy_from_slice(key);
                    used += key.len() + TOMBSTONE_OVERHEAD_BYTES;
                    self.resume = Some(key.clone());
                    out.push(key);
                    if used >= budget_bytes {
                        return Ok(false);
                    }
                }
                if fetched.len() < FILL_KEYS {
                    break;
                }
            }
            self.range += 1;
            self.resume = None;
        }
        Ok(true)
    }
}

/// `batch` (a MemTable's newest versions, in key order) with a tombstone
/// added for every key of `deleted` (in key order) it does not hold: the
/// MemTable's own version of a key is newer than the tree's.
pub(crate) fn merge_tombstones(batch: Vec<Versioned>, deleted: Vec<Bytes>) -> Vec<Versioned> {
    if deleted.is_empty() {
        return batch;
    }
    let mut out = Vec::with_capacity(batch.len() + deleted.len());
    let mut deleted = deleted.into_iter().peekable();
    for (key, value) in batch {
        while let Some(d) = deleted.next_if(|d| *d < key) {
            out.push((d, None));
        }
        deleted.next_if(|d| *d == key);
        out.push((key, value));
    }
    out.extend(deleted.map(|d| (d, None)));
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::store::{TreeCheck, TreeCursor, TreeScan};
    use crate::values::Value;

    #[derive(Debug)]
    struct MapVersion(BTreeMap<Bytes, Value>);

    struct Scan(std::vec::IntoIter<Versioned>);

    impl TreeScan for Scan {
        fn fill(&mut self, limit: usize, out: &mut Vec<Versioned>) -> Result<()> {
            out.extend(self.0.by_ref().take(limit));
            Ok(())
        }
    }

    impl TreeVersion for MapVersion {
        fn get(&self, key: &[u8]) -> Result<Option<Value>> {
            Ok(self.0.get(key).cloned())
        }
        fn cursor(&self, lo: Bound<Bytes>, hi: Bound<Bytes>, _: Direction) -> TreeCursor {
            let pairs: Vec<Versioned> = self
                .0
                .range::<Bytes, _>((lo, hi))
                .map(|(k, v)| (k.clone(), Some(v.clone())))
                .collect();
            Box::new(Scan(pairs.into_iter()))
        }
        fn covered_seq(&self) -> u64 {
            0
        }
        fn approximate_items(&self, _span: crate::tree::count::KeySpan<'_>) -> Result<u64> {
            Ok(self.0.len() as u64)
        }
        fn check(&self) -> Result<TreeCheck> {
            Ok(TreeCheck::default())
        }
    }

    fn key(i: u32) -> Bytes {
        Bytes::copy_from_slice(&i.to_be_bytes())
    }

    #[test]
    fn chunks_cover_every_key_in_the_ranges_once_within_the_budget() {
        let map = (0..5000)
            .map(|i| (key(i), Value::Inline(Bytes::from_static(b"v"))))
            .collect();
        let version = MapVersion(map);
        let ranges = vec![
            (key(10), key(1200)),
            (key(1200), key(1201)),
            (key(3000), key(9000)),
        ];
        let budget = 100 * (4 + TOMBSTONE_OVERHEAD_BYTES);
        let mut reader = RangeKeys::default();
        let mut all = Vec::new();
        loop {
            let mut chunk = Vec::new();
            let done = reader
                .next_chunk(&version, &ranges, budget, &mut chunk)
                .unwrap();
            assert!(chunk.len() <= 100, "a chunk of {} keys", chunk.len());
            all.extend(chunk);
            if done {
                break;
            }
        }
        let want: Vec<Bytes> = (10..1201).chain(3000..5000).map(key).collect();
        assert_eq!(all.len(), want.len());
        assert!(all == want, "keys missing, repeated or out of order");
    }

    #[test]
    fn a_step_is_a_leaf_within_bounds() {
        assert_eq!(step_bytes(2 << 20), 2 << 20);
        assert_eq!(step_bytes(16 << 10), 16 << 10);
        assert_eq!(step_bytes(64 << 20), MAX_STEP_BYTES);
        assert_eq!(step_bytes(1024), MIN_STEP_BYTES);
    }

    #[test]
    fn merge_keeps_the_memtables_version_and_order() {
        let b = |s: &'static str| Bytes::from_static(s.as_bytes());
        let batch = vec![
            (b("b"), Some(Value::Inline(b("1")))),
            (b("d"), None),
            (b("f"), Some(Value::Inline(b("2")))),
        ];
        let deleted = vec![b("a"), b("b"), b("c"), b("g")];
        let merged = merge_tombstones(batch, deleted);
        let want = vec![
            (b("a"), None),
            (b("b"), Some(Value::Inline(b("1")))),
            (b("c"), None),
            (b("d"), None),
            (b("f"), Some(Value::Inline(b("2")))),
            (b("g"), None),
        ];
        assert_eq!(merged, want);
    }
}
