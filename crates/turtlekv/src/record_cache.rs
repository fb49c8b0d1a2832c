//! The hot-record cache: key → newest value (or known absent), for skewed
//! point reads (TreeLine's record caching). A cached record costs its key
//! and value plus a small overhead, where a block cache pays a 4 KiB block
//! for each hot key; under zipfian requests it holds many times more hot
//! keys per byte.
//!
//! Correctness rests on sequence numbers. An entry holds the value that is
//! newest from its `seq` on:
//! - a write updates the entry of its key (if cached) to the new value and
//!   the write's sequence number, before the write becomes visible;
//! - a reader at sequence number `r` uses an entry only if `entry.seq <= r`
//!   (a newer entry may belong to a write the reader must not see yet);
//! - a get that read its answer from the tree at `r` admits it with
//!   `seq = r`, unless a write to a key of the same hash slot was applied
//!   after `r`: every write raises its slot's watermark, under the same
//!   shard lock as admissions, so a stale answer can never be admitted;
//! - a checkpoint moves data between MemTables and tree but changes no
//!   key's newest value, so it leaves the cache alone.

use std::collections::HashMap;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use xxhash_rust::xxh3::Xxh3DefaultBuilder;

use bytes::Bytes;
use parking_lot::RwLock;

const SHARDS: usize = 64;
/// Watermark slots per shard: writes to keys of other slots do not block
/// admissions to this one.
const SLOTS_PER_SHARD: usize = 64;
/// Charged per entry on top of key and value: map slot, entry, handles.
pub(crate) const ENTRY_OVERHEAD_BYTES: u64 = 96;

#[derive(Debug)]
struct Entry {
    key: Bytes,
    value: Option<Bytes>,
    seq: u64,
    charge_bytes: u64,
    /// CLOCK bit: set by a hit, cleared by a passing sweep.
    referenced: AtomicBool,
}

#[derive(Debug)]
struct Shard {
    map: HashMap<Bytes, usize, Xxh3DefaultBuilder>,
    entries: Vec<Option<Entry>>,
    vacant: Vec<usize>,
    hand: usize,
    used_bytes: u64,
    /// Highest sequence number written to any key of each slot.
    watermarks: [u64; SLOTS_PER_SHARD],
}

/// Counters of the record cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RecordCacheCounts {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub used_bytes: u64,
    pub capacity_bytes: u64,
    pub entries: u64,
}

