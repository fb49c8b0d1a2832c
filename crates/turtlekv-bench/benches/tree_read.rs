//! Reads answered by the tree from a warm page cache, the CPU path of
//! in-cache reads: point gets (YCSB B and C with a cache larger than the
//! data), 50-record scans (YCSB E) and 5,000-record scans:
//! `cargo bench -p turtlekv-bench --bench tree_read`. One million records
//! of an 8-byte hashed key and a 120-byte value are checkpointed into the
//! tree, so no read is answered by a MemTable, and the record cache is off,
//! so every get walks nodes, filters, leaf heads and a leaf chunk. The
//! load's own checkpoints leave segments in node buffers, so a scan merges
//! them with the leaves, as at 10M records.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use turtlekv::{Db, Options};
use turtlekv_bench::keys::KeyFormat;
use turtlekv_bench::rng::Rng;

const RECORDS: u64 = 1_000_000;
const VALUE_SIZE_BYTES: usize = 120;

fn tree_reads(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut options = Options::default();
    options.cache_capacity_bytes = 1 << 30;
    options.record_cache_capacity_bytes = 0;
    let db = Db::open(dir.path(), options).expect("open");
    let mut key = Vec::new();
    let value = vec![7u8; VALUE_SIZE_BYTES];
    for record in 0..RECORDS {
        KeyFormat::Binary.encode(record, &mut key);
        db.put(&key, &value).expect("load");
    }
    db.checkpoint_now().expect("checkpoint");
    // Warm: every page a get reads is cached before the measurement.
    for record in 0..RECORDS {
        KeyFormat::Binary.encode(record, &mut key);
        assert!(db.get(&key).expect("get").is_some());
    }
    let mut rng = Rng::new(3);
    let mut group = c.benchmark_group("tree");
    group.measurement_time(Duration::from_secs(15));
    group.bench_function("get 1M records in cache", |b| {
        b.iter(|| {
            KeyFormat::Binary.encode(rng.below(RECORDS), &mut key);
            assert!(db.get(black_box(&key)).expect("get").is_some());
        })
    });
    // Long scans take the tree's pairs in many refills: the 5,000-record
    // case shows what a refill costs, which 50-record scans hardly do.
    for (name, len) in [
        ("scan 50 of 1M records in cache", 50),
        ("scan 5,000 of 1M records in cache", 5_000),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                KeyFormat::Binary.encode(rng.below(RECORDS), &mut key);
                let mut read = 0;
                for pair in db.range(key.as_slice()..).take(len) {
                    black_box(pair.expect("scan"));
                    read += 1;
                }
                assert!(read > 0);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, tree_reads);
criterion_main!(benches);
