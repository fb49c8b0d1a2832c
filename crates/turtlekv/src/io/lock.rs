//! Taking a database's lock, riding out a holder that is only passing.
//!
//! The lock is an `flock`, which belongs to the open file description,
//! and `fork` shares every description with the child until it `exec`s
//! (close-on-exec closes them only then). So a process that starts a
//! child on one thread while another closes a database leaves the lock
//! held by the child for that moment, and an open right after the close
//! would find it taken. Nothing can keep a description out of a fork, so
//! the open waits a little before it calls the database locked.

use std::io;
use std::path::Path;
use std::time::Duration;

use super::{FileSystem, LockGuard};

/// The waits between attempts: about half a second in all, enough for a
/// started child to reach its `exec` on a loaded machine, and short
/// enough that an open of a database that is held is told so promptly.
const LOCK_RETRY_WAITS: [Duration; 7] = [
    Duration::from_millis(2),
    Duration::from_millis(4),
    Duration::from_millis(8),
    Duration::from_millis(16),
    Duration::from_millis(32),
    Duration::from_millis(64),
    Duration::from_millis(384),
];

/// `fs.lock(path)`, tried again over about half a second while another
/// holds it; `None` when it is still held after that.
pub(crate) fn lock_waiting(
    fs: &dyn FileSystem,
    path: &Path,
) -> io::Result<Option<Box<dyn LockGuard>>> {
    for wait in LOCK_RETRY_WAITS {
        if let Some(guard) = fs.lock(path)? {
            return Ok(Some(guard));
        }
        std::thread::sleep(wait);
    }
    fs.lock(path)
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd as _;
    use std::time::Instant;

    use super::*;
    use crate::io::RealFs;

    /// Holds `path`'s and its directory's locks on descriptions of its
    /// own, as a child between `fork` and `exec` would.
    fn hold_like_a_child(path: &Path) -> [std::fs::File; 2] {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .unwrap();
        let dir = std::fs::File::open(path.parent().unwrap()).unwrap();
        for held in [&file, &dir] {
            // SAFETY: the descriptor is valid for the duration of the call.
            let rc = unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            assert_eq!(rc, 0);
        }
        [file, dir]
    }

    #[test]
    fn a_lock_held_for_a_moment_is_taken_once_it_goes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        let held = hold_like_a_child(&path);
        assert!(RealFs.lock(&path).unwrap().is_none(), "held: one try fails");
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            drop(held);
        });
        assert!(lock_waiting(&RealFs, &path).unwrap().is_some());
        release.join().unwrap();
    }

    #[test]
    fn a_lock_that_stays_held_is_refused_after_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        let _held = hold_like_a_child(&path);
        let started = Instant::now();
        assert!(lock_waiting(&RealFs, &path).unwrap().is_none());
        let waited = started.elapsed();
        let planned: Duration = LOCK_RETRY_WAITS.iter().sum();
        assert!(waited >= planned, "gave up after {waited:?}");
    }
}
