//! `turtlekv.Snapshot`: reads at one point in time.

use std::sync::Arc;

use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::ResultExt;
use crate::handle::{Closed, Release, Shared};
use crate::keyspace::PyKeyspace;
use crate::read::{Readable, Reader, SnapshotView, read_methods};

const SNAPSHOT_CLOSED: Closed = Closed("the snapshot is closed (or its database is)");

/// A consistent view of the database at the moment `Db.snapshot()` was
/// called: later writes do not show in it. It has the read methods of
/// `Db` (mapping protocol, `get`, `multi_get`, `items`, ...), reading the
/// default keyspace; `snapshot.keyspace(ks)` reads another keyspace at the
/// same point.
///
/// It keeps the versions it reads alive: close it (or use it as a context
/// manager) when done. `Db.close()` closes it too.
#[pyclass(frozen, module = "turtlekv", name = "Snapshot")]
pub(crate) struct PySnapshot {
    shared: Arc<Shared>,
    slot: Arc<RwLock<Option<SnapshotView>>>,
}

impl PySnapshot {
    /// Registers `view` with the database and wraps it.
    pub(crate) fn new(shared: Arc<Shared>, view: SnapshotView) -> Result<Self, Closed> {
        let slot = Arc::new(RwLock::new(Some(view)));
        shared.register(&slot)?;
        Ok(PySnapshot { shared, slot })
    }
}

impl Readable for PySnapshot {
    fn read<R>(&self, f: impl FnOnce(&dyn Reader) -> R) -> Result<R, Closed> {
        let guard = self.slot.read();
        let view = guard.as_ref().ok_or(SNAPSHOT_CLOSED)?;
        Ok(f(view))
    }
    fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

read_methods!(PySnapshot);

#[pymethods]
impl PySnapshot {
    /// The same point in time, read in keyspace `keyspace` (a `Keyspace`).
    fn keyspace(&self, py: Python<'_>, keyspace: &Bound<'_, PyKeyspace>) -> PyResult<PySnapshot> {
        let ks = keyspace.get().handle()?;
        let view = py.detach(|| {
            self.read_view(|v| SnapshotView {
                snapshot: v.snapshot.clone(),
                keyspace: Some(ks),
            })
        })?;
        Ok(PySnapshot::new(self.shared.clone(), view)?)
    }

    /// The sequence number of the last write the snapshot sees.
    #[getter]
    fn sequence(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(py.detach(|| self.read_view(|v| v.snapshot.sequence()))?)
    }

    /// Lets go of the snapshot; later reads raise `ClosedError`. Iterators
    /// already made from it go on reading it.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.slot.release());
    }

    /// Whether `close()` was called (or the database closed).
    #[getter]
    fn closed(&self) -> bool {
        self.slot.read().is_none()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the snapshot.
    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        match self.slot.read().as_ref() {
            Some(v) => format!("<turtlekv.Snapshot at sequence {}>", v.snapshot.sequence()),
            None => "<turtlekv.Snapshot (closed)>".to_owned(),
        }
    }
}

impl PySnapshot {
    fn read_view<R>(&self, f: impl FnOnce(&SnapshotView) -> R) -> Result<R, Closed> {
        let guard = self.slot.read();
        Ok(f(guard.as_ref().ok_or(SNAPSHOT_CLOSED)?))
    }
}
