//! Helpers shared by the integration tests.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::collections::BTreeMap;
use std::sync::Arc;

use turtlekv::io::FaultFs;
use turtlekv::{Bytes, Db, Options, Result, WriteBatch, WriteOptions};

/// xorshift64: deterministic pseudo-random choices without a dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// An index in `0..n` (0 when `n` is 0).
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
}

/// The model every test compares the engine against.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Small segments so rotation happens in tests.
pub fn small_options() -> Options {
    let mut o = Options::default();
    o.wal_segment_size_bytes = 64 * 1024;
    // Most of these tests' values (up to a few KiB) stay in the tree,
    // whose paths they exercise; the largest go to value files.
    o.value_separation_threshold_bytes = 4096;
    o
}

/// Tiny pages and MemTables, so that a few kilobytes of writes make
/// checkpoints, buffer flushes, splits and a tree several levels high.
pub fn checkpointing_options() -> Options {
    let mut o = small_options();
    o.leaf_size_bytes = 16 * 1024;
    o.node_size_bytes = 1024;
    o.checkpoint_distance_bytes = 4 * 1024;
    o.cache_capacity_bytes = 64 * 1024;
    o
}

pub fn open_fault(fs: &FaultFs, options: Options) -> Result<Db> {
    Db::open_with_fs("/db", options, Arc::new(fs.clone()))
}

/// The names of the entries of directory `dir`, sorted.
pub fn file_names(dir: &std::path::Path) -> Vec<std::ffi::OsString> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    names
}

/// Every key-value pair of the database, in order.
pub fn contents(db: &Db) -> Model {
    db.range::<&[u8], _>(..)
        .map(|kv| {
            let (k, v) = kv.expect("scan failed");
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

pub fn bytes(v: &[u8]) -> Bytes {
    Bytes::copy_from_slice(v)
}

/// A file system whose `fdatasync` takes `delay`, as a disk's does, so that
/// writers queue up behind a syncing leader and share its groups. Writes
/// go through `write_at` (no mapping), so every sync is one this wrapper
/// sees.
pub fn slow_sync_fs(
    inner: Arc<dyn turtlekv::io::FileSystem>,
    delay: std::time::Duration,
) -> impl turtlekv::io::FileSystem {
    turtlekv::io::WrapFs {
        inner,
        wrap: move |inner| -> Arc<dyn turtlekv::io::File> {
            Arc::new(SlowSyncFile { inner, delay })
        },
    }
}

#[derive(Debug)]
struct SlowSyncFile {
    inner: Arc<dyn turtlekv::io::File>,
    delay: std::time::Duration,
}

impl turtlekv::io::File for SlowSyncFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        std::thread::sleep(self.delay);
        self.inner.sync_data()
    }
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.inner.set_len(len)
    }
    fn punch_hole(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.inner.punch_hole(offset, len)
    }
    fn allocate(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.inner.allocate(offset, len)
    }
}

// Writers whose every state is recognisable: each writer's step is one
// batch across two keyspaces, so a copy or a read view taken while they
// run can be checked to hold each writer at one step (backups, read-only
// handles).

pub const WRITERS: u64 = 3;
/// Each writer keeps only its newest `WINDOW` keys: older ones are deleted.
pub const WINDOW: u64 = 4;

pub fn no_create(mut options: Options) -> Options {
    options.create_if_missing = false;
    options
}

pub fn item(writer: u64, step: u64) -> Vec<u8> {
    format!("w{writer}/{step:08}").into_bytes()
}

pub fn progress_key(writer: u64) -> Vec<u8> {
    format!("w{writer}/progress").into_bytes()
}

/// Every keyspace's contents: the default one under `""`.
pub fn all_contents(db: &Db) -> BTreeMap<Vec<u8>, Model> {
    let mut all = BTreeMap::new();
    all.insert(Vec::new(), contents(db));
    for name in db.keyspace_names().unwrap() {
        let ks = db.keyspace(&name).unwrap();
        let model = ks
            .range::<&[u8], _>(..)
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect();
        all.insert(name, model);
    }
    all
}

/// Writer `w`'s step `s` as one batch across two keyspaces: its item in
/// both, its progress, and the deletion of the item `WINDOW` steps back.
pub fn write_step(db: &Db, mirror: &turtlekv::Keyspace, w: u64, s: u64, sync: bool) {
    let mut batch = WriteBatch::new();
    batch.put(item(w, s), s.to_le_bytes());
    batch.put(progress_key(w), s.to_le_bytes());
    batch.put_in(mirror, item(w, s), b"m");
    if s >= WINDOW {
        batch.delete(item(w, s - WINDOW));
        batch.delete_in(mirror, item(w, s - WINDOW));
    }
    db.write(batch, &WriteOptions::new().sync(sync)).unwrap();
}

/// What the database holds for writer `w` once its steps `1..=p` are
/// applied: checks that the backup is exactly that, in both keyspaces.
pub fn check_writer_state(all: &BTreeMap<Vec<u8>, Model>, w: u64) -> u64 {
    let default = &all[&Vec::new()];
    let mirror = &all[&b"mirror".to_vec()];
    let p = default
        .get(&progress_key(w))
        .map_or(0, |v| u64::from_le_bytes(v[..8].try_into().unwrap()));
    let prefix = format!("w{w}/0").into_bytes();
    let items = |m: &Model| -> Vec<Vec<u8>> {
        m.keys()
            .filter(|k| k.starts_with(&prefix))
            .cloned()
            .collect()
    };
    let want: Vec<Vec<u8>> = (p.saturating_sub(WINDOW - 1).max(1)..=p)
        .map(|s| item(w, s))
        .collect();
    assert_eq!(
        items(default),
        want,
        "writer {w} at step {p}: default keyspace"
    );
    assert_eq!(
        items(mirror),
        want,
        "writer {w} at step {p}: mirror keyspace"
    );
    p
}
