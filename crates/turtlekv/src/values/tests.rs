use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::Error;
use crate::io::{CrashMode, FaultFs, FileSystem, OpenOptions};

const DB: &str = "/db";
const IDENTITY: u64 = 0x5eed;

fn open(fs: &FaultFs, file_limit_bytes: u64) -> ValueStore {
    ValueStore::open(
        Arc::new(fs.clone()),
        Path::new(DB),
        IDENTITY,
        file_limit_bytes,
        false,
    )
    .unwrap()
}

fn value(i: usize) -> Vec<u8> {
    (0..100 + i * 97).map(|j| (i * 13 + j) as u8).collect()
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

fn is_corruption<T: std::fmt::Debug>(r: crate::Result<T>) -> bool {
    matches!(r, Err(Error::Corruption { .. }))
}

#[test]
fn records_read_back_across_files_and_reopens() {
    let fs = FaultFs::new();
    let store = open(&fs, 8 * 1024);
    let pointers: Vec<_> = (0..60)
        .map(|i| store.append(&key(i), &value(i)).unwrap().0)
        .collect();
    store.sync().unwrap();
    assert!(store.stats().files > 5, "{:?}", store.stats());
    for (i, p) in pointers.iter().enumerate() {
        assert_eq!(store.read(&key(i), p).unwrap(), value(i));
        assert_eq!(ValuePointer::decode(&p.encode()).unwrap(), *p);
    }
    drop(store);
    let store = open(&fs, 8 * 1024);
    for (i, p) in pointers.iter().enumerate() {
        assert_eq!(store.read(&key(i), p).unwrap(), value(i));
    }
    // A new handle appends to a new file, after the last.
    let next = store.append(b"k", b"v").unwrap().0;
    assert!(pointers.iter().all(|p| p.file_id < next.file_id));
}

#[test]
fn a_record_read_for_another_key_or_through_a_wrong_pointer_is_corruption() {
    let fs = FaultFs::new();
    let store = open(&fs, 1 << 20);
    let p = store.append(b"alpha", &value(3)).unwrap().0;
    let q = store.append(b"bravo", &value(4)).unwrap().0;
    assert!(
        is_corruption(store.read(b"alphb", &p)),
        "same length, other key"
    );
    assert!(is_corruption(store.read(b"alph", &p)), "other length");
    let wrong_crc = ValuePointer {
        crc: p.crc ^ 1,
        ..p
    };
    assert!(is_corruption(store.read(b"alpha", &wrong_crc)));
    let other_record = ValuePointer { crc: p.crc, ..q };
    assert!(is_corruption(store.read(b"bravo", &other_record)));
    let past_end = ValuePointer {
        offset: q.offset + 10_000,
        ..q
    };
    assert!(is_corruption(store.read(b"bravo", &past_end)));
    let no_file = ValuePointer { file_id: 99, ..p };
    assert!(is_corruption(store.read(b"alpha", &no_file)));
    let in_header = ValuePointer { offset: 3, ..p };
    assert!(is_corruption(store.read(b"alpha", &in_header)));
    assert_eq!(store.read(b"bravo", &q).unwrap(), value(4));
}

#[test]
fn damage_in_a_record_is_corruption_at_its_offset() {
    let fs = FaultFs::new();
    let store = open(&fs, 1 << 20);
    let p = store.append(b"k", &value(20)).unwrap().0;
    let path = Path::new(DB)
        .join(VALUES_DIR)
        .join(store::file_name(p.file_id));
    fs.flip_bit(&path, (p.offset + 500) * 8).unwrap();
    match store.read(b"k", &p) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!((file, offset), (path, p.offset));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_file_of_another_database_is_refused_and_a_torn_one_ignored() {
    let fs = FaultFs::new();
    let store = open(&fs, 1 << 20);
    drop(store.append(b"k", b"value").unwrap());
    store.sync().unwrap();
    drop(store);
    let other = ValueStore::open(
        Arc::new(fs.clone()),
        Path::new(DB),
        IDENTITY + 1,
        1 << 20,
        false,
    );
    assert!(
        matches!(other, Err(Error::Corruption { offset: 16, .. })),
        "{other:?}"
    );
    // A file whose header a crash cut short holds no record.
    let torn = Path::new(DB).join(VALUES_DIR).join(store::file_name(2));
    let file = fs.open(&torn, OpenOptions::read_write_create()).unwrap();
    file.write_at(b"TKVF", 0).unwrap();
    let store = open(&fs, 1 << 20);
    assert_eq!(store.append(b"k", b"v").unwrap().0.file_id, 3);
}

#[test]
fn sync_makes_appended_records_durable() {
    let fs = FaultFs::new();
    let store = open(&fs, 1 << 20);
    let synced = store.append(b"a", &value(5)).unwrap().0;
    store.sync().unwrap();
    let unsynced = store.append(b"b", &value(6)).unwrap().0;
    let crashed = fs.crash(CrashMode::DropUnsynced);
    let reopened = open(&crashed, 1 << 20);
    assert_eq!(reopened.read(b"a", &synced).unwrap(), value(5));
    assert!(is_corruption(reopened.read(b"b", &unsynced)));
    assert_eq!(store.read(b"b", &unsynced).unwrap(), value(6));
}

#[test]
fn a_value_larger_than_one_write_round_trips() {
    let fs = FaultFs::new();
    let store = open(&fs, 64 << 20);
    let big: Vec<u8> = (0..3 << 20).map(|i: usize| (i * 7 % 251) as u8).collect();
    let p = store.append(b"big", &big).unwrap().0;
    assert_eq!(store.read(b"big", &p).unwrap(), big);
    assert_eq!(
        store.stats().bytes_written,
        file::record_len(3, p.value_len)
    );
}

/// A store that bypasses the OS page cache reads records through aligned
/// blocks (`FaultFs` refuses unaligned `O_DIRECT` reads), the last ones
/// ending at the file's end, and long records through the page cache.
#[test]
fn direct_reads_return_the_same_records() {
    let fs = FaultFs::new();
    let store =
        ValueStore::open(Arc::new(fs.clone()), Path::new(DB), IDENTITY, 1 << 20, true).unwrap();
    let mut pointers: Vec<_> = (0..40)
        .map(|i| store.append(&key(i), &value(i * 3)).unwrap().0)
        .collect();
    let long: Vec<u8> = (0..(1 << 20) + 5000)
        .map(|i: usize| (i % 253) as u8)
        .collect();
    pointers.push(store.append(&key(40), &long).unwrap().0);
    for (i, p) in pointers.iter().enumerate().take(40) {
        assert_eq!(store.read(&key(i), p).unwrap(), value(i * 3));
    }
    assert_eq!(store.read(&key(40), &pointers[40]).unwrap(), long);
    drop(store);
    let store =
        ValueStore::open(Arc::new(fs.clone()), Path::new(DB), IDENTITY, 1 << 20, true).unwrap();
    assert_eq!(store.read(&key(7), &pointers[7]).unwrap(), value(21));
}

/// `read_many` gives what `read` gives, slot by slot: through `FaultFs`
/// (which refuses unaligned `O_DIRECT` reads) with direct reads, and
/// through the real file system's batched reads, with damage and a
/// missing file reported in their own slots only.
#[test]
fn many_reads_at_once_match_reads_one_at_a_time() {
    let fs = FaultFs::new();
    let direct =
        ValueStore::open(Arc::new(fs.clone()), Path::new(DB), IDENTITY, 1 << 16, true).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let real = ValueStore::open(
        Arc::new(crate::io::RealFs),
        dir.path(),
        IDENTITY,
        1 << 16,
        false,
    )
    .unwrap();
    for store in [&direct, &real] {
        let keys: Vec<Vec<u8>> = (0..50).map(key).collect();
        let mut pointers: Vec<_> = (0..50)
            .map(|i| store.append(&keys[i], &value(i)).unwrap().0)
            .collect();
        store.sync().unwrap();
        // A pointer into a file that does not exist.
        pointers[31].file_id += 1000;
        let wanted: Vec<(&[u8], ValuePointer)> = keys
            .iter()
            .map(Vec::as_slice)
            .zip(pointers.iter().copied())
            .rev()
            .collect();
        let got = store.read_many(&wanted);
        assert_eq!(got.len(), 50);
        for ((k, p), got) in wanted.iter().zip(got) {
            let alone = store.read(k, p);
            match (got, alone) {
                (Ok(a), Ok(b)) => assert_eq!(a, b),
                (Err(Error::Corruption { .. }), Err(Error::Corruption { .. })) => {}
                (a, b) => panic!("{k:?}: {a:?} against {b:?}"),
            }
        }
        assert_eq!(store.read(&keys[49], &pointers[49]).unwrap(), value(49));
        assert!(is_corruption(store.read(&keys[31], &pointers[31])));
    }
    // Damage in one record: its slot alone is corruption.
    let p = direct.append(b"hurt", &value(30)).unwrap().0;
    let q = direct.append(b"whole", &value(31)).unwrap().0;
    let path = Path::new(DB)
        .join(VALUES_DIR)
        .join(store::file_name(p.file_id));
    fs.flip_bit(&path, (p.offset + 300) * 8).unwrap();
    let got = direct.read_many(&[(b"hurt", p), (b"whole", q)]);
    assert!(
        matches!(got[0], Err(Error::Corruption { .. })),
        "{:?}",
        got[0]
    );
    assert_eq!(got[1].as_ref().unwrap(), &value(31));
}
