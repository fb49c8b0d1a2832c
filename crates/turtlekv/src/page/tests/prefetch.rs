//! Prefetch reads uncached ranges into the cache together; the reads that
//! follow are served from memory, and a damaged block or a failed read is
//! still reported. Each test runs three times: on the fault-injecting file
//! system, whose files serve a batch through `read_at` (as the real ones
//! serve it through io_uring); on the same with batches declined, so that
//! prefetch reads on its thread pool; and on real files, read through
//! io_uring where the kernel has it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::harness::{DIR, Version, commit, leaf_bytes, open_at, small_options};
use crate::Error;
use crate::io::{Fault, FaultFs, FaultKind, FaultOn, FileSystem, RealFs, read_exact_batch};
use crate::page::PAGE_FILE_NAMES;
use crate::page::{CachePriority, PageId, PageIo, PageRange, PageStore};

/// Where a test's store lives; a fault-injecting file system says
/// whether its files serve batched reads.
pub(super) enum Disk {
    Fault(FaultFs, bool),
    Real(tempfile::TempDir),
}

impl Disk {
    pub(super) fn all() -> [Disk; 3] {
        let unbatched = FaultFs::new();
        unbatched.set_batched_reads(false);
        [
            Disk::Fault(FaultFs::new(), true),
            Disk::Fault(unbatched, false),
            Disk::Real(tempfile::tempdir().unwrap()),
        ]
    }

    /// The store, opened at `root` committed as `generation`.
    fn open(&self, generation: u64, root: Option<PageId>) -> PageStore {
        let (fs, dir): (Arc<dyn FileSystem>, &Path) = match self {
            Disk::Fault(fs, _) => (Arc::new(fs.clone()), Path::new(DIR)),
            Disk::Real(dir) => (Arc::new(RealFs), dir.path()),
        };
        open_at(fs, dir, &small_options(), generation, root).unwrap()
    }

    pub(super) fn page_file(&self, index: usize) -> PathBuf {
        match self {
            Disk::Fault(..) => Path::new(DIR).join(PAGE_FILE_NAMES[index]),
            Disk::Real(dir) => dir.path().join(PAGE_FILE_NAMES[index]),
        }
    }

    pub(super) fn flip_bit(&self, path: &Path, bit: u64) {
        match self {
            Disk::Fault(fs, _) => fs.flip_bit(path, bit).unwrap(),
            Disk::Real(_) => {
                let mut bytes = std::fs::read(path).unwrap();
                bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
                std::fs::write(path, bytes).unwrap();
            }
        }
    }

    /// Whether prefetches on this disk should bypass the thread pool.
    fn reads_batched(&self) -> bool {
        match self {
            Disk::Fault(_, batched) => *batched,
            Disk::Real(_) => read_exact_batch(&mut []).is_some(),
        }
    }
}

/// A committed store with three 60 KB leaves, reopened so nothing is cached.
pub(super) fn cold_store(disk: &Disk) -> (PageStore, Version) {
    let store = disk.open(0, None);
    let leaves = (0..3)
        .map(|s| Version::new_leaf(&store, s, 60_000).unwrap())
        .collect();
    let v = Version::write(&store, leaves).unwrap();
    let generation = commit(&store, Some(v.root), &[]).unwrap();
    drop(store);
    (disk.open(generation, Some(v.root)), v)
}

/// One block-sized range in each leaf, and two in the first.
pub(super) fn four_ranges(v: &Version) -> Vec<PageRange> {
    v.leaves
        .iter()
        .map(|l| (l.0, 20_000, 4000))
        .chain([(v.leaves[0].0, 50_000, 5000)])
        .collect()
}

/// A read of `range` gives the bytes its leaf was written with.
pub(super) fn assert_reads_back(store: &PageStore, v: &Version, (id, offset, len): PageRange) {
    let seed = v.leaves.iter().find(|l| l.0 == id).unwrap().1;
    let got = store
        .read_range(id, offset, len, CachePriority::LeafBlock)
        .unwrap();
    let want = &leaf_bytes(seed, 60_000)[offset as usize..(offset + len) as usize];
    assert_eq!(got, want, "range at {offset} of {id:?}");
}

#[test]
fn prefetched_ranges_are_then_read_from_the_cache() {
    for disk in Disk::all() {
        prefetched_ranges_are_read_from_the_cache_on(&disk);
    }
}

fn prefetched_ranges_are_read_from_the_cache_on(disk: &Disk) {
    let (store, v) = cold_store(disk);
    let ranges = four_ranges(&v);
    let before = store.stats();
    store.prefetch(&ranges, CachePriority::LeafBlock).unwrap();
    let after_prefetch = store.stats();
    // Each range is one run of blocks, so one read each.
    assert_eq!(after_prefetch.read_ios - before.read_ios, 4);
    assert_eq!(store.prefetch_pool.started(), !disk.reads_batched());
    for &range in &ranges {
        assert_reads_back(&store, &v, range);
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
    for disk in Disk::all() {
        let (store, v) = cold_store(&disk);
        read_ahead_in_one_io(&store, &v);
    }
}

fn read_ahead_in_one_io(store: &PageStore, v: &Version) {
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
    for disk in Disk::all() {
        a_damaged_block_fails_the_prefetch_on(&disk);
    }
}

fn a_damaged_block_fails_the_prefetch_on(disk: &Disk) {
    let (store, v) = cold_store(disk);
    let bad = v.leaves[2].0;
    let path = disk.page_file(1);
    // Bit 100 of the leaf's second block (block 0 is header + first bytes).
    let bit = (bad.slot() * 65536 + 4096) * 8 + 100;
    disk.flip_bit(&path, bit);
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
    disk.flip_bit(&path, bit);
    assert!(
        store
            .read_range(bad, 5000, 100, CachePriority::LeafBlock)
            .is_ok()
    );
}

/// A read that fails inside a prefetch, whichever of its reads it is, is
/// the prefetch's error, and nothing it would have read is cached wrong:
/// every range then reads back its own bytes.
#[test]
fn a_failed_read_fails_the_prefetch_and_caches_nothing_wrong() {
    for disk in Disk::all() {
        let Disk::Fault(fs, _) = &disk else {
            continue;
        };
        for after in 0..5 {
            let (store, v) = cold_store(&disk);
            let ranges = four_ranges(&v);
            fs.inject(Fault {
                on: FaultOn::Read,
                after,
                kind: FaultKind::Eio,
                persistent: false,
                path_contains: Some(PAGE_FILE_NAMES[1].to_string()),
            });
            let outcome = store.prefetch(&ranges, CachePriority::LeafBlock);
            let fired = fs.fault_fired();
            fs.clear_fault();
            match outcome {
                Ok(()) => assert!(!fired, "read {after} failed, the prefetch did not"),
                Err(Error::Io(e)) => {
                    assert!(fired);
                    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
                }
                Err(e) => panic!("read {after}: {e:?}"),
            }
            assert_eq!(fired, after < 4, "four reads, one per range");
            for &range in &ranges {
                assert_reads_back(&store, &v, range);
            }
            store.cache.check().unwrap();
        }
    }
}
