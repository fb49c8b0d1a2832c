//! Read-only handles: a database (closed, a backup, or one another process
//! holds open) opened without its lock and without writing a byte.
//!
//! The handle runs the ordinary open (the newest checkpoint, the WAL tail
//! replayed into a MemTable) on a file layer, [`ReadOnlyFs`], that opens
//! every existing file read-only and writes nothing: the clean-up an open
//! would do (rewriting the superblock slot, punching free slots, cutting a
//! torn tail, removing covered segments) is dropped, and the files an open
//! creates (its new WAL segment) live in memory. What the handle reads is
//! what those clean-ups leave unread, so its view is the one a writable
//! open would recover. Writes are refused (`Error::ReadOnly`) through the
//! handle's poison, which every write path asks first.
//!
//! A database another process holds open keeps changing under the
//! handle: the owner frees the pages of its last checkpoint once a newer
//! one commits, and may reuse them at once. So after every read of a page
//! file or WAL segment, the file layer reads the superblock again: a
//! generation other than the one the handle opened at fails the read with
//! `Error::ChangedWhileReading`, as the bytes just read may belong to a
//! newer page (`docs/durability.md`, "Read-only handles").

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::db::Db;
use crate::db::open::open_as;
use crate::error::ChangedUnderReader;
use crate::io::{File, FileSystem, LockGuard, OpenOptions};
use crate::options_file::load_with_fs;
use crate::store::superblock::{SUPERBLOCK_FILE_NAME, read_newest};
use crate::store::{PagedTreeStore, TreeStore};
use crate::{Error, Result};

/// Opens tried before a failure is reported.
const OPEN_ATTEMPTS: usize = 4;

/// `Db::open_read_only`. A live owner's log moves under an open: a
/// rotation links a segment this open's listing predates, a record is
/// half copied while a later one is read whole, so replay may see
/// damage that is no damage. Such a failure does not repeat; corruption
/// does. So a failed open is tried again, and its error reported once
/// two attempts in a row fail alike (or the attempts run out); one whose
/// owner committed meanwhile is `ChangedWhileReading` if the last one is.
pub(crate) fn open_read_only(path: &Path, base: Arc<dyn FileSystem>) -> Result<Db> {
    let path = std::path::absolute(path)?;
    let mut previous: Option<String> = None;
    let mut attempt = 1;
    loop {
        let e = match try_open(&path, &base) {
            Ok(db) => return Ok(db),
            Err(e) => e,
        };
        let text = format!("{e:?}");
        let repeated = previous.as_deref() == Some(&text);
        let changed = matches!(e, Error::ChangedWhileReading(_));
        if attempt == OPEN_ATTEMPTS || (repeated && !changed) {
            return Err(e);
        }
        previous = Some(text);
        attempt += 1;
    }
}

/// One attempt: the stored options (page sizes from the superblock),
/// then the ordinary open on a [`ReadOnlyFs`].
fn try_open(path: &Path, base: &Arc<dyn FileSystem>) -> Result<Db> {
    let watch = Watch::at_open(&**base, path)?;
    let fs = Arc::new(ReadOnlyFs {
        base: base.clone(),
        watch: Arc::new(watch),
        overlay: Mutex::default(),
    });
    let mut options = load_with_fs(&*fs, path)?;
    options.create_if_missing = false;
    let dyn_fs: Arc<dyn FileSystem> = fs.clone();
    let opened = open_as(
        path,
        options,
        dyn_fs,
        &|path, options, fs| {
            let store = PagedTreeStore::open(fs, path, &options.store_config())?;
            Ok(Some(Arc::new(store) as Arc<dyn TreeStore>))
        },
        true,
    );
    match opened {
        // Whatever it read, it read before any commit since its open.
        Ok(db) => fs.watch.check().map(|()| db).map_err(Error::from),
        // A segment the owner trimmed, a page it reused: not corruption.
        Err(_) if fs.watch.changed() => Err(Error::ChangedWhileReading(path.to_path_buf())),
        Err(e) => Err(e),
    }
}

/// The superblock generation a read-only handle opened at, and the
/// superblock to read it from again.
#[derive(Debug)]
struct Watch {
    db: PathBuf,
    superblock: Arc<dyn File>,
    generation: u64,
}

