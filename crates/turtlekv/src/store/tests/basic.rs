//! Round trips, reopen, reuse after unpinning, range reads, poisoning.

use std::path::Path;
use std::sync::Arc;

use super::harness::{
    DIR, Version, leaf_bytes, list_children, node_bytes, open, open_in, record, small_options,
};
use crate::Error;
use crate::io::{Fault, FaultFs, FaultKind, FaultOn, FileSystem, OpenOptions};
use crate::page::{CachePriority, PageIo, PageKind, PageStoreOptions, RootPin};
use crate::store::superblock::SuperblockRecord;

fn leaves(
    store: &crate::page::PageStore,
    seeds: std::ops::Range<u64>,
) -> Vec<(crate::page::PageId, u64, usize)> {
    seeds
        .map(|s| Version::new_leaf(store, s, 1000 + (s as usize * 7919) % 60_000).unwrap())
        .collect()
}

#[test]
fn committed_version_survives_reopen_and_checks_clean() {
    let fs = FaultFs::new();
    let (store, rec) = open(&fs, &small_options()).unwrap();
    assert_eq!(rec, SuperblockRecord::default());
    let v = Version::write(&store, leaves(&store, 0..6)).unwrap();
    store.commit(record(Some(v.root), 1), &[]).unwrap();
    v.verify(&store).unwrap();
    drop(store);
    let (store, rec) = open(&fs, &small_options()).unwrap();
    assert_eq!(rec, record(Some(v.root), 1));
    v.verify(&store).unwrap();
    let report: crate::page::check::CheckReport =
        store.check(&store.pin(), &list_children).unwrap();
    assert_eq!((report.node_pages, report.leaf_pages), (1, 6));
    let expected: usize = v.leaves.iter().map(|l| l.2).sum();
    assert_eq!(report.leaf_bytes, expected as u64);
}

#[test]
fn page_sizes_are_fixed_at_creation() {
    let fs = FaultFs::new();
    drop(open(&fs, &small_options()).unwrap());
    let other = PageStoreOptions {
        leaf_size_bytes: 128 * 1024,
        ..small_options()
    };
    assert!(matches!(open(&fs, &other), Err(Error::InvalidOptions(_))));
    let fs: Arc<dyn FileSystem> = Arc::new(FaultFs::new());
    let missing = open_in(&fs, Path::new(DIR), &small_options(), false);
    assert!(matches!(missing, Err(Error::Io(_))));
}

#[test]
fn oversized_pages_are_refused_and_the_limit_fits() {
    let fs = FaultFs::new();
    let (store, _) = open(&fs, &small_options()).unwrap();
    let max = store.max_page_bytes(PageKind::Leaf);
    assert_eq!(
        max,
        crate::page::max_page_bytes(PageKind::Leaf, 4096, 65536)
    );
    let id = store
        .write_page(PageKind::Leaf, &leaf_bytes(1, max))
        .unwrap();
    assert_eq!(id.blocks(), 16);
    assert!(matches!(
        store.write_page(PageKind::Leaf, &vec![0u8; max + 1]),
        Err(Error::InvalidOptions(_))
    ));
    let node_max = store.max_page_bytes(PageKind::Node);
    assert_eq!(node_max, 4072);
    store
        .write_page(PageKind::Node, &vec![1u8; node_max])
        .unwrap();
}

/// Ranges of a 50,000-byte page: within a block, across block boundaries,
/// the whole page, its last byte and an empty one.
const RANGES_OF_50_000: [(u64, u64); 7] = [
    (0, 16),
    (4000, 200),
    (4070, 30),
    (0, 50_000),
    (49_999, 1),
    (12_345, 9000),
    (7, 0),
];

#[test]
fn uncached_range_reads_match_and_cache_nothing() {
    let fs = FaultFs::new();
    let (store, _) = open(&fs, &small_options()).unwrap();
    let data = leaf_bytes(5, 50_000);
    let id = store.write_page(PageKind::Leaf, &data).unwrap();
    for (offset, len) in RANGES_OF_50_000 {
        let before = store.stats();
        let got = store.read_range_uncached(id, offset, len).unwrap();
        assert_eq!(&got[..], &data[offset as usize..(offset + len) as usize]);
        // Read again from the device: nothing was cached.
        let after = store.stats();
        assert_eq!(after.read_ios, before.read_ios + 1, "{offset}+{len}");
    }
    // With some blocks cached by a point read, the rest come from the device.
    store
        .read_range(id, 20_000, 10, CachePriority::LeafBlock)
        .unwrap();
    let got = store.read_range_uncached(id, 10_000, 30_000).unwrap();
    assert_eq!(&got[..], &data[10_000..40_000]);
    for (offset, len) in [(49_990, 11), (50_000, 1), (0, 50_001)] {
        assert!(
            matches!(
                store.read_range_uncached(id, offset, len),
                Err(Error::Corruption { .. })
            ),
            "{offset}+{len}"
        );
    }
}

