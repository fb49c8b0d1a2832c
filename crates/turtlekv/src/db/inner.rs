//! The state shared by every handle of one open database, grouped by the
//! layer that owns each part.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;

use crate::checkpoint::{Checkpoints, PanicIsFailure, Pipeline};
use crate::error::Poison;
use crate::io::{FileSystem, LockGuard};
use crate::key::MAX_TAG_BYTES;
use crate::policy::MemoryPolicy;
use crate::record_cache::RecordCache;
use crate::stats::{Counters, bump};
use crate::store::{State, TreeStore, VersionSet};
use crate::values::{Value, ValuePointer, ValueStore};
use crate::wal::{GroupCommit, Wal};
use crate::{Error, Result};

#[derive(Debug)]
pub(crate) struct DbInner {
    pub path: PathBuf,
    /// The file layer every file of the database goes through.
    pub fs: Arc<dyn FileSystem>,
    /// The store layer: the published State, the visible sequence number,
    /// the WAL and the tree store.
    pub versions: VersionSet,
    /// Writers queue here; one leader at a time logs and applies a group.
    pub commit: GroupCommit<crate::db::write::Prepared>,
    /// The checkpoint pipeline's signals and merge threads.
    pub checkpoints: Checkpoints,
    /// How the memory budget is shared, and the knobs that move it.
    pub memory: MemoryPolicy,
    /// Newest values of hot keys read from the tree.
    pub record_cache: RecordCache,
    /// The value files separated values live in.
    pub values: Arc<ValueStore>,
    /// Values at least this long are separated
    /// (`Options::value_separation_threshold_bytes`).
    pub value_separation_threshold_bytes: u64,
    /// `Options::value_file_min_live_percent`.
    pub value_file_min_live_percent: u32,
    /// Where value garbage collection stands (`db::value_gc`).
    pub value_gc: parking_lot::Mutex<crate::db::value_gc::ValueGc>,
    /// What writers' samples tell value garbage collection about the
    /// garbage their writes make (`db::value_gc`).
    pub value_garbage: crate::db::value_garbage::GarbageEstimate,
    /// The largest keys and entries the tree stores.
    pub limits: EntryLimits,
    /// The keyspaces: names, tags, drops.
    pub keyspaces: crate::db::keyspace::Catalog,
    /// Set by the first failed write or sync; writes are refused from then on.
    pub poison: Poison,
    /// The control socket other processes ask for backups on.
    pub control: crate::db::control::Control,
    pub stats: Counters,
    /// Dropped last, so the lock outlives every other file handle.
    pub _lock: Box<dyn LockGuard>,
}

/// The largest keys and entries a database's tree stores: writes of larger
/// ones are refused before they are logged (they would fail the checkpoint
/// after the write was acknowledged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryLimits {
    /// Largest item (encoded length) the tree stores.
    pub max_item_bytes: usize,
    /// Longest user key the tree's node size takes behind the longest
    /// keyspace tag (`MAX_KEY_SIZE` unless `node_size_bytes` is below 4 KiB).
    pub max_key_bytes: usize,
}

impl EntryLimits {
    /// The limits of `trees`, or the global ones without a tree.
    pub fn of(trees: Option<&Arc<dyn TreeStore>>) -> Self {
        EntryLimits {
            max_item_bytes: trees.map_or(usize::MAX, |t| t.max_item_bytes()),
            max_key_bytes: trees.map_or(crate::MAX_KEY_SIZE, |t| {
                t.max_key_bytes().saturating_sub(MAX_TAG_BYTES)
            }),
        }
    }

    /// Refuses an entry the database could not store: a key longer than
    /// the tree takes, a value longer than `MAX_VALUE_SIZE` (values too
    /// long for a leaf are separated).
    pub fn check(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if key.len() > self.max_key_bytes {
            return Err(Error::KeyTooLarge {
                len_bytes: key.len(),
                max_bytes: self.max_key_bytes,
            });
        }
        match value {
            Some(v) if v.len() > crate::MAX_VALUE_SIZE => Err(Error::ValueTooLarge {
                len_bytes: v.len(),
                max_bytes: crate::MAX_VALUE_SIZE,
            }),
            _ => Ok(()),
        }
    }

    /// Whether a value of `value_len` bytes beside stored key `key` goes
    /// to a value file: at or above `threshold_bytes`, or too long for a
    /// leaf page or the log to hold in place.
    pub fn separates(&self, key_len: usize, value_len: usize, threshold_bytes: u64) -> bool {
        if value_len as u64 >= threshold_bytes || value_len > crate::options::MAX_INLINE_VALUE_BYTES
        {
            return true;
        }
        // An item's header takes at most 16 bytes for these lengths.
        let surely_fits = key_len + value_len + 16 <= self.max_item_bytes;
        !surely_fits && value_len > self.max_value_bytes(key_len)
    }

