//! `turtlekv.Db`: an open database.

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use turtlekv::{Db, WriteOptions};

use crate::batch::PyWriteBatch;
use crate::convert::{name_arg, size_arg};
use crate::errors::ResultExt;
use crate::handle::{Closed, Shared};
use crate::keyspace::PyKeyspace;
use crate::read::{Readable, Reader, SnapshotView, Writable, Writer, read_methods, write_methods};
use crate::snapshot::PySnapshot;
use crate::stats::{backup_report, check_report, stats};
use crate::txn::PyTransaction;

/// An open TurtleKV database, from `turtlekv.open(path, **options)`.
///
/// A mutable mapping of bytes to bytes, in key order: `db[k] = v`, `db[k]`
/// (`KeyError` when absent), `del db[k]`, `k in db`, `db.get(k)`, and
/// lazy `items()`, `keys()`, `values()` over key ranges. Writes are atomic
/// one by one, or together through a `WriteBatch` or a `Transaction`.
///
/// Thread-safe: share one `Db` between threads. Every call that may read
/// from disk or wait releases the GIL. Close it (or use it as a context
/// manager) to sync the log and release the directory's lock; closing also
/// closes every snapshot, iterator, keyspace and transaction made from it.
#[pyclass(frozen, module = "turtlekv", name = "Db")]
pub(crate) struct PyDb {
    shared: Arc<Shared>,
}

impl PyDb {
    pub(crate) fn new(db: Db, read_only: bool) -> Self {
        PyDb {
            shared: Shared::new(db, read_only),
        }
    }

    /// Runs `f` on the open database with the GIL released.
    fn on_db<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&Db) -> R + Send) -> PyResult<R> {
        Ok(py.detach(|| self.shared.with_db(f))?)
    }
}

impl Readable for PyDb {
    fn read<R>(&self, f: impl FnOnce(&dyn Reader) -> R) -> Result<R, Closed> {
        self.shared.with_db(|db| f(db))
    }
    fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl Writable for PyDb {
    fn write<R>(&self, f: impl FnOnce(&dyn Writer) -> R) -> Result<R, Closed> {
        self.shared.with_db(|db| f(db))
    }
}

read_methods!(PyDb);
write_methods!(PyDb);

#[pymethods]
impl PyDb {
    /// Applies every write of `batch` (a `WriteBatch`) atomically: after a
    /// crash or an error, all of them or none. `sync=True` makes them
    /// durable before returning.
    #[pyo3(name = "write", signature = (batch, sync=false))]
    fn write_batch(
        &self,
        py: Python<'_>,
        batch: &Bound<'_, PyWriteBatch>,
        sync: bool,
    ) -> PyResult<()> {
        let engine_batch = batch.get().ops.lock().to_engine(py)?;
        let options = WriteOptions::new().sync(sync);
        self.on_db(py, move |db| db.write(engine_batch, &options))?
            .py(py)
    }

    /// A `Snapshot`: reads at this point in time, unaffected by later
    /// writes. Close it (or use it in a `with` block) when done.
    fn snapshot(&self, py: Python<'_>) -> PyResult<PySnapshot> {
        let view = self.on_db(py, |db| SnapshotView {
            snapshot: db.snapshot(),
            keyspace: None,
        })?;
        Ok(PySnapshot::new(self.shared.clone(), view)?)
    }

    /// A `Transaction` reading from this point in time. Use it in a `with`
    /// block to commit at its end (or roll back on an exception).
    fn transaction(&self, py: Python<'_>) -> PyResult<PyTransaction> {
        let txn = self.on_db(py, Db::transaction)?;
        Ok(PyTransaction::new(self.shared.clone(), txn)?)
    }

