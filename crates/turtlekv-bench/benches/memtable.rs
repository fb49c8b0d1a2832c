//! MemTable inserts and gets without the rest of the write or read path:
//! `cargo bench -p turtlekv-bench --bench memtable`. A MemTable of the
//! default 64 MiB checkpoint distance holds about 400,000 entries of an
//! 8-byte key and a 120-byte value; inserting into it in random order,
//! and getting its keys, is bound by cache misses along the search path:
//! each case runs on the B+-tree the database uses and on the skiplist it
//! replaced.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use turtlekv::bench_hooks::{
    FilledMemTable, MemTableInput, MemTableKind, memtable_fill, memtable_get_all,
};

const VALUE_SIZE_BYTES: usize = 120;

fn inserts(c: &mut Criterion) {
    let mut group = c.benchmark_group("memtable");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(15));
    for entries in [50_000, 400_000] {
        let input = MemTableInput::random(entries, VALUE_SIZE_BYTES, 42);
        for (kind, name) in [
            (MemTableKind::BTree, "btree"),
            (MemTableKind::SkipList, "skiplist"),
        ] {
            group.bench_function(format!("{name} fill {entries} random keys"), |b| {
                b.iter(|| assert_eq!(memtable_fill(black_box(&input), kind), entries))
            });
            let filled = FilledMemTable::new(&input, kind);
            group.bench_function(format!("{name} get {entries} random keys"), |b| {
                b.iter(|| assert_eq!(memtable_get_all(black_box(&filled)), entries))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, inserts);
criterion_main!(benches);
