//! Separated values (`docs/format.md`, "Value files"): every read path
//! returns them whole, crashes lose none that a sync promised and never
//! leave one that reads wrong, damage is `Error::Corruption`, and backups
//! carry them.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::io::{CrashMode, FaultFs, FileSystem};
use crate::values::VALUES_DIR;
use crate::{Db, Error, Options, WriteBatch, WriteOptions};

const DIR: &str = "/db";

use super::test_contents as contents;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    Options {
        value_separation_threshold_bytes: 1024,
        ..super::checkpointing_test_options()
    }
}

fn open(fs: &FaultFs) -> crate::Result<Db> {
    Db::open_with_fs(DIR, options(), Arc::new(fs.clone()))
}

/// A value of `len` bytes that names its key and a round, so that a value
/// read back under another key or from another write does not pass.
fn value_of(key: u32, round: u32, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(key * 7 + round) as u8)
        .collect();
    v[..4].copy_from_slice(&key.to_be_bytes());
    v[4..8].copy_from_slice(&round.to_be_bytes());
    v
}

fn assert_reads(db: &Db, model: &Model) {
    assert_eq!(&contents(db), model, "a scan");
    let reversed: Vec<_> = db
        .range::<&[u8], _>(..)
        .rev()
        .map(|kv| kv.unwrap().0.to_vec())
        .collect();
    assert!(reversed.iter().rev().eq(model.keys()), "a reverse scan");
    for (k, v) in model {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]), "get {k:?}");
    }
    let keys: Vec<&[u8]> = model.keys().map(Vec::as_slice).collect();
    let many = db.multi_get(&keys).unwrap();
    for ((_, v), got) in model.iter().zip(many) {
        assert_eq!(got.as_deref(), Some(&v[..]), "multi_get");
    }
}

