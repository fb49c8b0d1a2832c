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
    pub writes: u64,
    pub cache_misses: u64,
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
            writes: now.writes - self.at_start.writes,
            cache_misses: now.cache_misses - self.at_start.cache_misses,
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
}
