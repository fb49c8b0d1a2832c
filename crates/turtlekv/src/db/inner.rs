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

    /// Refuses an entry the tree could not store.
    pub fn check(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if key.len() > self.max_key_bytes {
            return Err(Error::KeyTooLarge {
                len_bytes: key.len(),
                max_bytes: self.max_key_bytes,
            });
        }
        let max_bytes = self.max_value_bytes(key.len() + MAX_TAG_BYTES);
        match value {
            Some(v) if v.len() > max_bytes => Err(Error::ValueTooLarge {
                len_bytes: v.len(),
                max_bytes,
            }),
            _ => Ok(()),
        }
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
        self.versions
            .with_latest(|state, seq| self.get_at(state, seq, key))
    }

    /// The value of `key` at `seq` in `state` (a consistent pair): from the
    /// record cache when it can answer, else from the MemTables and the
    /// tree, admitting what the tree answered. Counts the page reads it
    /// causes.
    pub fn get_at(&self, state: &State, seq: u64, key: &[u8]) -> Result<Option<Bytes>> {
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
    fn tree_get(&self, state: &State, seq: u64, key: &[u8]) -> Result<Option<Bytes>> {
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
        let pipeline = Pipeline {
            versions: &self.versions,
            checkpoints: &self.checkpoints,
            memory: &self.memory,
            record_cache: &self.record_cache,
            poison: &self.poison,
            stats: &self.stats,
            freeze_if_idle: &freeze_if_idle,
            release_wal_reserve: &release_wal_reserve,
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
