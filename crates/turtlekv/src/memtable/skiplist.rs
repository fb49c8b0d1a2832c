//! The MemTable: a skiplist whose nodes live in an arena (`arena.rs`,
//! `node.rs`). One writer at a time links nodes in (the group commit's
//! leader already serialises writes; a mutex makes it a rule). Readers never
//! lock or count references: they follow pointers published with release
//! stores, and nodes live as long as the MemTable.

use std::fmt;
use std::ops::Bound;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::Mutex;

use super::arena::{Arena, entry_chunk_bytes};
use super::bloom::{ENTRY_ESTIMATE_BYTES, KeyBloom};
use super::node::{MAX_HEIGHT, Node, NodeRef, compare, prefetch_search_fields, write_node};
use super::range_tombstones::RangeTombstones;
use super::search::{Edge, Search};
use super::{Direction, HintAt, HintPreds, InsertHint, MemTable, Versioned};
use crate::mem::MappingPool;
use crate::values::Value;

/// Nodes an insert steps over, at one level, from the predecessor an
/// `InsertHint` found to the one that holds now, before it searches from
/// the top instead (a hint is stale by the inserts of the groups between).
const MAX_HINT_STEPS: usize = 16;

/// Concurrent skiplist of versions.
pub(crate) struct SkipListMemTable {
    head: [AtomicPtr<Node>; MAX_HEIGHT],
    /// Levels in use; searches start at the top one.
    height: AtomicUsize,
    writer: Mutex<Writer>,
    /// The arena's chunks as `Bytes`, once no write can come: reads then
    /// return slices of them instead of copies.
    sealed: OnceLock<Vec<Bytes>>,
    len: AtomicUsize,
    size_bytes: AtomicU64,
    /// Every key inserted; gets of other keys skip the search.
    bloom: KeyBloom,
    /// Deleted key ranges (`Db::delete_range`).
    range_tombstones: RangeTombstones,
}

#[derive(Debug)]
struct Writer {
    arena: Arena,
    /// xorshift state for tower heights.
    rng: u64,
}

impl Writer {
    /// 1 + the number of times a 1-in-4 chance came up: a quarter of the
    /// nodes reach level 2, a sixteenth level 3, and so on.
    fn random_height(&mut self) -> usize {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        1 + (self.rng.trailing_zeros() as usize / 2).min(MAX_HEIGHT - 1)
    }
}

impl fmt::Debug for SkipListMemTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkipListMemTable")
            .field("len", &self.len())
            .field("size_bytes", &self.size_bytes())
            .field("sealed", &self.sealed.get().is_some())
            .finish_non_exhaustive()
    }
}

impl SkipListMemTable {
    /// A MemTable whose key filter and arena chunks are sized for
    /// `capacity_bytes` of entries (it stays correct beyond, with more false
    /// positives). The filter's memory is charged to the MemTable's size.
    pub fn with_capacity(capacity_bytes: u64) -> Self {
        Self::with_capacity_in(capacity_bytes, None)
    }

    /// As `with_capacity`, with arena chunks from `pool` (see `Arena`).
    pub fn with_capacity_in(capacity_bytes: u64, pool: Option<Arc<MappingPool>>) -> Self {
        let bloom = KeyBloom::new(capacity_bytes / ENTRY_ESTIMATE_BYTES);
        let chunk_bytes = entry_chunk_bytes(capacity_bytes);
        SkipListMemTable {
            head: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
            height: AtomicUsize::new(1),
            writer: Mutex::new(Writer {
                arena: Arena::new(chunk_bytes, pool),
                rng: 0x2545_f491_4f6c_dd1d,
            }),
            sealed: OnceLock::new(),
            len: AtomicUsize::new(0),
            size_bytes: AtomicU64::new(bloom.size_bytes()),
            bloom,
            range_tombstones: RangeTombstones::default(),
        }
    }

    #[cfg(test)]
    pub fn new() -> Self {
        Self::with_capacity(1 << 20)
    }

    /// How this MemTable tells its own hints from others'.
    fn owner(&self) -> *const () {
        std::ptr::from_ref(self).cast()
    }

    /// The pointer after `node` at `level`; `None` is the head.
    fn link<'a>(&'a self, node: Option<NodeRef<'a>>, level: usize) -> &'a AtomicPtr<Node> {
        match node {
            Some(n) => n.next(level),
            None => &self.head[level],
        }
    }

