//! The engine's checkpoint target: the TurtleTree on the page store.
//!
//! A checkpoint applies a frozen MemTable's items to the newest committed
//! root as one batch update (the tree cuts it into leaf-sized pieces and
//! serialises the new pages in parallel), commits the new root through the
//! superblock, and publishes a [`StoredVersion`] that pins it. Pages the new
//! root no longer reaches are reused once no State or snapshot pins an
//! older root.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::Bytes;
use parking_lot::Mutex;

use super::target::{Coverage, TargetStats, TreeCheck, TreeCursor, TreeScan};
use super::{CheckpointTarget, TreeVersion};
use crate::io::CheckpointIoPriority;
use crate::io::FileSystem;
use crate::memtable::{Direction, MemTable, Versioned};
use crate::page::{PageIo, PageStore, PageStoreOptions, RootPin, SuperblockRecord};
use crate::tree::node_codec::referenced_pages;
use crate::tree::{Item, RootMemo, ScanCursor, Tree, TreeConfig, UpdateEvents};
use crate::{Options, Result};

/// The TurtleTree target. Only the checkpoint thread calls `checkpoint`.
#[derive(Debug)]
pub(crate) struct TreeTarget {
    store: Arc<PageStore>,
    tree: Tree,
    current: ArcSwap<StoredVersion>,
    /// Runs the data-parallel parts of a checkpoint (merges, leaf
    /// serialisation) on `Options::checkpoint_threads` threads.
    pool: rayon::ThreadPool,
    /// The pool's threads' I/O class (`io::CheckpointIoPriority`).
    io_priority: Arc<CheckpointIoPriority>,
    /// Sums of what every checkpoint of this handle wrote, and the shape of
    /// the newest version (computed once per checkpoint from node pages).
    progress: Mutex<(UpdateEvents, crate::tree::TreeShape)>,
}

/// One committed root, pinned for as long as this value lives.
#[derive(Debug)]
pub(crate) struct StoredVersion {
    tree: Tree,
    store: Arc<PageStore>,
    pin: RootPin,
    /// The root's node index, as gets last found it in the page cache.
    root_memo: RootMemo,
}

impl TreeTarget {
    /// Opens (or creates) the page store in `dir` and pins its newest root.
    pub fn open(dir: &Path, options: &Options, fs: &Arc<dyn FileSystem>) -> Result<TreeTarget> {
        let list = |bytes: &[u8]| referenced_pages(bytes);
        let (store, _record) = PageStore::open(
            fs.clone(),
            dir,
            &PageStoreOptions::from_options(options),
            &list,
        )?;
        let store = Arc::new(store);
        let io: Arc<dyn PageIo> = store.clone();
        let tree = Tree::new(io, TreeConfig::from_options(options));
        let io_priority = Arc::new(CheckpointIoPriority::default());
        let joining = io_priority.clone();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(options.checkpoint_threads)
            .thread_name(|i| format!("turtlekv-merge-{i}"))
            .start_handler(move |_| joining.join_current_thread())
            .build()
            .map_err(|e| crate::Error::Io(std::io::Error::other(e.to_string())))?;
        let version = StoredVersion {
            tree: tree.clone(),
            store: store.clone(),
            pin: store.pin(),
            root_memo: RootMemo::default(),
        };
        let shape = tree.shape(version.pin.root())?;
        Ok(TreeTarget {
            store,
            tree,
            current: ArcSwap::from_pointee(version),
            pool,
            io_priority,
            progress: Mutex::new((UpdateEvents::default(), shape)),
        })
    }
}

impl CheckpointTarget for TreeTarget {
    fn current(&self) -> Arc<dyn TreeVersion> {
        self.current.load_full()
    }

    fn checkpoint(
        &self,
        memtable: &dyn MemTable,
        coverage: Coverage,
    ) -> Result<Arc<dyn TreeVersion>> {
        let root = self.current.load().pin.root();
        let outcome = self.pool.install(|| {
            let batch: Vec<Item> = super::collect::collect_latest(memtable)
                .into_iter()
                .map(|(key, value)| Item { key, value })
                .collect();
            self.tree.apply_items(root, batch)
        })?;
        let record = SuperblockRecord {
            root: outcome.root,
            covered_seq: coverage.covered_seq,
            wal_replay_from: coverage.wal_replay_from,
        };
        self.store.commit(record, &outcome.dead_pages)?;
        let version = Arc::new(StoredVersion {
            tree: self.tree.clone(),
            store: self.store.clone(),
            pin: self.store.pin(),
            root_memo: RootMemo::default(),
        });
        debug_assert_eq!(version.pin.root(), outcome.root);
        self.current.store(version.clone());
        // The commit is durable: statistics must not fail it (a failed
        // checkpoint poisons the handle). A node that cannot be read now is
        // reported by the reads that need it; the shape stays the last one.
        let shape = self.tree.shape(outcome.root);
        let mut progress = self.progress.lock();
        progress.0.add(&outcome.events);
        if let Ok(shape) = shape {
            progress.1 = shape;
        }
        Ok(version)
    }

    fn stats(&self) -> TargetStats {
        let (written, shape) = *self.progress.lock();
        TargetStats {
            written,
            store: self.store.stats(),
            shape,
        }
    }

    fn reclaim(&self) -> Result<()> {
        self.store.reclaim()
    }

    fn set_cache_capacity(&self, capacity_bytes: u64) {
        self.store.store_cache_capacity(capacity_bytes);
    }

    fn evict_to_cache_capacity(&self) {
        self.store.evict_cache_to_capacity();
    }

    fn mapping_pool(&self) -> Option<Arc<crate::io::MappingPool>> {
        Some(self.store.mapping_pool())
    }

    fn io_priority(&self) -> Option<Arc<CheckpointIoPriority>> {
        Some(self.io_priority.clone())
    }

    fn set_cache_ghost_window_bytes(&self, bytes: u64) {
        self.store.set_cache_ghost_window_bytes(bytes);
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

impl TreeScan for ScanCursor {
    fn fill(&mut self, limit: usize, out: &mut Vec<Versioned>) -> Result<()> {
        ScanCursor::fill(self, limit, out)
    }
}

impl TreeVersion for StoredVersion {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.tree
            .get_with_root_memo(self.pin.root(), &self.root_memo, key)
    }

    fn cursor(&self, lower: Bound<Bytes>, upper: Bound<Bytes>, direction: Direction) -> TreeCursor {
        let reverse = direction == Direction::Reverse;
        Box::new(self.tree.scan(self.pin.root(), lower, upper, reverse))
    }

    fn covered_seq(&self) -> u64 {
        self.pin.record().covered_seq
    }

    fn check(&self) -> Result<TreeCheck> {
        let root = self.pin.root();
        let tree = self.tree.check(root)?;
        let list = |bytes: &[u8]| referenced_pages(bytes);
        self.store.check(&self.pin, &list)?;
        let mut keys = 0;
        for pair in self
            .tree
            .scan(root, Bound::Unbounded, Bound::Unbounded, false)
        {
            pair?;
            keys += 1;
        }
        Ok(TreeCheck {
            keys,
            pages: tree.node_pages + tree.leaf_pages + tree.segment_pages,
        })
    }
}
