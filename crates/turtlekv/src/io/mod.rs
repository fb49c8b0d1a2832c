//! The file layer: every byte the engine reads or writes goes through these
//! two traits, so tests can swap the real file system for one that injects
//! faults and simulates crashes (`FaultFs`, with the `sim` feature).

mod aligned;
mod batch;
#[cfg(any(test, feature = "sim"))]
mod fault;
mod lock;
mod real;
mod ring_reads;
#[cfg(any(test, feature = "sim"))]
mod wrap_fs;
mod write_map;

use std::fmt::Debug;
use std::io;
use std::os::fd::RawFd;
use std::path::Path;
use std::sync::Arc;

pub use aligned::{AlignedBuf, DIRECT_IO_ALIGN_BYTES};
pub use batch::{BatchRead, read_exact_batch};
#[cfg(test)]
pub(crate) use fault::SplitMix;
#[cfg(any(test, feature = "sim"))]
pub use fault::{CrashMode, Fault, FaultFs, FaultKind, FaultOn, Mappings};
pub(crate) use lock::lock_waiting;
pub use real::RealFs;
pub(crate) use ring_reads::ReadRing;
#[cfg(any(test, feature = "sim"))]
pub use wrap_fs::WrapFs;
pub(crate) use write_map::Populater;
pub use write_map::WriteMapping;

/// How to open a file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Create the file when missing.
    pub create: bool,
    /// Fail when the file exists already (with `create`).
    pub create_new: bool,
    /// Open for writing as well as reading.
    pub write: bool,
    /// Bypass the OS page cache (`O_DIRECT`). Every read and write on the
    /// file must then use a buffer address, offset and length that are
    /// multiples of [`DIRECT_IO_ALIGN_BYTES`] (see [`AlignedBuf`]).
    pub direct: bool,
}

impl OpenOptions {
    /// Read-only access to an existing file.
    pub fn read_only() -> Self {
        Self::default()
    }

    /// Read-write access, creating the file when missing.
    pub fn read_write_create() -> Self {
        OpenOptions {
            create: true,
            create_new: false,
            write: true,
            direct: false,
        }
    }

    /// The same options with `O_DIRECT` on or off.
    pub fn with_direct(self, direct: bool) -> Self {
        OpenOptions { direct, ..self }
    }
}

/// A directory tree of files.
pub trait FileSystem: Send + Sync + Debug {
    /// Creates `path` and its missing parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Opens a file.
    fn open(&self, path: &Path, options: OpenOptions) -> io::Result<Arc<dyn File>>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes an empty directory (a backup cut short cleans up with it).
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
    /// Renames a file, replacing `to` if it exists; durable once the
    /// directory is synced.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Names (not paths) of the entries of a directory.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Makes the directory's entries (created, removed files) durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on `path` (creating it) and on the directory
    /// that holds it, so that removing or replacing the file does not free
    /// the lock. `Ok(None)` means that another handle holds either. The
    /// lock is held until the guard is dropped.
    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn LockGuard>>>;
}

/// An open file with positioned I/O.
pub trait File: Send + Sync + Debug {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read
    /// (fewer only at end of file).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `offset`, extending the file as needed.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every write so far durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// `true` when the file holds no bytes.
    #[cfg(any(test, feature = "sim"))]
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Truncates or extends (with zeros) to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;

    /// Releases the storage behind `len` bytes at `offset` without changing
    /// the file's length (`fallocate(FALLOC_FL_PUNCH_HOLE)`); the range then
    /// reads as zeros. Like a write, it is durable only after `sync_data`.
    /// `Unsupported` when the file system cannot; callers that punch only to
    /// save space may ignore that.
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Reserves storage for `len` bytes at `offset`, extending the file if
    /// needed (`fallocate` mode 0), so later writes there cannot hit `ENOSPC`.
    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Bytes of storage the file occupies (`st_blocks * 512`): holes cost
    /// nothing. Defaults to the length, as for a file without holes.
    fn allocated_bytes(&self) -> io::Result<u64> {
        self.len()
    }

    /// The descriptor that [`read_exact_batch`] may hand to the kernel
    /// directly (io_uring), bypassing `read_at`. `None`, the default, has
    /// the batch ask the file itself ([`File::read_batch`]).
    fn batch_fd(&self) -> Option<RawFd> {
        None
    }

    /// Reads each range of `reads` whole, for a batch ([`read_exact_batch`])
    /// of a file that gives no [`File::batch_fd`]: one outcome per range,
    /// in order, as `read_exact_batch` gives them. `None` declines: the
    /// caller then reads the whole batch another way, and what the buffers
    /// hold is unspecified. The default reads the ranges one after the
    /// other through `read_at`, so the faults a file injects there apply
    /// to batches as well.
    fn read_batch(&self, reads: &mut [RangeRead<'_>]) -> Option<Vec<io::Result<()>>> {
        Some(
            reads
                .iter_mut()
                .map(|r| read_exact_with(|buf, at| self.read_at(buf, at), r.buf, r.offset))
                .collect(),
        )
    }

    /// Maps the file's first `len_bytes` for writing in place, shared with
    /// the kernel's page cache (`mmap(MAP_SHARED)`), for the WAL's appends
    /// ([`WriteMapping`]). Only storage reserved with [`File::allocate`]
    /// may be written through it. `None`, the default, keeps every write on
    /// `write_at`.
    fn map_for_writes(&self, len_bytes: u64) -> io::Result<Option<WriteMapping>> {
        let _ = len_bytes;
        Ok(None)
    }
}

/// One range of a batched read of a single file ([`File::read_batch`]):
/// fill all of `buf` from `offset`.
#[derive(Debug)]
pub struct RangeRead<'a> {
    pub buf: &'a mut [u8],
    pub offset: u64,
}

/// Held while a [`FileSystem::lock`] is in force.
pub trait LockGuard: Send + Sync + Debug {}

/// Reads exactly `buf.len()` bytes at `offset`, or fails with `UnexpectedEof`.
pub fn read_exact_at(file: &dyn File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    read_exact_with(|buf, at| file.read_at(buf, at), buf, offset)
}

/// `read_exact_at` through any positioned read.
fn read_exact_with(
    read_at: impl Fn(&mut [u8], u64) -> io::Result<usize>,
    mut buf: &mut [u8],
    mut offset: u64,
) -> io::Result<()> {
    while !buf.is_empty() {
        let n = read_at(buf, offset)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf = &mut buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// Reads the whole file.
pub fn read_all(file: &dyn File) -> io::Result<Vec<u8>> {
    let len = usize::try_from(file.len()?).map_err(|_| io::Error::other("file too large"))?;
    let mut buf = vec![0u8; len];
    read_exact_at(file, &mut buf, 0)?;
    Ok(buf)
}
