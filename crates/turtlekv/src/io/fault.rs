//! An in-memory file system that fails on command and simulates crashes.
//!
//! Each file keeps two images: what reads see now, and what would survive a
//! power failure (the state at its last `sync_data`, plus, for new files, only
//! once their directory was synced). Writes since the last sync are kept as an
//! ordered list, so a crash can drop them all, keep a random subset, or tear
//! the last one at a 512-byte boundary. Files opened with `direct` reject
//! unaligned I/O with `EINVAL`, as `O_DIRECT` does, so tests catch it. A
//! removed file whose entry was durable comes back in a crash until its
//! directory is synced, as an unlink does.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::aligned::is_direct_aligned;
use super::{File, FileSystem, LockGuard, OpenOptions};

/// Which error an injected fault raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// `EIO`.
    Eio,
    /// `ENOSPC`.
    NoSpace,
}

/// Which operations an injected fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOn {
    /// `write_at`, `set_len`, `punch_hole` and `allocate`.
    Write,
    /// `sync_data` and `sync_dir`.
    Sync,
    /// Any write or sync.
    WriteOrSync,
}

/// A planned failure: the first `after` matching operations succeed, the next
/// one fails, and with `persistent` every later one too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Operations the fault counts.
    pub on: FaultOn,
    /// Matching operations that still succeed.
    pub after: u64,
    /// Error raised.
    pub kind: FaultKind,
    /// Keep failing after the first failure (a dead disk, or a crashed process).
    pub persistent: bool,
    /// Only files whose path contains this string are affected.
    pub path_contains: Option<String>,
}

impl Fault {
    /// The process is gone after `after` writes and syncs: every later one
    /// fails with `EIO` (crash-point tests, then `FaultFs::crash`).
    pub fn crash_after(after: u64) -> Self {
        Fault {
            on: FaultOn::WriteOrSync,
            after,
            kind: FaultKind::Eio,
            persistent: true,
            path_contains: None,
        }
    }
}

/// What survives a simulated crash of unsynced writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Only synced data survives.
    DropUnsynced,
    /// Each unsynced write survives or not, chosen by a seeded coin.
    KeepRandomSubset {
        /// Seed of the coin flips.
        seed: u64,
    },
    /// Every unsynced write survives except the last, which is cut at a
    /// 512-byte boundary chosen by the seed.
    TearLastWrite {
        /// Seed of the cut position.
        seed: u64,
    },
}

#[derive(Debug, Clone)]
enum Pending {
    Write {
        op_seq: u64,
        offset: u64,
        data: Vec<u8>,
    },
    SetLen {
        len: u64,
    },
    /// Zeroes a range (a punched hole); lost or kept on a crash like a write.
    Punch {
        offset: u64,
        len: u64,
    },
}

#[derive(Debug, Default)]
struct FileData {
    current: Vec<u8>,
    durable: Vec<u8>,
    unsynced: Vec<Pending>,
    entry_durable: bool,
}

#[derive(Debug, Default)]
struct State {
    files: HashMap<PathBuf, Arc<Mutex<FileData>>>,
    dirs: HashSet<PathBuf>,
    locks: HashSet<PathBuf>,
    fault: Option<Fault>,
    fault_matches: u64,
    fault_fired: bool,
    writes: u64,
    syncs: u64,
    space_limit_bytes: Option<u64>,
    /// Every directory `sync_dir` was called on, in order.
    synced_dirs: Vec<PathBuf>,
    /// Files removed since their directory was last synced, whose entries
    /// were durable: a crash brings them back.
    removed_unsynced: HashMap<PathBuf, Arc<Mutex<FileData>>>,
}

/// The fault-injecting in-memory file system. Clones share one state.
#[derive(Debug, Clone, Default)]
pub struct FaultFs {
    state: Arc<Mutex<State>>,
}

#[derive(Debug)]
struct FaultFile {
    fs: FaultFs,
    path: PathBuf,
    data: Arc<Mutex<FileData>>,
    writable: bool,
    direct: bool,
}

/// Holds the lock of a file and of its directory, as `RealFs` does.
#[derive(Debug)]
struct FaultLock {
    fs: FaultFs,
    paths: [PathBuf; 2],
}

