//! The value files of one database: appends, reads, syncs
//! (`docs/format.md`, "Value files"; `docs/durability.md`).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use super::epoch::Epoch;
use super::file::{self, HEADER_BYTES};
use super::{VALUES_DIR, ValuePointer};
use crate::io::{File, FileSystem, OpenOptions, read_exact_at};
use crate::{Error, Result};

const SUFFIX: &str = ".values";
/// Records at most this long are written with one write; longer ones
/// write their value straight from the caller's buffer, after the head.
const ONE_WRITE_MAX_BYTES: u64 = 1 << 20;

pub(super) fn file_name(id: u64) -> String {
    format!("{id:020}{SUFFIX}")
}

/// One value file, open for reads (and appends, when it is the newest).
#[derive(Debug)]
pub(super) struct ValueFile {
    pub(super) id: u64,
    pub(super) path: PathBuf,
    pub(super) file: Arc<dyn File>,
    /// The same file opened with `O_DIRECT`, for the reads of a store
    /// that bypasses the OS page cache (`Options::direct_io`).
    pub(super) direct: Option<Arc<dyn File>>,
    /// Written since the last sync.
    dirty: AtomicBool,
    /// Bytes appended (records reserved) so far; the length of a file
    /// this handle does not append to.
    pub(super) len_bytes: AtomicU64,
    /// Records reserved in it whose write has not been committed or
    /// given up yet (`PendingWrite`): garbage collection judges a file
    /// only without any, as such a record's pointer is not visible yet.
    pub(super) pending_writes: AtomicU64,
}

/// A record written to a value file whose pointer is not committed yet:
/// held by the writer until its batch is logged and applied, or fails.
#[derive(Debug)]
#[must_use = "the record counts as pending until this is dropped"]
pub(crate) struct PendingWrite(Arc<ValueFile>);

impl Drop for PendingWrite {
    fn drop(&mut self) {
        self.0.pending_writes.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The file appends go to and where the next record starts.
#[derive(Debug)]
pub(super) struct Appender {
    pub(super) file: Arc<ValueFile>,
    next_offset: u64,
}

/// What `Stats` reports of the value files.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ValueFileStats {
    pub files: u64,
    /// Bytes of all value files, headers and records.
    pub bytes: u64,
    /// Records appended since open, and their bytes.
    pub records_written: u64,
    pub bytes_written: u64,
    /// Separated values read since open.
    pub reads: u64,
}

/// The value files of one database.
#[derive(Debug)]
pub(crate) struct ValueStore {
    pub(super) fs: Arc<dyn FileSystem>,
    pub(super) dir: PathBuf,
    identity: u64,
    /// A file takes no more records once it is this long.
    file_limit_bytes: u64,
    /// Read records with `O_DIRECT` (`Options::direct_io`).
    direct_reads: bool,
    pub(super) files: RwLock<BTreeMap<u64, Arc<ValueFile>>>,
    pub(super) appender: Mutex<Option<Appender>>,
    next_file_id: AtomicU64,
    unsynced: Mutex<Vec<Arc<ValueFile>>>,
    /// Held for the whole of a `sync`.
    syncing: Mutex<()>,
    /// The epoch new readers pin (`pin`); garbage collection retires files
    /// into it (`retire`).
    pub(super) epoch: Mutex<Arc<Epoch>>,
    /// Retired files no reader can reach any more, to remove.
    pub(super) deletable: Arc<Mutex<Vec<u64>>>,
    /// Files removed while this handle was open.
    pub(super) removed: RwLock<BTreeSet<u64>>,
    /// Files replay synced (`verify_for_replay`).
    synced_at_open: Mutex<BTreeSet<u64>>,
    records_written: AtomicU64,
    bytes_written: AtomicU64,
    pub(super) reads: AtomicU64,
}

impl ValueStore {
    /// Opens the value files under `db_dir` (none yet is fine). A file
    /// whose header is cut short or zero was being created by a crash and
    /// holds no record; any other header that does not verify, or names
    /// another database, is `Error::Corruption`.
    pub fn open(
        fs: Arc<dyn FileSystem>,
        db_dir: &Path,
        identity: u64,
        file_limit_bytes: u64,
        direct_reads: bool,
    ) -> Result<Self> {
        let dir = db_dir.join(VALUES_DIR);
        let mut files = BTreeMap::new();
        for id in list_files(&*fs, &dir)? {
            let path = dir.join(file_name(id));
            let file = fs.open(&path, OpenOptions::read_only())?;
            let len_bytes = file.len()?;
            if let Some(header) = whole_header(&*file, len_bytes)? {
                file::check_header(&header, id, identity)
                    .map_err(|bad| bad.into_corruption(&path, 0))?;
            }
            let value_file = ValueFile::opened(&*fs, (id, path), file, len_bytes, direct_reads)?;
            files.insert(id, Arc::new(value_file));
        }
        let next_file_id = files.keys().next_back().map_or(1, |id| id + 1);
        let deletable = Arc::new(Mutex::new(Vec::new()));
        Ok(ValueStore {
            fs,
            dir,
            identity,
            file_limit_bytes,
            direct_reads,
            files: RwLock::new(files),
            appender: Mutex::new(None),
            next_file_id: AtomicU64::new(next_file_id),
            unsynced: Mutex::new(Vec::new()),
            syncing: Mutex::new(()),
            epoch: Mutex::new(Arc::new(Epoch::new(deletable.clone()))),
            deletable,
            removed: RwLock::new(BTreeSet::new()),
            synced_at_open: Mutex::new(BTreeSet::new()),
            records_written: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            reads: AtomicU64::new(0),
        })
    }

