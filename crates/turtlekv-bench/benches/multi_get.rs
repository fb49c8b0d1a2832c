//! `Db::multi_get` of 32 keys against 32 single `Db::get`s, out of cache,
//! with two client threads: `cargo bench -p turtlekv-bench --bench multi_get`.
//!
//! The database holds 2M records (8-byte hashed keys, 120-byte random
//! values: about 256 MB) behind a budget of a third of that with direct
//! I/O (`docs/benchmarks.md`'s out-of-cache setting), so that two lookups
//! in three read a leaf chunk from the device rather than from the page
//! cache or the OS's. Each iteration reads 32 keys chosen
//! uniformly on each of two threads, one `get` after another or in one
//! `multi_get`; throughput is in keys. The ratio of the two medians is the
//! figure `docs/benchmarks.md` records (the two run one after the other
//! on the same database and the same key sequence).
//!
//! `TURTLEKV_BENCH_RECORDS` overrides the record count (the database is
//! built once per run, in the system's temporary directory).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use turtlekv::{Db, Options, WriteBatch, WriteOptions};
use turtlekv_bench::keys::KeyFormat;
use turtlekv_bench::rng::Rng;

const DEFAULT_RECORDS: u64 = 2_000_000;
const VALUE_SIZE_BYTES: usize = 120;
const KEYS_PER_CALL: usize = 32;
const CLIENT_THREADS: u64 = 2;

fn records() -> u64 {
    std::env::var("TURTLEKV_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_RECORDS)
}

/// The loaded, checkpointed database and its directory.
fn open(records: u64) -> (Db, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let data_bytes = records * (8 + VALUE_SIZE_BYTES as u64);
    let options = Options::new()
        .cache_capacity_bytes(data_bytes / 3)
        .direct_io(true);
    let db = Db::open(dir.path(), options).expect("open");
    let mut rng = Rng::new(1);
    let mut key = Vec::new();
    let mut value = vec![0u8; VALUE_SIZE_BYTES];
    for start in (0..records).step_by(1000) {
        let mut batch = WriteBatch::new();
        for record in start..(start + 1000).min(records) {
            KeyFormat::Binary.encode(record, &mut key);
            rng.fill(&mut value);
            batch.put(&key, &value);
        }
        db.write(batch, &WriteOptions::new()).expect("load");
    }
    db.checkpoint_now().expect("checkpoint");
    (db, dir)
}

/// The keys of one call: `KEYS_PER_CALL` records drawn uniformly.
fn draw(rng: &mut Rng, records: u64) -> Vec<Vec<u8>> {
    (0..KEYS_PER_CALL)
        .map(|_| {
            let mut key = Vec::new();
            KeyFormat::Binary.encode(rng.below(records), &mut key);
            key
        })
        .collect()
}

/// Runs `calls` calls of `read` on each of the client threads; the wall
/// time until both are done.
fn timed(db: &Db, records: u64, calls: u64, read: fn(&Db, &[Vec<u8>])) -> Duration {
    let started = Instant::now();
    std::thread::scope(|s| {
        for thread in 0..CLIENT_THREADS {
            s.spawn(move || {
                let mut rng = Rng::new(0x9e37 + thread + calls);
                for _ in 0..calls {
                    read(db, &draw(&mut rng, records));
                }
            });
        }
    });
    started.elapsed()
}

fn one_by_one(db: &Db, keys: &[Vec<u8>]) {
    for key in keys {
        black_box(db.get(key).expect("get"));
    }
}

fn batched(db: &Db, keys: &[Vec<u8>]) {
    black_box(db.multi_get(keys).expect("multi_get"));
}

fn out_of_cache(c: &mut Criterion) {
    let records = records();
    let (db, _dir) = open(records);
    let mut group = c.benchmark_group("multi_get-out-of-cache");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(KEYS_PER_CALL as u64 * CLIENT_THREADS));
    group.bench_function("32 gets", |b| {
        b.iter_custom(|iters| timed(&db, records, iters, one_by_one));
    });
    group.bench_function("multi_get of 32", |b| {
        b.iter_custom(|iters| timed(&db, records, iters, batched));
    });
    group.finish();
    let stats = db.stats();
    println!(
        "gets {}, disk reads by gets {} ({:.2} per get), leaf head misses {}, filter misses {}",
        stats.gets,
        stats.get_disk_reads,
        stats.get_disk_reads as f64 / stats.gets.max(1) as f64,
        stats.cache_leaf_head_misses,
        stats.cache_filter_misses,
    );
}

criterion_group!(benches, out_of_cache);
criterion_main!(benches);
