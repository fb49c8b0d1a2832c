//! The README's "main job": writes, reads, scans, checkpoints and reopens a
//! database through the public API, measures group commit, and prints what
//! it did.
//!
//! `cargo run --release --example demo [RECORDS] [DIR]`: defaults to
//! 200 000 records in a temporary directory.

use std::time::Instant;

use turtlekv::{Db, Options, WriteBatch, WriteOptions};

const VALUE_SIZE_BYTES: usize = 120;
const SYNC_WRITES_PER_THREAD: u64 = 500;

fn key(i: u64) -> [u8; 8] {
    // Spread keys over the key space, as hashed YCSB keys are.
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = vec![0u8; VALUE_SIZE_BYTES];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let records: u64 = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(200_000);
    let temp = tempfile::tempdir()?;
    let path = args
        .next()
        .map_or_else(|| temp.path().join("demo-db"), Into::into);
    println!(
        "TurtleKV demo: {records} records of 8 B keys and {VALUE_SIZE_BYTES} B values in {}",
        path.display()
    );

    let db = Db::open(&path, Options::default())?;
    let t = Instant::now();
    for chunk_start in (0..records).step_by(100) {
        let mut batch = WriteBatch::new();
        for i in chunk_start..(chunk_start + 100).min(records) {
            batch.put(key(i), value(i));
        }
        db.write(batch, &WriteOptions::default())?;
    }
    db.flush_wal()?;
    report("wrote (batches of 100, then one fsync)", records, t);

    let t = Instant::now();
    for i in 0..records {
        let i = (i * 7919) % records;
        let got = db.get(key(i))?.ok_or("a written key is missing")?;
        if got[..] != value(i)[..] {
            return Err(format!("wrong value for record {i}").into());
        }
    }
    report("read back and verified (random order)", records, t);

    let t = Instant::now();
    let (mut count, mut previous) = (0u64, None);
    for kv in db.range::<&[u8], _>(..) {
        let (k, _) = kv?;
        if previous.as_ref().is_some_and(|p| *p >= k) {
            return Err("scan out of order".into());
        }
        previous = Some(k);
        count += 1;
    }
    if count != records {
        return Err(format!("scan saw {count} of {records} records").into());
    }
    report("scanned in key order", records, t);

    let t = Instant::now();
    db.checkpoint_now()?;
    let stats = db.stats();
    println!(
        "checkpoint into the TurtleTree in {:.2} s: height {}, {} node / {} leaf / {} segment pages, write amplification so far {:.2}",
        t.elapsed().as_secs_f64(),
        stats.tree_height,
        stats.tree_node_pages,
        stats.tree_leaf_pages,
        stats.tree_segment_pages,
        stats.write_amplification()
    );

    group_commit(&db)?;
    let before = db.stats();
    drop(db);

    let t = Instant::now();
    let db = Db::open(&path, Options::default())?;
    let after = db.stats();
    println!(
        "reopened in {:.1} ms: replayed {} WAL records, last sequence {} (was {})",
        t.elapsed().as_secs_f64() * 1e3,
        after.wal_records_replayed,
        after.last_sequence,
        before.last_sequence
    );
    let present = db.range::<&[u8], _>(..).count() as u64;
    println!("after reopen: {present} keys present");
    println!(
        "stats: puts {}, user bytes {}, WAL bytes {}, WAL syncs {}, group commits {}, MemTable {:.1} MiB",
        before.puts,
        before.user_bytes_written,
        before.wal_bytes_written,
        before.wal_syncs,
        before.wal_group_commits,
        before.memtable_bytes as f64 / (1 << 20) as f64
    );
    Ok(())
}

/// Two threads doing `sync: true` writes share fsyncs through group commit.
fn group_commit(db: &Db) -> turtlekv::Result<()> {
    let syncs_before = db.stats().wal_syncs;
    let t = Instant::now();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u64)
            .map(|thread| {
                s.spawn(move || -> turtlekv::Result<()> {
                    for i in 0..SYNC_WRITES_PER_THREAD {
                        let k = format!("sync-{thread}-{i}");
                        db.put_opt(k, b"durable", &WriteOptions::new().sync(true))?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().expect("writer panicked"))
    })?;
    let writes = 2 * SYNC_WRITES_PER_THREAD;
    let syncs = db.stats().wal_syncs - syncs_before;
    println!(
        "group commit: 2 threads x {SYNC_WRITES_PER_THREAD} sync writes in {:.2} s: {syncs} fsyncs, {:.2} fsyncs per write",
        t.elapsed().as_secs_f64(),
        syncs as f64 / writes as f64
    );
    Ok(())
}

fn report(what: &str, records: u64, since: Instant) {
    let secs = since.elapsed().as_secs_f64();
    println!(
        "{what}: {records} records in {secs:.2} s ({:.0} ops/s)",
        records as f64 / secs
    );
}
