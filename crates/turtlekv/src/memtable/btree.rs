//! The MemTable as a B+-tree with right links (a B-link tree, Lehman and
//! Yao). Entries live in one arena (`node.rs` layout, no tower); the tree's
//! nodes (`btree_node.rs`) in another, and hold each entry's key prefix
//! beside its pointer. A search reads one node per level, mostly prefixes:
//! about five cache misses for a million entries, where the skiplist takes
//! about twenty.
//!
//! One writer at a time (the writer lock; the group commit's leader
//! already serialises writes) changes nodes in place under their sequence
//! locks. Readers take no lock. A split moves a node's upper half to a new
//! right sibling and only then tells the parent, so a reader that arrives
//! from a parent read before the split finds its edge beyond the node's
//! high fence and follows the right link. Entries are never removed, so a
//! node's range only ever shrinks from above, and every node keeps its low
//! fence: right links are all a reader needs.

use std::fmt;
use std::ops::Bound;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::Mutex;

use super::arena::{Arena, entry_chunk_bytes};
use super::bloom::{ENTRY_ESTIMATE_BYTES, KeyBloom};
use super::btree_node::{FANOUT, Header, NodePtr, Snapshot, Step};
use super::node::{NodeRef, compare, write_node};
use super::range_tombstones::RangeTombstones;
use super::search::{Edge, Search};
use super::{Direction, HintAt, InsertHint, MemTable, Versioned};
use crate::mem::MappingPool;
use crate::values::Value;

/// Levels a tree can have: at least half-full inner nodes of `FANOUT`
/// children reach 16^15 leaves.
const MAX_DEPTH: usize = 16;

/// Bytes of tree nodes per arena chunk.
const NODE_CHUNK_BYTES: usize = 256 << 10;

/// Concurrent B+-tree of versions, ordered as `node::compare` orders them.
pub(crate) struct BTreeMemTable {
    root: AtomicPtr<Header>,
    writer: Mutex<Writer>,
    /// The entry arena's chunks as `Bytes`, once no write can come: reads
    /// then return slices of them instead of copies.
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
    entries: Arena,
    nodes: Arena,
}

/// The inner nodes a writer's search went down through, and which child
/// it took in each.
struct Path<'a> {
    steps: [Option<(NodePtr<'a>, usize)>; MAX_DEPTH],
    depth: usize,
}

impl<'a> Path<'a> {
    fn new() -> Self {
        Path {
            steps: [None; MAX_DEPTH],
            depth: 0,
        }
    }

    fn push(&mut self, node: NodePtr<'a>, child: usize) {
        assert!(
            self.depth < MAX_DEPTH,
            "a tree of at most {MAX_DEPTH} levels"
        );
        self.steps[self.depth] = Some((node, child));
        self.depth += 1;
    }

    fn pop(&mut self) -> Option<(NodePtr<'a>, usize)> {
        self.depth = self.depth.checked_sub(1)?;
        self.steps[self.depth].take()
    }
}

/// Where a search ended: the last entry the edge passes (`None`: the
/// start) and the first it does not, in the leaf read at `version`.
struct Found<'a> {
    pred: Option<NodeRef<'a>>,
    next: Option<NodeRef<'a>>,
    leaf: NodePtr<'a>,
    version: u64,
}

impl fmt::Debug for BTreeMemTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BTreeMemTable")
            .field("len", &self.len())
            .field("size_bytes", &self.size_bytes())
            .field("sealed", &self.sealed.get().is_some())
            .finish_non_exhaustive()
    }
}

impl BTreeMemTable {
    /// A MemTable whose key filter and entry chunks are sized for
    /// `capacity_bytes` of entries (it stays correct beyond, with more false
    /// positives). The filter's memory is charged to the MemTable's size.
    #[cfg(any(test, feature = "sim"))]
    pub fn with_capacity(capacity_bytes: u64) -> Self {
        Self::with_capacity_in(capacity_bytes, None)
    }

