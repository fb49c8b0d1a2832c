//! fjall (an LSM-tree in Rust). Its journal is written to the OS on every
//! insert by default, which matches the benchmark's non-sync setting; with
//! `--sync` every insert is followed by an `fdatasync` of the journal.
//! fjall has no direct I/O mode. Data blocks are compressed as fjall does by
//! default (LZ4 from level 2 down) when the values compress
//! (`--value-compressibility`), and not at all when they are random.
//! With `--rmw-transactions` the database opens as an
//! `OptimisticTxDatabase`: read-modify-writes are its write transactions,
//! and plain puts go through it too (one-insert transactions), since its
//! conflict check sees only what transactions wrote.

use std::path::Path;

use anyhow::{Context, Result, bail};
use fjall::config::CompressionPolicy;
use fjall::{
    Database, Keyspace, KeyspaceCreateOptions, OptimisticTxDatabase, OptimisticTxKeyspace,
    PersistMode, Readable as _,
};

use super::{Attempt, Engine, EngineConfig, RmwOutcome, retry_on_conflict};

/// The RocksDB write-buffer size of the TurtleKV paper, used for every LSM.
const MEMTABLE_BYTES: u64 = 64 << 20;

pub struct Fjall {
    db: Database,
    keyspace: Keyspace,
    /// With `--rmw-transactions`: the same database and keyspace, for
    /// transactions.
    transactional: Option<(OptimisticTxDatabase, OptimisticTxKeyspace)>,
    sync: bool,
}

impl Fjall {
    pub fn open(dir: &Path, config: &EngineConfig) -> Result<Fjall> {
        let compress = config.compressible_values();
        let separate = config.peer_kv_separation;
        let create_options = || {
            let mut options = KeyspaceCreateOptions::default().max_memtable_size(MEMTABLE_BYTES);
            if separate {
                let blobs = fjall::KvSeparationOptions::default();
                let blobs = match compress {
                    true => blobs,
                    false => blobs.compression(fjall::CompressionType::None),
                };
                options = options.with_kv_separation(Some(blobs));
            }
            if compress {
                options
            } else {
                // Random values: compression would only cost CPU.
                options.data_block_compression_policy(CompressionPolicy::disabled())
            }
        };
        let (db, keyspace, transactional) = if config.rmw_transactions {
            let db = OptimisticTxDatabase::builder(dir)
                .cache_size(config.cache_bytes)
                .open()
                .context("opening fjall as an OptimisticTxDatabase")?;
            let keyspace = db
                .keyspace("ycsb", create_options)
                .context("creating the fjall keyspace")?;
            let plain = (db.inner().clone(), keyspace.inner().clone());
            (plain.0, plain.1, Some((db, keyspace)))
        } else {
            let db = Database::builder(dir)
                .cache_size(config.cache_bytes)
                .open()
                .context("opening fjall")?;
            let keyspace = db
                .keyspace("ycsb", create_options)
                .context("creating the fjall keyspace")?;
            (db, keyspace, None)
        };
        Ok(Fjall {
            db,
            keyspace,
            transactional,
            sync: config.sync,
        })
    }
}

impl Engine for Fjall {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        match &self.transactional {
            Some((_, keyspace)) => keyspace.insert(key, value)?,
            None => self.keyspace.insert(key, value)?,
        }
        if self.sync {
            self.db.persist(PersistMode::SyncData)?;
        }
        Ok(())
    }

    /// A write transaction: get, insert, commit; a commit refused with
    /// `Conflict` (a transaction that committed since this one's start
    /// wrote the key) is retried.
    fn read_modify_write(&self, key: &[u8], value: &[u8], out: &mut Vec<u8>) -> Result<RmwOutcome> {
        let Some((db, keyspace)) = &self.transactional else {
            bail!("fjall was opened without transactions (--rmw-transactions)");
        };
        let outcome = retry_on_conflict(|| {
            let mut txn = db.write_tx()?;
            let found = match txn.get(keyspace, key)? {
                Some(current) => {
                    out.clear();
                    out.extend_from_slice(&current);
                    true
                }
                None => false,
            };
            txn.insert(keyspace, key, value);
            Ok(match txn.commit()? {
                Ok(()) => Attempt::Committed(found),
                Err(fjall::Conflict) => Attempt::Conflicted,
            })
        })?;
        if self.sync {
            self.db.persist(PersistMode::SyncData)?;
        }
        Ok(outcome)
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
