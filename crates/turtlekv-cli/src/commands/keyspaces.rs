//! `keyspaces` and `drop-keyspace`: the named keyspaces of a database.

use std::io::Write;

use anyhow::{Context as _, Result, bail};

use crate::cli::{DropKeyspaceArgs, KeyspacesArgs};
use crate::db::{Create, open};
use crate::encoding::encode_hex;
use crate::keyspace::check_name;

pub fn list(args: &KeyspacesArgs, out: &mut dyn Write) -> Result<()> {
    let db = open(&args.db, Create::No)?;
    for name in db
        .keyspace_names()
        .context("reading the keyspace catalog")?
    {
        if args.hex {
            writeln!(out, "{}", encode_hex(&name))?;
        } else {
            let Ok(name) = std::str::from_utf8(&name) else {
                bail!(
                    "keyspace name {} is not UTF-8 text; use --hex to print the names",
                    encode_hex(&name)
                );
            };
            writeln!(out, "{name}")?;
        }
    }
    Ok(())
}

pub fn drop_keyspace(args: &DropKeyspaceArgs, out: &mut dyn Write) -> Result<()> {
    check_name(&args.name)?;
    let db = open(&args.db, Create::No)?;
    db.drop_keyspace(&args.name)
        .with_context(|| format!("dropping keyspace {:?}", args.name))?;
    writeln!(
        out,
        "dropped keyspace {:?} of {}; its records are deleted in the background",
        args.name,
        args.db.display()
    )?;
    Ok(())
}