#[test]
fn values_on_both_sides_of_the_threshold_read_back_everywhere() {
    let fs = FaultFs::new();
    let db = open(&fs).unwrap();
    let mut model = Model::new();
    // Lengths around the threshold, one past the leaf's 16 KiB, and one
    // past the largest value a leaf ever held.
    let lens = [10, 1023, 1024, 5000, 20_000, 300_000];
    for round in 0..3u32 {
        for key in 0..60u32 {
            let len = lens[(key as usize + round as usize) % lens.len()];
            let k = key.to_be_bytes().to_vec();
            let v = value_of(key, round, len);
            if key % 9 == 4 && round == 2 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        assert_reads(&db, &model);
    }
    let stats = db.stats();
    assert!(stats.value_files >= 1, "{stats:?}");
    assert!(stats.value_records_written > 0 && stats.value_reads > 0);
    let snapshot = db.snapshot();
    let before = model.clone();
    db.put(0u32.to_be_bytes(), value_of(0, 9, 4000)).unwrap();
    model.insert(0u32.to_be_bytes().to_vec(), value_of(0, 9, 4000));
    assert_eq!(
        snapshot.get(0u32.to_be_bytes()).unwrap().as_deref(),
        before.get(0u32.to_be_bytes().as_slice()).map(Vec::as_slice),
        "a snapshot keeps the value it saw"
    );
    drop(snapshot);
    db.checkpoint_now().unwrap();
    assert_reads(&db, &model);
    let report = db.check().unwrap();
    assert!(report.value_pointers > 0, "{report:?}");
    drop(db);
    let db = open(&fs).unwrap();
    assert_reads(&db, &model);
    db.check().unwrap();
}

#[test]
fn batches_and_transactions_separate_their_large_values() {
    let fs = FaultFs::new();
    let db = open(&fs).unwrap();
    let mut batch = WriteBatch::new();
    batch.put(b"a", value_of(1, 0, 3000));
    batch.put(b"b", value_of(2, 0, 10));
    db.write(batch, &WriteOptions::new().sync(true)).unwrap();
    let mut txn = db.transaction();
    assert_eq!(txn.get(b"a").unwrap().unwrap(), value_of(1, 0, 3000));
    txn.put(b"c", value_of(3, 0, 70_000));
    assert_eq!(txn.get(b"c").unwrap().unwrap(), value_of(3, 0, 70_000));
    txn.commit(&WriteOptions::new()).unwrap();
    assert_eq!(db.get(b"c").unwrap().unwrap(), value_of(3, 0, 70_000));
    assert_eq!(db.stats().value_records_written, 2);
    drop(db);
    let db = open(&fs).unwrap();
    assert_eq!(db.get(b"a").unwrap().unwrap(), value_of(1, 0, 3000));
    assert_eq!(db.get(b"c").unwrap().unwrap(), value_of(3, 0, 70_000));
}

/// Unsynced WAL records may reach the disk while the value records they
/// point at do not (the log's pages are written back on their own): such
/// a record is a torn tail, dropped at replay, never a key that reads
/// as corruption. Every synced write survives.
#[test]
fn a_crash_loses_no_synced_value_and_leaves_none_broken() {
    for seed in 0..12u64 {
        let fs = FaultFs::new();
        let db = open(&fs).unwrap();
        // Every write in order, and how many of them a sync covered.
        let mut log: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut synced_writes = 0;
        for i in 0..80u32 {
            let key = (i % 25).to_be_bytes().to_vec();
            let value = value_of(i % 25, i, 1500 + (i as usize * 37) % 3000);
            let sync = i % 10 == 9;
            db.put_opt(&key, &value, &WriteOptions::new().sync(sync))
                .unwrap();
            log.push((key, value));
            if sync {
                synced_writes = log.len();
            }
        }
        let synced: Model = log[..synced_writes].iter().cloned().collect();
        // The handle stays alive: a power cut, not a clean close.
        let crashed = fs.crash(CrashMode::KeepRandomSubset { seed });
        let reopened = open(&crashed).unwrap();
        let after = contents(&reopened);
        for (k, v) in &synced {
            let got = after.get(k).expect("a synced key survives");
            // Or a later write of the key, which may survive too.
            let later = log[synced_writes..]
                .iter()
                .any(|(lk, lv)| lk == k && lv == got);
            assert!(got == v || later, "seed {seed}: key {k:?}");
        }
        for (k, v) in &after {
            let round = u32::from_be_bytes(v[4..8].try_into().unwrap());
            let key = u32::from_be_bytes(k[..4].try_into().unwrap());
            assert_eq!(
                v,
                &value_of(key, round, v.len()),
                "seed {seed}: a value read whole"
            );
        }
        reopened.check().unwrap();
        drop(db);
    }
}

#[test]
fn a_damaged_value_record_is_corruption() {
    let fs = FaultFs::new();
    let db = open(&fs).unwrap();
    db.put(b"k", value_of(1, 0, 4000)).unwrap();
    db.put(b"small", b"v").unwrap();
    db.checkpoint_now().unwrap();
    drop(db);
    let dir = std::path::Path::new(DIR).join(VALUES_DIR);
    let name = fs.list_dir(&dir).unwrap().pop().unwrap();
    // Inside the value, past the 48-byte header and the record's head.
    fs.flip_bit(&dir.join(name), (48 + 20 + 1000) * 8).unwrap();
    let db = open(&fs).unwrap();
    assert_eq!(db.get(b"small").unwrap().unwrap(), &b"v"[..]);
    match db.get(b"k") {
        Err(Error::Corruption { reason, .. }) => assert!(reason.contains("checksum"), "{reason}"),
        other => panic!("expected corruption, got {other:?}"),
    }
    assert!(matches!(db.check(), Err(Error::Corruption { .. })));
    let mut iter = db.range::<&[u8], _>(..);
    assert!(matches!(iter.next(), Some(Err(Error::Corruption { .. }))));
    assert!(iter.next().is_none(), "an error ends the iteration");
    // Keys alone never touch the damaged value.
    let keys: Vec<_> = db.iter().keys().map(Result::unwrap).collect();
    assert_eq!(keys, [&b"k"[..], &b"small"[..]]);
}

#[test]
fn keys_only_iteration_reads_no_value_file() {
    let fs = FaultFs::new();
    let db = open(&fs).unwrap();
    let ks = db.keyspace("docs").unwrap();
    let mut model = Model::new();
    for key in 0..50u32 {
        let v = value_of(key, 0, if key % 3 == 0 { 100 } else { 3000 });
        db.put(key.to_be_bytes(), &v).unwrap();
        ks.put(key.to_be_bytes(), &v).unwrap();
        model.insert(key.to_be_bytes().to_vec(), v);
        if key == 25 {
            db.checkpoint_now().unwrap();
        }
    }
    db.delete(7u32.to_be_bytes()).unwrap();
    model.remove(7u32.to_be_bytes().as_slice());
    let reads_before = db.stats().value_reads;
    let forward: Vec<Vec<u8>> = db.iter().keys().map(|k| k.unwrap().to_vec()).collect();
    assert!(forward.iter().eq(model.keys()));
    let backward: Vec<Vec<u8>> = db
        .iter()
        .keys()
        .rev()
        .map(|k| k.unwrap().to_vec())
        .collect();
    assert!(backward.iter().rev().eq(model.keys()));
    let in_keyspace = ks.range(10u32.to_be_bytes()..20u32.to_be_bytes()).keys();
    let expected: Vec<_> = (10..20u32).map(|k| k.to_be_bytes().to_vec()).collect();
    assert_eq!(
        in_keyspace.map(|k| k.unwrap().to_vec()).collect::<Vec<_>>(),
        expected
    );
    let mut sought = db.iter().keys();
    sought.seek(40u32.to_be_bytes());
    sought.seek_back(41u32.to_be_bytes());
    let both: Vec<_> = [sought.next(), sought.next_back(), sought.next()]
        .into_iter()
        .map(|k| k.map(|k| k.unwrap().to_vec()))
        .collect();
    let key = |k: u32| Some(k.to_be_bytes().to_vec());
    assert_eq!(both, [key(40), key(41), None]);
    assert_eq!(db.stats().value_reads, reads_before, "keys only");
    assert_eq!(contents(&db), model);
    assert!(
        db.stats().value_reads > reads_before,
        "a full scan reads values"
    );
}

#[test]
fn a_backup_carries_the_value_files() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dest) = (dir.path().join("src"), dir.path().join("dest"));
    let db = Db::open(&src, options()).unwrap();
    let mut model = Model::new();
    for key in 0..40u32 {
        let v = value_of(key, 0, 500 + key as usize * 200);
        db.put(key.to_be_bytes(), &v).unwrap();
        model.insert(key.to_be_bytes().to_vec(), v);
    }
    db.checkpoint_now().unwrap();
    // Some only in the MemTable: the backup logs their pointers.
    for key in 40..50u32 {
        let v = value_of(key, 1, 6000);
        db.put(key.to_be_bytes(), &v).unwrap();
        model.insert(key.to_be_bytes().to_vec(), v);
    }
    let report = db.backup(&dest).unwrap();
    assert!(report.value_files >= 1, "{report:?}");
    db.put(0u32.to_be_bytes(), b"after").unwrap();
    let copy = Db::open(&dest, options()).unwrap();
    assert_reads(&copy, &model);
    copy.check().unwrap();
}

