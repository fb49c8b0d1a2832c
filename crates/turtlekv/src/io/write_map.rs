//! A file mapped for writing in place (`mmap(MAP_SHARED)`), for the WAL's
//! appends. A copy into the mapping lands in the kernel's page cache, as
//! `write(2)` would put it there, but without a system call per append:
//! on the load, `pwrite` of a ~170-byte record cost about 0.6 µs against
//! 0.15 µs for the copy (page faults included). The kernel writes the
//! pages back like any dirty page, `fdatasync` on the file covers them,
//! and they survive the process being killed.
//!
//! A write to a page of the mapping that the file does not back (past its
//! end, or a hole the file system cannot fill) is answered by `SIGBUS`,
//! which ends the process. Callers therefore write only where they have
//! reserved storage first (`File::allocate`).

use std::fmt::Debug;
use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Arc;

/// A shared, writable mapping of a file's first `len_bytes`.
#[derive(Debug)]
pub struct WriteMapping {
    region: Arc<Region>,
    /// Pages below this offset have been dropped from the process.
    released_to_bytes: usize,
}

/// The mapped bytes, unmapped when the last of the `WriteMapping` and
/// its `Populater`s lets go.
#[derive(Debug)]
struct Region {
    len_bytes: usize,
    memory: Memory,
}

/// Where the stores of a mapping go.
#[derive(Debug)]
enum Memory {
    /// Addresses the kernel mapped (`mmap(MAP_SHARED)`).
    Mapped(NonNull<u8>),
    /// A file system that simulates such a mapping (`FaultFs`).
    #[cfg(any(test, feature = "sim"))]
    Simulated {
        file: Arc<dyn SimulatedMapping>,
        /// Whether the mapping offers a `Populater`, and with it the
        /// WAL's reserving worker (see `FaultFs::set_mappings`).
        populater: bool,
    },
}

/// A file system's stand-in for a shared mapping of one of its files.
#[cfg(any(test, feature = "sim"))]
pub(crate) trait SimulatedMapping: Send + Sync + Debug {
    /// Stores `bytes` at `offset` of the file, as a copy into a shared
    /// mapping would: reads see them at once, and they are as durable as
    /// the file's other unsynced bytes until its next `sync_data`.
    fn store(&self, offset: u64, bytes: &[u8]);
}

// SAFETY: the region is plain memory (or a simulation, itself `Send`).
// Only the `WriteMapping` writes its bytes; a `Populater` only asks the
// kernel to fault pages in, which changes none of them.
unsafe impl Send for Region {}
// SAFETY: as above; shared access never reads or writes the bytes.
unsafe impl Sync for Region {}

/// Faults in pages of a `WriteMapping` ahead of its appends, and drops
/// the written ones behind them, from another thread
/// (`wal::reserve_ahead`): both take the kernel a while, which the
/// appending thread then does not wait for.
#[derive(Debug)]
pub(crate) struct Populater {
    region: Arc<Region>,
    /// Pages below this offset have been dropped by this handle.
    released_to_bytes: usize,
}

