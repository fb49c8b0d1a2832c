//! Opening a database: lock, checkpoint, WAL replay, checkpoint thread.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::checkpoint::{CheckpointTarget, Control, WorkerGuard};
use crate::db::budget::MemoryBudget;
use crate::db::inner::DbInner;
use crate::db::{Db, LOCK_FILE_NAME, LastHandle};
use crate::io::FileSystem;
use crate::memtable::new_memtable;
use crate::options::record_cache_share;
use crate::page::superblock::SUPERBLOCK_FILE_NAME;
use crate::record_cache::RecordCache;
use crate::state::State;
use crate::stats::{Counters, bump};
use crate::wal::{GroupCommit, WAL_DIR, Wal};
use crate::{Error, Options, Result};

/// Builds the checkpoint target once the directory is locked.
pub(crate) type TargetFactory<'a> =
    &'a dyn Fn(&Path, &Options, &Arc<dyn FileSystem>) -> Result<Option<Arc<dyn CheckpointTarget>>>;

/// Creates the database directory, and any missing above it, and syncs
/// the directory each was created in: without that a power cut could lose
/// the new directory's entry, and the database with it, after writes were
/// acknowledged as synced. An existing directory is left as it is.
fn create_dir_durably(fs: &dyn FileSystem, path: &Path) -> Result<()> {
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

pub(crate) fn open(
    path: &Path,
    options: Options,
    fs: Arc<dyn FileSystem>,
    make_target: TargetFactory<'_>,
) -> Result<Db> {
    options.validate()?;
    // Every file is opened by a path joined to this one, some long after
    // the open (WAL segments, page files): a relative one would follow
    // the process's working directory wherever it moves.
    let path = std::path::absolute(path)?;
    if options.create_if_missing {
        create_dir_durably(&*fs, &path)?;
    } else {
        refuse_non_database(&*fs, &path)?;
    }
    let lock = fs
        .lock(&path.join(LOCK_FILE_NAME))?
        .ok_or_else(|| Error::Locked(path.clone()))?;
    let wal_dir = path.join(WAL_DIR);
    fs.create_dir_all(&wal_dir)?;
    fs.sync_dir(&path)?;

    let target = make_target(&path, &options, &fs)?;
    let tree = target.as_ref().map(|t| t.current());
    let covered_seq = tree.as_ref().map_or(0, |t| t.covered_seq());
    // Sized for the distance in force (see `effective_checkpoint_distance`).
    let memtable_pool = target.as_ref().and_then(|t| t.mapping_pool());
    let memtable = new_memtable(
        options
            .checkpoint_distance_bytes
            .min(options.cache_capacity_bytes / 4),
        memtable_pool.clone(),
    );
    let (mut wal, replayed) = Wal::open(
        fs.clone(),
        &wal_dir,
        covered_seq,
        options.wal_segment_size_bytes,
        &mut |first_seq, ops| {
            for (seq, op) in (first_seq..).zip(ops) {
                memtable.insert(op.key.clone(), seq, op.value.clone());
            }
        },
    )?;
    let stats = Counters::default();
    let io = wal.take_io();
    bump(&stats.wal_bytes_written, io.bytes_written);
    bump(&stats.wal_syncs, io.syncs);
    bump(&stats.wal_records_replayed, replayed.records_applied);
    bump(&stats.wal_tail_bytes_dropped, replayed.tail_bytes_dropped);
    let state = State {
        active: memtable,
        frozen: Vec::new(),
        tree,
    };
    let control = Arc::new(Control::new(covered_seq));
    let inner = Arc::new(DbInner {
        path,
        state: ArcSwap::from_pointee(state),
        state_transition: Mutex::new(()),
        visible_seq: AtomicU64::new(replayed.last_seq),
        wal: Mutex::new(wal),
        commit: GroupCommit::default(),
        target: target.clone(),
        memtable_pool,
        checkpoint_io: target
            .as_ref()
            .filter(|_| options.checkpoint_io_idle)
            .and_then(|t| t.io_priority()),
        checkpoint_waiters: AtomicUsize::new(0),
        checkpoint_distance_bytes: AtomicU64::new(options.checkpoint_distance_bytes),
        write_only_checkpoint_distance_bytes: AtomicU64::new(
            options.write_only_checkpoint_distance_bytes,
        ),
        grow_memtables: AtomicBool::new(false),
        checkpoint_on_read_pressure: options.checkpoint_on_read_pressure,
        budget: MemoryBudget::new(options.cache_capacity_bytes),
        max_item_bytes: target.as_ref().map_or(usize::MAX, |t| t.max_item_bytes()),
        max_key_bytes: target
            .as_ref()
            .map_or(crate::MAX_KEY_SIZE, |t| t.max_key_bytes()),
        record_cache: RecordCache::new(record_cache_share(
            options.record_cache_capacity_bytes,
            options.cache_capacity_bytes,
        )),
        record_cache_asked_bytes: AtomicU64::new(options.record_cache_capacity_bytes),
        record_cache_auto_split: AtomicBool::new(options.record_cache_auto_split),
        split_streak: Mutex::default(),
        control: control.clone(),
        poison: OnceLock::new(),
        stats,
        _lock: lock,
    });
    inner.set_ghost_windows();
    inner.rebalance_memory(true);
    let thread = match target {
        Some(target) => {
            let inner = inner.clone();
            let thread = std::thread::Builder::new()
                .name("turtlekv-checkpoint".into())
                .spawn(move || {
                    let _panic_is_failure = crate::db::checkpoint::PanicIsFailure(&inner);
                    if let Some(io) = &inner.checkpoint_io {
                        io.join_current_thread();
                    }
                    inner.run_checkpoints(&*target)
                })?;
            Some(thread)
        }
        None => None,
    };
    let io = inner.checkpoint_io.clone();
    let worker = WorkerGuard::new(control, thread, io);
    Ok(Db {
        _last_handle: Arc::new(LastHandle::new(worker, inner.clone())),
        inner,
    })
}
