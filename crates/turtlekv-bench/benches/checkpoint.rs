//! Checkpoint time with 1 and with 2 checkpoint threads on the same input:
//! `cargo bench -p turtlekv-bench --bench checkpoint`.
//!
//! Each sample opens a fresh database whose tree already holds
//! `RECORDS` records (one checkpoint, not timed), overwrites a random
//! quarter of them plus new keys into the MemTable (not timed), and times
//! `checkpoint_now`: the frozen MemTable's merge into the tree buffers,
//! the flushes it triggers, and the serialisation of every new page.

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use turtlekv::{Db, Options};
use turtlekv_bench::fill::write_records;
use turtlekv_bench::rng::Rng;

const RECORDS: u64 = 400_000;
const UPDATES: u64 = 200_000;

fn options(threads: usize) -> Options {
    let mut o = Options::default();
    o.checkpoint_threads = threads;
    o.checkpoint_distance_bytes = 1 << 30;
    o.cache_capacity_bytes = 1 << 30;
    o
}

/// One timed checkpoint on a freshly prepared database.
fn timed_checkpoint(threads: usize, seed: u64) -> Duration {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = Db::open(dir.path(), options(threads)).expect("open");
    write_records(&db, 0..RECORDS, 0);
    db.checkpoint_now().expect("initial checkpoint");
    let mut rng = Rng::new(seed);
    let updates = (0..UPDATES).map(|i| {
        if i % 4 == 0 {
            RECORDS + i // new keys
        } else {
            rng.below(RECORDS)
        }
    });
    write_records(&db, updates, 1);
    let started = Instant::now();
    db.checkpoint_now().expect("timed checkpoint");
    started.elapsed()
}

fn checkpoint_threads(c: &mut Criterion) {
    let mut group = c.benchmark_group("checkpoint 200K updates into 400K records");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    for threads in [1usize, 2] {
        group.bench_with_input(BenchmarkId::new("threads", threads), &threads, |b, &t| {
            b.iter_custom(|iters| (0..iters).map(|i| timed_checkpoint(t, i + 1)).sum())
        });
    }
    group.finish();
}

criterion_group!(benches, checkpoint_threads);
criterion_main!(benches);