impl LockGuard for FaultLock {}

impl Drop for FaultLock {
    fn drop(&mut self) {
        let mut s = self.fs.state.lock();
        for path in &self.paths {
            s.locks.remove(path);
        }
    }
}

impl FaultFs {
    /// An empty file system.
    pub fn new() -> Self {
        Self::default()
    }

    /// Plans a failure; replaces any earlier plan and restarts its count.
    pub fn inject(&self, fault: Fault) {
        let mut s = self.state.lock();
        s.fault = Some(fault);
        s.fault_matches = 0;
        s.fault_fired = false;
    }

    /// Removes the planned failure.
    pub fn clear_fault(&self) {
        self.state.lock().fault = None;
    }

    /// The directories synced so far, in order (test helper: FaultFs keeps
    /// directories through a crash whether or not they were synced).
    pub fn synced_dirs(&self) -> Vec<PathBuf> {
        self.state.lock().synced_dirs.clone()
    }

    /// `true` once the planned failure has been raised.
    pub fn fault_fired(&self) -> bool {
        self.state.lock().fault_fired
    }

    /// Total size of all files beyond which writes fail with `ENOSPC`.
    pub fn set_space_limit_bytes(&self, limit: Option<u64>) {
        self.state.lock().space_limit_bytes = limit;
    }

    /// Writes and syncs performed so far.
    pub fn op_counts(&self) -> (u64, u64) {
        let s = self.state.lock();
        (s.writes, s.syncs)
    }

