//! Damaged WAL bytes are reported as corruption, except a torn tail, which
//! is dropped.

mod common;

use std::path::Path;

use common::{contents, open_fault, small_options};
use turtlekv::io::{CrashMode, FaultFs, FileSystem, Mappings, OpenOptions, read_all};
use turtlekv::{Error, WriteOptions};

const SYNC: WriteOptions = WriteOptions::new().sync(true);
/// A version-4 header, naming the database (docs/format.md).
const SEGMENT_HEADER_BYTES: u64 = 48;
const FRAME_HEADER_BYTES: u64 = 12;
/// The marker after the header (docs/format.md): a frame of 12 bytes and
/// a 3-byte payload (first sequence number, synced length, count 0).
const MARKER_BYTES: u64 = 15;

fn segment(id: u64) -> String {
    format!("/db/wal/{id:020}.wal")
}

/// Bytes LEB128 takes for `value` (docs/format.md, "Payload").
fn varint_len(value: u64) -> u64 {
    u64::from(64 - (value | 1).leading_zeros()).div_ceil(7)
}

/// Offset and length of every frame of segment 1 after its marker, walked
/// by the lengths their headers give (a record's size depends on its
/// numbers), up to the zeros of storage reserved after the last.
fn frames(fs: &FaultFs) -> Vec<(u64, u64)> {
    let file = fs.open(Path::new(&segment(1)), OpenOptions::read_only());
    let bytes = read_all(file.unwrap().as_ref()).unwrap();
    let mut frames = Vec::new();
    let mut offset = SEGMENT_HEADER_BYTES + MARKER_BYTES;
    while offset < bytes.len() as u64 && bytes[offset as usize..].iter().any(|&b| b != 0) {
        let at = offset as usize + 4;
        let payload = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let len = FRAME_HEADER_BYTES + u64::from(payload);
        frames.push((offset, len));
        offset += len;
    }
    frames
}

/// End of the last record of segment `id`, a segment with a later one:
/// its last frame is the link to that one (docs/format.md, "Link"), and
/// the record before it is the last one written for the segment itself.
fn end_of_last_record(fs: &FaultFs, id: u64) -> u64 {
    let file = fs.open(Path::new(&segment(id)), OpenOptions::read_only());
    let bytes = read_all(file.unwrap().as_ref()).unwrap();
    let mut ends = Vec::new();
    let mut offset = SEGMENT_HEADER_BYTES;
    while offset < bytes.len() as u64 {
        let at = offset as usize + 4;
        let payload = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        offset += FRAME_HEADER_BYTES + u64::from(payload);
        ends.push(offset);
    }
    assert!(ends.len() >= 3, "a marker, a record and a link");
    ends[ends.len() - 2]
}

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
/// log ends with its last record, with no seal after it (and the storage
/// reserved for appends through the WAL's mapping, zeros).
fn synced_log_then_crash(n: u32) -> FaultFs {
    synced_log_then_crash_with(n, Mappings::Simulated)
}

fn synced_log_then_crash_with(n: u32, mappings: Mappings) -> FaultFs {
    let fs = FaultFs::new();
    fs.set_mappings(mappings);
    let db = open_fault(&fs, small_options()).unwrap();
    for i in 0..n {
        db.put_opt(i.to_be_bytes(), [7u8; 10], &SYNC).unwrap();
    }
    let crashed = fs.crash(CrashMode::DropUnsynced);
    drop(db);
    crashed
}

/// Offset of record `index` (or of the seal after the last) in segment 1.
fn record_offset(fs: &FaultFs, index: usize) -> u64 {
    frames(fs)[index].0
}

#[test]
fn record_size_matches_the_documented_layout() {
    let fs = synced_log(200);
    let frames = frames(&fs);
    assert_eq!(frames.len(), 201, "200 records and a seal");
    for (i, &(offset, len)) in frames[..200].iter().enumerate() {
        // Each put is synced, so it records its own offset as synced:
        // frame (12), sequence number, synced length, count (1), tag (1),
        // value length (1), key (4, behind the default keyspace's 1-byte
        // tag), value (10).
        let expected = 12 + varint_len(i as u64 + 1) + varint_len(offset) + 1 + 2 + 1 + 14;
        assert_eq!(len, expected, "record {i} at {offset}");
    }
    let (seal_at, seal_len) = frames[200];
    assert_eq!(seal_len, 12 + varint_len(201) + varint_len(seal_at) + 1);
    let f = fs.open(Path::new(&segment(1)), Default::default()).unwrap();
    assert_eq!(f.len().unwrap(), seal_at + seal_len);
    let records_end = SEGMENT_HEADER_BYTES + MARKER_BYTES + 3 * 32;
    // Written with `write`, the segment ends with its last record.
    let fs = synced_log_then_crash_with(3, Mappings::Off);
    let f = fs.open(Path::new(&segment(1)), Default::default()).unwrap();
    assert_eq!(f.len().unwrap(), records_end, "no seal");
    // Through the mapping, the storage reserved after it is zeros.
    let fs = synced_log_then_crash_with(3, Mappings::Simulated);
    let f = fs.open(Path::new(&segment(1)), Default::default()).unwrap();
    let bytes = read_all(f.as_ref()).unwrap();
    assert!(bytes.len() as u64 > records_end, "storage reserved ahead");
    assert!(
        bytes[records_end as usize..].iter().all(|&b| b == 0),
        "no seal"
    );
    assert_eq!(self::frames(&fs).len(), 3);
}

