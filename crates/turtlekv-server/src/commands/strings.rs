//! String commands. Plain reads and writes go straight to the engine; every
//! read-modify-write (`SET NX/XX/GET`, `GETSET`, `INCR`, `APPEND`, ...) runs
//! through `Exec::atomically`, a transaction retried on conflict.

use bytes::Bytes;
use turtlekv::Result;

use super::{Call, int_arg, is};
use crate::resp::parse::parse_i64;

pub fn get(c: &mut Call<'_, '_>) -> Result<()> {
    let value = c.exec.get(&c.session.space, &c.args[1])?;
    c.reply.bulk_or_null(value.as_deref());
    Ok(())
}

pub fn strlen(c: &mut Call<'_, '_>) -> Result<()> {
    let value = c.exec.get(&c.session.space, &c.args[1])?;
    c.reply.integer(value.map_or(0, |v| len_i64(&v)));
    Ok(())
}

/// How `SET` was asked to behave.
#[derive(Debug, Default)]
struct SetOptions {
    only_if_absent: bool,
    only_if_present: bool,
    return_old: bool,
}

fn parse_set_options(c: &mut Call<'_, '_>) -> Option<SetOptions> {
    let mut options = SetOptions::default();
    for arg in &c.args[3..] {
        if is(arg, "NX") && !options.only_if_present {
            options.only_if_absent = true;
        } else if is(arg, "XX") && !options.only_if_absent {
            options.only_if_present = true;
        } else if is(arg, "GET") {
            options.return_old = true;
        } else if is(arg, "KEEPTTL") {
            // No key has a time to live: keeping it is what happens anyway.
        } else if ["EX", "PX", "EXAT", "PXAT"].iter().any(|k| is(arg, k)) {
            c.reply
                .error("ERR turtlekv-server does not support key expiry (SET EX/PX/EXAT/PXAT)");
            return None;
        } else {
            c.reply.error("ERR syntax error");
            return None;
        }
    }
    Some(options)
}

pub fn set(c: &mut Call<'_, '_>) -> Result<()> {
    let Some(options) = parse_set_options(c) else {
        return Ok(());
    };
    let (key, value) = (&c.args[1], &c.args[2]);
    let space = &c.session.space;
    if !(options.only_if_absent || options.only_if_present || options.return_old) {
        c.exec.write(space, &[(key, Some(value))])?;
        c.reply.ok();
        return Ok(());
    }
    let db = c.exec.db().clone();
    let (old, written) = c.exec.atomically(|txn| {
        let old = space.txn_get(txn, key)?;
        let write = if options.only_if_absent {
            old.is_none()
        } else if options.only_if_present {
            old.is_some()
        } else {
            true
        };
        if write {
            db.check_entry(key, Some(value))?;
            space.txn_put(txn, key, value);
        }
        Ok((old, write))
    })?;
    if options.return_old {
        c.reply.bulk_or_null(old.as_deref());
    } else if written {
        c.reply.ok();
    } else {
        c.reply.null();
    }
    Ok(())
}

pub fn setnx(c: &mut Call<'_, '_>) -> Result<()> {
    let written = put_if_all_absent(c, &[(&c.args[1], &c.args[2])])?;
    c.reply.integer(i64::from(written));
    Ok(())
}

pub fn msetnx(c: &mut Call<'_, '_>) -> Result<()> {
    let Some(pairs) = pairs(c) else {
        return Ok(());
    };
    let written = put_if_all_absent(c, &pairs)?;
    c.reply.integer(i64::from(written));
    Ok(())
}

/// Writes every pair if none of their keys has a value, atomically.
fn put_if_all_absent(c: &mut Call<'_, '_>, pairs: &[(&Bytes, &Bytes)]) -> Result<bool> {
    let space = &c.session.space;
    let db = c.exec.db().clone();
    c.exec.atomically(|txn| {
        for (key, _) in pairs {
            if space.txn_get(txn, key)?.is_some() {
                return Ok(false);
            }
        }
        for (key, value) in pairs {
            db.check_entry(key, Some(value))?;
            space.txn_put(txn, key, value);
        }
        Ok(true)
    })
}

pub fn getset(c: &mut Call<'_, '_>) -> Result<()> {
    let (key, value) = (&c.args[1], &c.args[2]);
    let space = &c.session.space;
    let db = c.exec.db().clone();
    let old = c.exec.atomically(|txn| {
        let old = space.txn_get(txn, key)?;
        db.check_entry(key, Some(value))?;
        space.txn_put(txn, key, value);
        Ok(old)
    })?;
    c.reply.bulk_or_null(old.as_deref());
    Ok(())
}