    /// The file system as it would be found after a power failure now.
    /// The returned one shares nothing with `self`; handles into `self`
    /// stay usable but no longer affect what the new one holds.
    pub fn crash(&self, mode: CrashMode) -> FaultFs {
        let s = self.state.lock();
        // Files a crash brings back count too: their last write may be the
        // one a tear cuts.
        let last_op = s
            .files
            .values()
            .chain(s.removed_unsynced.values())
            .flat_map(|f| {
                f.lock()
                    .unsynced
                    .iter()
                    .filter_map(|p| match p {
                        Pending::Write { op_seq, .. } => Some(*op_seq),
                        Pending::SetLen { .. } | Pending::Punch { .. } => None,
                    })
                    .collect::<Vec<_>>()
            })
            .max();
        let mut rng = SplitMix(match mode {
            CrashMode::DropUnsynced => 0,
            CrashMode::KeepRandomSubset { seed } | CrashMode::TearLastWrite { seed } => seed,
        });
        let mut files = HashMap::new();
        let mut paths: Vec<_> = s.files.keys().cloned().collect();
        paths.sort();
        // A removal not made durable is undone, unless a file whose entry
        // is durable took the name since (its directory sync made the
        // removal durable too).
        let mut removed: Vec<_> = s
            .removed_unsynced
            .keys()
            .filter(|p| !s.files.get(*p).is_some_and(|f| f.lock().entry_durable))
            .cloned()
            .collect();
        removed.sort();
        // A removed name was durable (only those are kept); the file's own
        // flag may since speak for a new name a rename gave it.
        let entries = paths
            .into_iter()
            .map(|p| (s.files[&p].clone(), p, false))
            .chain(
                removed
                    .into_iter()
                    .map(|p| (s.removed_unsynced[&p].clone(), p, true)),
            );
        for (file, path, name_durable) in entries {
            let f = file.lock();
            if !(name_durable || f.entry_durable) {
                continue;
            }
            let mut image = f.durable.clone();
            for p in &f.unsynced {
                replay_after_crash(&mut image, p, mode, last_op, &mut rng);
            }
            let data = FileData {
                current: image.clone(),
                durable: image,
                unsynced: Vec::new(),
                entry_durable: true,
            };
            files.insert(path, Arc::new(Mutex::new(data)));
        }
        let state = State {
            files,
            dirs: s.dirs.clone(),
            ..State::default()
        };
        FaultFs {
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// The file system as a process killed now (`kill -9`) leaves it: the
    /// OS keeps every write, synced or not, and may still lose the unsynced
    /// ones in a later power cut (`crash` on the returned one). Locks go
    /// with the process. Shares nothing with `self`.
    pub fn kill(&self) -> FaultFs {
        let s = self.state.lock();
        // Copies, not shared: handles the killed process left open must
        // not change what the new file system holds.
        let copy = |files: &HashMap<PathBuf, Arc<Mutex<FileData>>>| {
            files
                .iter()
                .map(|(path, f)| {
                    let f = f.lock();
                    let data = FileData {
                        current: f.current.clone(),
                        durable: f.durable.clone(),
                        unsynced: f.unsynced.clone(),
                        entry_durable: f.entry_durable,
                    };
                    (path.clone(), Arc::new(Mutex::new(data)))
                })
                .collect()
        };
        let state = State {
            files: copy(&s.files),
            dirs: s.dirs.clone(),
            writes: s.writes,
            syncs: s.syncs,
            removed_unsynced: copy(&s.removed_unsynced),
            ..State::default()
        };
        FaultFs {
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// Flips one bit of a file, as media corruption would (test helper).
    pub fn flip_bit(&self, path: &Path, bit_offset: u64) -> io::Result<()> {
        let s = self.state.lock();
        let file = s.files.get(path).ok_or(io::ErrorKind::NotFound)?;
        let mut f = file.lock();
        let byte = usize::try_from(bit_offset / 8).map_err(io::Error::other)?;
        let mask = 1u8 << (bit_offset % 8);
        if byte >= f.current.len() {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        f.current[byte] ^= mask;
        if byte < f.durable.len() {
            f.durable[byte] ^= mask;
        }
        Ok(())
    }

    /// Counts the operation and raises the planned fault if it is due.
    fn check_fault(&self, is_sync: bool, path: &Path) -> io::Result<()> {
        let mut s = self.state.lock();
        if is_sync {
            s.syncs += 1;
        } else {
            s.writes += 1;
        }
        let Some(fault) = s.fault.clone() else {
            return Ok(());
        };
        let kind_matches = match fault.on {
            FaultOn::Write => !is_sync,
            FaultOn::Sync => is_sync,
            FaultOn::WriteOrSync => true,
        };
        let path_matches = fault
            .path_contains
            .as_deref()
            .is_none_or(|needle| path.to_string_lossy().contains(needle));
        if !kind_matches || !path_matches {
            return Ok(());
        }
        if s.fault_fired && fault.persistent {
            return Err(fault_error(fault.kind));
        }
        s.fault_matches += 1;
        if s.fault_matches == fault.after + 1 {
            s.fault_fired = true;
            return Err(fault_error(fault.kind));
        }
        Ok(())
    }

    fn used_bytes(&self) -> u64 {
        let s = self.state.lock();
        s.files
            .values()
            .map(|f| f.lock().current.len() as u64)
            .sum()
    }

    fn check_space(&self, growth_bytes: u64) -> io::Result<()> {
        let limit = self.state.lock().space_limit_bytes;
        match limit {
            Some(limit) if growth_bytes > 0 && self.used_bytes() + growth_bytes > limit => {
                Err(fault_error(FaultKind::NoSpace))
            }
            _ => Ok(()),
        }
    }

    fn next_op_seq(&self) -> u64 {
        let s = self.state.lock();
        s.writes + s.syncs
    }
}

fn replay_after_crash(
    image: &mut Vec<u8>,
    pending: &Pending,
    mode: CrashMode,
    last_op: Option<u64>,
    rng: &mut SplitMix,
) {
    match (pending, mode) {
        // A length change is metadata the next `fdatasync` makes durable;
        // until then a power cut may lose it like a write.
        (Pending::SetLen { .. }, CrashMode::DropUnsynced) => {}
        (Pending::SetLen { len }, CrashMode::KeepRandomSubset { .. }) => {
            if rng.next() & 1 == 1 {
                image.resize(*len as usize, 0);
            }
        }
        (Pending::SetLen { len }, CrashMode::TearLastWrite { .. }) => {
            image.resize(*len as usize, 0)
        }
        (Pending::Punch { .. }, CrashMode::DropUnsynced) => {}
        (Pending::Punch { offset, len }, CrashMode::KeepRandomSubset { .. }) => {
            if rng.next() & 1 == 1 {
                zero_range(image, *offset, *len);
            }
        }
        (Pending::Punch { offset, len }, CrashMode::TearLastWrite { .. }) => {
            zero_range(image, *offset, *len);
        }
        (Pending::Write { .. }, CrashMode::DropUnsynced) => {}
        (Pending::Write { offset, data, .. }, CrashMode::KeepRandomSubset { .. }) => {
            if rng.next() & 1 == 1 {
                apply_write(image, *offset, data);
            }
        }
        (
            Pending::Write {
                op_seq,
                offset,
                data,
            },
            CrashMode::TearLastWrite { .. },
        ) => {
            if Some(*op_seq) != last_op {
                apply_write(image, *offset, data);
                return;
            }
            // Keep the bytes up to a 512-byte boundary of the file strictly
            // inside the write, so a torn write never looks complete.
            let first_boundary = (offset / 512 + 1) * 512;
            let end = offset + data.len() as u64;
            if first_boundary >= end {
                return;
            }
            let boundaries = (end - 1 - first_boundary) / 512 + 1;
            let cut = first_boundary + (rng.next() % boundaries) * 512;
            apply_write(image, *offset, &data[..(cut - offset) as usize]);
        }
    }
}

fn apply_write(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = offset as usize;
    let end = start + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(data);
}

/// Zeroes `len` bytes at `offset`, clipped to the image; never extends it.
fn zero_range(image: &mut [u8], offset: u64, len: u64) {
    let start = (offset as usize).min(image.len());
    let end = (offset.saturating_add(len) as usize).min(image.len());
    image[start..end].fill(0);
}

fn fault_error(kind: FaultKind) -> io::Error {
    match kind {
        FaultKind::Eio => io::Error::from_raw_os_error(libc::EIO),
        FaultKind::NoSpace => io::Error::from_raw_os_error(libc::ENOSPC),
    }
}

/// A tiny deterministic generator, so crash images depend only on the seed.
pub(crate) struct SplitMix(pub(crate) u64);

impl SplitMix {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl FileSystem for FaultFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut s = self.state.lock();
        for dir in path.ancestors() {
            s.dirs.insert(dir.to_path_buf());
        }
        Ok(())
    }

    fn open(&self, path: &Path, options: OpenOptions) -> io::Result<Arc<dyn File>> {
        let mut s = self.state.lock();
        let parent = path.parent().unwrap_or(Path::new(""));
        if !s.dirs.contains(parent) {
            return Err(io::ErrorKind::NotFound.into());
        }
        let data = match s.files.get(path) {
            Some(_) if options.create_new => return Err(io::ErrorKind::AlreadyExists.into()),
            Some(data) => data.clone(),
            None if options.create || options.create_new => {
                let data = Arc::new(Mutex::new(FileData::default()));
                s.files.insert(path.to_path_buf(), data.clone());
                data
            }
            None => return Err(io::ErrorKind::NotFound.into()),
        };
        Ok(Arc::new(FaultFile {
            fs: self.clone(),
            path: path.to_path_buf(),
            data,
            writable: options.write,
            direct: options.direct,
        }))
    }

    /// The name goes at once for readers; a crash brings the file back
    /// (as its durable image) until its directory is synced.
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut s = self.state.lock();
        let file = s.files.remove(path).ok_or(io::ErrorKind::NotFound)?;
        if file.lock().entry_durable {
            s.removed_unsynced.insert(path.to_path_buf(), file);
        }
        Ok(())
    }

    /// The new name is durable only after `sync_dir`. Until then a crash
    /// undoes the rename as it undoes a removal: the old name comes back
    /// (the same file, as its durable image), and so does a file the new
    /// name replaced.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.check_fault(false, to)?;
        let mut s = self.state.lock();
        let file = s.files.remove(from).ok_or(io::ErrorKind::NotFound)?;
        if file.lock().entry_durable {
            s.removed_unsynced.insert(from.to_path_buf(), file.clone());
        }
        if let Some(replaced) = s.files.remove(to)
            && replaced.lock().entry_durable
        {
            s.removed_unsynced.insert(to.to_path_buf(), replaced);
        }
        file.lock().entry_durable = false;
        s.files.insert(to.to_path_buf(), file);
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let s = self.state.lock();
        if !s.dirs.contains(path) {
            return Err(io::ErrorKind::NotFound.into());
        }
        let files = s.files.keys().filter(|p| p.parent() == Some(path));
        let dirs = s.dirs.iter().filter(|p| p.parent() == Some(path));
        Ok(files
            .chain(dirs)
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.check_fault(true, path)?;
        let mut s = self.state.lock();
        s.synced_dirs.push(path.to_path_buf());
        s.removed_unsynced.retain(|p, _| p.parent() != Some(path));
        for (p, f) in &s.files {
            if p.parent() == Some(path) {
                f.lock().entry_durable = true;
            }
        }
        Ok(())
    }

    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn LockGuard>>> {
        let mut s = self.state.lock();
        let dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
        let paths = [path.to_path_buf(), dir];
        if paths.iter().any(|p| s.locks.contains(p)) {
            return Ok(None);
        }
        s.locks.extend(paths.iter().cloned());
        Ok(Some(Box::new(FaultLock {
            fs: self.clone(),
            paths,
        })))
    }
}

impl FaultFile {
    fn check_writable(&self) -> io::Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(libc::EBADF))
        }
    }

