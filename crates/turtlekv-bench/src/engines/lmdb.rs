//! LMDB through `heed`. Each put is one write transaction. Without `--sync`
//! the environment runs with `MDB_NOSYNC`: commits are written to the file
//! (surviving a process crash) but not fsynced, which matches the WAL
//! setting of the others. LMDB caches nothing itself: it reads through the
//! OS page cache via mmap, so `--cache-bytes` does not bound it (bound the
//! process with a memory cgroup for out-of-cache runs).

use std::ops::Bound;
use std::path::Path;

use anyhow::{Context, Result};
use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions};

use super::{Engine, EngineConfig, RmwOutcome};

/// Address space reserved for the map; LMDB fails writes past it. Sparse,
/// so it costs nothing until used.
const MAP_SIZE_BYTES: usize = 256 << 30;

pub struct Lmdb {
    env: Env,
    db: Database<'static, Bytes, Bytes>,
}

impl Lmdb {
    pub fn open(dir: &Path, config: &EngineConfig) -> Result<Lmdb> {
        let mut options = EnvOpenOptions::new();
        options.map_size(MAP_SIZE_BYTES);
        options.max_readers(u32::try_from(config.threads + 126).context("thread count")?);
        if !config.sync {
            // SAFETY: NO_SYNC only skips fsync at commit; the directory is
            // ours alone and a lost tail after power failure is the
            // durability the non-sync setting promises.
            unsafe {
                options.flags(EnvFlags::NO_SYNC);
            }
        }
        // SAFETY: heed requires that the environment is not opened twice in
        // one process and that the files are not changed behind its back;
        // the directory is fresh and private to this run.
        let env = unsafe { options.open(dir) }.context("opening lmdb")?;
        let txn = env.write_txn()?;
        let db: Database<'static, Bytes, Bytes> = env
            .create_databases_and_commit(txn, |opener, txn| {
                opener
                    .create_database(txn, None)
                    .map(CommitOrAbort::<_, ()>::Commit)
            })
            .context("creating the lmdb database")?
            .unwrap_commit();
        Ok(Lmdb { env, db })
    }
}

impl Engine for Lmdb {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut txn = self.env.write_txn()?;
        self.db.put(&mut txn, key, value)?;
        txn.commit()?;
        Ok(())
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let txn = self.env.read_txn()?;
        match self.db.get(&txn, key)? {
            Some(value) => {
                out.clear();
                out.extend_from_slice(value);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// One write transaction: get, put, commit. LMDB runs one write
    /// transaction at a time, so nothing conflicts.
    fn read_modify_write(&self, key: &[u8], value: &[u8], out: &mut Vec<u8>) -> Result<RmwOutcome> {
        let mut txn = self.env.write_txn()?;
        let found = match self.db.get(&txn, key)? {
            Some(current) => {
                out.clear();
                out.extend_from_slice(current);
                true
            }
            None => false,
        };
        self.db.put(&mut txn, key, value)?;
        txn.commit()?;
        Ok(RmwOutcome { found, retries: 0 })
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let txn = self.env.read_txn()?;
        let mut visited = 0;
        for item in self
            .db
            .range(&txn, &(Bound::Included(start), Bound::Unbounded))?
            .take(count)
        {
            let (key, value) = item?;
            visit(key, value);
            visited += 1;
        }
        Ok(visited)
    }

    fn persist(&self) -> Result<()> {
        Ok(self.env.force_sync()?)
    }
}