    /// The keyspace `name` (bytes, or str encoded as UTF-8; 1 to 255
    /// bytes), created durably if it does not exist.
    fn keyspace(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<PyKeyspace> {
        let name = name_arg(name)?;
        let slot = py
            .detach(|| {
                self.shared
                    .make_child(|db| db.keyspace(&name).map(|ks| RwLock::new(Some(ks))))
            })?
            .py(py)?;
        Ok(PyKeyspace::new(self.shared.clone(), slot, name))
    }

    /// The names of the named keyspaces (bytes), in order.
    fn keyspace_names(&self, py: Python<'_>) -> PyResult<Vec<Py<PyBytes>>> {
        let names = self.on_db(py, Db::keyspace_names)?.py(py)?;
        Ok(names.iter().map(|n| PyBytes::new(py, n).unbind()).collect())
    }

    /// Drops keyspace `name` durably: its handles read and write nothing
    /// more (`KeyspaceDroppedError`), its keys are removed in the
    /// background. `KeyspaceNotFoundError` if there is none.
    fn drop_keyspace(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<()> {
        let name = name_arg(name)?;
        self.on_db(py, |db| db.drop_keyspace(&name))?.py(py)
    }

    /// The engine's statistics as a dict: operation counters, cache hit
    /// counts, tree shape, write amplification, and per-keyspace counters
    /// under `keyspaces`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.on_db(py, Db::stats)?;
        stats(py, &s)
    }

    /// Verifies everything the database holds (every page's checksum and
    /// structure, the log) and returns what it counted, as a dict; raises
    /// `CorruptionError` on damage.
    fn check<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let report = self.on_db(py, Db::check)?.py(py)?;
        check_report(py, &report)
    }

    /// Writes a consistent copy of the whole database to `dest` (a new or
    /// empty directory) while reads and writes go on; returns a report
    /// dict. Open the copy with `turtlekv.open(dest)`.
    fn backup<'py>(&self, py: Python<'py>, dest: PathBuf) -> PyResult<Bound<'py, PyDict>> {
        let report = self.on_db(py, |db| db.backup(&dest))?.py(py)?;
        backup_report(py, &report)
    }

    /// Forces a durable checkpoint: every write so far moves into the tree
    /// and the log before it can be trimmed.
    fn checkpoint(&self, py: Python<'_>) -> PyResult<()> {
        self.on_db(py, Db::checkpoint_now)?.py(py)
    }

    /// Makes every write acknowledged so far durable (syncs the log).
    fn flush_wal(&self, py: Python<'_>) -> PyResult<()> {
        self.on_db(py, Db::flush_wal)?.py(py)
    }

    /// Changes the memory budget (`cache_capacity_bytes`) while running;
    /// an int or a string such as `"1GiB"`.
    fn set_cache_capacity(&self, py: Python<'_>, size: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = size_arg(size, "size")?;
        self.on_db(py, |db| db.set_cache_capacity(bytes))?.py(py)
    }

    /// Changes the MemTable capacity (`checkpoint_distance_bytes`) while
    /// running: larger lowers write amplification and leaves less memory
    /// to the page cache.
    fn set_checkpoint_distance(&self, py: Python<'_>, size: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = size_arg(size, "size")?;
        self.on_db(py, |db| db.set_checkpoint_distance(bytes))?
            .py(py)
    }

    /// Changes the record cache's share of the budget while running.
    fn set_record_cache_capacity(&self, py: Python<'_>, size: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = size_arg(size, "size")?;
        self.on_db(py, |db| db.set_record_cache_capacity(bytes))
    }

    /// Closes the database: syncs and seals the log (every acknowledged
    /// write is then durable), stops background work and releases the
    /// directory's lock. Closes every snapshot, iterator, keyspace and
    /// transaction made from it. Raises if the final sync failed or the
    /// handle was poisoned by an earlier failure. Closing twice does
    /// nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let result = py.detach(|| self.shared.take().map(Db::close));
        match result {
            None => Ok(()),
            Some(r) => r.py(py),
        }
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        py.detach(|| self.shared.is_closed())
    }

    /// The database's directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.shared.path().to_path_buf()
    }

    /// Whether it was opened with `read_only=True`.
    #[getter]
    fn read_only(&self) -> bool {
        self.shared.read_only()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the database. An error of the close is raised unless the
    /// block is already raising one.
    #[pyo3(signature = (exc_type, *_rest))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        _rest: &Bound<'_, PyTuple>,
    ) -> PyResult<bool> {
        let closed = self.close(py);
        if exc_type.is_none() {
            closed?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.shared.is_closed() {
            " (closed)"
        } else {
            ""
        };
        format!("<turtlekv.Db {:?}{state}>", self.shared.path())
    }
}
