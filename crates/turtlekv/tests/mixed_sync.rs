//! Group commit with writers of both kinds: a `sync: true` write that lands
//! in a group led by (or started with) a `sync: false` write must still be
//! on stable storage when it returns. `tests/crash.rs` is single-threaded
//! and `tests/concurrency.rs` has only sync writers, so neither builds
//! such a group.

mod common;

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::small_options;
use turtlekv::io::{CrashMode, FaultFs, File, FileSystem, LockGuard, OpenOptions};
use turtlekv::{Db, WriteOptions};

/// `FaultFs` whose `fdatasync` takes a while, so that writers queue up
/// behind a syncing leader and share groups.
#[derive(Debug)]
struct SlowSync(FaultFs);

#[derive(Debug)]
struct SlowSyncFile(Arc<dyn File>);

impl FileSystem for SlowSync {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.0.create_dir_all(path)
    }
    fn open(&self, path: &Path, options: OpenOptions) -> io::Result<Arc<dyn File>> {
        Ok(Arc::new(SlowSyncFile(self.0.open(path, options)?)))
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.0.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.0.rename(from, to)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.0.list_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.0.sync_dir(path)
    }
    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn LockGuard>>> {
        self.0.lock(path)
    }
}

impl File for SlowSyncFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        std::thread::sleep(Duration::from_millis(2));
        self.0.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        self.0.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        self.0.punch_hole(offset, len)
    }
    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.0.allocate(offset, len)
    }
}

#[test]
fn a_sync_write_grouped_behind_unsynced_writes_is_durable_when_acknowledged() {
    let fs = FaultFs::new();
    let db = Db::open_with_fs("/db", small_options(), Arc::new(SlowSync(fs.clone()))).unwrap();
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
        db.put_opt(&key, b"durable", &WriteOptions { sync: true })
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
