//! The state shared by every handle of one open database.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use bytes::Bytes;
use parking_lot::Mutex;

use crate::checkpoint::{CheckpointTarget, Control};
use crate::db::budget::MemoryBudget;
use crate::io::LockGuard;
use crate::record_cache::RecordCache;
use crate::state::{ReadView, State};
use crate::stats::{Counters, bump};
use crate::wal::{GroupCommit, Wal};
use crate::{Error, Result};

#[derive(Debug)]
pub(crate) struct DbInner {
    pub path: PathBuf,
    pub state: ArcSwap<State>,
    /// Serialises State transitions (freeze, checkpoint publish), which
    /// build the next State from the current one.
    pub state_transition: Mutex<()>,
    /// Highest sequence number whose writes are all in the MemTables.
    pub visible_seq: AtomicU64,
    /// The log; held by the group-commit leader while it writes.
    pub wal: Mutex<Wal>,
    pub commit: GroupCommit<Option<crate::db::write::PreparedInserts>>,
    /// Where checkpoints go; `None` keeps everything in MemTables.
    pub target: Option<Arc<dyn CheckpointTarget>>,
    /// Where MemTable arenas take their chunks from (the target's).
    pub memtable_pool: Option<Arc<crate::io::MappingPool>>,
    /// The checkpoint's threads' I/O class; `None` when
    /// `Options::checkpoint_io_idle` is off (they keep the default).
    pub checkpoint_io: Option<Arc<crate::io::CheckpointIoPriority>>,
    /// Threads waiting for a checkpoint (writers held back, callers of
    /// `checkpoint_now`): checkpoints do not go idle while any does.
    pub checkpoint_waiters: AtomicUsize,
    pub checkpoint_distance_bytes: AtomicU64,
    /// `Options::write_only_checkpoint_distance_bytes`.
    pub write_only_checkpoint_distance_bytes: AtomicU64,
    /// Whether the write-only distance is in force (set by the checkpoint
    /// thread; see `read_pressure::Sample::memtables_may_grow`).
    pub grow_memtables: AtomicBool,
    /// `Options::checkpoint_on_read_pressure`.
    pub checkpoint_on_read_pressure: bool,
    /// Shared by the MemTables and the page cache.
    pub budget: MemoryBudget,
    /// Largest item (encoded length) the tree stores; larger writes are
    /// refused before they are logged.
    pub max_item_bytes: usize,
    /// Longest key the tree's node size takes (`MAX_KEY_SIZE` unless
    /// `node_size_bytes` is below 4 KiB); longer keys are refused so.
    pub max_key_bytes: usize,
    /// Newest values of hot keys read from the tree.
    pub record_cache: RecordCache,
    /// The record cache size asked for; it gets at most half the budget.
    pub record_cache_asked_bytes: AtomicU64,
    /// `Options::record_cache_auto_split`, changeable at runtime.
    pub record_cache_auto_split: AtomicBool,
    /// The automatic split's votes so far (checkpoint thread only).
    pub split_streak: Mutex<crate::db::cache_split::Streak>,
    pub control: Arc<Control>,
    /// Set by the first failed write or sync; writes are refused from then on.
    pub poison: OnceLock<String>,
    pub stats: Counters,
    /// Dropped last, so the lock outlives every other file handle.
    pub _lock: Box<dyn LockGuard>,
}

