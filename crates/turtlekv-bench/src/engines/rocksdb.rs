//! RocksDB, configured as the TurtleKV paper did: 64 MiB write buffer, an
//! LRU block cache of the run's cache budget, 10-bit bloom filters, direct
//! I/O for reads and for flush/compaction when asked, and as many
//! background jobs as cores. The WAL is on; `--sync` fsyncs it per write.
//! With `--rocksdb-memory-in-cache` the MemTables (through a write buffer
//! manager) and the index and filter blocks are charged to the block cache
//! too, so the one cache size bounds what TurtleKV's budget bounds.
//! Blocks are LZ4-compressed when the values compress
//! (`--value-compressibility`), and not at all when they are random.
//! With `--rmw-transactions` the same options open an
//! `OptimisticTransactionDB`, whose transactions the read-modify-writes
//! use; plain puts, gets and scans go to its base database as before.

use std::path::Path;

use anyhow::{Context, Result, bail};
use rocksdb::{
    BlockBasedOptions, Cache, DB, DBCompressionType, ErrorKind, OptimisticTransactionDB,
    OptimisticTransactionOptions, Options, WaitForCompactOptions, WriteBufferManager, WriteOptions,
};

use super::{Attempt, Engine, EngineConfig, RmwOutcome, retry_on_conflict};

const WRITE_BUFFER_BYTES: usize = 64 << 20;
/// What the MemTables may hold in all when charged to the block cache: two
/// write buffers, RocksDB's default `max_write_buffer_number`.
const MEMTABLES_IN_CACHE_BYTES: usize = 2 * WRITE_BUFFER_BYTES;
const BLOOM_BITS_PER_KEY: f64 = 10.0;

pub struct RocksDb {
    db: Handle,
    write_options: WriteOptions,
    transaction_options: OptimisticTransactionOptions,
}

/// The database as opened: plain, or for optimistic transactions.
enum Handle {
    Plain(DB),
    Optimistic(OptimisticTransactionDB),
}

/// Runs `$body` with `$db` bound to whichever database `$handle` holds:
/// both share RocksDB's common methods, but not a type.
macro_rules! with_db {
    ($handle:expr, $db:ident => $body:expr) => {
        match $handle {
            Handle::Plain($db) => $body,
            Handle::Optimistic($db) => $body,
        }
    };
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
        // Random values (the default): compression (Snappy by default)
        // would only cost CPU on every flush and compaction. Compressible
        // values: LZ4 at every level.
        options.set_compression_type(if config.compressible_values() {
            DBCompressionType::Lz4
        } else {
            DBCompressionType::None
        });
        if config.peer_kv_separation {
            // As TurtleKV's default: values of 1 KiB and more, stored once.
            options.set_enable_blob_files(true);
            options.set_min_blob_size(1024);
            options.set_enable_blob_gc(true);
            options.set_blob_compression_type(if config.compressible_values() {
                DBCompressionType::Lz4
            } else {
                DBCompressionType::None
            });
        }
        options.set_use_direct_reads(config.direct_io);
        options.set_use_direct_io_for_flush_and_compaction(config.direct_io);
        let cache_bytes = usize::try_from(config.cache_bytes).context("cache size")?;
        let cache = Cache::new_lru_cache(cache_bytes);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_bloom_filter(BLOOM_BITS_PER_KEY, false);
        if config.rocksdb_memory_in_cache {
            charge_memory_to_cache(&mut options, &mut table, &cache);
        }
        options.set_block_based_table_factory(&table);
        let db = if config.rmw_transactions {
            Handle::Optimistic(
                OptimisticTransactionDB::open(&options, dir)
                    .context("opening rocksdb as an OptimisticTransactionDB")?,
            )
        } else {
            Handle::Plain(DB::open(&options, dir).context("opening rocksdb")?)
        };
        let mut write_options = WriteOptions::default();
        write_options.set_sync(config.sync);
        Ok(RocksDb {
            db,
            write_options,
            transaction_options: OptimisticTransactionOptions::default(),
        })
    }
}

/// RocksDB's own way to bound its memory by the block cache: MemTables
/// reserve their bytes in it, and index and filter blocks live in it (at
/// high priority, level-0 ones pinned, as RocksDB's tuning guide advises).
fn charge_memory_to_cache(options: &mut Options, table: &mut BlockBasedOptions, cache: &Cache) {
    let manager = WriteBufferManager::new_write_buffer_manager_with_cache(
        MEMTABLES_IN_CACHE_BYTES,
        false,
        cache.clone(),
    );
    options.set_write_buffer_manager(&manager);
    table.set_cache_index_and_filter_blocks(true);
    table.set_cache_index_and_filter_blocks_with_high_priority(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
}

impl Engine for RocksDb {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(with_db!(&self.db, db => db.put_opt(key, value, &self.write_options))?)
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let value = with_db!(&self.db, db => db.get_pinned(key))?;
        match value {
            Some(value) => {
                out.clear();
                out.extend_from_slice(&value);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// An optimistic transaction: `get_pinned_for_update`, put, commit. A
    /// commit refused with Busy (the key was written since the read) or
    /// TryAgain (the MemTables no longer hold enough history to tell) is
    /// retried.
    fn read_modify_write(&self, key: &[u8], value: &[u8], out: &mut Vec<u8>) -> Result<RmwOutcome> {
        let Handle::Optimistic(db) = &self.db else {
            bail!("rocksdb was opened without transactions (--rmw-transactions)");
        };
        retry_on_conflict(|| {
            let txn = db.transaction_opt(&self.write_options, &self.transaction_options);
            let found = match txn.get_pinned_for_update(key, true)? {
                Some(current) => {
                    out.clear();
                    out.extend_from_slice(&current);
                    true
                }
                None => false,
            };
            txn.put(key, value)?;
            match txn.commit() {
                Ok(()) => Ok(Attempt::Committed(found)),
                Err(e) if matches!(e.kind(), ErrorKind::Busy | ErrorKind::TryAgain) => {
                    Ok(Attempt::Conflicted)
                }
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
        // The raw iterator: `DB::iterator` boxes a copy of every key and
        // value (two allocations per record) and steps once past the last
        // record taken, charging RocksDB for the adapter.
        with_db!(&self.db, db => {
            let mut visited = 0;
            let mut iter = db.raw_iterator();
            iter.seek(start);
            while visited < count {
                let (Some(key), Some(value)) = (iter.key(), iter.value()) else {
                    break;
                };
                visit(key, value);
                visited += 1;
                if visited < count {
                    iter.next();
                }
            }
            iter.status()?;
            Ok(visited)
        })
    }

    fn persist(&self) -> Result<()> {
        Ok(with_db!(&self.db, db => db.flush_wal(true))?)
    }

    fn settle(&self) -> Result<()> {
        with_db!(&self.db, db => {
            db.flush()?;
            Ok(db.wait_for_compact(&WaitForCompactOptions::default())?)
        })
    }
}