#[test]
fn range_reads_match_and_hit_the_cache_on_repeat() {
    let fs = FaultFs::new();
    let (store, _) = open(&fs, &small_options()).unwrap();
    let data = leaf_bytes(9, 50_000);
    let id = store.write_page(PageKind::Leaf, &data).unwrap();
    for (offset, len) in RANGES_OF_50_000 {
        let got = store
            .read_range(id, offset, len, CachePriority::LeafBlock)
            .unwrap();
        assert_eq!(&got[..], &data[offset as usize..(offset + len) as usize]);
    }
    let before = store.stats();
    store
        .read_range(id, 4000, 200, CachePriority::LeafBlock)
        .unwrap();
    let after = store.stats();
    assert_eq!(after.cache_hits, before.cache_hits + 1);
    assert_eq!(after.bytes_read, before.bytes_read);
    assert!(matches!(
        store.read_range(id, 49_990, 11, CachePriority::LeafBlock),
        Err(Error::Corruption { .. })
    ));
    // On a cold cache a point lookup reads the head block and one more,
    // never the whole leaf.
    let root = store
        .write_page(PageKind::Node, &node_bytes(&[id]))
        .unwrap();
    store.commit(record(Some(root), 1), &[]).unwrap();
    drop(store);
    let (store, _) = open(&fs, &small_options()).unwrap();
    let before = store.stats();
    let head = store
        .read_range(id, 0, 64, CachePriority::LeafHead)
        .unwrap();
    let item = store
        .read_range(id, 30_000, 100, CachePriority::LeafBlock)
        .unwrap();
    assert_eq!((&head[..], &item[..]), (&data[..64], &data[30_000..30_100]));
    let after = store.stats();
    assert_eq!(after.bytes_read - before.bytes_read, 2 * 4096);
    assert_eq!(after.read_ios - before.read_ios, 2);
}

#[test]
fn freed_pages_are_reused_only_after_older_pins_drop() {
    let fs = FaultFs::new();
    let (store, _) = open(&fs, &small_options()).unwrap();
    let v1 = Version::write(&store, leaves(&store, 0..4)).unwrap();
    store.commit(record(Some(v1.root), 1), &[]).unwrap();
    let reader: RootPin = store.pin();
    assert_eq!(reader.root(), Some(v1.root));
    // Version 2 replaces leaf 0 and the root.
    let mut l2 = v1.leaves.clone();
    l2[0] = Version::new_leaf(&store, 100, 3000).unwrap();
    let v2 = Version::write(&store, l2).unwrap();
    store
        .commit(record(Some(v2.root), 2), &[v1.root, v1.leaves[0].0])
        .unwrap();
    assert_eq!(store.stats().pending_free_pages, 2);
    // Writes while the reader holds version 1 must not land in its pages.
    let extra: Vec<_> = (0..4)
        .map(|s| Version::new_leaf(&store, 200 + s, 2000).unwrap())
        .collect();
    assert!(extra.iter().all(|e| e.0.slot() != v1.leaves[0].0.slot()));
    v1.verify(&store).unwrap();
    drop(reader);
    store.reclaim().unwrap();
    let stats = store.stats();
    assert_eq!(stats.pending_free_pages, 0);
    // The freed slot is punched at the next commit, unless reused first.
    assert_eq!(stats.bytes_punched, 0);
    let reused = Version::new_leaf(&store, 300, 100).unwrap();
    assert_eq!(reused.0.slot(), v1.leaves[0].0.slot());
    assert!(matches!(
        store.read_page(v1.leaves[0].0, CachePriority::LeafBlock),
        Err(Error::Corruption { .. })
    ));
    store
        .commit(
            record(Some(v2.root), 3),
            &extra
                .iter()
                .map(|e| e.0)
                .chain([reused.0])
                .collect::<Vec<_>>(),
        )
        .unwrap();
    // The commit punched the reused slot's tail, past its one block.
    let slot_bytes = 64 * 1024;
    assert_eq!(store.stats().bytes_punched, slot_bytes - 4096);
    store.check(&store.pin(), &list_children).unwrap();
}