    fn check_aligned(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if self.direct && !is_direct_aligned(buf, offset) {
            Err(io::Error::from_raw_os_error(libc::EINVAL))
        } else {
            Ok(())
        }
    }
}

impl File for FaultFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.check_aligned(buf, offset)?;
        let f = self.data.lock();
        let start = (offset as usize).min(f.current.len());
        let n = buf.len().min(f.current.len() - start);
        buf[..n].copy_from_slice(&f.current[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_writable()?;
        self.check_aligned(buf, offset)?;
        self.fs.check_fault(false, &self.path)?;
        let current_len = self.data.lock().current.len() as u64;
        self.fs
            .check_space((offset + buf.len() as u64).saturating_sub(current_len))?;
        let op_seq = self.fs.next_op_seq();
        let mut f = self.data.lock();
        apply_write(&mut f.current, offset, buf);
        f.unsynced.push(Pending::Write {
            op_seq,
            offset,
            data: buf.to_vec(),
        });
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.fs.check_fault(true, &self.path)?;
        let mut f = self.data.lock();
        f.durable = f.current.clone();
        f.unsynced.clear();
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.data.lock().current.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.check_writable()?;
        self.fs.check_fault(false, &self.path)?;
        let current_len = self.data.lock().current.len() as u64;
        self.fs.check_space(len.saturating_sub(current_len))?;
        let mut f = self.data.lock();
        f.current.resize(len as usize, 0);
        f.unsynced.push(Pending::SetLen { len });
        Ok(())
    }

    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_writable()?;
        self.fs.check_fault(false, &self.path)?;
        let mut f = self.data.lock();
        zero_range(&mut f.current, offset, len);
        f.unsynced.push(Pending::Punch { offset, len });
        Ok(())
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_writable()?;
        self.fs.check_fault(false, &self.path)?;
        let end = offset.saturating_add(len);
        let current_len = self.data.lock().current.len() as u64;
        self.fs.check_space(end.saturating_sub(current_len))?;
        let mut f = self.data.lock();
        if end > f.current.len() as u64 {
            f.current.resize(end as usize, 0);
            f.unsynced.push(Pending::SetLen { len: end });
        }
        Ok(())
    }

    /// Models a file system that stores only 4 KiB blocks holding a nonzero
    /// byte: written data costs its blocks, holes and zero tails nothing.
    fn allocated_bytes(&self) -> io::Result<u64> {
        let f = self.data.lock();
        let blocks = f
            .current
            .chunks(4096)
            .filter(|block| block.iter().any(|&b| b != 0))
            .count();
        Ok(blocks as u64 * 4096)
    }
}

#[cfg(test)]
#[path = "fault_tests.rs"]
mod tests;
