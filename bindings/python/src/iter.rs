//! Lazy iteration from Python: `items()`, `keys()`, `values()`.
//!
//! An iterator reads a snapshot taken when it was made (the engine's
//! `Iter` holds one), so writes after that do not show and do not disturb
//! it. Items are fetched from the engine in batches with the GIL released
//! and handed out one by one with it held: a batch amortises the release
//! over many items, and it grows from a few items (a short scan reads no
//! more than it needs) to `MAX_BATCH`.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use turtlekv::{Keyspace, Transaction};

use crate::convert::opt_bytes_arg;
use crate::errors::{ResultExt, closed_error};

const FIRST_BATCH: usize = 16;
const MAX_BATCH: usize = 512;

/// What an iterator yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Items,
    Keys,
    Values,
}

/// Where the items come from.
pub(crate) enum Producer {
    /// The engine's iterator over a database, keyspace or snapshot.
    Engine {
        iter: Box<EngineIter>,
        reverse: bool,
    },
    /// A transaction's view (its snapshot plus its own writes). The
    /// engine's `TransactionIter` borrows the transaction, so each batch
    /// opens one from where the previous batch stopped; writes the
    /// transaction makes meanwhile show in later batches.
    Transaction {
        txn: Arc<Mutex<Option<Transaction>>>,
        keyspace: Option<Keyspace>,
        lower: Bound<Bytes>,
        upper: Bound<Bytes>,
    },
}

/// The engine's iterator: of pairs, or of keys alone for `keys()` (which
/// then reads no value file: `turtlekv::Iter::keys`).
pub(crate) enum EngineIter {
    Pairs(turtlekv::Iter),
    Keys(turtlekv::Keys),
}

impl EngineIter {
    pub(crate) fn new(iter: turtlekv::Iter, kind: Kind) -> Self {
        match kind {
            Kind::Keys => EngineIter::Keys(iter.keys()),
            Kind::Items | Kind::Values => EngineIter::Pairs(iter),
        }
    }

    /// The next pair from the front or the back; keys alone come with an
    /// empty value.
    fn step(&mut self, reverse: bool) -> Option<turtlekv::Result<(Bytes, Bytes)>> {
        match (self, reverse) {
            (EngineIter::Pairs(iter), false) => iter.next(),
            (EngineIter::Pairs(iter), true) => iter.next_back(),
            (EngineIter::Keys(keys), false) => Some(keys.next()?.map(|k| (k, Bytes::new()))),
            (EngineIter::Keys(keys), true) => Some(keys.next_back()?.map(|k| (k, Bytes::new()))),
        }
    }
}

/// Why an iteration ended early, raised after the items before it.
enum Failure {
    Engine(turtlekv::Error),
    Closed(&'static str),
}

/// An iterator's state: `None` in its slot once the database was closed.
pub(crate) struct IterState {
    /// `None` once the producer is exhausted (dropped early, so that the
    /// snapshot it holds goes as soon as the last item is fetched).
    producer: Option<Producer>,
    buf: VecDeque<(Bytes, Bytes)>,
    failure: Option<Failure>,
    batch: usize,
}

/// One step of an iteration.
enum Next {
    Item(Bytes, Bytes),
    End,
    Failed(Failure),
}

impl IterState {
    pub(crate) fn new(producer: Option<Producer>) -> Self {
        IterState {
            producer,
            buf: VecDeque::new(),
            failure: None,
            batch: FIRST_BATCH,
        }
    }

    /// The next step if it needs no fetch.
    fn buffered(&mut self) -> Option<Next> {
        if let Some((k, v)) = self.buf.pop_front() {
            return Some(Next::Item(k, v));
        }
        if let Some(failure) = self.failure.take() {
            return Some(Next::Failed(failure));
        }
        self.producer.is_none().then_some(Next::End)
    }

    /// The next step, fetching a batch if needed (may read from disk: call
    /// with the GIL released).
    fn next(&mut self) -> Next {
        if let Some(next) = self.buffered() {
            return next;
        }
        self.refill();
        self.buffered().unwrap_or(Next::End)
    }

