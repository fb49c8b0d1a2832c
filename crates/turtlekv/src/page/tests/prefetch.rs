//! Prefetch reads uncached ranges into the cache together; the reads that
//! follow are served from memory, and a damaged block is still reported.

use std::path::Path;

use super::harness::{DIR, Version, leaf_bytes, open, record, small_options};
use crate::Error;
use crate::io::FaultFs;
use crate::page::open::PAGE_FILE_NAMES;
use crate::page::{CachePriority, PageIo, PageRange};

/// A committed store with three 60 KB leaves, reopened so nothing is cached.
fn cold_store(fs: &FaultFs) -> (crate::page::PageStore, Version) {
    let (store, _) = open(fs, &small_options()).unwrap();
    let leaves = (0..3)
        .map(|s| Version::new_leaf(&store, s, 60_000).unwrap())
        .collect();
    let v = Version::write(&store, leaves).unwrap();
    store.commit(record(Some(v.root), 1), &[]).unwrap();
    drop(store);
    (open(fs, &small_options()).unwrap().0, v)
}

#[test]
fn prefetched_ranges_are_then_read_from_the_cache() {
    let fs = FaultFs::new();
    let (store, v) = cold_store(&fs);
    // One block-sized range in each leaf, and two in the first.
    let ranges: Vec<PageRange> = v
        .leaves
        .iter()
        .map(|l| (l.0, 20_000, 4000))
        .chain([(v.leaves[0].0, 50_000, 5000)])
        .collect();
    let before = store.stats();
    store.prefetch(&ranges, CachePriority::LeafBlock).unwrap();
    let after_prefetch = store.stats();
    // Each range is one run of blocks, so one read each.
    assert_eq!(after_prefetch.read_ios - before.read_ios, 4);
    for &(id, offset, len) in &ranges {
        let seed = v.leaves.iter().find(|l| l.0 == id).unwrap().1;
        let got = store
            .read_range(id, offset, len, CachePriority::LeafBlock)
            .unwrap();
        let want = &leaf_bytes(seed, 60_000)[offset as usize..(offset + len) as usize];
        assert_eq!(got, want);
    }
    let after_reads = store.stats();
    assert_eq!(after_reads.read_ios, after_prefetch.read_ios);
    assert_eq!(after_reads.cache_hits, after_prefetch.cache_hits + 4);
    // Everything is cached now: a second prefetch reads nothing.
    store.prefetch(&ranges, CachePriority::LeafBlock).unwrap();
    assert_eq!(store.stats().read_ios, after_reads.read_ios);
    store.cache.check().unwrap();
}

#[test]
fn a_single_range_is_read_ahead_in_one_io() {
    let fs = FaultFs::new();
    let (store, v) = cold_store(&fs);
    let before = store.stats().read_ios;
    // Four blocks' worth, as a scan's leaf readahead asks.
    let range = (v.leaves[1].0, 10_000, 16_384);
    store.prefetch(&[range], CachePriority::LeafBlock).unwrap();
    assert_eq!(store.stats().read_ios, before + 1);
    for offset in [10_000, 14_000, 18_000, 26_000] {
        store
            .read_range(v.leaves[1].0, offset, 300, CachePriority::LeafBlock)
            .unwrap();
    }
    assert_eq!(store.stats().read_ios, before + 1);
}

#[test]
fn a_damaged_block_fails_the_prefetch_and_is_not_cached() {
    let fs = FaultFs::new();
    let (store, v) = cold_store(&fs);
    let bad = v.leaves[2].0;
    let path = Path::new(DIR).join(PAGE_FILE_NAMES[1]);
    // Bit 100 of the leaf's second block (block 0 is header + first bytes).
    let bit = (bad.slot() * 65536 + 4096) * 8 + 100;
    fs.flip_bit(&path, bit).unwrap();
    let ranges = [(v.leaves[0].0, 5000, 100), (bad, 5000, 100)];
    let err = store
        .prefetch(&ranges, CachePriority::LeafBlock)
        .unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err:?}");
    // The caller's own read reports the same, every time.
    for _ in 0..2 {
        let err = store
            .read_range(bad, 5000, 100, CachePriority::LeafBlock)
            .unwrap_err();
        assert!(matches!(err, Error::Corruption { .. }), "{err:?}");
    }
    fs.flip_bit(&path, bit).unwrap();
    assert!(
        store
            .read_range(bad, 5000, 100, CachePriority::LeafBlock)
            .is_ok()
    );
}