    /// Longest value the tree stores beside a key of `key_len` bytes, at
    /// most `MAX_VALUE_SIZE`. Found downwards from an upper bound, as the
    /// value's length field widens with the value.
    fn max_value_bytes(&self, key_len: usize) -> usize {
        let layout = crate::tree::ItemLayout::CURRENT;
        let fits = |len| layout.item_len(key_len, Some(len)) <= self.max_item_bytes;
        let mut len = self
            .max_item_bytes
            .saturating_sub(layout.item_len(key_len, Some(0)))
            .min(crate::MAX_VALUE_SIZE);
        while len > 0 && !fits(len) {
            len -= 1;
        }
        len
    }
}

impl DbInner {
    /// Like `get_at` on a fresh read view, without taking a reference
    /// count on the State: point reads are the hot path, and a shared
    /// counter would make concurrent readers contend on one cache line.
    pub fn get_latest(&self, key: &[u8]) -> Result<Option<Bytes>> {
        let read = || {
            let found = self
                .versions
                .with_latest(|state, seq| self.get_stored_at(state, seq, key))?;
            Ok::<_, Error>((found.clone(), self.resolve_cached(key, found)))
        };
        let (found, value) = read()?;
        // Without a view's pin, the read may have raced value garbage
        // collection, which removes a file only once its records' moved
        // copies are visible: reading again finds the copy.
        if value.is_err() && self.names_removed_file(found.as_ref()) {
            return read()?.1;
        }
        value
    }

    /// Whether `value` points into a value file garbage collection removed.
    fn names_removed_file(&self, value: Option<&Value>) -> bool {
        let Some(Value::Pointer(encoded)) = value else {
            return false;
        };
        ValuePointer::decode(encoded).is_ok_and(|p| self.values.was_removed(p.file_id))
    }

    /// The value of `key` at `seq` in `state` (a consistent pair): from the
    /// record cache when it can answer, else from the MemTables and the
    /// tree, admitting what the tree answered. Counts the page reads it
    /// causes.
    pub fn get_at(&self, state: &State, seq: u64, key: &[u8]) -> Result<Option<Bytes>> {
        let found = self.get_stored_at(state, seq, key)?;
        self.resolve_cached(key, found)
    }

    /// `resolve_option` for a point read: a separated value read through a
    /// pointer the record cache holds replaces the pointer there
    /// (`RecordCache::admit_resolved`), so a hot key's next read skips
    /// its value file too.
    fn resolve_cached(&self, key: &[u8], found: Option<Value>) -> Result<Option<Bytes>> {
        let Some(pointer @ Value::Pointer(_)) = found else {
            return self.resolve_option(key, found);
        };
        let bytes = self.resolve(key, pointer.clone())?;
        self.cache_resolved(key, &pointer, &bytes);
        Ok(Some(bytes))
    }

    /// Hands the record cache a separated value read through `pointer`
    /// (`RecordCache::admit_resolved`), if it is short enough to cache.
    fn cache_resolved(&self, key: &[u8], pointer: &Value, bytes: &Bytes) {
        if bytes.len() <= crate::record_cache::MAX_SEPARATED_VALUE_BYTES {
            self.record_cache.admit_resolved(key, pointer, bytes);
        }
    }

    /// `get_at`, with a separated value's pointer as stored.
    pub fn get_stored_at(&self, state: &State, seq: u64, key: &[u8]) -> Result<Option<Value>> {
        if let Some(cached) = self.record_cache.get(key, seq) {
            return Ok(cached);
        }
        if let Some(found) = state.memtable_get(key, seq) {
            return Ok(found);
        }
        self.tree_get(state, seq, key)
    }

