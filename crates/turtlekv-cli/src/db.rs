//! Opening a database the way every command does: with the options stored
//! in it (`Options::load`), and never creating one by accident.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Context as _, Result};
use turtlekv::{
    CONTROL_SOCKET_NAME, Db, LOCK_FILE_NAME, MAX_KEY_SIZE, MAX_VALUE_SIZE, Options, WalRecovery,
};

use crate::error::NoDatabase;

/// Whether a command may create the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Create {
    /// Reading commands: a missing database is an error.
    No,
    /// `put`, `load`: create the directory and an empty database.
    IfMissing,
    /// Reading commands with `--read-only`: a missing database is an
    /// error, and the one found is opened without its lock and without
    /// writing anything (`Db::open_read_only`).
    ReadOnly,
}

/// The `--wal-recovery` mode of this run, for every open.
static WAL_RECOVERY: OnceLock<WalRecovery> = OnceLock::new();

/// Sets the WAL recovery mode every open of this run uses (once, from the
/// command line).
pub fn set_wal_recovery(mode: WalRecovery) {
    let _ = WAL_RECOVERY.set(mode);
}

/// Opens the database at `path` with its stored options.
pub fn open(path: &Path, create: Create) -> Result<Db> {
    let (db, _) = open_with_options(path, create)?;
    Ok(db)
}

/// [`open`], also returning the options it opened with.
pub fn open_with_options(path: &Path, create: Create) -> Result<(Db, Options)> {
    match create {
        Create::No | Create::ReadOnly => require_database(path)?,
        Create::IfMissing => refuse_foreign_directory(path)?,
    }
    let mut options = Options::load(path)
        .with_context(|| format!("reading the stored options of {}", path.display()))?;
    if create == Create::ReadOnly {
        let db = Db::open_read_only(path)
            .with_context(|| format!("opening the database at {} read-only", path.display()))?;
        return Ok((db, options));
    }
    options.create_if_missing = create == Create::IfMissing;
    options.wal_recovery = WAL_RECOVERY.get().copied().unwrap_or_default();
    let db = Db::open(path, options.clone())
        .with_context(|| format!("opening the database at {}", path.display()))?;
    Ok((db, options))
}

/// What the engine keeps in a database directory. `LOCK` alone says
/// nothing: RocksDB and LevelDB directories have one too.
const SUPERBLOCK_FILE_NAME: &str = "SUPERBLOCK";
const ENGINE_FILE_NAMES: [&str; 8] = [
    LOCK_FILE_NAME,
    CONTROL_SOCKET_NAME,
    SUPERBLOCK_FILE_NAME,
    "nodes.pages",
    "leaves.pages",
    "wal",
    turtlekv::OPTIONS_FILE_NAME,
    "OPTIONS.tmp",
];

/// `Options::store` writes `OPTIONS.tmp.<pid>.<n>` (`OPTIONS.tmp` before)
/// and renames it; a store cut short leaves it behind.
const OPTIONS_TEMP_PREFIX: &str = "OPTIONS.tmp.";

/// A database directory holds a `LOCK` and a `SUPERBLOCK` file from its
/// first open on; without them the path is not a database (and opening it
/// would make one, or leave a `wal` directory behind).
pub fn require_database(path: &Path) -> Result<()> {
    let missing = |why: &str| -> anyhow::Error {
        NoDatabase(format!("no TurtleKV database at {}: {why}", path.display())).into()
    };
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(missing("no such directory")),
        Err(e) => Err(missing(&e.to_string())),
        Ok(meta) if !meta.is_dir() => Err(missing("not a directory")),
        Ok(_) if !path.join(LOCK_FILE_NAME).exists() => Err(missing(&format!(
            "the directory has no {LOCK_FILE_NAME} file"
        ))),
        Ok(_) if !path.join(SUPERBLOCK_FILE_NAME).exists() => Err(missing(&format!(
            "the directory has no {SUPERBLOCK_FILE_NAME} file"
        ))),
        Ok(_) => Ok(()),
    }
}

/// Creating a database is fine in a new or empty directory, or where one
/// already is; anywhere else it would scatter engine files among someone
/// else's (a mistyped `turtlekv put ~ k v`).
fn refuse_foreign_directory(path: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) if path.exists() && !path.is_dir() => {
            return Err(NoDatabase(format!(
                "cannot create a database at {}: it is not a directory ({e})",
                path.display()
            ))
            .into());
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        Ok(entries) => entries,
    };
    // A database, or only the engine's own files (a creation cut short).
    let mut ours = true;
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", path.display()))?;
        let name = entry.file_name();
        if name == SUPERBLOCK_FILE_NAME {
            return Ok(());
        }
        ours &= ENGINE_FILE_NAMES.iter().any(|n| name == *n)
            || name
                .to_str()
                .is_some_and(|n| n.starts_with(OPTIONS_TEMP_PREFIX));
    }
    if ours {
        Ok(())
    } else {
        Err(NoDatabase(format!(
            "{} is a directory with other files than a TurtleKV database's; refusing to \
             create one there",
            path.display()
        ))
        .into())
    }
}

/// The engine's limits on keys and values, checked before opening so that
/// bad input is reported as such, with the user's words.
pub fn check_entry(key: &[u8], value: Option<&[u8]>) -> Result<(), String> {
    if key.is_empty() {
        return Err("keys must not be empty".to_string());
    }
    if key.len() > MAX_KEY_SIZE {
        return Err(format!(
            "a key of {} bytes is longer than the maximum of {MAX_KEY_SIZE}",
            key.len()
        ));
    }
    match value {
        Some(v) if v.len() > MAX_VALUE_SIZE => Err(format!(
            "a value of {} bytes is longer than the maximum of {MAX_VALUE_SIZE}",
            v.len()
        )),
        _ => Ok(()),
    }
}
