//! The hot-record cache never serves a stale or wrong answer: writes,
//! deletes, snapshots and checkpoints interleaved with gets against a model,
//! with a record cache small enough to evict constantly; and concurrent
//! readers racing writers and checkpoints.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Model, Rng, checkpointing_options, open_fault};
use turtlekv::io::FaultFs;
use turtlekv::{Snapshot, WriteBatch, WriteOptions};

fn key(n: u64) -> Vec<u8> {
    format!("rec{n:05}").into_bytes()
}

/// Zipf-like: most requests go to the first few keys.
fn skewed_key(rng: &mut Rng) -> Vec<u8> {
    let n = rng.below(1_000);
    key(if rng.below(4) == 0 { n } else { n % 20 })
}

#[test]
fn interleaved_writes_snapshots_checkpoints_and_gets_match_the_model() {
    let fs = FaultFs::new();
    let mut options = checkpointing_options();
    options.cache_capacity_bytes = 64 * 1024;
    // One or two records per shard, about 100 in all: constant eviction.
    options.record_cache_capacity_bytes = 16 * 1024;
    let db = open_fault(&fs, options).unwrap();
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let mut rng = Rng(0xDEAD_BEEF_1234_5678);
    for step in 0..40_000u64 {
        match rng.below(100) {
            0..=24 => {
                let (k, v) = (skewed_key(&mut rng), format!("v{step}").into_bytes());
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            25..=32 => {
                let k = skewed_key(&mut rng);
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            33..=35 => {
                let mut batch = WriteBatch::new();
                for _ in 0..3 {
                    let k = skewed_key(&mut rng);
                    batch.put(&k, format!("b{step}"));
                    model.insert(k, format!("b{step}").into_bytes());
                }
                db.write(batch, &WriteOptions::default()).unwrap();
            }
            36..=89 => {
                let k = skewed_key(&mut rng);
                let got = db.get(&k).unwrap().map(|v| v.to_vec());
                assert_eq!(got, model.get(&k).cloned(), "get {k:?} at step {step}");
            }
            90..=95 => {
                let Some(i) = (!snapshots.is_empty()).then(|| rng.below(snapshots.len() as u64))
                else {
                    continue;
                };
                let (snapshot, frozen) = &snapshots[i as usize];
                let k = skewed_key(&mut rng);
                let got = snapshot.get(&k).unwrap().map(|v| v.to_vec());
                assert_eq!(got, frozen.get(&k).cloned(), "snapshot get {k:?}");
            }
            96..=97 => {
                if snapshots.len() == 3 {
                    snapshots.remove(0);
                }
                snapshots.push((db.snapshot(), model.clone()));
            }
            _ => db.checkpoint_now().unwrap(),
        }
    }
    let stats = db.stats();
    assert!(stats.record_cache_hits > 1_000, "{stats:?}");
    assert!(stats.record_cache_evictions > 100, "{stats:?}");
    assert!(stats.checkpoints > 100, "{stats:?}");
    assert!(stats.record_cache_used_bytes <= 16 * 1024);
}

/// Each writer thread owns some keys and writes increasing counters to
/// them; readers check that a key's value never goes back in time and that
/// a snapshot never changes, while checkpoints run underneath.
#[test]
fn concurrent_readers_never_see_a_value_go_back() {
    let fs = FaultFs::new();
    let mut options = checkpointing_options();
    options.cache_capacity_bytes = 256 * 1024;
    options.record_cache_capacity_bytes = 16 * 1024;
    let db = open_fault(&fs, options).unwrap();
    const KEYS_PER_WRITER: u64 = 40;
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let db = db.clone();
            s.spawn(move || {
                for round in 1..=3_000u64 {
                    let k = key(w * KEYS_PER_WRITER + round % KEYS_PER_WRITER);
                    db.put(&k, round.to_be_bytes()).unwrap();
                }
            });
        }
        for r in 0..2u64 {
            let (db, stop) = (db.clone(), stop.clone());
            s.spawn(move || {
                let mut last_seen = vec![0u64; (2 * KEYS_PER_WRITER) as usize];
                let mut rng = Rng(r + 7);
                while !stop.load(Ordering::Relaxed) {
                    let n = rng.below(2 * KEYS_PER_WRITER);
                    let value = db.get(key(n)).unwrap().map_or(0, |v| {
                        u64::from_be_bytes(v[..].try_into().expect("8-byte counter"))
                    });
                    assert!(value >= last_seen[n as usize], "key {n} went back");
                    last_seen[n as usize] = value;
                    if rng.below(200) == 0 {
                        let snapshot = db.snapshot();
                        let first = snapshot.get(key(n)).unwrap();
                        std::thread::yield_now();
                        assert_eq!(snapshot.get(key(n)).unwrap(), first);
                    }
                }
            });
        }
        let db = db.clone();
        let stop = stop.clone();
        s.spawn(move || {
            while db.stats().puts < 6_000 {
                db.checkpoint_now().unwrap();
            }
            stop.store(true, Ordering::Relaxed);
        });
    });
    let stats = db.stats();
    assert!(stats.record_cache_hits > 0, "{stats:?}");
    for n in 0..2 * KEYS_PER_WRITER {
        let w = n / KEYS_PER_WRITER;
        let last_round = (1..=3_000u64)
            .rev()
            .find(|round| w * KEYS_PER_WRITER + round % KEYS_PER_WRITER == n)
            .unwrap();
        let got = db.get(key(n)).unwrap().unwrap();
        assert_eq!(&got[..], &last_round.to_be_bytes());
    }
}

