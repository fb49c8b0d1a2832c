//! An in-memory tree store, to test the checkpoint pipeline's control flow
//! (freezing, back-pressure, publishing, WAL trimming, failures) apart from
//! the TurtleTree. "Durable" here means: kept in this object, which tests
//! hand to the reopened database.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;

use super::{Coverage, TreeCheck, TreeCursor, TreeScan, TreeStore, TreeVersion};
use crate::memtable::{Direction, MemTable, Versioned, collect_latest};
use crate::values::Value;
use crate::{Error, Result};

#[derive(Debug, Default)]
pub(crate) struct MemoryTreeStore {
    current: Mutex<Arc<MemoryVersion>>,
    /// Checkpoints that succeed before every later one fails.
    pub fail_after: Mutex<Option<u64>>,
    /// Time each checkpoint takes, to provoke write stalls.
    pub delay: Mutex<Duration>,
    /// Time each reclaim takes: the window after a checkpoint's version is
    /// published and before its WAL is trimmed.
    pub reclaim_delay: Mutex<Duration>,
    pub checkpoints: AtomicU64,
    /// The page cache capacity the database gave last.
    pub cache_capacity_bytes: AtomicU64,
    /// The capacity in force as each checkpoint started.
    pub cache_capacity_at_checkpoints: Mutex<Vec<u64>>,
    /// What `checkpoint_memory_floor_bytes` reports.
    pub memory_floor_bytes: AtomicU64,
}

#[derive(Debug, Default)]
struct MemoryVersion {
    map: BTreeMap<Bytes, Value>,
    covered_seq: u64,
}

/// The pairs of a range of a `MemoryVersion`, copied when the scan opened.
struct MemoryScan(std::vec::IntoIter<Versioned>);

impl TreeScan for MemoryScan {
    fn fill(&mut self, limit: usize, out: &mut Vec<Versioned>) -> Result<()> {
        out.extend(self.0.by_ref().take(limit));
        Ok(())
    }
}

impl TreeVersion for MemoryVersion {
    fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        Ok(self.map.get(key).cloned())
    }

    fn cursor(&self, lower: Bound<Bytes>, upper: Bound<Bytes>, direction: Direction) -> TreeCursor {
        let range = self.map.range::<Bytes, _>((lower, upper));
        let pair = |(k, v): (&Bytes, &Value)| (k.clone(), Some(v.clone()));
        let pairs: Vec<Versioned> = match direction {
            Direction::Forward => range.map(pair).collect(),
            Direction::Reverse => range.rev().map(pair).collect(),
        };
        Box::new(MemoryScan(pairs.into_iter()))
    }

    fn covered_seq(&self) -> u64 {
        self.covered_seq
    }

    fn approximate_items(&self, (lo, hi): crate::tree::count::KeySpan<'_>) -> Result<u64> {
        let upper = hi.map_or(Bound::Unbounded, Bound::Excluded);
        Ok(self
            .map
            .range::<[u8], _>((Bound::Included(lo), upper))
            .count() as u64)
    }

    fn check(&self) -> Result<TreeCheck> {
        Ok(TreeCheck {
            keys: self.map.len() as u64,
            pages: 0,
        })
    }
}

impl TreeStore for MemoryTreeStore {
    fn current(&self) -> Arc<dyn TreeVersion> {
        self.current.lock().clone()
    }

    fn checkpoint(
        &self,
        memtable: &dyn MemTable,
        coverage: Coverage,
        workers: &rayon::ThreadPool,
    ) -> Result<Arc<dyn TreeVersion>> {
        let covered_seq = coverage.covered_seq;
        self.cache_capacity_at_checkpoints
            .lock()
            .push(self.cache_capacity_bytes.load(Ordering::SeqCst));
        std::thread::sleep(*self.delay.lock());
        let done = self.checkpoints.load(Ordering::SeqCst);
        if self.fail_after.lock().is_some_and(|n| done >= n) {
            return Err(Error::Io(std::io::Error::other(
                "injected checkpoint failure",
            )));
        }
        let mut map = self.current.lock().map.clone();
        for (start, end) in memtable.range_tombstones().merged_ranges() {
            let doomed: Vec<Bytes> = map.range(start..end).map(|(k, _)| k.clone()).collect();
            doomed.iter().for_each(|k| drop(map.remove(k)));
        }
        let mut previous: Option<Bytes> = None;
        for (key, value) in workers.install(|| collect_latest(memtable)) {
            assert!(
                previous.as_ref().is_none_or(|p| *p < key),
                "items out of order"
            );
            match value {
                Some(v) => map.insert(key.clone(), v),
                None => map.remove(&key),
            };
            previous = Some(key);
        }
        let version = Arc::new(MemoryVersion { map, covered_seq });
        *self.current.lock() = version.clone();
        self.checkpoints.fetch_add(1, Ordering::SeqCst);
        Ok(version)
    }

    fn reclaim(&self) -> Result<()> {
        std::thread::sleep(*self.reclaim_delay.lock());
        Ok(())
    }

    fn checkpoint_memory_floor_bytes(&self) -> u64 {
        self.memory_floor_bytes.load(Ordering::SeqCst)
    }

    fn set_cache_capacity(&self, capacity_bytes: u64) {
        self.cache_capacity_bytes
            .store(capacity_bytes, Ordering::SeqCst);
    }
}
