//! Group commit: writers queue their batches; whoever finds no leader at
//! work becomes the leader, takes every queued batch, and commits them with
//! one `write` (and at most one `fdatasync`) while the others wait.

use std::collections::{HashMap, VecDeque};

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

/// One writer's batch, waiting for a leader.
#[derive(Debug)]
pub(crate) struct Request {
    ticket: u64,
    pub batch: WriteBatch,
    pub sync: bool,
    /// Freeze the MemTable before this group is applied (for `checkpoint_now`).
    pub freeze: bool,
}

#[derive(Debug, Default)]
struct Queue {
    next_ticket: u64,
    waiting: VecDeque<Request>,
    done: HashMap<u64, Result<()>>,
    leader_active: bool,
    /// Requests in the last group that asked for a sync.
    last_sync_group_len: usize,
}

/// The queue writers meet in.
#[derive(Debug, Default)]
pub(crate) struct GroupCommit {
    queue: Mutex<Queue>,
    changed: Condvar,
    /// Wakes a leader gathering sync writers when a request arrives.
    arrived: Condvar,
}

impl GroupCommit {
    /// Queues `batch` and returns once a leader (perhaps this caller) has
    /// committed it. `lead` commits a whole group; only one runs at a time,
    /// so it can own the log and publish sequence numbers in order.
    pub fn submit(
        &self,
        batch: WriteBatch,
        sync: bool,
        freeze: bool,
        lead: impl Fn(&[Request]) -> Result<()>,
    ) -> Result<()> {
        let mut q = self.queue.lock();
        let ticket = q.next_ticket;
        q.next_ticket += 1;
        q.waiting.push_back(Request {
            ticket,
            batch,
            sync,
            freeze,
        });
        self.arrived.notify_one();
        loop {
            if let Some(result) = q.done.remove(&ticket) {
                return result;
            }
            if q.leader_active {
                self.changed.wait(&mut q);
                continue;
            }
            q.leader_active = true;
            let mut group = take_group(&mut q.waiting);
            self.gather_sync_writers(&mut q, &mut group);
            drop(q);
            let result = lead(&group);
            q = self.queue.lock();
            q.leader_active = false;
            for req in &group {
                q.done.insert(req.ticket, share(&result));
            }
            self.changed.notify_all();
        }
    }
}

impl GroupCommit {
    /// For a group that will sync: waits briefly for as many sync writers as
    /// the last synced group had, and adds them (see `SYNC_GATHER_WAIT`).
    fn gather_sync_writers(&self, q: &mut MutexGuard<'_, Queue>, group: &mut Vec<Request>) {
        let syncing = |g: &[Request]| g.iter().filter(|r| r.sync).count();
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

fn take_group(waiting: &mut VecDeque<Request>) -> Vec<Request> {
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
