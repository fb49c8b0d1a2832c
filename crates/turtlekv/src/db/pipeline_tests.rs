//! The checkpoint pipeline's control flow, on an in-memory target: freezing
//! at the checkpoint distance, back-pressure, reads across MemTables and
//! tree, snapshots, WAL trimming, recovery from checkpoint + WAL, failures.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::checkpoint::MAX_FROZEN_MEMTABLES;
use crate::io::{FaultFs, FileSystem};
use crate::store::memory::MemoryTreeStore;
use crate::store::{Coverage, TreeStore, TreeVersion};
use crate::{Db, Error, Options, WriteBatch, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(distance_bytes: u64) -> Options {
    Options {
        checkpoint_distance_bytes: distance_bytes,
        wal_segment_size_bytes: 64 * 1024,
        ..Options::default()
    }
}

fn open(fs: &FaultFs, target: &Arc<MemoryTreeStore>, distance_bytes: u64) -> Db {
    let target = target.clone();
    Db::open_with_store(
        "/db",
        options(distance_bytes),
        Arc::new(fs.clone()),
        &move |_, _, _| Ok(Some(target.clone() as Arc<dyn TreeStore>)),
    )
    .unwrap()
}

fn contents(db: &Db) -> Model {
    db.range::<&[u8], _>(..)
        .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect()
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:05}", i % 3000).into_bytes()
}

/// Puts, overwrites and deletes over 3000 keys; returns the model.
fn churn(db: &Db, model: &mut Model, ops: u64, seed: u64) {
    let mut x = seed | 1;
    for i in 0..ops {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = key(x);
        // Independent of the key (3000 is a multiple of 5), so every key
        // sees puts and deletes.
        if (x >> 32).is_multiple_of(5) {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let v = format!("v{i}-{}", x % 97).into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
}

fn segment_count(fs: &FaultFs) -> usize {
    fs.list_dir(Path::new("/db/wal")).unwrap().len()
}

#[test]
fn many_checkpoints_keep_reads_right_and_the_wal_short() {
    let fs = FaultFs::new();
    let target = Arc::new(MemoryTreeStore::default());
    let db = open(&fs, &target, 16 * 1024);
    let mut model = Model::new();
    churn(&db, &mut model, 20_000, 7);
    let stats = db.stats();
    assert!(stats.checkpoints >= 50, "{stats:?}");
    assert!(stats.frozen_memtables <= MAX_FROZEN_MEMTABLES as u64);
    assert!(stats.wal_segments_trimmed > 0);
    assert!(stats.memtable_bytes < 2 * 16 * 1024 + 4096, "{stats:?}");
    assert_eq!(contents(&db), model);
    for (k, v) in model.iter().step_by(17) {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]));
    }
    let mut reversed: Vec<_> = db
        .range::<&[u8], _>(..)
        .rev()
        .map(|kv| kv.unwrap().0.to_vec())
        .collect();
    reversed.reverse();
    assert_eq!(reversed, model.keys().cloned().collect::<Vec<_>>());
    assert!(segment_count(&fs) <= 8, "{} segments", segment_count(&fs));

    // Recovery: the checkpoint plus the WAL above it.
    let covered = db.stats().checkpoint_covered_sequence;
    let last = db.stats().last_sequence;
    drop(db);
    let db = open(&fs, &target, 16 * 1024);
    assert_eq!(contents(&db), model);
    assert_eq!(db.stats().last_sequence, last);
    assert!(db.stats().wal_records_replayed <= last - covered);
}

#[test]
fn snapshots_survive_checkpoints() {
    let fs = FaultFs::new();
    let target = Arc::new(MemoryTreeStore::default());
    let db = open(&fs, &target, 8 * 1024);
    let mut model = Model::new();
    churn(&db, &mut model, 3_000, 3);
    let snapshot = db.snapshot();
    let frozen_model = model.clone();
    churn(&db, &mut model, 6_000, 11);
    assert!(db.stats().checkpoints > 10);
    let seen: Model = snapshot
        .range::<&[u8], _>(..)
        .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert_eq!(seen, frozen_model);
    assert_eq!(contents(&db), model);
}

#[test]
fn slow_checkpoints_stall_writers_instead_of_queueing() {
    let fs = FaultFs::new();
    let target = Arc::new(MemoryTreeStore::default());
    *target.delay.lock() = Duration::from_millis(20);
    let db = open(&fs, &target, 4 * 1024);
    let mut model = Model::new();
    churn(&db, &mut model, 2_000, 5);
    let stats = db.stats();
    assert!(stats.write_stalls > 0, "{stats:?}");
    assert!(stats.write_stall_nanos > 0);
    assert!(stats.frozen_memtables <= MAX_FROZEN_MEMTABLES as u64);
    assert_eq!(contents(&db), model);
}

