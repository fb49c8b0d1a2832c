//! The database handle: opening and recovery, the write path, reads.

mod backup;
mod check;
#[cfg(test)]
mod compat_tests;
#[cfg(test)]
mod compression_tests;
mod control;
mod inner;
#[cfg(all(test, target_os = "linux"))]
mod io_priority_tests;
mod iter;
mod keys;
pub(crate) mod keyspace;
mod open;
#[cfg(test)]
mod pipeline_tests;
mod range_filter;
mod read_only;
#[cfg(test)]
mod reclaim_tests;
mod snapshot;
#[cfg(test)]
mod space_tests;
pub(crate) mod txn;
mod value_garbage;
mod value_gc;
#[cfg(test)]
mod value_tests;
mod write;

/// Tiny pages, segments and MemTables, so that a few kilobytes of writes
/// make checkpoints, rotations, flushes and splits (the `db` tests').
#[cfg(test)]
fn checkpointing_test_options() -> Options {
    Options {
        wal_segment_size_bytes: 64 * 1024,
        leaf_size_bytes: 16 * 1024,
        node_size_bytes: 1024,
        checkpoint_distance_bytes: 4 * 1024,
        cache_capacity_bytes: 64 * 1024,
        ..Options::default()
    }
}

/// Every pair of the default keyspace, as owned bytes (the `db` tests').
#[cfg(test)]
fn test_contents(db: &Db) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
    db.range::<&[u8], _>(..)
        .map(|kv| {
            let (k, v) = kv.expect("scan");
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

use std::ops::RangeBounds;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

pub use backup::BackupReport;
pub use check::CheckReport;
pub use control::CONTROL_SOCKET_NAME;
pub(crate) use inner::DbInner;
pub use iter::Iter;
pub use keys::Keys;
pub use keyspace::{Keyspace, KeyspaceStats};
pub use snapshot::Snapshot;
pub use txn::{CompareAndSwapError, Transaction, TransactionIter};

use crate::checkpoint::WorkerGuard;
use crate::io::{FileSystem, RealFs};
use crate::memtable::Direction;
use crate::options::validate_entry;
use crate::stats::Stats;
use crate::store::{PagedTreeStore, StoreStats, TreeStore};
use crate::values::Value;
use crate::{Error, Options, Result, WriteBatch, WriteOptions};

/// Name of the lock file that keeps a database to one handle at a time.
pub const LOCK_FILE_NAME: &str = "LOCK";

/// An open database. Cheap to clone and share between threads.
///
/// Dropping the last clone stops the checkpoint thread and syncs the WAL,
/// so every acknowledged write is durable; an error of that last sync
/// has nobody to go to, so call [`Db::close`] instead to see it. A live
/// [`Snapshot`](crate::Snapshot) or [`Iter`](crate::Iter) keeps the
/// directory locked (and the pages it reads) until it is dropped too.
#[derive(Debug, Clone)]
pub struct Db {
    inner: Arc<DbInner>,
    /// Closes the database when the last handle goes.
    _last_handle: Arc<LastHandle>,
}

/// What dropping the last `Db` handle does: stop the checkpoint thread,
/// then sync and seal the WAL. Snapshots and iterators keep `DbInner`
/// (and the `LOCK`) alive after it, so its own drop, which seals too,
/// may come much later: syncing here makes writes acknowledged before the
/// last handle went durable even while a snapshot lives.
#[derive(Debug)]
pub(crate) struct LastHandle {
    worker: Option<WorkerGuard>,
    inner: Arc<DbInner>,
}

impl LastHandle {
    pub(crate) fn new(worker: WorkerGuard, inner: Arc<DbInner>) -> Self {
        LastHandle {
            worker: Some(worker),
            inner,
        }
    }

    /// Stops the checkpoint thread, then syncs and seals the WAL. Only
    /// the first call does anything, so `Db::close` and the drop after it
    /// close once.
    fn close(&mut self) -> Result<()> {
        let Some(worker) = self.worker.take() else {
            return Ok(());
        };
        if self.inner.poison.is_read_only() {
            return Ok(());
        }
        // No more requests from other processes: a backup being served
        // finishes first.
        self.inner.control.stop();
        // The keyspace cleaner first: it writes, and its writes may wait
        // for checkpoints. Then the checkpoint thread: it may still
        // freeze (and so rotate the log) until it stops.
        self.inner.keyspaces.cleaner.stop();
        drop(worker);
        let mut wal = self.inner.versions.wal();
        let sealed = wal.seal();
        self.inner.report_wal_io(&mut wal);
        drop(wal);
        // A failed seal first: acknowledged writes may not be durable,
        // which the caller must be able to tell from an earlier failure.
        sealed.map_err(|e| self.inner.poison.with_io(e))?;
        // A handle poisoned earlier (a failed checkpoint: the seal above
        // still made every acknowledged write durable) did not close
        // cleanly either, as RocksDB's `Close` returns its background
        // error.
        self.inner.poison.check()
    }
}

impl Drop for LastHandle {
    fn drop(&mut self) {
        // Nobody to report to; `DbInner`'s drop says why that is safe.
        let _ = self.close();
    }
}

impl Db {
    /// Opens (or, with `create_if_missing`, creates) the database at `path`.
    ///
    /// `options` are used as given: the knobs stored in the database's
    /// `OPTIONS` file (`turtlekv tune`, [`Options::store`]) apply only
    /// through [`Options::load`]. Without `create_if_missing`, a directory
    /// that holds no database is refused with an `Io` error of kind
    /// `NotFound`, and nothing is written to it.
    ///
    /// The handle serves a control socket in the directory
    /// ([`CONTROL_SOCKET_NAME`]) on a thread of its own, on which another
    /// process asks it for a backup ([`Db::backup_at`]); it is removed
    /// when the database closes.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let db = Self::open_on(path.as_ref(), options, Arc::new(RealFs))?;
        db.inner.control.serve(&db.inner);
        Ok(db)
    }

    /// Opens the database through a chosen file layer (tests use
    /// [`crate::io::FaultFs`] to inject faults and crashes).
    #[cfg(any(test, feature = "sim"))]
    pub fn open_with_fs(
        path: impl AsRef<Path>,
        options: Options,
        fs: Arc<dyn FileSystem>,
    ) -> Result<Db> {
        Self::open_on(path.as_ref(), options, fs)
    }

    fn open_on(path: &Path, options: Options, fs: Arc<dyn FileSystem>) -> Result<Db> {
        open::open(path, options, fs, &|path, options, fs| {
            let store = PagedTreeStore::open(fs, path, &options.store_config())?;
            Ok(Some(Arc::new(store) as Arc<dyn TreeStore>))
        })
    }

    /// Opens the database at `path` read-only: without its lock and
    /// without writing anything (no lock file, WAL segment, superblock
    /// write or clean-up), at its last checkpoint plus the WAL tail, with
    /// the knobs [`Options::load`] finds. It opens a closed database, a
    /// backup, or one another process holds open. Every write returns
    /// [`Error::ReadOnly`]. On a database another process holds open, a
    /// read that could see pages the owner reused since the open (it
    /// committed a checkpoint) fails with [`Error::ChangedWhileReading`]
    /// instead of returning them; open again, or use [`Db::backup`]
    /// through the owner (`docs/durability.md`, "Read-only handles").
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Db> {
        read_only::open_read_only(path.as_ref(), Arc::new(RealFs))
    }

    /// [`Db::open_read_only`] through a chosen file layer.
    #[cfg(any(test, feature = "sim"))]
    pub fn open_read_only_with_fs(path: impl AsRef<Path>, fs: Arc<dyn FileSystem>) -> Result<Db> {
        read_only::open_read_only(path.as_ref(), fs)
    }

    /// Whether this handle was opened with [`Db::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.poison.is_read_only()
    }

    /// Whether a handle, of this process or another, has the database at
    /// `path` open: a [`Db::open`] of it would fail with
    /// [`Error::Locked`]. `false` where `path` holds no database. The
    /// answer is of the moment: a tool that changes the stored options
    /// ([`Options::store`]) uses it to say that a running process keeps
    /// its settings until it reopens.
    pub fn is_in_use(path: impl AsRef<Path>) -> Result<bool> {
        let lock = path.as_ref().join(LOCK_FILE_NAME);
        // Asking must not leave a lock file where there is no database.
        if !lock.exists() {
            return Ok(false);
        }
        Ok(RealFs.lock(&lock)?.is_none())
    }

    /// Opens with a chosen tree store (tests of the checkpoint pipeline).
    #[cfg(test)]
    pub(crate) fn open_with_store(
        path: impl AsRef<Path>,
        options: Options,
        fs: Arc<dyn FileSystem>,
        make_store: open::StoreFactory<'_>,
    ) -> Result<Db> {
        open::open(path.as_ref(), options, fs, make_store)
    }

    /// Directory of the database, made absolute at open (the path given,
    /// joined to the working directory of that moment if it was relative).
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
        let tag = self.inner.keyspaces.default.tag;
        self.put_behind(
            WriteBatch::new(),
            tag,
            (key.as_ref(), value.as_ref()),
            options,
        )
    }

    /// Writes `batch` (empty, or naming the keyspace `tag` belongs to)
    /// with a put of `key` behind `tag`. A value that will be separated
    /// goes straight from the caller's buffer to its value file: a value
    /// of a gigabyte is not copied into the batch first.
    pub(crate) fn put_behind(
        &self,
        mut batch: WriteBatch,
        tag: keyspace::Tag,
        (key, value): (&[u8], &[u8]),
        options: &WriteOptions,
    ) -> Result<()> {
        let threshold = self.inner.value_separation_threshold_bytes;
        let stored_key_len = tag.len() + key.len();
        if !self
            .inner
            .limits
            .separates(stored_key_len, value.len(), threshold)
        {
            batch.push_behind(tag, key, Some(value));
            return self.write(batch, options);
        }
        // Bad input is refused before anything is written.
        self.check_entry(key, Some(value))?;
        let (pointer, pending) = self.inner.write_value(&tag.stored_key(key), value)?;
        batch.push_value(tag, key, Value::Pointer(pointer.encode()), value);
        let written = self.write(batch, options);
        // Only now may the collector judge the file the value went to.
        drop(pending);
        written
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

    /// Deletes every key `k` with `start <= k < end` (bytewise order, as
    /// [`Db::range`] orders keys), not synced: see [`WriteOptions`]. One
    /// entry in the log however many keys the range holds; reads honour it
    /// at once, snapshots taken before it still see the keys, and the
    /// checkpoint that moves it into the tree deletes the tree's keys in
    /// the range (`docs/design.md`, "A range deletion").
    ///
    /// Both bounds must be valid keys ([`Error::EmptyKey`],
    /// [`Error::KeyTooLarge`]) and `start` must be below `end`: an empty or
    /// inverted range is [`Error::InvalidRange`] and changes nothing.
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.delete_range_opt(start, end, &WriteOptions::default())
    }

    /// [`Db::delete_range`] with the given durability.
    pub fn delete_range_opt(
        &self,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
        options: &WriteOptions,
    ) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range(start, end);
        self.write(batch, options)
    }

    /// Whether this database takes the entry (a put with `Some(value)`, a
    /// delete with `None`): the input error a write of it would return,
    /// without writing anything. A database with small node pages takes
    /// keys shorter than [`crate::MAX_KEY_SIZE`] (`Options::node_size_bytes`);
    /// every database takes values up to [`crate::MAX_VALUE_SIZE`].
    pub fn check_entry(&self, key: impl AsRef<[u8]>, value: Option<&[u8]>) -> Result<()> {
        let key = key.as_ref();
        self.inner.limits.check(key, value)?;
        validate_entry(key, value)
    }

    /// Applies every entry of `batch` atomically: readers and recovery see
    /// all of it or none of it, across keyspaces. An invalid entry, or a
    /// keyspace that was dropped or belongs to another database, fails the
    /// whole batch and nothing of it is applied.
    pub fn write(&self, batch: WriteBatch, options: &WriteOptions) -> Result<()> {
        self.write_checked(batch, options, None)
    }

    /// `write`, with a transaction's conflict check for the leader.
    fn write_checked(
        &self,
        mut batch: WriteBatch,
        options: &WriteOptions,
        check: Option<Arc<txn::check::TxnCheck>>,
    ) -> Result<()> {
        let inner = &self.inner;
        // The database's own limits first: they are the global ones or
        // less, so an error reports what this database takes.
        for op in &batch.ops {
            inner
                .limits
                .check(op.user_key(), op.value.as_ref().map(|v| &v.stored()[..]))?;
            if let Some(end) = op.user_end() {
                inner.limits.check(end, None)?;
            }
        }
        batch.validate()?;
        if let Some(foreign) = batch.keyspaces.iter().find(|k| !k.belongs_to(inner)) {
            return Err(Error::ForeignKeyspace(foreign.name().to_vec()));
        }
        if !inner.keyspaces.tagged {
            // Bare keys: only the default keyspace exists here.
            for op in &mut batch.ops {
                bytes::Buf::advance(&mut op.key, usize::from(op.tag_len));
                if let Some(end) = &mut op.end {
                    bytes::Buf::advance(end, usize::from(op.tag_len));
                }
                op.tag_len = 0;
            }
        }
        let counts = keyspace::BatchCounts::of(&batch, &inner.keyspaces.default);
        // Named keyspaces: no drop between the check and the apply.
        let gate = (!batch.keyspaces.is_empty()).then(|| inner.keyspaces.write_gate.read());
        for keyspace in &batch.keyspaces {
            keyspace.core().check_live()?;
        }
        let conflicted = check.clone();
        inner.submit_batch(batch, options.sync, check)?;
        drop(gate);
        if conflicted.is_none_or(|c| c.conflict.lock().is_none()) {
            counts.record();
        }
        Ok(())
    }

    /// The current value of `key`.
    ///
    /// The returned `Bytes` may share its allocation with the frozen
    /// MemTable it was read from (chunks of up to 1 MiB) or with the block
    /// it was read from, which stays allocated while the value lives; copy
    /// it (`to_vec()`) to keep many values for long.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let inner = &self.inner;
        keyspace::get_latest(inner, &inner.keyspaces.default, key.as_ref())
    }

    /// Iterates over a key range, e.g. `db.range(b"a".as_slice()..b"m")` or
    /// `db.range::<&[u8], _>(..)`, at the moment of the call.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        let inner = &self.inner;
        let view = inner.versions.read_view();
        keyspace::range_in(inner, view, &inner.keyspaces.default, range)
    }

    /// Iterates over every key that starts with `prefix`.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        let inner = &self.inner;
        let view = inner.versions.read_view();
        keyspace::prefix_in(inner, view, &inner.keyspaces.default, prefix.as_ref())
    }

    /// Iterates over every key, in order (from either end: [`Iter`] is
    /// double-ended), at the moment of the call.
    pub fn iter(&self) -> Iter {
        self.range::<&[u8], _>(..)
    }

    /// Whether `key` has a value.
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.get(key)?.is_some())
    }

    /// The values of `keys`, in their order, all read at one point in
    /// time. The lookups that must read from disk issue their reads
    /// together, so that the device serves them at once: out of cache, 32
    /// keys measured 2.35-2.6 times the throughput of one [`Db::get`] after
    /// another (`docs/benchmarks.md`). An invalid key fails the whole call.
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<Vec<Option<Bytes>>> {
        let inner = &self.inner;
        let view = inner.versions.read_view();
        keyspace::multi_get_at(inner, &view, &inner.keyspaces.default, keys)
    }

    /// About how many keys the database holds, cheaply: from the
    /// tree's node pages and leaf heads (usually cached) and the
    /// MemTables, without reading the records. Keys with versions not yet
    /// merged (an overwrite buffered above an older version, a delete
    /// not yet applied) may count more than once, as in RocksDB's
    /// `estimate-num-keys`; count with [`Db::iter`] for an exact figure.
    pub fn approximate_len(&self) -> Result<u64> {
        keyspace::approximate_len(
            &self.inner.versions.read_view(),
            &self.inner.keyspaces.default,
        )
    }

    /// The pair with the smallest key, if any.
    pub fn first_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        let inner = &self.inner;
        let view = inner.versions.read_view();
        keyspace::end_pair(inner, view, &inner.keyspaces.default, Direction::Forward)
    }

    /// The pair with the largest key, if any.
    pub fn last_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        let inner = &self.inner;
        let view = inner.versions.read_view();
        keyspace::end_pair(inner, view, &inner.keyspaces.default, Direction::Reverse)
    }

    /// Starts an optimistic transaction (see [`Transaction`]).
    pub fn transaction(&self) -> Transaction {
        Transaction::new(self.clone())
    }

    /// A point-in-time view that later writes do not change, of every
    /// keyspace at once.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.inner.clone(), self.inner.versions.read_view())
    }

    /// Opens the keyspace `name` (1 to 255 bytes), creating it, durably,
    /// if it does not exist. The default keyspace is the `Db` itself and
    /// has no name. A database created by a build without keyspaces holds
    /// only the default one ([`Error::KeyspacesUnsupported`]).
    pub fn keyspace(&self, name: impl AsRef<[u8]>) -> Result<Keyspace> {
        // A read-only handle opens existing keyspaces; creating one is a
        // write, refused there.
        if !self.is_read_only() {
            self.inner.poison.check()?;
        }
        let core = self.inner.keyspaces.open(&self.inner, name.as_ref())?;
        Ok(Keyspace::new(self.clone(), core))
    }

    /// Names of the named keyspaces, in byte order.
    pub fn keyspace_names(&self) -> Result<Vec<Vec<u8>>> {
        let names = self.inner.keyspaces.names(&self.inner)?;
        Ok(names.into_iter().map(|n| n.to_vec()).collect())
    }

    /// Drops the keyspace `name`. Once this returns, the drop is durable
    /// and every handle of the keyspace fails with
    /// [`Error::KeyspaceDropped`]; a keyspace opened later under the same
    /// name starts empty. The keyspace's keys are deleted in the
    /// background and their pages freed by the checkpoints that follow
    /// ([`Stats::keyspaces_dropping`] counts the drops still cleaning).
    pub fn drop_keyspace(&self, name: impl AsRef<[u8]>) -> Result<()> {
        self.inner.poison.check()?;
        self.inner
            .keyspaces
            .drop_keyspace(&self.inner, name.as_ref())
    }

    /// Closes this handle and returns what its drop would have to hide.
    ///
    /// The last open handle stops the checkpoint thread, syncs and seals
    /// the WAL (so every acknowledged write is durable) and returns an
    /// error if the seal failed (the writes since the last sync may then
    /// be lost) or, after a seal that held, the error that poisoned the
    /// handle earlier. While other clones are open, the database stays
    /// open through them, and this only makes the writes acknowledged so
    /// far durable, as [`Db::flush_wal`] does; of clones closed at the
    /// same time, exactly one is the last. As with a drop, a live
    /// [`Snapshot`] or [`Iter`] keeps the directory locked (a reopen
    /// returns `Error::Locked`) until it goes.
    pub fn close(self) -> Result<()> {
        if self.is_read_only() {
            // Nothing to make durable: it wrote nothing.
            return Ok(());
        }
        let Db {
            inner,
            _last_handle: last,
        } = self;
        match Arc::into_inner(last) {
            Some(mut last) => last.close(),
            None => Db::sync_wal(&inner),
        }
    }

    /// Makes every write acknowledged so far durable (`fdatasync`).
    pub fn flush_wal(&self) -> Result<()> {
        Db::sync_wal(&self.inner)
    }

    fn sync_wal(inner: &DbInner) -> Result<()> {
        inner.sync_wal()
    }

    /// Verifies both superblock slots, the stored options' checksum, every
    /// WAL segment's identity and record (a live segment that is missing
    /// is corruption), the order of the MemTables and every page and
    /// invariant of the tree. Corruption is returned as
    /// `Error::Corruption`; the check reads everything, so it takes a while
    /// on a large database.
    pub fn check(&self) -> Result<CheckReport> {
        check::check(&self.inner)
    }

    /// Writes a consistent copy of the whole database (every keyspace) as
    /// of this call into `dest`, a new directory or an empty one, while
    /// reads and writes go on; the copy opens as a database of its own.
    /// Every page copied is verified first (`Error::Corruption` if one
    /// fails). A destination that exists and is not empty, or lies inside
    /// this database or another, is refused with
    /// [`Error::BackupTarget`] before anything is written; a backup that
    /// fails or is cut short by a crash leaves `dest` refused by every
    /// open. See `docs/durability.md`, "Backups".
    pub fn backup(&self, dest: impl AsRef<Path>) -> Result<BackupReport> {
        backup::backup(&self.inner, dest.as_ref())
    }

    /// Backs up the database at `path` into `dest` whether or not a
    /// handle holds it: one no handle holds is opened (with the options
    /// [`Options::load`] finds) and closed again; one another handle
    /// holds, in this process or another, is asked to back itself up
    /// through its control socket ([`CONTROL_SOCKET_NAME`]), so that the
    /// copy is as consistent as [`Db::backup`]'s. Fails with an `Io`
    /// error if the holder serves no socket (a file system without
    /// sockets).
    pub fn backup_at(path: impl AsRef<Path>, dest: impl AsRef<Path>) -> Result<BackupReport> {
        backup::backup_at(path.as_ref(), dest.as_ref())
    }

    /// A copy of the engine's counters.
    pub fn stats(&self) -> Stats {
        let inner = &self.inner;
        let mut stats = inner.stats.snapshot();
        let state = inner.versions.state();
        stats.memtable_bytes = state.memtables().map(|m| m.size_bytes()).sum();
        stats.memtable_entries = state.memtables().map(|m| m.len() as u64).sum();
        stats.range_tombstones = range_tombstones_held(&state);
        stats.last_sequence = inner.versions.visible_seq();
        stats.frozen_memtables = state.frozen.len() as u64;
        stats.checkpoint_covered_sequence = inner.versions.covered_seq();
        stats.checkpoint_distance_bytes = inner.effective_checkpoint_distance();
        stats.memory_budget_bytes = inner.memory.budget.total_bytes();
        let records = inner.record_cache.counts();
        stats.record_cache_hits = records.hits;
        stats.record_cache_misses = records.misses;
        stats.record_cache_evictions = records.evictions;
        stats.record_cache_refusals = records.refusals;
        stats.record_cache_used_bytes = records.used_bytes;
        stats.record_cache_capacity_bytes = records.capacity_bytes;
        stats.record_cache_ghost_recalls = records.ghost_recalls;
        if let Some(trees) = inner.versions.trees() {
            add_store_stats(&mut stats, &trees.stats());
        }
        let values = inner.values.stats();
        stats.value_files = values.files;
        stats.value_file_bytes = values.bytes;
        stats.value_records_written = values.records_written;
        stats.value_bytes_written = values.bytes_written;
        stats.value_reads = values.reads;
        stats.value_live_bytes = inner
            .values
            .file_lens()
            .into_iter()
            .map(|(id, len)| inner.value_garbage.live_bytes(id, len))
            .sum();
        stats.space_live_bytes += stats.value_live_bytes;
        stats.space_allocated_bytes = allocated_bytes(&*inner.fs, &inner.path);
        let catalog = &inner.keyspaces;
        let named = catalog.named();
        stats.keyspaces = std::iter::once(&catalog.default)
            .chain(&named)
            .map(|core| KeyspaceStats::of(core))
            .collect();
        stats.keyspaces_dropping = catalog.cleaner.pending()
            + inner
                .versions
                .trees()
                .map_or(0, |t| t.drains_pending() as u64);
        stats
    }

    /// Changes the MemTable capacity while the database runs; the next
    /// write that finds the MemTable at least this full freezes it. Larger
    /// distances lower write amplification and leave less of the memory
    /// budget to the page cache.
    pub fn set_checkpoint_distance(&self, bytes: u64) -> Result<()> {
        if bytes < crate::options::MIN_CHECKPOINT_DISTANCE_BYTES {
            return Err(Error::InvalidOptions(format!(
                "checkpoint distance of {bytes} bytes is below the minimum of {}",
                crate::options::MIN_CHECKPOINT_DISTANCE_BYTES
            )));
        }
        self.inner.memory.set_checkpoint_distance(bytes);
        Ok(())
    }

    /// Changes the MemTable capacity used while writes come alone (see
    /// [`Options::write_only_checkpoint_distance_bytes`]); a value at or
    /// below the checkpoint distance turns the switch off.
    pub fn set_write_only_checkpoint_distance(&self, bytes: u64) {
        self.inner.memory.set_write_only_checkpoint_distance(bytes);
    }

    /// Changes the memory budget shared by the page cache and the MemTables
    /// while the database runs (see [`Options::cache_capacity_bytes`]);
    /// shrinking evicts at once.
    pub fn set_cache_capacity(&self, bytes: u64) -> Result<()> {
        if bytes < crate::options::MIN_CACHE_CAPACITY_BYTES {
            return Err(Error::InvalidOptions(format!(
                "cache capacity of {bytes} bytes is below the minimum of {}",
                crate::options::MIN_CACHE_CAPACITY_BYTES
            )));
        }
        let inner = &self.inner;
        inner
            .memory
            .set_budget_bytes(bytes, &inner.versions, &inner.record_cache);
        Ok(())
    }

    /// Changes the record cache's share of the memory budget while the
    /// database runs (capped at half of it; 0 turns the record cache off).
    /// The page cache gets what is freed, or gives what is taken. With the
    /// automatic split on, the share then moves from there as reads show
    /// (see [`Db::set_record_cache_auto_split`]).
    pub fn set_record_cache_capacity(&self, bytes: u64) {
        let inner = &self.inner;
        inner
            .memory
            .set_record_cache_bytes(bytes, &inner.versions, &inner.record_cache);
    }

    /// Turns the automatic split between record cache and page cache on
    /// or off while the database runs (see
    /// [`Options::record_cache_auto_split`](crate::Options::record_cache_auto_split)).
    /// Turning it off keeps the record cache's current share.
    pub fn set_record_cache_auto_split(&self, on: bool) {
        self.inner.memory.set_record_cache_auto_split(on);
    }

    /// Freezes the active MemTable and returns once it, and every MemTable
    /// frozen before it, is in a durable checkpoint. The WAL segments the
    /// checkpoints cover are removed.
    pub fn checkpoint_now(&self) -> Result<()> {
        self.inner.checkpoint_now()
    }
}

