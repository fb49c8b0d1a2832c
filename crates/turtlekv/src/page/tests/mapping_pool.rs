//! Mappings of cached written pages: kept while the cache's budget has room,
//! reused by the next copy, and handed back before any entry is evicted.

use std::sync::Arc;

use bytes::Bytes;

use crate::page::CachePriority;
use crate::page::cache::{CacheKey, PageCache, WHOLE_PAGE};

fn key(page: u64) -> CacheKey {
    CacheKey {
        page,
        part: WHOLE_PAGE,
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn mapped_len(len: usize) -> u64 {
    len.next_multiple_of(crate::mem::page_bytes()) as u64
}

#[test]
fn a_dropped_copy_is_kept_and_reused_by_the_next_copy() {
    let cache = PageCache::new(10 << 20);
    let first = cache.mapped_copy(&pattern(1, 300_000));
    assert_eq!(&first[..], &pattern(1, 300_000)[..]);
    let address = first.as_ptr();
    drop(first);
    let counts = cache.counts();
    assert_eq!(counts.pooled_bytes, mapped_len(300_000));
    assert_eq!(
        counts.used_bytes, counts.pooled_bytes,
        "kept memory is charged"
    );
    cache.check().unwrap();

    // Shorter: the kept mapping shrinks in place and takes the new bytes.
    let second = cache.mapped_copy(&pattern(2, 200_000));
    assert_eq!(second.as_ptr(), address, "the kept mapping is reused");
    assert_eq!(&second[..], &pattern(2, 200_000)[..]);
    assert_eq!(cache.counts().pooled_bytes, 0);
    assert_eq!(cache.counts().used_bytes, 0);
    drop(second);

    // Longer: it grows, and the whole copy reads back.
    let third = cache.mapped_copy(&pattern(3, 900_000));
    assert_eq!(&third[..], &pattern(3, 900_000)[..]);
    assert_eq!(cache.counts().pooled_bytes, 0);
    drop(third);
    assert_eq!(cache.counts().pooled_bytes, mapped_len(900_000));
    cache.check().unwrap();
}

#[test]
fn a_copy_is_not_kept_beyond_the_budget() {
    let cache = PageCache::new(100_000);
    drop(cache.mapped_copy(&pattern(1, 300_000)));
    let counts = cache.counts();
    assert_eq!((counts.pooled_bytes, counts.used_bytes), (0, 0));
    cache.check().unwrap();
}

#[test]
fn kept_mappings_are_released_before_any_entry_is_evicted() {
    let cache = PageCache::new(1 << 20);
    for page in 0..4 {
        let bytes = Bytes::from(vec![page as u8; 100_000]);
        cache.insert(key(page), bytes, CachePriority::LeafBlock);
    }
    let copy = cache.mapped_copy(&pattern(1, 400_000));
    cache.insert(key(10), copy, CachePriority::LeafBlock);
    // Its page freed, the cached copy goes to the pool, still charged.
    cache.remove(key(10));
    assert_eq!(cache.counts().pooled_bytes, mapped_len(400_000));
    cache.check().unwrap();

    // An entry that needs that memory gets it; no entry is evicted.
    let bytes = Bytes::from(vec![7u8; 300_000]);
    cache.insert(key(20), bytes, CachePriority::LeafBlock);
    let counts = cache.counts();
    assert_eq!((counts.evictions, counts.pooled_bytes), (0, 0));
    assert!(cache.contains(key(20)));
    assert!((0..4).all(|page| cache.contains(key(page))));
    cache.check().unwrap();

    // Shrinking the cache also hands kept mappings back first.
    drop(cache.mapped_copy(&pattern(2, 100_000)));
    assert_eq!(cache.counts().pooled_bytes, mapped_len(100_000));
    let used = cache.counts().used_bytes;
    cache.set_capacity(used - 1);
    let counts = cache.counts();
    assert_eq!((counts.evictions, counts.pooled_bytes), (0, 0));
    cache.check().unwrap();
}

#[test]
fn a_copy_that_outlives_its_cache_still_reads_and_drops() {
    let cache = PageCache::new(10 << 20);
    let copy = cache.mapped_copy(&pattern(5, 50_000));
    drop(cache);
    assert_eq!(&copy[..], &pattern(5, 50_000)[..]);
    drop(copy);
}

#[test]
fn kept_mappings_stay_charged_under_concurrent_copies_and_resizing() {
    let cache = Arc::new(PageCache::new(4 << 20));
    let workers: Vec<_> = (0..4u64)
        .map(|t| {
            let cache = cache.clone();
            std::thread::spawn(move || {
                for i in 0..150u64 {
                    let len = 10_000 + ((i * 7_919 + t * 104_729) % 500_000) as usize;
                    let data = pattern((t + i) as u8, len);
                    let copy = cache.mapped_copy(&data);
                    assert_eq!(&copy[..], &data[..]);
                    if i % 3 == 0 {
                        cache.insert(key(t * 1000 + i), copy, CachePriority::LeafBlock);
                    }
                    if t == 0 && i % 10 == 0 {
                        let capacity = if i % 20 == 0 { 1 << 20 } else { 4 << 20 };
                        cache.set_capacity(capacity);
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    cache.check().unwrap();
    let counts = cache.counts();
    assert!(counts.used_bytes <= counts.capacity_bytes, "{counts:?}");
    // Every cached copy read back as written.
    for t in 0..4u64 {
        for i in (0..150u64).step_by(3) {
            if let Some(bytes) = cache.get(key(t * 1000 + i)) {
                let len = 10_000 + ((i * 7_919 + t * 104_729) % 500_000) as usize;
                assert_eq!(&bytes[..], &pattern((t + i) as u8, len)[..]);
            }
        }
    }
}