#[test]
fn checkpoint_now_makes_everything_durable_in_the_tree() {
    let fs = FaultFs::new();
    let target = Arc::new(MemoryTreeStore::default());
    let db = open(&fs, &target, 1 << 30);
    let mut model = Model::new();
    churn(&db, &mut model, 500, 9);
    assert_eq!(db.stats().checkpoints, 0);
    db.checkpoint_now().unwrap();
    let stats = db.stats();
    assert_eq!(stats.checkpoints, 1);
    assert_eq!(stats.checkpoint_covered_sequence, stats.last_sequence);
    assert_eq!(stats.frozen_memtables, 0);
    assert_eq!(stats.memtable_entries, 0);
    // Nothing new: no checkpoint.
    db.checkpoint_now().unwrap();
    assert_eq!(db.stats().checkpoints, 1);
    drop(db);
    // Everything is in the target: nothing to replay.
    let db = open(&fs, &target, 1 << 30);
    assert_eq!(db.stats().wal_records_replayed, 0);
    assert_eq!(contents(&db), model);
}

/// `checkpoint_now` returns only once the checkpoints it waits for have
/// ended, not as soon as their MemTables left the frozen list: the WAL
/// they covered is gone and they are counted.
#[test]
fn checkpoint_now_waits_for_checkpoints_to_end() {
    let fs = FaultFs::new();
    let target = Arc::new(MemoryTreeStore::default());
    *target.reclaim_delay.lock() = Duration::from_millis(300);
    let db = open(&fs, &target, 1 << 30);
    let mut model = Model::new();
    churn(&db, &mut model, 500, 5);
    std::thread::scope(|scope| {
        let first = scope.spawn(|| db.checkpoint_now());
        // The first call's checkpoint is published and in its reclaim
        // delay; nothing is left to freeze.
        while target.checkpoints.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        db.checkpoint_now().unwrap();
        let stats = db.stats();
        assert_eq!(stats.checkpoints, 1, "returned before the checkpoint ended");
        assert_eq!(stats.checkpoint_covered_sequence, stats.last_sequence);
        first.join().unwrap().unwrap();
    });
    drop(db);
    let db = open(&fs, &target, 1 << 30);
    assert_eq!(db.stats().wal_records_replayed, 0);
    assert_eq!(contents(&db), model);
}

