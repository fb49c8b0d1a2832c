//! `turtlekv.Transaction`: optimistic transactions.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use turtlekv::{Keyspace, Transaction, WriteOptions};

use crate::convert::bytes_arg;
use crate::errors::ResultExt;
use crate::handle::{Closed, Shared, with_slot_quick};
use crate::iter::{IterState, Kind, Producer, PyRangeIter, RangeArgs, TXN_FINISHED, range_bounds};
use crate::keyspace::{KeyspaceSlot, PyKeyspace};

const FINISHED: Closed = Closed(TXN_FINISHED);

/// A transaction, from `Db.transaction()`: reads see the database as it
/// was when the transaction began plus the transaction's own writes;
/// writes are buffered and applied together by `commit()`, which raises
/// `ConflictError` (writing nothing) if a key the transaction read or
/// wrote, or a key in a range it read, changed since it began: retry then.
///
/// As a context manager it commits when the block ends normally and rolls
/// back when it raises. `txn.keyspace(ks)` is the same transaction reading
/// and writing keyspace `ks`.
#[pyclass(frozen, module = "turtlekv", name = "Transaction")]
pub(crate) struct PyTransaction {
    shared: Arc<Shared>,
    slot: Arc<Mutex<Option<Transaction>>>,
    /// The keyspace this view reads and writes (`None`: the default one).
    keyspace: Option<KeyspaceSlot>,
}

impl PyTransaction {
    pub(crate) fn new(shared: Arc<Shared>, txn: Transaction) -> Result<Self, Closed> {
        let slot = Arc::new(Mutex::new(Some(txn)));
        shared.register(&slot)?;
        Ok(PyTransaction {
            shared,
            slot,
            keyspace: None,
        })
    }

    /// This view's keyspace handle (a clone, so that no keyspace lock is
    /// held while the transaction's is taken).
    fn keyspace(&self) -> Result<Option<Keyspace>, Closed> {
        match &self.keyspace {
            None => Ok(None),
            Some(slot) => slot.read().clone().map(Some).ok_or(Closed::DATABASE),
        }
    }

    /// Runs `f` on the transaction (waiting for it with the GIL released).
    fn with_txn<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Transaction, Option<&Keyspace>) -> R + Send,
    ) -> PyResult<R> {
        let ks = self.keyspace()?;
        let out = with_slot_quick(py, &self.slot, |slot| {
            slot.as_mut().map(|txn| f(txn, ks.as_ref())).ok_or(FINISHED)
        });
        Ok(out?)
    }

    fn get_value(&self, py: Python<'_>, key: &[u8]) -> PyResult<Option<bytes::Bytes>> {
        let ks = self.keyspace()?;
        let got = py.detach(|| {
            let guard = self.slot.lock();
            let txn = guard.as_ref().ok_or(FINISHED)?;
            Ok::<_, Closed>(match &ks {
                Some(ks) => txn.get_in(ks, key),
                None => txn.get(key),
            })
        })?;
        got.py(py)
    }

    fn iter_of(
        &self,
        py: Python<'_>,
        args: RangeArgs<'_, '_>,
        kind: Kind,
    ) -> PyResult<PyRangeIter> {
        let bounds = range_bounds(args)?;
        let keyspace = self.keyspace()?;
        let producer = bounds.map(|(lower, upper)| Producer::Transaction {
            txn: self.slot.clone(),
            keyspace,
            lower,
            upper,
        });
        let slot = Arc::new(Mutex::new(Some(IterState::new(producer))));
        // Registered: its keyspace handle holds the database open.
        py.detach(|| self.shared.register(&slot))?;
        Ok(PyRangeIter::new(slot, kind))
    }
}

