//! redb (a copy-on-write B-tree in Rust). Each put is one write
//! transaction. redb has no "written to the OS but not fsynced" commit: in
//! the non-sync setting commits use `Durability::None` (not crash-safe
//! until the next durable commit, which `persist` makes at the end of each
//! phase), which flatters redb against engines that write their log on every
//! put; with `--sync` every commit is `Durability::Immediate`.

use std::path::Path;

use anyhow::{Context, Result};
use redb::{Database, Durability, ReadableDatabase, ReadableTable as _, TableDefinition};

use super::{Engine, EngineConfig, RmwOutcome};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("ycsb");

pub struct Redb {
    db: Database,
    durability: Durability,
}

impl Redb {
    pub fn open(dir: &Path, config: &EngineConfig) -> Result<Redb> {
        let cache_bytes = usize::try_from(config.cache_bytes).context("cache size")?;
        let db = Database::builder()
            .set_cache_size(cache_bytes)
            .create(dir.join("data.redb"))
            .context("opening redb")?;
        // Create the table up front so readers never find it missing.
        let txn = db.begin_write()?;
        txn.open_table(TABLE)?;
        txn.commit()?;
        Ok(Redb {
            db,
            durability: if config.sync {
                Durability::Immediate
            } else {
                Durability::None
            },
        })
    }

    fn commit_with(&self, durability: Durability, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let mut txn = self.db.begin_write()?;
        txn.set_durability(durability)?;
        if let Some(value) = value {
            txn.open_table(TABLE)?.insert(key, value)?;
        }
        txn.commit()?;
        Ok(())
    }
}

impl Engine for Redb {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.commit_with(self.durability, key, Some(value))
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(TABLE)?;
        match table.get(key)? {
            Some(value) => {
                out.clear();
                out.extend_from_slice(value.value());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// One write transaction: get, insert, commit. redb runs one write
    /// transaction at a time, so nothing conflicts: the other thread
    /// waits in `begin_write` instead.
    fn read_modify_write(&self, key: &[u8], value: &[u8], out: &mut Vec<u8>) -> Result<RmwOutcome> {
        let mut txn = self.db.begin_write()?;
        txn.set_durability(self.durability)?;
        let found = {
            let mut table = txn.open_table(TABLE)?;
            let found = match table.get(key)? {
                Some(current) => {
                    out.clear();
                    out.extend_from_slice(current.value());
                    true
                }
                None => false,
            };
            table.insert(key, value)?;
            found
        };
        txn.commit()?;
        Ok(RmwOutcome { found, retries: 0 })
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(TABLE)?;
        let mut visited = 0;
        for item in table.range(start..)?.take(count) {
            let (key, value) = item?;
            visit(key.value(), value.value());
            visited += 1;
        }
        Ok(visited)
    }

    fn persist(&self) -> Result<()> {
        // An empty durable commit makes the earlier non-durable ones durable.
        self.commit_with(Durability::Immediate, &[], None)
    }
}
