//! Time to open (recover) a database, for databases of 100 MB and 1 GB of
//! user data with the same WAL tail above their last checkpoint:
//! `cargo bench -p turtlekv-bench --bench recovery`.
//!
//! Recovery reads the superblock, walks the node pages to rebuild the set of
//! live pages, and replays the WAL records above the checkpoint; it should
//! track the tail, not the database size. Set `TURTLEKV_RECOVERY_GB` to
//! change the large size.

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use turtlekv::{Db, Options};
use turtlekv_bench::fill::{VALUE_SIZE_BYTES, write_records};

const RECORD_BYTES: u64 = 8 + VALUE_SIZE_BYTES as u64;
const TAIL_RECORDS: u64 = 100_000;

/// A database of `user_bytes` of records, checkpointed, then a WAL tail of
/// `TAIL_RECORDS` overwrites.
fn build(dir: &Path, user_bytes: u64) {
    let records = user_bytes / RECORD_BYTES;
    let db = Db::open(dir, Options::default()).expect("open");
    write_records(&db, 0..records, 0);
    db.checkpoint_now().expect("checkpoint");
    write_records(&db, 0..TAIL_RECORDS, 1);
    db.flush_wal().expect("flush");
}

fn recovery(c: &mut Criterion) {
    let large_gb: u64 = std::env::var("TURTLEKV_RECOVERY_GB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let mut group = c.benchmark_group("open with a 100K-record WAL tail");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(15));
    for (label, user_bytes) in [
        ("100MB", 100_000_000u64),
        ("large", large_gb * 1_000_000_000),
    ] {
        let dir = tempfile::tempdir().expect("temporary directory");
        build(dir.path(), user_bytes);
        let name = if label == "large" {
            format!("{large_gb}GB")
        } else {
            label.to_string()
        };
        group.bench_with_input(BenchmarkId::new("database", name), &(), |b, ()| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        let started = Instant::now();
                        let db = Db::open(dir.path(), Options::default()).expect("reopen");
                        let elapsed = started.elapsed();
                        // One WAL record per batch of 1000 writes.
                        assert_eq!(db.stats().wal_records_replayed, TAIL_RECORDS / 1000);
                        elapsed
                    })
                    .sum()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, recovery);
criterion_main!(benches);
