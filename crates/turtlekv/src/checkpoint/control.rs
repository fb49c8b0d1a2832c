//! The signals between the checkpoint thread, the writers waiting for it
//! and the close that stops it.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};

/// Shared between writers, the checkpoint thread and `checkpoint_now`.
#[derive(Debug, Default)]
pub(crate) struct Control {
    state: Mutex<ControlState>,
    /// Wakes the checkpoint thread: a MemTable was frozen, or shutdown.
    work: Condvar,
    /// Wakes writers and `checkpoint_now`: a checkpoint finished or failed.
    progress: Condvar,
}

#[derive(Debug, Default)]
pub(crate) struct ControlState {
    pub shutdown: bool,
    /// Why the checkpoint thread stopped, if it failed.
    pub failure: Option<String>,
    /// The sequence covered by the newest checkpoint that has ended: its
    /// version published, the WAL it covered removed, its memory reserve
    /// returned and its counters bumped. A MemTable leaves the frozen list
    /// before all that, so "not frozen any more" does not mean "done".
    pub completed_seq: u64,
}

impl Control {
    /// A control whose checkpoints have covered `covered_seq` (the tree's
    /// at open).
    pub fn new(covered_seq: u64) -> Self {
        let control = Control::default();
        control.state.lock().completed_seq = covered_seq;
        control
    }

    pub fn lock(&self) -> MutexGuard<'_, ControlState> {
        self.state.lock()
    }

    /// Tells the checkpoint thread there is work (or that it should stop).
    pub fn wake_worker(&self) {
        let _guard = self.state.lock();
        self.work.notify_all();
    }

    /// Waits for work, or at most `timeout`.
    pub fn wait_for_work(&self, guard: &mut MutexGuard<'_, ControlState>, timeout: Duration) {
        self.work.wait_for(guard, timeout);
    }

    /// Tells waiting writers that the set of frozen MemTables changed.
    pub fn report_progress(&self) {
        let _guard = self.state.lock();
        self.progress.notify_all();
    }

    /// Records that the checkpoint covering `covered_seq` has ended, and
    /// tells the waiters.
    pub fn report_completed(&self, covered_seq: u64) {
        let mut guard = self.state.lock();
        guard.completed_seq = guard.completed_seq.max(covered_seq);
        self.progress.notify_all();
    }

    /// Records why the checkpoint thread stopped, and wakes every waiter.
    pub fn fail(&self, cause: String) {
        self.state.lock().failure = Some(cause);
        self.report_progress();
    }

    pub fn wait_for_progress(&self, guard: &mut MutexGuard<'_, ControlState>) {
        self.progress.wait(guard);
    }
}

/// Stops and joins the checkpoint thread when the last `Db` handle goes.
#[derive(Debug)]
pub(crate) struct WorkerGuard {
    control: Arc<Control>,
    thread: Option<JoinHandle<()>>,
    /// The checkpoint threads' I/O class, when they may run idle: the
    /// close waits for the running checkpoint, so it must not run idle.
    io: Option<Arc<super::CheckpointIoPriority>>,
}

impl WorkerGuard {
    pub fn new(
        control: Arc<Control>,
        thread: Option<JoinHandle<()>>,
        io: Option<Arc<super::CheckpointIoPriority>>,
    ) -> Self {
        WorkerGuard {
            control,
            thread,
            io,
        }
    }
}

impl Drop for WorkerGuard {
    fn drop(&mut self) {
        self.control.lock().shutdown = true;
        self.control.wake_worker();
        if let Some(io) = &self.io {
            io.set_idle(false);
        }
        if let Some(thread) = self.thread.take() {
            // A panic in the thread has already been reported on stderr;
            // there is nobody left to return it to.
            let _ = thread.join();
        }
    }
}
