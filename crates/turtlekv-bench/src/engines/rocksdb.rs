//! RocksDB, configured as the TurtleKV paper did: 64 MiB write buffer, an
//! LRU block cache of the run's cache budget, 10-bit bloom filters, direct
//! I/O for reads and for flush/compaction when asked, and as many
//! background jobs as cores. The WAL is on; `--sync` fsyncs it per write.

use std::path::Path;

use anyhow::{Context, Result};
use rocksdb::{BlockBasedOptions, Cache, DB, Direction, IteratorMode, Options, WriteOptions};

use super::{Engine, EngineConfig};

const WRITE_BUFFER_BYTES: usize = 64 << 20;
const BLOOM_BITS_PER_KEY: f64 = 10.0;

pub struct RocksDb {
    db: DB,
    write_options: WriteOptions,
}

impl RocksDb {
    pub fn open(dir: &Path, config: &EngineConfig) -> Result<RocksDb> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cores = i32::try_from(cores).context("core count")?;
        let mut options = Options::default();
        options.create_if_missing(true);
        options.increase_parallelism(cores);
        options.set_max_background_jobs(cores);
        options.set_write_buffer_size(WRITE_BUFFER_BYTES);
        options.set_use_direct_reads(config.direct_io);
        options.set_use_direct_io_for_flush_and_compaction(config.direct_io);
        let cache_bytes = usize::try_from(config.cache_bytes).context("cache size")?;
        let cache = Cache::new_lru_cache(cache_bytes);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_bloom_filter(BLOOM_BITS_PER_KEY, false);
        options.set_block_based_table_factory(&table);
        let db = DB::open(&options, dir).context("opening rocksdb")?;
        let mut write_options = WriteOptions::default();
        write_options.set_sync(config.sync);
        Ok(RocksDb { db, write_options })
    }
}

impl Engine for RocksDb {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put_opt(key, value, &self.write_options)?)
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        match self.db.get_pinned(key)? {
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
        let mode = IteratorMode::From(start, Direction::Forward);
        for item in self.db.iterator(mode).take(count) {
            let (key, value) = item?;
            visit(&key, &value);
            visited += 1;
        }
        Ok(visited)
    }

    fn persist(&self) -> Result<()> {
        Ok(self.db.flush_wal(true)?)
    }
}