    /// As `with_capacity`, with arena chunks from `pool` (see `Arena`).
    pub fn with_capacity_in(capacity_bytes: u64, pool: Option<Arc<MappingPool>>) -> Self {
        let bloom = KeyBloom::new(capacity_bytes / ENTRY_ESTIMATE_BYTES);
        let chunk_bytes = entry_chunk_bytes(capacity_bytes);
        let mut nodes = Arena::new(NODE_CHUNK_BYTES, pool.clone());
        let root = Header::create(&mut nodes, 0);
        let table = BTreeMemTable {
            root: AtomicPtr::new(root),
            writer: Mutex::new(Writer {
                entries: Arena::new(chunk_bytes, pool),
                nodes,
            }),
            sealed: OnceLock::new(),
            len: AtomicUsize::new(0),
            size_bytes: AtomicU64::new(0),
            bloom,
            range_tombstones: RangeTombstones::default(),
        };
        table.charge(&table.writer.lock());
        table
    }

    fn charge(&self, writer: &Writer) {
        let charged =
            writer.entries.charged_bytes() + writer.nodes.charged_bytes() + self.bloom.size_bytes();
        self.size_bytes.store(charged, Ordering::Relaxed);
    }

    /// How this MemTable tells its own hints from others'.
    fn owner(&self) -> *const () {
        std::ptr::from_ref(self).cast()
    }

    fn root(&self) -> NodePtr<'_> {
        let root = NonNull::new(self.root.load(Ordering::Acquire)).expect("a tree has a root");
        // SAFETY: the root is a node of this MemTable's node arena,
        // published with release and read with acquire; it lives as long
        // as `self`.
        unsafe { NodePtr::new(root) }
    }

    /// Goes down to the leaf whose range holds `edge` and returns what
    /// `at_leaf` read there (given how many entries pass), with the leaf and
    /// its version. With `path`, records the inner nodes on the way.
    fn descend<'a, R>(
        &'a self,
        edge: Edge<'_>,
        mut path: Option<&mut Path<'a>>,
        at_leaf: impl Fn(NodePtr<'a>, usize) -> R,
    ) -> (R, NodePtr<'a>, u64) {
        let mut node = self.root();
        loop {
            let (route, version) = node.read(|n| match n.route(edge) {
                None => Ok(at_leaf(n, n.passed(edge))),
                Some(step) => Err(step),
            });
            match route {
                Ok(found) => return (found, node, version),
                Err(Step::Right(right)) => node = right.expect("a validated link leads to a node"),
                Err(Step::Down { child, index }) => {
                    if let Some(path) = path.as_deref_mut() {
                        path.push(node, index);
                    }
                    node = child.expect("a validated link leads to a node");
                }
            }
        }
    }

    fn seek(&self, edge: Edge<'_>) -> Found<'_> {
        let ((pred, next), leaf, version) = self.descend(edge, None, |n, passed| {
            let pred = match passed {
                0 => None,
                p => n.entry_ref(p - 1),
            };
            let next = if passed < n.len() {
                n.entry_ref(passed)
            } else {
                n.high_ref()
            };
            (pred, next)
        });
        Found {
            pred,
            next,
            leaf,
            version,
        }
    }

    /// Entries in order from the first that `edge` does not pass.
    fn cursor(&self, edge: Edge<'_>) -> Cursor<'_> {
        let (snapshot, _, _) = self.descend(edge, None, |n, passed| n.snapshot(passed));
        Cursor { snapshot, at: 0 }
    }

    /// Entries in order from the first at or after `lower`.
    fn cursor_from(&self, lower: Bound<&[u8]>) -> Cursor<'_> {
        match lower {
            Bound::Included(k) => self.cursor(Edge::below(k)),
            Bound::Excluded(k) => self.cursor(Edge::up_to(k)),
            // Every entry is at or after the empty key's newest version.
            Bound::Unbounded => self.cursor(Edge::below(&[])),
        }
    }
}

