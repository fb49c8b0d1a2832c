//! Counters the engine keeps about itself.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::util::striped::StripedCounter;

/// A point-in-time copy of the engine's counters, from [`crate::Db::stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Put entries committed (each entry of a batch counts).
    pub puts: u64,
    /// Delete entries committed (range deletions included).
    pub deletes: u64,
    /// Range deletions committed (`Db::delete_range`; each also counts in
    /// `deletes`).
    pub range_deletes: u64,
    /// Range tombstones the MemTables hold now (their checkpoints have not
    /// applied them yet).
    pub range_tombstones: u64,
    /// Keys of the tree that checkpoints deleted for range tombstones.
    pub range_keys_deleted: u64,
    /// Updates committed before a checkpoint to delete those keys in
    /// bounded chunks (a leaf's worth of tombstones each, at most 4 MiB).
    pub range_deletion_steps: u64,
    /// Point lookups served (`Db::get` and `Snapshot::get`).
    pub gets: u64,
    /// Range and prefix scans started (`range`/`prefix` of `Db` and
    /// `Snapshot`).
    pub scans: u64,
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
    /// WAL segments found missing when the database was opened, which
    /// `WalRecovery::PointInTime` opened without (`Strict` reports them).
    pub wal_missing_segments: u64,
    /// Bytes of WAL records after the last consistent point that
    /// `WalRecovery::PointInTime` dropped when the database was opened.
    pub wal_recovery_bytes_dropped: u64,
    /// Superblock slots that failed to validate when the database was
    /// opened (a commit torn by a crash, or damage), which the open's own
    /// commit rewrote.
    pub superblock_slots_damaged: u64,
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
    /// MemTable capacity in force: the configured checkpoint distance,
    /// capped at a quarter of the memory budget, or the write-only one
    /// while it applies (`Options::write_only_checkpoint_distance_bytes`).
    pub checkpoint_distance_bytes: u64,
    /// MemTables frozen early because reads dominated and missed the cache.
    pub read_pressure_checkpoints: u64,
    /// Times writers waited because too many MemTables awaited checkpoints.
    pub write_stalls: u64,
    /// Time writers spent in those waits, in nanoseconds.
    pub write_stall_nanos: u64,
    /// Duration of the newest checkpoint, in nanoseconds.
    pub last_checkpoint_nanos: u64,
    /// Duration of the longest checkpoint, in nanoseconds.
    pub max_checkpoint_nanos: u64,
    /// Time the checkpoint thread spent handing the C allocator's free
    /// memory back to the kernel after checkpoints, in nanoseconds (not
    /// part of `checkpoint_nanos`).
    pub heap_trim_nanos: u64,

    /// Memory budget shared by MemTables and page cache.
    pub memory_budget_bytes: u64,
    /// The page cache's current share of the budget.
    pub cache_capacity_bytes: u64,
    /// Bytes the page cache holds.
    pub cache_used_bytes: u64,
    /// Of those, mappings of written pages the cache let go and of dropped
    /// MemTables' chunks, kept (while it has room) for the next page copies
    /// and MemTable chunks.
    pub cache_pooled_bytes: u64,
    /// Of those, decoded leaf and segment heads (charged size).
    pub cache_leaf_head_bytes: u64,
    /// Of those, leaf and segment filters.
    pub cache_filter_bytes: u64,
    /// Of those, node pages.
    pub cache_node_bytes: u64,
    /// Resident memory of the page frames that hold the cache's copies of
    /// blocks read from disk, in use or kept free for the next reads (not
    /// part of `cache_used_bytes`, which charges what the entries hold).
    pub cache_frame_bytes: u64,
    /// Page frames handed back to the kernel as the cache let go of them
    /// (a shrinking cache gives its memory back).
    pub cache_frames_released: u64,
    /// Page reads served by the cache. Filters, leaf heads and node
    /// indexes that lookups reach through a node's memos (`docs/tuning.md`,
    /// "The page cache") are not asked of the cache, so not counted.
    pub cache_hits: u64,
    /// Page reads that went to the page files.
    pub cache_misses: u64,
    /// Leaf and segment heads that were not in the page cache and had to be
    /// read again. Heads and filters are small and every point read of
    /// their page needs them; many misses mean the page cache is too small.
    pub cache_leaf_head_misses: u64,
    /// Leaf and segment filters that were not in the page cache and had to
    /// be read again.
    pub cache_filter_misses: u64,
    /// Cache entries evicted to make room.
    pub cache_evictions: u64,
    /// Blocks read from disk that the page cache had evicted within its
    /// ghost window (1/32 of the budget): reads that much more page cache
    /// would have saved. For windows of 4 MiB and more, an estimate: eight
    /// times the recalls of a fixed sample of one block in eight.
    pub cache_ghost_recalls: u64,
    /// Blocks that were still in the page cache when a checkpoint freed
    /// their page (the page was rewritten, so the block's records now live
    /// in a new page that reads must fetch again).
    pub cache_blocks_freed_cached: u64,
    /// Bytes read from page files.
    pub page_bytes_read: u64,
    /// Read calls on page files.
    pub page_read_ios: u64,

    /// Leaf and buffer segment pages written by checkpoints.
    pub leaf_pages_written: u64,
    /// Content bytes of those pages (filters included).
    pub leaf_bytes_written: u64,
    /// Of `leaf_bytes_written`, bytes of filters.
    pub filter_bytes_written: u64,
    /// Times a checkpoint wrote new pages before its end to bound its
    /// memory (a batch update's "spills").
    pub checkpoint_spills: u64,
    /// Node pages written by checkpoints.
    pub node_pages_written: u64,
    /// Content bytes of those pages.
    pub node_bytes_written: u64,
    /// Bytes written to page files, block framing and padding included.
    pub page_bytes_written: u64,
    /// Bytes of freed leaf pages returned to the file system (hole punching).
    pub page_bytes_punched: u64,
    /// Of `page_bytes_punched`, the blocks of live segment pages whose
    /// chunks hold only flushed items (`docs/format.md`, "Page files").
    pub dead_chunk_bytes_punched: u64,
    /// `fdatasync` calls on page files and the superblock.
    pub page_syncs: u64,

    /// Node levels of the newest checkpoint's tree (0 when empty).
    pub tree_height: u64,
    /// Node pages of the newest checkpoint's tree.
    pub tree_node_pages: u64,
    /// Leaf pages of the newest checkpoint's tree.
    pub tree_leaf_pages: u64,
    /// Buffer segment pages of the newest checkpoint's tree.
    pub tree_segment_pages: u64,
    /// Bytes of updates waiting in node buffers.
    pub tree_buffered_bytes: u64,
    /// Bytes the leaf pages of the newest checkpoint's tree occupy on disk.
    pub tree_leaf_page_bytes: u64,
    /// Bytes their slots span (`tree_leaf_pages * leaf_size_bytes`): what
    /// full leaves would occupy. See [`Stats::leaf_fill`].
    pub tree_leaf_capacity_bytes: u64,
    /// Bytes the buffer segment pages occupy on disk, flushed items they
    /// keep included.
    pub tree_segment_page_bytes: u64,

    /// Value files (`Options::value_separation_threshold_bytes`).
    pub value_files: u64,
    /// Bytes of the value files: headers, and records live or not.
    pub value_file_bytes: u64,
    /// Estimated live bytes of the value files: per file, what value
    /// garbage collection last found live in it (all of it, if it was
    /// not judged yet), less the garbage sampled in it since
    /// (`docs/tuning.md`, "Large values").
    pub value_live_bytes: u64,
    /// Separated values written since open, and their records' bytes.
    pub value_records_written: u64,
    pub value_bytes_written: u64,
    /// Separated values read from value files since open.
    pub value_reads: u64,
    /// Value garbage collection since open: files judged (their records
    /// looked up), files whose live records were all moved, the bytes of
    /// the records moved, files removed, and moves given up (a damaged
    /// record, or keys written again and again meanwhile).
    pub value_files_judged: u64,
    pub value_files_moved: u64,
    pub value_bytes_moved: u64,
    pub value_files_removed: u64,
    pub value_moves_abandoned: u64,

    /// Bytes the database directory occupies on disk (allocated blocks of
    /// the WAL, page, value and superblock files; holes cost nothing).
    pub space_allocated_bytes: u64,
    /// Estimated live bytes of the newest checkpoint's tree, as stored:
    /// its leaf pages, and what its buffers hold above them that shadows
    /// nothing below; plus `value_live_bytes`. Data only in the MemTables
    /// (and WAL) is not counted.
    pub space_live_bytes: u64,
    /// Estimated garbage of the newest checkpoint's tree: flushed items
    /// that segment pages keep, and leaf data that buffered updates and
    /// tombstones make dead. Checkpoints drain the buffers that hold the
    /// most when it passes `Options::garbage_percent` of the live bytes
    /// (and at least half that is shadowed data).
    pub space_garbage_bytes: u64,
    /// Flushes made to reclaim space (by checkpoints, and by the
    /// checkpoint thread while writes have stopped).
    pub reclaim_flushes: u64,

    /// Gets answered by the record cache.
    pub record_cache_hits: u64,
    /// Gets the record cache could not answer.
    pub record_cache_misses: u64,
    /// Records evicted from the record cache.
    pub record_cache_evictions: u64,
    /// Records read from disk that the full record cache did not admit,
    /// because they were asked for less often lately than the entry they
    /// would have replaced.
    pub record_cache_refusals: u64,
    /// Bytes the record cache holds (entries and its frequency sketch).
    pub record_cache_used_bytes: u64,
    /// The record cache's share of the memory budget.
    pub record_cache_capacity_bytes: u64,
    /// Gets that read from disk a record the record cache had evicted (or
    /// turned away for lack of room) within its ghost window: reads that
    /// much more record cache would have saved. Estimated from a sample of
    /// one key in eight for windows of 4 MiB and more, as
    /// `cache_ghost_recalls`.
    pub record_cache_ghost_recalls: u64,
    /// Times the automatic split moved memory between the record cache and
    /// the page cache.
    pub record_cache_resizes: u64,
    /// Page reads from disk (cache misses) made by gets.
    pub get_disk_reads: u64,

    // Block compression (`Options::compression`).
    /// Item bytes of the chunks of the leaf and buffer-segment pages
    /// checkpoints wrote, before compression.
    pub compression_input_bytes: u64,
    /// Bytes those chunks took as stored: compressed, or their items
    /// where compression did not pay or is off (padding to block ends
    /// not counted).
    pub compression_output_bytes: u64,
    /// Operations per keyspace since the open: the default keyspace first
    /// (its name empty), then the named ones in name order.
    pub keyspaces: Vec<crate::KeyspaceStats>,
    /// Dropped keyspaces whose keys are still being deleted, or whose
    /// deletes are still being flushed down to the leaves (which frees
    /// their pages); ranges of large range deletions waiting for the same
    /// flush count here too.
    pub keyspaces_dropping: u64,
}

