//! The database handle: opening and recovery, the write path, reads.

use std::io;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use bytes::Bytes;
use parking_lot::Mutex;

use crate::io::{FileSystem, LockGuard, RealFs};
use crate::iter::{Iter, owned_bounds, prefix_bounds};
use crate::memtable::{MemTable, SkipListMemTable};
use crate::options::validate_entry;
use crate::snapshot::Snapshot;
use crate::state::{ReadView, State};
use crate::stats::{Counters, Stats, bump};
use crate::wal::{self, GroupCommit, MAX_PAYLOAD_BYTES, Request, WAL_DIR, Wal};
use crate::{Error, Options, Result, WriteBatch, WriteOptions};

/// Name of the lock file that keeps a database to one handle at a time.
pub const LOCK_FILE_NAME: &str = "LOCK";

/// An open database. Cheap to clone and share between threads; the database
/// closes when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct Db {
    inner: Arc<DbInner>,
}

#[derive(Debug)]
pub(crate) struct DbInner {
    path: PathBuf,
    state: ArcSwap<State>,
    /// Highest sequence number whose writes are all in the MemTable.
    visible_seq: AtomicU64,
    /// The log; held by the group-commit leader while it writes.
    wal: Mutex<Wal>,
    commit: GroupCommit,
    /// Set by the first failed write or sync; writes are refused from then on.
    poison: OnceLock<String>,
    pub(crate) stats: Counters,
    /// Dropped last, so the lock outlives every other file handle.
    _lock: Box<dyn LockGuard>,
}

impl Db {
    /// Opens (or, with `create_if_missing`, creates) the database at `path`.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        Self::open_with_fs(path, options, Arc::new(RealFs))
    }

    /// Opens the database through a chosen file layer (tests use
    /// [`crate::io::FaultFs`] to inject faults and crashes).
    pub fn open_with_fs(
        path: impl AsRef<Path>,
        options: Options,
        fs: Arc<dyn FileSystem>,
    ) -> Result<Db> {
        options.validate()?;
        let path = path.as_ref().to_path_buf();
        if options.create_if_missing {
            fs.create_dir_all(&path)?;
        } else if let Err(e) = fs.list_dir(&path) {
            let msg = format!("no database at {}: {e}", path.display());
            return Err(Error::Io(io::Error::new(e.kind(), msg)));
        }
        let lock = fs
            .lock(&path.join(LOCK_FILE_NAME))?
            .ok_or_else(|| Error::Locked(path.clone()))?;
        let wal_dir = path.join(WAL_DIR);
        fs.create_dir_all(&wal_dir)?;
        fs.sync_dir(&path)?;

        let memtable = SkipListMemTable::new();
        let (mut wal, replayed) = Wal::open(
            fs.clone(),
            &wal_dir,
            0,
            options.wal_segment_size_bytes,
            &mut |first_seq, ops| {
                for (seq, op) in (first_seq..).zip(ops) {
                    memtable.insert(op.key.clone(), seq, op.value.clone());
                }
            },
        )?;
        let stats = Counters::default();
        let io = wal.take_io();
        bump(&stats.wal_bytes_written, io.bytes_written);
        bump(&stats.wal_syncs, io.syncs);
        bump(&stats.wal_records_replayed, replayed.records_applied);
        bump(&stats.wal_tail_bytes_dropped, replayed.tail_bytes_dropped);
        let state = State {
            active: Arc::new(memtable),
            frozen: Vec::new(),
        };
        let inner = DbInner {
            path,
            state: ArcSwap::from_pointee(state),
            visible_seq: AtomicU64::new(replayed.last_seq),
            wal: Mutex::new(wal),
            commit: GroupCommit::default(),
            poison: OnceLock::new(),
            stats,
            _lock: lock,
        };
        Ok(Db {
            inner: Arc::new(inner),
        })
    }

    /// Directory of the database.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Sets `key` to `value` (not synced: see [`WriteOptions`]).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// Sets `key` to `value` with the given durability.
    pub fn put_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: &WriteOptions,
    ) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.write(batch, options)
    }

    /// Removes `key` (not synced: see [`WriteOptions`]).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// Removes `key` with the given durability.
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, options: &WriteOptions) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write(batch, options)
    }

    /// Applies every entry of `batch` atomically: readers and recovery see
    /// all of it or none of it. An invalid entry fails the whole batch.
    pub fn write(&self, batch: WriteBatch, options: &WriteOptions) -> Result<()> {
        batch.validate()?;
        let len_bytes = wal::encoded_len(&batch.ops);
        if len_bytes > MAX_PAYLOAD_BYTES {
            return Err(Error::BatchTooLarge {
                len_bytes,
                max_bytes: MAX_PAYLOAD_BYTES,
            });
        }
        self.inner.check_poison()?;
        if batch.is_empty() {
            return if options.sync {
                self.flush_wal()
            } else {
                Ok(())
            };
        }
        let inner = &self.inner;
        inner
            .commit
            .submit(batch, options.sync, |group| inner.commit_group(group))
    }

    /// The current value of `key`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let key = key.as_ref();
        validate_entry(key, None)?;
        bump(&self.inner.stats.gets, 1);
        Ok(self.inner.get_latest(key))
    }

    /// Iterates over a key range, e.g. `db.range(b"a".as_slice()..b"m")` or
    /// `db.range::<&[u8], _>(..)`, at the moment of the call.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        let (lower, upper) = owned_bounds(&range);
        Iter::new(self.inner.read_view(), lower, upper)
    }

    /// Iterates over every key that starts with `prefix`.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        let (lower, upper) = prefix_bounds(prefix.as_ref());
        Iter::new(self.inner.read_view(), lower, upper)
    }

    /// A point-in-time view that later writes do not change.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.inner.clone(), self.inner.read_view())
    }

    /// Makes every write acknowledged so far durable (`fdatasync`).
    pub fn flush_wal(&self) -> Result<()> {
        self.inner.check_poison()?;
        let mut wal = self.inner.wal.lock();
        wal.sync().map_err(|e| self.inner.poison_with(e))?;
        self.inner.report_wal_io(&mut wal);
        Ok(())
    }

    /// A copy of the engine's counters.
    pub fn stats(&self) -> Stats {
        let inner = &self.inner;
        let mut stats = inner.stats.snapshot();
        let state = inner.state.load();
        stats.memtable_bytes = state.memtables().map(|m| m.size_bytes()).sum();
        stats.memtable_entries = state.memtables().map(|m| m.len() as u64).sum();
        stats.last_sequence = inner.visible_seq.load(Ordering::Acquire);
        stats
    }
}