/// The checkpoint thread's read-pressure freeze never waits: not for a
/// frozen slot, and not behind a leader stalled for one (that leader
/// waits for the checkpoint thread, so a freeze queued behind it in the
/// write path would hang every writer).
#[test]
fn the_read_pressure_freeze_never_waits() {
    let fs = FaultFs::new();
    let target = Arc::new(MemoryTreeStore::default());
    *target.delay.lock() = Duration::from_millis(300);
    let db = open(&fs, &target, 4 * 1024);
    let checkpoints = || target.checkpoints.load(std::sync::atomic::Ordering::SeqCst);
    db.put(b"first", b"1").unwrap();
    assert!(db.inner.freeze_if_idle().unwrap(), "idle, with a free slot");
    assert_eq!(db.stats().frozen_memtables, 1);
    // The slot is taken until the first checkpoint ends.
    db.put(b"second", b"2").unwrap();
    assert!(!db.inner.freeze_if_idle().unwrap());
    assert_eq!(checkpoints(), 0, "waited for the frozen slot");
    let mut model = Model::new();
    std::thread::scope(|s| {
        // A writer fills the active MemTable to the distance; its next
        // leader stalls for the slot.
        s.spawn(|| churn(&db, &mut model, 150, 3));
        while db.stats().memtable_bytes < 4 * 1024 {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        assert!(!db.inner.freeze_if_idle().unwrap());
        assert_eq!(checkpoints(), 0, "waited behind the stalled leader");
    });
    model.insert(b"first".to_vec(), b"1".to_vec());
    model.insert(b"second".to_vec(), b"2".to_vec());
    assert_eq!(contents(&db), model);
}

#[test]
fn checkpoint_distance_changes_at_runtime() {
    let fs = FaultFs::new();
    let target = Arc::new(MemoryTreeStore::default());
    let db = open(&fs, &target, 1 << 30);
    let mut model = Model::new();
    churn(&db, &mut model, 2_000, 13);
    assert_eq!(db.stats().checkpoints, 0);
    assert!(matches!(
        db.set_checkpoint_distance(100),
        Err(Error::InvalidOptions(_))
    ));
    db.set_checkpoint_distance(8 * 1024).unwrap();
    churn(&db, &mut model, 2_000, 17);
    db.checkpoint_now().unwrap();
    assert!(db.stats().checkpoints > 5, "{:?}", db.stats());
    assert_eq!(db.stats().checkpoint_distance_bytes, 8 * 1024);
    assert_eq!(contents(&db), model);
}

#[test]
fn a_failed_checkpoint_poisons_writes_and_keeps_reads() {
    let fs = FaultFs::new();
    let target = Arc::new(MemoryTreeStore::default());
    *target.fail_after.lock() = Some(2);
    let db = open(&fs, &target, 4 * 1024);
    let mut model = Model::new();
    let mut failure = None;
    for i in 0..20_000u64 {
        let mut batch = WriteBatch::new();
        batch.put(key(i), i.to_be_bytes());
        match db.write(batch, &WriteOptions::default()) {
            Ok(()) => {
                model.insert(key(i), i.to_be_bytes().to_vec());
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    assert!(
        matches!(failure, Some(Error::Poisoned { .. })),
        "{failure:?}"
    );
    assert!(matches!(db.put(b"k", b"v"), Err(Error::Poisoned { .. })));
    assert!(matches!(db.checkpoint_now(), Err(Error::Poisoned { .. })));
    assert_eq!(contents(&db), model);
    drop(db);
    // Reopening recovers every acknowledged write from checkpoint + WAL.
    *target.fail_after.lock() = None;
    let db = open(&fs, &target, 4 * 1024);
    assert_eq!(contents(&db), model);
}

#[test]
fn concurrent_writers_and_readers_across_checkpoints() {
    let fs = FaultFs::new();
    let target = Arc::new(MemoryTreeStore::default());
    let db = open(&fs, &target, 8 * 1024);
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let db = db.clone();
            s.spawn(move || {
                for round in 0..1_500u64 {
                    let mut batch = WriteBatch::new();
                    for i in 0..4 {
                        batch.put(format!("w{w}:{i}"), round.to_be_bytes());
                    }
                    db.write(batch, &WriteOptions::default()).unwrap();
                }
            });
        }
        let db = db.clone();
        s.spawn(move || {
            for _ in 0..300 {
                let snap = db.snapshot();
                for w in 0..2u64 {
                    let values: Vec<_> = snap
                        .prefix(format!("w{w}:"))
                        .map(|kv| kv.unwrap().1)
                        .collect();
                    assert!(values.is_empty() || values.len() == 4);
                    assert!(values.windows(2).all(|p| p[0] == p[1]), "half a batch");
                }
            }
        });
    });
    assert!(db.stats().checkpoints > 5);
    for w in 0..2u64 {
        for i in 0..4 {
            let v = db.get(format!("w{w}:{i}")).unwrap().unwrap();
            assert_eq!(&v[..], &1_499u64.to_be_bytes());
        }
    }
}

#[test]
fn check_covers_the_tree_after_checkpoints() {
    let fs = FaultFs::new();
    let target = Arc::new(MemoryTreeStore::default());
    let db = open(&fs, &target, 8 * 1024);
    let mut model = Model::new();
    churn(&db, &mut model, 3_000, 21);
    db.checkpoint_now().unwrap();
    let report = db.check().unwrap();
    assert_eq!(report.tree_keys, model.len() as u64);
    assert_eq!(report.memtable_keys, 0);
    assert!(report.wal_segments >= 1);
}

/// A running checkpoint takes room for its working set from the page
/// cache, and gives it back when it ends, failed ones included.
#[test]
fn checkpoints_take_their_reserve_from_the_cache_and_give_it_back() {
    const BUDGET_BYTES: u64 = 8 << 20;
    const DISTANCE_BYTES: u64 = 256 << 10;
    let fs = FaultFs::new();
    let target = Arc::new(MemoryTreeStore::default());
    *target.fail_after.lock() = Some(4);
    let options = Options {
        cache_capacity_bytes: BUDGET_BYTES,
        record_cache_capacity_bytes: 0,
        ..options(DISTANCE_BYTES)
    };
    let handle = target.clone();
    let db = Db::open_with_store("/db", options, Arc::new(fs.clone()), &move |_, _, _| {
        Ok(Some(handle.clone() as Arc<dyn TreeStore>))
    })
    .unwrap();
    let value = [7u8; 200];
    let mut failed = false;
    for i in 0..40_000u64 {
        if db.put(format!("k{i:08}").as_bytes(), value).is_err() {
            failed = true;
            break;
        }
    }
    assert!(failed, "the fifth checkpoint fails and poisons writes");
    let seen = target.cache_capacity_at_checkpoints.lock().clone();
    assert!(seen.len() >= 5, "{seen:?}");
    // The MemTable being checkpointed holds about the distance, and twice
    // that is set aside on top.
    for capacity in &seen {
        assert!(
            *capacity <= BUDGET_BYTES - 3 * DISTANCE_BYTES,
            "capacity {capacity} during a checkpoint: {seen:?}"
        );
    }
    // Once the failed checkpoint ended, only the MemTables hold memory.
    let step = BUDGET_BYTES / 64;
    let after = target
        .cache_capacity_bytes
        .load(std::sync::atomic::Ordering::SeqCst);
    let memtables = db.stats().memtable_bytes;
    assert!(
        after + step >= BUDGET_BYTES - memtables,
        "capacity {after} after the checkpoints, MemTables {memtables}"
    );
}

/// A checkpoint of a nearly empty MemTable still sets aside what the
/// target says any checkpoint's update holds (a small batch can rewrite as
/// many leaves as a full one), but never more than a full MemTable's
/// reserve.
#[test]
fn a_small_checkpoint_reserves_the_targets_floor_up_to_a_full_ones() {
    const BUDGET_BYTES: u64 = 16 << 20;
    const DISTANCE_BYTES: u64 = 2 << 20;
    for (floor_bytes, reserve_bytes) in [(1 << 20, 1 << 20), (6 << 20, 2 * DISTANCE_BYTES)] {
        let target = Arc::new(MemoryTreeStore::default());
        target
            .memory_floor_bytes
            .store(floor_bytes, std::sync::atomic::Ordering::SeqCst);
        let options = Options {
            cache_capacity_bytes: BUDGET_BYTES,
            record_cache_capacity_bytes: 0,
            ..options(DISTANCE_BYTES)
        };
        let handle = target.clone();
        let fs = Arc::new(FaultFs::new());
        let db = Db::open_with_store("/db", options, fs, &move |_, _, _| {
            Ok(Some(handle.clone() as Arc<dyn TreeStore>))
        })
        .unwrap();
        for i in 0..10u64 {
            db.put(format!("k{i}").as_bytes(), [7u8; 20]).unwrap();
        }
        let memtable_bytes = db.stats().memtable_bytes;
        assert!(memtable_bytes < BUDGET_BYTES / 64, "{memtable_bytes}");
        db.checkpoint_now().unwrap();
        let seen = target.cache_capacity_at_checkpoints.lock().clone();
        assert_eq!(seen.len(), 1, "{seen:?}");
        // What the reserve took, within the MemTable and a resize step.
        let taken = BUDGET_BYTES - seen[0];
        assert!(
            taken >= reserve_bytes && taken <= reserve_bytes + memtable_bytes + BUDGET_BYTES / 64,
            "floor {floor_bytes}: the cache gave up {taken} bytes, expected about {reserve_bytes}"
        );
        // And it is given back once the checkpoint ends.
        let after = target
            .cache_capacity_bytes
            .load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            after + BUDGET_BYTES / 64 >= BUDGET_BYTES,
            "capacity {after} after"
        );
    }
}

