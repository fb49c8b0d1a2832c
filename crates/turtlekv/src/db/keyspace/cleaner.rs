//! Deletes the keys of dropped keyspaces, in the background.
//!
//! A drop is durable and final once its catalog batch is: the keyspace's
//! id is never given again, so whatever of its keys remains is out of
//! every live keyspace's range. The cleaner then writes tombstones over
//! those keys in batches, checkpoints them, and asks the reclamation steps
//! between checkpoints to flush the keyspace's range down to the leaves,
//! where the tombstones remove the items and free the pages they held.
//! Its last batch deletes the drop's catalog key; a crash before that
//! restarts the cleaning at the next open (a crash after it leaves the
//! tombstones to the space policy).

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

use super::catalog::dropped_key;
use super::tag::{KeyspaceId, Tag};
use crate::db::DbInner;
use crate::db::iter::Iter;
use crate::{Result, WriteBatch};

/// Keys deleted per batch: a few hundred KiB of WAL, so writers queued
/// behind the cleaner wait little.
const KEYS_PER_BATCH: usize = 4096;

/// The cleaning thread and its queue.
#[derive(Debug, Default)]
pub(crate) struct Cleaner {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// Dropped keyspaces whose keys are not all deleted yet.
    pending: AtomicU64,
    /// Key batches deleted so far (this handle).
    pub batches_written: AtomicU64,
}

#[derive(Debug, Default)]
struct Queue {
    ids: VecDeque<KeyspaceId>,
    stopping: bool,
    thread: Option<JoinHandle<()>>,
}

impl Cleaner {
    /// Queues keyspace `id` for cleaning, starting the thread if needed.
    pub fn enqueue(&self, db: &Arc<DbInner>, id: KeyspaceId) {
        let mut queue = self.queue.lock();
        if queue.stopping {
            // Closing: the next open finds the drop's catalog key.
            return;
        }
        queue.ids.push_back(id);
        self.pending.fetch_add(1, Ordering::Relaxed);
        self.wake.notify_one();
        if queue.thread.is_none() {
            let db = db.clone();
            let spawned = std::thread::Builder::new()
                .name("turtlekv-keyspace-cleaner".into())
                .spawn(move || db.keyspaces.cleaner.run(&db));
            // Without a thread the keys stay until the next open cleans.
            queue.thread = spawned.ok();
        }
    }

    /// Dropped keyspaces whose keys are still being deleted.
    pub fn pending(&self) -> u64 {
        self.pending.load(Ordering::Relaxed)
    }

    /// Stops the thread after its current batch and waits for it. What is
    /// left is cleaned after the next open.
    pub fn stop(&self) {
        let thread = {
            let mut queue = self.queue.lock();
            queue.stopping = true;
            self.wake.notify_all();
            queue.thread.take()
        };
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }

    fn run(&self, db: &Arc<DbInner>) {
        while let Some(id) = self.next_id() {
            match self.clean(db, id) {
                Ok(true) => {
                    self.pending.fetch_sub(1, Ordering::Relaxed);
                }
                // Stopping, or a failed write (which poisoned the handle):
                // the next open resumes.
                Ok(false) | Err(_) => return,
            }
        }
    }

    fn next_id(&self) -> Option<KeyspaceId> {
        let mut queue = self.queue.lock();
        loop {
            if queue.stopping {
                return None;
            }
            if let Some(id) = queue.ids.pop_front() {
                return Some(id);
            }
            self.wake.wait(&mut queue);
        }
    }

    fn stopping(&self) -> bool {
        self.queue.lock().stopping
    }

    /// Deletes every key of keyspace `id`, then its drop's catalog key;
    /// `false` when it stopped first.
    fn clean(&self, db: &Arc<DbInner>, id: KeyspaceId) -> Result<bool> {
        let (mut lower, upper) = Tag::of(id).bounds(Bound::Unbounded, Bound::Unbounded);
        loop {
            if self.stopping() {
                return Ok(false);
            }
            let view = db.versions.read_view();
            let keys = Iter::new(db.clone(), view, lower.clone(), upper.clone())
                .take(KEYS_PER_BATCH)
                .map(|item| item.map(|(key, _)| key))
                .collect::<Result<Vec<Bytes>>>()?;
            let Some(last) = keys.last().cloned() else {
                break;
            };
            let mut batch = WriteBatch::new();
            for key in &keys {
                batch.push_stored(key, None);
            }
            db.submit_batch(batch, false, None)?;
            self.batches_written.fetch_add(1, Ordering::Relaxed);
            lower = Bound::Excluded(last);
        }
        // The tombstones free pages only once they reach the leaves: put
        // them in the tree, and have the reclamation steps flush the
        // keyspace's range down whatever the space policy says.
        db.checkpoint_now()?;
        if let Some(trees) = db.versions.trees() {
            let (lower, upper) = Tag::of(id).bounds(Bound::Unbounded, Bound::Unbounded);
            let Bound::Included(lower) = lower else {
                unreachable!("a tag's range starts at the tag");
            };
            trees.request_drain(lower, upper);
        }
        let mut batch = WriteBatch::new();
        batch.push_stored(&dropped_key(id), None);
        db.submit_batch(batch, false, None)?;
        Ok(true)
    }
}