impl WriteMapping {
    /// Maps `len_bytes` of the open file `fd`, which must stay open (and
    /// not be truncated below what is written) while the mapping lives.
    pub(crate) fn new(fd: RawFd, len_bytes: u64) -> io::Result<WriteMapping> {
        let len_bytes = usize::try_from(len_bytes).map_err(|_| io::ErrorKind::InvalidInput)?;
        if len_bytes == 0 {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        // SAFETY: a shared mapping of an open descriptor with no address
        // hint has no preconditions; failure is checked below.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(addr.cast()).expect("mmap does not return null on success");
        Ok(WriteMapping::over(Region {
            len_bytes,
            memory: Memory::Mapped(base),
        }))
    }

    /// A mapping of `len_bytes` whose stores `file` simulates; with
    /// `populater`, it offers a `Populater` as a real one does.
    #[cfg(any(test, feature = "sim"))]
    pub(crate) fn simulated(
        file: Arc<dyn SimulatedMapping>,
        len_bytes: u64,
        populater: bool,
    ) -> io::Result<WriteMapping> {
        let len_bytes = usize::try_from(len_bytes).map_err(|_| io::ErrorKind::InvalidInput)?;
        if len_bytes == 0 {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        Ok(WriteMapping::over(Region {
            len_bytes,
            memory: Memory::Simulated { file, populater },
        }))
    }

    fn over(region: Region) -> WriteMapping {
        WriteMapping {
            region: Arc::new(region),
            released_to_bytes: 0,
        }
    }

    /// Bytes of the file the mapping covers.
    pub(crate) fn len_bytes(&self) -> u64 {
        self.region.len_bytes as u64
    }

    /// A handle that faults in pages of this mapping from another thread.
    /// `None` from a simulated mapping that was not asked for one: a
    /// worker's reservations would interleave with the writer's operations
    /// in an order that changes from run to run, and crash-point tests
    /// number those operations.
    pub(crate) fn populater(&self) -> Option<Populater> {
        match &self.region.memory {
            Memory::Mapped(_) => {}
            #[cfg(any(test, feature = "sim"))]
            Memory::Simulated { populater, .. } => {
                if !populater {
                    return None;
                }
            }
        }
        Some(Populater {
            region: self.region.clone(),
            released_to_bytes: self.released_to_bytes,
        })
    }

    /// Copies `bytes` to the file at `offset`. The range must lie within
    /// the mapping (checked) and within storage the file has (the caller's
    /// duty; see the module's comment).
    pub(crate) fn write(&mut self, offset: u64, bytes: &[u8]) {
        let start = usize::try_from(offset).expect("offset within the mapping");
        let end = start
            .checked_add(bytes.len())
            .expect("range within the mapping");
        assert!(
            end <= self.region.len_bytes,
            "write past the end of the mapping"
        );
        match &self.region.memory {
            Memory::Mapped(base) => {
                // SAFETY: `start..end` lies within the mapping (asserted
                // above), which is writable, and whose bytes nothing else in
                // this process reads or writes (`Populater`s only fault
                // pages in).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        base.as_ptr().add(start),
                        bytes.len(),
                    );
                }
            }
            #[cfg(any(test, feature = "sim"))]
            Memory::Simulated { file, .. } => file.store(offset, bytes),
        }
    }

    /// Drops the whole pages below `offset` from the process's memory, so
    /// that its resident set does not grow with every byte appended. For a
    /// shared file mapping this only unmaps them: written data stays in the
    /// kernel's page cache, dirty until written back.
    pub(crate) fn release_before(&mut self, offset: u64) {
        self.released_to_bytes = self.region.release(self.released_to_bytes, offset);
    }
}

impl Region {
    /// Drops the whole pages from `released_to_bytes` up to below
    /// `offset` from the process's memory; returns how far pages are
    /// dropped now. They must be written: a page the appends are still
    /// filling would only fault back in, its bytes kept (a shared
    /// mapping's data is the file's).
    fn release(&self, released_to_bytes: usize, offset: u64) -> usize {
        let page = page_size_bytes();
        let to = (usize::try_from(offset).unwrap_or(usize::MAX)).min(self.len_bytes) / page * page;
        if to <= released_to_bytes {
            return released_to_bytes;
        }
        match &self.memory {
            Memory::Mapped(base) => {
                // SAFETY: the range is whole pages inside the mapping, whose
                // bytes nothing in this process references; on a shared
                // mapping MADV_DONTNEED keeps the file's data.
                let rc = unsafe {
                    libc::madvise(
                        base.as_ptr().add(released_to_bytes).cast(),
                        to - released_to_bytes,
                        libc::MADV_DONTNEED,
                    )
                };
                // Only a hint for memory use: the data is safe either way.
                debug_assert_eq!(rc, 0, "madvise(MADV_DONTNEED) on our own mapping");
            }
            // A simulated mapping holds no memory of its own.
            #[cfg(any(test, feature = "sim"))]
            Memory::Simulated { .. } => {}
        }
        to
    }
}

