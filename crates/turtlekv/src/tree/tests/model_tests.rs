//! Randomised tests of the whole tree against a `BTreeMap` model, with the
//! invariant checker and the dead-page accounting verified after every batch.

use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use super::harness::{Harness, Model, Rng, add_events, config, key, random_batch, small_config};
use super::mem_io::MemPageIo;
use crate::page::PageId;
use crate::tree::Tree;
use crate::tree::TreeConfig;
use crate::tree::write::update::UpdateEvents;

fn run_model(
    seed: u64,
    node_size_bytes: u64,
    batches: usize,
    keyspace: u64,
    max_len: u64,
) -> Harness {
    let mut rng = Rng::new(seed);
    let mut h = Harness::new(small_config(node_size_bytes));
    for i in 0..batches {
        // Phases: grow, churn, then mostly delete, so the tree grows and shrinks.
        let delete_percent = match i * 4 / batches {
            0 => 5,
            1 => 40,
            _ => 97,
        };
        h.apply(random_batch(&mut rng, keyspace, max_len, delete_percent));
        h.assert_matches_model(&mut rng, 30);
        if i % 10 == 0 {
            h.assert_scans_match(&mut rng, 5);
        }
    }
    h.assert_scans_match(&mut rng, 20);
    h
}

/// A run of the model above where joining two child nodes ends in a
/// split: restoring the halves' buffers must not join children of one half
/// and leave it with a single pivot, and `fix_underfull` must look at the
/// pieces of a split again (else `check()` reports a non-root node
/// underfull).
#[test]
fn a_node_join_that_splits_leaves_no_underfull_piece() {
    let h = run_model(14, 512, 180, 6000, 400);
    assert!(h.max_height >= 3, "height only reached {}", h.max_height);
}

#[test]
fn model_small_nodes_grow_and_shrink() {
    let mut events = UpdateEvents::default();
    for seed in 1..=5 {
        let h = run_model(seed, 512, 180, 6000, 400);
        assert!(
            h.max_height >= 3,
            "seed {seed}: height only reached {}",
            h.max_height
        );
        add_events(&mut events, &h.events);
    }
    eprintln!("model runs: {events:?}");
    // Every path ran many times: cascading merges into deep levels, flushes
    // out of every height, splits and joins of leaves and nodes, root growth
    // and shrinking.
    assert!(
        events.level_inserts[..4].iter().all(|n| *n >= 10),
        "{events:?}"
    );
    assert!(
        events.flushes_by_height[1..4].iter().all(|n| *n >= 10),
        "{events:?}"
    );
    for n in [
        events.leaf_splits,
        events.node_splits,
        events.leaf_joins,
        events.node_joins,
    ] {
        assert!(n >= 5, "{events:?}");
    }
    // Root shrinking is exercised by `deleting_everything_empties_the_tree`.
    assert!(events.root_grows >= 6, "{events:?}");
    assert!(events.shared_segments_dropped >= 10, "{events:?}");
    // Large batches wrote their new leaves out before their end.
    assert!(events.spills >= 10, "{events:?}");
    // Merges into high buffer levels wrote their output as it filled.
    assert!(events.level_merge_writes >= 10, "{events:?}");
    // Merges read the unflushed spans of stored segments, not the flushed
    // items before them (reading from each pivot's lower bound read 18%
    // more here; 6% are items between spans, read to save an I/O).
    assert!(
        events.merge_read_item_bytes * 10 <= events.merge_unflushed_item_bytes * 11,
        "{events:?}"
    );
}

#[test]
fn model_larger_nodes_big_batches() {
    let h = run_model(7, 1024, 60, 20_000, 3000);
    assert!(h.max_height >= 2);
}

