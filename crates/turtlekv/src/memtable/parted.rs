//! One MemTable made of several skiplists filled one after the other.
//!
//! Why: inserting into a skiplist in random key order costs a cache miss
//! per node visited at its bottom levels, and those miss to DRAM once the
//! skiplist outgrows the CPU's last-level cache. Filling one 64 MiB skiplist
//! costs about three times as much per insert as filling an 8 MiB one
//! (`cargo bench --bench memtable`). Filling a half-size part at a time
//! keeps the part being written smaller, while the checkpoint still takes
//! the whole MemTable at once, so write amplification stays that of the
//! full checkpoint distance.
//!
//! Two parts, not more: every scan seeks in every part, so each part costs
//! scans a skiplist search (`docs/benchmarks.md`, "A MemTable filled in
//! parts"). Gets check one filter over all parts first.
//!
//! Parts hold disjoint, increasing ranges of sequence numbers (writes come
//! in sequence order), so a key's newest version visible at `s` is in the
//! newest part that has a version of it at or below `s`.

use std::ops::Bound;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;

use super::bloom::KeyBloom;
use super::skiplist::ENTRY_ESTIMATE_BYTES;
use super::{Direction, MemTable, SkipListMemTable, Versioned};

/// Parts a MemTable of the checkpoint distance it was made for fills.
const PARTS_PER_MEMTABLE: u64 = 2;

/// Smaller parts would cost more in fixed overhead (a filter and arena
/// chunks each) than they save; smaller MemTables are one part.
const MIN_PART_BYTES: u64 = 4 << 20;

/// At most this many parts: a MemTable that outgrows the distance it was
/// made for (the distance was raised at runtime) keeps filling the last.
const MAX_PARTS: usize = 16;

/// A MemTable of parts, each a skiplist; only the last takes writes.
#[derive(Debug)]
pub(crate) struct PartedMemTable {
    parts: Box<[OnceLock<SkipListMemTable>]>,
    /// `parts[..count]` are set; published after the part is.
    count: AtomicUsize,
    /// Lowest and highest sequence number in each part, kept by the writer
    /// for `check_structure`.
    seq_ranges: Box<[(AtomicU64, AtomicU64)]>,
    part_capacity_bytes: u64,
    /// Every key in any part: a get of a key no part holds (most gets, once
    /// data is in the tree) checks one filter instead of one per part.
    bloom: KeyBloom,
    /// One writer at a time decides when a part is full.
    writer: Mutex<()>,
}

impl PartedMemTable {
    /// A MemTable for a checkpoint distance of `capacity_bytes`: parts of
    /// half that, or one part if halves would be under `MIN_PART_BYTES`.
    pub fn with_capacity(capacity_bytes: u64) -> Self {
        let part_bytes = capacity_bytes / PARTS_PER_MEMTABLE;
        if part_bytes < MIN_PART_BYTES {
            return Self::new(capacity_bytes, u64::MAX, capacity_bytes);
        }
        Self::new(part_bytes, part_bytes, capacity_bytes)
    }

    /// A MemTable whose parts hold `part_capacity_bytes` each: small parts
    /// for tests.
    #[cfg(test)]
    pub fn with_part_capacity(part_capacity_bytes: u64) -> Self {
        let capacity_bytes = part_capacity_bytes * PARTS_PER_MEMTABLE;
        Self::new(part_capacity_bytes, part_capacity_bytes, capacity_bytes)
    }

    /// Parts are sized (their filters and arena chunks) for
    /// `part_size_bytes`; a new one starts when the last holds
    /// `part_capacity_bytes`; the filter over all is sized for
    /// `capacity_bytes`.
    fn new(part_size_bytes: u64, part_capacity_bytes: u64, capacity_bytes: u64) -> Self {
        let parts: Box<[OnceLock<SkipListMemTable>]> =
            (0..MAX_PARTS).map(|_| OnceLock::new()).collect();
        let first = SkipListMemTable::with_capacity(part_size_bytes);
        assert!(parts[0].set(first).is_ok(), "a new OnceLock is empty");
        PartedMemTable {
            parts,
            count: AtomicUsize::new(1),
            seq_ranges: (0..MAX_PARTS)
                .map(|_| (AtomicU64::new(u64::MAX), AtomicU64::new(0)))
                .collect(),
            part_capacity_bytes,
            bloom: KeyBloom::new(capacity_bytes / ENTRY_ESTIMATE_BYTES),
            writer: Mutex::new(()),
        }
    }

    /// Parts in use now. A reader that visits parts more than once (an
    /// iterator) fixes how many with this, so that a part added meanwhile
    /// does not shift the others; a new part holds only newer writes.
    pub fn part_count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// The first `count` parts, newest first: a key's first hit is its
    /// newest version.
    pub fn parts_newest_first(&self, count: usize) -> impl Iterator<Item = &SkipListMemTable> {
        self.parts_oldest_first(count).rev()
    }

    fn parts_oldest_first(
        &self,
        count: usize,
    ) -> impl DoubleEndedIterator<Item = &SkipListMemTable> {
        self.parts[..count]
            .iter()
            .map(|p| p.get().expect("parts below the count are set"))
    }

    fn all_parts(&self) -> impl DoubleEndedIterator<Item = &SkipListMemTable> {
        self.parts_oldest_first(self.part_count())
    }

