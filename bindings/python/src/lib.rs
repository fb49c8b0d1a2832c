//! The Python module `turtlekv._turtlekv`, which `turtlekv/__init__.py`
//! re-exports: a binding of the TurtleKV engine built with pyo3.
//!
//! Every engine call that may do I/O or wait runs with the GIL released
//! (`Python::detach`); the engine's handles are `Send + Sync`, and each
//! Python object keeps its engine object behind a lock that `Db.close()`
//! takes to drop it (`handle.rs`).

mod batch;
mod bench;
mod convert;
mod db;
mod errors;
mod handle;
mod iter;
mod keyspace;
mod options;
mod read;
mod snapshot;
mod stats;
mod txn;

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use turtlekv::Db;

use crate::db::PyDb;
use crate::errors::ResultExt;

/// Opens the database in directory `path` (created with its parents if
/// missing, unless `create_if_missing=False`) and returns a `Db`.
///
/// Options are keyword arguments named as the engine's `Options` fields:
/// sizes (`cache_capacity_bytes`, `checkpoint_distance_bytes`,
/// `leaf_size_bytes`, ...) in bytes or as strings such as `"256MiB"`;
/// `compression` is "none", "lz4", "zstd" or "zstd:<level>";
/// `wal_recovery` is "strict" or "point-in-time". `read_only=True` opens
/// a closed database, a backup or one another process holds, writing
/// nothing; `load_stored_options=True` starts from the knobs stored in
/// the database's OPTIONS file.
#[pyfunction]
#[pyo3(signature = (path, **options))]
fn open(py: Python<'_>, path: PathBuf, options: Option<&Bound<'_, PyDict>>) -> PyResult<PyDb> {
    let request = options::parse(py, &path, options)?;
    let read_only = request.read_only;
    let db = py
        .detach(move || {
            if read_only {
                Db::open_read_only(path)
            } else {
                Db::open(path, request.options)
            }
        })
        .py(py)?;
    Ok(PyDb::new(db, read_only))
}

/// Asks the process holding the database at `path` open for a consistent
/// copy in `dest` (through the control socket in its directory), or
/// copies it directly if nobody holds it. Returns the report dict of
/// `Db.backup()`.
#[pyfunction]
fn backup_at(py: Python<'_>, path: PathBuf, dest: PathBuf) -> PyResult<Bound<'_, PyDict>> {
    let report = py.detach(|| Db::backup_at(path, dest)).py(py)?;
    stats::backup_report(py, &report)
}

/// Whether another handle (of this or another process) holds the database
/// at `path` open.
#[pyfunction]
fn is_in_use(py: Python<'_>, path: PathBuf) -> PyResult<bool> {
    py.detach(|| Db::is_in_use(path)).py(py)
}

#[pymodule]
fn _turtlekv(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(backup_at, m)?)?;
    m.add_function(wrap_pyfunction!(is_in_use, m)?)?;
    m.add_function(wrap_pyfunction!(bench::_rust_get_loop, m)?)?;
    m.add_class::<PyDb>()?;
    m.add_class::<keyspace::PyKeyspace>()?;
    m.add_class::<snapshot::PySnapshot>()?;
    m.add_class::<txn::PyTransaction>()?;
    m.add_class::<batch::PyWriteBatch>()?;
    m.add_class::<iter::PyRangeIter>()?;
    m.add("MAX_KEY_SIZE", turtlekv::MAX_KEY_SIZE)?;
    m.add("MAX_VALUE_SIZE", turtlekv::MAX_VALUE_SIZE)?;
    Ok(())
}
