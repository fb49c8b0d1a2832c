//! The operating system's file system.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

use super::{File, FileSystem, LockGuard, OpenOptions};

/// Files on the local file system, with `fdatasync` for durability and
/// `flock` for the database lock.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealFs;

#[derive(Debug)]
struct RealFile(fs::File);

/// The two locks of one database: on the lock file and on the directory
/// that holds it.
#[derive(Debug)]
struct FlockGuard(
    #[expect(
        dead_code,
        reason = "held only so that the flocks live as long as the guard"
    )]
    [fs::File; 2],
);

impl LockGuard for FlockGuard {}

impl FileSystem for RealFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::create_dir_all(path)
    }

    fn open(&self, path: &Path, options: OpenOptions) -> io::Result<Arc<dyn File>> {
        let direct = if options.direct { libc::O_DIRECT } else { 0 };
        let file = fs::OpenOptions::new()
            .read(true)
            .write(options.write)
            .create(options.create && !options.create_new)
            .create_new(options.create_new)
            .custom_flags(libc::O_CLOEXEC | direct)
            .open(path)?;
        Ok(Arc::new(RealFile(file)))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        fs::File::open(path)?.sync_all()
    }

    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn LockGuard>>> {
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        if !try_flock(&file)? {
            return Ok(None);
        }
        // The file alone can be removed or replaced while held, and the
        // next open would lock the new one: the directory cannot be, while
        // it holds the database. The file's lock comes first, so a build
        // that locks only the file still excludes this one.
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
        let dir = fs::File::open(dir.unwrap_or(Path::new(".")))?;
        if !try_flock(&dir)? {
            return Ok(None);
        }
        Ok(Some(Box::new(FlockGuard([file, dir]))))
    }
}

impl File for RealFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        loop {
            match self.0.read_at(buf, offset) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => return other,
            }
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        self.fallocate(
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset,
            len,
        )
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.fallocate(0, offset, len)
    }

    fn allocated_bytes(&self) -> io::Result<u64> {
        use std::os::unix::fs::MetadataExt as _;
        // `st_blocks` counts 512-byte units whatever the file system's block size.
        Ok(self.0.metadata()?.blocks() * 512)
    }

    fn batch_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.0.as_raw_fd())
    }

    fn map_for_writes(&self, len_bytes: u64) -> io::Result<Option<crate::io::WriteMapping>> {
        if !mapped_writes_cannot_need_space(self.0.as_raw_fd()) {
            return Ok(None);
        }
        crate::io::WriteMapping::new(self.0.as_raw_fd(), len_bytes).map(Some)
    }
}