pub fn getdel(c: &mut Call<'_, '_>) -> Result<()> {
    let key = &c.args[1];
    let space = &c.session.space;
    c.exec.db().check_entry(key, None)?;
    let old = c.exec.atomically(|txn| {
        let old = space.txn_get(txn, key)?;
        if old.is_some() {
            space.txn_delete(txn, key);
        }
        Ok(old)
    })?;
    c.reply.bulk_or_null(old.as_deref());
    Ok(())
}

pub fn mget(c: &mut Call<'_, '_>) -> Result<()> {
    let values = c.exec.multi_get(&c.session.space, &c.args[1..])?;
    c.reply.array(values.len());
    for value in &values {
        c.reply.bulk_or_null(value.as_deref());
    }
    Ok(())
}

/// `MSET`'s key-value pairs, or `None` after the arity error reply.
fn pairs<'a>(c: &mut Call<'a, '_>) -> Option<Vec<(&'a Bytes, &'a Bytes)>> {
    let args: &'a [Bytes] = c.args;
    if args.len() % 2 != 1 {
        c.reply.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            String::from_utf8_lossy(&args[0]).to_ascii_lowercase()
        ));
        return None;
    }
    Some(args[1..].chunks_exact(2).map(|p| (&p[0], &p[1])).collect())
}

/// All pairs in one write batch: atomic, and one sync under `--sync always`.
pub fn mset(c: &mut Call<'_, '_>) -> Result<()> {
    let Some(pairs) = pairs(c) else {
        return Ok(());
    };
    let entries: Vec<(&[u8], Option<&[u8]>)> = pairs
        .iter()
        .map(|(k, v)| (k.as_ref(), Some(v.as_ref())))
        .collect();
    c.exec.write(&c.session.space, &entries)?;
    c.reply.ok();
    Ok(())
}

pub fn incr(c: &mut Call<'_, '_>) -> Result<()> {
    add(c, 1)
}

pub fn decr(c: &mut Call<'_, '_>) -> Result<()> {
    add(c, -1)
}

pub fn incrby(c: &mut Call<'_, '_>) -> Result<()> {
    match int_arg(&c.args[2], c.reply) {
        Some(delta) => add(c, delta),
        None => Ok(()),
    }
}

pub fn decrby(c: &mut Call<'_, '_>) -> Result<()> {
    match int_arg(&c.args[2], c.reply) {
        Some(i64::MIN) => {
            c.reply.error("ERR decrement would overflow");
            Ok(())
        }
        Some(delta) => add(c, -delta),
        None => Ok(()),
    }
}

/// Adds `delta` to the integer stored at the key (absent counts as 0).
fn add(c: &mut Call<'_, '_>, delta: i64) -> Result<()> {
    let key = &c.args[1];
    let space = &c.session.space;
    c.exec.db().check_entry(key, None)?;
    let outcome = c.exec.atomically(|txn| {
        let current = match space.txn_get(txn, key)? {
            None => 0,
            Some(v) => match parse_i64(&v) {
                Some(n) => n,
                None => return Ok(Err("ERR value is not an integer or out of range")),
            },
        };
        let Some(next) = current.checked_add(delta) else {
            return Ok(Err("ERR increment or decrement would overflow"));
        };
        space.txn_put(txn, key, next.to_string().as_bytes());
        Ok(Ok(next))
    })?;
    match outcome {
        Ok(n) => c.reply.integer(n),
        Err(message) => c.reply.error(message),
    }
    Ok(())
}

pub fn append(c: &mut Call<'_, '_>) -> Result<()> {
    let (key, suffix) = (&c.args[1], &c.args[2]);
    let space = &c.session.space;
    let db = c.exec.db().clone();
    let len = c.exec.atomically(|txn| {
        let mut value = space.txn_get(txn, key)?.map(Vec::from).unwrap_or_default();
        value.extend_from_slice(suffix);
        db.check_entry(key, Some(&value))?;
        let len = len_i64(&value);
        space.txn_put(txn, key, &value);
        Ok(len)
    })?;
    c.reply.integer(len);
    Ok(())
}

fn len_i64(bytes: &[u8]) -> i64 {
    i64::try_from(bytes.len()).unwrap_or(i64::MAX)
}
