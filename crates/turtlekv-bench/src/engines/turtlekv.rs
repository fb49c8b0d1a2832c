//! TurtleKV through its public API only.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use turtlekv::{Db, Options, WriteOptions};

use super::{Attempt, Engine, EngineConfig, RmwOutcome, retry_on_conflict};

pub struct TurtleKv {
    db: Db,
    write_options: WriteOptions,
    monitor: Option<Monitor>,
}

/// How long `settle` waits for the reclamation steps to stop, at least
/// after its checkpoint (the engine punches the freed space and gives
/// back the WAL's reserve once writes have stopped for a second, seen by
/// a thread that looks every 100 ms), and at most.
const SETTLE_QUIET: Duration = Duration::from_millis(1500);
const SETTLE_MIN: Duration = Duration::from_millis(2500);
const SETTLE_MAX: Duration = Duration::from_secs(60);

/// With `TURTLEKV_BENCH_STATS_EVERY_SECS=N`, a thread prints the read path's
/// counters every N seconds: how the caches and the split move within a
/// phase, which the per-phase report cannot show. It also prints where the
/// process's memory is: resident (anonymous and file-backed), the C
/// allocator's bytes in use and free, and the peak of the heap beyond the
/// memory budget's accounts.
struct Monitor {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Monitor {
    fn start(db: &Db) -> Option<Monitor> {
        let secs: u64 = std::env::var("TURTLEKV_BENCH_STATS_EVERY_SECS")
            .ok()?
            .parse()
            .ok()?;
        let every = Duration::from_secs(secs.max(1));
        let stop = Arc::new(AtomicBool::new(false));
        let (db, stopped) = (db.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let mut last = db.stats();
            let mut next = every;
            let mut peak_unbudgeted = 0u64;
            while !stopped.load(Ordering::Relaxed) {
                if started.elapsed() < next {
                    std::thread::sleep(Duration::from_millis(250));
                    peak_unbudgeted = peak_unbudgeted.max(unbudgeted_resident_bytes(&db.stats()));
                    continue;
                }
                next += every;
                let now = db.stats();
                let line = monitor_line(started.elapsed(), &last, &now);
                eprintln!("{line} peak_unbudgeted_mib {}", peak_unbudgeted >> 20);
                last = now;
                peak_unbudgeted = 0;
            }
        });
        Some(Monitor {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Resident anonymous memory beyond what the memory budget accounts for
/// (page cache, record cache, MemTables): a checkpoint's working set, the
/// allocator's free memory still resident, and everything else the process
/// holds. Not the heap alone: the page cache keeps copies of written pages
/// in mappings of their own, outside the allocator. Sampled four times a
/// second, its peak is printed with each monitor line.
fn unbudgeted_resident_bytes(stats: &turtlekv::Stats) -> u64 {
    let Ok((anon, _)) = crate::measure::rss_bytes() else {
        return 0;
    };
    let budgeted = stats.cache_used_bytes + stats.record_cache_used_bytes + stats.memtable_bytes;
    anon.saturating_sub(budgeted)
}

/// One line of counters over an interval (deltas) and gauges (now).
fn monitor_line(at: Duration, last: &turtlekv::Stats, now: &turtlekv::Stats) -> String {
    let gets = now.gets - last.gets;
    let disk_reads = now.get_disk_reads - last.get_disk_reads;
    let read_ios = (now.page_read_ios - last.page_read_ios).max(1);
    let rss = crate::measure::rss_bytes().unwrap_or((0, 0));
    let heap = crate::measure::malloc_bytes().unwrap_or((0, 0));
    format!(
        "t {:.0}s gets {gets} disk_reads_per_get {:.3} read_ios {} kib_per_read {:.1} \
         head_misses {} filter_misses {} record_hits {} record_cap_mib {} cache_cap_mib {} \
         cache_used_mib {} pooled_mib {} frame_mib {} frames_released {} blocks_freed_cached {} head_mib {} filter_mib {} node_mib {} memtable_mib {} checkpoints {} \
         resizes {} write_stalls {} write_stall_ms {} rss_anon_mib {} rss_file_mib {} malloc_mib {} \
         malloc_free_mib {}",
        at.as_secs_f64(),
        disk_reads as f64 / gets.max(1) as f64,
        now.page_read_ios - last.page_read_ios,
        (now.page_bytes_read - last.page_bytes_read) as f64 / read_ios as f64 / 1024.0,
        now.cache_leaf_head_misses - last.cache_leaf_head_misses,
        now.cache_filter_misses - last.cache_filter_misses,
        now.record_cache_hits - last.record_cache_hits,
        now.record_cache_capacity_bytes >> 20,
        now.cache_capacity_bytes >> 20,
        now.cache_used_bytes >> 20,
        now.cache_pooled_bytes >> 20,
        now.cache_frame_bytes >> 20,
        now.cache_frames_released - last.cache_frames_released,
        now.cache_blocks_freed_cached - last.cache_blocks_freed_cached,
        now.cache_leaf_head_bytes >> 20,
        now.cache_filter_bytes >> 20,
        now.cache_node_bytes >> 20,
        now.memtable_bytes >> 20,
        now.checkpoints - last.checkpoints,
        now.record_cache_resizes - last.record_cache_resizes,
        now.write_stalls - last.write_stalls,
        (now.write_stall_nanos - last.write_stall_nanos) / 1_000_000,
        rss.0 >> 20,
        rss.1 >> 20,
        heap.0 >> 20,
        heap.1 >> 20,
    )
}

impl TurtleKv {
    pub fn open(dir: &Path, config: &EngineConfig) -> Result<TurtleKv> {
        let mut options = Options::default();
        options.cache_capacity_bytes = config.cache_bytes;
        options.direct_io = config.direct_io;
        let knobs = &config.turtlekv;
        if let Some(bytes) = knobs.checkpoint_distance_bytes {
            options.checkpoint_distance_bytes = bytes;
        }
        if let Some(bytes) = knobs.write_only_checkpoint_distance_bytes {
            options.write_only_checkpoint_distance_bytes = bytes;
        }
        if let Some(bytes) = knobs.record_cache_bytes {
            options.record_cache_capacity_bytes = bytes;
        }
        options.record_cache_auto_split = knobs.record_cache_auto_split;
        options.checkpoint_io_idle = knobs.checkpoint_io_idle;
        if let Some(bytes) = knobs.leaf_size_bytes {
            options.leaf_size_bytes = bytes;
        }
        if let Some(threads) = knobs.checkpoint_threads {
            options.checkpoint_threads = threads;
        }
        if let Some(bits) = knobs.filter_bits_per_key {
            options.filter_bits_per_key = bits;
        }
        if let Some(percent) = knobs.garbage_percent {
            options.garbage_percent = percent;
        }
        if let Some(bytes) = knobs.value_separation_threshold_bytes {
            options.value_separation_threshold_bytes = bytes;
        }
        if let Some(percent) = knobs.value_file_min_live_percent {
            options.value_file_min_live_percent = u32::from(percent);
        }
        let db = Db::open(dir, options).context("opening turtlekv")?;
        Ok(TurtleKv {
            monitor: Monitor::start(&db),
            db,
            write_options: WriteOptions::new().sync(config.sync),
        })
    }
}

impl Drop for TurtleKv {
    /// With `TURTLEKV_BENCH_STATS` set, prints the engine's counters when the
    /// phase's engine closes: where time and bytes went, for tuning.
    fn drop(&mut self) {
        // The monitor holds a handle; the database closes only once it goes.
        self.monitor.take();
        if std::env::var_os("TURTLEKV_BENCH_STATS").is_some() {
            eprintln!("{:#?}", self.db.stats());
        }
    }
}

impl Engine for TurtleKv {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put_opt(key, value, &self.write_options)?)
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        match self.db.get(key)? {
            Some(value) => {
                out.clear();
                out.extend_from_slice(&value);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// `Db::transaction`: get, put, commit; a commit refused with
    /// `Error::Conflict` (a key read or written changed since the start,
    /// or a checkpoint finished since) is retried.
    fn read_modify_write(&self, key: &[u8], value: &[u8], out: &mut Vec<u8>) -> Result<RmwOutcome> {
        retry_on_conflict(|| {
            let mut txn = self.db.transaction();
            let found = match txn.get(key)? {
                Some(current) => {
                    out.clear();
                    out.extend_from_slice(&current);
                    true
                }
                None => false,
            };
            txn.put(key, value);
            match txn.commit(&self.write_options) {
                Ok(()) => Ok(Attempt::Committed(found)),
                Err(turtlekv::Error::Conflict(_)) => Ok(Attempt::Conflicted),
                Err(e) => Err(e.into()),
            }
        })
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let mut visited = 0;
        for item in self.db.range(start..).take(count) {
            let (key, value) = item?;
            visit(&key, &value);
            visited += 1;
        }
        Ok(visited)
    }

    fn persist(&self) -> Result<()> {
        Ok(self.db.flush_wal()?)
    }

    /// Checkpoints, then waits for the background space work that follows
    /// (as RocksDB's settle waits for its compactions): the reclamation
    /// steps between checkpoints, and the punch of every freed slot and
    /// the WAL's reserve given back once writes have stopped for a second
    /// (`docs/tuning.md`, "Disk space").
    fn settle(&self) -> Result<()> {
        self.db.checkpoint_now()?;
        let started = Instant::now();
        // Reclamation's flushes, and value garbage collection's judgements,
        // moves and removals: settled once none moved for a while.
        let work = |s: &turtlekv::Stats| {
            (
                s.reclaim_flushes,
                s.value_files_judged,
                s.value_bytes_moved,
                s.value_files_removed,
            )
        };
        let mut last = (work(&self.db.stats()), Instant::now());
        while started.elapsed() < SETTLE_MAX {
            std::thread::sleep(Duration::from_millis(100));
            let flushes = work(&self.db.stats());
            if flushes != last.0 {
                last = (flushes, Instant::now());
            } else if last.1.elapsed() >= SETTLE_QUIET && started.elapsed() >= SETTLE_MIN {
                break;
            }
        }
        Ok(())
    }

    /// Cumulative read-path counters and the writers' stalls on
    /// checkpoints, so that phases can be told apart.
    fn phase_report(&self) -> Option<String> {
        std::env::var_os("TURTLEKV_BENCH_STATS")?;
        let s = self.db.stats();
        Some(format!(
            "gets {} get_disk_reads {} record_cache_hits {} record_cache_capacity_bytes {} \
             cache_capacity_bytes {} record_cache_ghost_recalls {} cache_ghost_recalls {} \
             record_cache_resizes {} page_read_ios {} page_bytes_read {} cache_used_bytes {} \
             cache_leaf_head_misses {} cache_filter_misses {} checkpoints {} write_stalls {} \
             write_stall_nanos {}",
            s.gets,
            s.get_disk_reads,
            s.record_cache_hits,
            s.record_cache_capacity_bytes,
            s.cache_capacity_bytes,
            s.record_cache_ghost_recalls,
            s.cache_ghost_recalls,
            s.record_cache_resizes,
            s.page_read_ios,
            s.page_bytes_read,
            s.cache_used_bytes,
            s.cache_leaf_head_misses,
            s.cache_filter_misses,
            s.checkpoints,
            s.write_stalls,
            s.write_stall_nanos
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Settling checkpoints what the MemTable holds, so that the next
    /// phase starts without it and the phase that wrote it pays for it.
    #[test]
    fn settling_checkpoints_the_memtable() {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::engines::tests::test_config();
        let engine = TurtleKv::open(dir.path(), &config).unwrap();
        for i in 0..1000u32 {
            engine.put(&i.to_be_bytes(), &[7; 100]).unwrap();
        }
        assert_eq!(engine.db.stats().checkpoints, 0);
        engine.settle().unwrap();
        let stats = engine.db.stats();
        assert_eq!(
            (stats.checkpoints, stats.memtable_entries),
            (1, 0),
            "{stats:?}"
        );
    }
}