#[test]
fn values_too_long_for_a_leaf_are_separated_whatever_the_threshold() {
    let fs = FaultFs::new();
    let options = Options {
        value_separation_threshold_bytes: u64::MAX,
        leaf_size_bytes: 4096,
        ..super::checkpointing_test_options()
    };
    let db = Db::open_with_fs(DIR, options, Arc::new(fs.clone())).unwrap();
    db.put(b"big", value_of(1, 0, 10_000)).unwrap();
    db.put(b"small", value_of(2, 0, 100)).unwrap();
    db.checkpoint_now().unwrap();
    assert_eq!(db.get(b"big").unwrap().unwrap(), value_of(1, 0, 10_000));
    assert_eq!(db.stats().value_records_written, 1);
    let low = Options {
        value_separation_threshold_bytes: 63,
        ..Options::default()
    };
    assert!(matches!(
        Db::open_with_fs("/other", low, Arc::new(fs)),
        Err(Error::InvalidOptions(_))
    ));
}

fn gc_options() -> Options {
    Options {
        value_separation_threshold_bytes: 512,
        value_file_size_bytes: 16 * 1024,
        checkpoint_distance_bytes: 64 * 1024,
        cache_capacity_bytes: 1 << 20,
        ..super::checkpointing_test_options()
    }
}

