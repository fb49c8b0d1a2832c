//! Prefetch: reads several uncached ranges at once, so that their disk
//! reads overlap instead of queueing behind each other.
//!
//! Why: a scan opens one cursor per buffer segment on its path and one on
//! the leaf, and each cursor needs its first chunk before the merge can
//! emit anything. Out of cache those were dependent 4 KiB reads of 50-100
//! µs each, one after the other; the device serves several at once in
//! little more than the time of one. A scan also reads ahead in its leaf
//! through a single longer range.
//!
//! The reads run on a rayon pool whose idle workers spin a little
//! (`sched_yield`) before they sleep. That costs CPU: YCSB E out of cache
//! used 1.97 cores with it against 1.2 without prefetch. Pools whose
//! threads park instead (one shared queue; one queue per thread), and
//! rayon with the caller reading one range itself, all used less CPU but
//! started the reads later and scanned slower (5,500-6,300 against
//! 7,100-7,200 scans a second, `docs/benchmarks.md`).

use std::sync::OnceLock;

use rayon::prelude::*;

use super::cache::{CacheKey, WHOLE_PAGE};
use super::codec::PAGE_HEADER_BYTES;
use super::store::PageStore;
use super::{CachePriority, PageId};
use crate::Result;

/// Threads that wait on prefetch reads. They mostly sleep in `pread`, so
/// more than the cores is right; eight covers a scan's sources on a tree
/// several levels deep for two client threads.
const PREFETCH_THREADS: usize = 8;

/// A byte range of a page's content: `(page, offset, len)`.
pub(crate) type PageRange = (PageId, u64, u64);

/// The pool, made on first use: a database that never prefetches
/// starts no threads.
#[derive(Debug, Default)]
pub(super) struct PrefetchPool(OnceLock<Option<rayon::ThreadPool>>);

impl PrefetchPool {
    /// `None` if the threads could not be started; the ranges are then
    /// read one by one.
    fn get(&self) -> Option<&rayon::ThreadPool> {
        self.0
            .get_or_init(|| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(PREFETCH_THREADS)
                    .thread_name(|i| format!("turtlekv-prefetch-{i}"))
                    .build()
                    .ok()
            })
            .as_ref()
    }
}

impl PageStore {
    /// Reads the uncached ones of `ranges` into the cache, concurrently when
    /// there are several (a single one is read on the calling thread).
    /// Errors are those the same reads would return later.
    pub(super) fn prefetch_ranges(
        &self,
        ranges: &[PageRange],
        priority: CachePriority,
    ) -> Result<()> {
        let missing: Vec<PageRange> = ranges
            .iter()
            .copied()
            .filter(|&range| !self.range_cached(range))
            .collect();
        let read = |&(id, offset, len): &PageRange| {
            self.read_blocks_range(id, offset, len, Some(priority))
                .map(drop)
        };
        if missing.len() < 2 {
            return missing.iter().try_for_each(read);
        }
        let Some(pool) = self.prefetch_pool.get() else {
            return missing.iter().try_for_each(read);
        };
        pool.install(|| missing.par_iter().with_max_len(1).try_for_each(read))
    }

    /// Whether every block covering `range` is cached (or the whole page).
    /// Does not mark them used: that is the real read's job.
    fn range_cached(&self, (id, offset, len): PageRange) -> bool {
        let page = id.to_raw();
        if self.cache.contains(CacheKey {
            page,
            part: WHOLE_PAGE,
        }) {
            return true;
        }
        let Ok(pf) = self.checked_file(id) else {
            return false; // the read reports what is wrong
        };
        let payload = pf.geometry.payload_bytes() as u64;
        let start = PAGE_HEADER_BYTES as u64 + offset;
        let end = start.saturating_add(len).max(start + 1);
        let (first, last) = (start / payload, (end - 1) / payload);
        (first..=last).all(|b| {
            u32::try_from(b).is_ok_and(|part| self.cache.contains(CacheKey { page, part }))
        })
    }
}
