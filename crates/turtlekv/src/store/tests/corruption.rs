//! A flipped bit anywhere in a page, or in the newest superblock slot, is
//! reported, never returned as data.

use std::path::{Path, PathBuf};

use super::harness::{DIR, Version, list_children, open, record, small_options};
use crate::Error;
use crate::io::FaultFs;
use crate::page::PAGE_FILE_NAMES;
use crate::page::PageKind;
use crate::store::superblock::SUPERBLOCK_FILE_NAME;

fn committed_store() -> (FaultFs, Version) {
    let fs = FaultFs::new();
    let (store, _) = open(&fs, &small_options()).unwrap();
    let leaves = (0..3)
        .map(|s| Version::new_leaf(&store, s, 3000 + 9000 * s as usize).unwrap())
        .collect();
    let v = Version::write(&store, leaves).unwrap();
    store.commit(record(Some(v.root), 1), &[]).unwrap();
    (fs, v)
}

fn superblock_file(fs: &FaultFs) -> std::sync::Arc<dyn crate::io::File> {
    use crate::io::{FileSystem, OpenOptions};
    let path = Path::new(DIR).join(SUPERBLOCK_FILE_NAME);
    fs.open(&path, OpenOptions::read_write_create()).unwrap()
}

fn page_file(kind: PageKind) -> PathBuf {
    let i = match kind {
        PageKind::Node => 0,
        PageKind::Leaf => 1,
    };
    Path::new(DIR).join(PAGE_FILE_NAMES[i])
}

#[test]
fn a_flipped_bit_in_any_page_is_corruption_at_its_block() {
    let (fs, v) = committed_store();
    let mut pages = vec![(v.root, 4096u64)];
    pages.extend(v.leaves.iter().map(|l| (l.0, 65536u64)));
    let mut flipped = 0;
    for (id, slot_bytes) in pages {
        let path = page_file(id.kind());
        let start_bit = id.slot() * slot_bytes * 8;
        let bits = u64::from(id.blocks()) * 4096 * 8;
        // Every block's first and last bit, and a stride through the rest.
        let sample = (0..u64::from(id.blocks()))
            .flat_map(|b| [b * 32768, b * 32768 + 32767])
            .chain((0..bits).step_by(1009));
        for bit in sample {
            fs.flip_bit(&path, start_bit + bit).unwrap();
            // A fresh handle: nothing cached, every read goes to the file.
            let err = match open(&fs, &small_options()) {
                Err(e) => e,
                Ok((store, _)) => store.check(&store.pin(), &list_children).unwrap_err(),
            };
            match err {
                Error::Corruption { file, offset, .. } => {
                    assert_eq!(file, path);
                    assert_eq!(offset, (start_bit + bit) / 8 / 4096 * 4096, "bit {bit}");
                }
                other => panic!("bit {bit} of page {:#x}: {other:?}", id.to_raw()),
            }
            fs.flip_bit(&path, start_bit + bit).unwrap();
            flipped += 1;
        }
    }
    assert!(flipped > 100);
    let (store, _) = open(&fs, &small_options()).unwrap();
    v.verify(&store).unwrap();
}

#[test]
fn a_damaged_newest_superblock_slot_falls_back_to_the_older_one() {
    let (fs, v) = committed_store();
    let path = Path::new(DIR).join(SUPERBLOCK_FILE_NAME);
    // Generation 1 lives in slot 1; generation 0 (empty tree) in slot 0.
    fs.flip_bit(&path, 4096 * 8 + 300).unwrap();
    let (_, rec) = open(&fs, &small_options()).unwrap();
    assert_eq!(rec.root, None);
    fs.flip_bit(&path, 100).unwrap();
    match open(&fs, &small_options()) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, path),
        other => panic!("{other:?}"),
    }
    // Opening on the older slot destroyed nothing the damaged one names:
    // once the slot is repaired, its version is whole.
    fs.flip_bit(&path, 100).unwrap();
    fs.flip_bit(&path, 4096 * 8 + 300).unwrap();
    let (store, rec) = open(&fs, &small_options()).unwrap();
    assert_eq!(rec.root, Some(v.root));
    v.verify(&store).unwrap();
}

/// A superblock cut inside its newer slot is damage, as a flipped bit
/// there is: open falls back to the older slot and keeps the newer root's
/// pages for repair (read as zeros, the cut slot would make open truncate
/// the page files).
#[test]
fn a_superblock_cut_inside_its_newer_slot_keeps_the_newer_roots_pages() {
    let (fs, v) = committed_store();
    let file = superblock_file(&fs);
    let whole = crate::io::read_all(&*file).unwrap();
    file.set_len(4096 + 2048).unwrap();
    let (_, rec) = open(&fs, &small_options()).unwrap();
    assert_eq!(rec.root, None);
    file.write_at(&whole, 0).unwrap();
    let (store, rec) = open(&fs, &small_options()).unwrap();
    assert_eq!(rec.root, Some(v.root));
    v.verify(&store).unwrap();
}

