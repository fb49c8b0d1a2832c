//! Online backup: a consistent copy of the whole database (every keyspace,
//! the catalog included: they are key ranges of the one tree) as of one
//! read view, taken while reads and writes go on.
//!
//! The read view pins a tree version and the MemTables above it. The
//! pinned version's pages are copied, verified and resealed under a new
//! identity (`page::copy`); the MemTables' newest versions at the view's
//! sequence number become the backup's log; the superblock is written
//! last (`store::backup`), so a backup cut short by an error or a crash
//! holds no superblock and every open refuses it. Writers are never
//! stopped: taking the view is one atomic load, and the pin only delays
//! the reuse of the pages it reaches. `docs/durability.md`, "Backups",
//! says what is promised and why it holds.

use std::collections::BTreeMap;
use std::io;
use std::ops::Bound;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::batch::BatchOp;
use crate::db::control::request_backup;
use crate::db::inner::DbInner;
use crate::db::open::{create_dir_durably, refuse_nested};
use crate::db::{Db, LOCK_FILE_NAME};
use crate::io::{FileSystem, OpenOptions, lock_waiting};
use crate::memtable::Direction;
use crate::memtable::merge_ranges;
use crate::store::ReadView;
use crate::store::backup::{BackupLog, commit_backup};
use crate::store::superblock::Identity;
use crate::util::identity::{checksum_seed, new_database_id};
use crate::values::{VALUES_DIR, Value};
use crate::wal::{LogBinding, WAL_DIR, Wal, WalPosition};
use crate::{Error, Options, Result, WriteBatch};

/// What [`Db::backup`](crate::Db::backup) copied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupReport {
    /// The sequence number the backup holds the database at: every write
    /// numbered at or below it, and none above.
    pub sequence: u64,
    /// Tree pages copied (node and leaf).
    pub pages: u64,
    /// Bytes of those pages written into the backup.
    pub page_bytes: u64,
    /// Keys logged into the backup's WAL from the MemTables (newest
    /// versions and deletions the tree does not hold yet).
    pub log_entries: u64,
    /// Value files copied, and their bytes.
    pub value_files: u64,
    pub value_file_bytes: u64,
}

/// Segment size of a backup's log: it holds at most the MemTables.
const BACKUP_SEGMENT_BYTES: u64 = 64 << 20;
/// Bytes of keys and values per logged batch.
const BATCH_BYTES: usize = 4 << 20;
/// Keys read per MemTable scan call.
const SCAN_KEYS: usize = 1024;

/// `Db::backup`: checks `dest`, then writes the backup into it; an error
/// after the check removes what was written, and a crash leaves no
/// superblock.
pub(crate) fn backup(inner: &DbInner, dest: &Path) -> Result<BackupReport> {
    if inner.poison.is_read_only() {
        // Its file layer writes nothing, the backup's files included.
        return Err(Error::ReadOnly(inner.path.clone()));
    }
    let fs = &inner.fs;
    let target = check_target(&**fs, &inner.path, dest)?;
    create_dir_durably(&**fs, &target.path)?;
    let lock = lock_waiting(&**fs, &target.path.join(LOCK_FILE_NAME))?
        .ok_or_else(|| refuse(&target.path, "another handle holds it"))?;
    let written = write_backup(inner, &target.path);
    if written.is_err() {
        clean_up(&**fs, &target);
    }
    drop(lock);
    written
}

/// `Db::backup_at`: a backup by this process when no handle holds the
/// database, else by its owner, asked over the control socket.
pub(crate) fn backup_at(path: &Path, dest: &Path) -> Result<BackupReport> {
    let mut options = Options::load(path)?;
    options.create_if_missing = false;
    match Db::open(path, options) {
        Ok(db) => {
            let report = db.backup(dest)?;
            db.close()?;
            Ok(report)
        }
        Err(Error::Locked(_)) => request_backup(path, dest),
        Err(e) => Err(e),
    }
}

