//! Reserving a WAL segment's storage ahead of its appends, faulting those
//! pages in and dropping written pages from memory, on a thread of its own.
//!
//! Appends go through a shared mapping of the segment (`io/write_map.rs`).
//! Every 1 MiB step needs storage reserved (`fallocate`) and the written
//! pages dropped (`madvise`): over 200 µs each time, about 1,500 times in a
//! 10M-record load, too long for the group-commit leader, whose turn every
//! writer waits on. And a first write to each 4 KiB page faults (the kernel
//! reads the reserved zeros in and prepares the page for writing): 5% of an
//! in-cache load's samples when the leader takes those faults. So the
//! leader asks this worker for all of it, up to `RESERVE_AHEAD_STEPS` steps
//! ahead (with one step ahead, half as many appends as with no worker still
//! take 200 µs or more: the worker shares two cores with the writers and
//! checkpoints): by the time the appends get to a step, it is reserved and
//! its pages are read in (the leader's first write still makes each
//! writable: see `Populater::populate`). When the worker is late, or
//! failed, the leader reserves the step itself
//! (`SegmentWriter::mapping_reserved_to`). Dropping the worker's handle
//! stops it.

use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

use crate::io::{File, Populater};

/// What the leader asks of the worker.
#[derive(Debug)]
pub(super) struct Request {
    /// Storage to reserve and fault in.
    pub reserve: Range<u64>,
    /// The appends have written everything below this offset.
    pub written_to_bytes: u64,
}

/// The worker of one segment writer.
#[derive(Debug)]
pub(super) struct ReserveAhead {
    requests: Option<mpsc::Sender<Request>>,
    /// The file's storage is reserved, and the mapping's pages present, up
    /// to here (the end of the last step the worker finished).
    ready_to_bytes: Arc<AtomicU64>,
    /// Set by `stop`: the worker drops the requests still queued.
    stopping: Arc<AtomicBool>,
    worker: Option<JoinHandle<()>>,
}

impl ReserveAhead {
    /// Starts the worker for `file`, mapped as `populater`'s mapping.
    pub(super) fn start(file: Arc<dyn File>, mut populater: Populater) -> io::Result<ReserveAhead> {
        let (requests, pending) = mpsc::channel::<Request>();
        let ready_to_bytes = Arc::new(AtomicU64::new(0));
        let ready = ready_to_bytes.clone();
        let stopping = Arc::new(AtomicBool::new(false));
        let stop_asked = stopping.clone();
        let worker = std::thread::Builder::new()
            .name("turtlekv-wal-reserve".into())
            .spawn(move || {
                for Request {
                    reserve,
                    written_to_bytes,
                } in pending
                {
                    if stop_asked.load(Ordering::Acquire) {
                        break;
                    }
                    populater.release_before(written_to_bytes);
                    // A failed reservation is left to the leader, whose own
                    // attempt reports it or falls back to `write`. The
                    // worker stops there: `ready` says that everything below
                    // it is reserved, and a later step it reserved would
                    // raise it over the hole this one left, where a write
                    // through the mapping faults with SIGBUS on a full disk.
                    if file
                        .allocate(reserve.start, reserve.end - reserve.start)
                        .is_err()
                    {
                        break;
                    }
                    // A step the leader reserved itself meanwhile, and has
                    // written, would only come back into memory.
                    if reserve.end > populater.released_to_bytes() {
                        populater.populate(reserve.start, reserve.end - reserve.start);
                    }
                    ready.fetch_max(reserve.end, Ordering::Release);
                }
            })?;
        Ok(ReserveAhead {
            requests: Some(requests),
            ready_to_bytes,
            stopping,
            worker: Some(worker),
        })
    }

    /// Asks for a step to be reserved and faulted in, and the written
    /// pages to be dropped.
    pub(super) fn request(&self, request: Request) {
        if let Some(requests) = &self.requests {
            // The worker only ends when this sender is dropped.
            let _ = requests.send(request);
        }
    }

    /// How far storage is reserved and faulted in by the worker.
    pub(super) fn ready_to_bytes(&self) -> u64 {
        self.ready_to_bytes.load(Ordering::Acquire)
    }

    /// The worker has ended (after a failed reservation, or when stopped).
    #[cfg(test)]
    pub(super) fn has_ended(&self) -> bool {
        self.worker.as_ref().is_none_or(|w| w.is_finished())
    }
}

impl Drop for ReserveAhead {
    /// Ends the worker, dropping the steps not started yet (a finished
    /// segment needs none of them). After it, the file's length changes
    /// only by its owner's hand: a segment cut back to its last record
    /// stays cut.
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::Release);
        self.requests = None;
        if let Some(worker) = self.worker.take() {
            // The worker does not panic; if it did, there is nothing left
            // of it to stop.
            let _ = worker.join();
        }
    }
}
