//! Counts the reads of point lookups on an uncached tree.

use bytes::Bytes;

use super::harness::{Harness, Rng, key, random_batch, small_config};
use crate::tree::TreeConfig;

/// A tree of height >= 3 with non-empty buffers at every level.
fn tall_tree(filter_bits_per_key: u32) -> Harness {
    let mut rng = Rng::new(21);
    let config = TreeConfig {
        filter_bits_per_key,
        ..small_config(512)
    };
    let mut h = Harness::new(config);
    for chunk in (0..12_000u64).collect::<Vec<_>>().chunks(600) {
        h.apply(
            chunk
                .iter()
                .map(|i| (key(i * 2), Some(Bytes::from(vec![1u8; 16]))))
                .collect(),
        );
    }
    for _ in 0..30 {
        // Only even keys: odd keys stay absent.
        let batch = random_batch(&mut rng, 12_000, 200, 0)
            .into_iter()
            .map(|(k, v)| {
                let n: u64 = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
                (key(n * 2), v)
            });
        let mut batch: Vec<_> = batch.collect();
        batch.sort();
        batch.dedup_by(|a, b| a.0 == b.0);
        h.apply(batch);
    }
    h
}

/// Repeated lookups ask the page cache only for the root's node index:
/// child node indexes, filters and leaf heads come from the memos of the
/// node indexes above them (`tree::memo`). Once the cache lets objects
/// go, the memos keep nothing alive: lookups ask the cache again, read
/// what it no longer has, and still answer right.
#[test]
fn repeated_lookups_ask_the_cache_only_for_the_root() {
    use crate::page::ObjectKind;
    let h = tall_tree(10);
    let present: Vec<Bytes> = h.model.keys().step_by(13).cloned().collect();
    let absent: Vec<Bytes> = (0..500u64).map(|i| key(i * 2 + 1)).collect();
    let lookup_all = || {
        for k in &present {
            assert_eq!(
                h.tree.get_bytes(h.root, k).unwrap(),
                h.model.get(k).cloned()
            );
        }
        for k in &absent {
            assert_eq!(h.tree.get_bytes(h.root, k).unwrap(), None);
        }
    };
    // A first visit may read on a miss; the next finds the cached object
    // and remembers it.
    lookup_all();
    lookup_all();
    h.io.take_object_lookups();
    lookup_all();
    let lookups = (present.len() + absent.len()) as u64;
    assert_eq!(
        h.io.take_object_lookups(),
        lookups,
        "one per lookup: the root"
    );
    // A stored version remembers its root too: then nothing is asked.
    let root_memo = crate::tree::RootMemo::default();
    for k in &present {
        let value = h.tree.get_with_root_memo(h.root, &root_memo, k).unwrap();
        assert_eq!(
            value,
            h.model.get(k).cloned().map(crate::values::Value::Inline)
        );
    }
    assert_eq!(h.io.take_object_lookups(), 1, "the root, once");

    h.io.drop_objects(ObjectKind::LeafHead);
    h.io.drop_objects(ObjectKind::Filter);
    h.io.reset_misses();
    lookup_all();
    let misses = h.io.misses();
    assert!(
        misses.filters > 0 && misses.leaf_heads > 0,
        "the memos kept objects the cache dropped: {misses:?}"
    );
    assert!(h.io.take_object_lookups() > lookups);
}

/// An object the cache refused is not remembered: its memo would stay
/// empty for good once the copy died. After the cache takes objects
/// again, lookups remember what it holds and ask it only for the root.
#[test]
fn memos_remember_only_objects_the_cache_holds() {
    use crate::page::ObjectKind;
    let h = tall_tree(10);
    let keys: Vec<Bytes> = h.model.keys().step_by(11).cloned().collect();
    let lookup_all = || {
        for k in &keys {
            assert_eq!(
                h.tree.get_bytes(h.root, k).unwrap(),
                h.model.get(k).cloned()
            );
        }
    };
    h.io.drop_cache(false);
    // Node indexes are cached (with empty memos), heads and filters not.
    h.io.refuse_objects(&[ObjectKind::LeafHead, ObjectKind::Filter]);
    lookup_all();
    h.io.refuse_objects(&[]);
    // The first gets cache what they read, the next find and remember it.
    lookup_all();
    lookup_all();
    h.io.take_object_lookups();
    lookup_all();
    assert_eq!(h.io.take_object_lookups(), keys.len() as u64);
}

/// Scans reach leaf heads and child node indexes through the same memos:
/// a repeated full scan asks the page cache for each window's root index
/// only, and returns every record, as the first did.
#[test]
fn repeated_scans_ask_the_cache_only_for_each_windows_root() {
    use crate::page::ObjectKind;
    use std::ops::Bound;
    let h = tall_tree(10);
    let scan_all = || -> Vec<(Bytes, Bytes)> {
        h.tree
            .scan(h.root, Bound::Unbounded, Bound::Unbounded, false)
            .map(Result::unwrap)
            .collect()
    };
    let first = scan_all();
    let expected: Vec<(Bytes, Bytes)> = h
        .model
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(first, expected);
    // As for gets: heads first read on a miss are remembered next time.
    assert_eq!(scan_all(), expected);
    h.io.take_object_lookups();
    assert_eq!(scan_all(), expected);
    let second = h.io.take_object_lookups_by_kind();
    let windows = second.get(&ObjectKind::NodeIndex).copied().unwrap_or(0);
    let leaves = h.tree.check(h.root).unwrap().leaf_pages;
    assert!(
        windows > 0 && windows <= leaves,
        "{windows} windows, {leaves} leaves"
    );
    assert_eq!(
        second.len(),
        1,
        "heads and filters through memos: {second:?}"
    );
}

