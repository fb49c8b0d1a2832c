//! The reads that `Db`, `Keyspace` and `Snapshot` share (the mapping
//! protocol, `get`, `multi_get`, `items`/`keys`/`values`, ...), written once
//! over the `Reader` trait and put on each class by `read_methods!`; and
//! the writes that `Db` and `Keyspace` share (`write_methods!`).

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use turtlekv::{Db, Iter, Keyspace, Snapshot, WriteOptions};

use crate::handle::{Closed, Shared};
use crate::iter::{IterState, Producer};

/// A point-in-time or live view that answers reads.
pub(crate) trait Reader: Sync {
    fn get(&self, key: &[u8]) -> turtlekv::Result<Option<Bytes>>;
    fn contains(&self, key: &[u8]) -> turtlekv::Result<bool>;
    fn multi_get(&self, keys: &[&[u8]]) -> turtlekv::Result<Vec<Option<Bytes>>>;
    fn range(&self, bounds: (Bound<Bytes>, Bound<Bytes>)) -> Iter;
    fn first(&self) -> turtlekv::Result<Option<(Bytes, Bytes)>>;
    fn last(&self) -> turtlekv::Result<Option<(Bytes, Bytes)>>;
    /// `None` where the engine has no estimate (a keyspace of a snapshot).
    fn approximate_len(&self) -> Option<turtlekv::Result<u64>>;
}

impl Reader for Db {
    fn get(&self, key: &[u8]) -> turtlekv::Result<Option<Bytes>> {
        Db::get(self, key)
    }
    fn contains(&self, key: &[u8]) -> turtlekv::Result<bool> {
        self.contains_key(key)
    }
    fn multi_get(&self, keys: &[&[u8]]) -> turtlekv::Result<Vec<Option<Bytes>>> {
        Db::multi_get(self, keys)
    }
    fn range(&self, bounds: (Bound<Bytes>, Bound<Bytes>)) -> Iter {
        Db::range(self, bounds)
    }
    fn first(&self) -> turtlekv::Result<Option<(Bytes, Bytes)>> {
        self.first_key_value()
    }
    fn last(&self) -> turtlekv::Result<Option<(Bytes, Bytes)>> {
        self.last_key_value()
    }
    fn approximate_len(&self) -> Option<turtlekv::Result<u64>> {
        Some(Db::approximate_len(self))
    }
}

impl Reader for Keyspace {
    fn get(&self, key: &[u8]) -> turtlekv::Result<Option<Bytes>> {
        Keyspace::get(self, key)
    }
    fn contains(&self, key: &[u8]) -> turtlekv::Result<bool> {
        self.contains_key(key)
    }
    fn multi_get(&self, keys: &[&[u8]]) -> turtlekv::Result<Vec<Option<Bytes>>> {
        Keyspace::multi_get(self, keys)
    }
    fn range(&self, bounds: (Bound<Bytes>, Bound<Bytes>)) -> Iter {
        Keyspace::range(self, bounds)
    }
    fn first(&self) -> turtlekv::Result<Option<(Bytes, Bytes)>> {
        self.first_key_value()
    }
    fn last(&self) -> turtlekv::Result<Option<(Bytes, Bytes)>> {
        self.last_key_value()
    }
    fn approximate_len(&self) -> Option<turtlekv::Result<u64>> {
        Some(Keyspace::approximate_len(self))
    }
}

/// A snapshot, read in the default keyspace or in `keyspace`.
pub(crate) struct SnapshotView {
    pub(crate) snapshot: Snapshot,
    pub(crate) keyspace: Option<Keyspace>,
}

