//! Commands on keys regardless of their value, and on whole databases.

use std::collections::HashSet;

use turtlekv::{Result, WriteBatch};

use super::{Call, is};
use crate::store::Space;

/// Deletes the keys that exist and counts them, atomically, so that two
/// concurrent `DEL`s of one key count it once between them.
pub fn del(c: &mut Call<'_, '_>) -> Result<()> {
    let space = &c.session.space;
    let mut keys = Vec::with_capacity(c.args.len() - 1);
    let mut seen = HashSet::new();
    for key in &c.args[1..] {
        c.exec.db().check_entry(key, None)?;
        if seen.insert(key) {
            keys.push(key);
        }
    }
    let deleted = c.exec.atomically(|txn| {
        let mut deleted = 0;
        for key in &keys {
            if space.txn_get(txn, key)?.is_some() {
                space.txn_delete(txn, key);
                deleted += 1;
            }
        }
        Ok(deleted)
    })?;
    c.reply.integer(deleted);
    Ok(())
}

/// Counts the arguments that name a key with a value (a key named twice
/// counts twice, as in Redis).
pub fn exists(c: &mut Call<'_, '_>) -> Result<()> {
    let values = c.exec.multi_get(&c.session.space, &c.args[1..])?;
    let count = values.iter().filter(|v| v.is_some()).count();
    c.reply.integer(i64::try_from(count).unwrap_or(i64::MAX));
    Ok(())
}

/// Every value is a string.
pub fn key_type(c: &mut Call<'_, '_>) -> Result<()> {
    let value = c.exec.get(&c.session.space, &c.args[1])?;
    c.reply
        .simple(if value.is_some() { "string" } else { "none" });
    Ok(())
}

/// No key expires: -1 for a key with a value, -2 for one without.
pub fn ttl(c: &mut Call<'_, '_>) -> Result<()> {
    let value = c.exec.get(&c.session.space, &c.args[1])?;
    c.reply.integer(if value.is_some() { -1 } else { -2 });
    Ok(())
}

/// Up to this many keys (by the engine's estimate) `DBSIZE` counts them
/// exactly by walking them; beyond, walking would hold an engine thread
/// for too long and the estimate is returned.
pub const DBSIZE_EXACT_MAX_KEYS: u64 = 100_000;

/// The number of keys: exact for small databases; for larger ones the
/// engine's estimate (`Db::approximate_len`), which may count a key twice
/// while an overwrite or a delete of it is not yet merged by a checkpoint.
pub fn dbsize(c: &mut Call<'_, '_>) -> Result<()> {
    let n = count_keys(&c.session.space, c.exec.db())?;
    c.reply.integer(i64::try_from(n).unwrap_or(i64::MAX));
    Ok(())
}

/// `DBSIZE`'s count (and `INFO keyspace`'s): exact up to
/// [`DBSIZE_EXACT_MAX_KEYS`], the engine's estimate beyond.
pub fn count_keys(space: &Space, db: &turtlekv::Db) -> Result<u64> {
    let estimate = space.approximate_len(db)?;
    if estimate > DBSIZE_EXACT_MAX_KEYS {
        return Ok(estimate);
    }
    let mut n = 0;
    for item in space.keys_from(db, &[]) {
        item?;
        n += 1;
    }
    Ok(n)
}

/// `ASYNC` and `SYNC` are accepted: the engine's range deletion is one log
/// entry either way, and its keys disappear at once.
fn flush_mode_ok(c: &mut Call<'_, '_>) -> bool {
    match c.args.get(1) {
        None => true,
        Some(mode) if c.args.len() == 2 && (is(mode, "ASYNC") || is(mode, "SYNC")) => true,
        Some(_) => {
            c.reply.error("ERR syntax error");
            false
        }
    }
}

pub fn flushdb(c: &mut Call<'_, '_>) -> Result<()> {
    if !flush_mode_ok(c) {
        return Ok(());
    }
    let mut batch = WriteBatch::new();
    c.session
        .space
        .batch_clear(&mut batch, c.shared.max_key_len_bytes);
    c.shared.db.write(batch, &c.shared.write)?;
    c.reply.ok();
    Ok(())
}

/// Clears database 0 and every database that was ever selected, in one
/// atomic batch.
pub fn flushall(c: &mut Call<'_, '_>) -> Result<()> {
    if !flush_mode_ok(c) {
        return Ok(());
    }
    let shared = c.shared;
    let mut batch = WriteBatch::new();
    Space::Default.batch_clear(&mut batch, shared.max_key_len_bytes);
    for name in shared.db.keyspace_names()? {
        let index = std::str::from_utf8(&name)
            .ok()
            .and_then(|n| n.strip_prefix("db"))
            .and_then(|n| n.parse::<u32>().ok());
        if let Some(index) = index.filter(|&i| i > 0 && i < shared.config.databases) {
            shared
                .space(index)?
                .batch_clear(&mut batch, shared.max_key_len_bytes);
        }
    }
    shared.db.write(batch, &shared.write)?;
    c.reply.ok();
    Ok(())
}