/// Takes an exclusive `flock` on `file` without waiting; `false` when
/// another open file description holds one. `flock` locks belong to the
/// open file description, so a second open in the same process conflicts
/// too (unlike `fcntl` locks).
fn try_flock(file: &fs::File) -> io::Result<bool> {
    // SAFETY: the descriptor is valid for the duration of the call.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}

/// File systems on which a store into reserved (`fallocate`d) storage of
/// a shared mapping needs no new space: ext2/3/4, XFS and tmpfs. A store
/// to a page made clean by a sync faults, and the file system makes it
/// writable again; a copy-on-write one (btrfs, ZFS, bcachefs, f2fs) may
/// need a new block for that, and on a full disk the process gets
/// `SIGBUS` where `write(2)` would have returned an error the WAL can
/// report. Elsewhere the WAL appends with `write(2)`.
fn mapped_writes_cannot_need_space(fd: RawFd) -> bool {
    const EXT4_SUPER_MAGIC: u32 = 0xEF53;
    const XFS_SUPER_MAGIC: u32 = 0x5846_5342;
    const TMPFS_MAGIC: u32 = 0x0102_1994;
    let mut stat = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `fstatfs` fills the buffer on success, and the descriptor is
    // valid for the duration of the call.
    if unsafe { libc::fstatfs(fd, stat.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: initialised by the successful call above.
    let magic = unsafe { stat.assume_init() }.f_type as u32;
    matches!(magic, EXT4_SUPER_MAGIC | XFS_SUPER_MAGIC | TMPFS_MAGIC)
}

impl RealFile {
    fn fallocate(&self, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
        let to_off = |v: u64| libc::off_t::try_from(v).map_err(|_| io::ErrorKind::InvalidInput);
        let (offset, len) = (to_off(offset)?, to_off(len)?);
        if len == 0 {
            return Ok(());
        }
        loop {
            // SAFETY: the descriptor is valid for the duration of the call.
            let rc = unsafe { libc::fallocate(self.0.as_raw_fd(), mode, offset, len) };
            if rc == 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EOPNOTSUPP) => return Err(io::ErrorKind::Unsupported.into()),
                _ => return Err(err),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::AlignedBuf;

    #[test]
    fn punched_holes_read_as_zeros_and_free_storage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = RealFs
            .open(&path, OpenOptions::read_write_create())
            .unwrap();
        f.write_at(&vec![9u8; 1 << 20], 0).unwrap();
        f.sync_data().unwrap();
        let before = f.allocated_bytes().unwrap();
        assert!(before >= 1 << 20, "{before}");
        match f.punch_hole(4096, (1 << 20) - 8192) {
            Err(e) if e.kind() == io::ErrorKind::Unsupported => return,
            other => other.unwrap(),
        }
        assert_eq!(f.len().unwrap(), 1 << 20);
        let after = f.allocated_bytes().unwrap();
        assert!(after <= before - (1 << 20) + 16384, "{before} -> {after}");
        let all = crate::io::read_all(&*f).unwrap();
        assert!(all[..4096].iter().all(|&b| b == 9));
        assert!(all[4096..(1 << 20) - 4096].iter().all(|&b| b == 0));
        assert!(all[(1 << 20) - 4096..].iter().all(|&b| b == 9));
        f.allocate(1 << 20, 65536).unwrap();
        assert_eq!(f.len().unwrap(), (1 << 20) + 65536);
    }

    #[test]
    fn writes_are_mapped_only_where_reserved_storage_suffices() {
        let fd_of = |path: &str| std::fs::File::open(path).ok();
        // procfs is none of the file systems a mapped append is safe on.
        let proc = fd_of("/proc/self/status").expect("procfs");
        assert!(!mapped_writes_cannot_need_space(proc.as_raw_fd()));
        // tmpfs is one, where this machine has it.
        if let Some(shm) = fd_of("/dev/shm") {
            assert!(mapped_writes_cannot_need_space(shm.as_raw_fd()));
        }
    }

    /// Removing or replacing the lock file while it is held does not free
    /// the database: the directory's lock still holds.
    #[test]
    fn a_lock_survives_removing_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        let held = RealFs.lock(&path).unwrap().expect("free");
        assert!(RealFs.lock(&path).unwrap().is_none(), "the same file");
        std::fs::remove_file(&path).unwrap();
        assert!(RealFs.lock(&path).unwrap().is_none(), "a new file");
        std::fs::write(&path, b"").unwrap();
        assert!(RealFs.lock(&path).unwrap().is_none(), "a replaced file");
        drop(held);
        let again = RealFs.lock(&path).unwrap();
        assert!(again.is_some(), "released with the guard");
    }

    #[test]
    fn direct_io_round_trips_aligned_buffers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let options = OpenOptions::read_write_create().with_direct(true);
        let f = match RealFs.open(&path, options) {
            // Some file systems (tmpfs) refuse O_DIRECT; nothing to test there.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return,
            other => other.unwrap(),
        };
        let mut buf = AlignedBuf::zeroed(8192);
        buf.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
        f.write_at(&buf, 4096).unwrap();
        f.sync_data().unwrap();
        let mut back = AlignedBuf::zeroed(8192);
        crate::io::read_exact_at(&*f, &mut back, 4096).unwrap();
        assert_eq!(&back[..], &buf[..]);
    }
}