    fn last(&self) -> (usize, &SkipListMemTable) {
        let index = self.count.load(Ordering::Acquire) - 1;
        (
            index,
            self.parts[index].get().expect("the last part is set"),
        )
    }

    /// Starts a new part when the last is full. Called by the writer only.
    ///
    /// The full part is not sealed yet: reads of a sealed skiplist share its
    /// arena chunks, and every value read bumps its chunk's reference
    /// count, on which the client threads contend. YCSB F in cache ran
    /// 1.10 and 1.15 times faster with full parts left unsealed until the
    /// MemTable is frozen (`docs/benchmarks.md`, "A MemTable filled in
    /// parts").
    fn part_for_insert(&self) -> (usize, &SkipListMemTable) {
        let (index, last) = self.last();
        if last.size_bytes() < self.part_capacity_bytes || index + 1 == MAX_PARTS {
            return (index, last);
        }
        let next = SkipListMemTable::with_capacity(self.part_capacity_bytes);
        assert!(
            self.parts[index + 1].set(next).is_ok(),
            "only the writer adds parts"
        );
        self.count.store(index + 2, Ordering::Release);
        self.last()
    }
}

impl MemTable for PartedMemTable {
    fn insert(&self, key: Bytes, seq: u64, value: Option<Bytes>) {
        // Before the entry: a get that finds the entry must pass the filter.
        self.bloom.insert(&key);
        let _writer = self.writer.lock();
        let (index, part) = self.part_for_insert();
        let (low, high) = &self.seq_ranges[index];
        debug_assert!(
            index == 0 || seq > self.seq_ranges[index - 1].1.load(Ordering::Relaxed),
            "sequence numbers grow from part to part"
        );
        low.fetch_min(seq, Ordering::Relaxed);
        high.fetch_max(seq, Ordering::Relaxed);
        part.insert(key, seq, value);
    }

    fn get(&self, key: &[u8], seq: u64) -> Option<Option<Bytes>> {
        if !self.bloom.may_contain(key) {
            return None;
        }
        self.all_parts().rev().find_map(|p| p.get(key, seq))
    }

    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        seq: u64,
        direction: Direction,
        limit: usize,
        out: &mut Vec<Versioned>,
    ) {
        let parts: Vec<&dyn MemTable> = self.parts().into_iter().rev().collect();
        if let [only] = parts[..] {
            return only.scan(lower, upper, seq, direction, limit, out);
        }
        let runs = parts.iter().map(|part| {
            let mut run = Vec::with_capacity(limit.min(1024));
            part.scan(lower, upper, seq, direction, limit, &mut run);
            run
        });
        merge_newest_first(runs.collect(), direction, limit, out);
    }

    fn check_structure(&self) -> Result<(), String> {
        let mut previous_high: Option<u64> = None;
        for (index, part) in self.all_parts().enumerate() {
            part.check_structure()
                .map_err(|e| format!("part {index}: {e}"))?;
            let Some((low, high)) = part.seq_bounds() else {
                continue;
            };
            let (recorded_low, recorded_high) = &self.seq_ranges[index];
            if low < recorded_low.load(Ordering::Relaxed)
                || high > recorded_high.load(Ordering::Relaxed)
            {
                return Err(format!(
                    "part {index} holds {low}..={high} beyond its record"
                ));
            }
            if previous_high.is_some_and(|p| p >= low) {
                return Err(format!(
                    "part {index} starts at {low}, not after the part before"
                ));
            }
            previous_high = Some(high);
        }
        Ok(())
    }

    fn seal(&self) {
        let _writer = self.writer.lock();
        for part in self.all_parts() {
            part.seal();
        }
    }

    fn size_bytes(&self) -> u64 {
        let parts: u64 = self.all_parts().map(|p| p.size_bytes()).sum();
        parts + self.bloom.size_bytes()
    }

    fn len(&self) -> usize {
        self.all_parts().map(|p| p.len()).sum()
    }

    fn parts(&self) -> Vec<&dyn MemTable> {
        self.all_parts().map(|p| p as &dyn MemTable).collect()
    }
}

/// Merges runs that each hold a key at most once, in `direction` order,
/// into `out`: up to `limit` keys, a key found in several runs taken from
/// the first (newest) of them.
pub(crate) fn merge_newest_first(
    mut runs: Vec<Vec<Versioned>>,
    direction: Direction,
    limit: usize,
    out: &mut Vec<Versioned>,
) {
    // Keys are compared in place, without cloning: sealed parts' keys share
    // one reference count per arena chunk, which the checkpoint's threads
    // would contend on.
    let mut next = vec![0; runs.len()];
    let before = out.len();
    while out.len() - before < limit {
        let mut best: Option<usize> = None;
        for index in 0..runs.len() {
            let Some((key, _)) = runs[index].get(next[index]) else {
                continue;
            };
            let wins = best.is_none_or(|b| {
                let best_key = &runs[b][next[b]].0;
                match direction {
                    Direction::Forward => key < best_key,
                    Direction::Reverse => key > best_key,
                }
            });
            if wins {
                best = Some(index);
            }
        }
        let Some(best) = best else { break };
        let taken = std::mem::replace(&mut runs[best][next[best]], (Bytes::new(), None));
        next[best] += 1;
        for index in 0..runs.len() {
            if runs[index]
                .get(next[index])
                .is_some_and(|(k, _)| *k == taken.0)
            {
                next[index] += 1;
            }
        }
        out.push(taken);
    }
}