impl Watch {
    /// Reads the newest valid superblock slot of the database at `db`.
    fn at_open(fs: &dyn FileSystem, db: &Path) -> Result<Watch> {
        let path = db.join(SUPERBLOCK_FILE_NAME);
        let superblock = fs.open(&path, OpenOptions::read_only()).map_err(|e| {
            let msg = format!("no database at {}: {e}", db.display());
            Error::Io(io::Error::new(e.kind(), msg))
        })?;
        let state = read_newest(&*superblock)?;
        let Some(newest) = state.newest else {
            return Err(Error::corruption(
                &path,
                0,
                "neither superblock slot is valid: a read-only open cannot initialise one",
            ));
        };
        Ok(Watch {
            db: db.to_path_buf(),
            superblock,
            generation: newest.generation,
        })
    }

    /// Whether a commit (or a torn read of the superblock) happened since
    /// the open: a torn slot being written reads as damage, and the other
    /// slot, still the newest valid one, is the one the handle opened at.
    fn changed(&self) -> bool {
        read_newest(&*self.superblock)
            .map(|state| state.newest.map(|slot| slot.generation) != Some(self.generation))
            .unwrap_or(true)
    }

    fn check(&self) -> io::Result<()> {
        if self.changed() {
            return Err(io::Error::other(ChangedUnderReader(self.db.clone())));
        }
        Ok(())
    }
}

/// The file layer of a read-only handle: reads go to `base`, writes go
/// nowhere, new files live in memory. Removing a file only hides it from
/// this handle.
#[derive(Debug)]
pub(crate) struct ReadOnlyFs {
    base: Arc<dyn FileSystem>,
    watch: Arc<Watch>,
    overlay: Mutex<Overlay>,
}

/// What this handle made, removed or cut, in memory only.
#[derive(Debug, Default)]
struct Overlay {
    files: HashMap<PathBuf, Arc<MemFile>>,
    dirs: HashSet<PathBuf>,
    hidden: HashSet<PathBuf>,
    /// Lengths existing files were cut to (a torn WAL tail replay cut):
    /// what lies beyond stays unread, as after a writable open.
    cuts: HashMap<PathBuf, Arc<AtomicU64>>,
    /// Files opened when their directory was listed (`list_dir`).
    listed: HashMap<PathBuf, Arc<dyn File>>,
}

