//! Streamed reads report every pushed range once, after reading its
//! uncached blocks into the cache in one read; cached ranges come back
//! without a read; a damaged block is the report's error, and the reads
//! still in flight are waited for. Each test runs on the three disks of
//! the prefetch tests (io_uring on real files where the kernel has it).

use super::harness::leaf_bytes;
use super::prefetch::{Disk, assert_reads_back, cold_store, four_ranges};
use crate::Error;
use crate::page::{CachePriority, PageIo};

#[test]
fn every_pushed_range_is_reported_once_and_then_read_from_the_cache() {
    for disk in Disk::all() {
        let (store, v) = cold_store(&disk);
        let ranges = four_ranges(&v);
        let before = store.stats();
        let mut reads = store.streamed_reads(CachePriority::LeafBlock);
        for (tag, &range) in ranges.iter().enumerate() {
            reads.push(range, tag).unwrap();
        }
        let mut reported = vec![0; ranges.len()];
        while let Some(tag) = reads.next_ready().unwrap() {
            reported[tag] += 1;
            // Each range is in the cache when it is reported.
            let reads_before = store.stats().read_ios;
            assert_reads_back(&store, &v, ranges[tag]);
            assert_eq!(store.stats().read_ios, reads_before);
        }
        drop(reads);
        assert_eq!(reported, vec![1; ranges.len()]);
        // Each range is one run of blocks, so one read each.
        assert_eq!(store.stats().read_ios - before.read_ios, 4);
        // All cached now: pushed again, they are reported without a read.
        let mut reads = store.streamed_reads(CachePriority::LeafBlock);
        reads.push(ranges[2], 9).unwrap();
        assert_eq!(reads.next_ready().unwrap(), Some(9));
        assert_eq!(reads.next_ready().unwrap(), None);
        assert_eq!(store.stats().read_ios - before.read_ios, 4);
        store.cache.check().unwrap();
    }
}

#[test]
fn a_damaged_block_is_reported_and_the_other_reads_are_waited_for() {
    for disk in Disk::all() {
        let (store, v) = cold_store(&disk);
        let bad = v.leaves[2].0;
        let path = disk.page_file(1);
        // Bit 100 of the leaf's second block (block 0 is header + first bytes).
        let bit = (bad.slot() * 65536 + 4096) * 8 + 100;
        disk.flip_bit(&path, bit);
        let mut reads = store.streamed_reads(CachePriority::LeafBlock);
        reads.push((bad, 5000, 100), 0).unwrap();
        for (tag, offset) in [(1, 20_000), (2, 40_000), (3, 50_000)] {
            reads.push((v.leaves[0].0, offset, 100), tag).unwrap();
        }
        let mut failed = false;
        loop {
            match reads.next_ready() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    assert!(matches!(e, Error::Corruption { .. }), "{e:?}");
                    failed = true;
                    break;
                }
            }
        }
        assert!(failed, "the damaged range is reported");
        // Dropped with reads possibly still in flight: it waits for them.
        drop(reads);
        let err = store
            .read_range(bad, 5000, 100, CachePriority::LeafBlock)
            .unwrap_err();
        assert!(matches!(err, Error::Corruption { .. }), "{err:?}");
        let good = store
            .read_range(v.leaves[1].0, 5000, 100, CachePriority::LeafBlock)
            .unwrap();
        assert_eq!(good, &leaf_bytes(v.leaves[1].1, 60_000)[5000..5100]);
        store.cache.check().unwrap();
    }
}
