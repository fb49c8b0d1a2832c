//! `put`, `get` and `delete`: one key at a time.

use std::io::Write;

use anyhow::{Context as _, Result};
use turtlekv::WriteOptions;

use crate::cli::{DeleteArgs, GetArgs, PutArgs};
use crate::db::{Create, check_entry, open};
use crate::error::{NotFound, usage};

/// The process exits right after, so the write is synced: a command that
/// returned must not lose it even on power failure.
const DURABLE: WriteOptions = WriteOptions { sync: true };

pub fn put(args: &PutArgs) -> Result<()> {
    let encoding = args.encoding.encoding();
    let key = encoding.decode_arg(&args.key, "key")?;
    let value = encoding.decode_arg(&args.value, "value")?;
    check_entry(&key, Some(&value)).map_err(usage)?;
    let db = open(&args.db, Create::IfMissing)?;
    db.put_opt(&key, &value, &DURABLE).context("put")?;
    Ok(())
}

pub fn get(args: &GetArgs, out: &mut dyn Write) -> Result<()> {
    let encoding = args.encoding.encoding();
    let key = encoding.decode_arg(&args.key, "key")?;
    check_entry(&key, None).map_err(usage)?;
    let db = open(&args.db, Create::No)?;
    let value = db
        .get(&key)
        .context("get")?
        .ok_or_else(|| NotFound(args.key.clone()))?;
    writeln!(out, "{}", encoding.encode(&value, "the value")?)?;
    Ok(())
}

pub fn delete(args: &DeleteArgs) -> Result<()> {
    let encoding = args.encoding.encoding();
    let key = encoding.decode_arg(&args.key, "key")?;
    check_entry(&key, None).map_err(usage)?;
    let db = open(&args.db, Create::No)?;
    db.delete_opt(&key, &DURABLE).context("delete")?;
    Ok(())
}
