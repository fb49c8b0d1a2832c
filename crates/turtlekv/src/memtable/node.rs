//! One skiplist node as laid out in the arena:
//!
//! ```text
//! offset 0   seq        u64
//!        8   key_len    u32
//!        12  value_len  u32   TOMBSTONE for a delete; bit 31 set for a value pointer
//!        16  height     u32   1..=MAX_HEIGHT in the skiplist, 0 in the B+-tree
//!        20  chunk      u32   arena chunk holding the node
//!        24  prefix     u64   first 8 key bytes, big-endian, zero-padded
//!        32  tower      height × pointer to the next node at each level
//!            key        key_len bytes
//!            value      value_len bytes (none for a tombstone)
//! ```
//!
//! Everything but the tower is written once, before the node is published
//! with a release store; the tower's pointers change as later nodes link in
//! after this one, so they are atomics.
//!
//! A search reads only the prefix of most nodes it visits, and the tower
//! of those it passes: the two sit side by side, so that in a MemTable far
//! larger than the CPU's caches a visit at the bottom levels (where most
//! visits miss the cache) usually touches one cache line.

use std::cmp::Ordering;
use std::marker::PhantomData;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::AtomicPtr;

use super::arena::{Arena, Place};
use crate::key::key_prefix;
#[cfg(any(test, feature = "sim"))]
use crate::util::prefetch::{Locality, prefetch};
use crate::values::Value;

/// Tallest tower; with a branching factor of 4 it covers 4^20 entries.
pub(crate) const MAX_HEIGHT: usize = 20;

const TOMBSTONE: u32 = u32::MAX;
/// Set in `value_len` when the value is a value pointer (which is far
/// shorter than this).
const POINTER: u32 = 1 << 31;

#[repr(C)]
pub(crate) struct Node {
    seq: u64,
    key_len: u32,
    value_len: u32,
    height: u32,
    chunk: u32,
    prefix: u64,
}

const HEADER_BYTES: usize = size_of::<Node>();
const _: () = assert!(HEADER_BYTES == 32 && align_of::<Node>() == 8);

/// Orders versions by user key ascending, then sequence number descending,
/// so the newest version of a key comes first. `prefix` caches the key's
/// first 8 bytes so most comparisons are one integer compare.
#[derive(Clone, Copy)]
pub(crate) struct KeyParts<'a> {
    pub prefix: u64,
    pub user_key: &'a [u8],
    pub seq: u64,
}

impl<'a> KeyParts<'a> {
    pub fn new(user_key: &'a [u8], seq: u64) -> Self {
        KeyParts {
            prefix: key_prefix(user_key),
            user_key,
            seq,
        }
    }
}

pub(crate) fn compare(a: KeyParts<'_>, b: KeyParts<'_>) -> Ordering {
    // Equal prefixes say nothing about shorter keys ("a" vs "a\0"), so ties
    // fall back to the full comparison.
    a.prefix
        .cmp(&b.prefix)
        .then_with(|| a.user_key.cmp(b.user_key))
        .then_with(|| b.seq.cmp(&a.seq))
}

/// Asks for the cache line of `node`'s prefix, which a search compares
/// first (a hint: any address will do, null included).
#[cfg(any(test, feature = "sim"))]
#[inline]
pub(crate) fn prefetch_search_fields(node: *mut Node) {
    let at = node
        .cast::<u8>()
        .wrapping_add(std::mem::offset_of!(Node, prefix));
    prefetch(at, Locality::Nearest);
}

/// Where the key starts: after the header and a tower of `height`.
fn key_offset(height: usize) -> usize {
    HEADER_BYTES + height * size_of::<AtomicPtr<Node>>()
}

/// Bytes a node of this shape takes in the arena (before alignment).
pub(crate) fn node_bytes(height: usize, key_len: usize, value_len: usize) -> usize {
    key_offset(height) + key_len + value_len
}