/// A destination that passed `check_target`.
struct Target {
    /// Absolute, without `.` or `..`.
    path: PathBuf,
    /// It existed (as an empty directory) before the backup.
    existed: bool,
}

fn refuse(dest: &Path, reason: impl Into<String>) -> Error {
    Error::BackupTarget {
        dest: dest.to_path_buf(),
        reason: reason.into(),
    }
}

/// Refuses, before anything is written, a destination that is not a
/// missing path or an empty directory, one inside the database or holding
/// it, and one inside another database.
fn check_target(fs: &dyn FileSystem, source: &Path, dest: &Path) -> Result<Target> {
    let path = normalize(&std::path::absolute(dest)?);
    let (real_dest, real_source) = (resolve(&path), resolve(source));
    if real_dest.starts_with(&real_source) {
        return Err(refuse(dest, "it lies inside the database being backed up"));
    }
    if real_source.starts_with(&real_dest) {
        return Err(refuse(dest, "the database being backed up lies inside it"));
    }
    let existed = match fs.list_dir(&path) {
        Ok(names) if !names.is_empty() => {
            return Err(refuse(dest, "it exists and is not an empty directory"));
        }
        Ok(_) => true,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            if fs.open(&path, OpenOptions::read_only()).is_ok() {
                return Err(refuse(dest, "it exists and is not a directory"));
            }
            false
        }
        Err(e) => return Err(Error::Io(e)),
    };
    refuse_nested(fs, &path).map_err(|e| match e {
        Error::NestedDatabase { outer, .. } => refuse(
            dest,
            format!("it lies inside the database at {}", outer.display()),
        ),
        e => e,
    })?;
    Ok(Target { path, existed })
}

/// `path` without `.` and with each `..` taken back, as the kernel
/// would read it if no component were a symbolic link.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `path` with its longest existing ancestor's symbolic links resolved,
/// so that a link cannot hide a destination inside the database. A path
/// the real file system does not hold (a simulated one's) stays as it is.
fn resolve(path: &Path) -> PathBuf {
    for ancestor in path.ancestors() {
        if let Ok(real) = std::fs::canonicalize(ancestor) {
            let rest = path.strip_prefix(ancestor).unwrap_or(Path::new(""));
            return real.join(rest);
        }
    }
    path.to_path_buf()
}

/// The backup proper, into the locked, empty `dest`.
fn write_backup(inner: &DbInner, dest: &Path) -> Result<BackupReport> {
    let fs = &inner.fs;
    let view = inner.versions.read_view();
    let no_pages = || Error::Io(io::Error::new(io::ErrorKind::Unsupported, "no page store"));
    let tree = view.state.tree.clone().ok_or_else(no_pages)?;
    let keyspaces = inner.keyspaces.tagged;
    let id = new_database_id()?;
    let copied = tree
        .copy_pages(&**fs, dest, checksum_seed(id))?
        .ok_or_else(no_pages)?;
    let (replay_from, log_entries) = write_log(fs, &view, dest, id, copied.covered_seq)?;
    // After the view was taken: every record it points at is in the files.
    let values = inner.values.copy_for_backup(&**fs, dest, id)?;
    let log = BackupLog {
        identity: Identity {
            id,
            upgraded: false,
            keyspaces,
        },
        replay_from,
    };
    commit_backup(&**fs, dest, &copied, &log)?;
    Ok(BackupReport {
        sequence: view.seq,
        pages: copied.pages.pages,
        page_bytes: copied.pages.bytes,
        log_entries,
        value_files: values.files,
        value_file_bytes: values.bytes,
    })
}