impl Reader for SnapshotView {
    fn get(&self, key: &[u8]) -> turtlekv::Result<Option<Bytes>> {
        match &self.keyspace {
            Some(ks) => self.snapshot.get_in(ks, key),
            None => self.snapshot.get(key),
        }
    }
    fn contains(&self, key: &[u8]) -> turtlekv::Result<bool> {
        match &self.keyspace {
            Some(ks) => Ok(self.snapshot.get_in(ks, key)?.is_some()),
            None => self.snapshot.contains_key(key),
        }
    }
    fn multi_get(&self, keys: &[&[u8]]) -> turtlekv::Result<Vec<Option<Bytes>>> {
        match &self.keyspace {
            // The engine batches only the default keyspace's lookups.
            Some(ks) => keys.iter().map(|k| self.snapshot.get_in(ks, k)).collect(),
            None => self.snapshot.multi_get(keys),
        }
    }
    fn range(&self, bounds: (Bound<Bytes>, Bound<Bytes>)) -> Iter {
        match &self.keyspace {
            Some(ks) => self.snapshot.range_in(ks, bounds),
            None => self.snapshot.range(bounds),
        }
    }
    fn first(&self) -> turtlekv::Result<Option<(Bytes, Bytes)>> {
        match &self.keyspace {
            Some(ks) => self
                .snapshot
                .range_in::<Bytes, _>(ks, ..)
                .next()
                .transpose(),
            None => self.snapshot.first_key_value(),
        }
    }
    fn last(&self) -> turtlekv::Result<Option<(Bytes, Bytes)>> {
        match &self.keyspace {
            Some(ks) => self
                .snapshot
                .range_in::<Bytes, _>(ks, ..)
                .next_back()
                .transpose(),
            None => self.snapshot.last_key_value(),
        }
    }
    fn approximate_len(&self) -> Option<turtlekv::Result<u64>> {
        match &self.keyspace {
            Some(_) => None,
            None => Some(self.snapshot.approximate_len()),
        }
    }
}

/// A Python class that reads through a `Reader`.
pub(crate) trait Readable: Sync {
    /// Runs `f` on the reader, under the lock that `close()` takes to drop
    /// it. Call with the GIL released.
    fn read<R>(&self, f: impl FnOnce(&dyn Reader) -> R) -> Result<R, Closed>;
    fn shared(&self) -> &Arc<Shared>;
}

/// Opens an engine iterator over `bounds` (`None`: an empty one) and
/// registers it with the database, under the reader's lock.
pub(crate) fn open_iter<T: Readable>(
    source: &T,
    bounds: Option<(Bound<Bytes>, Bound<Bytes>)>,
    (reverse, kind): (bool, crate::iter::Kind),
) -> Result<Arc<Mutex<Option<IterState>>>, Closed> {
    source.read(|reader| {
        let producer = bounds.map(|b| Producer::Engine {
            iter: Box::new(crate::iter::EngineIter::new(reader.range(b), kind)),
            reverse,
        });
        let slot = Arc::new(Mutex::new(Some(IterState::new(producer))));
        source.shared().register(&slot)?;
        Ok(slot)
    })?
}

/// Something that `put`, `delete` and `delete_range` write to.
pub(crate) trait Writer: Sync {
    fn put(&self, key: &[u8], value: &[u8], options: &WriteOptions) -> turtlekv::Result<()>;
    fn delete(&self, key: &[u8], options: &WriteOptions) -> turtlekv::Result<()>;
    fn delete_range(
        &self,
        start: &[u8],
        end: &[u8],
        options: &WriteOptions,
    ) -> turtlekv::Result<()>;
}

impl Writer for Db {
    fn put(&self, key: &[u8], value: &[u8], options: &WriteOptions) -> turtlekv::Result<()> {
        self.put_opt(key, value, options)
    }
    fn delete(&self, key: &[u8], options: &WriteOptions) -> turtlekv::Result<()> {
        self.delete_opt(key, options)
    }
    fn delete_range(
        &self,
        start: &[u8],
        end: &[u8],
        options: &WriteOptions,
    ) -> turtlekv::Result<()> {
        self.delete_range_opt(start, end, options)
    }
}

impl Writer for Keyspace {
    fn put(&self, key: &[u8], value: &[u8], options: &WriteOptions) -> turtlekv::Result<()> {
        self.put_opt(key, value, options)
    }
    fn delete(&self, key: &[u8], options: &WriteOptions) -> turtlekv::Result<()> {
        self.delete_opt(key, options)
    }
    fn delete_range(
        &self,
        start: &[u8],
        end: &[u8],
        options: &WriteOptions,
    ) -> turtlekv::Result<()> {
        self.delete_range_opt(start, end, options)
    }
}

/// A Python class that writes through a `Writer`.
pub(crate) trait Writable: Sync {
    /// As `Readable::read`.
    fn write<R>(&self, f: impl FnOnce(&dyn Writer) -> R) -> Result<R, Closed>;
}

