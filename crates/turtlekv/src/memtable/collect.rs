//! Reading a frozen MemTable for its checkpoint: the newest version of every
//! key in key order, tombstones kept. The key range is cut into parts that
//! are scanned in parallel on the checkpoint pool (a walk over the
//! MemTable's entries is mostly cache misses, so two cores scan about
//! twice as fast), then joined.

use std::ops::Bound;

use bytes::Bytes;
use rayon::prelude::*;

use crate::memtable::{Direction, MemTable, Versioned};

/// Keys read per scan call.
const CHUNK_KEYS: usize = 1024;

/// Every key of `memtable` with its newest version, in key order, scanned
/// in parallel on the current rayon pool.
pub(crate) fn collect_latest(memtable: &dyn MemTable) -> Vec<Versioned> {
    let (Some(first), Some(last)) = (
        edge(memtable, Direction::Forward),
        edge(memtable, Direction::Reverse),
    ) else {
        return Vec::new();
    };
    let parts = rayon::current_num_threads() * 4;
    let splits = split_keys(&first, &last, parts);
    let mut bounds = Vec::with_capacity(splits.len() + 1);
    let mut lower = Bound::Unbounded;
    for split in splits {
        bounds.push((lower, Bound::Excluded(split.clone())));
        lower = Bound::Included(split);
    }
    bounds.push((lower, Bound::Unbounded));
    let pieces: Vec<Vec<Versioned>> = bounds
        .par_iter()
        .map(|(lo, hi)| collect_range(memtable, lo.clone(), hi.clone()))
        .collect();
    let mut out = Vec::with_capacity(pieces.iter().map(Vec::len).sum());
    for piece in pieces {
        out.extend(piece);
    }
    delete_covered(memtable, &mut out);
    out
}

/// Turns into tombstones the newest versions in `out` that a range
/// tombstone of the same MemTable, numbered above them, deletes: the
/// newest state of such a key is deleted. (The tree's keys within the
/// ranges are the tree store's to delete: `TreeStore::checkpoint`.)
fn delete_covered(memtable: &dyn MemTable, out: &mut [Versioned]) {
    let tombstones = memtable.range_tombstones();
    if tombstones.is_empty() {
        return;
    }
    for (key, value) in out.iter_mut().filter(|(_, v)| v.is_some()) {
        let Some(range_seq) = tombstones.covering_seq(key, u64::MAX) else {
            continue;
        };
        if memtable.newest_seq(key).is_some_and(|seq| seq < range_seq) {
            *value = None;
        }
    }
}

/// The smallest or largest key.
fn edge(memtable: &dyn MemTable, direction: Direction) -> Option<Bytes> {
    let mut out = Vec::with_capacity(1);
    let all = Bound::Unbounded;
    memtable.scan(all, all, u64::MAX, direction, 1, &mut out);
    out.pop().map(|(key, _)| key)
}

/// Every key in `(lower, upper)` with its newest version.
fn collect_range(
    memtable: &dyn MemTable,
    lower: Bound<Bytes>,
    upper: Bound<Bytes>,
) -> Vec<Versioned> {
    let mut out: Vec<Versioned> = Vec::new();
    let mut resume = lower;
    loop {
        let before = out.len();
        memtable.scan(
            as_slice(&resume),
            as_slice(&upper),
            u64::MAX,
            Direction::Forward,
            CHUNK_KEYS,
            &mut out,
        );
        if out.len() - before < CHUNK_KEYS {
            return out;
        }
        resume = Bound::Excluded(out.last().expect("a full chunk").0.clone());
    }
}