#[test]
fn open_frees_uncommitted_pages_and_truncates() {
    let fs = FaultFs::new();
    let (store, _) = open(&fs, &small_options()).unwrap();
    let v = Version::write(&store, leaves(&store, 0..2)).unwrap();
    store.commit(record(Some(v.root), 1), &[]).unwrap();
    leaves(&store, 10..15);
    drop(store);
    let (store, _) = open(&fs, &small_options()).unwrap();
    let stats = store.stats();
    assert_eq!((stats.live_leaf_pages, stats.live_node_pages), (2, 1));
    let leaf_file = fs
        .open(
            &Path::new(DIR).join("leaves.pages"),
            OpenOptions::read_only(),
        )
        .unwrap();
    assert!(leaf_file.len().unwrap() <= 2 * 65536);
    v.verify(&store).unwrap();
    store.check(&store.pin(), &list_children).unwrap();
}

#[test]
fn a_failed_write_or_sync_poisons_writes_but_not_reads() {
    for on in [FaultOn::Write, FaultOn::Sync] {
        let fs = FaultFs::new();
        let (store, _) = open(&fs, &small_options()).unwrap();
        let v = Version::write(&store, leaves(&store, 0..2)).unwrap();
        store.commit(record(Some(v.root), 1), &[]).unwrap();
        fs.inject(Fault {
            on,
            after: 0,
            kind: FaultKind::Eio,
            persistent: false,
            path_contains: None,
        });
        let first = Version::new_leaf(&store, 5, 100)
            .and_then(|_| store.commit(record(Some(v.root), 2), &[]));
        assert!(matches!(first, Err(Error::Io(_))), "{on:?}: {first:?}");
        assert!(matches!(
            Version::new_leaf(&store, 6, 100),
            Err(Error::Poisoned { .. })
        ));
        assert!(matches!(
            store.commit(record(Some(v.root), 2), &[]),
            Err(Error::Poisoned { .. })
        ));
        v.verify(&store).unwrap();
    }
}

#[test]
fn no_space_is_an_error_that_poisons() {
    let fs = FaultFs::new();
    let (store, _) = open(&fs, &small_options()).unwrap();
    fs.set_space_limit_bytes(Some(100_000));
    let err = (0..10).try_for_each(|s| Version::new_leaf(&store, s, 30_000).map(|_| ()));
    match err {
        Err(Error::Io(e)) => assert_eq!(e.raw_os_error(), Some(libc::ENOSPC)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Version::new_leaf(&store, 1, 10),
        Err(Error::Poisoned { .. })
    ));
}

#[test]
fn direct_io_keeps_every_transfer_aligned() {
    let fs = FaultFs::new();
    let options = PageStoreOptions {
        direct_io: true,
        ..small_options()
    };
    let (store, _) = open(&fs, &options).unwrap();
    let v = Version::write(&store, leaves(&store, 0..3)).unwrap();
    store.commit(record(Some(v.root), 1), &[]).unwrap();
    v.verify(&store).unwrap();
    let data = leaf_bytes(v.leaves[1].1, v.leaves[1].2);
    let got = store
        .read_range(v.leaves[1].0, 5000, 300, CachePriority::LeafHead)
        .unwrap();
    assert_eq!(&got[..], &data[5000..5300]);
    drop(store);
    let (store, _) = open(&fs, &options).unwrap();
    v.verify(&store).unwrap();
    let small_nodes = PageStoreOptions {
        node_size_bytes: 512,
        ..options
    };
    assert!(matches!(
        open(&FaultFs::new(), &small_nodes),
        Err(Error::InvalidOptions(_))
    ));
}

#[test]
fn creation_makes_the_three_files() {
    let fs = FaultFs::new();
    drop(open(&fs, &small_options()).unwrap());
    let mut names = fs.list_dir(Path::new(DIR)).unwrap();
    names.sort();
    assert_eq!(names, ["SUPERBLOCK", "leaves.pages", "nodes.pages"]);
}

