//! Test harness: a tree over the in-memory page store, its `BTreeMap`
//! model, and checks run after every batch.

use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use super::mem_io::MemPageIo;
use crate::page::{CachePriority, PageId, PageIo, PageKind};
use crate::tree::TreeConfig;
use crate::tree::format::node_codec::referenced_pages;
use crate::tree::write::update::UpdateEvents;
use crate::tree::{ReclaimPlan, Tree};

pub(in crate::tree) type Model = BTreeMap<Bytes, Bytes>;

/// xorshift64*: deterministic, dependency-free randomness for the tests.
pub(in crate::tree) struct Rng(u64);

impl Rng {
    pub(in crate::tree) fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub(in crate::tree) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(in crate::tree) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The sizes of a tree on pages of `node_size_bytes` and
/// `leaf_size_bytes`, with the engine's default filter and memory budget.
pub(in crate::tree) fn config(node_size_bytes: u64, leaf_size_bytes: u64) -> TreeConfig {
    TreeConfig::new(node_size_bytes, leaf_size_bytes, 10, 256 << 20)
}

pub(in crate::tree) fn small_config(node_size_bytes: u64) -> TreeConfig {
    TreeConfig {
        // Spill often, so that the tests cover updates that write some
        // leaves before their end and rewrite them later.
        spill_after_new_pages: 2,
        ..config(node_size_bytes, 4096)
    }
}

pub(in crate::tree) fn key(i: u64) -> Bytes {
    Bytes::from(format!("k{i:07}"))
}

/// A tree over an in-memory page store, with its model.
pub(in crate::tree) struct Harness {
    pub io: Arc<MemPageIo>,
    pub tree: Tree,
    pub root: Option<PageId>,
    pub model: Model,
    pub max_height: u32,
    pub min_height_after_max: u32,
    /// Sum of the structural operations of all batches.
    pub events: UpdateEvents,
}

pub(in crate::tree) fn add_events(sum: &mut UpdateEvents, e: &UpdateEvents) {
    sum.add(e);
}

impl Harness {
    pub(in crate::tree) fn new(config: TreeConfig) -> Self {
        let io = Arc::new(MemPageIo::default());
        let tree = Tree::new(io.clone(), config);
        Harness {
            io,
            tree,
            root: None,
            model: Model::new(),
            max_height: 0,
            min_height_after_max: u32::MAX,
            events: UpdateEvents::default(),
        }
    }

    /// Applies a batch, frees the dead pages, and checks everything.
    pub(in crate::tree) fn apply(&mut self, batch: Vec<(Bytes, Option<Bytes>)>) {
        self.apply_with(batch, &ReclaimPlan::default());
    }

    /// `apply` with space reclamation as `plan` asks (an empty batch
    /// reclaims only).
    pub(in crate::tree) fn apply_with(
        &mut self,
        batch: Vec<(Bytes, Option<Bytes>)>,
        plan: &ReclaimPlan,
    ) {
        let items = batch
            .iter()
            .map(|(key, value)| crate::tree::Item {
                key: key.clone(),
                value: value.clone().map(crate::values::Value::Inline),
            })
            .collect();
        let outcome = self.tree.apply_items(self.root, items, plan).unwrap();
        for (k, v) in batch {
            match v {
                Some(v) => self.model.insert(k, v),
                None => self.model.remove(&k),
            };
        }
        self.io.free(&outcome.dead_pages);
        self.io.punch(&outcome.dead_ranges);
        add_events(&mut self.events, &outcome.events);
        self.root = outcome.root;
        let stats = self.tree.check(self.root).unwrap();
        let shape = self.tree.shape(self.root).unwrap();
        assert_eq!(
            (shape.height, shape.leaf_pages, shape.segment_pages),
            (stats.height, stats.leaf_pages, stats.segment_pages)
        );
        assert_eq!(
            stats.leaf_items == 0,
            self.model.is_empty() && stats.buffered_items == 0
        );
        if stats.height >= self.max_height {
            self.max_height = stats.height;
            self.min_height_after_max = stats.height;
        }
        self.min_height_after_max = self.min_height_after_max.min(stats.height);
        self.assert_live_set_is_exact();
    }

    /// Every stored page is reachable from the root, and nothing else is
    /// stored: dead pages were reported exactly.
    fn assert_live_set_is_exact(&self) {
        let mut live = HashSet::new();
        let mut stack: Vec<PageId> = self.root.into_iter().collect();
        while let Some(id) = stack.pop() {
            if !live.insert(id) {
                continue;
            }
            if self.io.kind(id) == Some(PageKind::Node) {
                let bytes = self.io.read_page(id, CachePriority::Node).unwrap();
                stack.extend(referenced_pages(&bytes).unwrap());
            }
        }
        let stored: HashSet<PageId> = self.io.page_ids().into_iter().collect();
        assert_eq!(live, stored, "pages leaked or freed while reachable");
    }