/// The cache; bounded in bytes, evenly over its shards.
#[derive(Debug)]
pub(crate) struct RecordCache {
    shards: Box<[RwLock<Shard>]>,
    capacity_bytes: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

/// Shard and watermark slot of a key.
fn place(key: &[u8]) -> (usize, usize) {
    let h = xxhash_rust::xxh3::xxh3_64(key);
    (
        (h % SHARDS as u64) as usize,
        ((h >> 32) % SLOTS_PER_SHARD as u64) as usize,
    )
}

impl RecordCache {
    pub fn new(capacity_bytes: u64) -> Self {
        let shard = || {
            RwLock::new(Shard {
                map: HashMap::with_hasher(Xxh3DefaultBuilder::new()),
                entries: Vec::new(),
                vacant: Vec::new(),
                hand: 0,
                used_bytes: 0,
                watermarks: [0; SLOTS_PER_SHARD],
            })
        };
        RecordCache {
            shards: (0..SHARDS).map(|_| shard()).collect(),
            capacity_bytes: AtomicU64::new(capacity_bytes),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes.load(Relaxed)
    }

    fn shard_capacity(&self) -> u64 {
        self.capacity_bytes.load(Relaxed) / SHARDS as u64
    }

    /// The newest value of `key` as seen at sequence number `read_seq`:
    /// `Some(None)` for a key known absent, `None` when the cache cannot
    /// answer (not cached, or cached from a write newer than `read_seq`).
    pub fn get(&self, key: &[u8], read_seq: u64) -> Option<Option<Bytes>> {
        if self.capacity_bytes.load(Relaxed) == 0 {
            return None;
        }
        let (s, _) = place(key);
        let shard = self.shards[s].read();
        let found = shard
            .map
            .get(key)
            .and_then(|&i| shard.entries[i].as_ref())
            .filter(|e| e.seq <= read_seq);
        match found {
            Some(entry) => {
                if !entry.referenced.load(Relaxed) {
                    entry.referenced.store(true, Relaxed);
                }
                self.hits.fetch_add(1, Relaxed);
                Some(entry.value.clone())
            }
            None => {
                self.misses.fetch_add(1, Relaxed);
                None
            }
        }
    }

    /// Records a write of `key` at `seq` (`None` = delete): raises the
    /// slot's watermark and updates the entry if the key is cached. Called
    /// before the write becomes visible.
    pub fn record_write(&self, key: &[u8], value: Option<&Bytes>, seq: u64) {
        let (s, slot) = place(key);
        let mut shard = self.shards[s].write();
        shard.watermarks[slot] = shard.watermarks[slot].max(seq);
        let Some(&i) = shard.map.get(key) else {
            return;
        };
        let entry = shard.entries[i].as_mut().expect("mapped entries exist");
        let old_charge = entry.charge_bytes;
        entry.value = value.cloned();
        entry.seq = entry.seq.max(seq);
        entry.charge_bytes = charge(key, value);
        let new_charge = entry.charge_bytes;
        shard.used_bytes = shard.used_bytes - old_charge + new_charge;
        self.evict_to_fit(&mut shard, 0);
    }

    /// Admits the answer a get read from the tree at `read_seq`, unless a
    /// write to the key's slot came after `read_seq`.
    pub fn admit(&self, key: &[u8], value: Option<&Bytes>, read_seq: u64) {
        let charge_bytes = charge(key, value);
        if charge_bytes > self.shard_capacity() {
            return;
        }
        let (s, slot) = place(key);
        let mut shard = self.shards[s].write();
        if shard.watermarks[slot] > read_seq || shard.map.contains_key(key) {
            return;
        }
        self.evict_to_fit(&mut shard, charge_bytes);
        let key = Bytes::copy_from_slice(key);
        let entry = Entry {
            key: key.clone(),
            // A copy: a value read from the tree is a slice of a whole
            // cached block, which it would otherwise keep alive.
            value: value.map(|v| Bytes::copy_from_slice(v)),
            seq: read_seq,
            charge_bytes,
            referenced: AtomicBool::new(false),
        };
        let index = match shard.vacant.pop() {
            Some(i) => {
                shard.entries[i] = Some(entry);
                i
            }
            None => {
                shard.entries.push(Some(entry));
                shard.entries.len() - 1
            }
        };
        shard.map.insert(key, index);
        shard.used_bytes += charge_bytes;
    }

    /// Evicts (CLOCK) until `extra` more bytes fit in the shard's share.
    fn evict_to_fit(&self, shard: &mut Shard, extra: u64) {
        let capacity = self.shard_capacity();
        while shard.used_bytes + extra > capacity && !shard.map.is_empty() {
            let i = shard.hand;
            shard.hand = (shard.hand + 1) % shard.entries.len();
            let Some(entry) = &shard.entries[i] else {
                continue;
            };
            if entry.referenced.swap(false, Relaxed) {
                continue;
            }
            let entry = shard.entries[i].take().expect("occupied");
            shard.map.remove(&entry.key);
            shard.vacant.push(i);
            shard.used_bytes -= entry.charge_bytes;
            self.evictions.fetch_add(1, Relaxed);
        }
    }

    /// Changes the byte budget; shrinking evicts at once.
    pub fn set_capacity(&self, capacity_bytes: u64) {
        self.capacity_bytes.store(capacity_bytes, Relaxed);
        for shard in self.shards.iter() {
            self.evict_to_fit(&mut shard.write(), 0);
        }
    }

    pub fn counts(&self) -> RecordCacheCounts {
        let (mut used_bytes, mut entries) = (0, 0);
        for shard in self.shards.iter() {
            let shard = shard.read();
            used_bytes += shard.used_bytes;
            entries += shard.map.len() as u64;
        }
        RecordCacheCounts {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
            used_bytes,
            capacity_bytes: self.capacity_bytes.load(Relaxed),
            entries,
        }
    }
}

fn charge(key: &[u8], value: Option<&Bytes>) -> u64 {
    (key.len() + value.map_or(0, Bytes::len)) as u64 + ENTRY_OVERHEAD_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn entries_are_used_only_at_or_after_their_sequence_number() {
        let cache = RecordCache::new(1 << 20);
        cache.admit(b"k", Some(&v("tree")), 10);
        assert_eq!(cache.get(b"k", 10), Some(Some(v("tree"))));
        assert_eq!(cache.get(b"k", 9), None);
        cache.record_write(b"k", Some(&v("new")), 12);
        assert_eq!(cache.get(b"k", 11), None, "a reader at 11 must not see 12");
        assert_eq!(cache.get(b"k", 12), Some(Some(v("new"))));
        cache.record_write(b"k", None, 13);
        assert_eq!(cache.get(b"k", 20), Some(None));
    }

    #[test]
    fn a_write_after_the_read_blocks_admission() {
        let cache = RecordCache::new(1 << 20);
        // A reader read "old" from the tree at 5; a write at 6 came first.
        cache.record_write(b"k", Some(&v("new")), 6);
        cache.admit(b"k", Some(&v("old")), 5);
        assert_eq!(cache.get(b"k", 100), None);
        // A reader at 6 or later may admit.
        cache.admit(b"k", Some(&v("new")), 6);
        assert_eq!(cache.get(b"k", 100), Some(Some(v("new"))));
    }

    #[test]
    fn stays_within_its_budget_and_evicts_cold_entries_first() {
        let capacity = 64 * 1024u64;
        let cache = RecordCache::new(capacity);
        for i in 0..10_000u32 {
            let key = i.to_be_bytes();
            cache.admit(&key, Some(&Bytes::from(vec![0u8; 100])), 1);
            // Key 0 is hot: read after every admission.
            cache.get(&0u32.to_be_bytes(), 1);
        }
        let counts = cache.counts();
        assert!(counts.used_bytes <= capacity, "{counts:?}");
        assert!(counts.evictions > 9_000, "{counts:?}");
        assert!(
            cache.get(&0u32.to_be_bytes(), 1).is_some(),
            "hot key evicted"
        );
        cache.set_capacity(0);
        assert_eq!(cache.counts().used_bytes, 0);
        assert_eq!(cache.get(&0u32.to_be_bytes(), 1), None);
    }
}
