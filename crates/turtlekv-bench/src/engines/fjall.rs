//! fjall (an LSM-tree in Rust). Its journal is written to the OS on every
//! insert by default, which matches the benchmark's non-sync setting; with
//! `--sync` every insert is followed by an `fdatasync` of the journal.
//! fjall has no direct I/O mode. Data blocks are compressed as fjall does by
//! default (LZ4 from level 2 down) when the values compress
//! (`--value-compressibility`), and not at all when they are random.

use std::path::Path;

use anyhow::{Context, Result};
use fjall::config::CompressionPolicy;
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::{Engine, EngineConfig};

/// The RocksDB write-buffer size of the TurtleKV paper, used for every LSM.
const MEMTABLE_BYTES: u64 = 64 << 20;

pub struct Fjall {
    db: Database,
    keyspace: Keyspace,
    sync: bool,
}

impl Fjall {
    pub fn open(dir: &Path, config: &EngineConfig) -> Result<Fjall> {
        let db = Database::builder(dir)
            .cache_size(config.cache_bytes)
            .open()
            .context("opening fjall")?;
        let compress = config.compressible_values();
        let keyspace = db
            .keyspace("ycsb", || {
                let options = KeyspaceCreateOptions::default().max_memtable_size(MEMTABLE_BYTES);
                if compress {
                    options
                } else {
                    // Random values: compression would only cost CPU.
                    options.data_block_compression_policy(CompressionPolicy::disabled())
                }
            })
            .context("creating the fjall keyspace")?;
        Ok(Fjall {
            db,
            keyspace,
            sync: config.sync,
        })
    }
}

impl Engine for Fjall {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.keyspace.insert(key, value)?;
        if self.sync {
            self.db.persist(PersistMode::SyncData)?;
        }
        Ok(())
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        match self.keyspace.get(key)? {
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
        for guard in self.keyspace.range(start..).take(count) {
            let (key, value) = guard.into_inner()?;
            visit(&key, &value);
            visited += 1;
        }
        Ok(visited)
    }

    fn persist(&self) -> Result<()> {
        Ok(self.db.persist(PersistMode::SyncData)?)
    }

    /// Flushes the MemTable and waits for flushes and compactions to end,
    /// as RocksDB's and TurtleKV's settles do, so that a phase's debt does
    /// not fall on the next. These calls are fjall's hidden, experimental
    /// ones, of the version pinned here.
    fn settle(&self) -> Result<()> {
        const LIMIT: std::time::Duration = std::time::Duration::from_secs(600);
        self.keyspace.rotate_memtable_and_wait()?;
        let started = std::time::Instant::now();
        while self.db.outstanding_flushes() > 0 || self.db.active_compactions() > 0 {
            anyhow::ensure!(
                started.elapsed() < LIMIT,
                "fjall did not settle in {LIMIT:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Ok(())
    }
}
