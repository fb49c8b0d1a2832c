//! `turtlekv.WriteBatch`: writes applied together, all or nothing.

use std::ops::Range;

use parking_lot::Mutex;
use pyo3::prelude::*;
use turtlekv::WriteBatch;

use crate::convert::bytes_arg;
use crate::handle::Closed;
use crate::keyspace::PyKeyspace;

#[derive(Clone, Copy)]
enum OpKind {
    Put,
    Delete,
    DeleteRange,
}

/// One write: its key (or range start) and value (or range end) are
/// ranges of `Ops::data`.
struct Op {
    kind: OpKind,
    keyspace: Option<Py<PyKeyspace>>,
    a: Range<usize>,
    b: Range<usize>,
}

/// The batch's writes, kept apart from the engine's `WriteBatch` until
/// `Db.write()`: an engine batch naming a keyspace holds its database
/// open, and a Python batch may outlive the database it was meant for.
#[derive(Default)]
pub(crate) struct Ops {
    ops: Vec<Op>,
    data: Vec<u8>,
}

impl Ops {
    fn push(&mut self, kind: OpKind, keyspace: Option<Py<PyKeyspace>>, a: &[u8], b: &[u8]) {
        let start = self.data.len();
        self.data.extend_from_slice(a);
        let mid = self.data.len();
        self.data.extend_from_slice(b);
        self.ops.push(Op {
            kind,
            keyspace,
            a: start..mid,
            b: mid..self.data.len(),
        });
    }

    /// The engine's batch of these writes (with the GIL held: it reads the
    /// keyspaces' Python objects).
    pub(crate) fn to_engine(&self, py: Python<'_>) -> Result<WriteBatch, Closed> {
        let mut batch = WriteBatch::new();
        for op in &self.ops {
            let (a, b) = (&self.data[op.a.clone()], &self.data[op.b.clone()]);
            match &op.keyspace {
                None => match op.kind {
                    OpKind::Put => batch.put(a, b),
                    OpKind::Delete => batch.delete(a),
                    OpKind::DeleteRange => batch.delete_range(a, b),
                },
                Some(ks) => {
                    let ks = ks.bind(py).get().handle()?;
                    match op.kind {
                        OpKind::Put => batch.put_in(&ks, a, b),
                        OpKind::Delete => batch.delete_in(&ks, a),
                        OpKind::DeleteRange => batch.delete_range_in(&ks, a, b),
                    }
                }
            };
        }
        Ok(batch)
    }
}

/// Writes to apply together with `Db.write(batch)`: all of them or, after a
/// crash or an error, none. Writes may name keyspaces (`keyspace=`), so
/// one batch can change several atomically. Writing a batch leaves it as
/// it is; `clear()` empties it.
#[pyclass(frozen, module = "turtlekv", name = "WriteBatch")]
pub(crate) struct PyWriteBatch {
    pub(crate) ops: Mutex<Ops>,
}

fn keyspace_arg(keyspace: Option<&Bound<'_, PyKeyspace>>) -> Option<Py<PyKeyspace>> {
    keyspace.map(|k| k.clone().unbind())
}

#[pymethods]
impl PyWriteBatch {
    #[new]
    fn new() -> Self {
        PyWriteBatch {
            ops: Mutex::new(Ops::default()),
        }
    }

    /// Stores `value` under `key` (in `keyspace`, a `Keyspace`, if given).
    #[pyo3(signature = (key, value, keyspace=None))]
    fn put(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, PyKeyspace>>,
    ) -> PyResult<()> {
        let key = bytes_arg(key, "key")?;
        let value = bytes_arg(value, "value")?;
        self.ops.lock().push(
            OpKind::Put,
            keyspace_arg(keyspace),
            key.as_ref(),
            value.as_ref(),
        );
        Ok(())
    }

    /// `batch[key] = value`: `put(key, value)`.
    fn __setitem__(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.put(key, value, None)
    }

    /// Removes `key` (from `keyspace`, if given).
    #[pyo3(signature = (key, keyspace=None))]
    fn delete(
        &self,
        key: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, PyKeyspace>>,
    ) -> PyResult<()> {
        let key = bytes_arg(key, "key")?;
        self.ops
            .lock()
            .push(OpKind::Delete, keyspace_arg(keyspace), key.as_ref(), &[]);
        Ok(())
    }

    /// `del batch[key]`: `delete(key)`.
    fn __delitem__(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(key, None)
    }

    /// Removes every key from `start` (inclusive) to `end` (exclusive).
    #[pyo3(signature = (start, end, keyspace=None))]
    fn delete_range(
        &self,
        start: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, PyKeyspace>>,
    ) -> PyResult<()> {
        let start = bytes_arg(start, "start")?;
        let end = bytes_arg(end, "end")?;
        self.ops.lock().push(
            OpKind::DeleteRange,
            keyspace_arg(keyspace),
            start.as_ref(),
            end.as_ref(),
        );
        Ok(())
    }

    /// Forgets every write.
    fn clear(&self) {
        *self.ops.lock() = Ops::default();
    }

    /// The number of writes.
    fn __len__(&self) -> usize {
        self.ops.lock().ops.len()
    }

    fn __repr__(&self) -> String {
        format!("<turtlekv.WriteBatch of {} writes>", self.__len__())
    }
}