#[pymethods]
impl PyTransaction {
    /// The value of `key` as the transaction sees it, or `default`.
    #[pyo3(signature = (key, default=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let key = bytes_arg(key, "key")?;
        Ok(match self.get_value(py, key.as_ref())? {
            Some(v) => PyBytes::new(py, &v).into_any().unbind(),
            None => default.unwrap_or_else(|| py.None()),
        })
    }

    /// The value of `key`; `KeyError` if it is absent.
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyBytes>> {
        let k = bytes_arg(key, "key")?;
        match self.get_value(py, k.as_ref())? {
            Some(v) => Ok(PyBytes::new(py, &v).unbind()),
            None => Err(pyo3::exceptions::PyKeyError::new_err(key.clone().unbind())),
        }
    }

    /// Whether `key` is present as the transaction sees it.
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = bytes_arg(key, "key")?;
        Ok(self.get_value(py, key.as_ref())?.is_some())
    }

    /// Buffers a write of `value` under `key`.
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let key = bytes_arg(key, "key")?;
        let value = bytes_arg(value, "value")?;
        let (key, value) = (key.as_ref(), value.as_ref());
        self.with_txn(py, |txn, ks| match ks {
            Some(ks) => txn.put_in(ks, key, value),
            None => txn.put(key, value),
        })
    }

    /// `txn[key] = value`: `put(key, value)`.
    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value)
    }

    /// Buffers a deletion of `key`.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = bytes_arg(key, "key")?;
        let key = key.as_ref();
        self.with_txn(py, |txn, ks| match ks {
            Some(ks) => txn.delete_in(ks, key),
            None => txn.delete(key),
        })
    }

    /// `del txn[key]`: `delete(key)`.
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key)
    }

    /// A lazy iterator of `(key, value)` tuples as the transaction sees
    /// them, in key order (the engine's transaction iterators go forward
    /// only), bounded as `Db.items()`. The range up to where the iteration
    /// stopped counts as read for the conflict check.
    #[pyo3(signature = (start=None, end=None, prefix=None))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyRangeIter> {
        self.iter_of(py, (start, end, prefix), Kind::Items)
    }

    /// A lazy iterator of keys, as `items()`.
    #[pyo3(signature = (start=None, end=None, prefix=None))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyRangeIter> {
        self.iter_of(py, (start, end, prefix), Kind::Keys)
    }

    /// A lazy iterator of values, as `items()`.
    #[pyo3(signature = (start=None, end=None, prefix=None))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyRangeIter> {
        self.iter_of(py, (start, end, prefix), Kind::Values)
    }

    /// Iterates over the keys, as `keys()`.
    fn __iter__(&self, py: Python<'_>) -> PyResult<PyRangeIter> {
        self.iter_of(py, (None, None, None), Kind::Keys)
    }

    /// The same transaction, reading and writing keyspace `keyspace`.
    #[pyo3(name = "keyspace")]
    fn in_keyspace(&self, keyspace: &Bound<'_, PyKeyspace>) -> PyTransaction {
        PyTransaction {
            shared: self.shared.clone(),
            slot: self.slot.clone(),
            keyspace: Some(keyspace.get().slot.clone()),
        }
    }

    /// The sequence number of the snapshot the transaction reads.
    #[getter]
    fn sequence(&self, py: Python<'_>) -> PyResult<u64> {
        self.with_txn(py, |txn, _| txn.sequence())
    }

    /// Whether the transaction was committed or rolled back (or its
    /// database closed).
    #[getter]
    fn finished(&self, py: Python<'_>) -> bool {
        py.detach(|| self.slot.lock().is_none())
    }

    /// Applies the buffered writes atomically (durably first with
    /// `sync=True`). Raises `ConflictError`, having written nothing, if
    /// what the transaction read or wrote changed since it began. Either
    /// way the transaction is finished.
    #[pyo3(signature = (sync=false))]
    fn commit(&self, py: Python<'_>, sync: bool) -> PyResult<()> {
        let options = WriteOptions::new().sync(sync);
        let result = py.detach(|| {
            let txn = self.slot.lock().take().ok_or(FINISHED)?;
            Ok::<_, Closed>(txn.commit(&options))
        })?;
        result.py(py)
    }

    /// Discards the buffered writes; the transaction is finished. Does
    /// nothing if it already is.
    fn rollback(&self, py: Python<'_>) {
        let txn = py.detach(|| self.slot.lock().take());
        drop(txn);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Commits if the block ended normally (unless it already finished the
    /// transaction), else rolls back and lets the exception through.
    #[pyo3(signature = (exc_type, *_rest))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        _rest: &Bound<'_, PyTuple>,
    ) -> PyResult<bool> {
        if exc_type.is_none() && !self.finished(py) {
            self.commit(py, false)?;
        } else {
            self.rollback(py);
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        // Without waiting: another thread may be committing it.
        match self.slot.try_lock().as_deref() {
            Some(Some(t)) => format!("<turtlekv.Transaction at sequence {}>", t.sequence()),
            Some(None) => "<turtlekv.Transaction (finished)>".to_owned(),
            None => "<turtlekv.Transaction (in use)>".to_owned(),
        }
    }
}
