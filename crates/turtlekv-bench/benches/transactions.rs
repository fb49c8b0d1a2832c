//! TurtleKV's optimistic transactions against plain writes, without
//! conflicts (one thread, disjoint keys):
//! `cargo bench -p turtlekv-bench --bench transactions`.
//!
//! - `commit/*`: a `WriteBatch` of N puts written with `Db::write`, against
//!   a transaction that buffers the same N blind puts and commits, for
//!   N = 1 and 10.
//! - `read-modify-write/*`: a get and then a put of a record, against a
//!   transaction that gets, puts and commits it.
//!
//! Every put overwrites one of 200K preloaded, checkpointed records
//! (8-byte hashed key, 120-byte value), the commits in turn and the
//! read-modify-writes at random, so that the tree keeps its size and
//! background checkpoints cost the same through a run. Each benchmark
//! starts from a fresh database (default options, a 256 MiB cache, the WAL
//! not fsynced), so that each pair starts from the same state. A commit
//! can still be refused when a checkpoint finishes between the
//! transaction's start and its commit (the conflict check cannot see past
//! one): such commits are retried inside the timed iteration, and counted
//! and printed at the end. Background checkpoints make single iterations
//! vary widely on two cores; compare the medians.

use std::cell::Cell;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tempfile::TempDir;
use turtlekv::{Db, Error, Options, WriteBatch, WriteOptions};
use turtlekv_bench::keys::KeyFormat;
use turtlekv_bench::rng::Rng;

const RECORDS: u64 = 200_000;
const VALUE_SIZE_BYTES: usize = 120;

/// A fresh database holding the `RECORDS` records, checkpointed, and its
/// directory, removed when dropped.
fn open() -> (Db, TempDir) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut options = Options::default();
    options.cache_capacity_bytes = 256 << 20;
    let db = Db::open(dir.path(), options).expect("open");
    let mut key = Vec::new();
    let value = vec![7u8; VALUE_SIZE_BYTES];
    for record in 0..RECORDS {
        KeyFormat::Binary.encode(record, &mut key);
        db.put(&key, &value).expect("load");
    }
    db.checkpoint_now().expect("checkpoint");
    (db, dir)
}

/// Commits `txn`'s work, retrying it from scratch while the commit is
/// refused; counts the refusals.
fn commit_retrying(
    db: &Db,
    conflicts: &Cell<u64>,
    mut work: impl FnMut(&mut turtlekv::Transaction),
) {
    let options = WriteOptions::default();
    loop {
        let mut txn = db.transaction();
        work(&mut txn);
        match txn.commit(&options) {
            Ok(()) => return,
            Err(Error::Conflict(_)) => conflicts.set(conflicts.get() + 1),
            Err(e) => panic!("commit: {e}"),
        }
    }
}

fn commits(c: &mut Criterion) {
    let value = vec![9u8; VALUE_SIZE_BYTES];
    let options = WriteOptions::default();
    let mut refused = Vec::new();
    let mut group = c.benchmark_group("commit");
    group.measurement_time(Duration::from_secs(10));
    for puts in [1u64, 10] {
        group.throughput(Throughput::Elements(puts));
        let (db, dir) = open();
        let (mut next, mut key) = (0u64, Vec::new());
        group.bench_function(format!("write batch of {puts} puts"), |b| {
            b.iter(|| {
                let mut batch = WriteBatch::new();
                for _ in 0..puts {
                    KeyFormat::Binary.encode(next % RECORDS, &mut key);
                    next += 1;
                    batch.put(&key, &value);
                }
                db.write(black_box(batch), &options).expect("write");
            })
        });
        drop((db, dir));
        let (db, _dir) = open();
        let (mut next, conflicts) = (0u64, Cell::new(0));
        group.bench_function(format!("transaction of {puts} blind puts"), |b| {
            b.iter(|| {
                let first = next;
                next += puts;
                commit_retrying(&db, &conflicts, |txn| {
                    for record in first..first + puts {
                        KeyFormat::Binary.encode(record % RECORDS, &mut key);
                        txn.put(&key, &value);
                    }
                });
            })
        });
        refused.push((
            format!("transaction of {puts} blind puts"),
            conflicts.get(),
            next / puts,
        ));
    }
    group.finish();
    report(&refused);
}

fn read_modify_writes(c: &mut Criterion) {
    let value = vec![9u8; VALUE_SIZE_BYTES];
    let options = WriteOptions::default();
    let mut group = c.benchmark_group("read-modify-write");
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(1));
    let (db, dir) = open();
    let (mut rng, mut key) = (Rng::new(5), Vec::new());
    group.bench_function("get then put", |b| {
        b.iter(|| {
            KeyFormat::Binary.encode(rng.below(RECORDS), &mut key);
            assert!(db.get(black_box(&key)).expect("get").is_some());
            db.put_opt(&key, &value, &options).expect("put");
        })
    });
    drop((db, dir));
    let (db, _dir) = open();
    let (mut rng, conflicts, mut done) = (Rng::new(5), Cell::new(0), 0u64);
    group.bench_function("transaction get, put, commit", |b| {
        b.iter(|| {
            KeyFormat::Binary.encode(rng.below(RECORDS), &mut key);
            commit_retrying(&db, &conflicts, |txn| {
                assert!(txn.get(black_box(&key)).expect("get").is_some());
                txn.put(&key, &value);
            });
            done += 1;
        })
    });
    group.finish();
    report(&[("transaction get, put, commit".into(), conflicts.get(), done)]);
}

/// Prints how many commits were refused (and retried) per benchmark.
fn report(refused: &[(String, u64, u64)]) {
    for (name, conflicts, commits) in refused {
        eprintln!("{name}: {conflicts} commits refused and retried of {commits}");
    }
}

criterion_group!(benches, commits, read_modify_writes);
criterion_main!(benches);
