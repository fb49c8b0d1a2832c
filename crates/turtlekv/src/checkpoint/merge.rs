//! Data-parallel merging of sorted runs: split every run at common key
//! boundaries (one binary search per run and boundary), then merge the
//! pieces on all cores. Merges are stable and newest-first: run 0 is the
//! newest, and on equal keys only its item survives.

use rayon::prelude::*;

/// Below this many items in total, splitting costs more than it saves.
pub(crate) const PARALLEL_MIN_ITEMS: usize = 16 * 1024;

/// Merges `runs` (each sorted by `key`, keys unique within a run; run 0
/// newest) into one sorted run with unique keys, on all cores when large.
pub(crate) fn merge_runs<T, K>(runs: &[&[T]], key: K) -> Vec<T>
where
    T: Clone + Send + Sync,
    K: Fn(&T) -> &[u8] + Sync,
{
    let total: usize = runs.iter().map(|r| r.len()).sum();
    let parts = rayon::current_num_threads() * 4;
    if total < PARALLEL_MIN_ITEMS || parts < 2 {
        return merge_sequential(runs, &key);
    }
    let cuts = split_points(runs, &key, parts);
    let pieces: Vec<Vec<T>> = cuts
        .par_windows(2)
        .map(|w| {
            let slices: Vec<&[T]> = runs
                .iter()
                .enumerate()
                .map(|(i, run)| &run[w[0][i]..w[1][i]])
                .collect();
            merge_sequential(&slices, &key)
        })
        .collect();
    let mut out = Vec::with_capacity(pieces.iter().map(Vec::len).sum());
    for piece in pieces {
        out.extend(piece);
    }
    out
}

/// Boundaries per run: row `j` holds, for every run, the index of its first
/// item with a key at or above splitter `j`. Every copy of one key lands in
/// the same piece, so newest-first resolution stays inside a piece.
fn split_points<T, K>(runs: &[&[T]], key: &K, parts: usize) -> Vec<Vec<usize>>
where
    K: Fn(&T) -> &[u8],
{
    let largest = runs
        .iter()
        .max_by_key(|r| r.len())
        .expect("at least one run");
    let mut cuts = vec![vec![0; runs.len()]];
    for j in 1..parts {
        let splitter = key(&largest[j * largest.len() / parts]);
        cuts.push(
            runs.iter()
                .map(|run| run.partition_point(|item| key(item) < splitter))
                .collect(),
        );
    }
    cuts.push(runs.iter().map(|r| r.len()).collect());
    cuts.dedup();
    cuts
}

/// Plain k-way merge; runs are few (one per buffer level), so a linear scan
/// of the heads beats a heap.
pub(crate) fn merge_sequential<T, K>(runs: &[&[T]], key: &K) -> Vec<T>
where
    T: Clone,
    K: Fn(&T) -> &[u8],
{
    let mut heads = vec![0usize; runs.len()];
    let mut out = Vec::with_capacity(runs.iter().map(|r| r.len()).sum());
    loop {
        let mut best: Option<usize> = None;
        for (i, run) in runs.iter().enumerate() {
            let Some(item) = run.get(heads[i]) else {
                continue;
            };
            // Strictly smaller only: on ties the newer (lower) run stays best.
            if best.is_none_or(|b| key(item) < key(&runs[b][heads[b]])) {
                best = Some(i);
            }
        }
        let Some(b) = best else {
            return out;
        };
        let item = &runs[b][heads[b]];
        for (i, run) in runs.iter().enumerate() {
            if run.get(heads[i]).is_some_and(|x| key(x) == key(item)) && i != b {
                heads[i] += 1;
            }
        }
        out.push(item.clone());
        heads[b] += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    type Item = (Vec<u8>, u32);

    fn key(item: &Item) -> &[u8] {
        &item.0
    }

    fn reference(runs: &[Vec<Item>]) -> Vec<Item> {
        let mut map = BTreeMap::new();
        for run in runs.iter().rev() {
            for (k, v) in run {
                map.insert(k.clone(), *v);
            }
        }
        map.into_iter().collect()
    }

    fn runs_strategy(max_len: usize) -> impl Strategy<Value = Vec<Vec<Item>>> {
        prop::collection::vec(
            prop::collection::btree_map(
                prop::collection::vec(0u8..4, 1..5),
                any::<u32>(),
                0..max_len,
            )
            .prop_map(|m| m.into_iter().collect::<Vec<_>>()),
            1..7,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn sequential_merge_is_newest_first(runs in runs_strategy(60)) {
            let slices: Vec<&[Item]> = runs.iter().map(|r| &r[..]).collect();
            prop_assert_eq!(merge_sequential(&slices, &key), reference(&runs));
        }
    }

    #[test]
    fn parallel_merge_equals_sequential_on_large_runs() {
        let mut state = 1u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let runs: Vec<Vec<Item>> = (0..5)
            .map(|level| {
                let mut m = BTreeMap::new();
                for _ in 0..(20_000 >> level) {
                    m.insert((next() % 50_000).to_be_bytes().to_vec(), level);
                }
                m.into_iter().collect()
            })
            .collect();
        let slices: Vec<&[Item]> = runs.iter().map(|r| &r[..]).collect();
        let total: usize = runs.iter().map(Vec::len).sum();
        assert!(total >= PARALLEL_MIN_ITEMS);
        assert_eq!(merge_runs(&slices, key), reference(&runs));
    }

    #[test]
    fn split_points_keep_equal_keys_together() {
        let a: Vec<Item> = (0..100u32)
            .map(|i| (vec![i as u8 / 2], i))
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .collect();
        let b: Vec<Item> = (0..100u32)
            .map(|i| (vec![i as u8 / 3], i))
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .collect();
        let runs = [&a[..], &b[..]];
        let cuts = split_points(&runs, &key, 7);
        for w in cuts.windows(2) {
            for (i, run) in runs.iter().enumerate() {
                assert!(w[0][i] <= w[1][i]);
                if w[1][i] < run.len() && w[1][i] > 0 {
                    // No key straddles a cut within a run or across runs.
                    let boundary = key(&run[w[1][i]]);
                    for (j, other) in runs.iter().enumerate() {
                        assert!(other[..w[1][j]].iter().all(|x| key(x) < boundary));
                    }
                }
            }
        }
    }
}