/// Writes the backup's log: one new segment (more if it fills) holding
/// the MemTables' newest versions at the view's sequence number, numbered
/// on from the copied tree's `covered_seq`, synced and sealed. Returns
/// where it starts and how many entries it holds.
fn write_log(
    fs: &Arc<dyn FileSystem>,
    view: &ReadView,
    dest: &Path,
    id: u64,
    covered_seq: u64,
) -> Result<(WalPosition, u64)> {
    let dir = dest.join(WAL_DIR);
    fs.create_dir_all(&dir)?;
    fs.sync_dir(dest)?;
    let binding = LogBinding::new(id);
    let (mut wal, _) = Wal::open(
        fs.clone(),
        &dir,
        covered_seq,
        &binding,
        BACKUP_SEGMENT_BYTES,
        &mut |_, _| Ok(()),
    )?;
    let start = wal.segment_start();
    // The range deletions first: they hide what the backup's tree holds
    // in their ranges, and every version the MemTables hold that they do
    // not hide is written after them.
    let ranges = visible_range_deletions(view);
    let delta = memtable_delta(view);
    let entries = (delta.len() + ranges.len()) as u64;
    let mut batch = WriteBatch::new();
    let mut batch_bytes = 0;
    for (start, end) in ranges {
        batch_bytes += start.len() + end.len();
        batch.ops.push(BatchOp::stored_range(start, end));
    }
    for (key, value) in &delta {
        batch.ops.push(BatchOp::stored(key.clone(), value.clone()));
        batch_bytes += key.len() + value.as_ref().map_or(0, Value::stored_len);
        if batch_bytes >= BATCH_BYTES {
            wal.append_group(std::iter::once(&batch), false)?;
            batch = WriteBatch::new();
            batch_bytes = 0;
        }
    }
    if !batch.is_empty() {
        wal.append_group(std::iter::once(&batch), false)?;
    }
    wal.seal()?;
    Ok((start, entries))
}

/// The union of the range deletions the view sees (numbered at or below
/// its sequence number), as disjoint stored-key ranges in key order.
fn visible_range_deletions(view: &ReadView) -> Vec<(Bytes, Bytes)> {
    let tombstones: Vec<_> = view
        .state
        .memtables()
        .flat_map(|m| m.range_tombstones().all())
        .filter(|t| t.seq <= view.seq)
        .collect();
    merge_ranges(tombstones)
}

/// Every key the view's MemTables hold, with its newest version at the
/// view's sequence number (`None`: deleted, by a tombstone or a range
/// deletion), in key order: what the view holds above its tree.
fn memtable_delta(view: &ReadView) -> BTreeMap<Bytes, Option<Value>> {
    let mut delta = BTreeMap::new();
    let mut out = Vec::with_capacity(SCAN_KEYS);
    // Newest MemTable first: a key's first version found wins.
    for memtable in view.state.memtables() {
        let mut after: Option<Bytes> = None;
        loop {
            out.clear();
            let lower = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            memtable.scan(
                lower,
                Bound::Unbounded,
                view.seq,
                Direction::Forward,
                SCAN_KEYS,
                &mut out,
            );
            let full = out.len() == SCAN_KEYS;
            after = out.last().map(|(key, _)| key.clone());
            for (key, _) in out.drain(..) {
                if let std::collections::btree_map::Entry::Vacant(entry) = delta.entry(key) {
                    // The newest version across the MemTables, with range
                    // deletions applied (`State::memtable_get`).
                    let value = view.state.memtable_get(entry.key(), view.seq);
                    entry.insert(value.flatten());
                }
            }
            if !full {
                break;
            }
        }
    }
    delta
}

/// Removes what a failed backup wrote: every file in the destination and
/// its log directory (it was empty, and locked since), and the directory
/// itself if the backup created it. Best effort: the first error stops
/// nothing, as the backup's own error is the one to report; what is left
/// holds no superblock, so no open takes it for a database.
fn clean_up(fs: &dyn FileSystem, target: &Target) {
    let wal = target.path.join(WAL_DIR);
    let values = target.path.join(VALUES_DIR);
    for dir in [&wal, &values, &target.path] {
        for name in fs.list_dir(dir).unwrap_or_default() {
            let _ = fs.remove_file(&dir.join(name));
        }
    }
    let _ = fs.remove_dir(&wal);
    let _ = fs.remove_dir(&values);
    if !target.existed {
        let _ = fs.remove_dir(&target.path);
    }
    if let Some(parent) = target.path.parent() {
        let _ = fs.sync_dir(parent);
    }
}
