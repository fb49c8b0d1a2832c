//! Filling a TurtleKV database with YCSB-style records for the criterion
//! benchmarks (`benches/checkpoint.rs`, `benches/recovery.rs`).

use turtlekv::{Db, WriteBatch, WriteOptions};

use crate::keys::{KeyFormat, ValueCodec};

/// Bytes per value of the filled records.
pub const VALUE_SIZE_BYTES: usize = 120;

/// Writes `records` (binary keys, 120-byte values carrying `version`) in
/// batches of 1000, not synced.
pub fn write_records(db: &Db, records: impl Iterator<Item = u64>, version: u64) {
    let codec = ValueCodec::new(1, VALUE_SIZE_BYTES);
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let mut batch = WriteBatch::new();
    for record in records {
        KeyFormat::Binary.encode(record, &mut key);
        codec.encode(&key, version, &mut value);
        batch.put(&key, &value);
        if batch.len() == 1000 {
            db.write(std::mem::take(&mut batch), &WriteOptions::default())
                .expect("write");
        }
    }
    db.write(batch, &WriteOptions::default()).expect("write");
}
