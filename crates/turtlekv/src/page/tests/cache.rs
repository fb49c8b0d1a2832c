//! The cache: byte budget under concurrent readers and resizing, priorities,
//! counters.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use super::harness::{Version, commit, leaf_bytes, list_children, open, small_options};
use crate::io::FaultFs;
use crate::page::cache::{CacheKey, ENTRY_OVERHEAD_BYTES, PageCache, WHOLE_PAGE};
use crate::page::{CachePriority, PageIo, PageStoreOptions};

fn key(page: u64) -> CacheKey {
    CacheKey {
        page,
        part: WHOLE_PAGE,
    }
}

#[test]
fn higher_priorities_outlive_a_flood_of_leaf_blocks() {
    let entry_bytes = 1000;
    let charge = entry_bytes + ENTRY_OVERHEAD_BYTES;
    let cache = PageCache::new(100 * charge);
    let insert =
        |page: u64, priority| cache.insert(key(page), Bytes::from(vec![1u8; 1000]), priority);
    for page in 0..20 {
        insert(page, CachePriority::Node);
        insert(1000 + page, CachePriority::LeafBlock);
    }
    for page in 2000..2060 {
        insert(page, CachePriority::LeafHead);
    }
    assert_eq!(cache.counts().entries, 100);
    // A scan's worth of new leaf blocks, as large as the whole cache.
    for page in 3000..3100 {
        insert(page, CachePriority::LeafBlock);
        assert!(cache.counts().used_bytes <= 100 * charge);
    }
    let survivors =
        |pages: std::ops::Range<u64>| pages.filter(|&p| cache.get(key(p)).is_some()).count();
    assert_eq!(survivors(0..20), 20, "nodes were evicted by leaf blocks");
    assert_eq!(
        survivors(1000..1020),
        0,
        "old leaf blocks outlived the scan"
    );
    let counts = cache.counts();
    assert_eq!((counts.evictions, counts.entries), (100, 100));
    cache.check().unwrap();
    // Entries larger than the budget are simply not cached.
    cache.insert(
        key(5000),
        Bytes::from(vec![0u8; 200_000]),
        CachePriority::Node,
    );
    assert!(cache.get(key(5000)).is_none());
    cache.set_capacity(10 * charge);
    assert!(cache.counts().used_bytes <= 10 * charge);
    cache.check().unwrap();
}

#[test]
fn metadata_within_its_share_outlives_churning_blocks_that_are_read_twice() {
    let charge = 1000 + ENTRY_OVERHEAD_BYTES;
    let cache = PageCache::new(100 * charge);
    let insert =
        |page: u64, priority| cache.insert(key(page), Bytes::from(vec![1u8; 1000]), priority);
    for page in 0..20 {
        insert(page, CachePriority::Filter);
    }
    for page in 20..25 {
        insert(page, CachePriority::LeafHead);
    }
    // Blocks that miss and are then hit once more, far more of them than
    // fit: the CLOCK hand laps the cache many times. Before metadata was
    // protected, every head and filter went within a few laps.
    for page in 1000..3000 {
        insert(page, CachePriority::LeafBlock);
        assert!(cache.get(key(page)).is_some());
        assert!(cache.counts().used_bytes <= 100 * charge);
    }
    let survivors = (0..25).filter(|&p| cache.get(key(p)).is_some()).count();
    assert_eq!(survivors, 25, "heads and filters were evicted by blocks");
    let counts = cache.counts();
    assert_eq!(counts.bytes_by_level[1..], [5 * charge, 20 * charge, 0]);
    assert_eq!(counts.bytes_by_level[0], 75 * charge);
    cache.check().unwrap();
}

#[test]
fn metadata_beyond_its_share_or_alone_is_evicted() {
    let charge = 1000 + ENTRY_OVERHEAD_BYTES;
    let cache = PageCache::new(100 * charge);
    // More filters than fit: CLOCK evicts among them, within budget.
    for page in 0..300 {
        cache.insert(
            key(page),
            Bytes::from(vec![1u8; 1000]),
            CachePriority::Filter,
        );
        assert!(cache.counts().used_bytes <= 100 * charge);
    }
    assert_eq!(cache.counts().entries, 100);
    cache.check().unwrap();
    // Within its share but with no block to evict instead, metadata makes
    // room for an entry that needs it.
    for page in 0..60 {
        cache.remove(key(page));
    }
    let big = 80 * charge - ENTRY_OVERHEAD_BYTES;
    cache.insert(
        key(9000),
        Bytes::from(vec![2u8; big as usize]),
        CachePriority::LeafBlock,
    );
    assert!(cache.get(key(9000)).is_some());
    assert!(cache.counts().used_bytes <= 100 * charge);
    cache.check().unwrap();
}