/// Range tombstones in the MemTables of `state`.
fn range_tombstones_held(state: &crate::store::State) -> u64 {
    state
        .memtables()
        .map(|m| m.range_tombstones().len() as u64)
        .sum()
}

/// Copies the tree store's counters and gauges into `stats`.
fn add_store_stats(stats: &mut Stats, t: &StoreStats) {
    stats.range_keys_deleted = t.range_keys_deleted;
    stats.range_deletion_steps = t.range_steps;
    let (store, written, shape) = (&t.pages, &t.written, &t.shape);
    stats.cache_capacity_bytes = store.cache_capacity_bytes;
    stats.cache_used_bytes = store.cache_used_bytes;
    stats.cache_pooled_bytes = store.cache_pooled_bytes;
    stats.cache_frame_bytes = store.cache_frame_bytes;
    stats.cache_frames_released = store.cache_frames_released;
    stats.cache_leaf_head_bytes = store.cache_leaf_head_bytes;
    stats.cache_filter_bytes = store.cache_filter_bytes;
    stats.cache_node_bytes = store.cache_node_bytes;
    stats.cache_hits = store.cache_hits;
    stats.cache_misses = store.cache_misses;
    stats.cache_leaf_head_misses = store.cache_leaf_head_misses;
    stats.cache_filter_misses = store.cache_filter_misses;
    stats.cache_evictions = store.cache_evictions;
    stats.cache_ghost_recalls = store.cache_ghost_recalls;
    stats.cache_blocks_freed_cached = store.cache_blocks_freed_cached;
    stats.page_bytes_read = store.bytes_read;
    stats.page_read_ios = store.read_ios;
    stats.page_bytes_written = store.bytes_written;
    stats.page_bytes_punched = store.bytes_punched;
    stats.dead_chunk_bytes_punched = store.dead_chunk_bytes_punched;
    stats.page_syncs = store.syncs;
    stats.leaf_pages_written = written.leaf_pages_written;
    stats.leaf_bytes_written = written.leaf_bytes_written;
    stats.filter_bytes_written = written.filter_bytes_written;
    stats.checkpoint_spills = written.spills;
    stats.node_pages_written = written.node_pages_written;
    stats.node_bytes_written = written.node_bytes_written;
    stats.compression_input_bytes = written.compression_input_bytes;
    stats.compression_output_bytes = written.compression_output_bytes;
    stats.tree_height = u64::from(shape.height);
    stats.tree_node_pages = shape.node_pages;
    stats.tree_leaf_pages = shape.leaf_pages;
    stats.tree_segment_pages = shape.segment_pages;
    stats.tree_buffered_bytes = shape.pending_bytes;
    stats.tree_leaf_page_bytes = shape.leaf_page_bytes;
    stats.tree_leaf_capacity_bytes = shape.leaf_capacity_bytes;
    stats.tree_segment_page_bytes = shape.segment_page_bytes;
    stats.space_live_bytes = t.space.live_bytes;
    stats.space_garbage_bytes = t.space.garbage_bytes;
    stats.reclaim_flushes = written.reclaim_flushes;
}

/// Allocated bytes of the files in `dir` and its WAL directory. A file
/// removed while they are summed (a trimmed WAL segment) counts as 0.
fn allocated_bytes(fs: &dyn FileSystem, dir: &Path) -> u64 {
    let mut total = 0;
    let dirs = [
        dir.to_path_buf(),
        dir.join(crate::wal::WAL_DIR),
        dir.join(crate::values::VALUES_DIR),
    ];
    for sub in dirs {
        for name in fs.list_dir(&sub).unwrap_or_default() {
            let file = fs.open(&sub.join(&name), crate::io::OpenOptions::read_only());
            total += file.and_then(|f| f.allocated_bytes()).unwrap_or(0);
        }
    }
    total
}
