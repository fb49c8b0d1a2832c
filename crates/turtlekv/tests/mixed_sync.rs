//! Group commit with writers of both kinds: a `sync: true` write that lands
//! in a group led by (or started with) a `sync: false` write must still be
//! on stable storage when it returns. `tests/crash.rs` is single-threaded
//! and `tests/concurrency.rs` has only sync writers, so neither builds
//! such a group.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{slow_sync_fs, small_options};
use turtlekv::io::{CrashMode, FaultFs};
use turtlekv::{Db, WriteOptions};

#[test]
fn a_sync_write_grouped_behind_unsynced_writes_is_durable_when_acknowledged() {
    let fs = FaultFs::new();
    let db = Db::open_with_fs(
        "/db",
        small_options(),
        Arc::new(slow_sync_fs(Arc::new(fs.clone()), Duration::from_millis(2))),
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let unsynced: Vec<_> = (0..3)
        .map(|t| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    db.put(format!("u{t}-{i}"), b"v").unwrap();
                    i += 1;
                    // Enough to keep joining groups, not so many that the
                    // crash images grow large.
                    std::thread::yield_now();
                }
            })
        })
        .collect();
    let mut lost = Vec::new();
    for i in 0..60u32 {
        let key = format!("sync-{i:04}");
        db.put_opt(&key, b"durable", &WriteOptions::new().sync(true))
            .unwrap();
        // A power cut right after the acknowledgement.
        let crashed = fs.crash(CrashMode::DropUnsynced);
        let after = Db::open_with_fs("/db", small_options(), Arc::new(crashed)).unwrap();
        if after.get(&key).unwrap().is_none() {
            lost.push(key);
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in unsynced {
        h.join().unwrap();
    }
    assert!(
        lost.is_empty(),
        "acknowledged sync writes lost by a power cut: {lost:?}"
    );
}
