//! A hash index from each key to its newest version's node, so that a get
//! at the latest sequence number finds its node in a cache miss or two
//! instead of a search down the skiplist (about 37 node visits in a 64 MiB
//! MemTable, most of them misses at the bottom levels).
//!
//! Open addressing with linear probing. A slot is one atomic word: the top
//! 16 bits are a tag from the key's hash, the low 48 bits the node's
//! address; 0 is empty. A slot only goes from empty to a node of one key,
//! then to newer nodes of the same key, so a reader that finds its key in
//! a slot has that key's only slot.
//!
//! One writer (the MemTable's) stores slots with release after the node is
//! written; readers take no lock. The writer stores a slot before the
//! write's sequence number is published, so a reader at a published
//! sequence number sees every slot stored for it. When more than seven
//! eighths of the slots are taken, or a node's address does not fit in 48
//! bits, the index stops for good: `complete` turns false before the write
//! that could not be indexed is published, and readers go back to the
//! skiplist search.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use super::node::{Node, NodeRef};

const ADDRESS_BITS: u32 = 48;
const ADDRESS_MASK: u64 = (1 << ADDRESS_BITS) - 1;

/// What the index knows of a key.
#[derive(Clone, Copy)]
pub(crate) enum Lookup<'a> {
    /// The key's newest version.
    Newest(NodeRef<'a>),
    /// The MemTable holds no version of the key.
    Absent,
    /// The index has stopped; ask the skiplist.
    Unknown,
}

#[derive(Debug)]
pub(crate) struct KeyIndex {
    slots: Box<[AtomicU64]>,
    complete: AtomicBool,
    /// Slots taken; written by the writer only.
    used: AtomicUsize,
}

impl KeyIndex {
    /// An index with room for about `expected_keys` keys (a power of two
    /// slots, at least that many).
    pub fn new(expected_keys: u64) -> Self {
        let len = expected_keys.max(64).next_power_of_two() as usize;
        KeyIndex {
            slots: (0..len).map(|_| AtomicU64::new(0)).collect(),
            complete: AtomicBool::new(true),
            used: AtomicUsize::new(0),
        }
    }

    /// Memory the index takes.
    pub fn size_bytes(&self) -> u64 {
        self.slots.len() as u64 * 8
    }

    /// The newest version of `key` (whose hash is `hash`), if the index
    /// still knows.
    pub fn lookup<'a>(
        &'a self,
        key: &[u8],
        hash: u64,
        node: impl Fn(NonNull<Node>) -> NodeRef<'a>,
    ) -> Lookup<'a> {
        if !self.complete.load(Ordering::Acquire) {
            return Lookup::Unknown;
        }
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        // Ends: at most seven eighths of the slots are ever taken.
        loop {
            let slot = self.slots[i].load(Ordering::Acquire);
            let Some(ptr) = NonNull::new((slot & ADDRESS_MASK) as *mut Node) else {
                return Lookup::Absent;
            };
            if slot >> ADDRESS_BITS == tag(hash) {
                let found = node(ptr);
                if found.key() == key {
                    return Lookup::Newest(found);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Records `new` as the newest version of its key (`hash` its hash).
    /// Writer only; before the version's sequence number is published.
    pub fn record<'a>(
        &'a self,
        hash: u64,
        new: NodeRef<'a>,
        node: impl Fn(NonNull<Node>) -> NodeRef<'a>,
    ) {
        if !self.complete.load(Ordering::Relaxed) {
            return;
        }
        let address = new.ptr() as u64;
        if address > ADDRESS_MASK {
            self.complete.store(false, Ordering::Release);
            return;
        }
        let entry = tag(hash) << ADDRESS_BITS | address;
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let slot = self.slots[i].load(Ordering::Relaxed);
            let Some(ptr) = NonNull::new((slot & ADDRESS_MASK) as *mut Node) else {
                let used = self.used.load(Ordering::Relaxed) + 1;
                if used > self.slots.len() / 8 * 7 {
                    self.complete.store(false, Ordering::Release);
                    return;
                }
                self.used.store(used, Ordering::Relaxed);
                self.slots[i].store(entry, Ordering::Release);
                return;
            };
            if slot >> ADDRESS_BITS == tag(hash) {
                let old = node(ptr);
                if old.key() == new.key() {
                    // Versions arrive in sequence order; keep the newest
                    // whatever the order.
                    if new.seq() > old.seq() {
                        self.slots[i].store(entry, Ordering::Release);
                    }
                    return;
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Whether the index still answers lookups.
    pub fn is_complete(&self) -> bool {
        self.complete.load(Ordering::Acquire)
    }

    /// Slots taken, one per key (for checks; exact without a writer).
    pub fn used_slots(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

fn tag(hash: u64) -> u64 {
    hash >> ADDRESS_BITS
}
