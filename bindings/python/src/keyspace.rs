//! `turtlekv.Keyspace`: a named, separate key space of a database.

use std::sync::Arc;

use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use turtlekv::Keyspace;

use crate::errors::ResultExt;
use crate::handle::{Closed, Shared};
use crate::read::{Readable, Reader, Writable, Writer, read_methods, write_methods};
use crate::stats::keyspace_stats;

/// The engine's keyspace handle; `Db.close()` empties it (it holds the
/// database open).
pub(crate) type KeyspaceSlot = Arc<RwLock<Option<Keyspace>>>;

/// A keyspace, from `Db.keyspace(name)`: its keys are separate from the
/// default keyspace's and every other's, with the same methods as `Db`
/// (mapping protocol, `get`, `put`, `items`, ...). A `WriteBatch` or a
/// `Transaction` may write to several keyspaces at once.
#[pyclass(frozen, module = "turtlekv", name = "Keyspace")]
pub(crate) struct PyKeyspace {
    shared: Arc<Shared>,
    pub(crate) slot: KeyspaceSlot,
    name: Vec<u8>,
}

impl PyKeyspace {
    pub(crate) fn new(shared: Arc<Shared>, slot: KeyspaceSlot, name: Vec<u8>) -> Self {
        PyKeyspace { shared, slot, name }
    }

    /// A clone of the engine's handle, for a batch, snapshot or
    /// transaction to name it.
    pub(crate) fn handle(&self) -> Result<Keyspace, Closed> {
        self.slot.read().clone().ok_or(Closed::DATABASE)
    }
}

impl Readable for PyKeyspace {
    fn read<R>(&self, f: impl FnOnce(&dyn Reader) -> R) -> Result<R, Closed> {
        let guard = self.slot.read();
        let ks = guard.as_ref().ok_or(Closed::DATABASE)?;
        Ok(f(ks))
    }
    fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl Writable for PyKeyspace {
    fn write<R>(&self, f: impl FnOnce(&dyn Writer) -> R) -> Result<R, Closed> {
        let guard = self.slot.read();
        let ks = guard.as_ref().ok_or(Closed::DATABASE)?;
        Ok(f(ks))
    }
}

read_methods!(PyKeyspace);
write_methods!(PyKeyspace);

#[pymethods]
impl PyKeyspace {
    /// The keyspace's name (bytes).
    #[getter]
    fn name<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.name)
    }

    /// This keyspace's operation counters since the database was opened,
    /// as a dict (`puts`, `deletes`, `gets`, `scans`, `name`).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let stats = py.detach(|| self.read_stats())?;
        keyspace_stats(py, &stats)
    }

    fn __repr__(&self) -> String {
        format!(
            "<turtlekv.Keyspace {:?}>",
            String::from_utf8_lossy(&self.name)
        )
    }
}

impl PyKeyspace {
    fn read_stats(&self) -> Result<turtlekv::KeyspaceStats, Closed> {
        let guard = self.slot.read();
        Ok(guard.as_ref().ok_or(Closed::DATABASE)?.stats())
    }
}