/// Batches large enough for merges to take the parallel path
/// (`merge::PARALLEL_MIN_ITEMS` items and more), which no other model test
/// reaches: their batches (at most 1,500 items) and 4 KiB leaves keep every
/// merge to a few hundred items. Leaves of 512 KiB hold about 15,000 of
/// these items, so flushes into leaves (a leaf's worth into a leaf,
/// tombstones dropped) and buffer merges (batches of 40,000 with a level,
/// tombstones kept) merge tens of thousands; with deletes, overwrites of
/// live keys and deletes of runs of them, at heights 1 and 2 (512-byte
/// nodes split the root).
#[test]
fn batches_large_enough_for_parallel_merges_match_the_model() {
    let tree_config = config(512, 512 << 10);
    // Threads of its own: the parallel path needs two at least, whatever
    // the machine's count.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    pool.install(|| {
        crate::tree::write::merge::PARALLEL_MERGES.with(|merges| merges.set([0; 2]));
        let mut h = Harness::new(tree_config);
        let mut rng = Rng::new(31);
        for step in 0..8u64 {
            let mut batch = BTreeMap::new();
            if step % 4 == 3 {
                // Deletes of a run of live keys (a tenth of them).
                let start = rng.below(h.model.len() as u64) as usize;
                for k in h.model.keys().skip(start).take(h.model.len() / 10) {
                    batch.insert(k.clone(), None);
                }
            }
            for _ in 0..40_000 {
                let k = key(rng.below(300_000));
                let v = (rng.below(100) >= 20)
                    .then(|| Bytes::from(vec![b'a' + (step % 26) as u8; rng.below(40) as usize]));
                batch.insert(k, v);
            }
            h.apply(batch.into_iter().collect());
            h.assert_matches_model(&mut rng, 300);
        }
        h.assert_scans_match(&mut rng, 10);
        assert!(h.max_height >= 2, "height only reached {}", h.max_height);
        let [kept, dropped] = crate::tree::write::merge::PARALLEL_MERGES.with(std::cell::Cell::get);
        assert!(
            kept >= 3 && dropped >= 3,
            "parallel merges: {kept} kept tombstones, {dropped} dropped them"
        );
    });
}

#[test]
fn deleting_everything_empties_the_tree() {
    let mut rng = Rng::new(11);
    let mut h = Harness::new(small_config(512));
    for chunk in (0..5000u64).collect::<Vec<_>>().chunks(500) {
        h.apply(
            chunk
                .iter()
                .map(|i| (key(*i), Some(Bytes::from(vec![7u8; 20]))))
                .collect(),
        );
    }
    assert!(h.max_height >= 3);
    let mut order: Vec<u64> = (0..5000).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for chunk in order.chunks(250) {
        let mut batch: Vec<(Bytes, Option<Bytes>)> =
            chunk.iter().map(|i| (key(*i), None)).collect();
        batch.sort();
        h.apply(batch);
        h.assert_matches_model(&mut rng, 20);
    }
    assert!(h.model.is_empty());
    // The deletes now sit as tombstones in buffers (within the buffer bound);
    // further batches push them down, where they meet their keys and vanish,
    // empty leaves join, and the root shrinks until the tree is empty.
    let mut filler = 100_000u64;
    let mut batches = 0;
    while h.root.is_some() {
        let batch: Vec<(Bytes, Option<Bytes>)> =
            (0..250).map(|i| (key(filler + i), None)).collect();
        filler += 250;
        h.apply(batch);
        batches += 1;
        assert!(
            batches < 400,
            "tree did not drain: {:?}",
            h.tree.check(h.root).unwrap()
        );
    }
    assert!(h.min_height_after_max == 0, "the root shrank to nothing");
    eprintln!("grow and delete everything: {:?}", h.events);
    assert!(
        h.events.root_shrinks >= 2 && h.events.leaf_joins >= 10 && h.events.node_joins >= 2,
        "{:?}",
        h.events
    );
    assert!(h.io.page_ids().is_empty(), "every page was reported dead");
}

#[test]
fn reopened_tree_reads_the_same() {
    let mut rng = Rng::new(5);
    let h = run_model(5, 512, 60, 6000, 300);
    // Drop every in-memory structure and cached byte; rebuild from the root id.
    h.io.drop_cache(false);
    let reopened = Harness {
        io: h.io.clone(),
        tree: Tree::new(h.io.clone(), *h.tree.config()),
        root: h.root,
        model: h.model.clone(),
        max_height: 0,
        min_height_after_max: 0,
        events: UpdateEvents::default(),
    };
    reopened.tree.check(reopened.root).unwrap();
    reopened.assert_matches_model(&mut rng, 300);
    reopened.assert_scans_match(&mut rng, 20);
}

