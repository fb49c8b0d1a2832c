//! Data-parallel merging of sorted runs: split every run at common key
//! boundaries (one binary search per run and boundary), then merge the
//! pieces on all threads of the current rayon pool (the checkpoint pool).
//! Merges are stable and newest-first: run 0 is the newest, and on equal
//! keys only its item survives, in every piece, because every copy of a key
//! lands in the same piece.

use rayon::prelude::*;

use crate::tree::format::item::{Item, merge_sequential};

/// Below this many items in total, splitting costs more than it saves.
pub(crate) const PARALLEL_MIN_ITEMS: usize = 16 * 1024;

#[cfg(test)]
thread_local! {
    /// Merges this thread ran on the parallel path, keeping tombstones
    /// (index 0) or dropping them (1): tree tests check that they reach it.
    pub(in crate::tree) static PARALLEL_MERGES: std::cell::Cell<[u64; 2]> = const { std::cell::Cell::new([0; 2]) };
}

/// Merges `runs` (each sorted, keys unique within a run; run 0 newest) into
/// one sorted run with unique keys, dropping tombstones if asked; on all
/// threads of the pool when the runs are large.
pub(crate) fn merge_runs(runs: &[&[Item]], drop_tombstones: bool) -> Vec<Item> {
    let total: usize = runs.iter().map(|r| r.len()).sum();
    let parts = rayon::current_num_threads() * 4;
    if total < PARALLEL_MIN_ITEMS || rayon::current_num_threads() < 2 {
        return merge_sequential(runs, drop_tombstones);
    }
    #[cfg(test)]
    PARALLEL_MERGES.with(|merges| {
        let mut counts = merges.get();
        counts[usize::from(drop_tombstones)] += 1;
        merges.set(counts);
    });
    let cuts = split_points(runs, parts);
    let pieces: Vec<Vec<Item>> = cuts
        .par_windows(2)
        .map(|w| {
            let slices: Vec<&[Item]> = runs
                .iter()
                .enumerate()
                .map(|(i, run)| &run[w[0][i]..w[1][i]])
                .collect();
            merge_sequential(&slices, drop_tombstones)
        })
        .collect();
    let mut out = Vec::with_capacity(pieces.iter().map(Vec::len).sum());
    for piece in pieces {
        out.extend(piece);
    }
    out
}

/// Boundaries per run: row `j` holds, for every run, the index of its first
/// item with a key at or above splitter `j`, splitters taken evenly from the
/// largest run.
fn split_points(runs: &[&[Item]], parts: usize) -> Vec<Vec<usize>> {
    let largest = runs
        .iter()
        .max_by_key(|r| r.len())
        .expect("at least one run");
    let mut cuts = vec![vec![0; runs.len()]];
    for j in 1..parts {
        let splitter = &largest[j * largest.len() / parts].key;
        cuts.push(
            runs.iter()
                .map(|run| run.partition_point(|item| item.key < *splitter))
                .collect(),
        );
    }
    cuts.push(runs.iter().map(|r| r.len()).collect());
    cuts.dedup();
    cuts
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bytes::Bytes;

    use super::*;

    fn reference(runs: &[Vec<Item>], drop_tombstones: bool) -> Vec<Item> {
        let mut map = BTreeMap::new();
        for run in runs.iter().rev() {
            for item in run {
                map.insert(item.key.clone(), item.clone());
            }
        }
        map.into_values()
            .filter(|item| !drop_tombstones || item.value.is_some())
            .collect()
    }

    fn random_runs(levels: u32) -> Vec<Vec<Item>> {
        let mut state = 1u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        (0..levels)
            .map(|level| {
                let mut m = BTreeMap::new();
                for _ in 0..(40_000 >> level) {
                    let key = Bytes::from((next() % 80_000).to_be_bytes().to_vec());
                    let value = (next() % 5 != 0)
                        .then(|| crate::values::Value::Inline(Bytes::from(vec![level as u8; 3])));
                    m.insert(key.clone(), Item { key, value });
                }
                m.into_values().collect()
            })
            .collect()
    }

    #[test]
    fn parallel_merge_equals_the_reference_on_large_runs() {
        let runs = random_runs(5);
        let slices: Vec<&[Item]> = runs.iter().map(|r| &r[..]).collect();
        let total: usize = runs.iter().map(Vec::len).sum();
        assert!(total >= PARALLEL_MIN_ITEMS);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        for drop_tombstones in [false, true] {
            let merged = pool.install(|| merge_runs(&slices, drop_tombstones));
            assert_eq!(merged, reference(&runs, drop_tombstones));
        }
    }

    #[test]
    fn split_points_keep_equal_keys_together() {
        let run = |div: u8| -> Vec<Item> {
            (0..100u8)
                .map(|i| (i / div, i))
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .map(|(k, v)| Item::put(vec![k], vec![v]))
                .collect()
        };
        let (a, b) = (run(2), run(3));
        let runs = [&a[..], &b[..]];
        let cuts = split_points(&runs, 7);
        assert!(cuts.len() > 2);
        for w in cuts.windows(2) {
            for (i, run) in runs.iter().enumerate() {
                assert!(w[0][i] <= w[1][i]);
                if w[1][i] < run.len() && w[1][i] > 0 {
                    // No key straddles a cut within a run or across runs.
                    let boundary = &run[w[1][i]].key;
                    for (j, other) in runs.iter().enumerate() {
                        assert!(other[..w[1][j]].iter().all(|x| x.key < *boundary));
                    }
                }
            }
        }
    }
}
