//! The checkpoint pipeline: frozen MemTables go, oldest first, into the tree
//! store below them on a background thread (with a pool of merge threads);
//! each checkpoint is durable before the MemTable is dropped and the WAL
//! segments it covered are trimmed. Writers that find no free frozen slot,
//! and callers of `checkpoint_now`, wait here for a checkpoint to end.

mod control;
pub(crate) mod io_priority;
mod pipeline;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{Error, Result};
pub(crate) use control::{Control, ControlState, WorkerGuard};
pub(crate) use io_priority::CheckpointIoPriority;
pub(crate) use pipeline::{PanicIsFailure, Pipeline};

/// At most this many frozen MemTables wait for their checkpoint; a writer
/// that would freeze one more waits (a write stall) instead of queueing
/// without bound. One: writers fill the active MemTable while the frozen
/// one is checkpointed. A second frozen MemTable let a 10M-record load
/// run 5% faster with the B+-tree MemTable, but its peak RSS was 60-70 MiB
/// higher, past the budget plus 25% (`docs/benchmark-log.md`, "The B+-tree
/// MemTable").
pub(crate) const MAX_FROZEN_MEMTABLES: usize = 1;

/// What the checkpoint pipeline is configured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CheckpointConfig {
    /// Threads of the merge pool (`Options::checkpoint_threads`).
    pub threads: usize,
    /// Whether checkpoints run in the idle I/O class while nobody waits
    /// for one (`Options::checkpoint_io_idle`).
    pub io_idle: bool,
}

/// The checkpoint pipeline's shared parts: the signals to and from its
/// thread, who waits for it, and the merge threads it runs on.
#[derive(Debug)]
pub(crate) struct Checkpoints {
    pub control: Arc<Control>,
    /// Threads waiting for a checkpoint (writers held back, callers of
    /// `checkpoint_now`): checkpoints do not go idle while any does.
    waiters: AtomicUsize,
    /// The checkpoint threads' I/O class; `None` when `io_idle` is off
    /// (they keep the default).
    idle_io: Option<Arc<CheckpointIoPriority>>,
    /// Runs the data-parallel parts of a checkpoint (merges, leaf
    /// serialisation).
    workers: rayon::ThreadPool,
}

impl Checkpoints {
    /// The pipeline of a database whose tree covers `covered_seq`.
    pub fn new(covered_seq: u64, config: &CheckpointConfig) -> Result<Checkpoints> {
        let io_priority = Arc::new(CheckpointIoPriority::default());
        let joining = io_priority.clone();
        let workers = rayon::ThreadPoolBuilder::new()
            .num_threads(config.threads)
            .thread_name(|i| format!("turtlekv-merge-{i}"))
            .start_handler(move |_| joining.join_current_thread())
            .build()
            .map_err(|e| Error::Io(std::io::Error::other(e.to_string())))?;
        Ok(Checkpoints {
            control: Arc::new(Control::new(covered_seq)),
            waiters: AtomicUsize::new(0),
            idle_io: config.io_idle.then_some(io_priority),
            workers,
        })
    }

    pub fn workers(&self) -> &rayon::ThreadPool {
        &self.workers
    }

    /// The checkpoint threads' I/O class, when they may run idle.
    pub fn idle_io(&self) -> Option<&Arc<CheckpointIoPriority>> {
        self.idle_io.as_ref()
    }

    /// Idle I/O for the checkpoint about to run while nobody waits; a
    /// writer that has to wait for it raises it the moment it starts
    /// waiting, and so does a close (which joins the checkpoint thread).
    pub fn run_idle_while_nobody_waits(&self) {
        if let Some(io) = &self.idle_io {
            io.set_idle_when(|| {
                self.waiters.load(Ordering::Acquire) == 0 && !self.control.lock().shutdown
            });
        }
    }

    /// Marks the caller as waiting for a checkpoint until the guard drops,
    /// and raises the checkpoint's threads to the normal I/O class
    /// (`io_priority`): no checkpoint runs idle while anyone waits for one.
    pub fn wait_on_checkpoints(&self) -> CheckpointWaiter<'_> {
        self.waiters.fetch_add(1, Ordering::AcqRel);
        if let Some(io) = &self.idle_io {
            io.set_idle(false);
        }
        CheckpointWaiter(self)
    }

    /// Waits, as a waiter, until `done` holds (checked under the control's
    /// lock, after every checkpoint's end), or the checkpoint thread failed.
    pub fn wait_until(&self, done: impl Fn(&ControlState) -> bool) -> Result<()> {
        let _waiting = self.wait_on_checkpoints();
        let mut control = self.control.lock();
        while !done(&control) {
            if let Some(failure) = &control.failure {
                return Err(Error::Poisoned {
                    cause: failure.clone(),
                });
            }
            self.control.wait_for_progress(&mut control);
        }
        Ok(())
    }

    /// Waits until a checkpoint covering `seq` has ended (`completed_seq`),
    /// or the checkpoint thread failed.
    pub fn wait_for_checkpoint_through(&self, seq: u64) -> Result<()> {
        self.wait_until(|control| control.completed_seq >= seq)
    }
}

/// A thread waiting for a checkpoint (`Checkpoints::wait_on_checkpoints`).
pub(crate) struct CheckpointWaiter<'a>(&'a Checkpoints);

impl Drop for CheckpointWaiter<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::AcqRel);
    }
}