#[test]
fn old_roots_stay_readable_until_freed() {
    let mut rng = Rng::new(9);
    let io = Arc::new(MemPageIo::default());
    let tree = Tree::new(io.clone(), small_config(512));
    let mut root = None;
    let mut model = Model::new();
    for _ in 0..20 {
        let batch = random_batch(&mut rng, 3000, 300, 20);
        let before = model.clone();
        let old_root = root;
        let outcome = tree.apply_batch(root, &batch).unwrap();
        for (k, v) in &batch {
            match v {
                Some(v) => model.insert(k.clone(), v.clone()),
                None => model.remove(k),
            };
        }
        // Copy-on-write: the old version is intact next to the new one.
        let old: Vec<(Bytes, Bytes)> = tree
            .scan(old_root, Bound::Unbounded, Bound::Unbounded, false)
            .map(Result::unwrap)
            .collect();
        assert!(
            old.iter().eq(before
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Vec<_>>()
                .iter())
        );
        let new_set: HashSet<PageId> = outcome.new_pages.iter().copied().collect();
        assert!(outcome.dead_pages.iter().all(|d| !new_set.contains(d)));
        io.free(&outcome.dead_pages);
        io.punch(&outcome.dead_ranges);
        root = outcome.root;
    }
}

#[test]
fn corrupt_pages_are_errors() {
    let mut rng = Rng::new(3);
    let mut h = Harness::new(small_config(512));
    for _ in 0..20 {
        h.apply(random_batch(&mut rng, 3000, 300, 10));
    }
    let root = h.root.unwrap();
    for id in h.io.page_ids() {
        let len = h.io.page_len(id);
        for offset in [0, len / 2, len - 1] {
            if h.io.is_punched(id, offset) {
                // Flushed chunks punched out of a segment: no reader
                // reads them, and on disk they are holes.
                continue;
            }
            h.io.corrupt(id, offset);
            let checked = h.tree.check(Some(root));
            assert!(
                matches!(checked, Err(crate::Error::Corruption { .. })),
                "flip at {offset} of {id:?}: {checked:?}"
            );
            if offset != len / 2 {
                // Header and last block: reads are right or an error, never
                // a wrong answer. Lookups and scans leave checksums to the
                // page store (`MemPageIo` models it): what they check
                // themselves must not turn its errors into answers.
                for k in h.model.keys().step_by(97) {
                    match h.tree.get_bytes(Some(root), k) {
                        Ok(v) => assert_eq!(v.as_ref(), h.model.get(k)),
                        Err(e) => assert!(matches!(e, crate::Error::Corruption { .. }), "{e}"),
                    }
                }
                let scanned: Result<Vec<_>, _> = h
                    .tree
                    .scan(Some(root), Bound::Unbounded, Bound::Unbounded, false)
                    .collect();
                if let Ok(pairs) = scanned {
                    assert!(pairs.iter().map(|(k, v)| (k, v)).eq(h.model.iter()));
                }
            }
            h.io.corrupt(id, offset); // flip back
        }
    }
    h.tree.check(Some(root)).unwrap();
}

#[test]
fn large_values_span_blocks() {
    let tree_config = config(4096, 2 * 1024 * 1024);
    let mut h = Harness::new(tree_config);
    let mut rng = Rng::new(4);
    for round in 0..6u64 {
        let batch: Vec<(Bytes, Option<Bytes>)> = (0..12u64)
            .map(|i| {
                let len = if i % 3 == 0 {
                    crate::options::MAX_INLINE_VALUE_BYTES
                } else {
                    rng.below(10_000) as usize
                };
                (
                    key(i * 10 + round),
                    Some(Bytes::from(vec![(i + round) as u8; len])),
                )
            })
            .collect();
        h.apply(batch);
    }
    h.assert_matches_model(&mut rng, 50);
    h.assert_scans_match(&mut rng, 5);
}

#[test]
fn realistic_page_sizes() {
    // 64 KiB leaves with 4088-byte blocks (the page store's block payload)
    // and 4 KiB nodes: height 2 with ~100 leaves.
    let tree_config = config(4096, 64 * 1024);
    let mut h = Harness::new(tree_config);
    let mut rng = Rng::new(77);
    for _ in 0..25 {
        let batch: BTreeMap<Bytes, Option<Bytes>> = (0..4000)
            .map(|_| {
                let k = key(rng.below(200_000));
                let v = (rng.below(10) > 0)
                    .then(|| Bytes::from(vec![b'v'; 60 + rng.below(80) as usize]));
                (k, v)
            })
            .collect();
        h.apply(batch.into_iter().collect());
    }
    let stats = h.tree.check(h.root).unwrap();
    eprintln!("realistic sizes: {stats:?}, {:?}", h.events);
    assert!(stats.height >= 2 && stats.leaf_pages >= 50, "{stats:?}");
    h.assert_matches_model(&mut rng, 500);
    h.assert_scans_match(&mut rng, 10);
}