    pub(in crate::tree) fn assert_matches_model(&self, rng: &mut Rng, probes: usize) {
        let keys: Vec<&Bytes> = self.model.keys().collect();
        for _ in 0..probes {
            let k = if !keys.is_empty() && rng.below(2) == 0 {
                keys[rng.below(keys.len() as u64) as usize].clone()
            } else {
                key(rng.below(100_000))
            };
            assert_eq!(
                self.tree.get_bytes(self.root, &k).unwrap(),
                self.model.get(&k).cloned(),
                "get {k:?}"
            );
        }
    }

    pub(in crate::tree) fn assert_scans_match(&self, rng: &mut Rng, scans: usize) {
        let all: Vec<(Bytes, Bytes)> = self
            .tree
            .scan(self.root, Bound::Unbounded, Bound::Unbounded, false)
            .map(Result::unwrap)
            .collect();
        let want: Vec<(Bytes, Bytes)> = self
            .model
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if all != want {
            let at = all
                .iter()
                .zip(&want)
                .position(|(a, b)| a != b)
                .unwrap_or(all.len().min(want.len()));
            panic!(
                "full scan differs at {at}: got {:?} want {:?} (lens {} {})",
                all.get(at),
                want.get(at),
                all.len(),
                want.len()
            );
        }
        let mut rev: Vec<(Bytes, Bytes)> = self
            .tree
            .scan(self.root, Bound::Unbounded, Bound::Unbounded, true)
            .map(Result::unwrap)
            .collect();
        rev.reverse();
        assert_eq!(rev, all, "reverse full scan differs");
        for _ in 0..scans {
            let bound = |rng: &mut Rng| match rng.below(3) {
                0 => Bound::Included(key(rng.below(100_000))),
                1 => Bound::Excluded(key(rng.below(100_000))),
                _ => Bound::Unbounded,
            };
            let (lo, hi) = (bound(rng), bound(rng));
            let ordered = match (&lo, &hi) {
                (
                    Bound::Included(a) | Bound::Excluded(a),
                    Bound::Included(b) | Bound::Excluded(b),
                ) => a < b,
                _ => true,
            };
            if !ordered {
                continue;
            }
            let want: Vec<(Bytes, Bytes)> = self
                .model
                .range((lo.clone(), hi.clone()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let reverse = rng.below(2) == 0;
            let mut cursor = self.tree.scan(self.root, lo.clone(), hi.clone(), reverse);
            // Half the scans are taken in batches of a random size, as
            // `Db::range` takes them, and half one pair at a time.
            let batch = (rng.below(2) == 0).then(|| 1 + rng.below(20) as usize);
            let mut got: Vec<(Bytes, Bytes)> = match batch {
                Some(limit) => filled(&mut cursor, limit),
                None => cursor.map(Result::unwrap).collect(),
            };
            if reverse {
                got.reverse();
            }
            assert_eq!(
                got, want,
                "scan {lo:?}..{hi:?} reverse={reverse} batch={batch:?}"
            );
        }
    }
}

/// Every pair of `cursor`, taken `limit` at a time; checks that only the
/// last batch comes back short.
fn filled(cursor: &mut crate::tree::ScanCursor, limit: usize) -> Vec<(Bytes, Bytes)> {
    let mut all = Vec::new();
    loop {
        let mut batch = Vec::new();
        cursor.fill(limit, &mut batch).unwrap();
        let full = batch.len() == limit;
        assert!(batch.len() <= limit, "a batch longer than asked");
        all.extend(
            batch
                .into_iter()
                .map(|(k, v)| (k, v.expect("a live pair").stored().clone())),
        );
        if !full {
            let mut after = Vec::new();
            cursor.fill(limit, &mut after).unwrap();
            assert!(after.is_empty(), "pairs after a short batch");
            return all;
        }
    }
}

pub(in crate::tree) fn random_batch(
    rng: &mut Rng,
    keyspace: u64,
    max_len: u64,
    delete_percent: u64,
) -> Vec<(Bytes, Option<Bytes>)> {
    let len = 1 + rng.below(max_len);
    let mut batch: BTreeMap<Bytes, Option<Bytes>> = BTreeMap::new();
    for _ in 0..len {
        let k = key(rng.below(keyspace));
        let v = (rng.below(100) >= delete_percent)
            .then(|| Bytes::from(vec![b'a' + rng.below(26) as u8; rng.below(40) as usize]));
        batch.insert(k, v);
    }
    batch.into_iter().collect()
}
