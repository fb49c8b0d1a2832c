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
//! The calling thread submits all the reads through its io_uring and
//! sleeps once until they are in (`io::read_exact_batch`). Where io_uring
//! is not available (or a file has no descriptor, as in tests that inject
//! faults), the reads run on a rayon pool instead, made on first use.
//! Its idle workers spin a little (`sched_yield`) before they sleep, which
//! costs CPU: YCSB E out of cache used 1.97 cores with it against 1.2
//! without prefetch. Pools whose threads park instead (one shared queue;
//! one queue per thread), and rayon with the caller reading one range
//! itself, all used less CPU but started the reads later and scanned
//! slower (5,500-6,300 against 7,100-7,200 scans a second,
//! `docs/benchmarks.md`).

use std::io;
use std::sync::OnceLock;

use rayon::prelude::*;

use super::cache::{CacheKey, WHOLE_PAGE};
use super::codec::PAGE_HEADER_BYTES;
use super::read::{image_span, read_raw};
use super::store::{PageFile, PageStore};
use super::{CachePriority, PageId};
use crate::Result;
use crate::io::{AlignedBuf, BatchRead, read_exact_at, read_exact_batch};

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
    /// Whether the pool's threads were started.
    #[cfg(test)]
    pub(super) fn started(&self) -> bool {
        self.0.get().is_some()
    }

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

/// A run of blocks to read: page, first block, count.
pub(super) type Run<'a> = (&'a PageFile, PageId, u32, u32);

impl PageStore {
    /// Reads the uncached ones of `ranges` into the cache, concurrently when
    /// there are several (a single one is read on the calling thread).
    /// Errors are those the same reads would return later (the first).
    pub(super) fn prefetch_ranges(
        &self,
        ranges: &[PageRange],
        priority: CachePriority,
    ) -> Result<()> {
        let mut runs = Vec::with_capacity(ranges.len());
        for &range in ranges {
            runs.extend(self.uncached_run(range)?);
        }
        self.read_runs(runs, priority)
    }

    /// Reads `runs` into the cache, concurrently when there are several.
    pub(super) fn read_runs(&self, runs: Vec<Run<'_>>, priority: CachePriority) -> Result<()> {
        if runs.len() < 2 {
            return runs
                .into_iter()
                .try_for_each(|run| self.read_run(run, priority));
        }
        // Buffers are allocated, and blocks copied out and cached, on this
        // thread: cached blocks live long and are freed by whichever thread
        // evicts them, and allocating them on pool threads would spread
        // them over more malloc arenas.
        let mut jobs: Vec<Job<'_>> = runs
            .into_iter()
            .map(|run| (run, AlignedBuf::zeroed(run_span(run).1), Ok(())))
            .collect();
        if !read_batched(&mut jobs) {
            self.read_on_pool(&mut jobs);
        }
        jobs.into_iter().try_for_each(|(run, image, outcome)| {
            self.accept_run(run, outcome.map(|()| image), priority)
        })
    }

    /// Reads the jobs on the pool's threads, or one by one on this thread
    /// when the pool could not be started.
    fn read_on_pool(&self, jobs: &mut [Job<'_>]) {
        let read = |(run, image, outcome): &mut Job<'_>| {
            *outcome = read_exact_at(&*run.0.file, image, run_span(*run).0);
        };
        match self.prefetch_pool.get() {
            Some(pool) => pool.install(|| jobs.par_iter_mut().with_max_len(1).for_each(read)),
            None => jobs.iter_mut().for_each(read),
        }
    }

    fn read_run(&self, run: Run<'_>, priority: CachePriority) -> Result<()> {
        let (pf, id, first, count) = run;
        self.accept_run(run, read_raw(pf, id, first, count), priority)
    }

    /// Counts, verifies and caches what a read of `run` returned.
    pub(super) fn accept_run(
        &self,
        run: Run<'_>,
        read: io::Result<AlignedBuf>,
        priority: CachePriority,
    ) -> Result<()> {
        let (pf, id, first, count) = run;
        self.recall_evicted_run(id, first, count);
        let image = self.finish_read(pf, id, run_span(run).0, read)?;
        self.accept_image(pf, id, first, &image, Some(priority))
            .map(drop)
    }

    /// The blocks covering `range` from its first uncached one to its last
    /// (cached ones between are read again: rare, and one I/O either way);
    /// `None` when all are cached, or the whole page is. Does not mark
    /// cached blocks used: that is the real read's job.
    pub(super) fn uncached_run(&self, (id, offset, len): PageRange) -> Result<Option<Run<'_>>> {
        let page = id.to_raw();
        let cached = |part| self.cache.contains(CacheKey { page, part });
        if cached(WHOLE_PAGE) {
            return Ok(None);
        }
        let pf = self.checked_file(id)?;
        let payload = pf.geometry.payload_bytes() as u64;
        let start = PAGE_HEADER_BYTES as u64 + offset;
        let end = start.saturating_add(len).max(start + 1);
        let (first, last) = (start / payload, (end - 1) / payload);
        if last >= u64::from(id.blocks()) {
            // Beyond the page: the caller's own read reports it.
            return Ok(None);
        }
        let (first, last) = (first as u32, last as u32);
        let Some(first) = (first..=last).find(|&b| !cached(b)) else {
            return Ok(None);
        };
        let last = (first..=last).rev().find(|&b| !cached(b)).unwrap_or(first);
        Ok(Some((pf, id, first, last - first + 1)))
    }
}

/// A run, the buffer it is read into and how the read went.
type Job<'a> = (Run<'a>, AlignedBuf, io::Result<()>);

/// Reads all jobs at once through this thread's io_uring; `false` (nothing
/// read) when that is not available.
fn read_batched(jobs: &mut [Job<'_>]) -> bool {
    let mut reads: Vec<BatchRead<'_>> = jobs
        .iter_mut()
        .map(|(run, image, _)| BatchRead {
            file: &*run.0.file,
            offset: run_span(*run).0,
            buf: image,
        })
        .collect();
    let Some(outcomes) = read_exact_batch(&mut reads) else {
        return false;
    };
    for ((_, _, outcome), read) in jobs.iter_mut().zip(outcomes) {
        *outcome = read;
    }
    true
}

pub(super) fn run_span((pf, id, first, count): Run<'_>) -> (u64, usize) {
    image_span(pf, id, first, count)
}