    /// Appends a record of `key` and `value` and returns its pointer. The
    /// record is written but not synced: `sync` makes it durable, and the
    /// WAL calls it before each of its own syncs.
    pub fn append(&self, key: &[u8], value: &[u8]) -> io::Result<(ValuePointer, PendingWrite)> {
        let value_len = value.len() as u64;
        let len = file::record_len(key.len(), value_len);
        let (target, offset, pending) = self.reserve(len)?;
        let mut head = file::record_head(key.len(), value_len);
        head.extend_from_slice(key);
        let crc = file::record_crc(target.id, offset, &[&head[4..], value]);
        head[..4].copy_from_slice(&crc.to_le_bytes());
        if len <= ONE_WRITE_MAX_BYTES {
            head.extend_from_slice(value);
            target.file.write_at(&head, offset)?;
        } else {
            target.file.write_at(&head, offset)?;
            target.file.write_at(value, offset + head.len() as u64)?;
        }
        self.note_written(&target, len);
        let pointer = ValuePointer {
            file_id: target.id,
            offset,
            value_len,
            crc,
        };
        Ok((pointer, pending))
    }

    /// Counts a record of `len` bytes written to `target`, which the next
    /// `sync` then syncs.
    pub(super) fn note_written(&self, target: &Arc<ValueFile>, len: u64) {
        if !target.dirty.swap(true, Ordering::AcqRel) {
            self.unsynced.lock().push(target.clone());
        }
        self.records_written.fetch_add(1, Ordering::Relaxed);
        self.bytes_written.fetch_add(len, Ordering::Relaxed);
    }

    /// Room for a record of `len` bytes: its file and offset. Starts a new
    /// file when there is none yet or the current one is full.
    pub(super) fn reserve(&self, len: u64) -> io::Result<(Arc<ValueFile>, u64, PendingWrite)> {
        let mut appender = self.appender.lock();
        let full = appender.as_ref().is_none_or(|a| {
            a.next_offset > HEADER_BYTES && a.next_offset + len > self.file_limit_bytes
        });
        if full {
            *appender = Some(Appender {
                file: self.create_file()?,
                next_offset: HEADER_BYTES,
            });
        }
        let a = appender.as_mut().expect("set above");
        let offset = a.next_offset;
        a.next_offset += len;
        a.file.len_bytes.store(a.next_offset, Ordering::Release);
        // Under the appender's lock: a file is never sealed with a
        // reservation in it that the count misses.
        a.file.pending_writes.fetch_add(1, Ordering::AcqRel);
        Ok((a.file.clone(), offset, PendingWrite(a.file.clone())))
    }

    /// Creates the next file, its header synced and its name durable in
    /// the directory, so that a synced record in it is found after a
    /// crash.
    fn create_file(&self) -> io::Result<Arc<ValueFile>> {
        let id = self.next_file_id.fetch_add(1, Ordering::Relaxed);
        self.fs.create_dir_all(&self.dir)?;
        let path = self.dir.join(file_name(id));
        let options = OpenOptions {
            create: true,
            create_new: true,
            write: true,
            direct: false,
        };
        let file = self.fs.open(&path, options)?;
        file.write_at(&file::encode_header(id, self.identity), 0)?;
        file.sync_data()?;
        self.fs.sync_dir(&self.dir)?;
        if let Some(parent) = self.dir.parent() {
            self.fs.sync_dir(parent)?;
        }
        let value_file =
            ValueFile::opened(&*self.fs, (id, path), file, HEADER_BYTES, self.direct_reads)?;
        let value_file = Arc::new(value_file);
        self.files.write().insert(id, value_file.clone());
        Ok(value_file)
    }

