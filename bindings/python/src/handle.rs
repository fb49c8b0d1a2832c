//! What every Python object of one open database shares: the engine's
//! handle, and the objects that keep the database open (snapshots,
//! iterators, keyspaces, transactions), so that `Db.close()` can let go
//! of all of them at once and the directory's lock goes with it.
//!
//! The engine keeps a database open while any `Snapshot`, `Iter` or
//! `Keyspace` lives. Python frees objects when it pleases (a generator left
//! unfinished, a cycle, an exception's traceback), so without this a
//! `close()` followed by a reopen would meet `LockedError` at random.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;
use turtlekv::Db;

use crate::errors::closed_error;

/// Something holding engine state that `Db.close()` drops.
pub(crate) trait Release: Send + Sync {
    fn release(&self);
}

impl<T: Send> Release for Mutex<Option<T>> {
    fn release(&self) {
        // Taken out first and dropped after the lock: dropping an engine
        // object may do work (a view's release) that need not hold it.
        let taken = self.lock().take();
        drop(taken);
    }
}

impl<T: Send + Sync> Release for RwLock<Option<T>> {
    fn release(&self) {
        let taken = self.write().take();
        drop(taken);
    }
}

/// The registry of live dependents.
struct Children {
    live: Vec<Weak<dyn Release>>,
    /// Set by `take`: a registration after it releases its object at once.
    closed: bool,
    /// Dead entries are pruned when `live` reaches this length, so that a
    /// long loop creating short-lived iterators keeps it bounded at an
    /// amortised constant cost per registration.
    prune_at: usize,
}

/// Shared by a `Db` and everything made from it.
pub(crate) struct Shared {
    db: RwLock<Option<Db>>,
    children: Mutex<Children>,
    path: PathBuf,
    read_only: bool,
}

impl Shared {
    pub(crate) fn new(db: Db, read_only: bool) -> Arc<Self> {
        Arc::new(Shared {
            path: db.path().to_path_buf(),
            db: RwLock::new(Some(db)),
            children: Mutex::new(Children {
                live: Vec::new(),
                closed: false,
                prune_at: 64,
            }),
            read_only,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn read_only(&self) -> bool {
        self.read_only
    }

    /// Runs `f` on the open database, or fails if it was closed. Call it
    /// with the GIL released (`Python::detach`): `close()` holds the write
    /// lock while it waits for calls in flight, and a caller blocked on
    /// this lock while holding the GIL could deadlock with one that needs
    /// the GIL back to finish.
    pub(crate) fn with_db<R>(&self, f: impl FnOnce(&Db) -> R) -> Result<R, Closed> {
        let guard = self.db.read();
        match guard.as_ref() {
            Some(db) => Ok(f(db)),
            None => Err(Closed::DATABASE),
        }
    }

    /// Runs `make` on the open database and registers what it returns, all
    /// under the read lock, so that a `close()` either comes before (and
    /// `make` is not run) or after (and releases the new object).
    pub(crate) fn make_child<T: Release + 'static, E>(
        &self,
        make: impl FnOnce(&Db) -> Result<T, E>,
    ) -> Result<Result<Arc<T>, E>, Closed> {
        let guard = self.db.read();
        let db = guard.as_ref().ok_or(Closed::DATABASE)?;
        let child = match make(db) {
            Ok(child) => Arc::new(child),
            Err(e) => return Ok(Err(e)),
        };
        self.register(&child)?;
        Ok(Ok(child))
    }

    /// Registers an object that must be released with the database. After
    /// `close()` began, releases it at once instead and fails: an object
    /// made from a live child (an iterator of a snapshot) while the
    /// database closed would otherwise escape the release.
    pub(crate) fn register<T: Release + 'static>(&self, child: &Arc<T>) -> Result<(), Closed> {
        let weak: Weak<dyn Release> = Arc::downgrade(child) as Weak<dyn Release>;
        let mut children = self.children.lock();
        if children.closed {
            drop(children);
            child.release();
            return Err(Closed::DATABASE);
        }
        if children.live.len() >= children.prune_at {
            children.live.retain(|w| w.strong_count() > 0);
            children.prune_at = (children.live.len() * 2).max(64);
        }
        children.live.push(weak);
        Ok(())
    }

    /// Takes the database out (later calls fail with `ClosedError`),
    /// releases every dependent, and returns the engine handle to close;
    /// `None` if it was closed already. Call with the GIL released.
    pub(crate) fn take(&self) -> Option<Db> {
        let db = self.db.write().take()?;
        let children = {
            let mut children = self.children.lock();
            children.closed = true;
            std::mem::take(&mut children.live)
        };
        for child in children.iter().filter_map(Weak::upgrade) {
            child.release();
        }
        Some(db)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.db.read().is_none()
    }
}

/// The database, or the object a call was made on, was closed; says which.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Closed(pub(crate) &'static str);

impl Closed {
    pub(crate) const DATABASE: Closed = Closed("the database is closed");
}

impl From<Closed> for PyErr {
    fn from(closed: Closed) -> PyErr {
        closed_error(closed.0)
    }
}

/// Locks `slot` and runs `f` on its content. Tries without releasing the
/// GIL first, for calls that do no I/O (a transaction's buffered put, an
/// iterator's buffered item): releasing and taking back the GIL costs more
/// than they do. When another thread holds the lock, waits for it with the
/// GIL released, so that thread can finish.
pub(crate) fn with_slot_quick<T: Send, R: Send>(
    py: Python<'_>,
    slot: &Mutex<Option<T>>,
    f: impl FnOnce(&mut Option<T>) -> R + Send,
) -> R {
    if let Some(mut guard) = slot.try_lock() {
        return f(&mut guard);
    }
    py.detach(|| f(&mut slot.lock()))
}
