//! A database the previous build wrote (superblock version 1, WAL
//! segments of version 3, page blocks checksummed without identity, an
//! `OPTIONS` file without checksum) opens with every byte of its data,
//! gets an identity, and goes on in the current formats. The files are
//! made by rewriting those of a database this build wrote, as the
//! previous build laid them out (`docs/format.md`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::io::{CrashMode, Fault, FaultFs, FaultKind, FaultOn, FileSystem, OpenOptions, read_all};
use crate::store::superblock::{SUPERBLOCK_FILE_NAME, Slot, read_newest};
use crate::wal::compat_tests::{downgrade_at, downgrade_superblock};
use crate::wal::{check_header, list_segments, segment_file_name};
use crate::{Db, WriteOptions};

const DIR: &str = "/db";

use super::test_contents as contents;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn open(fs: &FaultFs) -> crate::Result<Db> {
    Db::open_with_fs(
        DIR,
        super::checkpointing_test_options(),
        Arc::new(fs.clone()),
    )
}

/// Puts and deletes over a few checkpoints, the last ones in the WAL only
/// (some synced), and a tuned `OPTIONS` file.
fn written_database(fs: &FaultFs) -> Model {
    // Earlier builds stored bare keys.
    crate::store::superblock::CREATE_BARE_KEYS.set(true);
    let db = open(fs);
    crate::store::superblock::CREATE_BARE_KEYS.set(false);
    let db = db.unwrap();
    let mut model = Model::new();
    for i in 0..1_500u32 {
        let key = (i % 400).to_be_bytes().to_vec();
        let sync = WriteOptions::new().sync(i % 7 == 0);
        if i % 5 == 4 {
            db.delete_opt(&key, &sync).unwrap();
            model.remove(&key);
        } else {
            let value = vec![(i % 251) as u8; (i % 60) as usize];
            db.put_opt(&key, &value, &sync).unwrap();
            model.insert(key, value);
        }
    }
    assert!(db.stats().checkpoints > 3, "the tree holds most of it");
    assert!(db.stats().memtable_entries > 0, "the WAL holds the rest");
    drop(db);
    model
}

/// Block checksums as the previous build computed them: CRC32C over page
/// id, block index, payload and used bytes, with no identity in front
/// (`docs/format.md`, "Blocks"). Every slot holding a page header is
/// rewritten, live or not.
fn unseed_page_blocks(fs: &FaultFs, name: &str, block_bytes: usize) {
    let path = Path::new(DIR).join(name);
    let file = fs.open(&path, OpenOptions::read_write_create()).unwrap();
    let mut bytes = read_all(&*file).unwrap();
    let slot_bytes = if name == "nodes.pages" {
        super::checkpointing_test_options().node_size_bytes
    } else {
        super::checkpointing_test_options().leaf_size_bytes
    } as usize;
    let mut rewritten = 0;
    for slot in (0..bytes.len()).step_by(slot_bytes) {
        if bytes.get(slot..slot + 4) != Some(&b"TKPG"[..]) {
            continue;
        }
        let raw = u64::from_le_bytes(bytes[slot + 8..slot + 16].try_into().unwrap());
        let blocks = ((raw >> 40) & 0xFFFF) as usize + 1;
        for index in 0..blocks {
            let start = slot + index * block_bytes;
            let Some(block) = bytes.get_mut(start..start + block_bytes) else {
                break;
            };
            let (payload, trailer) = block.split_at_mut(block_bytes - 8);
            let mut seed = raw.to_le_bytes().to_vec();
            seed.extend_from_slice(&(index as u32).to_le_bytes());
            let crc = crc32c::crc32c(&seed);
            let crc = crc32c::crc32c_append(crc, payload);
            let crc = crc32c::crc32c_append(crc, &trailer[..4]);
            trailer[4..].copy_from_slice(&crc.to_le_bytes());
        }
        rewritten += 1;
    }
    assert!(rewritten > 0, "{name} holds pages");
    file.write_at(&bytes, 0).unwrap();
    file.sync_data().unwrap();
}