#[test]
fn long_keys_with_long_common_prefixes() {
    // Separators cannot be short here: every key shares a 400-byte prefix.
    let tree_config = config(2048, 16 * 1024);
    let mut h = Harness::new(tree_config);
    let mut rng = Rng::new(8);
    let prefix = "p".repeat(400);
    for _ in 0..40 {
        let batch: BTreeMap<Bytes, Option<Bytes>> = (0..60)
            .map(|_| {
                let k = Bytes::from(format!("{prefix}{:06}", rng.below(5000)));
                (k, (rng.below(5) > 0).then(|| Bytes::from(vec![3u8; 50])))
            })
            .collect();
        h.apply(batch.into_iter().collect());
    }
    assert!(h.max_height >= 2, "height {}", h.max_height);
    let keys: Vec<Bytes> = h.model.keys().cloned().collect();
    for k in keys.iter().step_by(5) {
        assert_eq!(
            h.tree.get_bytes(h.root, k).unwrap(),
            h.model.get(k).cloned()
        );
    }
    h.assert_scans_match(&mut rng, 5);
}

/// A root split whose left half ends with a small leaf: the split joins
/// that leaf with its left neighbour (it pairs leftwards once it is last),
/// which leaves the half one pivot, under a node's minimum. The new root
/// joins it with its sibling again.
#[test]
fn a_root_split_leaves_no_half_too_small() {
    let config = small_config(512);
    let mut h = Harness::new(config);
    // Separators of 85 bytes make three leaves' pivots almost overflow a
    // 512-byte node; a fourth leaf splits it after the second pivot.
    let long_key = |last: u8| {
        let mut k = vec![b'p'; 84];
        k.push(last);
        Bytes::from(k)
    };
    let huge = |key: &Bytes| {
        let overhead =
            crate::tree::format::item_layout::ItemLayout::CURRENT.item_len(key.len(), Some(0));
        Some(Bytes::from(vec![
            7u8;
            config.max_item_bytes() - overhead - 64
        ]))
    };
    let (p0, p1, p2) = (long_key(b'0'), long_key(b'1'), long_key(b'2'));
    let small = Some(Bytes::from(vec![1u8; 30]));
    // A small leaf between two it cannot join.
    h.apply(vec![
        (p0.clone(), huge(&p0)),
        (p1, small),
        (p2.clone(), huge(&p2)),
    ]);
    // Its left neighbour shrinks (tombstones of absent keys push the
    // overwrite through the buffer); it still pairs with its right one.
    let mut shrink: Vec<_> = (0..400)
        .map(|i| (Bytes::from(format!("a{i:04}")), None))
        .collect();
    shrink.push((p0, Some(Bytes::from(vec![2u8; 1400]))));
    h.apply(shrink);
    let (r, s) = (Bytes::from_static(b"r"), Bytes::from_static(b"s"));
    h.apply(vec![(r.clone(), huge(&r)), (s.clone(), huge(&s))]);
    let mut rng = Rng::new(3);
    h.assert_matches_model(&mut rng, 10);
}

/// The key limit of each node size: four pivots with keys of that length
/// fit a node page; 4 KiB and larger nodes take `MAX_STORED_KEY_BYTES`.
#[test]
fn four_pivots_of_the_longest_key_fit_a_node() {
    for shift in 9..=16 {
        let config = small_config(1 << shift);
        let max_key_bytes = config.max_key_bytes();
        assert_eq!(
            max_key_bytes == crate::key::MAX_STORED_KEY_BYTES,
            shift >= 12,
            "{shift}"
        );
        let pivots = (0..4u8)
            .map(|i| crate::tree::format::node::Pivot {
                lower: if i == 0 {
                    Bytes::new()
                } else {
                    Bytes::from(vec![i; max_key_bytes])
                },
                child: crate::tree::format::node::Child::Leaf(
                    crate::tree::format::node::LeafData::Stored(
                        crate::tree::format::node::LeafRef {
                            id: PageId::from_raw(1),
                            head_len: 0,
                            filter_len: 0,
                        },
                    ),
                ),
                pending_bytes: 0,
            })
            .collect();
        let node = crate::tree::format::node::Node {
            height: 1,
            pivots,
            segments: Vec::new(),
            range_lo: Bytes::new(),
            range_hi: None,
            page: None,
        };
        assert!(node.encoded_len() <= config.node_max_bytes, "{shift}");
    }
}