/// A forward walk over the leaves: one consistent copy of a leaf's slots
/// at a time, then on along its right link. Each copy and its link were
/// read together, so a split after the copy cannot hide entries from it.
pub(super) struct Cursor<'a> {
    snapshot: Snapshot<'a>,
    at: usize,
}

impl<'a> Iterator for Cursor<'a> {
    type Item = NodeRef<'a>;

    fn next(&mut self) -> Option<NodeRef<'a>> {
        while self.at == self.snapshot.len {
            let right = self.snapshot.right?;
            self.snapshot = right.read(|n| n.snapshot(0)).0;
            self.at = 0;
        }
        self.at += 1;
        let entry = self.snapshot.entries[self.at - 1];
        Some(entry.expect("a validated slot holds an entry"))
    }
}

impl BTreeMemTable {
    /// Adds a version, in `hint`'s leaf when that leaf has not changed
    /// since the hint was made and has room (else with a search from the
    /// root).
    fn insert_with(
        &self,
        key: Bytes,
        seq: u64,
        value: Option<Value>,
        hint: Option<(*const Header, u64)>,
    ) {
        // Before the entry: a get that finds the entry must pass the filter.
        // A hint from this MemTable means `prepare_insert` did it already.
        if hint.is_none() {
            self.bloom.insert(&key);
        }
        let mut writer = self.writer.lock();
        assert!(self.sealed.get().is_none(), "insert into a sealed MemTable");
        let writer = &mut *writer;
        let new = write_node(&mut writer.entries, 0, &key, seq, value.as_ref());
        // SAFETY: just written in this MemTable's entry arena, which lives
        // as long as `self`; published by the insert below.
        let new = unsafe { NodeRef::new(new) };
        let edge = Edge::Version(new.parts());
        if !hint.is_some_and(|(leaf, version)| self.insert_in_hinted_leaf(leaf, version, edge, new))
        {
            let mut path = Path::new();
            let (passed, leaf, _) = self.descend(edge, Some(&mut path), |n, passed| {
                debug_assert!(
                    passed == n.len()
                        || n.entry_ref(passed)
                            .is_some_and(|e| compare(e.parts(), new.parts()).is_gt()),
                    "sequence numbers of one key are unique, and grow"
                );
                passed
            });
            self.insert_into(&mut writer.nodes, leaf, passed, new, path);
        }
        self.len.fetch_add(1, Ordering::Relaxed);
        self.charge(writer);
    }

    /// `true` when `new` went into the hinted leaf. Writer only.
    fn insert_in_hinted_leaf<'a>(
        &'a self,
        leaf: *const Header,
        version: u64,
        edge: Edge<'_>,
        new: NodeRef<'a>,
    ) -> bool {
        let Some(leaf) = NonNull::new(leaf.cast_mut()) else {
            return false;
        };
        // SAFETY: the hint is this MemTable's (checked by the caller), so
        // `leaf` is one of its nodes, which live as long as `self`.
        let leaf = unsafe { NodePtr::new(leaf) };
        // An unchanged leaf still holds the key's range; only the writer
        // changes nodes, and it is here.
        if leaf.version() != version || leaf.is_full() {
            return false;
        }
        debug_assert!(
            leaf.route(edge).is_none(),
            "an unchanged leaf keeps its range"
        );
        leaf.insert_at(leaf.passed(edge), new, None);
        true
    }

    /// Puts `new` (an entry, with `child` for inner nodes) at `index` of
    /// `node`, splitting it first if it is full, and so on up `path`.
    fn insert_into<'a>(
        &'a self,
        nodes: &mut Arena,
        mut node: NodePtr<'a>,
        mut index: usize,
        mut new: NodeRef<'a>,
        mut path: Path<'a>,
    ) {
        let mut child = None;
        loop {
            if !node.is_full() {
                node.insert_at(index, new, child);
                return;
            }
            let right = node.split(nodes);
            // Not at the right's slot 0: that is its low fence, which the
            // parent is told next. An entry between the halves ends the left.
            let mid = FANOUT / 2;
            if index <= mid {
                node.insert_at(index, new, child);
            } else {
                right.insert_at(index - mid, new, child);
            }
            match path.pop() {
                Some((parent, taken)) => {
                    let fence = right.entry_ref(0).expect("a split sibling holds entries");
                    (node, index, new, child) = (parent, taken + 1, fence, Some(right));
                }
                None => {
                    let root = NodePtr::new_root(nodes, node, right);
                    self.root.store(root.as_ptr(), Ordering::Release);
                    return;
                }
            }
        }
    }
}

