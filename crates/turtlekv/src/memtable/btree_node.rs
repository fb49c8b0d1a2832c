//! One node of the B+-tree MemTable (`btree.rs`), as laid out in its node
//! arena:
//!
//! ```text
//! offset 0    version      u64   odd while the writer changes the node
//!        8    len          u32   entries (leaf) or children (inner)
//!        12   level        u32   0 for a leaf; fixed at creation
//!        16   right        ptr   the next node at this level, or null
//!        24   high         ptr   right's first entry (its low fence), or null
//!        32   high_prefix  u64   that entry's key prefix
//!        40   prefixes     FANOUT × u64: each entry's key prefix
//!             entries      FANOUT × ptr: leaf: the entries, in version order;
//!                          inner: entries[i] is child i's low fence (entry 0
//!                          is the node's own, null on the leftmost path)
//!             children     FANOUT × ptr, inner nodes only
//! ```
//!
//! One writer changes nodes (the MemTable's writer lock); readers take no
//! lock. The version is a sequence lock: the writer makes it odd, changes
//! the node, and makes it even again, and a reader keeps what it read only
//! if the version was even and the same before and after. Every field is
//! an atomic, so a reader racing the writer reads stale or mixed values,
//! never undefined ones, and throws them away.
//!
//! Every pointer slot holds null or a published entry or node of the same
//! MemTable: slots are nulled when a node is made (arena memory is reused,
//! not zeroed), pointers are stored with release and loaded with acquire,
//! and nothing is freed before the MemTable. So a reader may follow a
//! pointer it read before it validates the read.

use std::cmp::Ordering;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, fence};

use super::arena::Arena;
use super::node::{Node, NodeRef};
use super::search::Edge;

/// Slots per node. 32 keeps a leaf's prefixes in four cache lines, so a
/// search of a node costs about one memory latency, and a tree of a
/// million entries about five levels.
pub(crate) const FANOUT: usize = 32;

/// Cache-line aligned, so a node's fields share lines only with each other.
#[repr(C, align(64))]
pub(crate) struct Header {
    version: AtomicU64,
    len: AtomicU32,
    level: u32,
    right: AtomicPtr<Header>,
    high: AtomicPtr<Node>,
    high_prefix: AtomicU64,
    prefixes: [AtomicU64; FANOUT],
    entries: [AtomicPtr<Node>; FANOUT],
}

/// An inner node: the header, then the children.
#[repr(C, align(64))]
pub(crate) struct Inner {
    header: Header,
    children: [AtomicPtr<Header>; FANOUT],
}

const _: () =
    assert!(size_of::<Header>().is_multiple_of(64) && size_of::<Inner>().is_multiple_of(64));

/// A node of a MemTable's node arena, valid for `'a` (the MemTable). A
/// pointer rather than a `&Header`: an inner node's children lie past its
/// header, out of a `&Header`'s reach (under Stacked Borrows a reference
/// may only be used for the bytes of its type), so every node is reached
/// through the pointer the arena handed out, and the header alone through
/// `Deref`.
#[derive(Clone, Copy)]
pub(crate) struct NodePtr<'a> {
    ptr: NonNull<Header>,
    _arena: PhantomData<&'a Header>,
}

impl<'a> NodePtr<'a> {
    /// # Safety
    /// `ptr` is a node made by `Header::create` in the node arena of a
    /// MemTable that lives for `'a`, and published (or about to be, by the
    /// writer that made it).
    pub unsafe fn new(ptr: NonNull<Header>) -> Self {
        NodePtr {
            ptr,
            _arena: PhantomData,
        }
    }

    /// The node a link holds; `None` for a null link.
    ///
    /// # Safety
    /// `link` was loaded from a link (a right sibling or a child) of a
    /// node of a MemTable that lives for `'a`.
    unsafe fn from_link(link: *mut Header) -> Option<Self> {
        // SAFETY: links hold null or published nodes of the same MemTable
        // (module docs), which lives for `'a` (the caller's promise).
        NonNull::new(link).map(|ptr| unsafe { NodePtr::new(ptr) })
    }

    /// The pointer, with the provenance of the whole node.
    pub fn as_ptr(self) -> *mut Header {
        self.ptr.as_ptr()
    }

    fn header(self) -> &'a Header {
        // SAFETY: the node is initialised (`Header::create`) and lives for
        // `'a`; every field a reader shares is an atomic.
        unsafe { self.ptr.as_ref() }
    }

    /// An inner node's children.
    fn children(self) -> &'a [AtomicPtr<Header>; FANOUT] {
        debug_assert!(self.level > 0);
        // SAFETY: nodes above level 0 were made as `Inner`, whose first
        // field is the header, and `ptr` covers the whole allocation (it is
        // the arena's pointer, not one derived from a `&Header`).
        unsafe { &(*self.ptr.as_ptr().cast::<Inner>()).children }
    }
}