    fn load<'a>(&'a self, link: &AtomicPtr<Node>) -> Option<NodeRef<'a>> {
        // SAFETY: links hold null or nodes of this MemTable's arena, which
        // lives as long as `self`; acquire pairs with the release that
        // published the node.
        NonNull::new(link.load(Ordering::Acquire)).map(|p| unsafe { NodeRef::new(p) })
    }

    /// The last node `edge` passes (`None`: the head) and the first it does
    /// not. With `preds`, also the last one passed at every level in use.
    fn seek<'a>(
        &'a self,
        edge: Edge<'_>,
        mut preds: Option<&mut [Option<NodeRef<'a>>; MAX_HEIGHT]>,
    ) -> (Option<NodeRef<'a>>, Option<NodeRef<'a>>) {
        let mut pred = None;
        let mut level = self.height.load(Ordering::Acquire);
        loop {
            level -= 1;
            let mut next = self.load(self.link(pred, level));
            while let Some(n) = next.filter(|&n| edge.passes(n)) {
                pred = Some(n);
                if level > 0 {
                    // Where the level below starts if `n` is the last node
                    // passed here: fetched while the next node is compared,
                    // so the two cache misses overlap.
                    prefetch_search_fields(n.next(level - 1).load(Ordering::Relaxed));
                }
                next = self.load(n.next(level));
            }
            if let Some(preds) = preds.as_deref_mut() {
                preds[level] = pred;
            }
            if level == 0 {
                return (pred, next);
            }
        }
    }

    /// The first node at or after `lower`.
    fn first_from(&self, lower: Bound<&[u8]>) -> Option<NodeRef<'_>> {
        match lower {
            Bound::Included(k) => self.seek(Edge::below(k), None).1,
            Bound::Excluded(k) => self.seek(Edge::up_to(k), None).1,
            Bound::Unbounded => self.load(&self.head[0]),
        }
    }
}

impl SkipListMemTable {
    /// Links a new version in, from `hint`'s predecessors when it has one
    /// of this MemTable (else with a search from the top).
    fn insert_with(&self, key: Bytes, seq: u64, value: Option<Value>, hint: Option<&HintPreds>) {
        // Before the entry: a get that finds the entry must pass the filter.
        self.bloom.insert(&key);
        let mut writer = self.writer.lock();
        assert!(self.sealed.get().is_none(), "insert into a sealed MemTable");
        let height = writer.random_height();
        let node = write_node(&mut writer.arena, height, &key, seq, value.as_ref());
        // SAFETY: just written in this MemTable's arena; published below.
        let node = unsafe { NodeRef::new(node) };
        let mut preds = [None; MAX_HEIGHT];
        let edge = Edge::Version(node.parts());
        let hinted = hint.is_some_and(|h| self.walk_from_hint(h, edge, height, &mut preds));
        if !hinted {
            self.seek(edge, Some(&mut preds));
        }
        debug_assert!(
            self.load(self.link(preds[0], 0))
                .is_none_or(|n| compare(n.parts(), node.parts()).is_gt()),
            "sequence numbers of one key are unique, and grow"
        );
        self.link_in(node, height, &preds);
        self.len.fetch_add(1, Ordering::Relaxed);
        let charged = writer.arena.charged_bytes() + self.bloom.size_bytes();
        self.size_bytes.store(charged, Ordering::Relaxed);
    }

    /// Moves each level's predecessor from the hint's past the nodes linked
    /// in since, for the levels of a tower of `height`. `false` when a level
    /// takes more than `MAX_HINT_STEPS` (the caller searches instead).
    /// Caller: `hint` belongs to this MemTable, and holds the writer lock.
    fn walk_from_hint<'a>(
        &'a self,
        hint: &HintPreds,
        edge: Edge<'_>,
        height: usize,
        preds: &mut [Option<NodeRef<'a>>; MAX_HEIGHT],
    ) -> bool {
        for (level, pred_slot) in preds.iter_mut().enumerate().take(height) {
            // SAFETY: the hint's nodes were linked in this MemTable's arena
            // (its owner is `self`), which lives as long as `self`.
            let mut pred = NonNull::new(hint[level]).map(|p| unsafe { NodeRef::new(p) });
            let mut steps = 0;
            while let Some(n) = self
                .load(self.link(pred, level))
                .filter(|&n| edge.passes(n))
            {
                steps += 1;
                if steps > MAX_HINT_STEPS {
                    return false;
                }
                pred = Some(n);
            }
            *pred_slot = pred;
        }
        true
    }

    /// Links `node` after `preds` at each level of its tower: the whole
    /// tower first, then publish bottom up, so a reader that reaches the
    /// node at any level can go on from it at every level below. Levels
    /// above the current height start at the head.
    fn link_in(&self, node: NodeRef<'_>, height: usize, preds: &[Option<NodeRef<'_>>; MAX_HEIGHT]) {
        for (level, pred) in preds.iter().enumerate().take(height) {
            let after = self.link(*pred, level).load(Ordering::Relaxed);
            node.next(level).store(after, Ordering::Relaxed);
        }
        for (level, pred) in preds.iter().enumerate().take(height) {
            self.link(*pred, level).store(node.ptr(), Ordering::Release);
        }
        self.height.fetch_max(height, Ordering::Release);
    }
}