const SPLIT_BUDGET_BYTES: u64 = 512 * 1024;
const SPLIT_RECORDS: u64 = 20_000;
/// One step of the automatic split: 1/32 of the budget.
const SPLIT_STEP_BYTES: u64 = SPLIT_BUDGET_BYTES / 32;

fn split_value(n: u64) -> Vec<u8> {
    format!("{n:0>100}").into_bytes()
}

/// A database of 2.2 MB of records, four times its memory budget, all in
/// the tree, with the record cache starting at `record_cache_bytes`.
fn split_db(fs: &FaultFs, record_cache_bytes: u64) -> turtlekv::Db {
    let mut options = checkpointing_options();
    options.cache_capacity_bytes = SPLIT_BUDGET_BYTES;
    options.checkpoint_distance_bytes = 64 * 1024;
    options.record_cache_capacity_bytes = record_cache_bytes;
    options.record_cache_auto_split = true;
    let db = open_fault(fs, options).unwrap();
    for chunk in (0..SPLIT_RECORDS).collect::<Vec<_>>().chunks(500) {
        let mut batch = WriteBatch::new();
        for &n in chunk {
            batch.put(key(n), split_value(n));
        }
        db.write(batch, &WriteOptions::default()).unwrap();
    }
    db.checkpoint_now().unwrap();
    db
}

/// Runs `work` in rounds until `done` holds, for at most a minute (the
/// split decides once a second).
fn until(db: &turtlekv::Db, done: impl Fn(&turtlekv::Stats) -> bool, mut work: impl FnMut()) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done(&db.stats()) && Instant::now() < deadline {
        for _ in 0..200 {
            work();
        }
    }
}

#[test]
fn the_split_grows_the_record_cache_under_hot_point_reads() {
    let fs = FaultFs::new();
    let db = split_db(&fs, 0);
    let mut rng = Rng(0x5EED);
    // Nine gets in ten go to 300 hot records spread over the key space
    // (one block each, more blocks than the page cache holds); the rest,
    // spread over all records, keep the page cache churning.
    until(
        &db,
        |s| s.record_cache_capacity_bytes >= 2 * SPLIT_STEP_BYTES,
        || {
            let n = if rng.below(10) != 0 {
                rng.below(300) * 67 % SPLIT_RECORDS
            } else {
                rng.below(SPLIT_RECORDS)
            };
            assert_eq!(
                db.get(key(n)).unwrap().as_deref(),
                Some(&split_value(n)[..])
            );
        },
    );
    let stats = db.stats();
    assert!(
        stats.record_cache_capacity_bytes >= 2 * SPLIT_STEP_BYTES,
        "{stats:?}"
    );
    assert!(stats.record_cache_resizes >= 2, "{stats:?}");
    assert!(
        stats.record_cache_ghost_recalls > stats.cache_ghost_recalls,
        "{stats:?}"
    );
    // The page cache gave what the record cache took.
    assert!(
        stats.cache_capacity_bytes + stats.record_cache_capacity_bytes <= SPLIT_BUDGET_BYTES,
        "{stats:?}"
    );
    db.check().unwrap();
}

#[test]
fn the_split_never_takes_from_the_record_cache_under_scans() {
    let fs = FaultFs::new();
    let start_bytes = 4 * SPLIT_STEP_BYTES;
    let db = split_db(&fs, start_bytes);
    let mut rng = Rng(0xCAFE);
    // Scans vote for blocks every second; over five seconds that is more
    // than one decided vote, which must not shrink the record cache (see
    // `cache_split::step_share`).
    let started = Instant::now();
    until(
        &db,
        |_| started.elapsed() >= Duration::from_secs(5),
        || {
            let first = rng.below(SPLIT_RECORDS - 50);
            let got = db.range(key(first)..).take(50).map(Result::unwrap).count();
            assert_eq!(got, 50);
        },
    );
    let stats = db.stats();
    assert!(stats.cache_ghost_recalls >= 5 * 32, "{stats:?}");
    assert_eq!(stats.record_cache_ghost_recalls, 0, "{stats:?}");
    assert_eq!(stats.record_cache_resizes, 0, "{stats:?}");
    assert_eq!(stats.record_cache_capacity_bytes, start_bytes, "{stats:?}");
}
