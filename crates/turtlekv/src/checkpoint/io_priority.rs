//! The I/O priority of the threads that run checkpoints.
//!
//! Out of cache a checkpoint's reads and writes share the disk with the
//! gets, which a client waits on. With `Options::checkpoint_io_idle`, while
//! the checkpoint pipeline has slack (no writer waiting for a frozen
//! MemTable to go), the checkpoint's threads ask the kernel for the idle
//! I/O class, so that the device's scheduler serves the gets first.
//! Measured on YCSB A out of cache: read p99.9 55-65% lower; the deferred
//! I/O then slows whatever comes next (`docs/benchmarks.md`, "Checkpoint
//! I/O at idle priority").
//!
//! An idle thread's I/O can wait for as long as other I/O keeps the device
//! busy, so the moment a writer has to wait for a checkpoint (or a caller
//! of `checkpoint_now` does), the waiter raises the checkpoint's threads
//! back to the normal class, by thread id, without waiting for them to
//! reach a point where they could do it themselves.
//!
//! Linux only (`ioprio_set`); elsewhere, and where the call fails, the
//! threads keep the default class.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The checkpoint's threads and the class they run in.
#[derive(Debug, Default)]
pub struct CheckpointIoPriority {
    /// Kernel thread ids of the threads that joined.
    threads: Mutex<Vec<i32>>,
    idle: AtomicBool,
}

impl CheckpointIoPriority {
    /// Adds the calling thread, in the current class.
    pub fn join_current_thread(&self) {
        let Some(tid) = current_thread_id() else {
            return;
        };
        let mut threads = self.threads.lock();
        threads.push(tid);
        set_class(tid, self.idle.load(Ordering::Acquire));
    }

    /// Puts every joined thread in the idle class or back in the normal one.
    pub fn set_idle(&self, idle: bool) {
        self.set_idle_when(|| idle);
    }

    /// `set_idle` with the class decided under the lock that every change
    /// takes, so that a decision to go idle cannot land after (and undo) a
    /// concurrent raise whose reason it did not see.
    pub fn set_idle_when(&self, decide: impl FnOnce() -> bool) {
        // Under the lock, so that a thread joining meanwhile takes the new
        // class and no two calls interleave their per-thread changes.
        let threads = self.threads.lock();
        let idle = decide();
        if self.idle.load(Ordering::Acquire) == idle {
            return;
        }
        for &tid in threads.iter() {
            set_class(tid, idle);
        }
        // Published once every thread has its class: `is_idle` never runs
        // ahead of the threads themselves.
        self.idle.store(idle, Ordering::Release);
    }

    /// Whether the joined threads are (asked to be) idle.
    #[cfg(test)]
    pub(crate) fn is_idle(&self) -> bool {
        self.idle.load(Ordering::Acquire)
    }

    /// The joined threads' kernel ids, for tests.
    #[cfg(test)]
    pub(crate) fn thread_ids(&self) -> Vec<i32> {
        self.threads.lock().clone()
    }
}

#[cfg(target_os = "linux")]
mod sys {
    /// `IOPRIO_WHO_PROCESS`: the `who` argument is a thread id.
    const WHO_THREAD: libc::c_long = 1;
    const CLASS_SHIFT: u32 = 13;
    const CLASS_IDLE: libc::c_long = 3;

    pub(super) fn current_thread_id() -> Option<i32> {
        // SAFETY: gettid has no preconditions.
        Some(unsafe { libc::gettid() })
    }

    /// Idle, or no class (the kernel's default, from the nice value).
    pub(super) fn set_class(tid: i32, idle: bool) {
        let value = if idle { CLASS_IDLE << CLASS_SHIFT } else { 0 };
        // SAFETY: ioprio_set reads its integer arguments only. A thread
        // that has exited makes it fail with ESRCH, which changes nothing.
        unsafe {
            libc::syscall(
                libc::SYS_ioprio_set,
                WHO_THREAD,
                libc::c_long::from(tid),
                value,
            );
        }
    }

    /// The class `ioprio_get` reports for `tid` (0: none, 3: idle).
    #[cfg(test)]
    pub(crate) fn class_of(tid: i32) -> libc::c_long {
        // SAFETY: as in `set_class`.
        let value =
            unsafe { libc::syscall(libc::SYS_ioprio_get, WHO_THREAD, libc::c_long::from(tid)) };
        value >> CLASS_SHIFT
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    pub(super) fn current_thread_id() -> Option<i32> {
        None
    }

    pub(super) fn set_class(_tid: i32, _idle: bool) {}
}

#[cfg(all(test, target_os = "linux"))]
pub(crate) use sys::class_of;
use sys::{current_thread_id, set_class};

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn joined_threads_follow_the_class_from_any_thread() {
        let priority = Arc::new(CheckpointIoPriority::default());
        priority.set_idle(true);
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let joined = priority.clone();
        let thread = std::thread::spawn(move || {
            joined.join_current_thread();
            tx.send(()).unwrap();
            done_rx.recv().unwrap();
        });
        rx.recv().unwrap();
        let tid = priority.thread_ids()[0];
        assert_eq!(sys::class_of(tid), 3, "joined while idle: idle");
        priority.set_idle(false);
        assert_eq!(sys::class_of(tid), 0, "raised from another thread");
        priority.set_idle(true);
        assert_eq!(sys::class_of(tid), 3);
        assert!(priority.is_idle());
        done_tx.send(()).unwrap();
        thread.join().unwrap();
        // The thread is gone: changing the class still succeeds for the
        // rest and does not panic.
        priority.set_idle(false);
    }
}
