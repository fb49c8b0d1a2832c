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
//!
//! Files offer shared write mappings (`File::map_for_writes`), as the real
//! file system does for the WAL's appends: a store through one changes
//! what reads see at once, and marks the 4 KiB pages it touched dirty
//! until the file's next `sync_data`. A crash treats dirty pages as the
//! kernel's writeback may have left them: each dropped, kept whole, or the
//! last store torn at a 512-byte boundary, by the crash mode. A store into
//! bytes the file has no storage for (past its end, a hole, storage never
//! reserved) would raise `SIGBUS` from a real mapping; here it aborts the
//! process with a message, so no test can miss or swallow it. Batched
//! reads (`io::read_exact_batch`) go through `read_at`, so read faults and
//! crashes apply to them too.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{self, Write as _};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::aligned::is_direct_aligned;
use super::write_map::SimulatedMapping;
use super::{File, FileSystem, LockGuard, OpenOptions, RangeRead, WriteMapping};

/// The page size of simulated mappings: what a crash keeps or drops of
/// them at a time.
const PAGE_BYTES: u64 = 4096;

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
    /// `write_at`, `set_len`, `punch_hole` and `allocate`. Stores through
    /// a mapping are not operations: like memory writes, they cannot fail.
    Write,
    /// `sync_data` and `sync_dir`.
    Sync,
    /// Any write or sync.
    WriteOrSync,
    /// `read_at`, which batched reads use too. Reads are counted apart
    /// from writes and syncs (`FaultFs::op_counts` leaves them out).
    Read,
    /// The process dies ([`Fault::crash_after`]): any write, sync, or store
    /// through a mapping counts. A store cannot fail: the one the fault
    /// falls on, and while it persists every later one, is lost instead,
    /// as the process that would have made it is gone.
    Crash,
}

/// How files take the WAL's appends through `File::map_for_writes`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mappings {
    /// No mapping: every append is a `write_at`.
    Off,
    /// A simulated shared mapping that offers no populater, so the WAL's
    /// writer reserves storage itself: the order of operations is the same
    /// in every run, as crash-point tests need.
    #[default]
    Simulated,
    /// A simulated shared mapping with a populater, so the WAL runs its
    /// reserving worker, whose reservations interleave with the writer's
    /// operations as the threads happen to run.
    SimulatedWithWorker,
}