    /// Makes every record appended so far durable. Syncs run one at a
    /// time: a sync that found the list empty because another had just
    /// taken it must not return before that one's files are durable (the
    /// WAL would then make records durable whose values are not).
    pub fn sync(&self) -> io::Result<()> {
        let _one_at_a_time = self.syncing.lock();
        let files = std::mem::take(&mut *self.unsynced.lock());
        for (i, f) in files.iter().enumerate() {
            f.dirty.store(false, Ordering::Release);
            if let Err(e) = f.file.sync_data() {
                // Still unsynced: a later sync must not skip them.
                let mut unsynced = self.unsynced.lock();
                for g in &files[i..] {
                    g.dirty.store(true, Ordering::Release);
                    unsynced.push(g.clone());
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Checks the record `pointer` names without returning its value, for
    /// WAL replay, and makes its file durable (once per file and open):
    /// after a `kill -9` the record may be only in the OS's cache, and
    /// replay makes the log records it keeps durable, which must not
    /// outlive the values they point at.
    pub fn verify_for_replay(&self, key: &[u8], pointer: &ValuePointer) -> Result<()> {
        let (value_file, _, _) = self.read_record(key, pointer)?;
        if self.synced_at_open.lock().insert(value_file.id) {
            value_file.file.sync_data()?;
        }
        Ok(())
    }

    /// Value file `id`, opened now if another handle created it since
    /// this one opened (a read-only handle of a database in use).
    pub(super) fn file(&self, id: u64) -> Result<Arc<ValueFile>> {
        if let Some(f) = self.files.read().get(&id) {
            return Ok(f.clone());
        }
        if self.removed.read().contains(&id) {
            return Err(Error::Io(io::ErrorKind::NotFound.into()));
        }
        let path = self.dir.join(file_name(id));
        let file = self.fs.open(&path, OpenOptions::read_only())?;
        let mut header = vec![0u8; HEADER_BYTES as usize];
        read_exact_at(&*file, &mut header, 0)
            .map_err(|_| Error::corruption(&path, 0, "value file header cut short"))?;
        file::check_header(&header, id, self.identity)
            .map_err(|bad| bad.into_corruption(&path, 0))?;
        let len_bytes = file.len()?;
        let value_file =
            ValueFile::opened(&*self.fs, (id, path), file, len_bytes, self.direct_reads)?;
        let value_file = Arc::new(value_file);
        Ok(self.files.write().entry(id).or_insert(value_file).clone())
    }

    /// Whether a value file existed at open or was created since (one
    /// atomic load: writers ask it on every batch).
    pub fn has_held_files(&self) -> bool {
        self.next_file_id.load(Ordering::Relaxed) > 1
    }

    pub fn stats(&self) -> ValueFileStats {
        let files = self.files.read();
        ValueFileStats {
            files: files.len() as u64,
            bytes: files
                .values()
                .map(|f| f.len_bytes.load(Ordering::Acquire))
                .sum(),
            records_written: self.records_written.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            reads: self.reads.load(Ordering::Relaxed),
        }
    }
}

impl ValueFile {
    /// Value file `id` at `path`, open as `file` and `len_bytes` long,
    /// opened again for `O_DIRECT` reads when `direct_reads`.
    fn opened(
        fs: &dyn FileSystem,
        (id, path): (u64, PathBuf),
        file: Arc<dyn File>,
        len_bytes: u64,
        direct_reads: bool,
    ) -> io::Result<ValueFile> {
        let direct = match direct_reads {
            true => Some(fs.open(&path, OpenOptions::read_only().with_direct(true))?),
            false => None,
        };
        Ok(ValueFile {
            id,
            path,
            file,
            direct,
            dirty: AtomicBool::new(false),
            len_bytes: AtomicU64::new(len_bytes),
            pending_writes: AtomicU64::new(0),
        })
    }
}

/// The file's header; `None` if it is cut short or all zero: the file was
/// being created when the database stopped, so no durable pointer names it.
fn whole_header(file: &dyn File, len_bytes: u64) -> io::Result<Option<Vec<u8>>> {
    if len_bytes < HEADER_BYTES {
        return Ok(None);
    }
    let mut header = vec![0u8; HEADER_BYTES as usize];
    read_exact_at(file, &mut header, 0)?;
    Ok(Some(header).filter(|h| h.iter().any(|&b| b != 0)))
}

/// Ids of the value files in `dir`, ascending (none when it is missing).
fn list_files(fs: &dyn FileSystem, dir: &Path) -> io::Result<Vec<u64>> {
    let names = match fs.list_dir(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut ids: Vec<u64> = names
        .iter()
        .filter_map(|n| n.strip_suffix(SUFFIX))
        .filter(|stem| stem.len() == 20)
        .filter_map(|stem| stem.parse().ok())
        .collect();
    ids.sort_unstable();
    Ok(ids)
}
