//! `put`, `get`, `delete` and `delete-range`: one key or range at a time.

use std::io::Write;

use anyhow::{Context as _, Result};
use turtlekv::WriteOptions;

use crate::cli::{DeleteArgs, DeleteRangeArgs, GetArgs, KeyArgs, PutArgs};
use crate::db::{Create, check_entry, open};
use crate::encoding::Encoding;
use crate::error::{NotFound, usage};
use crate::keyspace::Target;

/// The process exits right after, so the write is synced: a command that
/// returned must not lose it even on power failure.
const DURABLE: WriteOptions = WriteOptions::new().sync(true);

/// The decoded, checked key of a one-key command, with its encoding
/// (the keyspace name is checked too).
fn decoded_key(args: &KeyArgs) -> Result<(Encoding, Vec<u8>)> {
    args.keyspace.name()?;
    let encoding = args.encoding.encoding();
    let key = encoding.decode_arg(&args.key, "key")?;
    check_entry(&key, None).map_err(usage)?;
    Ok((encoding, key))
}

/// The database and keyspace of a one-key command.
fn open_target(args: &KeyArgs, create: Create) -> Result<Target> {
    Target::open(&args.db, create, args.keyspace.name()?)
}

pub fn put(args: &PutArgs) -> Result<()> {
    let (encoding, key) = decoded_key(&args.target)?;
    let value = encoding.decode_arg(&args.value, "value")?;
    check_entry(&key, Some(&value)).map_err(usage)?;
    let db = open(&args.target.db, Create::IfMissing)?;
    // This database's own limits before a keyspace is created for the put.
    if let Err(e @ (turtlekv::Error::KeyTooLarge { .. } | turtlekv::Error::ValueTooLarge { .. })) =
        db.check_entry(&key, Some(&value))
    {
        return Err(usage(e.to_string()));
    }
    let target = Target::in_db(
        db,
        &args.target.db,
        Create::IfMissing,
        args.target.keyspace.name()?,
    )?;
    match target.put_opt(&key, &value, &DURABLE) {
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
    let target = open_target(&args.target, args.read_only.create())?;
    let value = target
        .get(&key)
        .context("get")?
        .ok_or_else(|| NotFound(args.target.key.clone()))?;
    writeln!(out, "{}", encoding.encode(&value, "the value")?)?;
    Ok(())
}

pub fn delete_range(args: &DeleteRangeArgs) -> Result<()> {
    args.keyspace.name()?;
    let encoding = args.encoding.encoding();
    let start = encoding.decode_arg(&args.start, "start")?;
    let end = encoding.decode_arg(&args.end, "end")?;
    check_entry(&start, None).map_err(usage)?;
    check_entry(&end, None).map_err(usage)?;
    // As `delete`: a mistyped keyspace must not pass for a deletion.
    let target = Target::open(&args.db, Create::No, args.keyspace.name()?)?;
    match target.delete_range_opt(&start, &end, &DURABLE) {
        Err(e @ (turtlekv::Error::KeyTooLarge { .. } | turtlekv::Error::InvalidRange { .. })) => {
            Err(usage(e.to_string()))
        }
        other => other.context("delete-range"),
    }
}

pub fn delete(args: &DeleteArgs) -> Result<()> {
    let (_, key) = decoded_key(&args.target)?;
    // A keyspace that is not there is an error, as a database that is not
    // there is: a mistyped name must not pass for a delete that happened.
    let target = open_target(&args.target, Create::No)?;
    match target.delete_opt(&key, &DURABLE) {
        // As in `put`: a key this database's nodes cannot hold.
        Err(e @ turtlekv::Error::KeyTooLarge { .. }) => Err(usage(e.to_string())),
        other => other.context("delete"),
    }
}