/// A slot whose checksum holds but whose generation no database could
/// reach is not valid: `generation + 1` would overflow at the next commit.
#[test]
fn a_slot_with_an_implausible_generation_is_not_valid() {
    use crate::store::superblock::{MAX_PLAUSIBLE_COUNTER, Slot};
    let fs = FaultFs::new();
    drop(open(&fs, &small_options()).unwrap());
    let file = superblock_file(&fs);
    let mut bytes = crate::io::read_all(&*file).unwrap();
    let mut slot = Slot::decode(&bytes[..4096], 0).unwrap();
    bytes.resize(8192, 0);
    for generation in [u64::MAX, MAX_PLAUSIBLE_COUNTER + 1] {
        slot.generation = generation;
        let at = Slot::offset(generation) as usize;
        bytes[at..at + 4096].copy_from_slice(&slot.encode());
        assert!(Slot::decode(&bytes[at..at + 4096], generation % 2).is_err());
    }
    file.write_at(&bytes, 0).unwrap();
    let (store, rec) = open(&fs, &small_options()).unwrap();
    assert_eq!(rec.root, None);
    crate::page::PageIo::write_page(&*store, PageKind::Leaf, b"x").unwrap();
}

#[test]
fn a_range_read_reports_a_bad_block_and_caches_nothing() {
    use crate::page::{CachePriority, PageIo};
    let (fs, v) = committed_store();
    let (id, _, _) = v.leaves[2];
    let path = page_file(PageKind::Leaf);
    let bit = (id.slot() * 65536 + 2 * 4096 + 77) * 8;
    fs.flip_bit(&path, bit).unwrap();
    let (store, _) = open(&fs, &small_options()).unwrap();
    for _ in 0..2 {
        let err = store
            .read_range(id, 9000, 10, CachePriority::LeafBlock)
            .unwrap_err();
        assert!(
            matches!(err, Error::Corruption { offset, .. } if offset == id.slot() * 65536 + 8192)
        );
    }
    // An uncached read over the bad block reports it too.
    let err = store.read_range_uncached(id, 4000, 9000).unwrap_err();
    assert!(matches!(err, Error::Corruption { offset, .. } if offset == id.slot() * 65536 + 8192));
    // Blocks that verify are still readable.
    store
        .read_range(id, 100, 10, CachePriority::LeafBlock)
        .unwrap();
    store.read_range_uncached(id, 100, 4000).unwrap();
}

#[test]
fn ids_that_cannot_name_a_page_are_corruption() {
    use crate::page::{CachePriority, PageId, PageIo};
    let (fs, v) = committed_store();
    let (store, _) = open(&fs, &small_options()).unwrap();
    let too_many_blocks = PageId::new(PageKind::Leaf, 0, 17, 1);
    let past_the_end = PageId::new(PageKind::Leaf, 1000, 1, 1);
    let stale_tag = PageId::new(
        PageKind::Leaf,
        v.leaves[0].0.slot(),
        v.leaves[0].0.blocks(),
        99,
    );
    for id in [too_many_blocks, past_the_end, stale_tag] {
        assert!(matches!(
            store.read_page(id, CachePriority::LeafBlock),
            Err(Error::Corruption { .. })
        ));
        assert!(matches!(
            store.read_range(id, 0, 1, CachePriority::LeafBlock),
            Err(Error::Corruption { .. })
        ));
    }
    // A committed node naming such ids fails the open's walk, or two ids
    // for one slot. Leaf pages are not read there, so leaf ids past the end
    // of their file are caught by length (unchecked, one at slot 2^20 would
    // open with a million free slots, and one at the largest slot would make
    // the open try to list 2^40 of them).
    let far = PageId::new(PageKind::Leaf, 1 << 20, 1, 1);
    let farthest = PageId::new(PageKind::Leaf, crate::page::id::MAX_SLOT, 1, 1);
    for children in [
        vec![v.leaves[0].0, too_many_blocks],
        vec![v.leaves[0].0, stale_tag],
        vec![v.leaves[0].0, past_the_end],
        vec![v.leaves[0].0, far],
        vec![v.leaves[0].0, farthest],
    ] {
        let bad_root = store
            .write_page(PageKind::Node, &super::harness::node_bytes(&children))
            .unwrap();
        store.commit(record(Some(bad_root), 2), &[]).unwrap();
        let (_, committed) = store.current();
        assert_eq!(committed, Some(bad_root));
        assert!(matches!(
            open(&fs, &small_options()),
            Err(Error::Corruption { .. })
        ));
    }
}
