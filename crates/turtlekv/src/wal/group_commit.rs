//! Group commit: writers queue their batches; whoever finds no leader at
//! work becomes the leader, takes every queued batch, and commits them with
//! one `write` (and at most one `fdatasync`) while the others wait.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::{Error, Result, WriteBatch};

/// Caps one group so a leader's latency stays bounded under heavy load.
const MAX_GROUP_BYTES: u64 = 4 << 20;

/// How long a leader about to `fdatasync` for fewer writers than the last
/// synced group had waits for the others to queue. Closed-loop sync
/// writers return from one group and come back a few microseconds later;
/// without the wait, two such writers alternate between groups of two and
/// groups of one (0.75 syncs per write instead of 0.5). Small next to an
/// fsync, and paid only while several writers are syncing.
const SYNC_GATHER_WAIT: std::time::Duration = std::time::Duration::from_micros(200);

/// How long a writer that finds a leader at work spins (with the queue
/// unlocked) for the group in progress to finish before it sleeps. A
/// leader's group without a sync takes a few microseconds (one `write`,
/// the MemTable inserts), less than a futex sleep and wake-up cost the two
/// threads together.
const FOLLOWER_SPIN: std::time::Duration = std::time::Duration::from_micros(10);

/// One writer's batch, waiting for a leader, with whatever the writer
/// prepared for the leader (`T`).
#[derive(Debug)]
pub(crate) struct Request<T = ()> {
    ticket: u64,
    pub batch: WriteBatch,
    pub sync: bool,
    /// Freeze the MemTable before this group is applied (for `checkpoint_now`).
    pub freeze: bool,
    pub prepared: T,
}

impl<T> Request<T> {
    /// A request no queue carries: the leader of `try_lead_alone` commits
    /// it itself.
    pub fn unqueued(batch: WriteBatch, prepared: T) -> Self {
        Request {
            ticket: 0,
            batch,
            sync: false,
            freeze: false,
            prepared,
        }
    }
}

#[derive(Debug)]
struct Queue<T> {
    next_ticket: u64,
    waiting: VecDeque<Request<T>>,
    done: HashMap<u64, Result<()>>,
    leader_active: bool,
    /// A leader panicked: nobody leads again, every write fails (as after
    /// a failed WAL write), instead of waiting for a group that never ends.
    leader_panicked: bool,
    /// Requests in the last group that asked for a sync.
    last_sync_group_len: usize,
}

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Queue {
            next_ticket: 0,
            waiting: VecDeque::new(),
            done: HashMap::new(),
            leader_active: false,
            leader_panicked: false,
            last_sync_group_len: 0,
        }
    }
}

/// The queue writers meet in; `T` is what each writer prepares for the
/// leader with its batch.
#[derive(Debug)]
pub(crate) struct GroupCommit<T = ()> {
    queue: Mutex<Queue<T>>,
    changed: Condvar,
    /// Wakes a leader gathering sync writers when a request arrives.
    arrived: Condvar,
    /// Groups finished so far: what a spinning follower watches.
    groups_done: AtomicU64,
    /// Followers spinning now, and how many may: one core fewer than the
    /// process may use, so that spinners never take the leader's core.
    /// With more writers than cores, the rest sleep at once.
    spinners: AtomicUsize,
    max_spinners: usize,
}

impl<T> Default for GroupCommit<T> {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        GroupCommit {
            queue: Mutex::default(),
            changed: Condvar::new(),
            arrived: Condvar::new(),
            groups_done: AtomicU64::new(0),
            spinners: AtomicUsize::new(0),
            max_spinners: cores - 1,
        }
    }
}

impl<T> GroupCommit<T> {
    /// Queues `batch` and returns once a leader (perhaps this caller) has
    /// committed it. `lead` commits a whole group; only one runs at a time,
    /// so it can own the log and publish sequence numbers in order.
    pub fn submit(
        &self,
        batch: WriteBatch,
        sync: bool,
        freeze: bool,
        prepared: T,
        lead: impl Fn(&[Request<T>]) -> Result<()>,
    ) -> Result<()> {
        let mut q = self.queue.lock();
        if q.leader_panicked {
            return Err(leader_panicked());
        }
        let ticket = q.next_ticket;
        q.next_ticket += 1;
        q.waiting.push_back(Request {
            ticket,
            batch,
            sync,
            freeze,
            prepared,
        });
        self.arrived.notify_one();
        let mut may_spin = !sync;
        loop {
            if let Some(result) = q.done.remove(&ticket) {
                return result;
            }
            if q.leader_active {
                if std::mem::take(&mut may_spin) && self.claim_spinner() {
                    let seen = self.groups_done.load(Ordering::Acquire);
                    MutexGuard::unlocked(&mut q, || self.spin_until_group_done(seen));
                } else {
                    self.changed.wait(&mut q);
                }
                continue;
            }
            if q.leader_panicked {
                return Err(leader_panicked());
            }
            q.leader_active = true;
            let mut group = take_group(&mut q.waiting);
            self.gather_sync_writers(&mut q, &mut group);
            drop(q);
            let unwinding = LeaderUnwind {
                commit: self,
                group: &group,
            };
            let result = lead(&group);
            std::mem::forget(unwinding);
            q = self.queue.lock();
            q.leader_active = false;
            for req in &group {
                q.done.insert(req.ticket, share(&result));
            }
            self.groups_done.fetch_add(1, Ordering::Release);
            self.changed.notify_all();
        }
    }
}

