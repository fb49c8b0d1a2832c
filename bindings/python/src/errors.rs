//! Engine errors as Python exceptions of the `turtlekv.Error` hierarchy.
//!
//! The classes are defined in Python (`turtlekv/_errors.py`): `IoError`
//! derives from both `turtlekv.Error` and `OSError`, and the input errors
//! from `ValueError`, which pyo3's `create_exception!` cannot express.

use pyo3::BoundObject;
use pyo3::prelude::*;
use pyo3::types::PyType;

const MODULE: &str = "turtlekv._errors";

fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    Ok(py.import(MODULE)?.getattr(name)?.cast_into()?)
}

/// An instance of `turtlekv._errors.<name>(message)` with `attrs` set on it.
fn build(py: Python<'_>, name: &str, message: String, attrs: &[(&str, Py<PyAny>)]) -> PyErr {
    let made = class(py, name).and_then(|cls| {
        let err = cls.call1((message,))?;
        for (attr, value) in attrs {
            err.setattr(*attr, value)?;
        }
        Ok(PyErr::from_value(err))
    });
    // A failure to build the exception (the module missing from a broken
    // install) is itself the error to report.
    made.unwrap_or_else(|e| e)
}

fn obj<'py>(py: Python<'py>, value: impl IntoPyObject<'py>) -> Py<PyAny> {
    match value.into_pyobject(py) {
        Ok(v) => v.into_any().unbind(),
        // Only fallible conversions of strings, paths and integers are
        // used here; none fails.
        Err(_) => py.None(),
    }
}

/// The Python exception for an engine error.
pub(crate) fn engine_error(py: Python<'_>, err: turtlekv::Error) -> PyErr {
    use turtlekv::Error as E;
    let message = err.to_string();
    match err {
        E::Io(io) => {
            let errno = io.raw_os_error();
            match errno {
                Some(errno) => {
                    match class(py, "IoError").and_then(|cls| cls.call1((errno, message))) {
                        Ok(e) => PyErr::from_value(e),
                        Err(e) => e,
                    }
                }
                None => build(py, "IoError", message, &[]),
            }
        }
        E::Corruption {
            file,
            offset,
            reason,
        } => build(
            py,
            "CorruptionError",
            message,
            &[
                ("file", obj(py, file)),
                ("offset", obj(py, offset)),
                ("reason", obj(py, reason)),
            ],
        ),
        E::EmptyKey | E::KeyTooLarge { .. } | E::ValueTooLarge { .. } | E::BatchTooLarge { .. } => {
            build(py, "InvalidArgumentError", message, &[])
        }
        E::InvalidRange { start, end } => build(
            py,
            "InvalidArgumentError",
            message,
            &[
                ("start", obj(py, pyo3::types::PyBytes::new(py, &start))),
                ("end", obj(py, pyo3::types::PyBytes::new(py, &end))),
            ],
        ),
        E::InvalidOptions(_) => build(py, "InvalidOptionsError", message, &[]),
        E::Locked(path) => build(py, "LockedError", message, &[("path", obj(py, path))]),
        E::NestedDatabase { path, outer } => build(
            py,
            "NestedDatabaseError",
            message,
            &[("path", obj(py, path)), ("outer", obj(py, outer))],
        ),
        E::InvalidKeyspaceName { .. } => build(py, "InvalidArgumentError", message, &[]),
        E::KeyspaceNotFound(name) => keyspace_error(py, "KeyspaceNotFoundError", message, &name),
        E::KeyspaceDropped(name) => keyspace_error(py, "KeyspaceDroppedError", message, &name),
        E::ForeignKeyspace(name) => keyspace_error(py, "KeyspaceError", message, &name),
        E::KeyspacesUnsupported | E::TooManyKeyspaces(_) => {
            build(py, "KeyspaceError", message, &[])
        }
        E::Conflict(_) => build(py, "ConflictError", message, &[]),
        E::Poisoned { cause } => build(py, "PoisonedError", message, &[("cause", obj(py, cause))]),
        E::ReadOnly(path) => build(py, "ReadOnlyError", message, &[("path", obj(py, path))]),
        E::ChangedWhileReading(path) => build(
            py,
            "ChangedWhileReadingError",
            message,
            &[("path", obj(py, path))],
        ),
        E::BackupTarget { dest, reason } => build(
            py,
            "BackupTargetError",
            message,
            &[("dest", obj(py, dest)), ("reason", obj(py, reason))],
        ),
        // The enum is non-exhaustive: a variant added later still becomes
        // a `turtlekv.Error` with the engine's message.
        _ => build(py, "Error", message, &[]),
    }
}

fn keyspace_error(py: Python<'_>, class: &str, message: String, name: &[u8]) -> PyErr {
    let name = obj(py, pyo3::types::PyBytes::new(py, name));
    build(py, class, message, &[("name", name)])
}

/// `ClosedError(message)`: a call on a closed database, snapshot or
/// finished transaction.
pub(crate) fn closed_error(message: &str) -> PyErr {
    Python::attach(|py| build(py, "ClosedError", message.to_owned(), &[]))
}

/// Engine results into Python results.
pub(crate) trait ResultExt<T> {
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> ResultExt<T> for turtlekv::Result<T> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| engine_error(py, e))
    }
}
