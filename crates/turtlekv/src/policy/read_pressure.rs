//! Checkpointing early under read pressure (the TurtleKV paper's future
//! work): when reads dominate and miss the page cache while a large active
//! MemTable holds memory the cache could use, freeze it now instead of
//! waiting for writes to fill it. The checkpoint moves its data to the tree
//! and gives its memory back to the page cache.

use std::time::{Duration, Instant};

/// How often the checkpoint thread looks at the read/write mix.
pub(crate) const WINDOW: Duration = Duration::from_secs(1);

/// Counters sampled at the start of a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Sample {
    pub gets: u64,
    pub scans: u64,
    pub writes: u64,
    pub cache_misses: u64,
    /// Reads of page files (gets, scans and checkpoints that missed the
    /// page cache).
    pub page_read_ios: u64,
    /// Checkpoints completed.
    pub checkpoints: u64,
    /// Ghost recalls of the record cache and of the page cache
    /// (`cache_split`).
    pub record_ghost_recalls: u64,
    pub block_ghost_recalls: u64,
}

/// What decides an early checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pressure {
    /// Activity during the last window.
    pub delta: Sample,
    /// Bytes in the active MemTable.
    pub active_memtable_bytes: u64,
    pub budget_bytes: u64,
}

impl Pressure {
    /// Freeze early when the MemTable holds at least a sixteenth of the
    /// budget, reads outnumber writes twenty to one, and at least one read
    /// in twenty went to disk.
    pub fn wants_checkpoint(&self) -> bool {
        let d = self.delta;
        self.active_memtable_bytes >= self.budget_bytes / 16
            && d.gets >= 1_000
            && d.gets >= 20 * d.writes
            && d.cache_misses * 20 >= d.gets
    }
}

/// Operations a window needs before it says anything about the mix: an
/// idle database keeps the distance it had.
const BUSY_WINDOW_OPS: u64 = 1_000;

impl Sample {
    /// Whether MemTables may grow to the write-only distance, judged from a
    /// window; `None` when the window cannot tell (the setting stays).
    /// They may when the window saw writes alone (reads and scans under 1%
    /// of the writes, as in a bulk load) and the page cache does not hold
    /// the tree anyway (checkpoints read pages from disk): then the memory
    /// they take costs no reader a cached page. A checkpoint that found
    /// every page cached says the tree fits: the cache keeps its memory.
    pub fn memtables_may_grow(&self) -> Option<bool> {
        let reads = self.gets + self.scans;
        if reads + self.writes < BUSY_WINDOW_OPS {
            return None;
        }
        if reads * 100 >= self.writes {
            return Some(false);
        }
        if self.page_read_ios > 0 {
            return Some(true);
        }
        if self.checkpoints > 0 {
            return Some(false);
        }
        None
    }
}

/// The checkpoint thread's view over successive windows.
#[derive(Debug)]
pub(crate) struct Monitor {
    started: Instant,
    at_start: Sample,
}

impl Monitor {
    pub fn new(now: Sample) -> Self {
        Monitor {
            started: Instant::now(),
            at_start: now,
        }
    }

    /// Once a window has passed: the activity in it, and a new window.
    pub fn window(&mut self, now: Sample) -> Option<Sample> {
        if self.started.elapsed() < WINDOW {
            return None;
        }
        let delta = Sample {
            gets: now.gets - self.at_start.gets,
            scans: now.scans - self.at_start.scans,
            writes: now.writes - self.at_start.writes,
            cache_misses: now.cache_misses - self.at_start.cache_misses,
            page_read_ios: now.page_read_ios - self.at_start.page_read_ios,
            checkpoints: now.checkpoints - self.at_start.checkpoints,
            record_ghost_recalls: now.record_ghost_recalls - self.at_start.record_ghost_recalls,
            block_ghost_recalls: now.block_ghost_recalls - self.at_start.block_ghost_recalls,
        };
        *self = Monitor::new(now);
        Some(delta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pressure(gets: u64, writes: u64, cache_misses: u64, memtable: u64) -> Pressure {
        Pressure {
            delta: Sample {
                gets,
                writes,
                cache_misses,
                ..Sample::default()
            },
            active_memtable_bytes: memtable,
            budget_bytes: 1600,
        }
    }

    #[test]
    fn only_read_heavy_missing_windows_with_a_big_memtable_checkpoint() {
        assert!(pressure(10_000, 0, 5_000, 100).wants_checkpoint());
        assert!(pressure(10_000, 400, 500, 400).wants_checkpoint());
        assert!(
            !pressure(10_000, 600, 5_000, 400).wants_checkpoint(),
            "writes"
        );
        assert!(
            !pressure(10_000, 0, 100, 400).wants_checkpoint(),
            "cache hits"
        );
        assert!(
            !pressure(10_000, 0, 5_000, 99).wants_checkpoint(),
            "small MemTable"
        );
        assert!(!pressure(999, 0, 999, 400).wants_checkpoint(), "idle");
    }

    fn mix(
        gets: u64,
        scans: u64,
        writes: u64,
        page_read_ios: u64,
        checkpoints: u64,
    ) -> Option<bool> {
        Sample {
            gets,
            scans,
            writes,
            page_read_ios,
            checkpoints,
            ..Sample::default()
        }
        .memtables_may_grow()
    }

    #[test]
    fn memtables_grow_only_under_writes_alone_on_a_tree_the_cache_cannot_hold() {
        assert_eq!(
            mix(0, 0, 1_000, 3, 1),
            Some(true),
            "a bulk load out of cache"
        );
        assert_eq!(mix(5, 4, 1_000, 3, 0), Some(true), "reads under 1%");
        assert_eq!(
            mix(0, 0, 1_000, 0, 1),
            Some(false),
            "the tree fits the cache"
        );
        assert_eq!(mix(0, 0, 1_000, 0, 0), None, "no checkpoint to tell");
        assert_eq!(mix(10, 0, 1_000, 3, 1), Some(false), "1% of gets");
        assert_eq!(mix(0, 10, 1_000, 3, 1), Some(false), "1% of scans");
        assert_eq!(mix(500, 0, 500, 3, 1), Some(false), "YCSB A");
        assert_eq!(mix(950, 0, 50, 3, 1), Some(false), "read mostly");
        assert_eq!(mix(0, 0, 999, 3, 1), None, "too quiet to tell");
        assert_eq!(mix(0, 0, 0, 0, 0), None, "idle");
    }
}
