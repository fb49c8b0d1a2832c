//! Python arguments to byte strings, and sizes.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView, PyString};

/// A key or value given from Python: borrowed from an immutable `bytes`
/// (no copy), copied from a mutable `bytearray` or a `memoryview` (the
/// call may run with the GIL released, while another thread changes them).
pub(crate) enum Buf<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
}

impl AsRef<[u8]> for Buf<'_> {
    fn as_ref(&self) -> &[u8] {
        match self {
            Buf::Borrowed(b) => b,
            Buf::Owned(v) => v,
        }
    }
}

impl Buf<'_> {
    pub(crate) fn into_vec(self) -> Vec<u8> {
        match self {
            Buf::Borrowed(b) => b.to_vec(),
            Buf::Owned(v) => v,
        }
    }
}

/// `obj` as bytes; `what` names it in the error ("key", "value").
pub(crate) fn bytes_arg<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Buf<'a>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Buf::Borrowed(b.as_bytes()));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Buf::Owned(b.to_vec()));
    }
    if obj.is_instance_of::<PyMemoryView>() {
        // `bytes(view)` copies it whatever its layout; the buffer protocol
        // is not in the stable ABI before Python 3.11.
        let copy = obj.call_method0("tobytes")?;
        return Ok(Buf::Owned(copy.cast::<PyBytes>()?.as_bytes().to_vec()));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be bytes, not str: encode it first (for example {what}.encode())"
        )));
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be bytes, bytearray or memoryview, not {}",
        obj.get_type().name()?
    )))
}

/// `None` or bytes.
pub(crate) fn opt_bytes_arg<'a>(
    obj: Option<&'a Bound<'_, PyAny>>,
    what: &str,
) -> PyResult<Option<Buf<'a>>> {
    match obj {
        Some(o) if !o.is_none() => Ok(Some(bytes_arg(o, what)?)),
        _ => Ok(None),
    }
}

/// A keyspace name: bytes, or a `str` (names are identifiers, so UTF-8 text
/// is accepted and encoded).
pub(crate) fn name_arg(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    Ok(bytes_arg(obj, "name")?.into_vec())
}

/// A size in bytes: an `int`, or a string such as `"256MiB"`, `"64 KiB"`,
/// `"1GB"` or `"4096"`. Binary units (KiB, MiB, GiB, TiB) are powers of
/// 1024; decimal ones (kB, KB, MB, GB, TB) powers of 1000, as everywhere
/// else.
pub(crate) fn size_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a size, not bool"
        )));
    }
    if let Ok(n) = obj.extract::<u64>() {
        return Ok(n);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return parse_size(&s.to_cow()?).ok_or_else(|| {
            PyValueError::new_err(format!(
                "{what} = {:?}: expected a size such as 4096, \"64KiB\", \"256MiB\" or \"1GB\"",
                s.to_cow().unwrap_or_default()
            ))
        });
    }
    if obj.extract::<i64>().is_ok() {
        return Err(PyValueError::new_err(format!(
            "{what} must not be negative"
        )));
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be an int or a string such as \"256MiB\", not {}",
        obj.get_type().name()?
    )))
}

fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let multiplier: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return None,
    };
    n.checked_mul(multiplier)
}
