//! Damaged WAL bytes are reported as corruption, except a torn tail, which
//! is dropped.

mod common;

use std::path::Path;

use common::{contents, open_fault, small_options};
use turtlekv::io::{CrashMode, FaultFs, FileSystem};
use turtlekv::{Error, WriteOptions};

const SYNC: WriteOptions = WriteOptions { sync: true };
/// Frame (12) + payload header (20) + put header (7) + key (4) + value (10).
const RECORD_BYTES: u64 = 53;
const SEGMENT_HEADER_BYTES: u64 = 32;

fn segment(id: u64) -> String {
    format!("/db/wal/{id:020}.wal")
}

/// Frame (12) + payload header (20), no entries: what a clean close appends.
const SEAL_BYTES: u64 = 32;

/// Writes `n` equal-sized synced records into segment 1 and closes.
fn synced_log(n: u32) -> FaultFs {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    for i in 0..n {
        db.put_opt(i.to_be_bytes(), [7u8; 10], &SYNC).unwrap();
    }
    drop(db);
    fs
}

/// The same records, but the power is cut instead of a clean close: the
/// log ends with its last record, with no seal after it.
fn synced_log_then_crash(n: u32) -> FaultFs {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    for i in 0..n {
        db.put_opt(i.to_be_bytes(), [7u8; 10], &SYNC).unwrap();
    }
    let crashed = fs.crash(CrashMode::DropUnsynced);
    drop(db);
    crashed
}

fn record_offset(index: u64) -> u64 {
    SEGMENT_HEADER_BYTES + index * RECORD_BYTES
}

#[test]
fn record_size_matches_the_documented_layout() {
    let fs = synced_log(3);
    let f = fs.open(Path::new(&segment(1)), Default::default()).unwrap();
    assert_eq!(f.len().unwrap(), record_offset(3) + SEAL_BYTES);
    let fs = synced_log_then_crash(3);
    let f = fs.open(Path::new(&segment(1)), Default::default()).unwrap();
    assert_eq!(f.len().unwrap(), record_offset(3));
}

#[test]
fn damage_before_synced_records_is_corruption() {
    for index in [0, 5, 18] {
        for byte in [0, 5, 13, 40] {
            let fs = synced_log(20);
            let bit = (record_offset(index) + byte) * 8 + 3;
            fs.flip_bit(Path::new(&segment(1)), bit).unwrap();
            let err = open_fault(&fs, small_options()).unwrap_err();
            match err {
                Error::Corruption { file, offset, .. } => {
                    assert_eq!(file, Path::new(&segment(1)));
                    assert_eq!(offset, record_offset(index));
                }
                other => panic!("record {index} byte {byte}: expected corruption, got {other}"),
            }
        }
    }
}

#[test]
fn damaged_last_record_after_a_crash_is_a_torn_tail() {
    let fs = synced_log_then_crash(20);
    let bit = (record_offset(19) + 30) * 8;
    fs.flip_bit(Path::new(&segment(1)), bit).unwrap();
    let db = open_fault(&fs, small_options()).unwrap();
    assert_eq!(contents(&db).len(), 19);
    assert_eq!(db.stats().wal_tail_bytes_dropped, RECORD_BYTES);
    db.put(b"next", b"x").unwrap();
    drop(db);
    // The tail was cut, so the old segment is clean for the next open.
    let db = open_fault(&fs, small_options()).unwrap();
    assert_eq!(contents(&db).len(), 20);
}

#[test]
fn damaged_last_record_after_a_clean_close_is_corruption() {
    // The seal a clean close appends proves the last records were synced,
    // so rot in them is not mistaken for a torn write.
    for byte in [0, 5, 13, 30, 52] {
        let fs = synced_log(20);
        let bit = (record_offset(19) + byte) * 8 + 1;
        fs.flip_bit(Path::new(&segment(1)), bit).unwrap();
        match open_fault(&fs, small_options()) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, Path::new(&segment(1)));
                assert_eq!(offset, record_offset(19));
            }
            Err(other) => panic!("byte {byte}: expected corruption, got {other}"),
            Ok(_) => panic!("byte {byte}: the damaged record was dropped silently"),
        }
    }
}