/// Keys at the node size's limit that differ only in their last bytes (so
/// every pivot is as long as the limit): the tree grows, splits and checks
/// out with the smallest node pages.
#[test]
fn keys_at_the_node_limit_build_a_healthy_tree() {
    let config = small_config(512);
    let mut h = Harness::new(config);
    let long_key = |i: u64| {
        let mut k = vec![b'p'; config.max_key_bytes() - 7];
        k.extend_from_slice(&key(i)[1..]);
        Bytes::from(k)
    };
    let mut rng = Rng::new(7);
    for _ in 0..40 {
        let mut batch: Vec<_> = (0..60)
            .map(|_| {
                let i = rng.below(3_000);
                (
                    long_key(i),
                    Some(Bytes::from(vec![b'v'; rng.below(200) as usize])),
                )
            })
            .collect();
        batch.sort_by(|a, b| a.0.cmp(&b.0));
        batch.dedup_by(|a, b| a.0 == b.0);
        h.apply(batch);
    }
    assert!(h.max_height >= 3, "height {}", h.max_height);
    h.assert_matches_model(&mut rng, 10);
    h.assert_scans_match(&mut rng, 5);
}

#[test]
fn items_up_to_the_leaf_limit_fit() {
    let default = config(4096, 2 << 20);
    assert!(
        default.max_item_bytes()
            >= 7 + crate::MAX_KEY_SIZE + crate::options::MAX_INLINE_VALUE_BYTES
    );
    for config in [small_config(512), default] {
        let mut h = Harness::new(config);
        let max = config.max_item_bytes();
        let value_len = max - 7 - 8;
        let batch = vec![
            (key(1), Some(Bytes::from(vec![1u8; value_len]))),
            (key(2), Some(Bytes::from(vec![2u8; 10]))),
            (key(3), Some(Bytes::from(vec![3u8; value_len]))),
        ];
        h.apply(batch);
        let mut rng = Rng::new(1);
        h.assert_matches_model(&mut rng, 10);
        h.assert_scans_match(&mut rng, 3);
    }
}

/// A short scan waits on no read once its window is open: the window's
/// first read covers the leaf's readahead and, in every segment on the
/// path, the chunks that hold keys within its reach, instead of each
/// segment's first chunk only (a scan crossing into a segment's next chunk
/// then read it on its own, one more disk latency out of cache).
#[test]
fn short_scans_read_each_window_at_once() {
    let mut rng = Rng::new(23);
    let mut h = Harness::new(small_config(512));
    // No deletes: a scan steps over tombstones without emitting them, so
    // a short scan could reach beyond any readahead.
    for _ in 0..60 {
        h.apply(random_batch(&mut rng, 6000, 400, 0));
    }
    assert!(h.max_height >= 2, "height {}", h.max_height);
    h.io.track_prefetches();
    let mut scans = 0;
    for reverse in [false, true] {
        for _ in 0..300 {
            let at = key(rng.below(6000));
            let (lower, upper) = if reverse {
                (Bound::Unbounded, Bound::Included(at.clone()))
            } else {
                (Bound::Included(at.clone()), Bound::Unbounded)
            };
            // 12 records: at most 4 of a segment's chunks of 256 bytes,
            // the most a window reads ahead in one segment.
            let got: Vec<(Bytes, Bytes)> = h
                .tree
                .scan(h.root, lower.clone(), upper.clone(), reverse)
                .take(12)
                .map(Result::unwrap)
                .collect();
            let range = h.model.range((lower, upper));
            let want: Vec<(Bytes, Bytes)> = if reverse {
                range
                    .rev()
                    .take(12)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            } else {
                range
                    .take(12)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            };
            assert_eq!(got, want, "scan from {at:?}, reverse {reverse}");
            scans += 1;
        }
    }
    assert_eq!(h.io.reads_not_prefetched(), 0, "over {scans} scans");
}

