//! The published state of the store and the log that covers what its tree
//! does not: which MemTables and which tree version hold the data, the
//! highest sequence number readers may see, and the WAL.
//!
//! Only the active MemTable changes in place. Everything else changes by
//! publishing a new [`State`], one transition at a time: a freeze (the
//! active MemTable joins the frozen ones, the WAL starts a new segment) and
//! a checkpoint's end (the oldest frozen MemTable gives way to the tree
//! version holding it, then the WAL segments it covered go).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::{ArcSwap, Guard};
use parking_lot::{Mutex, MutexGuard};

use super::{Frozen, ReadView, State, TreeStore, TreeVersion};
use crate::mem::MappingPool;
use crate::memtable::new_memtable;
use crate::values::ValueStore;
use crate::wal::Wal;

#[derive(Debug)]
pub(crate) struct VersionSet {
    state: ArcSwap<State>,
    /// Serialises State transitions, which build the next State from the
    /// current one.
    transition: Mutex<()>,
    /// Highest sequence number whose writes are all in the MemTables.
    visible_seq: AtomicU64,
    /// The log; held by the group-commit leader while it writes.
    wal: Mutex<Wal>,
    /// Where checkpoints go; `None` keeps everything in MemTables.
    trees: Option<Arc<dyn TreeStore>>,
    /// Where MemTable arenas take their chunks from (the page cache's).
    memtable_pool: Option<Arc<MappingPool>>,
    /// The value files: a read view pins those it may read.
    values: Arc<ValueStore>,
}

impl VersionSet {
    /// The versions after opening: `state` as recovered, every write up
    /// to `visible_seq` in it, the WAL ready for the next.
    pub fn new(
        state: State,
        visible_seq: u64,
        wal: Wal,
        trees: Option<Arc<dyn TreeStore>>,
        values: Arc<ValueStore>,
    ) -> Self {
        let memtable_pool = trees.as_ref().and_then(|t| t.mapping_pool());
        VersionSet {
            state: ArcSwap::from_pointee(state),
            transition: Mutex::new(()),
            visible_seq: AtomicU64::new(visible_seq),
            wal: Mutex::new(wal),
            trees,
            memtable_pool,
            values,
        }
    }

    /// The State now, without taking a reference count (the hot path).
    pub fn state(&self) -> Guard<Arc<State>> {
        self.state.load()
    }

    /// A State and a sequence number that was visible while it was current.
    pub fn read_view(&self) -> ReadView {
        // Before the sequence number: value files retired after the pin
        // hold only versions below the numbers visible by then.
        let values = self.values.pin();
        loop {
            let state = self.state.load_full();
            let seq = self.visible_seq();
            if Arc::ptr_eq(&state, &self.state.load()) {
                return ReadView {
                    state,
                    seq,
                    _values: values,
                };
            }
        }
    }

    /// Calls `read` with a consistent State and sequence number, without
    /// taking a reference count on the State (point reads).
    pub fn with_latest<T>(&self, read: impl Fn(&State, u64) -> T) -> T {
        loop {
            let state = self.state.load();
            let seq = self.visible_seq();
            if Arc::ptr_eq(&state, &self.state.load()) {
                return read(&state, seq);
            }
        }
    }

    /// Highest sequence number readers may see.
    pub fn visible_seq(&self) -> u64 {
        self.visible_seq.load(Ordering::Acquire)
    }

    /// Makes every write up to `seq` visible; the leader calls it after it
    /// applied its group to the active MemTable.
    pub fn publish_visible(&self, seq: u64) {
        self.visible_seq.store(seq, Ordering::Release);
    }

    /// The log, locked.
    pub fn wal(&self) -> MutexGuard<'_, Wal> {
        self.wal.lock()
    }

    /// The log, for the last owner.
    pub fn wal_mut(&mut self) -> &mut Wal {
        self.wal.get_mut()
    }

    /// Where checkpoints go; `None` keeps everything in MemTables.
    pub fn trees(&self) -> Option<&Arc<dyn TreeStore>> {
        self.trees.as_ref()
    }

    /// Sequence number covered by the newest durable checkpoint.
    pub fn covered_seq(&self) -> u64 {
        self.state().tree.as_ref().map_or(0, |t| t.covered_seq())
    }

    /// Bytes held by the active and frozen MemTables.
    pub fn memtable_bytes(&self) -> u64 {
        self.state().memtables().map(|m| m.size_bytes()).sum()
    }

    /// Moves the active MemTable to the frozen list and starts a new one of
    /// `distance_bytes`, whose records start in a new WAL segment (so the
    /// WAL can be trimmed exactly when the frozen one's checkpoint is
    /// durable). Only the group-commit leader calls it, so nothing is
    /// inserted into the frozen MemTable after it.
    pub fn freeze_active(&self, distance_bytes: u64) -> io::Result<()> {
        let wal_replay_from = {
            let mut wal = self.wal.lock();
            wal.rotate()?;
            wal.segment_start()
        };
        let last_seq = self.visible_seq();
        self.state().active.seal();
        self.transition(|current| {
            let frozen = Arc::new(Frozen {
                memtable: current.active.clone(),
                last_seq,
                wal_replay_from,
                distance_bytes,
            });
            State {
                active: new_memtable(distance_bytes, self.memtable_pool.clone()),
                frozen: std::iter::once(frozen)
                    .chain(current.frozen.iter().cloned())
                    .collect(),
                tree: current.tree.clone(),
            }
        });
        Ok(())
    }

    /// Publishes `version`, the checkpoint of `frozen`, in its place.
    pub fn install_checkpoint(&self, frozen: &Arc<Frozen>, version: Arc<dyn TreeVersion>) {
        debug_assert_eq!(version.covered_seq(), frozen.last_seq);
        self.transition(|current| State {
            active: current.active.clone(),
            frozen: current
                .frozen
                .iter()
                .filter(|f| !Arc::ptr_eq(f, frozen))
                .cloned()
                .collect(),
            tree: Some(version),
        });
    }

    /// Publishes `version`, a rewrite of the current tree version with the
    /// same coverage (a space reclamation step).
    pub fn install_tree(&self, version: Arc<dyn TreeVersion>) {
        self.transition(|current| {
            debug_assert!(
                current
                    .tree
                    .as_ref()
                    .is_none_or(|t| t.covered_seq() == version.covered_seq())
            );
            State {
                active: current.active.clone(),
                frozen: current.frozen.clone(),
                tree: Some(version),
            }
        });
    }

    /// Removes the WAL segments every record of which a durable checkpoint
    /// covering `covered_seq` holds; returns how many went.
    pub fn trim_wal(&self, covered_seq: u64) -> io::Result<usize> {
        let covered = self.wal.lock().detach_covered(covered_seq);
        covered.remove()
    }

    /// Replaces the State by `next(current)`, one transition at a time.
    fn transition(&self, next: impl FnOnce(&State) -> State) {
        let _serial = self.transition.lock();
        let current = self.state.load_full();
        self.state.store(Arc::new(next(&current)));
    }
}