/// Waits (up to a minute) until `done` holds of the stats.
fn wait_for(db: &Db, what: &str, done: impl Fn(&crate::Stats) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done(&db.stats()) {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {:?}",
            db.stats()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn overwrite_rounds(db: &Db, model: &mut Model, keys: u32, rounds: u32) {
    for round in 0..rounds {
        for key in 0..keys {
            let v = value_of(key, round, 1000 + (key as usize * 53) % 1500);
            db.put(key.to_be_bytes(), &v).unwrap();
            model.insert(key.to_be_bytes().to_vec(), v);
        }
    }
}

#[test]
fn overwritten_values_are_collected_and_the_rest_still_read_whole() {
    let fs = FaultFs::new();
    let db = Db::open_with_fs(DIR, gc_options(), Arc::new(fs.clone())).unwrap();
    let mut model = Model::new();
    overwrite_rounds(&db, &mut model, 60, 8);
    // A snapshot taken now keeps the files its values lie in.
    let snapshot = db.snapshot();
    let seen: Model = model.clone();
    // Two keys in three: the files of the last round keep a third of
    // their records live, which the collector moves.
    for round in 8..12u32 {
        for key in (0..60u32).filter(|k| k % 3 != 0) {
            let v = value_of(key, round, 1000 + (key as usize * 53) % 1500);
            db.put(key.to_be_bytes(), &v).unwrap();
            model.insert(key.to_be_bytes().to_vec(), v);
        }
    }
    db.checkpoint_now().unwrap();
    wait_for(&db, "files moved", |s| s.value_files_moved >= 3);
    for (k, v) in &seen {
        assert_eq!(
            snapshot.get(k).unwrap().as_deref(),
            Some(&v[..]),
            "the snapshot's value"
        );
    }
    drop(snapshot);
    db.checkpoint_now().unwrap();
    let live: u64 = model.values().map(|v| v.len() as u64).sum();
    wait_for(&db, "garbage removed", |s| s.value_file_bytes < 3 * live);
    let stats = db.stats();
    assert!(stats.value_bytes_moved > 0, "{stats:?}");
    // The collector's moves are the engine's writes, not the user's.
    assert_eq!(stats.puts, 60 * 8 + 40 * 4, "{stats:?}");
    assert_reads(&db, &model);
    db.check().unwrap();
    drop(db);
    let db = Db::open_with_fs(DIR, gc_options(), Arc::new(fs.clone())).unwrap();
    assert_reads(&db, &model);
    db.check().unwrap();
}

/// Crashes while value garbage collection moves records and removes
/// files: every synced value is there, every value reads whole.
#[test]
fn a_crash_during_value_garbage_collection_loses_nothing_synced() {
    for seed in 0..4u64 {
        let fs = FaultFs::new();
        let db = Db::open_with_fs(DIR, gc_options(), Arc::new(fs.clone())).unwrap();
        let mut model = Model::new();
        overwrite_rounds(&db, &mut model, 40, 6);
        db.flush_wal().unwrap();
        let synced = model.clone();
        wait_for(&db, "a move", |s| s.value_files_moved > seed);
        let crashed = fs.crash(CrashMode::KeepRandomSubset { seed });
        let reopened = Db::open_with_fs(DIR, gc_options(), Arc::new(crashed)).unwrap();
        assert_reads(&reopened, &synced);
        reopened.check().unwrap();
        drop(db);
    }
}

#[test]
fn a_refused_large_put_writes_no_value() {
    let fs = FaultFs::new();
    let db = open(&fs).unwrap();
    let ks = db.keyspace("gone").unwrap();
    ks.put(b"k", value_of(1, 0, 5000)).unwrap();
    assert_eq!(db.stats().value_records_written, 1);
    db.drop_keyspace("gone").unwrap();
    assert!(matches!(
        ks.put(b"k", value_of(1, 1, 5000)),
        Err(Error::KeyspaceDropped(_))
    ));
    let too_long_key = vec![7u8; crate::MAX_KEY_SIZE + 1];
    assert!(matches!(
        db.put(&too_long_key, value_of(2, 0, 5000)),
        Err(Error::KeyTooLarge { .. })
    ));
    assert_eq!(db.stats().value_records_written, 1, "nothing more written");
}

/// A load of new keys makes no garbage: after the round an open starts,
/// the collector reads no value file back. Overwrites then start rounds.
#[test]
fn a_load_of_new_keys_judges_no_value_file_until_overwrites_come() {
    let fs = FaultFs::new();
    let db = Db::open_with_fs(DIR, gc_options(), Arc::new(fs.clone())).unwrap();
    let mut model = Model::new();
    for key in 0..50u32 {
        let v = value_of(key, 0, 1500);
        db.put(key.to_be_bytes(), &v).unwrap();
        model.insert(key.to_be_bytes().to_vec(), v);
    }
    // The first round (after the open) judges what is sealed by then.
    wait_for(&db, "a first round", |s| s.value_files_judged > 0);
    db.checkpoint_now().unwrap();
    let first_round = db.stats().value_files_judged;
    for key in 50..1000u32 {
        let v = value_of(key, 0, 1500);
        db.put(key.to_be_bytes(), &v).unwrap();
        model.insert(key.to_be_bytes().to_vec(), v);
    }
    db.checkpoint_now().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let stats = db.stats();
    assert!(stats.value_files > 50, "{stats:?}");
    assert_eq!(stats.value_files_judged, first_round, "{stats:?}");
    // No garbage: all of every file but its header is live.
    let headers = 48 * stats.value_files;
    assert!(
        stats.value_live_bytes <= stats.value_file_bytes,
        "{stats:?}"
    );
    assert!(
        stats.value_live_bytes + headers >= stats.value_file_bytes,
        "{stats:?}"
    );
    // Overwrite every key three times: the sampled garbage starts
    // rounds, and the files of the load are collected.
    overwrite_rounds(&db, &mut model, 1000, 3);
    db.checkpoint_now().unwrap();
    let live: u64 = model.values().map(|v| v.len() as u64).sum();
    wait_for(&db, "garbage collected", |s| s.value_file_bytes < 3 * live);
    assert_reads(&db, &model);
    // A range deletion starts a round too, however few ops it took.
    db.delete_range(0u32.to_be_bytes(), 1000u32.to_be_bytes())
        .unwrap();
    db.checkpoint_now().unwrap();
    wait_for(&db, "the deleted range's files removed", |s| {
        s.value_file_bytes < 64 * 1024
    });
    assert!(db.stats().value_live_bytes < 64 * 1024);
    assert!(contents(&db).is_empty());
}

/// A hot separated value is read from its file once: the record cache
/// then holds the value in place of its pointer.
#[test]
fn a_hot_separated_value_is_read_from_its_file_once() {
    let fs = FaultFs::new();
    let options = Options {
        cache_capacity_bytes: 8 << 20,
        ..options()
    };
    let db = Db::open_with_fs(DIR, options, Arc::new(fs.clone())).unwrap();
    db.set_record_cache_capacity(1 << 20);
    let v = value_of(1, 0, 3000);
    db.put(b"hot", &v).unwrap();
    db.checkpoint_now().unwrap();
    let reads = |db: &Db| db.stats().value_reads;
    let before = reads(&db);
    for _ in 0..5 {
        assert_eq!(db.get(b"hot").unwrap().unwrap(), v);
    }
    assert_eq!(reads(&db), before + 1, "{:?}", db.stats());
    // A new write of a cached key caches its value at once: no read of
    // its file follows, through `put` or through a batch.
    let newer = value_of(1, 1, 3000);
    db.put(b"hot", &newer).unwrap();
    assert_eq!(db.get(b"hot").unwrap().unwrap(), newer);
    let snapshot = db.snapshot();
    let mut batch = WriteBatch::new();
    let newest = value_of(1, 2, 4000);
    batch.put(b"other", b"small").put(b"hot", &newest);
    db.write(batch, &WriteOptions::default()).unwrap();
    assert_eq!(db.get(b"hot").unwrap().unwrap(), newest);
    let many = db.multi_get([b"hot"]).unwrap();
    assert_eq!(many[0].as_deref(), Some(&newest[..]));
    assert_eq!(reads(&db), before + 1, "{:?}", db.stats());
    // A snapshot from before still reads what it saw.
    assert_eq!(snapshot.get(b"hot").unwrap().unwrap(), newer);
    db.checkpoint_now().unwrap();
    assert_eq!(db.get(b"hot").unwrap().unwrap(), newest);
}

/// A file of more records than a judgement looks up is judged from a
/// sample, and collected whole: its live records all move.
#[test]
fn a_large_file_is_judged_from_a_sample_and_collected_whole() {
    let fs = FaultFs::new();
    let options = Options {
        value_separation_threshold_bytes: 64,
        value_file_size_bytes: 1 << 20,
        ..gc_options()
    };
    let db = Db::open_with_fs(DIR, options.clone(), Arc::new(fs.clone())).unwrap();
    let mut model = Model::new();
    let put = |key: u32, round: u32, model: &mut Model| {
        let v = value_of(key, round, 100);
        db.put(key.to_be_bytes(), &v).unwrap();
        model.insert(key.to_be_bytes().to_vec(), v);
    };
    // 7,000 records of about 120 bytes: the first file holds all of them.
    for key in 0..7000 {
        put(key, 0, &mut model);
    }
    // Four keys in five overwritten, twice: the first file is a fifth live.
    for round in 1..3 {
        for key in (0..7000).filter(|k| k % 5 != 0) {
            put(key, round, &mut model);
        }
    }
    db.checkpoint_now().unwrap();
    wait_for(&db, "the first file removed", |s| {
        s.value_files_removed >= 1
    });
    let stats = db.stats();
    assert!(stats.value_bytes_moved > 0, "{stats:?}");
    assert_reads(&db, &model);
    db.check().unwrap();
    drop(db);
    let db = Db::open_with_fs(DIR, options, Arc::new(fs)).unwrap();
    assert_reads(&db, &model);
}
