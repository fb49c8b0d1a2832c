//! Mappings kept for reuse instead of going back to the kernel.
//!
//! The page cache copies each page a checkpoint writes (while it has room)
//! into a mapping of its own, and each MemTable's arena carves its entries
//! from mappings. A checkpoint frees about as many pages as it writes, and
//! a MemTable goes when the next one fills; with fresh mappings the kernel
//! zeroes every page again as it is first touched (7% of an in-cache
//! load's samples, `docs/benchmarks.md`, "The load's page copies"). So a
//! mapping made by the pool comes back to it when dropped, still resident,
//! and the next mapping asked for reuses it (`mremap` fits the length).
//!
//! Kept memory is charged to a budget, the page cache's: a mapping is kept
//! only while the cache's used bytes plus its own fit the capacity, and the
//! cache hands kept mappings back to the kernel before it evicts anything.
//! So the pool holds only memory the cache would be allowed to fill.

use std::sync::Arc;
use std::sync::atomic::{
    AtomicU64,
    Ordering::{Relaxed, SeqCst},
};

use parking_lot::Mutex;

use super::mapping::Mapping;

#[derive(Debug)]
pub(crate) struct MappingPool {
    kept: Mutex<Vec<Mapping>>,
    /// What the kept mappings hold; part of `used_bytes`.
    kept_bytes: AtomicU64,
    /// The budget kept memory is charged to, and what is charged against
    /// it (shared with the page cache, which owns them).
    capacity_bytes: Arc<AtomicU64>,
    used_bytes: Arc<AtomicU64>,
}

impl MappingPool {
    pub fn new(capacity_bytes: Arc<AtomicU64>, used_bytes: Arc<AtomicU64>) -> Self {
        MappingPool {
            kept: Mutex::new(Vec::new()),
            kept_bytes: AtomicU64::new(0),
            capacity_bytes,
            used_bytes,
        }
    }

    /// A mapping of `len_bytes` (a kept one if there is one, so not zeroed)
    /// that comes back here when dropped.
    pub fn map(self: &Arc<Self>, len_bytes: usize) -> Mapping {
        let mapping = match self.take() {
            Some(kept) => kept.resized(len_bytes),
            None => Mapping::new(len_bytes),
        };
        mapping.returning_to(Arc::downgrade(self))
    }

    /// Bytes the kept mappings hold.
    pub fn kept_bytes(&self) -> u64 {
        self.kept_bytes.load(Relaxed)
    }

    /// Hands one kept mapping back to the kernel; `false` when none is kept.
    pub fn release_one(&self) -> bool {
        // Without the lock: evictions ask on every miss of a full cache,
        // whose pool is empty.
        if self.kept_bytes() == 0 {
            return false;
        }
        // The taken mapping has no home: dropped here, it is unmapped.
        self.take().is_some()
    }

    /// The most recently kept mapping (its pages the likeliest to be in the
    /// CPU's caches), uncharged.
    fn take(&self) -> Option<Mapping> {
        let mapping = self.kept.lock().pop()?;
        let bytes = mapping.mapped_bytes() as u64;
        self.kept_bytes.fetch_sub(bytes, Relaxed);
        self.used_bytes.fetch_sub(bytes, Relaxed);
        Some(mapping)
    }

    /// Keeps `mapping` (which has no home) if the budget has room for it,
    /// else lets it go to the kernel.
    pub(super) fn keep(&self, mapping: Mapping) {
        let bytes = mapping.mapped_bytes() as u64;
        let Ok(used) = self.used_bytes.fetch_update(SeqCst, SeqCst, |used| {
            (used + bytes <= self.capacity_bytes.load(SeqCst)).then_some(used + bytes)
        }) else {
            return;
        };
        // A shrink that stored its capacity after the load above may have
        // looked at `used` before this charge and found nothing to release:
        // then the charge is undone and the mapping goes to the kernel, as
        // `PageCache::reserve` undoes its charge. (Both sides store, then
        // load, in SeqCst: one of them sees the other.)
        if used + bytes > self.capacity_bytes.load(SeqCst) {
            self.used_bytes.fetch_sub(bytes, SeqCst);
            return;
        }
        self.kept_bytes.fetch_add(bytes, Relaxed);
        self.kept.lock().push(mapping);
    }
}