impl Stats {
    /// Page reads from disk per get (0 before the first get).
    pub fn disk_reads_per_get(&self) -> f64 {
        if self.gets == 0 {
            return 0.0;
        }
        self.get_disk_reads as f64 / self.gets as f64
    }

    /// Allocated bytes of the database directory per estimated live byte
    /// of its tree (0 while the tree is empty): what the WAL, the
    /// MemTables' share of it, page fill and garbage cost on disk.
    pub fn space_amplification(&self) -> f64 {
        if self.space_live_bytes == 0 {
            return 0.0;
        }
        self.space_allocated_bytes as f64 / self.space_live_bytes as f64
    }

    /// How full the leaf pages are: their bytes on disk over their slots'
    /// (0 for an empty tree). Splits leave leaves half full and joins keep
    /// them at least a quarter full; space not used is never allocated.
    pub fn leaf_fill(&self) -> f64 {
        if self.tree_leaf_capacity_bytes == 0 {
            return 0.0;
        }
        self.tree_leaf_page_bytes as f64 / self.tree_leaf_capacity_bytes as f64
    }

    /// `compression_input_bytes / compression_output_bytes`: how many
    /// times smaller checkpoints stored their leaf chunks (1.0 with
    /// compression off; 0 before a checkpoint writes a leaf).
    pub fn compression_ratio(&self) -> f64 {
        if self.compression_output_bytes == 0 {
            return 0.0;
        }
        self.compression_input_bytes as f64 / self.compression_output_bytes as f64
    }