impl Populater {
    /// Faults in the pages of `offset..offset + len_bytes`, in one system
    /// call (`MADV_POPULATE_READ`): the kernel reads them in (zeros, for
    /// reserved storage) and maps them, so that an append's first write to
    /// a page only has it made writable. Faulting them in for writing
    /// (`MADV_POPULATE_WRITE`) would save that too, but it dirties them:
    /// the zeros were then written to disk ahead of the records (up to 4
    /// MiB more per sync; write amplification 1.53 against 1.18 in YCSB
    /// B). The range must be storage the file has (reserved); a page it
    /// does not back fails the call (`EFAULT`) rather than raising
    /// `SIGBUS`. Only a hint: on a kernel without it (before Linux 5.14)
    /// the appends fault the pages in themselves.
    pub(crate) fn populate(&self, offset: u64, len_bytes: u64) {
        let page = page_size_bytes();
        let start = usize::try_from(offset).unwrap_or(usize::MAX) / page * page;
        let end = usize::try_from(offset.saturating_add(len_bytes))
            .unwrap_or(usize::MAX)
            .min(self.region.len_bytes);
        if start >= end {
            return;
        }
        match &self.region.memory {
            Memory::Mapped(base) => {
                // SAFETY: the range lies inside the mapping, which the
                // region keeps mapped; populating changes none of its bytes.
                let rc = unsafe {
                    libc::madvise(
                        base.as_ptr().add(start).cast(),
                        end - start,
                        libc::MADV_POPULATE_READ,
                    )
                };
                // A failure costs only the faults it would have saved.
                let _ = rc;
            }
            // Nothing to fault in: the simulation's stores reach the file.
            #[cfg(any(test, feature = "sim"))]
            Memory::Simulated { .. } => {}
        }
    }

    /// `WriteMapping::release_before`, for the pages below `offset`, which
    /// the appends have written.
    pub(crate) fn release_before(&mut self, offset: u64) {
        self.released_to_bytes = self.region.release(self.released_to_bytes, offset);
    }

    /// How far pages are dropped by this handle.
    pub(crate) fn released_to_bytes(&self) -> u64 {
        self.released_to_bytes as u64
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        match &self.memory {
            Memory::Mapped(base) => {
                // SAFETY: `base..base + len_bytes` is exactly the mapping
                // made in `WriteMapping::new`, and nothing refers to it once
                // the last holder of the region is dropped.
                let rc = unsafe { libc::munmap(base.as_ptr().cast(), self.len_bytes) };
                debug_assert_eq!(rc, 0, "munmap of a mapping we made");
            }
            #[cfg(any(test, feature = "sim"))]
            Memory::Simulated { .. } => {}
        }
    }
}

fn page_size_bytes() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096).max(1)
}

#[cfg(test)]
mod tests {
    use crate::io::{FileSystem, OpenOptions, RealFs};

    #[test]
    fn writes_reach_the_file_and_survive_release() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = RealFs
            .open(&path, OpenOptions::read_write_create())
            .unwrap();
        let len = 3 << 20;
        file.allocate(0, len).unwrap();
        let mut map = file.map_for_writes(len).unwrap().expect("a real file maps");
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
        let mut offset = 0;
        while offset + data.len() as u64 <= len {
            map.write(offset, &data);
            offset += data.len() as u64;
            map.release_before(offset);
        }
        drop(map);
        let mut back = vec![0u8; data.len()];
        for at in (0..offset).step_by(data.len()) {
            crate::io::read_exact_at(&*file, &mut back, at).unwrap();
            assert_eq!(back, data, "bytes at {at}");
        }
    }

    #[test]
    #[should_panic(expected = "past the end")]
    fn writes_past_the_mapping_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = RealFs
            .open(&dir.path().join("f"), OpenOptions::read_write_create())
            .unwrap();
        file.allocate(0, 8192).unwrap();
        let mut map = file.map_for_writes(8192).unwrap().unwrap();
        map.write(8190, b"abc");
    }
}
