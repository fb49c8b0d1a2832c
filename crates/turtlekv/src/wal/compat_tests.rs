//! A database whose log an earlier build wrote (format versions 1 to 3)
//! opens, replays it, checks clean and logs on in the current format.
//! Such a database has a version-1 superblock too (no identity), which
//! these tests write as well; `db::compat_tests` rewrites every file.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::io::{FaultFs, FileSystem, OpenOptions, read_all};
use crate::wal::record::{self, Frame, PayloadFormat};
use crate::wal::segment::{
    SEGMENT_HEADER_BYTES, SEGMENT_HEADER_BYTES_V3, SegmentFormat, check_header, encode_header,
    list_segments,
};
use crate::{Db, Options};

const WAL: &str = "/db/wal";

fn options() -> Options {
    Options {
        wal_segment_size_bytes: 64 * 1024,
        ..Options::default()
    }
}

fn open(fs: &FaultFs) -> Db {
    Db::open_with_fs("/db", options(), Arc::new(fs.clone())).expect("open")
}

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.range::<&[u8], _>(..)
        .map(|kv| {
            let (k, v) = kv.expect("scan");
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

fn segment_path(id: u64) -> std::path::PathBuf {
    Path::new(WAL).join(super::segment::segment_file_name(id))
}

fn segment_bytes(fs: &FaultFs, id: u64) -> Vec<u8> {
    let path = segment_path(id);
    read_all(&*fs.open(&path, OpenOptions::read_only()).unwrap()).unwrap()
}

/// Rewrites segment `id` as an earlier build would have written it in
/// format `version` (1 to 3): the 32-byte header, no link, a marker only
/// from version 3 on, and each record claiming what precedes it as synced
/// (as a log synced per write does).
pub(crate) fn downgrade(fs: &FaultFs, id: u64, version: u32) {
    downgrade_at(fs, &segment_path(id), id, version);
}

/// [`downgrade`] of the segment at `path`.
pub(crate) fn downgrade_at(fs: &FaultFs, path: &Path, id: u64, version: u32) {
    let bytes = read_all(&*fs.open(path, OpenOptions::read_only()).unwrap()).unwrap();
    let header = check_header(&bytes, id).expect("a segment of this build");
    assert_eq!(header.format, SegmentFormat::CURRENT);
    let payload = SegmentFormat::from_version(version)
        .expect("a segment format")
        .payload;
    let mut out = header_of_version(id, version).to_vec();
    let mut offset = header.body_start();
    // A segment still being written ends in the zeros its writer reserved
    // ahead, which an earlier build did not leave.
    while offset < bytes.len() && bytes[offset..].iter().any(|&b| b != 0) {
        let Frame::Valid(rec, len) = record::decode(&bytes[offset..], PayloadFormat::V2) else {
            panic!("segment {id}: no valid record at {offset}");
        };
        let is_marker = offset == header.body_start() && rec.ops.is_empty();
        let keep = if is_marker {
            version >= 3
        } else {
            rec.next_segment.is_none()
        };
        if keep {
            let synced = if is_marker {
                rec.synced_through.min(SEGMENT_HEADER_BYTES_V3)
            } else {
                out.len() as u64
            };
            record::encode_as(payload, &mut out, rec.first_seq, synced, &rec.ops);
        }
        offset += len;
    }
    let file = fs.open(path, OpenOptions::read_write_create()).unwrap();
    file.set_len(0).unwrap();
    file.write_at(&out, 0).unwrap();
    file.sync_data().unwrap();
}

/// Segment `id`'s 32-byte header as format `version` would have it (a
/// version above 4 plays a newer build's).
pub(crate) fn header_of_version(id: u64, version: u32) -> [u8; SEGMENT_HEADER_BYTES_V3 as usize] {
    let mut header = [0u8; SEGMENT_HEADER_BYTES_V3 as usize];
    header.copy_from_slice(&encode_header(id, 1)[..SEGMENT_HEADER_BYTES_V3 as usize]);
    header[8..12].copy_from_slice(&version.to_le_bytes());
    let crc = crc32c::crc32c(&header[0..24]);
    header[24..28].copy_from_slice(&crc.to_le_bytes());
    header
}

/// Rewrites the superblock at `path` as an earlier build wrote it
/// (version 1: no identity, no WAL floor).
pub(crate) fn downgrade_superblock(fs: &FaultFs, path: &Path) {
    use crate::store::superblock::{SLOT_BYTES, Slot};
    let file = fs.open(path, OpenOptions::read_write_create()).unwrap();
    let bytes = read_all(&*file).unwrap();
    for (i, slot) in bytes.chunks(SLOT_BYTES).enumerate() {
        if let Ok(slot) = Slot::decode(slot, i as u64) {
            let old = Slot {
                identity: None,
                wal_floor: 0,
                ..slot
            };
            file.write_at(&old.encode_version(1), (i * SLOT_BYTES) as u64)
                .unwrap();
        }
    }
    file.sync_data().unwrap();
}

/// A closed database of 50 puts, all in segment 1.
fn fifty_puts() -> FaultFs {
    let fs = FaultFs::new();
    let db = open(&fs);
    for i in 0..50u32 {
        db.put(i.to_be_bytes(), [3u8; 40]).unwrap();
    }
    drop(db);
    fs
}

fn version(fs: &FaultFs, id: u64) -> u32 {
    check_header(&segment_bytes(fs, id), id)
        .expect("valid header")
        .format
        .version()
}

#[test]
fn a_log_of_format_version_1_replays_and_the_log_goes_on_in_the_current_version() {
    a_log_of_an_earlier_version_replays(1);
}

#[test]
fn a_log_of_format_version_2_replays_and_the_log_goes_on_in_the_current_version() {
    a_log_of_an_earlier_version_replays(2);
}

fn a_log_of_an_earlier_version_replays(old_version: u32) {
    let fs = FaultFs::new();
    let mut model = BTreeMap::new();
    // Earlier builds stored bare keys.
    crate::store::superblock::CREATE_BARE_KEYS.set(true);
    let db = open(&fs);
    crate::store::superblock::CREATE_BARE_KEYS.set(false);
    for i in 0..5000u32 {
        let key = (i % 700).to_be_bytes().to_vec();
        if i % 5 == 4 {
            db.delete(&key).unwrap();
            model.remove(&key);
        } else {
            let value = vec![i as u8; (i % 90) as usize];
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
    }
    drop(db);
    let old = list_segments(&fs, Path::new(WAL)).unwrap();
    assert!(old.len() >= 3, "several segments: {old:?}");
    for &id in &old {
        downgrade(&fs, id, old_version);
    }
    downgrade_superblock(&fs, Path::new("/db/SUPERBLOCK"));

    let db = open(&fs);
    assert_eq!(contents(&db), model);
    assert!(db.stats().wal_records_replayed >= 5000);
    db.check().expect("a version 1 log checks clean");
    for i in 0..300u32 {
        let key = (i + 5000).to_be_bytes().to_vec();
        db.put(&key, b"new").unwrap();
        model.insert(key, b"new".to_vec());
    }
    db.check().expect("both versions check clean");
    drop(db);

    let all = list_segments(&fs, Path::new(WAL)).unwrap();
    let newest = *all.last().unwrap();
    assert!(newest > *old.last().unwrap());
    assert_eq!(version(&fs, newest), SegmentFormat::CURRENT.version());
    assert_eq!(version(&fs, old[0]), old_version);
    assert_eq!(contents(&open(&fs)), model);
}

#[test]
fn rot_in_a_version_1_segment_is_still_found() {
    let fs = fifty_puts();
    downgrade(&fs, 1, 1);
    downgrade_superblock(&fs, Path::new("/db/SUPERBLOCK"));
    // A flipped bit in the first record, before records that say it was
    // synced: corruption, not a torn tail.
    let path = segment_path(1);
    fs.flip_bit(&path, (SEGMENT_HEADER_BYTES_V3 + 30) * 8)
        .unwrap();
    let err = Db::open_with_fs("/db", options(), Arc::new(fs.clone())).unwrap_err();
    assert!(
        matches!(err, crate::Error::Corruption { offset, .. } if offset == SEGMENT_HEADER_BYTES_V3),
        "{err}"
    );
}

/// Sets segment `id`'s header to format `version`.
fn set_version(fs: &FaultFs, id: u64, version: u32) {
    let path = segment_path(id);
    let file = fs.open(&path, OpenOptions::read_write_create()).unwrap();
    file.write_at(&header_of_version(id, version), 0).unwrap();
}

#[test]
fn a_segment_of_an_unknown_version_is_an_error_and_is_kept() {
    // A newer build's log, opened by this one: its newest segment must
    // not be taken for a torn creation and removed.
    let fs = fifty_puts();
    let before = segment_bytes(&fs, 1);
    set_version(&fs, 1, 5);
    let err = Db::open_with_fs("/db", options(), Arc::new(fs.clone())).unwrap_err();
    assert!(
        matches!(&err, crate::Error::Corruption { reason, .. } if reason.contains("version 5")),
        "{err}"
    );
    assert_eq!(
        segment_bytes(&fs, 1)[SEGMENT_HEADER_BYTES as usize..],
        before[SEGMENT_HEADER_BYTES as usize..]
    );
    set_version(&fs, 1, SegmentFormat::CURRENT.version());
    assert_eq!(contents(&open(&fs)).len(), 50);
}

#[test]
fn a_newer_segment_is_kept_even_when_its_header_is_damaged() {
    let fs = fifty_puts();
    let path = segment_path(1);
    // A newer build's header naming another segment id: still its version
    // that is reported.
    let file = fs.open(&path, OpenOptions::read_write_create()).unwrap();
    file.write_at(&header_of_version(77, 5), 0).unwrap();
    let err = Db::open_with_fs("/db", options(), Arc::new(fs.clone())).unwrap_err();
    assert!(
        matches!(&err, crate::Error::Corruption { reason, .. } if reason.contains("version 5")),
        "{err}"
    );
    // A rotted header, then a frame whose checksum holds but whose
    // payload no layout of this build parses: rot, not a torn creation.
    let payload = [0xFF_u8; 5];
    let mut frame = record::FRAME_MAGIC.to_le_bytes().to_vec();
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&frame[4..8]), &payload);
    frame.extend_from_slice(&crc.to_le_bytes());
    frame.extend_from_slice(&payload);
    let mut header = header_of_version(1, 5);
    header[20] ^= 1; // in the segment id, under the header checksum
    let mut bytes = header.to_vec();
    bytes.extend_from_slice(&frame);
    file.set_len(0).unwrap();
    file.write_at(&bytes, 0).unwrap();
    let err = Db::open_with_fs("/db", options(), Arc::new(fs.clone())).unwrap_err();
    assert!(
        matches!(&err, crate::Error::Corruption { offset: 0, .. }),
        "{err}"
    );
    assert_eq!(
        segment_bytes(&fs, 1),
        bytes,
        "the segment is kept as it was"
    );
}