#[test]
fn damage_before_synced_records_is_corruption() {
    for index in [0, 5, 18] {
        for byte in [0, 5, 13, 25] {
            let fs = synced_log(20);
            let bit = (record_offset(&fs, index) + byte) * 8 + 3;
            fs.flip_bit(Path::new(&segment(1)), bit).unwrap();
            let err = open_fault(&fs, small_options()).unwrap_err();
            match err {
                Error::Corruption { file, offset, .. } => {
                    assert_eq!(file, Path::new(&segment(1)));
                    assert_eq!(offset, record_offset(&fs, index));
                }
                other => panic!("record {index} byte {byte}: expected corruption, got {other}"),
            }
        }
    }
}

#[test]
fn damaged_last_record_after_a_crash_is_a_torn_tail() {
    let fs = synced_log_then_crash(20);
    let (last_at, last_len) = frames(&fs)[19];
    fs.flip_bit(Path::new(&segment(1)), (last_at + last_len - 1) * 8)
        .unwrap();
    let db = open_fault(&fs, small_options()).unwrap();
    assert_eq!(contents(&db).len(), 19);
    assert_eq!(db.stats().wal_tail_bytes_dropped, last_len);
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
    for byte in [0, 5, 13, 20, 31] {
        let fs = synced_log(20);
        let bit = (record_offset(&fs, 19) + byte) * 8 + 1;
        fs.flip_bit(Path::new(&segment(1)), bit).unwrap();
        match open_fault(&fs, small_options()) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, Path::new(&segment(1)));
                assert_eq!(offset, record_offset(&fs, 19));
            }
            Err(other) => panic!("byte {byte}: expected corruption, got {other}"),
            Ok(_) => panic!("byte {byte}: the damaged record was dropped silently"),
        }
    }
}

#[test]
fn damaged_seal_is_a_torn_tail_and_loses_nothing() {
    let fs = synced_log(20);
    let (seal_at, seal_len) = frames(&fs)[20];
    fs.flip_bit(Path::new(&segment(1)), (seal_at + seal_len - 1) * 8)
        .unwrap();
    let db = open_fault(&fs, small_options()).unwrap();
    assert_eq!(contents(&db).len(), 20);
    assert_eq!(db.stats().wal_tail_bytes_dropped, seal_len);
}

#[test]
fn reopening_without_writes_adds_no_seal() {
    let fs = synced_log(3);
    let sealed_len = {
        let (seal_at, seal_len) = frames(&fs)[3];
        seal_at + seal_len
    };
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
    assert_eq!(len(1), sealed_len);
    assert_eq!(len(4), SEGMENT_HEADER_BYTES + MARKER_BYTES);
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
    // The last record of segment 1 is followed only by its link, but the
    // segment is not the newest, so it was synced: corruption.
    let len = end_of_last_record(&fs, 1);
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

/// `flush_wal` makes an older, unsynced segment durable and leaves proof of
/// it in the current one, so rot in that segment's last record after a
/// crash is corruption, not a torn tail that would drop it and everything
/// after it (here, 102 flushed keys would be dropped silently).
#[test]
fn rot_in_an_older_segment_made_durable_by_flush_wal_is_corruption() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    let mut i = 0u32;
    while fs.list_dir(Path::new("/db/wal")).unwrap().len() < 2 {
        db.put(i.to_be_bytes(), [1u8; 64]).unwrap();
        i += 1;
    }
    for j in 0..100u32 {
        db.put((1_000_000 + j).to_be_bytes(), [2u8; 64]).unwrap();
    }
    db.flush_wal().unwrap();
    let crashed = fs.crash(CrashMode::DropUnsynced);
    drop(db);
    let len = end_of_last_record(&crashed, 1);
    crashed
        .flip_bit(Path::new(&segment(1)), (len - 5) * 8)
        .unwrap();
    match open_fault(&crashed, small_options()) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, Path::new(&segment(1))),
        Err(e) => panic!("unexpected error {e}"),
        Ok(db) => panic!(
            "opened without error: {} keys, {} bytes dropped as a torn tail",
            contents(&db).len(),
            db.stats().wal_tail_bytes_dropped
        ),
    }
}