impl FileSystem for ReadOnlyFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        if self.base.list_dir(path).is_err() {
            self.overlay.lock().dirs.insert(path.to_path_buf());
        }
        Ok(())
    }

    fn open(&self, path: &Path, options: OpenOptions) -> io::Result<Arc<dyn File>> {
        let mut overlay = self.overlay.lock();
        if let Some(file) = overlay.files.get(path) {
            if options.create_new {
                return Err(io::ErrorKind::AlreadyExists.into());
            }
            return Ok(file.clone());
        }
        // A file this handle creates anew is its own, in memory, even if a
        // live owner has since made one of that name (its next segment).
        if !overlay.hidden.contains(path) && !options.create_new {
            let read_only = OpenOptions::read_only().with_direct(options.direct);
            let listed = overlay.listed.get(path).cloned();
            match listed.map_or_else(|| self.base.open(path, read_only), Ok) {
                Ok(inner) => {
                    // Reading the superblock itself is how a change is seen.
                    let watched = path.file_name() != Some(SUPERBLOCK_FILE_NAME.as_ref());
                    let watch = watched.then(|| self.watch.clone());
                    let cut = overlay.cuts.entry(path.to_path_buf());
                    let cut = cut.or_insert_with(|| Arc::new(AtomicU64::new(u64::MAX)));
                    return Ok(Arc::new(ReadOnlyFile {
                        len_at_open: inner.len()?,
                        inner,
                        watch,
                        cut: cut.clone(),
                    }));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        if !(options.create || options.create_new) {
            return Err(io::ErrorKind::NotFound.into());
        }
        let file = Arc::new(MemFile::default());
        overlay.hidden.insert(path.to_path_buf());
        overlay.files.insert(path.to_path_buf(), file.clone());
        Ok(file)
    }

    /// Hides the file from this handle. One a live owner removed first
    /// (a segment its checkpoint covered) is hidden all the same.
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut overlay = self.overlay.lock();
        overlay.files.remove(path);
        overlay.hidden.insert(path.to_path_buf());
        Ok(())
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        self.overlay.lock().dirs.remove(path);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut overlay = self.overlay.lock();
        let Some(file) = overlay.files.remove(from) else {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "a read-only handle renames no file of the database",
            ));
        };
        overlay.files.insert(to.to_path_buf(), file);
        Ok(())
    }

    /// Opens each file it lists, so that a WAL segment a live owner
    /// removes between the listing and its replay (one the checkpoint the
    /// handle opened at covers, trimmed a moment later) is still read; a
    /// file removed before it could be opened is left out, as a listing a
    /// moment later would.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut overlay = self.overlay.lock();
        let mut names = match self.base.list_dir(path) {
            Ok(names) => names,
            Err(e) if e.kind() == io::ErrorKind::NotFound && overlay.dirs.contains(path) => {
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        names.retain(|name| {
            let file = path.join(name);
            if overlay.hidden.contains(&file) || overlay.listed.contains_key(&file) {
                return !overlay.hidden.contains(&file);
            }
            match self.base.open(&file, OpenOptions::read_only()) {
                Ok(handle) => {
                    overlay.listed.insert(file, handle);
                    true
                }
                Err(e) => e.kind() != io::ErrorKind::NotFound,
            }
        });
        let made = overlay.files.keys().chain(&overlay.dirs);
        for made in made.filter(|p| p.parent() == Some(path)) {
            if let Some(name) = made.file_name() {
                names.push(name.to_string_lossy().into_owned());
            }
        }
        Ok(names)
    }

    fn sync_dir(&self, _path: &Path) -> io::Result<()> {
        Ok(())
    }

    /// No lock: the owner, if any, holds it, and a reader must not create
    /// the lock file of a directory that has none.
    fn lock(&self, _path: &Path) -> io::Result<Option<Box<dyn LockGuard>>> {
        Ok(Some(Box::new(NoLock)))
    }
}

#[derive(Debug)]
struct NoLock;

impl LockGuard for NoLock {}

/// An existing file, opened read-only, as long as it was when opened
/// (or as replay cut it). Writes, syncs and punches are dropped: only an
/// open's clean-up asks for them, and it never reads back what it
/// changed (`ReadOnlyFs`).
#[derive(Debug)]
struct ReadOnlyFile {
    inner: Arc<dyn File>,
    watch: Option<Arc<Watch>>,
    /// A live owner appends to its newest WAL segment, and cuts the
    /// zeros it reserved ahead when it rotates: the handle reads the
    /// length it found, and bytes the owner cut since as the zeros they
    /// were, so that a read never ends short.
    len_at_open: u64,
    cut: Arc<AtomicU64>,
}

impl File for ReadOnlyFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let len = self.len()?;
        if offset >= len {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(len - offset).unwrap_or(usize::MAX));
        let mut n = self.inner.read_at(&mut buf[..want], offset)?;
        if n == 0 {
            buf[..want].fill(0);
            n = want;
        }
        if let Some(watch) = &self.watch {
            watch.check()?;
        }
        Ok(n)
    }

    fn write_at(&self, _buf: &[u8], _offset: u64) -> io::Result<()> {
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.len_at_open.min(self.cut.load(Ordering::Relaxed)))
    }

    /// Cuts the file for this handle only.
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.cut.fetch_min(len, Ordering::Relaxed);
        Ok(())
    }

    fn punch_hole(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }

    fn allocated_bytes(&self) -> io::Result<u64> {
        self.inner.allocated_bytes()
    }
}

/// A file the read-only handle made (its WAL segment), in memory.
#[derive(Debug, Default)]
struct MemFile(Mutex<Vec<u8>>);

impl File for MemFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let data = self.0.lock();
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(data.len());
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut data = self.0.lock();
        let start = usize::try_from(offset).map_err(io::Error::other)?;
        if data.len() < start + buf.len() {
            data.resize(start + buf.len(), 0);
        }
        data[start..start + buf.len()].copy_from_slice(buf);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.lock().len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(io::Error::other)?;
        self.0.lock().resize(len, 0);
        Ok(())
    }
}
