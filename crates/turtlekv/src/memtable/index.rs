//! A B+-tree over the skiplist's tall nodes (towers of `INDEXED_HEIGHT` or
//! more; of a key's tall versions, only the oldest), so that a search
//! starts near its position at the low levels instead of walking down from
//! the top.
//!
//! Why: in a MemTable far larger than the CPU's caches, a skiplist search
//! misses the cache on most nodes it visits at its lowest few levels, one
//! miss after the other. The index's nodes hold 32 key prefixes side by
//! side, so a search through them touches a few cache lines per level of
//! a shallow tree, and the skiplist is left to walk its bottom
//! `INDEXED_HEIGHT` levels only.
//!
//! The index is a hint. It answers with a tall node below the search's
//! position; the skiplist walks on from there, so a stale answer (a node
//! further left than the closest) costs steps, never correctness, and the
//! skiplist checks that the answer lies before the position.
//!
//! One version per key keeps hot keys out of it: updates of a key that
//! already has a tall version do not change the index, so readers of that
//! key do not race the writer on the same index node, and a key with
//! thousands of versions takes one entry.
//!
//! One writer (the MemTable's) changes the index; readers never lock. Every
//! index node carries a version, odd while the writer changes it: a reader
//! reads a node's fields (all atomics), then checks the version did not
//! move, and starts again from the root if it did (a sequence lock).
//! Nodes live in the MemTable's arena and are never freed before it, so a
//! pointer a reader loads, stale or not, is always a node.

use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering, fence};

use super::arena::Arena;
use super::edge::Edge;
use super::node::{Node, NodeRef};

/// Towers at least this tall are indexed: a quarter of the nodes.
pub(crate) const INDEXED_HEIGHT: usize = 2;

/// Entries per index node: 32 prefixes are four cache lines.
const FANOUT: usize = 32;

/// Retries before a reader gives up on the index (the caller then searches
/// the skiplist from the top); a writer changes one node at a time, so a
/// reader retries only when it raced that change.
const MAX_RETRIES: usize = 8;

/// The part every index node starts with.
#[repr(C)]
struct Header {
    /// Odd while the writer changes the node.
    version: AtomicU64,
    len: AtomicU32,
    /// 0 for a leaf; written before the node is published, never changed.
    level: u32,
}

/// Entries in key order: the key's prefix and its skiplist node. In an
/// inner node, entry `i` is the first node of child `i`'s subtree (for
/// child 0, the first when it was made: it also holds every node before).
#[repr(C)]
struct Entries {
    header: Header,
    prefixes: [AtomicU64; FANOUT],
    nodes: [AtomicPtr<Node>; FANOUT],
}

#[repr(C)]
struct Inner {
    entries: Entries,
    children: [AtomicPtr<Entries>; FANOUT],
}

/// An index node, as a pointer to its whole allocation: an `Inner`'s
/// children lie past its `Entries`, so they are reached from the pointer
/// rather than from a reference to the `Entries`.
#[derive(Clone, Copy)]
struct IndexNode<'a> {
    ptr: NonNull<Entries>,
    _arena: PhantomData<&'a Entries>,
}

impl<'a> IndexNode<'a> {
    /// # Safety
    /// `ptr` is an index node made by `new_node` in an arena that lives
    /// for `'a`, its level written before it was published.
    unsafe fn new(ptr: NonNull<Entries>) -> Self {
        IndexNode {
            ptr,
            _arena: PhantomData,
        }
    }