/// Writes a node into `arena`; its tower is all null. The caller links it.
pub(crate) fn write_node(
    arena: &mut Arena,
    height: usize,
    key: &[u8],
    seq: u64,
    value: Option<&Value>,
) -> NonNull<Node> {
    // Height 0: an entry of the B+-tree MemTable, which links it from its
    // nodes instead.
    debug_assert!(height <= MAX_HEIGHT);
    let value_bytes: &[u8] = value.map_or(&[], |v| v.stored());
    let Place { ptr, chunk } = arena.alloc(node_bytes(height, key.len(), value_bytes.len()));
    let node = ptr.cast::<Node>();
    let header = Node {
        seq,
        key_len: u32::try_from(key.len()).expect("keys are at most 512 bytes"),
        value_len: value.map_or(TOMBSTONE, |v| {
            let len = u32::try_from(v.stored_len()).expect("stored values are at most 256 KiB");
            debug_assert!(len < POINTER);
            if v.is_pointer() { len | POINTER } else { len }
        }),
        height: height as u32,
        chunk,
        prefix: key_prefix(key),
    };
    // SAFETY: the allocation is 8-aligned and `node_bytes` long: the header,
    // the tower, then room for the key and the value. Nothing else refers
    // to it until the caller publishes it.
    unsafe {
        node.as_ptr().write(header);
        // Null links: arena memory may be reused, not zeroed.
        let tower = ptr.as_ptr().add(HEADER_BYTES).cast::<AtomicPtr<Node>>();
        for level in 0..height {
            tower.add(level).write(AtomicPtr::new(std::ptr::null_mut()));
        }
        let key_at = ptr.as_ptr().add(key_offset(height));
        key_at.copy_from_nonoverlapping(key.as_ptr(), key.len());
        let value_at = key_at.add(key.len());
        value_at.copy_from_nonoverlapping(value_bytes.as_ptr(), value_bytes.len());
    }
    node
}

/// A published node, valid for `'a` (the MemTable that owns its arena).
/// Every access goes through the arena's pointer, so it may reach the tower
/// and the key and value that follow the header.
#[derive(Clone, Copy)]
pub(crate) struct NodeRef<'a> {
    ptr: NonNull<Node>,
    _arena: PhantomData<&'a Node>,
}

impl<'a> NodeRef<'a> {
    /// # Safety
    /// `ptr` is a node written by `write_node` in an arena that lives for
    /// `'a`, and published (or about to be, by the thread that wrote it).
    pub unsafe fn new(ptr: NonNull<Node>) -> Self {
        NodeRef {
            ptr,
            _arena: PhantomData,
        }
    }

    pub fn ptr(self) -> *mut Node {
        self.ptr.as_ptr()
    }

    fn header(self) -> &'a Node {
        // SAFETY: the header is initialised and never written after
        // publication.
        unsafe { self.ptr.as_ref() }
    }

    pub fn seq(self) -> u64 {
        self.header().seq
    }

    pub fn height(self) -> usize {
        self.header().height as usize
    }

    pub fn chunk(self) -> u32 {
        self.header().chunk
    }

    /// The next-node pointer at `level`; `level < height`.
    #[cfg(any(test, feature = "sim"))]
    pub fn next(self, level: usize) -> &'a AtomicPtr<Node> {
        assert!(level < self.height(), "level within the tower");
        // SAFETY: the tower follows the header in the same allocation and
        // has `height` entries, null (zeroed) until linked.
        unsafe {
            &*self
                .ptr
                .as_ptr()
                .cast::<u8>()
                .add(HEADER_BYTES)
                .cast::<AtomicPtr<Node>>()
                .add(level)
        }
    }

    /// Offsets of the key from the node's start.
    pub fn key_range(self) -> Range<usize> {
        let start = key_offset(self.height());
        start..start + self.header().key_len as usize
    }

    /// Offsets of the value; `None` for a tombstone.
    pub fn value_range(self) -> Option<Range<usize>> {
        let start = self.key_range().end;
        let len = self.header().value_len;
        (len != TOMBSTONE).then(|| start..start + (len & !POINTER) as usize)
    }

    /// Whether the value is a value pointer.
    pub fn is_pointer(self) -> bool {
        let len = self.header().value_len;
        len != TOMBSTONE && len & POINTER != 0
    }

    fn bytes(self, range: Range<usize>) -> &'a [u8] {
        // SAFETY: the key and value were written before the node was
        // published and are never written again.
        unsafe {
            std::slice::from_raw_parts(self.ptr.as_ptr().cast::<u8>().add(range.start), range.len())
        }
    }

    pub fn key(self) -> &'a [u8] {
        self.bytes(self.key_range())
    }

    /// `None` for a tombstone.
    pub fn value(self) -> Option<&'a [u8]> {
        self.value_range().map(|r| self.bytes(r))
    }

    /// How this node's version orders against `parts`: by the prefix
    /// alone when they differ, without reading the rest of the node.
    pub fn cmp_parts(self, parts: KeyParts<'_>) -> Ordering {
        match self.header().prefix.cmp(&parts.prefix) {
            Ordering::Equal => compare(self.parts(), parts),
            unequal => unequal,
        }
    }

    pub fn parts(self) -> KeyParts<'a> {
        KeyParts {
            prefix: self.header().prefix,
            user_key: self.key(),
            seq: self.seq(),
        }
    }
}