    /// `get_at` of every key of `keys`, in order, with the disk reads of
    /// the tree's lookups issued together (`TreeVersion::get_many`).
    pub fn multi_get_at(
        &self,
        state: &State,
        seq: u64,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Bytes>>> {
        let found = self.multi_get_stored_at(state, seq, keys)?;
        let mut values = Vec::with_capacity(keys.len());
        let (mut separated, mut separated_at) = (Vec::new(), Vec::new());
        for (i, value) in found.into_iter().enumerate() {
            values.push(match value {
                Some(Value::Inline(bytes)) => Some(bytes),
                Some(Value::Pointer(encoded)) => {
                    separated.push((keys[i], self.decode_pointer(&encoded)?));
                    // Kept encoded, to find the record cache's entry by.
                    separated_at.push((i, Value::Pointer(encoded)));
                    None
                }
                None => None,
            });
        }
        // The value files' reads in flight together, as the tree's were.
        let read = self.values.read_many(&separated);
        for (((i, pointer), read), (key, _)) in separated_at.into_iter().zip(read).zip(&separated) {
            let bytes = read?;
            self.cache_resolved(key, &pointer, &bytes);
            values[i] = Some(bytes);
        }
        Ok(values)
    }

    /// `multi_get_at`, with separated values' pointers as stored.
    fn multi_get_stored_at(
        &self,
        state: &State,
        seq: u64,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Value>>> {
        let mut values = Vec::with_capacity(keys.len());
        let mut to_tree = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            let found = match self.record_cache.get(key, seq) {
                Some(cached) => Some(cached),
                None => state.memtable_get(key, seq),
            };
            if found.is_none() {
                to_tree.push(i);
            }
            values.push(found.flatten());
        }
        let Some(tree) = &state.tree else {
            return Ok(values);
        };
        let pending: Vec<&[u8]> = to_tree.iter().map(|&i| keys[i]).collect();
        let reads_before = crate::page::thread_read_ios();
        let found = tree.get_many(&pending)?;
        let reads = crate::page::thread_read_ios() - reads_before;
        bump(&self.stats.get_disk_reads, reads);
        for ((i, key), value) in to_tree.into_iter().zip(pending).zip(found) {
            self.record_cache.admit(key, value.as_ref(), seq);
            values[i] = value;
        }
        Ok(values)
    }

    /// The tree's answer for `key` under `state`, admitted to the record
    /// cache. Counts the page reads it causes.
    fn tree_get(&self, state: &State, seq: u64, key: &[u8]) -> Result<Option<Value>> {
        let Some(tree) = &state.tree else {
            return Ok(None);
        };
        let reads_before = crate::page::thread_read_ios();
        let value = tree.get(key)?;
        let reads = crate::page::thread_read_ios() - reads_before;
        bump(&self.stats.get_disk_reads, reads);
        if reads > 0 {
            self.record_cache.recall_after_disk_read(key);
        }
        self.record_cache.admit(key, value.as_ref(), seq);
        Ok(value)
    }

    /// The user's bytes of a stored value of `key` (a stored key): a
    /// separated value is read from its value file.
    pub fn resolve(&self, key: &[u8], value: Value) -> Result<Bytes> {
        match value {
            Value::Inline(bytes) => Ok(bytes),
            Value::Pointer(encoded) => self.values.read(key, &self.decode_pointer(&encoded)?),
        }
    }

    /// A stored value pointer, decoded; damage is `Error::Corruption`.
    fn decode_pointer(&self, encoded: &[u8]) -> Result<ValuePointer> {
        ValuePointer::decode(encoded).map_err(|bad| {
            Error::corruption(
                self.path.join(crate::values::VALUES_DIR),
                0,
                format!("a damaged value pointer: {bad}"),
            )
        })
    }

    /// Reads and verifies the record a value pointer names (`Db::check`).
    pub fn resolve_checked(&self, key: &[u8], value: &Value) -> Result<()> {
        self.resolve(key, value.clone()).map(drop)
    }

    /// `resolve` of a value that may be absent.
    pub fn resolve_option(&self, key: &[u8], value: Option<Value>) -> Result<Option<Bytes>> {
        value.map(|v| self.resolve(key, v)).transpose()
    }

    pub fn report_wal_io(&self, wal: &mut Wal) {
        let io = wal.take_io();
        bump(&self.stats.wal_bytes_written, io.bytes_written);
        bump(&self.stats.wal_syncs, io.syncs);
    }

    /// The MemTable capacity in force (`MemoryPolicy`).
    pub fn effective_checkpoint_distance(&self) -> u64 {
        self.memory
            .effective_checkpoint_distance(&self.record_cache)
    }

    /// Gives the page cache what the MemTables and the record cache leave
    /// of the memory budget.
    pub fn rebalance_memory(&self, force: bool) {
        self.memory
            .rebalance(&self.versions, &self.record_cache, force);
    }

    /// The checkpoint thread's body.
    pub fn run_checkpoints(&self) {
        let _panic_is_failure = PanicIsFailure {
            poison: &self.poison,
            checkpoints: &self.checkpoints,
        };
        if let Some(io) = self.checkpoints.idle_io() {
            io.join_current_thread();
        }
        let Some(trees) = self.versions.trees() else {
            return;
        };
        let freeze_if_idle = || self.freeze_if_idle();
        let release_wal_reserve = || self.release_wal_reserve_if_idle();
        let sync_values = || self.values.sync().map_err(|e| self.poison.with_io(e));
        let collect_value_garbage = || self.collect_value_garbage();
        let pipeline = Pipeline {
            versions: &self.versions,
            checkpoints: &self.checkpoints,
            memory: &self.memory,
            record_cache: &self.record_cache,
            poison: &self.poison,
            stats: &self.stats,
            freeze_if_idle: &freeze_if_idle,
            release_wal_reserve: &release_wal_reserve,
            sync_values: &sync_values,
            collect_value_garbage: &collect_value_garbage,
        };
        pipeline.run(&**trees);
    }
}

impl Drop for DbInner {
    /// A clean close makes every acknowledged write durable, and seals the
    /// WAL so that later damage to it is reported, not taken for a torn
    /// tail. A poisoned handle closes so too unless the WAL itself failed
    /// (`Wal::seal` then refuses): a failed checkpoint leaves the log whole,
    /// and the writes it acknowledged are replayed from it.
    fn drop(&mut self) {
        // Nothing to report to at drop; an error here poisons nothing
        // that outlives the handle, and reopening replays what is durable.
        let _ = self.versions.wal_mut().seal();
    }
}
