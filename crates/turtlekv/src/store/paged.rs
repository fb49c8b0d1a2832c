//! The engine's tree store: the TurtleTree on the page store, committed
//! through the superblock.
//!
//! A checkpoint applies a frozen MemTable's items to the newest committed
//! root as one batch update (the tree cuts it into leaf-sized pieces and
//! serialises the new pages in parallel), commits the new root (page files
//! synced, then the superblock slot written and synced), and publishes a
//! [`StoredVersion`] that pins it. Pages the new root no longer reaches are
//! reused once no State or snapshot pins an older root.

use std::path::Path;
use std::sync::Arc;

use std::ops::Bound;

use arc_swap::ArcSwap;
use bytes::Bytes;
use parking_lot::Mutex;

use super::durable_pages::DurablePages;
use super::range_delete::{RangeKeys, merge_tombstones, step_bytes};
use super::space::{Pace, SpacePolicy};
use super::stored_version::StoredVersion;
use super::superblock::{Identity, SlotDamage, SuperblockRecord};
use super::{Coverage, StoreStats, TreeStore, TreeVersion};
use crate::Result;
use crate::io::FileSystem;
use crate::memtable::{MemTable, collect_latest};
use crate::page::{PageIo, PageStoreOptions};
use crate::tree::{
    BatchOutcome, Item, ReclaimPlan, Tree, TreeConfig, TreeShape, UpdateEvents, referenced_pages,
};

/// What the paged tree store is configured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StoreConfig {
    pub pages: PageStoreOptions,
    pub tree: TreeConfig,
    /// Create the store when the directory holds none.
    pub create_if_missing: bool,
    /// Garbage the tree may hold before updates reclaim it, in percent of
    /// its live bytes (`Options::garbage_percent`); 0 = never.
    pub garbage_percent: u32,
}

/// The TurtleTree store. Only the checkpoint thread calls `checkpoint`.
#[derive(Debug)]
pub(crate) struct PagedTreeStore {
    pages: DurablePages,
    tree: Tree,
    current: ArcSwap<StoredVersion>,
    /// Sums of what every checkpoint of this handle wrote, and the shape of
    /// the newest version (computed once per checkpoint from node pages).
    progress: Mutex<Progress>,
    /// Key ranges whose buffered updates are to go down into the leaves
    /// (a dropped keyspace's tombstones), oldest first: served by
    /// `reclaim_space` before the space policy's own plan.
    drains: Mutex<Vec<KeyRange>>,
}

/// A range of stored keys, its lower bound included.
type KeyRange = (Bytes, Bound<Bytes>);

/// Leaves' worth of rewriting one drain step may do.
const DRAIN_STEP_LEAVES: u64 = 32;

/// What the store learnt from its checkpoints.
#[derive(Debug)]
struct Progress {
    written: UpdateEvents,
    /// Leaf and segment bytes the newest update wrote: about what the next
    /// one will, so about the freed slots worth keeping for it.
    last_leaf_bytes_written: u64,
    shape: TreeShape,
    space: SpacePolicy,
    /// Tree keys checkpoints deleted for range tombstones, and the updates
    /// of their own that took them (`range_delete.rs`).
    range_keys_deleted: u64,
    range_steps: u64,
}

/// A range deletion that took at least this many keys from the tree asks
/// the reclamation steps to drain its range (`request_drain`), so that the
/// leaves drop the keys and their pages are freed without waiting for the
/// space policy.
const DRAIN_AFTER_RANGE_KEYS: u64 = 4096;

/// A reclamation step rewrites at least this many leaves' worth.
const RECLAIM_MIN_LEAVES: u64 = 4;

impl PagedTreeStore {
    /// Opens (or creates) the store in `dir` and pins its newest root.
    pub fn open(
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        config: &StoreConfig,
    ) -> Result<PagedTreeStore> {
        let list = |bytes: &[u8]| referenced_pages(bytes);
        let (pages, record) =
            DurablePages::open(fs, dir, &config.pages, config.create_if_missing, &list)?;
        let io: Arc<dyn PageIo> = pages.pages().clone();
        let tree = Tree::new(io, config.tree);
        let version = StoredVersion::new(tree.clone(), pages.pages().clone(), record.coverage());
        let shape = tree.shape(version.root())?;
        Ok(PagedTreeStore {
            pages,
            tree,
            current: ArcSwap::from_pointee(version),
            progress: Mutex::new(Progress {
                written: UpdateEvents::default(),
                last_leaf_bytes_written: 0,
                shape,
                space: SpacePolicy::new(config.garbage_percent),
                range_keys_deleted: 0,
                range_steps: 0,
            }),
            drains: Mutex::new(Vec::new()),
        })
    }
}