/// Returns (lookups over height + 2 reads, present-key lookups).
fn count_point_lookup_reads(filter_bits_per_key: u32) -> (u64, u64) {
    let h = tall_tree(filter_bits_per_key);
    let height = u64::from(h.tree.check(h.root).unwrap().height);
    assert!(height >= 3, "height {height}");
    // Warm the filters (the cache keeps them at high priority), then drop
    // everything else: nodes, leaf heads and leaf blocks are all misses.
    for k in h.model.keys() {
        h.tree.get_bytes(h.root, k).unwrap();
    }
    h.io.drop_cache(true);
    let (mut worst, mut total, mut filter_misses, mut over) = (0, 0, 0, 0);
    crate::tree::read::get::FILTER_FALSE_POSITIVES.with(|c| c.set(0));
    for k in h.model.keys().step_by(7) {
        h.io.drop_cache(true);
        h.io.reset_misses();
        assert!(h.tree.get_bytes(h.root, k).unwrap().is_some());
        let m = h.io.misses();
        let reads = m.node_pages + m.leaf_heads + m.leaf_blocks + m.whole_leaves;
        filter_misses += m.filters;
        let false_positives = crate::tree::read::get::FILTER_FALSE_POSITIVES.with(|c| c.replace(0));
        // Only a filter false positive adds reads beyond the path.
        assert!(
            reads <= height + 2 + 2 * false_positives,
            "{m:?} with {false_positives} false positives"
        );
        over += u64::from(reads > height + 2);
        worst = worst.max(reads);
        total += reads;
    }
    let lookups = h.model.len().div_ceil(7) as u64;
    eprintln!(
        "{filter_bits_per_key} filter bits/key, height {height}: present keys: worst {worst} reads, mean {:.2}, {over} of {lookups} over height + 2",
        total as f64 / lookups as f64
    );
    assert_eq!(filter_misses, 0);

    // Absent keys: filters reject, so no leaf head or block is read, except
    // for the filters' false positives.
    let (mut leaf_reads, mut lookups_with_leaf_reads) = (0, 0);
    let absent = 3000;
    for i in 0..absent {
        h.io.drop_cache(true);
        h.io.reset_misses();
        let k = key(i * 8 + 1);
        assert!(h.tree.get_bytes(h.root, &k).unwrap().is_none());
        let m = h.io.misses();
        assert!(m.node_pages <= height);
        let reads = m.leaf_heads + m.leaf_blocks + m.whole_leaves;
        leaf_reads += reads;
        lookups_with_leaf_reads += u64::from(reads > 0);
    }
    eprintln!(
        "absent keys: {lookups_with_leaf_reads} of {absent} lookups read a leaf ({leaf_reads} reads)"
    );
    assert!(
        lookups_with_leaf_reads * 100 <= absent * 3,
        "{lookups_with_leaf_reads} of {absent} absent lookups read leaves"
    );
    (over, lookups)
}

#[test]
fn point_lookups_read_at_most_height_plus_two_blocks() {
    // Every lookup reads at most its nodes, one leaf head and one leaf block,
    // plus a head and block per filter false positive (checked per lookup).
    // 16-bit fingerprints: false positives are ~1 in 65,000 probes.
    let (over, lookups) = count_point_lookup_reads(16);
    assert!(
        over * 500 <= lookups,
        "{over} of {lookups} lookups over height + 2"
    );
    // The default 8-bit fingerprints: a false positive (~0.4% per segment
    // probed) costs one more head and block.
    let (over, lookups) = count_point_lookup_reads(10);
    assert!(
        over * 100 <= lookups * 4,
        "{over} of {lookups} lookups over height + 2"
    );
}

#[test]
fn scans_read_about_one_block_per_block_of_items() {
    let h = tall_tree(10);
    h.io.drop_cache(false);
    h.io.reset_misses();
    let from = h.model.keys().nth(h.model.len() / 3).unwrap().clone();
    let items: Vec<_> = h
        .tree
        .scan(
            h.root,
            std::ops::Bound::Included(from),
            std::ops::Bound::Unbounded,
            false,
        )
        .take(2000)
        .map(Result::unwrap)
        .collect();
    assert_eq!(items.len(), 2000);
    let m = h.io.misses();
    // 2000 items of ~33 bytes fill ~300 blocks of 256 bytes in leaves; buffer
    // segments on the path add their own blocks and heads.
    eprintln!("scan of 2000 items: {m:?}");
    assert!(m.leaf_blocks < 700, "{m:?}");
    assert_eq!(m.whole_leaves, 0);
}

/// A scan whose range ends within its leaf window plans no next window: a
/// range ending at a leaf's last key must not descend again and read the
/// next leaf's head and its segments' first chunks, nor fail when that
/// leaf, outside the range, is damaged.
#[test]
fn a_scan_ending_within_its_window_opens_no_other() {
    use std::ops::Bound::Included;
    let h = tall_tree(10);
    for k in h.model.keys().step_by(37) {
        for reverse in [false, true] {
            let mut cursor = h
                .tree
                .scan(h.root, Included(k.clone()), Included(k.clone()), reverse);
            let (found, _) = cursor.next().unwrap().unwrap();
            assert_eq!(&found, k);
            assert_eq!(cursor.next_window, None, "{k:?} reverse {reverse}");
            assert!(cursor.next().is_none());
        }
    }
}
