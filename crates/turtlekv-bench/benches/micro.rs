//! Microbenchmarks of single TurtleKV operations through the benchmark's
//! engine adapter: `cargo bench -p turtlekv-bench`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use turtlekv_bench::engines::{EngineConfig, EngineKind};
use turtlekv_bench::keys::{KeyFormat, ValueCodec};
use turtlekv_bench::rng::Rng;

const RECORDS: u64 = 100_000;
const VALUE_SIZE_BYTES: usize = 120;

fn config() -> EngineConfig {
    EngineConfig {
        cache_bytes: 64 << 20,
        direct_io: false,
        sync: false,
        threads: 1,
        turtlekv: turtlekv_bench::engines::TurtlekvKnobs::default(),
        rocksdb_memory_in_cache: false,
        peer_kv_separation: false,
        value_compressibility: 0.0,
        rmw_transactions: false,
    }
}

fn put_get(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let engine = EngineKind::Turtlekv
        .open(dir.path(), &config())
        .expect("open turtlekv");
    let codec = ValueCodec::new(1, VALUE_SIZE_BYTES);
    let (mut key, mut value) = (Vec::new(), Vec::new());
    for record in 0..RECORDS {
        KeyFormat::Binary.encode(record, &mut key);
        codec.encode(&key, 0, &mut value);
        engine.put(&key, &value).expect("load");
    }
    let mut rng = Rng::new(2);

    c.bench_function("turtlekv put 8B key 120B value", |b| {
        b.iter(|| {
            KeyFormat::Binary.encode(rng.below(RECORDS), &mut key);
            engine.put(black_box(&key), black_box(&value)).expect("put");
        })
    });

    let mut out = Vec::new();
    c.bench_function("turtlekv get hit", |b| {
        b.iter(|| {
            KeyFormat::Binary.encode(rng.below(RECORDS), &mut key);
            assert!(engine.get(black_box(&key), &mut out).expect("get"));
        })
    });

    c.bench_function("turtlekv scan 50", |b| {
        b.iter(|| {
            KeyFormat::Binary.encode(rng.below(RECORDS), &mut key);
            engine.scan(black_box(&key), 50, &mut |k, v| {
                black_box((k, v));
            })
        })
    });
}

/// What the driver spends making and checking one value, outside the
/// engine's timer: random bytes, and text LZ4 halves
/// (`--value-compressibility 0.5`).
fn value_codec(c: &mut Criterion) {
    let mut key = Vec::new();
    KeyFormat::Binary.encode(7, &mut key);
    let mut value = Vec::new();
    for size in [VALUE_SIZE_BYTES, 1024] {
        for compressibility in [0.0, 0.5] {
            let codec = ValueCodec::with_compressibility(1, size, compressibility);
            let mut nonce = 0u64;
            c.bench_function(
                &format!("value encode {size}B compressibility {compressibility}"),
                |b| {
                    b.iter(|| {
                        nonce += 1;
                        codec.encode(black_box(&key), nonce, &mut value);
                        black_box(&value);
                    })
                },
            );
            codec.encode(&key, 1, &mut value);
            c.bench_function(
                &format!("value verify {size}B compressibility {compressibility}"),
                |b| b.iter(|| assert!(codec.verify(black_box(&key), black_box(&value)))),
            );
        }
    }
}

criterion_group!(benches, value_codec, put_get);
criterion_main!(benches);