impl PagedTreeStore {
    /// A step of the oldest drain request: every node above the leaves
    /// whose range meets it, so that each flushes what it and the nodes
    /// above it buffer for the range. `None` when no request is left.
    fn drain_plan(&self) -> Option<ReclaimPlan> {
        let drains = self.drains.lock();
        let (lower, upper) = drains.first()?;
        let shape = &self.progress.lock().shape;
        let nodes = &shape.nodes_above_leaves;
        let below_upper = |key: &[u8]| match upper {
            Bound::Included(u) => key <= &u[..],
            Bound::Excluded(u) => key < &u[..],
            Bound::Unbounded => true,
        };
        // Node i covers keys from its key up to the next node's.
        let targets = nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| {
                let ends_above_lower = nodes.get(i + 1).is_none_or(|next| next.key > *lower);
                below_upper(&n.key) && ends_above_lower
            })
            .map(|(_, n)| n.key.clone())
            .collect();
        let leaf_bytes = self.tree.config().leaf_max_bytes as u64;
        Some(ReclaimPlan {
            targets,
            budget_bytes: DRAIN_STEP_LEAVES * leaf_bytes,
        })
    }

    /// The reclamation the next step makes, with a budget of `work_bytes`
    /// (at least a few leaves).
    fn reclaim_plan(&self, work_bytes: u64, pace: Pace) -> ReclaimPlan {
        let leaf_bytes = self.tree.config().leaf_max_bytes as u64;
        let budget = work_bytes.max(RECLAIM_MIN_LEAVES * leaf_bytes);
        let progress = self.progress.lock();
        progress.space.plan(&progress.shape, budget, pace)
    }

    /// Commits an update's outcome with `coverage`, publishes the new
    /// version and learns from what the update did.
    fn commit(
        &self,
        mut outcome: BatchOutcome,
        coverage: Coverage,
    ) -> Result<Arc<dyn TreeVersion>> {
        let record = SuperblockRecord {
            root: outcome.root,
            covered_seq: coverage.covered_seq,
            wal_replay_from: coverage.wal_replay_from,
        };
        let dead_ranges = std::mem::take(&mut outcome.dead_ranges);
        self.pages
            .commit_retiring(record, &outcome.dead_pages, dead_ranges)?;
        let version = Arc::new(StoredVersion::new(
            self.tree.clone(),
            self.pages.pages().clone(),
            coverage,
        ));
        debug_assert_eq!(version.root(), outcome.root);
        self.current.store(version.clone());
        // The commit is durable: statistics must not fail it (a failed
        // checkpoint poisons the handle). A node that cannot be read now is
        // reported by the reads that need it; the shape stays the last one.
        let shape = self.tree.shape(outcome.root);
        let mut progress = self.progress.lock();
        progress.written.add(&outcome.events);
        progress.last_leaf_bytes_written = outcome.events.leaf_bytes_written;
        progress.space.observe(&outcome.events);
        if let Ok(shape) = shape {
            progress.shape = shape;
        }
        Ok(version)
    }
}

impl PagedTreeStore {
    /// Deletes from the tree every key within the range tombstones of
    /// `memtable` (a frozen MemTable about to be checkpointed): each full
    /// chunk of `step_bytes` is an update committed on its own at
    /// the current coverage, and the last, partial chunk is returned for
    /// the checkpoint's batch. The caller has made the MemTable's WAL
    /// records durable first: a step's commit holds some of their effect.
    fn delete_tree_ranges(
        &self,
        memtable: &dyn MemTable,
        workers: &rayon::ThreadPool,
    ) -> Result<Vec<Bytes>> {
        let ranges = memtable.range_tombstones().merged_ranges();
        if ranges.is_empty() {
            return Ok(Vec::new());
        }
        let mut reader = RangeKeys::default();
        let budget = step_bytes(self.tree.config().leaf_max_bytes);
        let mut deleted = 0u64;
        loop {
            let current = self.current.load_full();
            let mut keys = Vec::new();
            let done = reader.next_chunk(&*current, &ranges, budget, &mut keys)?;
            deleted += keys.len() as u64;
            if done {
                self.progress.lock().range_keys_deleted += deleted;
                if deleted >= DRAIN_AFTER_RANGE_KEYS {
                    for (start, end) in &ranges {
                        self.request_drain(start.clone(), Bound::Excluded(end.clone()));
                    }
                }
                return Ok(keys);
            }
            let items = keys
                .into_iter()
                .map(|key| Item { key, value: None })
                .collect();
            let plan = ReclaimPlan::default();
            let outcome =
                workers.install(|| self.tree.apply_items(current.root(), items, &plan))?;
            self.commit(outcome, current.coverage())?;
            self.progress.lock().range_steps += 1;
        }
    }
}

impl TreeStore for PagedTreeStore {
    fn current(&self) -> Arc<dyn TreeVersion> {
        self.current.load_full()
    }

