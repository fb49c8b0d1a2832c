//! Streamed range reads for the page store: each range's read starts when
//! it is pushed and is reported, verified and cached, as soon as it is in
//! (`io::ReadRing`), so a batched lookup answers each key while the other
//! keys' reads are in flight. Files without a descriptor (tests that
//! inject faults), or a kernel without io_uring, read the ranges pushed so
//! far together at the next `next_ready`, as `prefetch` does.

use std::collections::VecDeque;

use super::prefetch::{Run, run_span};
use super::store::PageStore;
use super::{CachePriority, PageRange, StreamedReads};
use crate::Result;
use crate::io::{AlignedBuf, ReadRing, read_exact_at};

/// A read in flight: who asked, what, and the buffer it goes into.
struct Started<'a> {
    tag: usize,
    run: Run<'a>,
    image: AlignedBuf,
}

pub(super) struct RingReads<'a> {
    /// Declared first, so dropped first: its drop waits for every read in
    /// flight, whose buffers `slots` holds.
    ring: Option<ReadRing>,
    store: &'a PageStore,
    priority: CachePriority,
    /// Reads in flight, by the ring's tag.
    slots: Vec<Option<Started<'a>>>,
    free_slots: Vec<usize>,
    /// Tags whose ranges are in the cache, not yet reported.
    ready: VecDeque<usize>,
    /// Ranges the ring cannot read, read together at the next report.
    unstarted: Vec<(usize, Run<'a>)>,
}

impl<'a> RingReads<'a> {
    pub(super) fn new(store: &'a PageStore, priority: CachePriority) -> Self {
        RingReads {
            ring: ReadRing::new(),
            store,
            priority,
            slots: Vec::new(),
            free_slots: Vec::new(),
            ready: VecDeque::new(),
            unstarted: Vec::new(),
        }
    }

    fn start(&mut self, tag: usize, run: Run<'a>) -> Result<()> {
        let (Some(ring), Some(fd)) = (self.ring.as_mut(), run.0.file.batch_fd()) else {
            self.unstarted.push((tag, run));
            return Ok(());
        };
        let (offset, len) = run_span(run);
        let len_u32 = u32::try_from(len)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        let slot = self.free_slots.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        let started = self.slots[slot].insert(Started {
            tag,
            run,
            image: AlignedBuf::zeroed(len),
        });
        let buf = started.image.as_mut_ptr();
        // SAFETY: the image's allocation does not move with the `Started`
        // that owns it, and is freed only once the ring has returned this
        // read (`next_ready` then empties the slot) or has been dropped
        // (it is declared before `slots`); the page file, and so `fd`,
        // outlives `self`.
        unsafe { ring.start(fd, buf, len_u32, offset, slot as u64) }?;
        Ok(())
    }

    /// Reads every unstarted range at once and marks their tags ready.
    fn read_unstarted(&mut self) -> Result<()> {
        let unstarted = std::mem::take(&mut self.unstarted);
        let runs = unstarted.iter().map(|&(_, run)| run).collect();
        self.store.read_runs(runs, self.priority)?;
        self.ready.extend(unstarted.into_iter().map(|(tag, _)| tag));
        Ok(())
    }

    /// Verifies and caches the next read the ring returns; `None` when it
    /// has none in flight.
    fn finish_next(&mut self) -> Result<Option<usize>> {
        let Some(ring) = self.ring.as_mut() else {
            return Ok(None);
        };
        let Some((slot, outcome)) = ring.next_done()? else {
            return Ok(None);
        };
        let slot = slot as usize;
        let Started {
            tag,
            run,
            mut image,
        } = self.slots[slot]
            .take()
            .expect("the ring returns started reads");
        self.free_slots.push(slot);
        let offset = run_span(run).0;
        // A short read (the kernel asked to retry, or the file ends) is
        // finished here; past the end it fails as a plain read would.
        let outcome = outcome.and_then(|done| match done < image.len() {
            true => read_exact_at(&*run.0.file, &mut image[done..], offset + done as u64),
            false => Ok(()),
        });
        self.store
            .accept_run(run, outcome.map(|()| image), self.priority)?;
        Ok(Some(tag))
    }
}

impl StreamedReads for RingReads<'_> {
    fn push(&mut self, range: PageRange, tag: usize) -> Result<()> {
        match self.store.uncached_run(range)? {
            Some(run) => self.start(tag, run),
            None => {
                self.ready.push_back(tag);
                Ok(())
            }
        }
    }

    fn next_ready(&mut self) -> Result<Option<usize>> {
        if let Some(tag) = self.ready.pop_front() {
            return Ok(Some(tag));
        }
        if !self.unstarted.is_empty() {
            self.read_unstarted()?;
            return Ok(self.ready.pop_front());
        }
        self.finish_next()
    }
}