#[test]
fn damaged_seal_is_a_torn_tail_and_loses_nothing() {
    let fs = synced_log(20);
    fs.flip_bit(Path::new(&segment(1)), (record_offset(20) + 20) * 8)
        .unwrap();
    let db = open_fault(&fs, small_options()).unwrap();
    assert_eq!(contents(&db).len(), 20);
    assert_eq!(db.stats().wal_tail_bytes_dropped, SEAL_BYTES);
}

#[test]
fn reopening_without_writes_adds_no_seal() {
    let fs = synced_log(3);
    for _ in 0..3 {
        drop(open_fault(&fs, small_options()).unwrap());
    }
    // Segment 1 with its records and one seal, and the last open's empty
    // segment (removed by the next open).
    let segments = fs.list_dir(Path::new("/db/wal")).unwrap();
    assert_eq!(segments.len(), 2, "{segments:?}");
    let len = |id| {
        let f = fs.open(Path::new(&segment(id)), Default::default());
        f.unwrap().len().unwrap()
    };
    assert_eq!(len(1), record_offset(3) + SEAL_BYTES);
    assert_eq!(len(4), SEGMENT_HEADER_BYTES);
}

#[test]
fn lost_unsynced_writes_followed_by_surviving_ones_are_a_tail() {
    // Two unsynced groups; the crash keeps the second and loses the first.
    let fs = synced_log(5);
    let db = open_fault(&fs, small_options()).unwrap();
    db.put(b"k1", b"first").unwrap();
    db.put(b"k2", b"second").unwrap();
    let found: Vec<_> = (0..64)
        .map(|seed| {
            contents(
                &open_fault(
                    &fs.crash(CrashMode::KeepRandomSubset { seed }),
                    small_options(),
                )
                .unwrap(),
            )
        })
        .collect();
    drop(db);
    for state in &found {
        assert!(state.len() >= 5 && state.len() <= 7);
        assert!(
            state.contains_key(&b"k1"[..]) || !state.contains_key(&b"k2"[..]),
            "hole in history"
        );
    }
}

#[test]
fn damage_in_an_older_segment_is_corruption() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    for i in 0..3000u32 {
        db.put(i.to_be_bytes(), [1u8; 64]).unwrap();
    }
    drop(db);
    let ids = fs.list_dir(Path::new("/db/wal")).unwrap();
    assert!(ids.len() >= 3);
    // The last record of segment 1 is followed by nothing in its segment,
    // but the segment is not the newest, so it was synced: corruption.
    let f = fs.open(Path::new(&segment(1)), Default::default()).unwrap();
    let len = f.len().unwrap();
    fs.flip_bit(Path::new(&segment(1)), (len - 5) * 8).unwrap();
    assert!(matches!(
        open_fault(&fs, small_options()),
        Err(Error::Corruption { .. })
    ));
}

#[test]
fn damaged_segment_header_is_corruption_unless_newest() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    for i in 0..3000u32 {
        db.put(i.to_be_bytes(), [1u8; 64]).unwrap();
    }
    drop(db);
    fs.flip_bit(Path::new(&segment(2)), 9).unwrap();
    let err = open_fault(&fs, small_options()).unwrap_err();
    assert!(matches!(err, Error::Corruption { offset: 0, .. }), "{err}");
}

#[test]
fn damaged_header_of_the_newest_segment_with_records_after_it_is_corruption() {
    // The header is synced before any record is written, so records after
    // a damaged header prove rot, not a torn creation. Both after a clean
    // close and after a crash.
    for fs in [synced_log(5), synced_log_then_crash(5)] {
        fs.flip_bit(Path::new(&segment(1)), 9).unwrap();
        let err = open_fault(&fs, small_options()).unwrap_err();
        assert!(matches!(err, Error::Corruption { offset: 0, .. }), "{err}");
    }
}

#[test]
fn damaged_header_of_a_newest_segment_without_records_is_removed() {
    // A crash while the segment was being created.
    let fs = synced_log(5);
    let db = open_fault(&fs, small_options()).unwrap();
    let crashed = fs.crash(CrashMode::DropUnsynced);
    drop(db);
    let newest = crashed.list_dir(Path::new("/db/wal")).unwrap().len() as u64;
    crashed.flip_bit(Path::new(&segment(newest)), 9).unwrap();
    let db = open_fault(&crashed, small_options()).unwrap();
    assert_eq!(contents(&db).len(), 5);
}
