//! `put`, `get` and `delete`: one key at a time.

use std::io::Write;

use anyhow::{Context as _, Result};
use turtlekv::WriteOptions;

use crate::cli::{DeleteArgs, GetArgs, KeyArgs, PutArgs};
use crate::db::{Create, check_entry, open};
use crate::encoding::Encoding;
use crate::error::{NotFound, usage};

/// The process exits right after, so the write is synced: a command that
/// returned must not lose it even on power failure.
const DURABLE: WriteOptions = WriteOptions { sync: true };

/// The decoded, checked key of a one-key command, with its encoding.
fn decoded_key(args: &KeyArgs) -> Result<(Encoding, Vec<u8>)> {
    let encoding = args.encoding.encoding();
    let key = encoding.decode_arg(&args.key, "key")?;
    check_entry(&key, None).map_err(usage)?;
    Ok((encoding, key))
}

pub fn put(args: &PutArgs) -> Result<()> {
    let (encoding, key) = decoded_key(&args.target)?;
    let value = encoding.decode_arg(&args.value, "value")?;
    check_entry(&key, Some(&value)).map_err(usage)?;
    let db = open(&args.target.db, Create::IfMissing)?;
    match db.put_opt(&key, &value, &DURABLE) {
        // Limits of this database's page sizes (shorter keys with small
        // nodes): as much a bad argument as a key over MAX_KEY_SIZE.
        Err(e @ (turtlekv::Error::KeyTooLarge { .. } | turtlekv::Error::ValueTooLarge { .. })) => {
            Err(usage(e.to_string()))
        }
        other => other.context("put"),
    }
}

pub fn get(args: &GetArgs, out: &mut dyn Write) -> Result<()> {
    let (encoding, key) = decoded_key(&args.target)?;
    let db = open(&args.target.db, Create::No)?;
    let value = db
        .get(&key)
        .context("get")?
        .ok_or_else(|| NotFound(args.target.key.clone()))?;
    writeln!(out, "{}", encoding.encode(&value, "the value")?)?;
    Ok(())
}

pub fn delete(args: &DeleteArgs) -> Result<()> {
    let (_, key) = decoded_key(&args.target)?;
    let db = open(&args.target.db, Create::No)?;
    match db.delete_opt(&key, &DURABLE) {
        // As in `put`: a key this database's nodes cannot hold.
        Err(e @ turtlekv::Error::KeyTooLarge { .. }) => Err(usage(e.to_string())),
        other => other.context("delete"),
    }
}