impl Deref for NodePtr<'_> {
    type Target = Header;

    fn deref(&self) -> &Header {
        self.header()
    }
}

/// Where a search goes from an inner node, or from a node whose range
/// the edge lies beyond.
pub(crate) enum Step<'a> {
    /// The edge lies beyond the node's range: go on at `right`.
    Right(Option<NodePtr<'a>>),
    /// Go down to `child`, the `index`th.
    Down {
        child: Option<NodePtr<'a>>,
        index: usize,
    },
}

/// A node's entries as one consistent read saw them.
pub(crate) struct Snapshot<'a> {
    pub entries: [Option<NodeRef<'a>>; FANOUT],
    pub len: usize,
    pub right: Option<NodePtr<'a>>,
}

/// A published entry, or `None` for a null slot (seen only by a read that
/// will fail its validation, or the leftmost inner nodes' missing fence).
///
/// # Safety
/// `ptr` is null or an entry written by `write_node` in the entry arena of
/// a MemTable that lives for `'a`, and published: a value loaded from a
/// slot (or high fence) of one of its nodes, or the writer's new entry.
pub(crate) unsafe fn slot_entry<'a>(ptr: *mut Node) -> Option<NodeRef<'a>> {
    // SAFETY: the caller's promise is `NodeRef::new`'s.
    NonNull::new(ptr).map(|p| unsafe { NodeRef::new(p) })
}

impl Header {
    /// A new node of `level` in `arena`, empty, with every slot null.
    pub fn create(arena: &mut Arena, level: u32) -> *mut Header {
        let bytes = if level == 0 {
            size_of::<Header>()
        } else {
            size_of::<Inner>()
        };
        let ptr = arena.alloc(bytes).ptr.as_ptr();
        debug_assert_eq!(ptr as usize % 64, 0, "node arenas hand out lines");
        let header = Header {
            version: AtomicU64::new(0),
            len: AtomicU32::new(0),
            level,
            right: AtomicPtr::new(std::ptr::null_mut()),
            high: AtomicPtr::new(std::ptr::null_mut()),
            high_prefix: AtomicU64::new(0),
            prefixes: [const { AtomicU64::new(0) }; FANOUT],
            entries: [const { AtomicPtr::new(std::ptr::null_mut()) }; FANOUT],
        };
        // SAFETY: `bytes` fresh, 64-aligned bytes that nothing else refers
        // to until the caller publishes the node.
        unsafe {
            if level == 0 {
                ptr.cast::<Header>().write(header);
            } else {
                ptr.cast::<Inner>().write(Inner {
                    header,
                    children: [const { AtomicPtr::new(std::ptr::null_mut()) }; FANOUT],
                });
            }
        }
        ptr.cast()
    }

    pub fn level(&self) -> u32 {
        self.level
    }

    /// The version now; the writer's view (it alone changes it).
    pub fn version(&self) -> u64 {
        self.version.load(Acquire)
    }

    pub fn len(&self) -> usize {
        (self.len.load(Relaxed) as usize).min(FANOUT)
    }

    pub fn is_full(&self) -> bool {
        self.len() == FANOUT
    }

    /// Slot `index`'s entry, as a pointer (for comparisons).
    pub fn entry(&self, index: usize) -> *mut Node {
        self.entries[index].load(Acquire)
    }

    /// The high fence, as a pointer (for comparisons).
    pub fn high(&self) -> *mut Node {
        self.high.load(Acquire)
    }

    /// The prefix stored for slot `index` (checks only).
    pub fn prefix_at(&self, index: usize) -> u64 {
        self.prefixes[index].load(Relaxed)
    }

    pub fn high_prefix(&self) -> u64 {
        self.high_prefix.load(Relaxed)
    }
}