impl MemTable for BTreeMemTable {
    fn insert(&self, key: Bytes, seq: u64, value: Option<Value>) {
        self.insert_with(key, seq, value, None);
    }

    fn prepare_insert(&self, key: &[u8]) -> InsertHint {
        // The filter's bits for the key, set here in the writer's thread
        // rather than in the leader's turn; the insert that follows takes
        // them as set if it gets this hint. A key set and then not
        // inserted (a failed write) is only a false positive.
        self.bloom.insert(key);
        let found = self.seek(Edge::below(key));
        InsertHint::new(
            self.owner(),
            HintAt::Leaf {
                leaf: found.leaf.as_ptr(),
                version: found.version,
                next: found
                    .next
                    .map_or(std::ptr::null(), |n| n.ptr().cast_const()),
            },
        )
    }

    fn insert_prepared(&self, key: Bytes, seq: u64, value: Option<Value>, hint: &InsertHint) {
        let leaf = match hint.made_by(self.owner()) {
            Some(&HintAt::Leaf { leaf, version, .. }) => Some((leaf, version)),
            _ => None,
        };
        self.insert_with(key, seq, value, leaf);
    }

    fn get(&self, key: &[u8], seq: u64) -> Option<Option<Value>> {
        self.get_visible(key, seq)
    }

    fn newest_seq(&self, key: &[u8]) -> Option<u64> {
        self.newest_seq_of(key)
    }

    fn newest_seq_hinted(&self, key: &[u8], hint: &InsertHint) -> Option<Option<u64>> {
        let Some(&HintAt::Leaf {
            leaf,
            version,
            next,
        }) = hint.made_by(self.owner())
        else {
            return None;
        };
        let leaf = NonNull::new(leaf.cast_mut())?;
        // SAFETY: the hint is this MemTable's, so `leaf` is one of its
        // nodes, which live as long as `self`.
        let leaf = unsafe { NodePtr::new(leaf) };
        // Only the writer changes nodes, and the caller is the writer: an
        // unchanged leaf took no version of the key since the hint, and a
        // newer version would have gone into it.
        if leaf.version() != version {
            return None;
        }
        let Some(next) = NonNull::new(next.cast_mut()) else {
            return Some(None);
        };
        // SAFETY: as `leaf`: an entry of this MemTable's arena, published
        // before the hint was made and never changed after.
        let next = unsafe { NodeRef::new(next) };
        // The first entry not below the key is its newest version, if any.
        Some((next.key() == key).then(|| next.seq()))
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
        // Writes would move the structure under the walk.
        let _writer = self.writer.lock();
        super::btree_check::check(self.root(), self.len())?;
        self.range_tombstones.check()
    }

    fn seal(&self) {
        let writer = self.writer.lock();
        self.sealed.get_or_init(|| writer.entries.share());
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

impl Search for BTreeMemTable {
    fn around(&self, edge: Edge<'_>) -> (Option<NodeRef<'_>>, Option<NodeRef<'_>>) {
        let found = self.seek(edge);
        (found.pred, found.next)
    }

    type Forward<'a> = Cursor<'a>;

    fn forward_from<'a>(&'a self, lower: Bound<&[u8]>) -> Cursor<'a> {
        self.cursor_from(lower)
    }

    fn sealed_chunks(&self) -> Option<&Vec<Bytes>> {
        self.sealed.get()
    }

    fn may_contain(&self, key: &[u8]) -> bool {
        self.bloom.may_contain(key)
    }
}