    fn refill(&mut self) {
        let Some(producer) = self.producer.as_mut() else {
            return;
        };
        let want = self.batch;
        self.batch = (self.batch * 2).min(MAX_BATCH);
        let mut exhausted = false;
        match producer {
            Producer::Engine { iter, reverse } => {
                for _ in 0..want {
                    match iter.step(*reverse) {
                        Some(Ok(kv)) => self.buf.push_back(kv),
                        Some(Err(e)) => {
                            self.failure = Some(Failure::Engine(e));
                            exhausted = true;
                            break;
                        }
                        None => {
                            exhausted = true;
                            break;
                        }
                    }
                }
            }
            Producer::Transaction {
                txn,
                keyspace,
                lower,
                upper,
            } => {
                let guard = txn.lock();
                match guard.as_ref() {
                    None => {
                        self.failure = Some(Failure::Closed(TXN_FINISHED));
                        exhausted = true;
                    }
                    Some(t) => {
                        let range = (lower.clone(), upper.clone());
                        let iter = match keyspace {
                            Some(ks) => t.range_in(ks, range),
                            None => t.range(range),
                        };
                        let mut got = 0;
                        for item in iter.take(want) {
                            match item {
                                Ok(kv) => {
                                    got += 1;
                                    *lower = Bound::Excluded(kv.0.clone());
                                    self.buf.push_back(kv);
                                }
                                Err(e) => {
                                    self.failure = Some(Failure::Engine(e));
                                    break;
                                }
                            }
                        }
                        exhausted = got < want;
                    }
                }
            }
        }
        if exhausted {
            self.producer = None;
        }
    }
}

/// What a call on a committed or rolled-back transaction fails with.
pub(crate) const TXN_FINISHED: &str =
    "the transaction is finished (committed, rolled back or closed)";

/// The shared slot of an iterator; `Db.close()` empties it.
pub(crate) type IterSlot = Arc<Mutex<Option<IterState>>>;

/// A lazy iterator over a range: of `(key, value)` tuples (`items()`),
/// keys (`keys()`) or values (`values()`).
///
/// It reads the snapshot taken when it was made: later writes do not show.
/// It may be used from any thread (one at a time) and may be left
/// unfinished; it holds the snapshot until it is exhausted, garbage
/// collected, or the database is closed, after which it raises
/// `ClosedError`.
#[pyclass(frozen, module = "turtlekv", name = "RangeIterator")]
pub(crate) struct PyRangeIter {
    slot: IterSlot,
    kind: Kind,
}

impl PyRangeIter {
    pub(crate) fn new(slot: IterSlot, kind: Kind) -> Self {
        PyRangeIter { slot, kind }
    }
}

#[pymethods]
impl PyRangeIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        // Without waiting if the item is buffered and the iterator free.
        let quick = self
            .slot
            .try_lock()
            .and_then(|mut guard| guard.as_mut().map(IterState::buffered));
        let next = match quick {
            Some(Some(next)) => Some(next),
            _ => py.detach(|| self.slot.lock().as_mut().map(IterState::next)),
        };
        match next {
            None => Err(closed_error("the database is closed")),
            Some(Next::End) => Ok(None),
            Some(Next::Failed(Failure::Engine(e))) => Err(e).py(py),
            Some(Next::Failed(Failure::Closed(what))) => Err(closed_error(what)),
            Some(Next::Item(k, v)) => Ok(Some(match self.kind {
                Kind::Keys => PyBytes::new(py, &k).into_any().unbind(),
                Kind::Values => PyBytes::new(py, &v).into_any().unbind(),
                Kind::Items => PyTuple::new(py, [PyBytes::new(py, &k), PyBytes::new(py, &v)])?
                    .into_any()
                    .unbind(),
            })),
        }
    }

    fn __repr__(&self) -> String {
        let kind = match self.kind {
            Kind::Items => "items",
            Kind::Keys => "keys",
            Kind::Values => "values",
        };
        format!("<turtlekv.RangeIterator of {kind}>")
    }
}

/// The `start`, `end` and `prefix` arguments of `items()`, as given.
pub(crate) type RangeArgs<'a, 'py> = (
    Option<&'a pyo3::Bound<'py, PyAny>>,
    Option<&'a pyo3::Bound<'py, PyAny>>,
    Option<&'a pyo3::Bound<'py, PyAny>>,
);

/// The bounds that `items()`'s arguments ask for (`None`: an empty range).
pub(crate) fn range_bounds(
    (start, end, prefix): RangeArgs<'_, '_>,
) -> PyResult<Option<(Bound<Bytes>, Bound<Bytes>)>> {
    let start = opt_bytes_arg(start, "start")?;
    let end = opt_bytes_arg(end, "end")?;
    let prefix = opt_bytes_arg(prefix, "prefix")?;
    Ok(bounds(
        start.as_ref().map(AsRef::as_ref),
        end.as_ref().map(AsRef::as_ref),
        prefix.as_ref().map(AsRef::as_ref),
    ))
}

/// The bounds of `items(start, end, prefix)`: from `start` (inclusive) to
/// `end` (exclusive), within the keys starting with `prefix`. `None` when
/// they leave nothing.
fn bounds(
    start: Option<&[u8]>,
    end: Option<&[u8]>,
    prefix: Option<&[u8]>,
) -> Option<(Bound<Bytes>, Bound<Bytes>)> {
    let mut lower: Option<&[u8]> = start;
    let mut upper: Option<Vec<u8>> = end.map(<[u8]>::to_vec);
    if let Some(p) = prefix {
        if lower.is_none_or(|l| l < p) {
            lower = Some(p);
        }
        if let Some(after) = prefix_end(p)
            && upper.as_ref().is_none_or(|u| *u > after)
        {
            upper = Some(after);
        }
    }
    if let (Some(l), Some(u)) = (lower, upper.as_deref())
        && l >= u
    {
        return None;
    }
    Some((
        lower.map_or(Bound::Unbounded, |l| {
            Bound::Included(Bytes::copy_from_slice(l))
        }),
        upper.map_or(Bound::Unbounded, |u| Bound::Excluded(Bytes::from(u))),
    ))
}

/// The first key after every key starting with `prefix` (`None`: no such
/// key, the prefix is all 0xff bytes).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix[..=last].to_vec();
    end[last] += 1;
    Some(end)
}
