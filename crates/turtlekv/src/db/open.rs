//! Opening a database: lock, checkpoint, WAL replay, checkpoint thread.

use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::batch::BatchOp;
use crate::checkpoint::{Checkpoints, WorkerGuard};
use crate::db::inner::{DbInner, EntryLimits};
use crate::db::keyspace::Catalog;
use crate::db::{Db, LOCK_FILE_NAME, LastHandle};
use crate::error::DecodeError;
use crate::error::Poison;
use crate::io::{FileSystem, OpenOptions, lock_waiting, read_exact_at};
use crate::memtable::new_memtable;
use crate::policy::MemoryPolicy;
use crate::record_cache::RecordCache;
use crate::stats::{Counters, bump};
use crate::store::superblock::{MAGIC as SUPERBLOCK_MAGIC, SUPERBLOCK_FILE_NAME};
use crate::store::{State, TreeStore, VersionSet};
use crate::util::identity::new_database_id;
use crate::values::{Value, ValuePointer, ValueStore};
use crate::wal::{
    BeforeSync, GroupCommit, LogBinding, Refused, WAL_DIR, Wal, falls_short, log_identity,
};
use crate::{Error, Options, Result};

/// Builds the tree store once the directory is locked.
pub(crate) type StoreFactory<'a> =
    &'a dyn Fn(&Path, &Options, &Arc<dyn FileSystem>) -> Result<Option<Arc<dyn TreeStore>>>;

/// Creates the database directory, and any missing above it, and syncs
/// the directory each was created in: without that a power cut could lose
/// the new directory's entry, and the database with it, after writes were
/// acknowledged as synced. An existing directory is left as it is.
pub(super) fn create_dir_durably(fs: &dyn FileSystem, path: &Path) -> Result<()> {
    let exists = |dir: &Path| dir.as_os_str().is_empty() || fs.list_dir(dir).is_ok();
    let missing: Vec<&Path> = path.ancestors().take_while(|dir| !exists(dir)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    fs.create_dir_all(path)?;
    for dir in missing.iter().rev() {
        let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
        fs.sync_dir(parent.unwrap_or(Path::new(".")))?;
    }
    Ok(())
}

/// Without `create_if_missing`, a directory that holds neither a
/// superblock nor a log is no database: refused before the lock file and
/// the log directory would be made in it (a mistyped path, another
/// engine's directory). One with only a log is an interrupted creation,
/// which the page store then reports.
fn refuse_non_database(fs: &dyn FileSystem, path: &Path) -> Result<()> {
    let names = fs.list_dir(path).map_err(|e| {
        let msg = format!("no database at {}: {e}", path.display());
        Error::Io(io::Error::new(e.kind(), msg))
    })?;
    if names
        .iter()
        .any(|n| n == SUPERBLOCK_FILE_NAME || n == WAL_DIR)
    {
        return Ok(());
    }
    Err(Error::Io(io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "no database at {}: it holds no {SUPERBLOCK_FILE_NAME}",
            path.display()
        ),
    )))
}

/// Refuses to create a database inside another one's directory (its
/// `wal/` included): a mistyped path there would scatter engine files
/// among the outer database's, which its own opens and checks then trip
/// over. Only a directory without a superblock of its own is a creation;
/// every proper ancestor up to the root is looked at for a TurtleKV
/// superblock (its magic, not only its name).
pub(super) fn refuse_nested(fs: &dyn FileSystem, path: &Path) -> Result<()> {
    let holds_superblock = |dir: &Path| {
        let Ok(file) = fs.open(&dir.join(SUPERBLOCK_FILE_NAME), OpenOptions::read_only()) else {
            return false;
        };
        let mut magic = [0u8; 8];
        read_exact_at(&*file, &mut magic, 0).is_ok() && &magic == SUPERBLOCK_MAGIC
    };
    if holds_superblock(path) {
        return Ok(());
    }
    match path.ancestors().skip(1).find(|dir| holds_superblock(dir)) {
        Some(outer) => Err(Error::NestedDatabase {
            path: path.to_path_buf(),
            outer: outer.to_path_buf(),
        }),
        None => Ok(()),
    }
}

