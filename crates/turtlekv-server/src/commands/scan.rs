//! `SCAN` and `KEYS`: walks over the keys in key order.
//!
//! A `SCAN` cursor names the key the next call starts at, remembered by the
//! server (`Shared::save_cursor`), because clients (the `redis` crate,
//! `redis-cli`) parse cursors as 64-bit integers and a key does not fit in
//! one. A key present from the first call to the last is returned exactly
//! once, a stronger promise than Redis's.

use bytes::Bytes;
use turtlekv::Result;

use super::{Call, int_arg, is};
use crate::glob;

/// Most keys one `SCAN` call looks at, whatever `COUNT` asks: a call must
/// not hold an engine thread for long.
pub const MAX_SCAN_COUNT: usize = 100_000;

pub fn scan(c: &mut Call<'_, '_>) -> Result<()> {
    let Some(cursor) = std::str::from_utf8(&c.args[1])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        c.reply.error("ERR invalid cursor");
        return Ok(());
    };
    let mut pattern: Option<Bytes> = None;
    let mut count = 10usize;
    let mut i = 2;
    while i < c.args.len() {
        let Some(value) = c.args.get(i + 1) else {
            c.reply.error("ERR syntax error");
            return Ok(());
        };
        if is(&c.args[i], "MATCH") {
            pattern = Some(value.clone());
        } else if is(&c.args[i], "COUNT") {
            let Some(n) = int_arg(value, c.reply) else {
                return Ok(());
            };
            if n < 1 {
                c.reply.error("ERR syntax error");
                return Ok(());
            }
            count = usize::try_from(n).unwrap_or(usize::MAX).min(MAX_SCAN_COUNT);
        } else if is(&c.args[i], "TYPE") {
            // Every key holds a string: other types match nothing.
            if !is(value, "string") {
                pattern = Some(Bytes::from_static(b"[]"));
            }
        } else {
            c.reply.error("ERR syntax error");
            return Ok(());
        }
        i += 2;
    }
    let pattern = pattern.unwrap_or_else(|| Bytes::from_static(b"*"));
    let prefix = glob::literal_prefix(&pattern);
    let start = if cursor == 0 {
        Bytes::copy_from_slice(prefix)
    } else {
        match c.shared.cursor(c.session.db_index, cursor) {
            Some(key) => key,
            None => {
                c.reply.error("ERR invalid cursor");
                return Ok(());
            }
        }
    };
    let (keys, next) = walk(c, &start, prefix, &pattern, Some(count))?;
    let next_cursor = match next {
        Some(key) => c.shared.save_cursor(c.session.db_index, key),
        None => 0,
    };
    c.reply.array(2);
    c.reply.bulk(next_cursor.to_string().as_bytes());
    c.reply.array(keys.len());
    for key in &keys {
        c.reply.bulk(key);
    }
    Ok(())
}

pub fn keys(c: &mut Call<'_, '_>) -> Result<()> {
    let pattern = c.args[1].clone();
    let prefix = glob::literal_prefix(&pattern);
    let (keys, _) = walk(c, prefix, prefix, &pattern, None)?;
    c.reply.array(keys.len());
    for key in &keys {
        c.reply.bulk(key);
    }
    Ok(())
}

/// The matching keys among up to `limit` keys from `start` on (all if
/// `None`), and the key after the last one looked at, if any. Stops early
/// once keys no longer start with `prefix`.
fn walk(
    c: &Call<'_, '_>,
    start: &[u8],
    prefix: &[u8],
    pattern: &[u8],
    limit: Option<usize>,
) -> Result<(Vec<Bytes>, Option<Bytes>)> {
    let db = c.exec.db();
    let iter = c.session.space.keys_from(db, start);
    let mut found = Vec::new();
    for (seen, item) in iter.enumerate() {
        let key = item?;
        if !key.starts_with(prefix) {
            return Ok((found, None));
        }
        if limit.is_some_and(|l| seen == l) {
            return Ok((found, Some(key)));
        }
        if glob::matches(pattern, &key) {
            found.push(key);
        }
    }
    Ok((found, None))
}