    /// An inner node's children; `None` for a leaf.
    fn children(self) -> Option<&'a [AtomicPtr<Entries>; FANOUT]> {
        // SAFETY: nodes of a level above 0 are allocated as `Inner`, and
        // `ptr` covers the whole allocation.
        (!self.is_leaf()).then(|| unsafe { &(*self.ptr.cast::<Inner>().as_ptr()).children })
    }

    fn child(self, i: usize, order: Ordering) -> *mut Entries {
        self.children()
            .map_or(std::ptr::null_mut(), |c| c[i].load(order))
    }

    fn slot(self, i: usize) -> Slot {
        Slot {
            prefix: self.prefixes[i].load(Ordering::Relaxed),
            node: self.nodes[i].load(Ordering::Relaxed),
            child: self.child(i, Ordering::Relaxed),
        }
    }

    /// Writes `slots` as the node's entries. The caller is the writer; a
    /// published node is changed inside `write_section`.
    fn store(self, slots: &[Slot]) {
        debug_assert!(slots.len() <= FANOUT);
        for (i, &s) in slots.iter().enumerate() {
            self.put(i, s);
        }
        self.header.len.store(slots.len() as u32, Ordering::Relaxed);
    }

    /// Writes entry `i`; as `store`.
    fn put(self, i: usize, s: Slot) {
        self.prefixes[i].store(s.prefix, Ordering::Relaxed);
        self.nodes[i].store(s.node, Ordering::Relaxed);
        if let Some(children) = self.children() {
            children[i].store(s.child, Ordering::Relaxed);
        }
    }

    /// Runs the writer's change `f` with the version odd, so that readers
    /// that overlap it start again.
    fn write_section(self, f: impl FnOnce(Self)) {
        let v = self.header.version.load(Ordering::Relaxed);
        debug_assert!(v % 2 == 0);
        self.header.version.store(v + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        f(self);
        self.header.version.store(v + 2, Ordering::Release);
    }
}

impl<'a> Deref for IndexNode<'a> {
    type Target = Entries;

    fn deref(&self) -> &Entries {
        // SAFETY: as `new`'s contract; the arena outlives `'a`.
        unsafe { self.ptr.as_ref() }
    }
}

/// Deepest index: 32^12 entries are far more than a MemTable holds.
const MAX_DEPTH: usize = 12;