impl<'a> NodePtr<'a> {
    /// Runs `read` until it saw the node between two changes, and returns
    /// what it returned with the version it saw.
    pub fn read<R>(self, read: impl Fn(NodePtr<'a>) -> R) -> (R, u64) {
        loop {
            let before = self.version.load(Acquire);
            if before & 1 == 0 {
                let result = read(self);
                fence(Acquire);
                if self.version.load(Relaxed) == before {
                    return (result, before);
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Changes the node where readers can see it. Writer only.
    fn write(self, change: impl FnOnce(NodePtr<'a>)) {
        let version = self.version.load(Relaxed);
        self.version.store(version + 1, Relaxed);
        fence(Release);
        change(self);
        self.version.store(version + 2, Release);
    }

    /// Slot `index`'s entry.
    pub fn entry_ref(self, index: usize) -> Option<NodeRef<'a>> {
        // SAFETY: slots hold null or published entries of the MemTable that
        // owns the node, which lives for `'a` (module docs).
        unsafe { slot_entry(self.entry(index)) }
    }

    /// The high fence's entry.
    pub fn high_ref(self) -> Option<NodeRef<'a>> {
        // SAFETY: as in `entry_ref`.
        unsafe { slot_entry(self.high()) }
    }

    pub fn right(self) -> Option<NodePtr<'a>> {
        // SAFETY: loaded from this node's link; the node lives for `'a`.
        unsafe { NodePtr::from_link(self.right.load(Acquire)) }
    }

    pub fn child(self, index: usize) -> Option<NodePtr<'a>> {
        // SAFETY: as in `right`.
        unsafe { NodePtr::from_link(self.children()[index].load(Acquire)) }
    }

    /// Whether `edge` passes the entry `entry` with key prefix `prefix`.
    fn passes(edge: Edge<'_>, prefix: u64, entry: Option<NodeRef<'_>>) -> bool {
        match edge.prefix().map(|p| prefix.cmp(&p)) {
            None => true,
            Some(Ordering::Less) => true,
            Some(Ordering::Greater) => false,
            Some(Ordering::Equal) => entry.is_some_and(|n| edge.passes(n)),
        }
    }

    /// How many of the slots `from..len` pass `edge`, plus `from`.
    fn count_passing(self, from: usize, edge: Edge<'_>) -> usize {
        let len = self.len();
        let Some(target) = edge.prefix() else {
            return len.max(from);
        };
        // Prefixes are in order: a binary search for the first one at or
        // above the edge's, then a walk over those equal to it.
        let (mut lo, mut hi) = (from, len.max(from));
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.prefixes[mid].load(Relaxed) < target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        while lo < len && Self::passes(edge, self.prefixes[lo].load(Relaxed), self.entry_ref(lo)) {
            lo += 1;
        }
        lo
    }

    /// Where `edge` leads from this node; `None` when it is a leaf whose
    /// range holds the edge (a reader's view; see `read`).
    pub fn route(self, edge: Edge<'_>) -> Option<Step<'a>> {
        if let Some(high) = self.high_ref()
            && Self::passes(edge, self.high_prefix.load(Relaxed), Some(high))
        {
            return Some(Step::Right(self.right()));
        }
        if self.level == 0 {
            return None;
        }
        // Children past the first are entered when their low fence passes.
        let index = self.count_passing(1, edge) - 1;
        Some(Step::Down {
            child: self.child(index),
            index,
        })
    }

    /// How many of a leaf's entries pass `edge`.
    pub fn passed(self, edge: Edge<'_>) -> usize {
        self.count_passing(0, edge)
    }

    /// The slots `from..len`, with the links after them.
    pub fn snapshot(self, from: usize) -> Snapshot<'a> {
        let mut entries = [None; FANOUT];
        let len = self.len();
        for (slot, at) in entries.iter_mut().zip(from..len) {
            *slot = self.entry_ref(at);
        }
        Snapshot {
            entries,
            len: len.saturating_sub(from),
            right: self.right(),
        }
    }
}

/// Writer-side changes: only the thread holding the MemTable's writer
/// lock calls these.
impl<'a> NodePtr<'a> {
    /// Puts `entry` (with `child`, in an inner node) at `index`, moving the
    /// slots from there one up. The node has room.
    pub fn insert_at(self, index: usize, entry: NodeRef<'a>, child: Option<NodePtr<'a>>) {
        let len = self.len();
        assert!(
            len < FANOUT && index <= len,
            "room at a slot in use or next"
        );
        self.write(|n| {
            for at in (index..len).rev() {
                n.move_slot(at, at + 1);
            }
            n.set_slot(index, entry.parts().prefix, Some(entry), child);
            n.len.store(len as u32 + 1, Relaxed);
        });
    }

    fn move_slot(self, from: usize, to: usize) {
        self.move_from(self, from, to);
    }

    /// Sets slot `at`. Slots take only entries and nodes of this MemTable,
    /// which is what the types say: every reader relies on it.
    fn set_slot(
        self,
        at: usize,
        prefix: u64,
        entry: Option<NodeRef<'a>>,
        child: Option<NodePtr<'a>>,
    ) {
        self.prefixes[at].store(prefix, Relaxed);
        let entry = entry.map_or(std::ptr::null_mut(), NodeRef::ptr);
        self.entries[at].store(entry, Release);
        if self.level > 0 {
            self.children()[at].store(link(child), Release);
        }
    }

    /// Moves the upper half of this full node to a new right sibling, and
    /// returns it. Readers that come here for the moved half go right.
    pub fn split(self, arena: &mut Arena) -> NodePtr<'a> {
        debug_assert!(self.is_full());
        let mid = FANOUT / 2;
        let right = Header::create(arena, self.level);
        // SAFETY: a fresh node in the MemTable's node arena, which lives
        // as long as the MemTable; published by the write below.
        let right = unsafe { NodePtr::new(NonNull::new_unchecked(right)) };
        for at in mid..FANOUT {
            right.move_from(self, at, at - mid);
        }
        right.len.store((FANOUT - mid) as u32, Relaxed);
        right.right.store(link(self.right()), Relaxed);
        right.high.store(self.high(), Relaxed);
        right
            .high_prefix
            .store(self.high_prefix.load(Relaxed), Relaxed);
        let fence = right.entry_ref(0).expect("a split moves entries");
        // The write's release publishes the sibling's fields with it.
        self.write(|n| {
            n.len.store(mid as u32, Relaxed);
            n.right.store(right.as_ptr(), Release);
            n.high.store(fence.ptr(), Release);
            n.high_prefix.store(fence.parts().prefix, Relaxed);
        });
        right
    }

    fn move_from(self, other: NodePtr<'a>, from: usize, to: usize) {
        let child = if self.level > 0 {
            other.child(from)
        } else {
            None
        };
        self.set_slot(
            to,
            other.prefixes[from].load(Relaxed),
            other.entry_ref(from),
            child,
        );
    }

    /// A root above `left` and its new sibling `right`.
    pub fn new_root(arena: &mut Arena, left: NodePtr<'a>, right: NodePtr<'a>) -> NodePtr<'a> {
        let root = Header::create(arena, left.level + 1);
        // SAFETY: just made in the MemTable's node arena, not yet published.
        let root = unsafe { NodePtr::new(NonNull::new_unchecked(root)) };
        root.set_slot(0, 0, None, Some(left));
        let fence = right.entry_ref(0).expect("a split sibling holds entries");
        root.set_slot(1, fence.parts().prefix, Some(fence), Some(right));
        root.len.store(2, Relaxed);
        root
    }
}