/// The read methods, with their docstrings, on a `Readable` class.
macro_rules! read_methods {
    ($ty:ty) => {
        #[pymethods]
        impl $ty {
            /// The value of `key` (bytes), or `default` if it is absent.
            #[pyo3(signature = (key, default=None))]
            fn get(
                &self,
                py: Python<'_>,
                key: &Bound<'_, PyAny>,
                default: Option<Py<PyAny>>,
            ) -> PyResult<Py<PyAny>> {
                let key = $crate::convert::bytes_arg(key, "key")?;
                let key = key.as_ref();
                let got = py.detach(|| self.read(|r| r.get(key)))?.py(py)?;
                Ok(match got {
                    Some(v) => PyBytes::new(py, &v).into_any().unbind(),
                    None => default.unwrap_or_else(|| py.None()),
                })
            }

            /// The value of `key`; `KeyError` if it is absent.
            fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyBytes>> {
                let k = $crate::convert::bytes_arg(key, "key")?;
                let k = k.as_ref();
                match py.detach(|| self.read(|r| r.get(k)))?.py(py)? {
                    Some(v) => Ok(PyBytes::new(py, &v).unbind()),
                    None => Err(pyo3::exceptions::PyKeyError::new_err(key.clone().unbind())),
                }
            }

            /// Whether `key` is present.
            fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
                let key = $crate::convert::bytes_arg(key, "key")?;
                let key = key.as_ref();
                py.detach(|| self.read(|r| r.contains(key)))?.py(py)
            }

            /// The values of `keys` (an iterable of bytes), `None` for each
            /// absent one, in order. Reads missing the cache are issued
            /// together, which is faster than one `get` at a time.
            fn multi_get(
                &self,
                py: Python<'_>,
                keys: &Bound<'_, PyAny>,
            ) -> PyResult<Vec<Option<Py<PyBytes>>>> {
                let objs: Vec<Bound<'_, PyAny>> = keys.try_iter()?.collect::<PyResult<_>>()?;
                let bufs = objs
                    .iter()
                    .map(|o| $crate::convert::bytes_arg(o, "key"))
                    .collect::<PyResult<Vec<_>>>()?;
                let refs: Vec<&[u8]> = bufs.iter().map(|b| b.as_ref()).collect();
                let got = py.detach(|| self.read(|r| r.multi_get(&refs)))?.py(py)?;
                Ok(got
                    .into_iter()
                    .map(|v| v.map(|v| PyBytes::new(py, &v).unbind()))
                    .collect())
            }

            /// A lazy iterator of `(key, value)` tuples in key order (or
            /// reverse order), from `start` (inclusive) to `end`
            /// (exclusive), of the keys starting with `prefix`; every bound
            /// is optional. It reads a snapshot taken now.
            #[pyo3(signature = (start=None, end=None, reverse=false, prefix=None))]
            fn items(
                &self,
                py: Python<'_>,
                start: Option<&Bound<'_, PyAny>>,
                end: Option<&Bound<'_, PyAny>>,
                reverse: bool,
                prefix: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<$crate::iter::PyRangeIter> {
                $crate::read::iter_of(
                    self,
                    py,
                    (start, end, prefix),
                    reverse,
                    $crate::iter::Kind::Items,
                )
            }

            /// A lazy iterator of keys, bounded as `items()`.
            #[pyo3(signature = (start=None, end=None, reverse=false, prefix=None))]
            fn keys(
                &self,
                py: Python<'_>,
                start: Option<&Bound<'_, PyAny>>,
                end: Option<&Bound<'_, PyAny>>,
                reverse: bool,
                prefix: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<$crate::iter::PyRangeIter> {
                $crate::read::iter_of(
                    self,
                    py,
                    (start, end, prefix),
                    reverse,
                    $crate::iter::Kind::Keys,
                )
            }

            /// A lazy iterator of values in key order, bounded as `items()`.
            #[pyo3(signature = (start=None, end=None, reverse=false, prefix=None))]
            fn values(
                &self,
                py: Python<'_>,
                start: Option<&Bound<'_, PyAny>>,
                end: Option<&Bound<'_, PyAny>>,
                reverse: bool,
                prefix: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<$crate::iter::PyRangeIter> {
                $crate::read::iter_of(
                    self,
                    py,
                    (start, end, prefix),
                    reverse,
                    $crate::iter::Kind::Values,
                )
            }

            /// Iterates over the keys, as `keys()`.
            fn __iter__(&self, py: Python<'_>) -> PyResult<$crate::iter::PyRangeIter> {
                $crate::read::iter_of(
                    self,
                    py,
                    (None, None, None),
                    false,
                    $crate::iter::Kind::Keys,
                )
            }

            /// The first `(key, value)` in key order, or `None` when empty.
            fn first_key_value(
                &self,
                py: Python<'_>,
            ) -> PyResult<Option<(Py<PyBytes>, Py<PyBytes>)>> {
                let kv = py.detach(|| self.read(|r| r.first()))?.py(py)?;
                Ok(kv.map(|(k, v)| (PyBytes::new(py, &k).unbind(), PyBytes::new(py, &v).unbind())))
            }

            /// The last `(key, value)` in key order, or `None` when empty.
            fn last_key_value(
                &self,
                py: Python<'_>,
            ) -> PyResult<Option<(Py<PyBytes>, Py<PyBytes>)>> {
                let kv = py.detach(|| self.read(|r| r.last()))?.py(py)?;
                Ok(kv.map(|(k, v)| (PyBytes::new(py, &k).unbind(), PyBytes::new(py, &v).unbind())))
            }

            /// An estimate of the number of keys, cheap to compute (an
            /// exact count would read every key, so there is no `len()`):
            /// exact while everything is in memory, otherwise within a few
            /// percent (the engine's `Db::approximate_len` says how).
            fn approximate_len(&self, py: Python<'_>) -> PyResult<u64> {
                match py.detach(|| self.read(|r| r.approximate_len()))? {
                    Some(n) => n.py(py),
                    None => Err(pyo3::exceptions::PyNotImplementedError::new_err(
                        "the engine has no estimate of a keyspace's length in a snapshot; \
                         use Keyspace.approximate_len() for the current one",
                    )),
                }
            }
        }
    };
}
pub(crate) use read_methods;

/// `items()`, `keys()`, `values()`.
pub(crate) fn iter_of<T: Readable>(
    source: &T,
    py: pyo3::Python<'_>,
    args: crate::iter::RangeArgs<'_, '_>,
    reverse: bool,
    kind: crate::iter::Kind,
) -> pyo3::PyResult<crate::iter::PyRangeIter> {
    let bounds = crate::iter::range_bounds(args)?;
    let slot = py.detach(|| open_iter(source, bounds, (reverse, kind)))?;
    Ok(crate::iter::PyRangeIter::new(slot, kind))
}

/// The write methods on a `Writable` class.
macro_rules! write_methods {
    ($ty:ty) => {
        #[pymethods]
        impl $ty {
            /// Stores `value` under `key`. With `sync=True` it is on disk
            /// when this returns; otherwise it is handed to the operating
            /// system, and survives a crash of the process but not of the
            /// machine (`flush_wal()` makes it durable later).
            #[pyo3(signature = (key, value, sync=false))]
            fn put(
                &self,
                py: Python<'_>,
                key: &Bound<'_, PyAny>,
                value: &Bound<'_, PyAny>,
                sync: bool,
            ) -> PyResult<()> {
                let key = $crate::convert::bytes_arg(key, "key")?;
                let value = $crate::convert::bytes_arg(value, "value")?;
                let (key, value) = (key.as_ref(), value.as_ref());
                let options = turtlekv::WriteOptions::new().sync(sync);
                py.detach(|| self.write(|w| w.put(key, value, &options)))?
                    .py(py)
            }

            /// `db[key] = value`: `put(key, value)`.
            fn __setitem__(
                &self,
                py: Python<'_>,
                key: &Bound<'_, PyAny>,
                value: &Bound<'_, PyAny>,
            ) -> PyResult<()> {
                self.put(py, key, value, false)
            }

            /// Removes `key` (nothing happens if it is absent).
            #[pyo3(signature = (key, sync=false))]
            fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
                let key = $crate::convert::bytes_arg(key, "key")?;
                let key = key.as_ref();
                let options = turtlekv::WriteOptions::new().sync(sync);
                py.detach(|| self.write(|w| w.delete(key, &options)))?
                    .py(py)
            }

            /// `del db[key]`: `delete(key)`. Like `rocksdict`, and unlike a
            /// dict, an absent key raises nothing (checking would cost a
            /// read).
            fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
                self.delete(py, key, false)
            }

            /// Removes every key from `start` (inclusive) to `end`
            /// (exclusive) at once; `start` must be below `end`.
            #[pyo3(signature = (start, end, sync=false))]
            fn delete_range(
                &self,
                py: Python<'_>,
                start: &Bound<'_, PyAny>,
                end: &Bound<'_, PyAny>,
                sync: bool,
            ) -> PyResult<()> {
                let start = $crate::convert::bytes_arg(start, "start")?;
                let end = $crate::convert::bytes_arg(end, "end")?;
                let (start, end) = (start.as_ref(), end.as_ref());
                let options = turtlekv::WriteOptions::new().sync(sync);
                py.detach(|| self.write(|w| w.delete_range(start, end, &options)))?
                    .py(py)
            }
        }
    };
}
pub(crate) use write_methods;