/// Keys of 300 to 500 bytes, so that a node holds a handful of pivots and
/// one pivot is a large share of a node: splits and joins of nodes must
/// still leave every non-root node at least at its minimum, and end.
#[test]
fn long_keys_grow_and_shrink() {
    let tree_config = config(4096, 16 * 1024);
    let mut events = UpdateEvents::default();
    for seed in 1..=2 {
        let mut h = Harness::new(tree_config);
        let mut rng = Rng::new(seed);
        let batches = 300;
        for i in 0..batches {
            let delete_percent = if i * 4 < batches { 10 } else { 97 };
            let batch: BTreeMap<Bytes, Option<Bytes>> = (0..150)
                .map(|_| {
                    let n = rng.below(12_000);
                    // The length depends on the key, so a key's versions agree.
                    let pad = "q".repeat(300 + (n as usize * 7919) % 200);
                    let k = Bytes::from(format!("{n:05}{pad}"));
                    let put = rng.below(100) >= delete_percent;
                    (k, put.then(|| Bytes::from(vec![5u8; 60])))
                })
                .collect();
            h.apply(batch.into_iter().collect());
        }
        h.assert_scans_match(&mut rng, 5);
        add_events(&mut events, &h.events);
    }
    eprintln!("long keys: {events:?}");
    assert!(
        events.node_splits >= 5 && events.node_joins >= 3,
        "{events:?}"
    );
}

/// Values of most of a 4 KiB leaf beside small ones: a leaf cut could leave
/// a small part before a huge item, next to a leaf it would fit with, which
/// `check()` reports. Two batches into an empty tree are enough.
#[test]
fn cuts_leave_no_small_leaf_that_could_join_its_neighbour() {
    fn batch(spec: &[(u32, char)]) -> Vec<(Bytes, Option<Bytes>)> {
        spec.iter()
            .map(|&(k, c)| {
                let value = match c {
                    'D' => None,
                    'H' => Some(Bytes::from(vec![b'H'; 3000])),
                    _ => Some(Bytes::from(vec![b's'; 50])),
                };
                (Bytes::from(format!("k{k:03}")), value)
            })
            .collect()
    }
    let batches = [
        batch(&[
            (6, 'D'),
            (8, 'S'),
            (16, 'S'),
            (19, 'D'),
            (21, 'S'),
            (24, 'H'),
            (41, 'D'),
            (51, 'S'),
            (55, 'S'),
            (62, 'S'),
            (65, 'S'),
            (68, 'S'),
            (72, 'D'),
            (76, 'S'),
            (84, 'S'),
            (85, 'D'),
            (86, 'S'),
            (92, 'S'),
            (95, 'D'),
            (96, 'S'),
            (97, 'S'),
            (104, 'H'),
            (116, 'D'),
            (130, 'S'),
            (134, 'S'),
            (136, 'S'),
            (146, 'S'),
        ]),
        batch(&[
            (5, 'H'),
            (6, 'S'),
            (11, 'S'),
            (13, 'S'),
            (15, 'D'),
            (17, 'S'),
            (19, 'S'),
            (26, 'S'),
            (28, 'S'),
            (35, 'S'),
            (45, 'S'),
            (48, 'H'),
            (57, 'H'),
            (59, 'S'),
            (62, 'S'),
            (64, 'D'),
            (66, 'S'),
            (70, 'D'),
            (74, 'S'),
            (80, 'D'),
            (82, 'D'),
            (88, 'S'),
            (101, 'S'),
            (109, 'S'),
            (113, 'H'),
            (116, 'S'),
            (117, 'S'),
            (119, 'S'),
            (127, 'S'),
            (131, 'S'),
            (139, 'D'),
            (144, 'S'),
            (146, 'S'),
        ]),
    ];
    let tree = Tree::new(Arc::new(MemPageIo::default()), small_config(2048));
    let mut root = None;
    for b in &batches {
        root = tree.apply_batch(root, b).unwrap().root;
        tree.check(root).unwrap();
    }
}

/// The update's memory estimate follows the budget at open through the
/// spill size: 13 pages of 2 MiB for the out-of-cache benchmark's 427 MiB
/// budget (the 78 MiB `docs/tuning.md` quotes), and never below two pages'
/// worth.
#[test]
fn the_update_memory_estimate_is_three_spills() {
    let config = |budget_bytes: u64| TreeConfig::new(4096, 2 << 20, 10, budget_bytes);
    let bench = config(447_392_426);
    assert_eq!(bench.spill_after_new_pages, 13);
    let mib = bench.update_memory_estimate_bytes() as f64 / (1u64 << 20) as f64;
    assert!((77.0..=78.0).contains(&mib), "{mib} MiB");
    let tiny = config(4 << 20);
    assert_eq!(
        tiny.update_memory_estimate_bytes(),
        3 * 2 * tiny.leaf_max_bytes as u64
    );
}