/// A link's pointer: null for `None`.
fn link(node: Option<NodePtr<'_>>) -> *mut Header {
    node.map_or(std::ptr::null_mut(), NodePtr::as_ptr)
}

/// The key prefix of an entry; 0 for none.
pub(crate) fn entry_prefix(entry: Option<NodeRef<'_>>) -> u64 {
    entry.map_or(0, |n| n.parts().prefix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memtable::node::write_node;

    /// A search that read the parent before a split reaches the left half
    /// after it: edges beyond the high fence go right, the others stay.
    #[test]
    fn a_search_that_reaches_a_split_node_late_goes_right() {
        let mut entries = Arena::new(64 << 10, None);
        let mut nodes = Arena::new(64 << 10, None);
        let key = |i: usize| (i as u64 * 10).to_be_bytes();
        let leaf = Header::create(&mut nodes, 0);
        // SAFETY: a node of this test's arena, which outlives it.
        let leaf = unsafe { NodePtr::new(NonNull::new(leaf).unwrap()) };
        for i in 0..FANOUT {
            let entry = write_node(&mut entries, 0, &key(i), 1, None);
            // SAFETY: just written in this test's entry arena.
            leaf.insert_at(i, unsafe { NodeRef::new(entry) }, None);
        }
        let right = leaf.split(&mut nodes);
        let mid = FANOUT / 2;
        for i in 0..FANOUT {
            let k = key(i);
            let edge = Edge::below(&k);
            match leaf.read(|n| n.route(edge)).0 {
                None => {
                    assert!(i <= mid, "key {i} stays left");
                    assert_eq!(leaf.passed(edge), i);
                }
                Some(Step::Right(r)) => {
                    assert!(i > mid, "key {i} goes right");
                    assert_eq!(r.map(NodePtr::as_ptr), Some(right.as_ptr()));
                    assert!(right.route(edge).is_none());
                    assert_eq!(right.passed(edge), i - mid);
                }
                Some(Step::Down { .. }) => panic!("a leaf has no children"),
            }
        }
    }
}