/// What an operation is, for counting and for faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Read,
    Write,
    Sync,
    Store,
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
    /// The process is gone after `after` writes, syncs and stores through
    /// mappings: every later write or sync fails with `EIO`, and every
    /// later store is lost (crash-point tests, then `FaultFs::crash`).
    pub fn crash_after(after: u64) -> Self {
        Fault {
            on: FaultOn::Crash,
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
        order: u64,
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

#[derive(Debug, Default, Clone)]
struct FileData {
    current: Vec<u8>,
    durable: Vec<u8>,
    unsynced: Vec<Pending>,
    entry_durable: bool,
    /// Byte ranges the file has storage for: written, or reserved with
    /// `allocate`, and not cut off or punched out since. Only these may be
    /// stored to through a mapping.
    backed: Extents,
    /// Pages stored to through a mapping since the last sync.
    dirty_pages: BTreeSet<u64>,
    /// The last store through a mapping since the last sync.
    last_store: Option<Store>,
    /// `current` and `durable` agree below this offset: a sync copies only
    /// from here on (a reserved WAL segment is a MiB, its appends a few
    /// hundred bytes).
    changed_from: u64,
}

/// One store through a mapping: its place in the order of writes, and its
/// range.
#[derive(Debug, Clone, Copy)]
struct Store {
    order: u64,
    offset: u64,
    len: u64,
}

/// Disjoint, sorted, non-adjacent byte ranges.
#[derive(Debug, Default, Clone)]
struct Extents(Vec<Range<u64>>);

impl Extents {
    fn add(&mut self, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        let (mut start, mut end) = (range.start, range.end);
        self.0.retain(|r| {
            let touches = r.start <= end && start <= r.end;
            if touches {
                start = start.min(r.start);
                end = end.max(r.end);
            }
            !touches
        });
        let at = self.0.partition_point(|r| r.start < start);
        self.0.insert(at, start..end);
    }

    fn remove(&mut self, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        let mut kept = Vec::with_capacity(self.0.len() + 1);
        for r in self.0.drain(..) {
            if r.end <= range.start || range.end <= r.start {
                kept.push(r);
                continue;
            }
            if r.start < range.start {
                kept.push(r.start..range.start);
            }
            if range.end < r.end {
                kept.push(range.end..r.end);
            }
        }
        self.0 = kept;
    }

    fn covers(&self, range: Range<u64>) -> bool {
        range.is_empty()
            || self
                .0
                .iter()
                .any(|r| r.start <= range.start && range.end <= r.end)
    }
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
    reads: u64,
    stores: u64,
    /// Counts writes and stores through mappings, to order them.
    order: u64,
    mappings: Mappings,
    /// Files decline to serve batched reads (`File::read_batch`).
    unbatched_reads: bool,
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

    /// Reads performed so far (`read_at` calls, batched ones included).
    pub fn read_count(&self) -> u64 {
        self.state.lock().reads
    }

    /// Stores through mappings so far, lost ones included. With writes
    /// and syncs, they are the points where [`Fault::crash_after`] can end
    /// the process.
    pub fn store_count(&self) -> u64 {
        self.state.lock().stores
    }

    /// How files answer `File::map_for_writes` from now on (mappings made
    /// before keep working). [`Mappings::Simulated`] by default, so that the
    /// WAL appends as on the real file system.
    pub fn set_mappings(&self, mappings: Mappings) {
        self.state.lock().mappings = mappings;
    }

    /// Whether files serve the ranges of a batched read
    /// (`io::read_exact_batch`) through `read_at` (`true`, the default),
    /// or decline, so that callers read them another way (a page store
    /// then reads them on its thread pool).
    pub fn set_batched_reads(&self, batched: bool) {
        self.state.lock().unbatched_reads = !batched;
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
                let f = f.lock();
                f.unsynced
                    .iter()
                    .filter_map(|p| match p {
                        Pending::Write { order, .. } => Some(*order),
                        Pending::SetLen { .. } | Pending::Punch { .. } => None,
                    })
                    .chain(f.last_store.map(|store| store.order))
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
            write_back_after_crash(&mut image, &f, mode, last_op, &mut rng);
            files.insert(path, Arc::new(Mutex::new(FileData::recovered(image))));
        }
        // The settings stay: the machine that reboots has the same disk.
        let state = State {
            files,
            dirs: s.dirs.clone(),
            mappings: s.mappings,
            unbatched_reads: s.unbatched_reads,
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
                .map(|(path, f)| (path.clone(), Arc::new(Mutex::new(f.lock().clone()))))
                .collect()
        };
        let state = State {
            files: copy(&s.files),
            dirs: s.dirs.clone(),
            writes: s.writes,
            syncs: s.syncs,
            reads: s.reads,
            stores: s.stores,
            order: s.order,
            mappings: s.mappings,
            unbatched_reads: s.unbatched_reads,
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
    fn check_fault(&self, op: Op, path: &Path) -> io::Result<()> {
        let mut s = self.state.lock();
        match op {
            Op::Read => s.reads += 1,
            Op::Write => s.writes += 1,
            Op::Sync => s.syncs += 1,
            Op::Store => s.stores += 1,
        }
        let Some(fault) = s.fault.clone() else {
            return Ok(());
        };
        let kind_matches = match fault.on {
            FaultOn::Write => op == Op::Write,
            FaultOn::Sync => op == Op::Sync,
            FaultOn::WriteOrSync => op == Op::Write || op == Op::Sync,
            FaultOn::Read => op == Op::Read,
            FaultOn::Crash => op != Op::Read,
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

    /// The place of a write or store in the order of all of them.
    fn next_order(&self) -> u64 {
        let mut s = self.state.lock();
        s.order += 1;
        s.order
    }
}

impl FileData {
    /// Notes that bytes from `offset` on may differ from the durable image.
    fn changed(&mut self, offset: u64) {
        self.changed_from = self.changed_from.min(offset);
    }

    /// A file as a crash leaves it: `image`, durable, all of it backed.
    fn recovered(image: Vec<u8>) -> FileData {
        let mut backed = Extents::default();
        backed.add(0..image.len() as u64);
        FileData {
            current: image.clone(),
            durable: image,
            entry_durable: true,
            backed,
            changed_from: u64::MAX,
            ..FileData::default()
        }
    }
}

/// Applies to `image`, the file's bytes after the crash replayed its
/// pending writes, what writeback made of the pages stored to through a
/// mapping: in `DropUnsynced` none reached the disk; in
/// `KeepRandomSubset` each page did or not, whole; in `TearLastWrite`
/// every page did, except that when the last write of all was a store, the
/// bytes of that store from a 512-byte boundary inside it on did not. A
/// page reached the disk with what it holds now, and only where the file
/// after the crash is long enough to hold it.
fn write_back_after_crash(
    image: &mut [u8],
    f: &FileData,
    mode: CrashMode,
    last_op: Option<u64>,
    rng: &mut SplitMix,
) {
    if f.dirty_pages.is_empty() {
        return;
    }
    let reach = image.len().min(f.current.len()) as u64;
    // What the last store overwrote, for a tear to restore.
    let torn = match (mode, f.last_store) {
        (CrashMode::TearLastWrite { .. }, Some(store)) if Some(store.order) == last_op => {
            let cut = tear_at(store.offset, store.len, rng).unwrap_or(store.offset);
            let (from, to) = (
                cut.min(reach) as usize,
                (store.offset + store.len).min(reach) as usize,
            );
            Some((from, image[from..to].to_vec()))
        }
        _ => None,
    };
    for &page in &f.dirty_pages {
        let keep = match mode {
            CrashMode::DropUnsynced => false,
            CrashMode::KeepRandomSubset { .. } => rng.next() & 1 == 1,
            CrashMode::TearLastWrite { .. } => true,
        };
        let (start, end) = (page * PAGE_BYTES, ((page + 1) * PAGE_BYTES).min(reach));
        if keep && start < end {
            let range = start as usize..end as usize;
            image[range.clone()].copy_from_slice(&f.current[range]);
        }
    }
    if let Some((from, bytes)) = torn {
        image[from..from + bytes.len()].copy_from_slice(&bytes);
    }
}

/// Where a torn write of `len` bytes at `offset` ends: at a 512-byte
/// boundary of the file strictly inside the write, chosen by `rng`, so a
/// torn write never looks complete; `None` when no boundary lies inside.
fn tear_at(offset: u64, len: u64, rng: &mut SplitMix) -> Option<u64> {
    let first_boundary = (offset / 512 + 1) * 512;
    let end = offset + len;
    if first_boundary >= end {
        return None;
    }
    let boundaries = (end - 1 - first_boundary) / 512 + 1;
    Some(first_boundary + (rng.next() % boundaries) * 512)
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
                order,
                offset,
                data,
            },
            CrashMode::TearLastWrite { .. },
        ) => {
            if Some(*order) != last_op {
                apply_write(image, *offset, data);
                return;
            }
            if let Some(cut) = tear_at(*offset, data.len() as u64, rng) {
                apply_write(image, *offset, &data[..(cut - offset) as usize]);
            }
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

    /// Directories are durable at once (see `docs/durability.md`), so
    /// their removal is too.
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        let mut s = self.state.lock();
        if !s.dirs.contains(path) {
            return Err(io::ErrorKind::NotFound.into());
        }
        let parent_of = |p: &Path| p.parent() == Some(path);
        if s.files.keys().any(|p| parent_of(p)) || s.dirs.iter().any(|p| parent_of(p)) {
            return Err(io::ErrorKind::DirectoryNotEmpty.into());
        }
        s.dirs.remove(path);
        Ok(())
    }

    /// The new name is durable only after `sync_dir`. Until then a crash
    /// undoes the rename as it undoes a removal: the old name comes back
    /// (the same file, as its durable image), and so does a file the new
    /// name replaced.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.check_fault(Op::Write, to)?;
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
        self.check_fault(Op::Sync, path)?;
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
        self.fs.check_fault(Op::Read, &self.path)?;
        let f = self.data.lock();
        let start = (offset as usize).min(f.current.len());
        let n = buf.len().min(f.current.len() - start);
        buf[..n].copy_from_slice(&f.current[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_writable()?;
        self.check_aligned(buf, offset)?;
        self.fs.check_fault(Op::Write, &self.path)?;
        let current_len = self.data.lock().current.len() as u64;
        self.fs
            .check_space((offset + buf.len() as u64).saturating_sub(current_len))?;
        let order = self.fs.next_order();
        let mut f = self.data.lock();
        apply_write(&mut f.current, offset, buf);
        f.changed(offset);
        f.backed.add(offset..offset + buf.len() as u64);
        f.unsynced.push(Pending::Write {
            order,
            offset,
            data: buf.to_vec(),
        });
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.fs.check_fault(Op::Sync, &self.path)?;
        let mut f = self.data.lock();
        let f = &mut *f;
        let from = usize::try_from(f.changed_from)
            .unwrap_or(usize::MAX)
            .min(f.current.len())
            .min(f.durable.len());
        f.durable.truncate(from);
        f.durable.extend_from_slice(&f.current[from..]);
        f.changed_from = u64::MAX;
        f.unsynced.clear();
        f.dirty_pages.clear();
        f.last_store = None;
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.data.lock().current.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.check_writable()?;
        self.fs.check_fault(Op::Write, &self.path)?;
        let current_len = self.data.lock().current.len() as u64;
        self.fs.check_space(len.saturating_sub(current_len))?;
        let mut f = self.data.lock();
        let old_len = f.current.len() as u64;
        f.changed(old_len.min(len));
        f.current.resize(len as usize, 0);
        // Growing adds a hole; shrinking gives the storage past `len` back.
        f.backed.remove(len..u64::MAX);
        f.unsynced.push(Pending::SetLen { len });
        Ok(())
    }

    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_writable()?;
        self.fs.check_fault(Op::Write, &self.path)?;
        let mut f = self.data.lock();
        zero_range(&mut f.current, offset, len);
        f.changed(offset);
        f.backed.remove(offset..offset.saturating_add(len));
        f.unsynced.push(Pending::Punch { offset, len });
        Ok(())
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_writable()?;
        self.fs.check_fault(Op::Write, &self.path)?;
        let end = offset.saturating_add(len);
        let current_len = self.data.lock().current.len() as u64;
        self.fs.check_space(end.saturating_sub(current_len))?;
        let mut f = self.data.lock();
        if end > f.current.len() as u64 {
            let old_len = f.current.len() as u64;
            f.changed(old_len);
            f.current.resize(end as usize, 0);
            f.unsynced.push(Pending::SetLen { len: end });
        }
        f.backed.add(offset..end);
        Ok(())
    }

    /// Models a file system that stores only 4 KiB blocks holding a nonzero
    /// byte: written data costs its blocks, holes and zero tails nothing.
    fn allocated_bytes(&self) -> io::Result<u64> {
        // Compared with a zero block (`memcmp`), not byte by byte: tests
        // call `Db::stats` in loops, and the test profile barely optimises.
        const ZEROS: [u8; 4096] = [0; 4096];
        let f = self.data.lock();
        let blocks = f
            .current
            .chunks(4096)
            .filter(|block| *block != &ZEROS[..block.len()])
            .count();
        Ok(blocks as u64 * 4096)
    }

    /// Serves the batch through `read_at`, one range after the other, so
    /// that read faults apply; or declines, when told to
    /// (`FaultFs::set_batched_reads`).
    fn read_batch(&self, reads: &mut [RangeRead<'_>]) -> Option<Vec<io::Result<()>>> {
        if self.fs.state.lock().unbatched_reads {
            return None;
        }
        Some(
            reads
                .iter_mut()
                .map(|r| super::read_exact_at(self, r.buf, r.offset))
                .collect(),
        )
    }

    fn map_for_writes(&self, len_bytes: u64) -> io::Result<Option<WriteMapping>> {
        // A shared writable mapping needs a descriptor open for writing.
        if !self.writable {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        let populater = match self.fs.state.lock().mappings {
            Mappings::Off => return Ok(None),
            Mappings::Simulated => false,
            Mappings::SimulatedWithWorker => true,
        };
        let mapped = MappedFile {
            fs: self.fs.clone(),
            path: self.path.clone(),
            data: self.data.clone(),
        };
        WriteMapping::simulated(Arc::new(mapped), len_bytes, populater).map(Some)
    }
}

/// The file behind a simulated shared mapping.
#[derive(Debug)]
struct MappedFile {
    fs: FaultFs,
    path: PathBuf,
    data: Arc<Mutex<FileData>>,
}

impl SimulatedMapping for MappedFile {
    fn store(&self, offset: u64, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if self.fs.check_fault(Op::Store, &self.path).is_err() {
            // The process died before this store (`FaultOn::Crash`).
            return;
        }
        let order = self.fs.next_order();
        let mut f = self.data.lock();
        let end = offset + bytes.len() as u64;
        if end > f.current.len() as u64 || !f.backed.covers(offset..end) {
            // A real mapping raises SIGBUS here, which ends the process: so
            // does the simulation, where no panic handler can swallow it.
            let message = format!(
                "FaultFs: a store through a shared mapping to bytes {offset}..{end} of {}, \
                 where the file ({} bytes, storage at {:?}) has none: a real mapping raises \
                 SIGBUS\n",
                self.path.display(),
                f.current.len(),
                f.backed.0,
            );
            let _ = io::stderr().write_all(message.as_bytes());
            std::process::abort();
        }
        f.current[offset as usize..end as usize].copy_from_slice(bytes);
        f.changed(offset);
        f.dirty_pages
            .extend(offset / PAGE_BYTES..=(end - 1) / PAGE_BYTES);
        f.last_store = Some(Store {
            order,
            offset,
            len: bytes.len() as u64,
        });
    }
}

#[cfg(test)]
#[path = "fault_tests.rs"]
mod tests;