/// The inner nodes an insert descended through, and the child it took in
/// each.
#[derive(Default)]
struct Path<'a> {
    steps: [Option<(IndexNode<'a>, usize)>; MAX_DEPTH],
    len: usize,
}

impl<'a> Path<'a> {
    fn push(&mut self, step: (IndexNode<'a>, usize)) {
        assert!(self.len < MAX_DEPTH, "index deeper than {MAX_DEPTH} levels");
        self.steps[self.len] = Some(step);
        self.len += 1;
    }

    fn pop(&mut self) -> Option<(IndexNode<'a>, usize)> {
        self.len = self.len.checked_sub(1)?;
        self.steps[self.len].take()
    }
}

/// One entry, as read or about to be written.
#[derive(Clone, Copy)]
struct Slot {
    prefix: u64,
    node: *mut Node,
    child: *mut Entries,
}

/// The index. Its nodes live in the MemTable's arena.
pub(crate) struct TallIndex {
    root: AtomicPtr<Entries>,
    len: AtomicU64,
}

impl Entries {
    fn len(&self) -> usize {
        (self.header.len.load(Ordering::Relaxed) as usize).min(FANOUT)
    }

    fn is_leaf(&self) -> bool {
        self.header.level == 0
    }

    /// Where `edge` falls: in a leaf, how many entries it passes; in an
    /// inner node, the child to descend to. `None` if a slot read torn.
    fn position(&self, edge: Edge<'_>) -> Option<usize> {
        let len = self.len();
        if self.is_leaf() {
            return self.passed(edge, 0, len);
        }
        // Entry 0 is never compared: child 0 also holds every node below
        // the first it was made with, so that entry may be stale.
        Some(self.passed(edge, 1, len.max(1))? - 1)
    }

    /// `from` plus how many of the entries `from..len` `edge` passes.
    fn passed(&self, edge: Edge<'_>, from: usize, len: usize) -> Option<usize> {
        let prefixes = &self.prefixes[from..len];
        let surely = prefixes
            .partition_point(|p| edge.passes_prefix(p.load(Ordering::Relaxed)) == Some(true));
        let ties = prefixes[surely..]
            .iter()
            .take_while(|p| edge.passes_prefix(p.load(Ordering::Relaxed)).is_none())
            .count();
        // Keys that tie on their prefix (a common prefix of 8 bytes or
        // more) are told apart by their nodes, in a binary search too.
        let start = from + surely;
        let mut torn = false;
        let tied_passed = self.nodes[start..start + ties].partition_point(|slot| {
            // Acquire: the node is read before the version is checked, so
            // its pointer must carry the writes that made it.
            match NonNull::new(slot.load(Ordering::Acquire)) {
                // SAFETY: non-null slots hold nodes of the MemTable's
                // arena, published before they were indexed.
                Some(node) => edge.passes(unsafe { NodeRef::new(node) }),
                None => {
                    torn = true;
                    false
                }
            }
        });
        (!torn).then_some(start + tied_passed)
    }
}

impl TallIndex {
    pub(crate) fn new() -> Self {
        TallIndex {
            root: AtomicPtr::new(std::ptr::null_mut()),
            len: AtomicU64::new(0),
        }
    }

    /// Nodes indexed.
    pub(crate) fn len(&self) -> u64 {
        self.len.load(Ordering::Relaxed)
    }

    /// The last indexed node `edge` passes: `Ok(None)` when none does (the
    /// search starts at the head), `Err(())` when the reader kept racing the
    /// writer and gave up.
    pub(crate) fn floor(&self, edge: Edge<'_>) -> Result<Option<NonNull<Node>>, ()> {
        for _ in 0..MAX_RETRIES {
            if let Some(found) = self.try_floor(edge) {
                return Ok(found);
            }
            std::hint::spin_loop();
        }
        Err(())
    }

    /// One descent; `None` when a node changed under it.
    fn try_floor(&self, edge: Edge<'_>) -> Option<Option<NonNull<Node>>> {
        let Some(mut node) = self.load_root() else {
            return Some(None);
        };
        let mut version = stable_version(&node)?;
        loop {
            let at = node.position(edge)?;
            if node.is_leaf() {
                let found = at
                    .checked_sub(1)
                    .map(|i| node.nodes[i].load(Ordering::Acquire));
                validate(&node, version)?;
                return match found {
                    None => Some(None),
                    Some(p) => Some(Some(NonNull::new(p)?)),
                };
            }
            let child = node.child(at, Ordering::Acquire);
            validate(&node, version)?;
            // SAFETY: non-null child pointers are index nodes of the arena,
            // written in full before the release store that linked them.
            let child = unsafe { IndexNode::new(NonNull::new(child)?) };
            let child_version = stable_version(&child)?;
            // The child was still the parent's when its version was read.
            validate(&node, version)?;
            node = child;
            version = child_version;
        }
    }

    fn load_root(&self) -> Option<IndexNode<'_>> {
        // SAFETY: the root is null or an index node of the arena, written
        // in full before the release store that published it.
        NonNull::new(self.root.load(Ordering::Acquire)).map(|p| unsafe { IndexNode::new(p) })
    }

    /// Adds `node` (linked in the skiplist already). Only the MemTable's
    /// writer calls it, with `arena` the MemTable's.
    pub(crate) fn insert(&self, arena: &mut Arena, node: NodeRef<'_>) {
        let slot = Slot {
            prefix: node.prefix(),
            node: node.ptr(),
            child: std::ptr::null_mut(),
        };
        self.len.fetch_add(1, Ordering::Relaxed);
        let Some(root) = self.load_root() else {
            // SAFETY: the index and the arena belong to one MemTable.
            let leaf = unsafe { new_node(arena, 0) };
            leaf.store(&[slot]);
            self.root.store(leaf.ptr.as_ptr(), Ordering::Release);
            return;
        };
        let edge = Edge::Version(node.parts());
        // The writer's own view is consistent: no versions to check.
        // On the stack: the writer runs in the group commit's leader, where
        // an allocation can wait on the allocator's locks.
        let mut path = Path::default();
        let mut at = root;
        while !at.is_leaf() {
            let child = at.position(edge).expect("the writer reads whole slots");
            path.push((at, child));
            let next = NonNull::new(at.child(child, Ordering::Relaxed));
            // SAFETY: as in `try_floor`; the writer's own children are whole.
            at = unsafe { IndexNode::new(next.expect("inner nodes have their children")) };
        }
        let pos = at.position(edge).expect("the writer reads whole slots");
        self.insert_at(arena, at, pos, slot, &mut path);
    }

    /// Puts `slot` at `pos` of `at`, splitting it (and its parents) when
    /// full; `path` holds the ancestors and the child taken in each.
    fn insert_at(
        &self,
        arena: &mut Arena,
        at: IndexNode<'_>,
        pos: usize,
        slot: Slot,
        path: &mut Path<'_>,
    ) {
        let len = at.len();
        if len < FANOUT {
            at.write_section(|n| {
                for i in (pos..len).rev() {
                    n.put(i + 1, n.slot(i));
                }
                n.put(pos, slot);
                n.header.len.store(len as u32 + 1, Ordering::Relaxed);
            });
            return;
        }
        let mut slots = [slot; FANOUT + 1];
        for i in 0..len {
            slots[if i < pos { i } else { i + 1 }] = at.slot(i);
        }
        // An insert at the end (ascending keys) leaves the left node full.
        let keep = if pos == len { FANOUT } else { slots.len() / 2 };
        // SAFETY: the index and the arena belong to one MemTable.
        let right = unsafe { new_node(arena, at.header.level) };
        right.store(&slots[keep..]);
        let separator = Slot {
            child: right.ptr.as_ptr(),
            ..slots[keep]
        };
        // The right node is linked before the left one shrinks, so readers
        // find every entry in one or the other (in both, for a moment).
        match path.pop() {
            Some((parent, child)) => self.insert_at(arena, parent, child + 1, separator, path),
            None => {
                // SAFETY: the index and the arena belong to one MemTable.
                let root = unsafe { new_node(arena, at.header.level + 1) };
                let left = Slot {
                    child: at.ptr.as_ptr(),
                    ..slots[0]
                };
                root.store(&[left, separator]);
                self.root.store(root.ptr.as_ptr(), Ordering::Release);
            }
        }
        at.write_section(|n| n.store(&slots[..keep]));
    }

    /// The indexed nodes in order, with a check of each index node's
    /// invariants. Caller: the writer, or no writer running.
    pub(crate) fn collect(&self) -> Result<Vec<*mut Node>, String> {
        let mut out = Vec::with_capacity(self.len() as usize);
        if let Some(root) = self.load_root() {
            collect_from(root, &mut out)?;
        }
        if out.len() as u64 != self.len() {
            return Err(format!("index holds {} of {} nodes", out.len(), self.len()));
        }
        Ok(out)
    }
}

fn collect_from(node: IndexNode<'_>, out: &mut Vec<*mut Node>) -> Result<(), String> {
    let len = node.len();
    if len == 0 || node.header.version.load(Ordering::Relaxed) % 2 == 1 {
        return Err("an index node is empty or mid-change".into());
    }
    for i in 0..len {
        let s = node.slot(i);
        // SAFETY: the writer's slots hold nodes of the arena.
        let n = unsafe { NodeRef::new(NonNull::new(s.node).ok_or("a null index entry")?) };
        if n.prefix() != s.prefix {
            return Err("an index entry's prefix is not its node's".into());
        }
        if node.is_leaf() {
            out.push(s.node);
            continue;
        }
        // SAFETY: as above, for child index nodes.
        let child = unsafe { IndexNode::new(NonNull::new(s.child).ok_or("a null index child")?) };
        if child.header.level + 1 != node.header.level {
            return Err("an index child's level is not one below its parent's".into());
        }
        let first = out.len();
        collect_from(child, out)?;
        if i > 0 && out.get(first) != Some(&s.node) {
            return Err("an index separator is not its child's first node".into());
        }
    }
    Ok(())
}

/// The node's version once even; `None` while the writer is in it.
fn stable_version(node: &Entries) -> Option<u64> {
    let v = node.header.version.load(Ordering::Acquire);
    (v % 2 == 0).then_some(v)
}

/// `Some` when the node's version is still `version`: what was read of it
/// since is whole.
fn validate(node: &Entries, version: u64) -> Option<()> {
    fence(Ordering::Acquire);
    (node.header.version.load(Ordering::Relaxed) == version).then_some(())
}

/// A zeroed index node of `level` in `arena` (an `Inner` unless a leaf).
///
/// # Safety
/// The node must not be used beyond `arena`'s life.
unsafe fn new_node<'a>(arena: &mut Arena, level: u32) -> IndexNode<'a> {
    let bytes = if level == 0 {
        size_of::<Entries>()
    } else {
        size_of::<Inner>()
    };
    let place = arena.alloc(bytes);
    let node = place.ptr.cast::<Entries>();
    // SAFETY: the allocation is zeroed, 8-aligned and `bytes` long; zeroed
    // atomics are valid, and only `level` is set before the node is
    // published. The caller keeps the node within the arena's life.
    unsafe {
        (*node.as_ptr()).header.level = level;
        IndexNode::new(node)
    }
}