impl DbInner {
    pub fn check_poison(&self) -> Result<()> {
        match self.poison.get() {
            Some(cause) => Err(Error::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Records the first I/O failure; from then on writes are refused,
    /// because after a failed fsync the state of the file is unknown.
    pub fn poison_with(&self, e: io::Error) -> Error {
        self.poison.get_or_init(|| e.to_string());
        Error::Io(e)
    }

    /// Like `poison_with`, for a failure already wrapped in an `Error`.
    pub fn poison_with_error(&self, e: Error) -> Error {
        self.poison.get_or_init(|| e.to_string());
        e
    }

    /// Like `get_at(read_view(), key)`, without taking a reference count on
    /// the State: point reads are the hot path, and a shared counter would
    /// make concurrent readers contend on one cache line.
    pub fn get_latest(&self, key: &[u8]) -> Result<Option<Bytes>> {
        loop {
            let state = self.state.load();
            let seq = self.visible_seq.load(Ordering::Acquire);
            if Arc::ptr_eq(&state, &self.state.load()) {
                return self.get_at(&state, seq, key);
            }
        }
    }

    /// The value of `key` at `seq` in `state` (a consistent pair): from the
    /// record cache when it can answer, else from the MemTables and the
    /// tree, admitting what the tree answered. Counts the page reads it
    /// causes.
    pub fn get_at(&self, state: &State, seq: u64, key: &[u8]) -> Result<Option<Bytes>> {
        if let Some(cached) = self.record_cache.get(key, seq) {
            return Ok(cached);
        }
        let reads_before = crate::page::thread_read_ios();
        let (value, from_tree) = state.get(key, seq)?;
        let reads = crate::page::thread_read_ios() - reads_before;
        bump(&self.stats.get_disk_reads, reads);
        if reads > 0 {
            self.record_cache.recall_after_disk_read(key);
        }
        if from_tree {
            self.record_cache.admit(key, value.as_ref(), seq);
        }
        Ok(value)
    }

    /// A State and a sequence number that was visible while it was current.
    pub fn read_view(&self) -> ReadView {
        loop {
            let state = self.state.load_full();
            let seq = self.visible_seq.load(Ordering::Acquire);
            if Arc::ptr_eq(&state, &self.state.load()) {
                return ReadView { state, seq };
            }
        }
    }

    pub fn report_wal_io(&self, wal: &mut Wal) {
        let io = wal.take_io();
        bump(&self.stats.wal_bytes_written, io.bytes_written);
        bump(&self.stats.wal_syncs, io.syncs);
    }

    /// The MemTable capacity in force: the configured checkpoint distance
    /// (or the write-only one, under its own tighter cap, while writes come
    /// alone and the page cache does not hold the tree), capped at a
    /// quarter of the memory budget so that the active and the frozen
    /// MemTable cannot take more than half of it.
    pub fn effective_checkpoint_distance(&self) -> u64 {
        let mut configured = self.checkpoint_distance_bytes.load(Ordering::Relaxed);
        if self.grow_memtables.load(Ordering::Relaxed) {
            let write_only = self
                .write_only_checkpoint_distance_bytes
                .load(Ordering::Relaxed)
                .min(
                    self.budget
                        .max_write_only_distance_bytes(self.record_cache.capacity_bytes()),
                );
            configured = configured.max(write_only);
        }
        configured
            .min(self.budget.total_bytes() / 4)
            .max(crate::options::MIN_CHECKPOINT_DISTANCE_BYTES)
    }

    /// Bytes held by the active and frozen MemTables.
    pub fn memtable_bytes(&self) -> u64 {
        self.state.load().memtables().map(|m| m.size_bytes()).sum()
    }

    /// What the MemTables and the record cache hold of the memory budget.
    fn budgeted_bytes(&self) -> u64 {
        self.memtable_bytes() + self.record_cache.capacity_bytes()
    }

    /// Gives the page cache what the MemTables and the record cache leave
    /// of the memory budget.
    pub fn rebalance_memory(&self, force: bool) {
        if let Some(target) = &self.target {
            self.budget
                .rebalance(|| self.budgeted_bytes(), &**target, force);
        }
    }

    /// `rebalance_memory(false)` for the write path, which must not wait:
    /// skipped while another thread decides a capacity.
    pub fn try_rebalance_memory(&self) {
        if let Some(target) = &self.target {
            self.budget
                .try_rebalance(|| self.budgeted_bytes(), &**target);
        }
    }

    /// Refuses an entry the tree could not store (it would fail the
    /// checkpoint after the write was acknowledged).
    pub fn check_item_fits(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if key.len() > self.max_key_bytes {
            return Err(Error::KeyTooLarge {
                len_bytes: key.len(),
                max_bytes: self.max_key_bytes,
            });
        }
        let max_bytes = self.max_value_bytes(key.len());
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
        let layout = crate::tree::item_layout::ItemLayout::CURRENT;
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

    /// Replaces the State by `next(current)`, one transition at a time.
    pub fn transition(&self, next: impl FnOnce(&State) -> State) {
        let _serial = self.state_transition.lock();
        let current = self.state.load_full();
        self.state.store(Arc::new(next(&current)));
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
        let _ = self.wal.get_mut().seal();
    }
}