impl SkipListMemTable {
    /// Deep check of the structure: every level is in strict version order
    /// and is a subsequence of the level below, each node is linked only at
    /// levels its tower has, and level 0 holds `len` nodes.
    pub(crate) fn check_structure(&self) -> Result<(), String> {
        // Writes would move the structure under the walk.
        let _writer = self.writer.lock();
        let mut below: Vec<*mut Node> = Vec::with_capacity(self.len());
        for level in 0..MAX_HEIGHT {
            let mut level_nodes = Vec::new();
            let mut cursor = 0;
            let mut prev: Option<NodeRef<'_>> = None;
            let mut node = self.load(&self.head[level]);
            while let Some(n) = node {
                if n.height() <= level {
                    return Err(format!(
                        "a node of height {} linked at level {level}",
                        n.height()
                    ));
                }
                if prev.is_some_and(|p| !compare(p.parts(), n.parts()).is_lt()) {
                    return Err(format!("level {level} out of order at {:?}", n.key()));
                }
                if level > 0 {
                    match below[cursor..].iter().position(|&p| p == n.ptr()) {
                        Some(i) => cursor += i + 1,
                        None => {
                            return Err(format!(
                                "level {level} skips a node of level {}",
                                level - 1
                            ));
                        }
                    }
                }
                level_nodes.push(n.ptr());
                prev = Some(n);
                node = self.load(n.next(level));
            }
            if level == 0 && level_nodes.len() != self.len() {
                return Err(format!(
                    "{} nodes linked, {} inserted",
                    level_nodes.len(),
                    self.len()
                ));
            }
            below = level_nodes;
        }
        Ok(())
    }
}

impl MemTable for SkipListMemTable {
    fn insert(&self, key: Bytes, seq: u64, value: Option<Value>) {
        self.insert_with(key, seq, value, None);
    }

    fn prepare_insert(&self, key: &[u8]) -> InsertHint {
        let mut preds = [None; MAX_HEIGHT];
        self.seek(Edge::below(key), Some(&mut preds));
        let preds = preds.map(|p| p.map_or(std::ptr::null_mut(), |n| n.ptr()));
        InsertHint::new(self.owner(), HintAt::Preds(preds))
    }

    fn insert_prepared(&self, key: Bytes, seq: u64, value: Option<Value>, hint: &InsertHint) {
        let preds = match hint.made_by(self.owner()) {
            Some(HintAt::Preds(preds)) => Some(preds),
            _ => None,
        };
        self.insert_with(key, seq, value, preds);
    }
    fn get(&self, key: &[u8], seq: u64) -> Option<Option<Value>> {
        self.get_visible(key, seq)
    }

    fn newest_seq(&self, key: &[u8]) -> Option<u64> {
        self.newest_seq_of(key)
    }

    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        seq: u64,
        direction: Direction,
        limit: usize,
        out: &mut Vec<Versioned>,
    ) {
        self.scan_visible((lower, upper), seq, direction, limit, out);
    }

    fn check_structure(&self) -> Result<(), String> {
        SkipListMemTable::check_structure(self)?;
        self.range_tombstones.check()
    }

    fn seal(&self) {
        let writer = self.writer.lock();
        self.sealed.get_or_init(|| writer.arena.share());
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes.load(Ordering::Relaxed) + self.range_tombstones.size_bytes()
    }

    fn range_tombstones(&self) -> &RangeTombstones {
        &self.range_tombstones
    }

    fn visible_seq(&self, key: &[u8], seq: u64) -> Option<u64> {
        self.visible_seq_of(key, seq)
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

impl Search for SkipListMemTable {
    fn around(&self, edge: Edge<'_>) -> (Option<NodeRef<'_>>, Option<NodeRef<'_>>) {
        self.seek(edge, None)
    }

    type Forward<'a> = Forward<'a>;

    fn forward_from<'a>(&'a self, lower: Bound<&[u8]>) -> Forward<'a> {
        Forward {
            table: self,
            next: self.first_from(lower),
        }
    }

    fn sealed_chunks(&self) -> Option<&Vec<Bytes>> {
        self.sealed.get()
    }

    fn may_contain(&self, key: &[u8]) -> bool {
        self.bloom.may_contain(key)
    }
}

/// A forward walk along the bottom level's links.
pub(super) struct Forward<'a> {
    table: &'a SkipListMemTable,
    next: Option<NodeRef<'a>>,
}

impl<'a> Iterator for Forward<'a> {
    type Item = NodeRef<'a>;

    fn next(&mut self) -> Option<NodeRef<'a>> {
        let node = self.next?;
        self.next = self.table.load(node.next(0));
        Some(node)
    }
}
