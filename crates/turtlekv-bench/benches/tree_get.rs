//! Point gets answered by the tree from a warm page cache, the CPU path of
//! in-cache reads (YCSB B and C with a cache larger than the data):
//! `cargo bench -p turtlekv-bench --bench tree_get`. One million records
//! of an 8-byte hashed key and a 120-byte value are checkpointed into the
//! tree, so no get is answered by a MemTable, and the record cache is off,
//! so every get walks nodes, filters, leaf heads and a leaf chunk.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use turtlekv::{Db, Options};
use turtlekv_bench::keys::KeyFormat;
use turtlekv_bench::rng::Rng;

const RECORDS: u64 = 1_000_000;
const VALUE_SIZE_BYTES: usize = 120;

fn tree_gets(c: &mut Criterion) {
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
    group.finish();
}

criterion_group!(benches, tree_gets);
criterion_main!(benches);
