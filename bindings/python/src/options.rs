//! `turtlekv.open(path, **options)`: keyword arguments, named as the
//! engine's `Options` fields, into `Options`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyString};
use turtlekv::{Compression, Options, WalRecovery};

use crate::convert::size_arg;
use crate::errors::ResultExt;

/// What `open` was asked for.
pub(crate) struct OpenRequest {
    pub(crate) options: Options,
    /// `read_only=True`: `Db::open_read_only`, which takes no options.
    pub(crate) read_only: bool,
}

/// Every keyword `open` takes, for the error on an unknown one.
pub(crate) const NAMES: &[&str] = &[
    "read_only",
    "load_stored_options",
    "create_if_missing",
    "cache_capacity_bytes",
    "checkpoint_distance_bytes",
    "write_only_checkpoint_distance_bytes",
    "record_cache_capacity_bytes",
    "record_cache_auto_split",
    "checkpoint_on_read_pressure",
    "checkpoint_io_idle",
    "checkpoint_threads",
    "garbage_percent",
    "leaf_size_bytes",
    "node_size_bytes",
    "filter_bits_per_key",
    "direct_io",
    "wal_segment_size_bytes",
    "wal_recovery",
    "compression",
    "value_separation_threshold_bytes",
    "value_file_min_live_percent",
    "value_file_size_bytes",
];

fn flag(value: &Bound<'_, PyAny>, name: &str) -> PyResult<bool> {
    value
        .cast::<PyBool>()
        .map(|b| b.is_true())
        .map_err(|_| PyTypeError::new_err(format!("{name} must be True or False")))
}

fn int<T: for<'a, 'py> FromPyObject<'a, 'py>>(value: &Bound<'_, PyAny>, name: &str) -> PyResult<T> {
    if value.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be an int, not bool"
        )));
    }
    value
        .extract::<T>()
        .map_err(|_| PyValueError::new_err(format!("{name} must be a non-negative int in range")))
}

fn text<'a>(value: &'a Bound<'_, PyAny>, name: &str) -> PyResult<&'a Bound<'a, PyString>> {
    value
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be a str")))
}

/// Reads the keywords of `open`, starting from `Options::new()` or, with
/// `load_stored_options=True`, from the knobs stored in the database's
/// `OPTIONS` file (`Options::load`), which the others then override.
pub(crate) fn parse(
    py: Python<'_>,
    path: &std::path::Path,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<OpenRequest> {
    let get = |name: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        match kwargs {
            Some(k) => k.get_item(name),
            None => Ok(None),
        }
    };
    if let Some(k) = kwargs {
        for key in k.keys() {
            let key: String = key.extract()?;
            if !NAMES.contains(&key.as_str()) {
                return Err(PyTypeError::new_err(format!(
                    "open() got an unexpected keyword argument {key:?}; options are: {}",
                    NAMES.join(", ")
                )));
            }
        }
    }
    let read_only = match get("read_only")? {
        Some(v) => flag(&v, "read_only")?,
        None => false,
    };
    if read_only && kwargs.is_some_and(|k| k.len() > 1) {
        return Err(PyTypeError::new_err(
            "read_only=True takes no other options: a read-only handle uses the database's own",
        ));
    }
    let load = match get("load_stored_options")? {
        Some(v) => flag(&v, "load_stored_options")?,
        None => false,
    };
    let mut o = if load {
        let path = path.to_path_buf();
        py.detach(move || Options::load(path)).py(py)?
    } else {
        Options::new()
    };
    macro_rules! set {
        ($name:ident, $conv:expr) => {
            if let Some(v) = get(stringify!($name))? {
                o = o.$name($conv(&v, stringify!($name))?);
            }
        };
    }
    set!(create_if_missing, flag);
    set!(cache_capacity_bytes, size_arg);
    set!(checkpoint_distance_bytes, size_arg);
    set!(write_only_checkpoint_distance_bytes, size_arg);
    set!(record_cache_capacity_bytes, size_arg);
    set!(record_cache_auto_split, flag);
    set!(checkpoint_on_read_pressure, flag);
    set!(checkpoint_io_idle, flag);
    set!(checkpoint_threads, int::<usize>);
    set!(garbage_percent, int::<u32>);
    set!(leaf_size_bytes, size_arg);
    set!(node_size_bytes, size_arg);
    set!(filter_bits_per_key, int::<u32>);
    set!(direct_io, flag);
    set!(wal_segment_size_bytes, size_arg);
    set!(value_separation_threshold_bytes, size_arg);
    set!(value_file_min_live_percent, int::<u32>);
    set!(value_file_size_bytes, size_arg);
    if let Some(v) = get("wal_recovery")? {
        let s = text(&v, "wal_recovery")?;
        o = o.wal_recovery(s.to_cow()?.parse::<WalRecovery>().py(py)?);
    }
    if let Some(v) = get("compression")? {
        let s = text(&v, "compression")?;
        o = o.compression(s.to_cow()?.parse::<Compression>().py(py)?);
    }
    Ok(OpenRequest {
        options: o,
        read_only,
    })
}