#[test]
fn pages_written_from_many_threads_get_distinct_slots() {
    let fs = FaultFs::new();
    let (store, _) = open(&fs, &small_options()).unwrap();
    let leaves: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let store = &store;
                scope.spawn(move || {
                    (0..8)
                        .map(|i| {
                            Version::new_leaf(store, t * 100 + i, 700 * (i as usize + 1)).unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut slots: Vec<u64> = leaves.iter().map(|l| l.0.slot()).collect();
    slots.sort();
    slots.dedup();
    assert_eq!(slots.len(), 32);
    let v = Version::write(&store, leaves).unwrap();
    store.commit(record(Some(v.root), 1), &[]).unwrap();
    drop(store);
    let (store, _) = open(&fs, &small_options()).unwrap();
    v.verify(&store).unwrap();
}

#[test]
fn multi_block_nodes_round_trip_and_reopen() {
    let fs = FaultFs::new();
    let options = PageStoreOptions {
        node_size_bytes: 16384,
        ..small_options()
    };
    let (store, _) = open(&fs, &options).unwrap();
    assert_eq!(store.max_page_bytes(PageKind::Node), 4 * 4088 - 16);
    // Enough children that the node spans three blocks.
    let leaves = (0..1100)
        .map(|s| Version::new_leaf(&store, s, 10).unwrap())
        .collect();
    let v = Version::write(&store, leaves).unwrap();
    assert_eq!(v.root.blocks(), 3);
    store.commit(record(Some(v.root), 1), &[]).unwrap();
    drop(store);
    let (store, rec) = open(&fs, &options).unwrap();
    assert_eq!(rec.root, Some(v.root));
    v.verify(&store).unwrap();
    let report = store.check(&store.pin(), &list_children).unwrap();
    assert_eq!((report.node_pages, report.leaf_pages), (1, 1100));
}

#[test]
fn direct_io_on_the_real_file_system() {
    use crate::io::RealFs;

    let dir = tempfile::tempdir().unwrap();
    let options = PageStoreOptions {
        direct_io: true,
        ..small_options()
    };
    let fs: Arc<dyn FileSystem> = Arc::new(RealFs);
    let (store, _) = match open_in(&fs, dir.path(), &options, true) {
        // File systems without O_DIRECT (tmpfs) refuse the open.
        Err(Error::Io(e)) if e.raw_os_error() == Some(libc::EINVAL) => return,
        other => other.unwrap(),
    };
    let v = Version::write(&store, leaves(&store, 0..4)).unwrap();
    store.commit(record(Some(v.root), 1), &[]).unwrap();
    let mut l2 = v.leaves.clone();
    l2[1] = Version::new_leaf(&store, 77, 40_000).unwrap();
    let v2 = Version::write(&store, l2).unwrap();
    store
        .commit(record(Some(v2.root), 2), &[v.root, v.leaves[1].0])
        .unwrap();
    store.reclaim().unwrap();
    drop(store);
    let (store, rec) = open_in(&fs, dir.path(), &options, false).unwrap();
    assert_eq!(rec.root, Some(v2.root));
    v2.verify(&store).unwrap();
    store.check(&store.pin(), &list_children).unwrap();
}

#[test]
fn default_options_hold_a_full_two_mebibyte_leaf() {
    let fs = FaultFs::new();
    let options = crate::Options::default().store_config().pages;
    assert_eq!(
        (options.node_size_bytes, options.leaf_size_bytes),
        (4096, 2 << 20)
    );
    let (store, _) = open(&fs, &options).unwrap();
    let max = store.max_page_bytes(PageKind::Leaf);
    assert_eq!(max, 2_093_040);
    let data = leaf_bytes(3, max);
    let id = store.write_page(PageKind::Leaf, &data).unwrap();
    assert_eq!(id.blocks(), 512);
    let root = store
        .write_page(PageKind::Node, &node_bytes(&[id]))
        .unwrap();
    store.commit(record(Some(root), 1), &[]).unwrap();
    let (store, _) = open(&fs, &options).unwrap();
    let got = store
        .read_range(id, 2_000_000, 93_040, CachePriority::LeafBlock)
        .unwrap();
    assert_eq!(&got[..], &data[2_000_000..]);
    assert_eq!(store.read_page(id, CachePriority::LeafBlock).unwrap(), data);
}
