//! TurtleKV through its public API only.

use std::path::Path;

use anyhow::{Context, Result};
use turtlekv::{Db, Options, WriteOptions};

use super::{Engine, EngineConfig};

pub struct TurtleKv {
    db: Db,
    write_options: WriteOptions,
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
        if let Some(bytes) = knobs.record_cache_bytes {
            options.record_cache_capacity_bytes = bytes;
        }
        options.record_cache_auto_split = knobs.record_cache_auto_split;
        if let Some(bytes) = knobs.leaf_size_bytes {
            options.leaf_size_bytes = bytes;
        }
        if let Some(bits) = knobs.filter_bits_per_key {
            options.filter_bits_per_key = bits;
        }
        let db = Db::open(dir, options).context("opening turtlekv")?;
        Ok(TurtleKv {
            db,
            write_options: WriteOptions { sync: config.sync },
        })
    }
}

impl Drop for TurtleKv {
    /// With `TURTLEKV_BENCH_STATS` set, prints the engine's counters when the
    /// phase's engine closes: where time and bytes went, for tuning.
    fn drop(&mut self) {
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

    /// Cumulative read-path counters, so that phases can be told apart.
    fn phase_report(&self) -> Option<String> {
        std::env::var_os("TURTLEKV_BENCH_STATS")?;
        let s = self.db.stats();
        Some(format!(
            "gets {} get_disk_reads {} record_cache_hits {} record_cache_capacity_bytes {} \
             cache_capacity_bytes {} record_cache_ghost_recalls {} cache_ghost_recalls {} \
             record_cache_resizes {} page_read_ios {} page_bytes_read {} cache_used_bytes {}",
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
            s.cache_used_bytes
        ))
    }
}
