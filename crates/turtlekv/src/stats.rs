//! Counters the engine keeps about itself.

use std::sync::atomic::{AtomicU64, Ordering};

/// A point-in-time copy of the engine's counters, from [`crate::Db::stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Put entries committed (each entry of a batch counts).
    pub puts: u64,
    /// Delete entries committed.
    pub deletes: u64,
    /// Point lookups served (`Db::get` and `Snapshot::get`).
    pub gets: u64,
    /// Non-empty batches committed (`put`/`delete` are one-entry batches).
    pub batches: u64,
    /// Key plus value bytes of all committed entries.
    pub user_bytes_written: u64,
    /// Bytes appended to WAL segments (frames and segment headers).
    pub wal_bytes_written: u64,
    /// `fdatasync` calls on WAL segments.
    pub wal_syncs: u64,
    /// Group commits: each is one `write` of one or more batches.
    pub wal_group_commits: u64,
    /// Bytes charged to the MemTables (versions, overwrites, tombstones).
    pub memtable_bytes: u64,
    /// Versions held in the MemTables.
    pub memtable_entries: u64,
    /// Sequence number of the newest committed entry.
    pub last_sequence: u64,
    /// WAL records replayed when the database was opened.
    pub wal_records_replayed: u64,
    /// Bytes of torn WAL tail discarded when the database was opened.
    pub wal_tail_bytes_dropped: u64,
    /// WAL segments removed because a checkpoint covered them.
    pub wal_segments_trimmed: u64,
    /// MemTables frozen for a checkpoint.
    pub memtables_frozen: u64,
    /// Frozen MemTables waiting for their checkpoint now.
    pub frozen_memtables: u64,
    /// Checkpoints completed (each one durable).
    pub checkpoints: u64,
    /// Time spent in checkpoints, in nanoseconds.
    pub checkpoint_nanos: u64,
    /// Highest sequence number in the newest durable checkpoint.
    pub checkpoint_covered_sequence: u64,
    /// Current MemTable capacity.
    pub checkpoint_distance_bytes: u64,
    /// Times writers waited because too many MemTables awaited checkpoints.
    pub write_stalls: u64,
    /// Time writers spent in those waits, in nanoseconds.
    pub write_stall_nanos: u64,
}

/// The live counters behind [`Stats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub puts: AtomicU64,
    pub deletes: AtomicU64,
    pub gets: AtomicU64,
    pub batches: AtomicU64,
    pub user_bytes_written: AtomicU64,
    pub wal_bytes_written: AtomicU64,
    pub wal_syncs: AtomicU64,
    pub wal_group_commits: AtomicU64,
    pub wal_records_replayed: AtomicU64,
    pub wal_tail_bytes_dropped: AtomicU64,
    pub wal_segments_trimmed: AtomicU64,
    pub memtables_frozen: AtomicU64,
    pub checkpoints: AtomicU64,
    pub checkpoint_nanos: AtomicU64,
    pub write_stalls: AtomicU64,
    pub write_stall_nanos: AtomicU64,
}

/// Adds to a counter; relaxed because counters order nothing.
pub(crate) fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

fn read(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

impl Counters {
    /// Copies the counters into a [`Stats`]; the caller fills the gauges.
    pub fn snapshot(&self) -> Stats {
        Stats {
            puts: read(&self.puts),
            deletes: read(&self.deletes),
            gets: read(&self.gets),
            batches: read(&self.batches),
            user_bytes_written: read(&self.user_bytes_written),
            wal_bytes_written: read(&self.wal_bytes_written),
            wal_syncs: read(&self.wal_syncs),
            wal_group_commits: read(&self.wal_group_commits),
            wal_records_replayed: read(&self.wal_records_replayed),
            wal_tail_bytes_dropped: read(&self.wal_tail_bytes_dropped),
            wal_segments_trimmed: read(&self.wal_segments_trimmed),
            memtables_frozen: read(&self.memtables_frozen),
            checkpoints: read(&self.checkpoints),
            checkpoint_nanos: read(&self.checkpoint_nanos),
            write_stalls: read(&self.write_stalls),
            write_stall_nanos: read(&self.write_stall_nanos),
            ..Stats::default()
        }
    }
}