impl<T> GroupCommit<T> {
    /// Runs `lead` as the leader of an empty group if no leader runs and no
    /// writer waits; `None`, without running it, otherwise. For a thread
    /// that must never wait behind a leader: the checkpoint thread, which a
    /// leader stalled for a frozen-MemTable slot waits for.
    pub fn try_lead_alone<R>(&self, lead: impl FnOnce() -> R) -> Option<R> {
        let mut q = self.queue.lock();
        if q.leader_active || !q.waiting.is_empty() || q.leader_panicked {
            return None;
        }
        q.leader_active = true;
        drop(q);
        let unwinding = LeaderUnwind {
            commit: self,
            group: &[],
        };
        let result = lead();
        std::mem::forget(unwinding);
        let mut q = self.queue.lock();
        q.leader_active = false;
        // Writers that queued meanwhile: one of them leads next.
        self.groups_done.fetch_add(1, Ordering::Release);
        self.changed.notify_all();
        drop(q);
        Some(result)
    }

    /// Counts the caller as a spinner, unless `max_spinners` spin already
    /// (then it sleeps without unlocking the queue first).
    fn claim_spinner(&self) -> bool {
        if self.spinners.fetch_add(1, Ordering::Relaxed) >= self.max_spinners {
            self.spinners.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Spins until a group finishes after `seen` were, for at most
    /// `FOLLOWER_SPIN`; ends the spinner count `claim_spinner` took.
    fn spin_until_group_done(&self, seen: u64) {
        let started = std::time::Instant::now();
        while self.groups_done.load(Ordering::Acquire) == seen {
            for _ in 0..32 {
                std::hint::spin_loop();
            }
            if started.elapsed() > FOLLOWER_SPIN {
                break;
            }
        }
        self.spinners.fetch_sub(1, Ordering::Relaxed);
    }

    /// For a group that will sync: waits briefly for as many sync writers as
    /// the last synced group had, and adds them (see `SYNC_GATHER_WAIT`).
    fn gather_sync_writers(&self, q: &mut MutexGuard<'_, Queue<T>>, group: &mut Vec<Request<T>>) {
        let syncing = |g: &[Request<T>]| g.iter().filter(|r| r.sync).count();
        let expected = q.last_sync_group_len;
        if syncing(group) > 0 && syncing(group) < expected {
            let deadline = std::time::Instant::now() + SYNC_GATHER_WAIT;
            while syncing(group) + syncing(q.waiting.make_contiguous()) < expected {
                if self.arrived.wait_until(q, deadline).timed_out() {
                    break;
                }
            }
            group.extend(take_group(&mut q.waiting));
        }
        q.last_sync_group_len = syncing(group);
    }
}

/// Dropped only if `lead` unwinds (a bug): ends the group with an error
/// for each of its writers and wakes everyone, so that no writer waits for
/// a leader that is gone.
struct LeaderUnwind<'a, T> {
    commit: &'a GroupCommit<T>,
    group: &'a [Request<T>],
}

impl<T> Drop for LeaderUnwind<'_, T> {
    fn drop(&mut self) {
        let mut q = self.commit.queue.lock();
        q.leader_active = false;
        q.leader_panicked = true;
        for req in self.group {
            q.done.insert(req.ticket, Err(leader_panicked()));
        }
        self.commit.groups_done.fetch_add(1, Ordering::Release);
        self.commit.changed.notify_all();
    }
}

fn leader_panicked() -> Error {
    Error::Poisoned {
        cause: "a write's leader panicked".to_string(),
    }
}

fn take_group<T>(waiting: &mut VecDeque<Request<T>>) -> Vec<Request<T>> {
    let mut group = Vec::new();
    let mut bytes = 0;
    while let Some(req) = waiting.front() {
        if !group.is_empty() && bytes + req.batch.user_bytes() > MAX_GROUP_BYTES {
            break;
        }
        bytes += req.batch.user_bytes();
        group.extend(waiting.pop_front());
    }
    group
}