/// Rewrites every file of the database at `DIR` as the previous build
/// wrote it.
fn to_previous_format(fs: &FaultFs) {
    downgrade_superblock(fs, &Path::new(DIR).join(SUPERBLOCK_FILE_NAME));
    let wal = Path::new(DIR).join("wal");
    for id in list_segments(fs, &wal).unwrap() {
        downgrade_at(fs, &wal.join(segment_file_name(id)), id, 3);
    }
    unseed_page_blocks(
        fs,
        "nodes.pages",
        super::checkpointing_test_options().node_size_bytes as usize,
    );
    unseed_page_blocks(fs, "leaves.pages", 4096);
    let legacy = "# TurtleKV stored options: read by Options::load, written by Options::store\n\
                  # (`turtlekv tune`). One `name = value` per line; sizes in bytes.\n\
                  checkpoint_distance_bytes = 8192\n";
    let file = fs
        .open(
            &Path::new(DIR).join("OPTIONS"),
            OpenOptions::read_write_create(),
        )
        .unwrap();
    file.set_len(0).unwrap();
    file.write_at(legacy.as_bytes(), 0).unwrap();
    file.sync_data().unwrap();
}

fn newest_slot(fs: &FaultFs) -> Slot {
    let file = fs
        .open(
            &Path::new(DIR).join(SUPERBLOCK_FILE_NAME),
            OpenOptions::read_only(),
        )
        .unwrap();
    read_newest(&*file).unwrap().newest.unwrap()
}

/// The identities the segments of `wal/` name, oldest first (`None` for
/// one of the previous format).
fn segment_identities(fs: &FaultFs) -> Vec<Option<u64>> {
    let wal = Path::new(DIR).join("wal");
    list_segments(fs, &wal)
        .unwrap()
        .into_iter()
        .map(|id| {
            let path = wal.join(segment_file_name(id));
            let bytes = read_all(&*fs.open(&path, OpenOptions::read_only()).unwrap()).unwrap();
            check_header(&bytes, id).unwrap().database_id
        })
        .collect()
}

#[test]
fn a_database_of_the_previous_format_opens_keeps_its_data_and_gets_an_identity() {
    let fs = FaultFs::new();
    let mut model = written_database(&fs);
    to_previous_format(&fs);
    assert_eq!(newest_slot(&fs).version(), 1);
    assert!(segment_identities(&fs).iter().all(Option::is_none));
    let stored = crate::options_file::load_with_fs(&fs, Path::new(DIR)).unwrap();
    assert_eq!(
        stored.checkpoint_distance_bytes, 8192,
        "its OPTIONS still loads"
    );

    let db = open(&fs).unwrap();
    assert_eq!(contents(&db), model);
    db.check().unwrap();
    // The open recorded an identity, the one its new segment names.
    let slot = newest_slot(&fs);
    let identity = slot.identity.expect("an identity");
    assert!(identity.upgraded);
    let identities = segment_identities(&fs);
    assert_eq!(identities.last(), Some(&Some(identity.id)));
    assert!(identities.first().unwrap().is_none(), "{identities:?}");
    // Writes go on; checkpoints replace old pages with seeded ones.
    for i in 0..600u32 {
        let key = (10_000 + i).to_be_bytes().to_vec();
        db.put(&key, b"new").unwrap();
        model.insert(key, b"new".to_vec());
    }
    db.checkpoint_now().unwrap();
    db.check().unwrap();
    drop(db);
    let db = open(&fs).unwrap();
    assert_eq!(contents(&db), model);
    db.check().unwrap();
    assert_eq!(
        newest_slot(&fs).identity,
        Some(identity),
        "fixed once assigned"
    );
    // Once the segments of the previous format are covered, none is left.
    assert!(
        segment_identities(&fs)
            .iter()
            .all(|id| *id == Some(identity.id))
    );
}

/// The open that upgrades starts a segment naming the new identity before
/// its superblock records it: a crash in between leaves that segment
/// beside a version-1 superblock, and the next open takes its identity.
#[test]
fn an_upgrade_cut_short_by_a_crash_keeps_the_identity_its_segment_names() {
    let fs = FaultFs::new();
    let model = written_database(&fs);
    to_previous_format(&fs);
    // The open's second superblock sync (after the newest slot's rewrite)
    // is the commit that records the identity: it fails.
    fs.inject(Fault {
        on: FaultOn::Sync,
        after: 1,
        kind: FaultKind::Eio,
        persistent: true,
        path_contains: Some(SUPERBLOCK_FILE_NAME.into()),
    });
    assert!(open(&fs).is_err());
    let fs = fs.crash(CrashMode::DropUnsynced);
    assert_eq!(newest_slot(&fs).version(), 1);
    let named = segment_identities(&fs)
        .into_iter()
        .flatten()
        .collect::<Vec<_>>();
    assert_eq!(named.len(), 1, "the new segment names an identity");
    let db = open(&fs).unwrap();
    assert_eq!(contents(&db), model);
    db.check().unwrap();
    assert_eq!(newest_slot(&fs).identity.map(|i| i.id), Some(named[0]));
}
