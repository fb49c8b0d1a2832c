//! Test support (like `FaultFs`): a file system that hands every call to
//! another and wraps each file it opens, so that a test writes only the
//! file behaviour it changes (a gate on reads, a record of writes, a slow
//! sync, a failing call).

use std::io;
use std::path::Path;
use std::sync::Arc;

use super::{File, FileSystem, LockGuard, OpenOptions};

/// Wraps what `wrap` returns around each file `inner` opens.
pub struct WrapFs<W> {
    /// Does the work.
    pub inner: Arc<dyn FileSystem>,
    /// Wraps each file `inner` opens.
    pub wrap: W,
}

impl<W> std::fmt::Debug for WrapFs<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WrapFs")
            .field("inner", &self.inner)
            .finish()
    }
}

impl<W> FileSystem for WrapFs<W>
where
    W: Fn(Arc<dyn File>) -> Arc<dyn File> + Send + Sync,
{
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn open(&self, path: &Path, options: OpenOptions) -> io::Result<Arc<dyn File>> {
        Ok((self.wrap)(self.inner.open(path, options)?))
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.list_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.sync_dir(path)
    }
    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn LockGuard>>> {
        self.inner.lock(path)
    }
}