    /// Bytes written to the device (WAL and page files) per byte of user
    /// data (key + value) written; 0 before the first write.
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes_written == 0 {
            return 0.0;
        }
        (self.wal_bytes_written + self.page_bytes_written) as f64 / self.user_bytes_written as f64
    }
}

/// The live counters behind [`Stats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub puts: AtomicU64,
    pub deletes: AtomicU64,
    pub range_deletes: AtomicU64,
    /// Bumped by every reader: striped (`striped.rs`).
    pub gets: StripedCounter,
    pub scans: AtomicU64,
    pub batches: AtomicU64,
    pub user_bytes_written: AtomicU64,
    pub wal_bytes_written: AtomicU64,
    pub wal_syncs: AtomicU64,
    pub wal_group_commits: AtomicU64,
    pub wal_records_replayed: AtomicU64,
    pub wal_tail_bytes_dropped: AtomicU64,
    pub wal_missing_segments: AtomicU64,
    pub wal_recovery_bytes_dropped: AtomicU64,
    pub superblock_slots_damaged: AtomicU64,
    pub wal_segments_trimmed: AtomicU64,
    pub memtables_frozen: AtomicU64,
    pub checkpoints: AtomicU64,
    pub checkpoint_nanos: AtomicU64,
    pub write_stalls: AtomicU64,
    pub write_stall_nanos: AtomicU64,
    pub last_checkpoint_nanos: AtomicU64,
    pub max_checkpoint_nanos: AtomicU64,
    pub heap_trim_nanos: AtomicU64,
    pub get_disk_reads: AtomicU64,
    pub read_pressure_checkpoints: AtomicU64,
    pub record_cache_resizes: AtomicU64,
    pub value_files_judged: AtomicU64,
    pub value_files_moved: AtomicU64,
    pub value_bytes_moved: AtomicU64,
    pub value_files_removed: AtomicU64,
    pub value_moves_abandoned: AtomicU64,
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
            range_deletes: read(&self.range_deletes),
            gets: self.gets.load(),
            scans: read(&self.scans),
            batches: read(&self.batches),
            user_bytes_written: read(&self.user_bytes_written),
            wal_bytes_written: read(&self.wal_bytes_written),
            wal_syncs: read(&self.wal_syncs),
            wal_group_commits: read(&self.wal_group_commits),
            wal_records_replayed: read(&self.wal_records_replayed),
            wal_tail_bytes_dropped: read(&self.wal_tail_bytes_dropped),
            wal_missing_segments: read(&self.wal_missing_segments),
            wal_recovery_bytes_dropped: read(&self.wal_recovery_bytes_dropped),
            superblock_slots_damaged: read(&self.superblock_slots_damaged),
            wal_segments_trimmed: read(&self.wal_segments_trimmed),
            memtables_frozen: read(&self.memtables_frozen),
            checkpoints: read(&self.checkpoints),
            checkpoint_nanos: read(&self.checkpoint_nanos),
            write_stalls: read(&self.write_stalls),
            write_stall_nanos: read(&self.write_stall_nanos),
            last_checkpoint_nanos: read(&self.last_checkpoint_nanos),
            max_checkpoint_nanos: read(&self.max_checkpoint_nanos),
            heap_trim_nanos: read(&self.heap_trim_nanos),
            get_disk_reads: read(&self.get_disk_reads),
            read_pressure_checkpoints: read(&self.read_pressure_checkpoints),
            record_cache_resizes: read(&self.record_cache_resizes),
            value_files_judged: read(&self.value_files_judged),
            value_files_moved: read(&self.value_files_moved),
            value_bytes_moved: read(&self.value_bytes_moved),
            value_files_removed: read(&self.value_files_removed),
            value_moves_abandoned: read(&self.value_moves_abandoned),
            ..Stats::default()
        }
    }
}
