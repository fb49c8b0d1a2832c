//! What commands run against: a database (`SELECT`'s number mapped to a
//! keyspace) reached either directly or through a transaction, so that one
//! implementation of each command serves both plain calls and `EXEC`.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use turtlekv::{Db, Error, Keyspace, Result, Transaction, WriteBatch, WriteOptions};

/// One `SELECT`able database: database 0 is the default keyspace (what
/// `Db`'s own methods reach), database `n` the keyspace named `db<n>`.
#[derive(Debug, Clone)]
pub enum Space {
    Default,
    Named(Keyspace),
}

impl Space {
    pub fn get(&self, db: &Db, key: &[u8]) -> Result<Option<Bytes>> {
        match self {
            Space::Default => db.get(key),
            Space::Named(ks) => ks.get(key),
        }
    }

    pub fn multi_get(&self, db: &Db, keys: &[Bytes]) -> Result<Vec<Option<Bytes>>> {
        match self {
            Space::Default => db.multi_get(keys),
            Space::Named(ks) => ks.multi_get(keys),
        }
    }

    /// Keys from `start` (inclusive) on; all of them if `start` is empty.
    /// Values are not read, so large values' files are not touched.
    pub fn keys_from(&self, db: &Db, start: &[u8]) -> turtlekv::Keys {
        self.range_from(db, start).keys()
    }

    /// Keys and values from `start` (inclusive) on; all of them if `start`
    /// is empty.
    fn range_from(&self, db: &Db, start: &[u8]) -> turtlekv::Iter {
        if start.is_empty() {
            return match self {
                Space::Default => db.iter(),
                Space::Named(ks) => ks.iter(),
            };
        }
        match self {
            Space::Default => db.range(start..),
            Space::Named(ks) => ks.range(start..),
        }
    }

    pub fn approximate_len(&self, db: &Db) -> Result<u64> {
        match self {
            Space::Default => db.approximate_len(),
            Space::Named(ks) => ks.approximate_len(),
        }
    }

    pub fn batch_put(&self, batch: &mut WriteBatch, key: &[u8], value: &[u8]) {
        match self {
            Space::Default => batch.put(key, value),
            Space::Named(ks) => batch.put_in(ks, key, value),
        };
    }

    pub fn batch_delete(&self, batch: &mut WriteBatch, key: &[u8]) {
        match self {
            Space::Default => batch.delete(key),
            Space::Named(ks) => batch.delete_in(ks, key),
        };
    }

    /// Adds the deletion of every key of this database to `batch`. The
    /// engine's keys are 1 to `max_key_len_bytes` bytes, so the range from
    /// `[0]` to the largest key, plus that key itself, covers them all.
    pub fn batch_clear(&self, batch: &mut WriteBatch, max_key_len_bytes: usize) {
        let last = vec![0xff; max_key_len_bytes];
        match self {
            Space::Default => batch.delete_range([0u8], &last).delete(&last),
            Space::Named(ks) => batch.delete_range_in(ks, [0u8], &last).delete_in(ks, &last),
        };
    }

    pub fn txn_get(&self, txn: &Transaction, key: &[u8]) -> Result<Option<Bytes>> {
        match self {
            Space::Default => txn.get(key),
            Space::Named(ks) => txn.get_in(ks, key),
        }
    }

    pub fn txn_put(&self, txn: &mut Transaction, key: &[u8], value: &[u8]) {
        match self {
            Space::Default => txn.put(key, value),
            Space::Named(ks) => txn.put_in(ks, key, value),
        }
    }

    pub fn txn_delete(&self, txn: &mut Transaction, key: &[u8]) {
        match self {
            Space::Default => txn.delete(key),
            Space::Named(ks) => txn.delete_in(ks, key),
        }
    }
}

/// Where a command's reads and writes go.
#[derive(Debug)]
pub enum Exec<'a> {
    /// Straight to the database; each write is its own atomic batch,
    /// synced or not as the server's `--sync` says.
    Direct {
        db: &'a Db,
        write: WriteOptions,
        /// Counts commits retried after a conflict.
        retries: &'a AtomicU64,
    },
    /// Into a transaction that `EXEC` commits (reads see its start plus
    /// its own writes).
    Txn {
        db: &'a Db,
        txn: &'a mut Transaction,
    },
}

impl Exec<'_> {
    pub fn db(&self) -> &Db {
        match self {
            Exec::Direct { db, .. } | Exec::Txn { db, .. } => db,
        }
    }

    pub fn get(&self, space: &Space, key: &[u8]) -> Result<Option<Bytes>> {
        match self {
            Exec::Direct { db, .. } => space.get(db, key),
            Exec::Txn { txn, .. } => space.txn_get(txn, key),
        }
    }

    pub fn multi_get(&self, space: &Space, keys: &[Bytes]) -> Result<Vec<Option<Bytes>>> {
        match self {
            Exec::Direct { db, .. } => space.multi_get(db, keys),
            Exec::Txn { txn, .. } => keys.iter().map(|k| space.txn_get(txn, k)).collect(),
        }
    }

    /// Writes `batch` (built with `space`'s `batch_*` methods from
    /// `entries`) atomically. In a transaction the entries are replayed
    /// into it instead, since a transaction has no batch of its own.
    pub fn write(&mut self, space: &Space, entries: &[(&[u8], Option<&[u8]>)]) -> Result<()> {
        for (key, value) in entries {
            self.db().check_entry(key, *value)?;
        }
        match self {
            Exec::Direct { db, write, .. } => {
                let mut batch = WriteBatch::new();
                for (key, value) in entries {
                    match value {
                        Some(v) => space.batch_put(&mut batch, key, v),
                        None => space.batch_delete(&mut batch, key),
                    }
                }
                db.write(batch, write)
            }
            Exec::Txn { txn, .. } => {
                for (key, value) in entries {
                    match value {
                        Some(v) => space.txn_put(txn, key, v),
                        None => space.txn_delete(txn, key),
                    }
                }
                Ok(())
            }
        }
    }

    /// Runs a read-modify-write atomically. Directly, `body` runs in a
    /// fresh transaction that is committed, and run again from the start
    /// whenever the commit reports a conflict (another writer touched what
    /// it read). Inside `EXEC`, `body` runs in `EXEC`'s transaction, whose
    /// commit covers it.
    pub fn atomically<T>(
        &mut self,
        mut body: impl FnMut(&mut Transaction) -> Result<T>,
    ) -> Result<T> {
        match self {
            Exec::Direct { db, write, retries } => loop {
                let mut txn = db.transaction();
                let out = body(&mut txn)?;
                match txn.commit(write) {
                    Ok(()) => return Ok(out),
                    Err(Error::Conflict(_)) => {
                        retries.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => return Err(e),
                }
            },
            Exec::Txn { txn, .. } => body(txn),
        }
    }
}
