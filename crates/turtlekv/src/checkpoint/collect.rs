//! Reading a frozen MemTable for its checkpoint: the newest version of every
//! key in key order, tombstones kept. The key range is cut into pieces that
//! are scanned in parallel on the checkpoint pool (a skiplist walk is
//! mostly cache misses, so two cores scan twice as fast), then joined. A
//! MemTable of several parts has each piece read from every part and
//! merged, the newest part winning.

use std::ops::Bound;

use bytes::Bytes;
use rayon::prelude::*;

use crate::memtable::{Direction, MemTable, Versioned, merge_newest_first};

/// Keys read per scan call.
const CHUNK_KEYS: usize = 1024;

/// Every key of `memtable` with its newest version, in key order, scanned
/// in parallel on the current rayon pool.
pub(crate) fn collect_latest(memtable: &dyn MemTable) -> Vec<Versioned> {
    // Newest first, as `merge_newest_first` wants them.
    let parts: Vec<&dyn MemTable> = memtable.parts().into_iter().rev().collect();
    let edges = |direction| parts.iter().filter_map(move |p| edge(*p, direction));
    let (Some(first), Some(last)) = (
        edges(Direction::Forward).min(),
        edges(Direction::Reverse).max(),
    ) else {
        return Vec::new();
    };
    let splits = split_keys(&first, &last, rayon::current_num_threads() * 4);
    let mut bounds = Vec::with_capacity(splits.len() + 1);
    let mut lower = Bound::Unbounded;
    for split in splits {
        bounds.push((lower, Bound::Excluded(split.clone())));
        lower = Bound::Included(split);
    }
    bounds.push((lower, Bound::Unbounded));
    let pieces: Vec<Vec<Versioned>> = bounds
        .par_iter()
        .map(|(lo, hi)| collect_parts(&parts, lo, hi))
        .collect();
    let mut out = Vec::with_capacity(pieces.iter().map(Vec::len).sum());
    for piece in pieces {
        out.extend(piece);
    }
    out
}

/// The smallest or largest key.
fn edge(memtable: &dyn MemTable, direction: Direction) -> Option<Bytes> {
    let mut out = Vec::with_capacity(1);
    let all = Bound::Unbounded;
    memtable.scan(all, all, u64::MAX, direction, 1, &mut out);
    out.pop().map(|(key, _)| key)
}

/// Every key in `(lower, upper)` with its newest version in any part.
fn collect_parts(
    parts: &[&dyn MemTable],
    lower: &Bound<Bytes>,
    upper: &Bound<Bytes>,
) -> Vec<Versioned> {
    if let [only] = parts {
        return collect_range(*only, lower.clone(), upper.clone());
    }
    let runs = parts
        .iter()
        .map(|p| collect_range(*p, lower.clone(), upper.clone()))
        .collect();
    let mut out = Vec::new();
    merge_newest_first(runs, Direction::Forward, usize::MAX, &mut out);
    out
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
    use crate::memtable::{PartedMemTable, SkipListMemTable};

    #[test]
    fn parallel_collection_equals_a_plain_scan() {
        let memtable = SkipListMemTable::new();
        fill_three_rounds(&memtable);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let collected = pool.install(|| collect_latest(&memtable));
        let plain = collect_range(&memtable, Bound::Unbounded, Bound::Unbounded);
        assert_eq!(collected.len(), 20_000);
        assert_eq!(collected, plain);
        assert!(collected.windows(2).all(|w| w[0].0 < w[1].0));
    }

    /// Each key's three versions land in different parts; the newest part's
    /// version (or tombstone) is the one collected, as from one skiplist.
    #[test]
    fn parts_collect_like_one_skiplist() {
        let whole = SkipListMemTable::with_capacity(16 << 20);
        let parted = PartedMemTable::with_part_capacity(256 << 10);
        fill_three_rounds(&whole);
        fill_three_rounds(&parted);
        assert!(parted.parts().len() >= 6);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let collected = pool.install(|| collect_latest(&parted));
        assert_eq!(collected.len(), 20_000);
        assert_eq!(
            collected,
            collect_range(&whole, Bound::Unbounded, Bound::Unbounded)
        );
    }

    /// 20,000 keys written three times; in round `r` every seventh key
    /// (counting from `r`) is deleted instead.
    fn fill_three_rounds(memtable: &dyn MemTable) {
        let mut seq = 0;
        for round in 0..3u64 {
            for i in 0..20_000u64 {
                seq += 1;
                let key = Bytes::from(i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes().to_vec());
                let value = (i % 7 != round).then(|| Bytes::from(format!("{round}:{i}")));
                memtable.insert(key, seq, value);
            }
        }
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