fn as_slice(bound: &Bound<Bytes>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Up to `parts - 1` increasing keys strictly between `first` and `last`,
/// evenly spaced in the 8 bytes after their common prefix (so hashed and
/// sequential keys alike split into parts of similar size).
fn split_keys(first: &[u8], last: &[u8], parts: usize) -> Vec<Bytes> {
    let common = first.iter().zip(last).take_while(|(a, b)| a == b).count();
    let word = |key: &[u8]| {
        let mut buf = [0u8; 8];
        let tail = &key[common.min(key.len())..];
        let n = tail.len().min(8);
        buf[..n].copy_from_slice(&tail[..n]);
        u64::from_be_bytes(buf)
    };
    let (lo, hi) = (word(first), word(last));
    let mut splits: Vec<Bytes> = Vec::with_capacity(parts);
    for i in 1..parts as u64 {
        let at = lo + ((u128::from(hi - lo) * u128::from(i)) / parts as u128) as u64;
        let mut key = first[..common].to_vec();
        key.extend_from_slice(&at.to_be_bytes());
        let key = Bytes::from(key);
        if key.as_ref() > first && key.as_ref() < last && splits.last().is_none_or(|s| *s < key) {
            splits.push(key);
        }
    }
    splits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memtable::BTreeMemTable;

    // Under Miri's default model (Stacked Borrows) rayon's crossbeam-epoch
    // fails before the MemTable is read (crossbeam-rs/crossbeam#545; it is
    // sound under Tree Borrows, which crossbeam's own Miri runs use):
    // `docs/testing.md` gives the Tree Borrows command that runs this test.
    #[test]
    #[cfg_attr(miri, ignore = "crossbeam-epoch needs Tree Borrows")]
    fn parallel_collection_equals_a_plain_scan() {
        // Fewer under Miri, which runs the same code far slower.
        const KEYS: u64 = if cfg!(miri) { 400 } else { 20_000 };
        let memtable = BTreeMemTable::with_capacity(1 << 20);
        let mut seq = 0;
        for round in 0..3u64 {
            for i in 0..KEYS {
                seq += 1;
                let key = Bytes::from(i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes().to_vec());
                let value = (i % 7 != round)
                    .then(|| crate::values::Value::Inline(Bytes::from(format!("{round}:{i}"))));
                memtable.insert(key, seq, value);
            }
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let collected = pool.install(|| collect_latest(&memtable));
        let plain = collect_range(&memtable, Bound::Unbounded, Bound::Unbounded);
        assert_eq!(collected.len() as u64, KEYS);
        assert_eq!(collected, plain);
        assert!(collected.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn a_range_tombstone_deletes_older_versions_of_its_own_memtable() {
        let memtable = BTreeMemTable::with_capacity(1 << 20);
        let b = |s: &'static str| Bytes::from_static(s.as_bytes());
        let v = |s: &'static str| crate::values::Value::Inline(b(s));
        memtable.insert(b("a"), 1, Some(v("old")));
        memtable.insert(b("b"), 2, Some(v("old")));
        memtable.insert(b("c"), 3, Some(v("old")));
        memtable.delete_range(b("b"), b("d"), 4);
        memtable.insert(b("c"), 5, Some(v("new")));
        memtable.insert(b("e"), 6, Some(v("kept")));
        assert!(!memtable.holds_nothing());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let collected = pool.install(|| collect_latest(&memtable));
        let want = vec![
            (b("a"), Some(v("old"))),
            (b("b"), None),
            (b("c"), Some(v("new"))),
            (b("e"), Some(v("kept"))),
        ];
        assert_eq!(collected, want);
        assert_eq!(memtable.visible_seq(b"c", 4), Some(3));
    }

    #[test]
    fn split_keys_lie_strictly_between_and_increase() {
        for (first, last) in [
            (&b"user000001"[..], &b"user999999"[..]),
            (b"a", b"b"),
            (b"a", b"a\x00\x01"),
            (b"\x00", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff"),
        ] {
            let splits = split_keys(first, last, 8);
            assert!(
                splits
                    .iter()
                    .all(|s| s.as_ref() > first && s.as_ref() < last)
            );
            assert!(splits.windows(2).all(|w| w[0] < w[1]));
        }
        assert_eq!(split_keys(b"user000001", b"user999999", 8).len(), 7);
    }
}
