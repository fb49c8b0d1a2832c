//! A measuring hook for `bench/overhead.py`: the cost of the engine's own
//! `Db::get` on given keys, timed in Rust on the same handle and data the
//! Python loop uses, so that the difference is the binding's overhead.

use std::hint::black_box;
use std::time::Instant;

use pyo3::prelude::*;

use crate::convert::bytes_arg;
use crate::db::PyDb;
use crate::errors::ResultExt;
use crate::read::Readable;

/// Calls the engine's `Db::get` on each key of `keys` in order, in Rust,
/// with the GIL released; returns `(nanoseconds, found)`. For
/// benchmarking the binding's overhead; not part of the API.
#[pyfunction]
pub(crate) fn _rust_get_loop(
    py: Python<'_>,
    db: &Bound<'_, PyDb>,
    keys: &Bound<'_, PyAny>,
) -> PyResult<(u64, u64)> {
    let objs: Vec<Bound<'_, PyAny>> = keys.try_iter()?.collect::<PyResult<_>>()?;
    let keys: Vec<Vec<u8>> = objs
        .iter()
        .map(|o| Ok(bytes_arg(o, "key")?.into_vec()))
        .collect::<PyResult<_>>()?;
    let db = db.get();
    let timed = py.detach(|| {
        db.read(|r| {
            let start = Instant::now();
            let mut found = 0u64;
            for key in &keys {
                if black_box(r.get(black_box(key))?).is_some() {
                    found += 1;
                }
            }
            let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            Ok::<_, turtlekv::Error>((nanos, found))
        })
    })?;
    timed.py(py)
}