pub(crate) fn open(
    path: &Path,
    options: Options,
    fs: Arc<dyn FileSystem>,
    make_store: StoreFactory<'_>,
) -> Result<Db> {
    open_as(path, options, fs, make_store, false)
}

/// `open`, or with `read_only` a read-only handle's (`db::read_only`):
/// on a file layer that writes nothing, it records no WAL floor, starts
/// no checkpoint thread and refuses every write from the start.
pub(super) fn open_as(
    path: &Path,
    options: Options,
    fs: Arc<dyn FileSystem>,
    make_store: StoreFactory<'_>,
    read_only: bool,
) -> Result<Db> {
    options.validate()?;
    // Every file is opened by a path joined to this one, some long after
    // the open (WAL segments, page files): a relative one would follow
    // the process's working directory wherever it moves.
    let path = std::path::absolute(path)?;
    if options.create_if_missing {
        refuse_nested(&*fs, &path)?;
        create_dir_durably(&*fs, &path)?;
    } else {
        refuse_non_database(&*fs, &path)?;
    }
    let lock = lock_waiting(&*fs, &path.join(LOCK_FILE_NAME))?
        .ok_or_else(|| Error::Locked(path.clone()))?;
    let wal_dir = path.join(WAL_DIR);
    fs.create_dir_all(&wal_dir)?;
    fs.sync_dir(&path)?;

    let trees = make_store(&path, &options, &fs)?;
    let tree = trees.as_ref().map(|t| t.current());
    let covered_seq = tree.as_ref().map_or(0, |t| t.covered_seq());
    // Sized for the distance in force (see `effective_checkpoint_distance`).
    let memtable = new_memtable(
        options
            .checkpoint_distance_bytes
            .min(options.cache_capacity_bytes / 4),
        trees.as_ref().and_then(|t| t.mapping_pool()),
    );
    let binding = match trees.as_ref().and_then(|t| t.identity()) {
        Some((identity, floor)) => LogBinding {
            database_id: identity.id,
            legacy_segments: identity.upgraded,
            floor,
            recovery: options.wal_recovery,
        },
        // A store that keeps no identity: the log's own, or a new one.
        None => LogBinding {
            database_id: match log_identity(&*fs, &wal_dir)? {
                Some(id) => id,
                None => new_database_id()?,
            },
            legacy_segments: true,
            floor: 0,
            recovery: options.wal_recovery,
        },
    };
    let damage = trees.as_ref().and_then(|t| t.open_damage());
    let values = Arc::new(ValueStore::open(
        fs.clone(),
        &path,
        binding.database_id,
        options.value_file_size_bytes,
        options.direct_io,
    )?);
    let (mut wal, replayed) = Wal::open(
        fs.clone(),
        &wal_dir,
        covered_seq,
        &binding,
        options.wal_segment_size_bytes,
        &mut |first_seq, ops| {
            check_value_pointers(&values, ops)?;
            for (seq, op) in (first_seq..).zip(ops) {
                match &op.end {
                    Some(end) => memtable.delete_range(op.key.clone(), end.clone(), seq),
                    None => memtable.insert(op.key.clone(), seq, op.value.clone()),
                }
            }
            Ok(())
        },
    )
    .map_err(|e| match &damage {
        // The WAL does not reach back to the valid slot's checkpoint: the
        // damaged slot held a durable commit, which is what to report.
        Some(damage) if falls_short(&e) => damage.with_wal_error(&e),
        _ => e,
    })?;
    let sync_values = values.clone();
    wal.set_before_sync(BeforeSync(Arc::new(move || sync_values.sync())));
    if let Some(trees) = trees.as_ref().filter(|_| !read_only) {
        // The new segment's header is durable: from now on it, or a later
        // one, must exist (`docs/format.md`, "Superblock", "The WAL floor").
        trees.record_wal_floor(wal.current_segment_id())?;
    }
    let stats = Counters::default();
    let io = wal.take_io();
    bump(&stats.wal_bytes_written, io.bytes_written);
    bump(&stats.wal_syncs, io.syncs);
    bump(&stats.wal_records_replayed, replayed.records_applied);
    bump(&stats.wal_tail_bytes_dropped, replayed.tail_bytes_dropped);
    bump(&stats.wal_missing_segments, replayed.missing_segments);
    bump(
        &stats.wal_recovery_bytes_dropped,
        replayed.recovery_bytes_dropped,
    );
    bump(&stats.superblock_slots_damaged, u64::from(damage.is_some()));
    let state = State {
        active: memtable,
        frozen: Vec::new(),
        tree,
    };
    let memory = options.memory_config();
    // A database an earlier build created stores bare keys; a store that
    // keeps no identity is a test's, always new.
    let tagged = trees
        .as_ref()
        .and_then(|t| t.identity())
        .is_none_or(|(identity, _)| identity.keyspaces);
    let poison = poison(read_only, &path);
    let inner = Arc::new(DbInner {
        keyspaces: Catalog::new(tagged),
        path,
        fs,
        limits: EntryLimits::of(trees.as_ref()),
        versions: VersionSet::new(state, replayed.last_seq, wal, trees, values.clone()),
        commit: GroupCommit::default(),
        checkpoints: Checkpoints::new(covered_seq, &options.checkpoint_config())?,
        memory: MemoryPolicy::new(&memory),
        record_cache: RecordCache::new(MemoryPolicy::initial_record_cache_bytes(&memory)),
        values,
        value_separation_threshold_bytes: options.value_separation_threshold_bytes,
        value_file_min_live_percent: options.value_file_min_live_percent,
        value_gc: Default::default(),
        value_garbage: Default::default(),
        poison,
        control: Default::default(),
        stats,
        _lock: lock,
    });
    inner
        .memory
        .set_ghost_windows(&inner.versions, &inner.record_cache);
    inner.rebalance_memory(true);
    let thread = match inner.versions.trees() {
        Some(_) if !read_only => {
            let inner = inner.clone();
            let thread = std::thread::Builder::new()
                .name("turtlekv-checkpoint".into())
                .spawn(move || inner.run_checkpoints())?;
            Some(thread)
        }
        _ => None,
    };
    let io = inner.checkpoints.idle_io().cloned();
    let worker = WorkerGuard::new(inner.checkpoints.control.clone(), thread, io);
    let db = Db {
        _last_handle: Arc::new(LastHandle::new(worker, inner.clone())),
        inner,
    };
    // A damaged page under the catalog fails the keyspace calls, not the
    // open: the default keyspace stays readable, and `Db::check` reports it.
    drop(db.inner.keyspaces.load(&db.inner));
    Ok(db)
}

/// A handle's poison, refusing every write from the start when it is
/// read-only.
fn poison(read_only: bool, path: &Path) -> Poison {
    let poison = Poison::default();
    if read_only {
        poison.set_read_only(path.to_path_buf());
    }
    poison
}

/// Refuses a replayed record whose value pointers do not name whole value
/// records: their values were not durable when the log's bytes were (a
/// torn tail), unless a later record proves otherwise (`wal::Refused`).
fn check_value_pointers(values: &ValueStore, ops: &[BatchOp]) -> std::result::Result<(), Refused> {
    for op in ops {
        let Some(Value::Pointer(encoded)) = &op.value else {
            continue;
        };
        let pointer = ValuePointer::decode(encoded).map_err(Refused::NotWhole)?;
        match values.verify_for_replay(&op.key, &pointer) {
            Ok(()) => {}
            Err(Error::Corruption { reason, .. }) => {
                return Err(Refused::NotWhole(DecodeError::new(
                    0,
                    format!("the value it points at is not whole: {reason}"),
                )));
            }
            Err(e) => return Err(Refused::Failed(e)),
        }
    }
    Ok(())
}