/// Each writer of a failed group gets its own copy of the error.
fn share(result: &Result<()>) -> Result<()> {
    match result {
        Ok(()) => Ok(()),
        Err(Error::Io(e)) => Err(Error::Io(match e.raw_os_error() {
            Some(code) => std::io::Error::from_raw_os_error(code),
            None => std::io::Error::new(e.kind(), e.to_string()),
        })),
        Err(Error::Poisoned { cause }) => Err(Error::Poisoned {
            cause: cause.clone(),
        }),
        // A leader only fails with the two kinds above; keep the text if not.
        Err(other) => Err(Error::Io(std::io::Error::other(other.to_string()))),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// Writers that spin or sleep behind a leader each return only after a
    /// leader committed their batch, and every batch is committed once.
    #[test]
    fn every_writer_returns_after_its_batch_was_committed_once() {
        const WRITERS: u32 = 4;
        const BATCHES: u32 = 500;
        let commit = GroupCommit::<()>::default();
        let committed = Mutex::new(HashSet::new());
        let groups = AtomicU64::new(0);
        std::thread::scope(|s| {
            for writer in 0..WRITERS {
                let (commit, committed, groups) = (&commit, &committed, &groups);
                s.spawn(move || {
                    for i in 0..BATCHES {
                        let key = [writer.to_be_bytes(), i.to_be_bytes()].concat();
                        let mut batch = WriteBatch::new();
                        batch.put(&key, b"v");
                        let lead = |group: &[Request<()>]| {
                            groups.fetch_add(1, Ordering::Relaxed);
                            // A leader's work takes a while, so followers
                            // both spin and sleep.
                            std::thread::sleep(std::time::Duration::from_micros(20));
                            let mut done = committed.lock();
                            for req in group {
                                assert!(done.insert(req.batch.ops[0].user_key().to_vec()));
                            }
                            Ok(())
                        };
                        commit.submit(batch, false, false, (), lead).unwrap();
                        assert!(committed.lock().contains(&key));
                    }
                });
            }
        });
        assert_eq!(committed.lock().len(), (WRITERS * BATCHES) as usize);
        assert!(groups.load(Ordering::Relaxed) < u64::from(WRITERS * BATCHES));
    }

    /// `try_lead_alone` never waits: it gives up while a leader runs, and a
    /// writer that queues while it leads is committed after it.
    #[test]
    fn leading_alone_gives_up_behind_a_leader_and_lets_writers_follow() {
        let commit = GroupCommit::<()>::default();
        let (entered, leading) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            let commit = &commit;
            s.spawn(move || {
                let lead = |_: &[Request<()>]| {
                    entered.send(()).unwrap();
                    released.recv().unwrap();
                    Ok(())
                };
                commit
                    .submit(WriteBatch::new(), false, false, (), lead)
                    .unwrap();
            });
            leading.recv().unwrap();
            assert_eq!(commit.try_lead_alone(|| 1), None, "a leader runs");
            release.send(()).unwrap();
        });
        let committed = AtomicU64::new(0);
        std::thread::scope(|s| {
            let ran = commit.try_lead_alone(|| {
                s.spawn(|| {
                    let lead = |group: &[Request<()>]| {
                        committed.fetch_add(group.len() as u64, Ordering::SeqCst);
                        Ok(())
                    };
                    commit
                        .submit(WriteBatch::new(), false, false, (), lead)
                        .unwrap();
                });
                // The writer queues behind this leader and waits.
                while commit.queue.lock().waiting.is_empty() {
                    std::thread::yield_now();
                }
                assert_eq!(committed.load(Ordering::SeqCst), 0);
                7
            });
            assert_eq!(ran, Some(7));
        });
        assert_eq!(committed.load(Ordering::SeqCst), 1, "the writer led next");
    }

    /// A leader that panics (a bug) must not leave the group commit led
    /// forever: its group and every later writer fail instead of waiting.
    #[test]
    fn a_panicking_leader_fails_later_writers_instead_of_wedging_them() {
        let commit = std::sync::Arc::new(GroupCommit::<()>::default());
        let c = commit.clone();
        let led = std::thread::spawn(move || {
            c.submit(WriteBatch::new(), false, false, (), |_| {
                panic!("leader bug")
            })
        })
        .join();
        assert!(led.is_err(), "the leader panicked");
        let (tx, rx) = std::sync::mpsc::channel();
        let c = commit.clone();
        std::thread::spawn(move || {
            let r = c.submit(WriteBatch::new(), false, false, (), |_| Ok(()));
            let _ = tx.send(matches!(r, Err(Error::Poisoned { .. })));
        });
        let failed = rx.recv_timeout(std::time::Duration::from_secs(5));
        assert_eq!(failed, Ok(true), "the next writer hangs or succeeds");
        assert_eq!(commit.try_lead_alone(|| ()), None);
    }
}
