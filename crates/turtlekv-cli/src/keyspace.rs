//! `--keyspace NAME`: which keyspace a data command works on, and opening
//! it the way the command may (reads never create one).

use std::ops::RangeBounds;
use std::path::Path;

use anyhow::{Context as _, Result};
use clap::Args;
use turtlekv::{Bytes, Db, Iter, Keyspace, Snapshot, WriteOptions};

use crate::db::{Create, open};
use crate::error::{NoKeyspace, usage};

/// The engine's limit on keyspace names, in bytes.
pub const MAX_NAME_BYTES: usize = 255;

/// The `--keyspace` flag of the commands that read or write records.
#[derive(Debug, Clone, Args)]
pub struct KeyspaceArg {
    /// Work in the named keyspace (its name's UTF-8 bytes, 1 to 255)
    /// instead of the default one.
    #[arg(long, value_name = "NAME")]
    pub keyspace: Option<String>,
}

impl KeyspaceArg {
    /// The checked name, or `None` for the default keyspace.
    pub fn name(&self) -> Result<Option<&str>> {
        self.keyspace
            .as_deref()
            .map(|name| check_name(name).map(|()| name))
            .transpose()
    }
}

/// A keyspace name the engine takes, checked before anything is opened so
/// that a bad one creates nothing and is reported as a bad argument.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(usage(format!(
            "keyspace names are 1 to {MAX_NAME_BYTES} bytes; the name given is empty"
        )));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(usage(format!(
            "keyspace names are 1 to {MAX_NAME_BYTES} bytes; {:?} has {}",
            abbreviate(name),
            name.len()
        )));
    }
    Ok(())
}

/// The start of a long name, for messages.
fn abbreviate(name: &str) -> String {
    const SHOWN: usize = 40;
    match name.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}...", &name[..end]),
        None => name.to_string(),
    }
}

/// The keyspace a command works on: the database's own (default) one, or
/// a named one.
#[derive(Debug)]
pub enum Target {
    Default(Db),
    Named(Keyspace),
}

impl Target {
    /// Opens the database at `path`, then the keyspace `name`. With
    /// `Create::No` (reads), a keyspace that does not exist is an error and
    /// is not created; with `Create::IfMissing`, it is created (durably).
    pub fn open(path: &Path, create: Create, name: Option<&str>) -> Result<Target> {
        Target::in_db(open(path, create)?, path, create, name)
    }

    /// [`Target::open`] in a database already open.
    pub fn in_db(db: Db, path: &Path, create: Create, name: Option<&str>) -> Result<Target> {
        match name {
            None => Ok(Target::Default(db)),
            Some(name) => open_keyspace(&db, path, create, name).map(Target::Named),
        }
    }

    pub fn db(&self) -> &Db {
        match self {
            Target::Default(db) => db,
            Target::Named(keyspace) => keyspace.db(),
        }
    }

    pub fn get(&self, key: &[u8]) -> turtlekv::Result<Option<Bytes>> {
        match self {
            Target::Default(db) => db.get(key),
            Target::Named(keyspace) => keyspace.get(key),
        }
    }

    pub fn put_opt(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> turtlekv::Result<()> {
        match self {
            Target::Default(db) => db.put_opt(key, value, options),
            Target::Named(keyspace) => keyspace.put_opt(key, value, options),
        }
    }

    pub fn delete_opt(&self, key: &[u8], options: &WriteOptions) -> turtlekv::Result<()> {
        match self {
            Target::Default(db) => db.delete_opt(key, options),
            Target::Named(keyspace) => keyspace.delete_opt(key, options),
        }
    }

    pub fn delete_range_opt(
        &self,
        start: &[u8],
        end: &[u8],
        options: &WriteOptions,
    ) -> turtlekv::Result<()> {
        match self {
            Target::Default(db) => db.delete_range_opt(start, end, options),
            Target::Named(keyspace) => keyspace.delete_range_opt(start, end, options),
        }
    }

    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        match self {
            Target::Default(db) => db.range(range),
            Target::Named(keyspace) => keyspace.range(range),
        }
    }

    pub fn prefix(&self, prefix: &[u8]) -> Iter {
        match self {
            Target::Default(db) => db.prefix(prefix),
            Target::Named(keyspace) => keyspace.prefix(prefix),
        }
    }

    /// Every record of this keyspace as `snapshot` sees it.
    pub fn all_in(&self, snapshot: &Snapshot) -> Iter {
        match self {
            Target::Default(_) => snapshot.range::<&[u8], _>(..),
            Target::Named(keyspace) => snapshot.range_in::<&[u8], _>(keyspace, ..),
        }
    }
}

/// Opens the keyspace `name` of `db` (at `path`): unless with
/// `Create::IfMissing`, only one that exists.
pub fn open_keyspace(db: &Db, path: &Path, create: Create, name: &str) -> Result<Keyspace> {
    if create != Create::IfMissing {
        require_keyspace(db, path, name)?;
    }
    db.keyspace(name)
        .with_context(|| format!("opening keyspace {name:?}"))
}

/// Fails, naming the keyspace, unless the database has a keyspace `name`.
fn require_keyspace(db: &Db, path: &Path, name: &str) -> Result<()> {
    let names = db
        .keyspace_names()
        .context("reading the keyspace catalog")?;
    if names.iter().any(|n| n == name.as_bytes()) {
        return Ok(());
    }
    Err(NoKeyspace(format!(
        "no keyspace named {name:?} in the database at {} (`turtlekv keyspaces {}` lists them)",
        path.display(),
        path.display()
    ))
    .into())
}