    fn checkpoint(
        &self,
        memtable: &dyn MemTable,
        coverage: Coverage,
        workers: &rayon::ThreadPool,
    ) -> Result<Arc<dyn TreeVersion>> {
        let deleted = self.delete_tree_ranges(memtable, workers)?;
        let root = self.current.load().root();
        let outcome = workers.install(|| {
            let batch: Vec<Item> = merge_tombstones(collect_latest(memtable), deleted)
                .into_iter()
                .map(|(key, value)| Item { key, value })
                .collect();
            // Reclamation runs as steps of its own before a checkpoint
            // (`reclaim_space`), each freeing what it rewrote at its commit.
            self.tree.apply_items(root, batch, &ReclaimPlan::default())
        })?;
        self.commit(outcome, coverage)
    }

    fn reclaim_space(
        &self,
        workers: &rayon::ThreadPool,
        work_bytes: u64,
        pace: Pace,
    ) -> Result<Option<Arc<dyn TreeVersion>>> {
        let current = self.current.load_full();
        let (plan, draining) = match self.drain_plan() {
            Some(plan) => (plan, true),
            None => (self.reclaim_plan(work_bytes, pace), false),
        };
        if plan.targets.is_empty() && !draining {
            return Ok(None);
        }
        let outcome =
            workers.install(|| self.tree.apply_items(current.root(), Vec::new(), &plan))?;
        if outcome.events.reclaim_flushes == 0 {
            // A drained range holds nothing more above its leaves; or the
            // estimate counts garbage that draining cannot reach (a
            // segment shared with a sibling): nothing to commit.
            if draining {
                self.drains.lock().remove(0);
                if outcome.new_pages.is_empty() {
                    return self.reclaim_space(workers, work_bytes, pace);
                }
                // It reshaped the nodes on its paths: committed, not
                // left allocated with nothing reaching them.
                return Ok(Some(self.commit(outcome, current.coverage())?));
            }
            debug_assert!(
                outcome.new_pages.is_empty(),
                "a reclamation step that flushed nothing wrote pages nothing commits"
            );
            return Ok(None);
        }
        Ok(Some(self.commit(outcome, current.coverage())?))
    }

    fn request_drain(&self, lower: Bytes, upper: Bound<Bytes>) {
        self.drains.lock().push((lower, upper));
    }

    fn drains_pending(&self) -> usize {
        self.drains.lock().len()
    }

    fn identity(&self) -> Option<(Identity, u64)> {
        Some((self.pages.identity(), self.pages.wal_floor()))
    }

    fn record_wal_floor(&self, segment_id: u64) -> Result<()> {
        let current = self.current.load();
        let coverage = current.coverage();
        let record = SuperblockRecord {
            root: current.root(),
            covered_seq: coverage.covered_seq,
            wal_replay_from: coverage.wal_replay_from,
        };
        self.pages.commit_wal_floor(record, segment_id)?;
        Ok(())
    }

    fn check_durable_metadata(&self) -> Result<()> {
        self.pages.check_superblock()
    }

    fn open_damage(&self) -> Option<SlotDamage> {
        self.pages.damage().cloned()
    }

    fn stats(&self) -> StoreStats {
        let progress = self.progress.lock();
        let mut pages = self.pages.stats();
        pages.syncs += self.pages.superblock_syncs();
        StoreStats {
            written: progress.written,
            pages,
            space: progress.space.estimate(&progress.shape),
            shape: progress.shape.clone(),
            range_keys_deleted: progress.range_keys_deleted,
            range_steps: progress.range_steps,
        }
    }

    fn reclaim(&self) -> Result<()> {
        let keep_bytes = self.progress.lock().last_leaf_bytes_written;
        self.pages.pages().punch_surplus(keep_bytes)
    }

    fn release_freed_space(&self) -> Result<()> {
        self.pages.pages().release_freed_space()
    }

    fn set_cache_capacity(&self, capacity_bytes: u64) {
        self.pages.store_cache_capacity(capacity_bytes);
    }

    fn evict_to_cache_capacity(&self) {
        self.pages.evict_cache_to_capacity();
    }

    fn mapping_pool(&self) -> Option<Arc<crate::mem::MappingPool>> {
        Some(self.pages.mapping_pool())
    }

    fn set_cache_ghost_window_bytes(&self, bytes: u64) {
        self.pages.set_cache_ghost_window_bytes(bytes);
    }

    fn checkpoint_memory_floor_bytes(&self) -> u64 {
        self.tree.config().update_memory_estimate_bytes()
    }

    fn max_item_bytes(&self) -> usize {
        self.tree.config().max_item_bytes()
    }

    fn max_key_bytes(&self) -> usize {
        self.tree.config().max_key_bytes()
    }
}