#[test]
fn budget_holds_under_concurrent_readers_and_resizing() {
    let fs = FaultFs::new();
    let options = PageStoreOptions {
        cache_capacity_bytes: 256 * 1024,
        ..small_options()
    };
    let (store, _) = open(&fs, &options).unwrap();
    let leaves: Vec<_> = (0..24)
        .map(|s| Version::new_leaf(&store, s, 20_000 + 1500 * s as usize).unwrap())
        .collect();
    let v = Version::write(&store, leaves).unwrap();
    commit(&store, Some(v.root), &[]).unwrap();
    let store = Arc::new(store);
    let done = Arc::new(AtomicBool::new(false));
    let monitor = {
        let (store, done) = (store.clone(), done.clone());
        std::thread::spawn(move || {
            let mut samples = 0u64;
            while !done.load(Ordering::Relaxed) {
                let s = store.stats();
                assert!(
                    s.cache_used_bytes <= s.cache_capacity_bytes.max(256 * 1024),
                    "{s:?}"
                );
                samples += 1;
                std::thread::yield_now();
            }
            samples
        })
    };
    let readers: Vec<_> = (0..4u64)
        .map(|t| {
            let (store, v) = (store.clone(), v.clone());
            std::thread::spawn(move || {
                let _pin = store.pin();
                let mut x = t + 1;
                for i in 0..3000u64 {
                    x = x
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    let (id, seed, len) = v.leaves[(x >> 33) as usize % v.leaves.len()];
                    let offset = (x >> 7) % (len as u64 - 100);
                    let priority = if i % 3 == 0 {
                        CachePriority::LeafHead
                    } else {
                        CachePriority::LeafBlock
                    };
                    let got = store.read_range(id, offset, 100, priority).unwrap();
                    let o = offset as usize;
                    assert_eq!(&got[..], &leaf_bytes(seed, len)[o..o + 100]);
                    if i % 500 == 0 && t == 0 {
                        // Shrink below the other readers' working set, then grow back.
                        store.set_cache_capacity(if i % 1000 == 0 {
                            64 * 1024
                        } else {
                            256 * 1024
                        });
                    }
                }
            })
        })
        .collect();
    for r in readers {
        r.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    assert!(monitor.join().unwrap() > 0);
    let s = store.stats();
    eprintln!(
        "4 readers x 3000 range reads over {} KiB of leaves, cache 64-256 KiB: \
         hit ratio {:.2}, {} evictions, {} KiB read, used {} of {} bytes",
        v.leaves.iter().map(|l| l.2).sum::<usize>() / 1024,
        s.cache_hits as f64 / (s.cache_hits + s.cache_misses) as f64,
        s.cache_evictions,
        s.bytes_read / 1024,
        s.cache_used_bytes,
        s.cache_capacity_bytes
    );
    assert!(s.cache_used_bytes <= s.cache_capacity_bytes);
    assert_eq!(s.cache_hits + s.cache_misses, 4 * 3000, "{s:?}");
    assert!(
        s.cache_hits > 1000 && s.cache_misses > 100 && s.cache_evictions > 0,
        "{s:?}"
    );
    store.check(&store.pin(), &list_children).unwrap();
}

#[test]
fn the_ghost_list_recalls_recent_evictions_but_not_freed_pages() {
    let charge = 1000 + ENTRY_OVERHEAD_BYTES;
    let cache = PageCache::new(10 * charge);
    cache.set_ghost_window_bytes(5 * charge);
    let insert = |page: u64| {
        cache.insert(
            key(page),
            Bytes::from(vec![1u8; 1000]),
            CachePriority::LeafBlock,
        )
    };
    for page in 0..20 {
        insert(page);
    }
    let evicted: Vec<u64> = (0..20).filter(|&p| cache.get(key(p)).is_none()).collect();
    assert_eq!(evicted.len(), 10);
    // The ghost covers the last five evictions (five entries' charge).
    let recalled: Vec<u64> = evicted
        .iter()
        .copied()
        .filter(|&p| cache.recall_evicted(key(p)))
        .collect();
    assert_eq!(recalled.len(), 5, "{recalled:?} of {evicted:?}");
    assert_eq!(cache.counts().ghost_recalls, 5);
    // A freed page leaves the ghost: a new page under its id is no recall.
    insert(100);
    insert(101);
    let gone = (0..20)
        .chain([100, 101])
        .find(|&p| cache.get(key(p)).is_none() && !recalled.contains(&p) && !evicted.contains(&p))
        .expect("inserting two pages evicted two more");
    cache.remove(key(gone));
    assert!(!cache.recall_evicted(key(gone)));
    assert_eq!(cache.counts().ghost_recalls, 5);
}

/// A new store on a fault-free file system whose cache of
/// `cache_capacity_bytes` takes leaves as they are written.
fn store_caching_written_leaves(cache_capacity_bytes: u64) -> crate::page::PageStore {
    let options = PageStoreOptions {
        cache_written_leaves: true,
        cache_capacity_bytes,
        ..small_options()
    };
    open(&FaultFs::new(), &options).unwrap().0
}

/// With `cache_written_leaves`, a leaf written while the cache has room is
/// read back without a device read, and its bytes are the written ones; a
/// leaf that does not fit without evicting is not cached.
#[test]
fn written_leaves_are_cached_while_there_is_room() {
    let store = store_caching_written_leaves(150_000);
    let first = leaf_bytes(1, 60_000);
    let id = store
        .write_page(crate::page::PageKind::Leaf, &first)
        .unwrap();
    let before = store.stats();
    let got = store
        .read_range(id, 1000, 5000, CachePriority::LeafBlock)
        .unwrap();
    assert_eq!(&got[..], &first[1000..6000]);
    assert_eq!(
        &store.read_range_uncached(id, 0, 60_000).unwrap()[..],
        &first[..]
    );
    let after = store.stats();
    assert_eq!(
        after.read_ios, before.read_ios,
        "served from the cached copy"
    );
    // The second leaf fits; the third would need an eviction.
    let second = leaf_bytes(2, 60_000);
    let id2 = store
        .write_page(crate::page::PageKind::Leaf, &second)
        .unwrap();
    let third = leaf_bytes(3, 60_000);
    let id3 = store
        .write_page(crate::page::PageKind::Leaf, &third)
        .unwrap();
    let before = store.stats();
    assert_eq!(
        &store.read_range_uncached(id2, 0, 60_000).unwrap()[..],
        &second[..]
    );
    assert_eq!(store.stats().read_ios, before.read_ios);
    assert_eq!(
        &store.read_range_uncached(id3, 0, 60_000).unwrap()[..],
        &third[..]
    );
    assert_eq!(
        store.stats().read_ios,
        before.read_ios + 1,
        "not cached: no room"
    );
    assert!(store.stats().cache_used_bytes <= 150_000);
}

/// A whole page cached as a checkpoint wrote it does not stay for good just
/// because reads keep taking ranges from it: once the cache is full, it
/// goes at the hand's next pass, and the blocks reads want come back one
/// by one (before, a 2 MiB page read by any of its records never aged).
#[test]
fn a_written_page_read_by_ranges_ages_out_of_a_full_cache() {
    // Room for ~30 blocks per shard, so that CLOCK's hand does not lap a
    // shard within one eviction.
    const CAPACITY_BYTES: u64 = 2_000_000;
    let store = store_caching_written_leaves(CAPACITY_BYTES);
    let written = leaf_bytes(1, 60_000);
    let id = store
        .write_page(crate::page::PageKind::Leaf, &written)
        .unwrap();
    let read_written = || {
        let got = store
            .read_range(id, 1000, 100, CachePriority::LeafBlock)
            .unwrap();
        assert_eq!(&got[..], &written[1000..1100]);
    };
    let before = store.stats();
    read_written();
    assert_eq!(store.stats().read_ios, before.read_ios, "whole page cached");
    // Other leaves' blocks fill the cache and churn it, with a read of the
    // written page between any two.
    let others: Vec<_> = (2..50)
        .map(|n| {
            let bytes = leaf_bytes(n, 60_000);
            let id = store
                .write_page(crate::page::PageKind::Leaf, &bytes)
                .unwrap();
            (id, bytes)
        })
        .collect();
    for round in 0..3 {
        for (other, bytes) in &others {
            for offset in (0..50_000).step_by(4096) {
                let got = store
                    .read_range(*other, offset, 100, CachePriority::LeafBlock)
                    .unwrap();
                assert_eq!(&got[..], &bytes[offset as usize..offset as usize + 100]);
                read_written();
            }
        }
        assert!(
            store.stats().cache_used_bytes <= CAPACITY_BYTES,
            "round {round}"
        );
    }
    // The range read now comes from a cached block, not the whole page.
    let before = store.stats();
    let got = store.read_range_uncached(id, 0, 60_000).unwrap();
    assert_eq!(&got[..], &written[..]);
    assert_eq!(
        store.stats().read_ios,
        before.read_ios + 1,
        "the whole page was evicted"
    );
    let before = store.stats();
    read_written();
    assert_eq!(
        store.stats().read_ios,
        before.read_ios,
        "its block is cached"
    );
}

/// `cache_blocks_freed_cached` counts, at the commit that frees a page, the
/// blocks of it that reads had cached: what a rewrite takes from the cache.
#[test]
fn a_commit_counts_the_cached_blocks_of_the_pages_it_frees() {
    let (store, _) = open(&FaultFs::new(), &small_options()).unwrap();
    let v1 = Version::write(&store, vec![Version::new_leaf(&store, 1, 30_000).unwrap()]).unwrap();
    commit(&store, Some(v1.root), &[]).unwrap();
    let leaf = v1.leaves[0].0;
    // Three blocks: the one at 0, and the two a range across 8,100 covers.
    for (offset, len) in [(0, 10), (8_100, 100), (8_150, 10)] {
        store
            .read_range(leaf, offset, len, CachePriority::LeafBlock)
            .unwrap();
    }
    assert_eq!(store.stats().cache_blocks_freed_cached, 0);
    let v2 = Version::write(&store, vec![Version::new_leaf(&store, 2, 30_000).unwrap()]).unwrap();
    commit(&store, Some(v2.root), &[v1.root, leaf]).unwrap();
    assert_eq!(store.stats().cache_blocks_freed_cached, 3);
    // The node page is cached whole, not by blocks: it does not count.
    commit(&store, Some(v2.root), &[]).unwrap();
    assert_eq!(store.stats().cache_blocks_freed_cached, 3);
}