/// A tree store whose checkpoint panics (a bug in the tree code).
#[derive(Debug, Default)]
struct PanickingStore(MemoryTreeStore);

impl TreeStore for PanickingStore {
    fn current(&self) -> Arc<dyn TreeVersion> {
        self.0.current()
    }

    fn checkpoint(
        &self,
        _memtable: &dyn crate::memtable::MemTable,
        _coverage: Coverage,
        _workers: &rayon::ThreadPool,
    ) -> crate::Result<Arc<dyn TreeVersion>> {
        panic!("checkpoint bug")
    }
}

fn open_panicking() -> Db {
    let target = Arc::new(PanickingStore::default());
    Db::open_with_store(
        "/db",
        options(16 * 1024),
        Arc::new(FaultFs::new()),
        &move |_, _, _| Ok(Some(target.clone() as Arc<dyn TreeStore>)),
    )
    .unwrap()
}

/// A checkpoint thread that dies by a panic must wake `checkpoint_now`
/// (and stalled writers) with an error, as a failed checkpoint does,
/// instead of leaving both waiting forever.
#[test]
fn a_panicking_checkpoint_does_not_hang_checkpoint_now() {
    let db = open_panicking();
    db.put(b"k", b"v").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = db.clone();
    std::thread::spawn(move || {
        let _ = tx.send(handle.checkpoint_now().is_err());
    });
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)),
        Ok(true),
        "checkpoint_now hangs after the checkpoint thread panicked"
    );
    assert!(matches!(db.put(b"k2", b"v"), Err(Error::Poisoned { .. })));
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

/// Writers stalled for the frozen slot must not wait forever either.
#[test]
fn a_panicking_checkpoint_does_not_hang_stalled_writers() {
    let db = open_panicking();
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = db.clone();
    std::thread::spawn(move || {
        for i in 0..20_000u64 {
            if handle.put(key(i * 7919), format!("value-{i:032}")).is_err() {
                break;
            }
        }
        let _ = tx.send(());
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(10)).is_ok(),
        "a writer stalled for the frozen slot hangs after the checkpoint thread panicked"
    );
}