impl DbInner {
    fn check_poison(&self) -> Result<()> {
        match self.poison.get() {
            Some(cause) => Err(Error::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Records the first I/O failure; from then on writes are refused,
    /// because after a failed fsync the state of the file is unknown.
    fn poison_with(&self, e: io::Error) -> Error {
        self.poison.get_or_init(|| e.to_string());
        Error::Io(e)
    }

    /// Like `read_view().get(key)`, without taking a reference count on the
    /// State: point reads are the hot path, and a shared counter would make
    /// concurrent readers contend on one cache line.
    fn get_latest(&self, key: &[u8]) -> Option<Bytes> {
        loop {
            let state = self.state.load();
            let seq = self.visible_seq.load(Ordering::Acquire);
            if Arc::ptr_eq(&state, &self.state.load()) {
                return state.get(key, seq);
            }
        }
    }

    /// A State and a sequence number that was visible while it was current.
    fn read_view(&self) -> ReadView {
        loop {
            let state = self.state.load_full();
            let seq = self.visible_seq.load(Ordering::Acquire);
            if Arc::ptr_eq(&state, &self.state.load()) {
                return ReadView { state, seq };
            }
        }
    }

    fn report_wal_io(&self, wal: &mut Wal) {
        let io = wal.take_io();
        bump(&self.stats.wal_bytes_written, io.bytes_written);
        bump(&self.stats.wal_syncs, io.syncs);
    }

    /// Leader work: log the group with one write (and at most one sync),
    /// apply it to the MemTable, then make it visible in one step.
    fn commit_group(&self, group: &[Request]) -> Result<()> {
        self.check_poison()?;
        let mut wal = self.wal.lock();
        let batches = group.iter().map(|r| &r.batch);
        let sync = group.iter().any(|r| r.sync);
        let first_seq = wal
            .append_group(batches, sync)
            .map_err(|e| self.poison_with(e))?;
        let next_seq = wal.next_seq();
        bump(&self.stats.wal_group_commits, 1);
        self.report_wal_io(&mut wal);
        drop(wal);
        self.apply_group(group, first_seq);
        self.visible_seq.store(next_seq - 1, Ordering::Release);
        Ok(())
    }

    fn apply_group(&self, group: &[Request], first_seq: u64) {
        let state = self.state.load();
        let mut batch_first_seq = first_seq;
        for req in group {
            // Numbering must match the WAL record exactly: entry i of the
            // batch gets `batch_first_seq + i`.
            for (seq, op) in (batch_first_seq..).zip(&req.batch.ops) {
                state.active.insert(op.key.clone(), seq, op.value.clone());
            }
            batch_first_seq += req.batch.len() as u64;
            let (puts, deletes) = req.batch.puts_and_deletes();
            bump(&self.stats.puts, puts);
            bump(&self.stats.deletes, deletes);
            bump(&self.stats.batches, 1);
            bump(&self.stats.user_bytes_written, req.batch.user_bytes());
        }
    }
}

impl Drop for DbInner {
    /// A clean close makes every acknowledged write durable.
    fn drop(&mut self) {
        if self.poison.get().is_none() {
            // Nothing to report to at drop; an error here poisons nothing
            // that outlives the handle, and reopening replays what is durable.
            let _ = self.wal.get_mut().sync();
        }
    }
}
