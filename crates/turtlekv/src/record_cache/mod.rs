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
//!
//! Admission is by frequency (TinyLFU): every get counts its key in a
//! frequency sketch, and when the cache is full a record read from disk
//! comes in only if it was asked for more often lately than the entry
//! CLOCK would evict for it. Recency alone (CLOCK, LRU) lets the long tail
//! of a skewed stream flush hot records out; see `sketch`.

mod sketch;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use arc_swap::ArcSwap;
use bytes::Bytes;
use hashbrown::HashTable;
use parking_lot::RwLock;

use crate::util::ghost::Ghost;
use crate::values::Value;
use sketch::FrequencySketch;

/// Separated values up to this long are cached in the place of their
/// pointer, by reads (`admit_resolved`) and by writes (`record_write`
/// with the user's bytes); longer ones would displace many small records
/// for one.
pub(crate) const MAX_SEPARATED_VALUE_BYTES: usize = 64 * 1024;

const SHARDS: usize = 64;
/// Watermark slots per shard: writes to keys of other slots do not block
/// admissions to this one.
const SLOTS_PER_SHARD: usize = 64;
/// Charged per entry on top of key and value, measured (`probe` below):
/// the entry slot and its share of the vector's spare capacity, the hash
/// table's index and control byte, the allocator's chunk rounding, and the
/// shared-buffer header the first hit creates.
pub(crate) const ENTRY_OVERHEAD_BYTES: u64 = 112;
/// What an entry is assumed to cost when sizing the frequency sketch: a
/// 128-byte record and its overhead.
const TYPICAL_ENTRY_BYTES: u64 = 256;

#[derive(Debug)]
struct Entry {
    /// The key followed by the value, in one allocation: values handed out
    /// are slices of it, so a hit allocates nothing.
    record: Bytes,
    key_len: u32,
    /// A cached "known absent" (the record holds only the key).
    absent: bool,
    /// The value is a value pointer: the cache spares the lookup, not the
    /// value file's read.
    pointer: bool,
    /// CLOCK bit: set by a hit, cleared by a passing sweep.
    referenced: AtomicBool,
    seq: u64,
}

impl Entry {
    fn new(key: &[u8], value: Option<&Value>, seq: u64) -> Entry {
        let bytes: &[u8] = value.map_or(&[], |v| v.stored());
        let mut record = Vec::with_capacity(key.len() + bytes.len());
        record.extend_from_slice(key);
        record.extend_from_slice(bytes);
        Entry {
            record: Bytes::from(record),
            key_len: u32::try_from(key.len()).expect("keys are far shorter than 4 GiB"),
            absent: value.is_none(),
            pointer: value.is_some_and(Value::is_pointer),
            referenced: AtomicBool::new(false),
            seq,
        }
    }

    fn key(&self) -> &[u8] {
        &self.record[..self.key_len as usize]
    }

    fn value(&self) -> Option<Value> {
        (!self.absent)
            .then(|| Value::of_kind(self.pointer, self.record.slice(self.key_len as usize..)))
    }

    fn charge_bytes(&self) -> u64 {
        self.record.len() as u64 + ENTRY_OVERHEAD_BYTES
    }
}

#[derive(Debug)]
struct Shard {
    /// Indexes into `entries`, found by the key's hash.
    index: HashTable<u32>,
    entries: Vec<Option<Entry>>,
    vacant: Vec<u32>,
    hand: usize,
    used_bytes: u64,
    /// Highest sequence number written to any key of each slot.
    watermarks: [u64; SLOTS_PER_SHARD],
}

impl Default for Shard {
    fn default() -> Self {
        Shard {
            index: HashTable::new(),
            entries: Vec::new(),
            vacant: Vec::new(),
            hand: 0,
            used_bytes: 0,
            watermarks: [0; SLOTS_PER_SHARD],
        }
    }
}

impl Shard {
    fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        let entries = &self.entries;
        self.index
            .find(hash, |&i| entry_at(entries, i).key() == key)
            .copied()
    }

    fn insert(&mut self, hash: u64, entry: Entry) {
        self.used_bytes += entry.charge_bytes();
        let i = match self.vacant.pop() {
            Some(i) => {
                self.entries[i as usize] = Some(entry);
                i
            }
            None => {
                self.entries.push(Some(entry));
                u32::try_from(self.entries.len() - 1).expect("a shard holds under 4G entries")
            }
        };
        let entries = &self.entries;
        self.index
            .insert_unique(hash, i, |&j| table_hash(entry_at(entries, j).key()));
    }

    fn remove_at(&mut self, i: u32) -> Entry {
        let entry = self.entries[i as usize]
            .take()
            .expect("indexed entries exist");
        let hash = table_hash(entry.key());
        self.index
            .find_entry(hash, |&j| j == i)
            .expect("every entry is indexed")
            .remove();
        self.vacant.push(i);
        self.used_bytes -= entry.charge_bytes();
        entry
    }
}

/// The entry CLOCK evicts next: the first unreferenced one from the hand
/// on, clearing the references it passes; the hand moves past it.
fn next_victim(shard: &mut Shard) -> Option<u32> {
    if shard.index.is_empty() {
        return None;
    }
    loop {
        let i = shard.hand;
        shard.hand = (shard.hand + 1) % shard.entries.len();
        let Some(entry) = &shard.entries[i] else {
            continue;
        };
        if !entry.referenced.swap(false, Relaxed) {
            return Some(u32::try_from(i).expect("a shard holds under 4G entries"));
        }
    }
}

fn entry_at(entries: &[Option<Entry>], i: u32) -> &Entry {
    entries[i as usize].as_ref().expect("indexed entries exist")
}

/// Counters of the record cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RecordCacheCounts {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    /// Records read from disk that were not admitted: asked for less often
    /// than the entry they would have replaced.
    pub refusals: u64,
    /// Entries and the frequency sketch.
    pub used_bytes: u64,
    pub capacity_bytes: u64,
    pub entries: u64,
    /// Gets that went to disk for a record evicted (or refused for lack of
    /// room) within the ghost window.
    pub ghost_recalls: u64,
}

/// The cache; bounded in bytes, evenly over its shards.
#[derive(Debug)]
pub(crate) struct RecordCache {
    shards: Box<[RwLock<Shard>]>,
    capacity_bytes: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    refusals: AtomicU64,
    /// Records evicted or refused most recently, for the cache split.
    ghost: Ghost,
    /// Request frequencies, for admission; replaced when the capacity
    /// changes (it is sized by it).
    sketch: ArcSwap<FrequencySketch>,
}

fn sketch_for(capacity_bytes: u64) -> FrequencySketch {
    // Capped like the MemTable's filter: the share follows a budget that
    // accepts any size. 16M entries: 4 GiB of typical records, 128 MiB.
    let sketch = FrequencySketch::for_entries((capacity_bytes / TYPICAL_ENTRY_BYTES).min(1 << 24));
    // Counters are charged to the capacity: a cache too small for the
    // smallest sketch (512 bytes) has none, and stays within its capacity.
    if sketch.memory_bytes() > capacity_bytes {
        FrequencySketch::off()
    } else {
        sketch
    }
}

/// Shard, watermark slot and in-shard hash of a key.
fn place(key: &[u8]) -> (usize, usize, u64) {
    let h = xxhash_rust::xxh3::xxh3_64(key);
    (
        (h % SHARDS as u64) as usize,
        ((h >> 32) % SLOTS_PER_SHARD as u64) as usize,
        mix(h),
    )
}

fn table_hash(key: &[u8]) -> u64 {
    place(key).2
}

/// A full-avalanche remix (splitmix64's finaliser): the shard choice fixed
/// the hash's low bits, which the table would otherwise index by.
fn mix(h: u64) -> u64 {
    let h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^ (h >> 31)
}

impl RecordCache {
    pub fn new(capacity_bytes: u64) -> Self {
        RecordCache {
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
            capacity_bytes: AtomicU64::new(capacity_bytes),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            ghost: Ghost::new(0),
            sketch: ArcSwap::from_pointee(sketch_for(capacity_bytes)),
        }
    }

    /// Bytes of evicted or refused records the ghost list covers.
    pub fn set_ghost_window_bytes(&self, bytes: u64) {
        self.ghost.set_window_bytes(bytes);
    }

    /// Notes that a get of `key` missed this cache and then read from
    /// disk; it counts as a ghost recall if the record was evicted or
    /// refused recently (a larger record cache would have served it).
    pub fn recall_after_disk_read(&self, key: &[u8]) {
        self.ghost.recall(place(key).2);
    }

    /// Ghost recalls so far (cheap: no shard is locked).
    pub fn ghost_recalls(&self) -> u64 {
        self.ghost.recalls()
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes.load(Relaxed)
    }

    /// Each shard's share of what the sketch leaves of the capacity.
    fn shard_capacity(&self) -> u64 {
        let capacity = self.capacity_bytes.load(Relaxed);
        capacity.saturating_sub(self.sketch.load().memory_bytes()) / SHARDS as u64
    }

    /// The newest value of `key` as seen at sequence number `read_seq`:
    /// `Some(None)` for a key known absent, `None` when the cache cannot
    /// answer (not cached, or cached from a write newer than `read_seq`).
    pub fn get(&self, key: &[u8], read_seq: u64) -> Option<Option<Value>> {
        if self.capacity_bytes.load(Relaxed) == 0 {
            return None;
        }
        let (s, _, hash) = place(key);
        self.sketch.load().increment(hash);
        let shard = self.shards[s].read();
        let found = shard
            .find(hash, key)
            .map(|i| entry_at(&shard.entries, i))
            .filter(|e| e.seq <= read_seq);
        match found {
            Some(entry) => {
                if !entry.referenced.load(Relaxed) {
                    entry.referenced.store(true, Relaxed);
                }
                self.hits.fetch_add(1, Relaxed);
                Some(entry.value())
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
    pub fn record_write(&self, key: &[u8], value: Option<&Value>, seq: u64) {
        let (s, slot, hash) = place(key);
        let mut shard = self.shards[s].write();
        shard.watermarks[slot] = shard.watermarks[slot].max(seq);
        let Some(i) = shard.find(hash, key) else {
            return;
        };
        let old = shard.remove_at(i);
        // A copy: the write's value is a slice of its batch's arena, which
        // it would otherwise keep alive.
        let mut entry = Entry::new(key, value, old.seq.max(seq));
        entry.referenced = old.referenced;
        // A value too large for the shard is simply no longer cached; the
        // raised watermark keeps the old one from being admitted again.
        if entry.charge_bytes() <= self.shard_capacity() {
            self.evict_to_fit(&mut shard, entry.charge_bytes());
            shard.insert(hash, entry);
        }
    }

    /// Records a deletion of the keys `start..end` at `seq`: drops every
    /// cached entry in the range and raises every watermark, so that no
    /// answer read before the deletion is admitted after it. Called before
    /// the deletion becomes visible. Costs a pass over every entry (a
    /// hash cache cannot find a key range otherwise), in the group
    /// commit's turn: 5 to 10 ms with 100,000 entries cached (a test
    /// build, `docs/design.md`, "A range deletion"); range deletions are
    /// expected to be rare next to point writes.
    pub fn record_range_delete(&self, start: &[u8], end: &[u8], seq: u64) {
        for shard in self.shards.iter() {
            let mut shard = shard.write();
            for mark in shard.watermarks.iter_mut() {
                *mark = (*mark).max(seq);
            }
            for i in 0..shard.entries.len() {
                let covered = shard.entries[i]
                    .as_ref()
                    .is_some_and(|e| start <= e.key() && e.key() < end);
                if covered {
                    shard.remove_at(i as u32);
                }
            }
        }
    }

    /// Admits the answer a get read from the tree at `read_seq`, unless a
    /// write to the key's slot came after `read_seq`.
    pub fn admit(&self, key: &[u8], value: Option<&Value>, read_seq: u64) {
        let charge_bytes = charge(key, value);
        let (s, slot, hash) = place(key);
        if charge_bytes > self.shard_capacity() {
            // What a larger cache would hold: the ghost measures its worth.
            self.ghost.remember(hash, charge_bytes);
            return;
        }
        let mut shard = self.shards[s].write();
        if shard.watermarks[slot] > read_seq || shard.find(hash, key).is_some() {
            return;
        }
        if !self.make_room_for(&mut shard, hash, charge_bytes) {
            self.refusals.fetch_add(1, Relaxed);
            self.ghost.remember(hash, charge_bytes);
            return;
        }
        // A copy: a value read from the tree is a slice of a whole cached
        // block, which it would otherwise keep alive.
        shard.insert(hash, Entry::new(key, value, read_seq));
    }

    /// Replaces the cached value pointer `pointer` of `key`, if the entry
    /// still holds it, by the value `bytes` read through it, so that the
    /// next hit skips the value file's read too. The same pointer names
    /// the same record (a new write, or a garbage-collection move, makes a
    /// new one), so the entry's version and sequence number stay true.
    /// Admitted by frequency as `admit` is; a refusal keeps the pointer.
    pub fn admit_resolved(&self, key: &[u8], pointer: &Value, bytes: &Bytes) {
        let (s, _, hash) = place(key);
        let mut shard = self.shards[s].write();
        let Some(i) = shard.find(hash, key) else {
            return;
        };
        let old = entry_at(&shard.entries, i);
        if old.value().as_ref() != Some(pointer) {
            return;
        }
        let resolved = Entry::new(key, Some(&Value::Inline(bytes.clone())), old.seq);
        if resolved.charge_bytes() > self.shard_capacity() {
            return;
        }
        let old = shard.remove_at(i);
        resolved
            .referenced
            .store(old.referenced.load(Relaxed), Relaxed);
        if self.make_room_for(&mut shard, hash, resolved.charge_bytes()) {
            shard.insert(hash, resolved);
        } else {
            shard.insert(hash, old);
        }
    }

    /// Evicts (CLOCK) until `extra` more bytes fit in the shard's share.
    fn evict_to_fit(&self, shard: &mut Shard, extra: u64) {
        let capacity = self.shard_capacity();
        while shard.used_bytes + extra > capacity {
            let Some(victim) = next_victim(shard) else {
                return;
            };
            self.evict(shard, victim);
        }
    }

    /// Evicts for a candidate under `hash` only entries it was asked for
    /// more often than (TinyLFU); `false` if it is not to be admitted.
    fn make_room_for(&self, shard: &mut Shard, hash: u64, extra: u64) -> bool {
        let capacity = self.shard_capacity();
        let sketch = self.sketch.load();
        let wanted = sketch.estimate(hash);
        while shard.used_bytes + extra > capacity {
            let Some(victim) = next_victim(shard) else {
                return false;
            };
            let victim_hash = table_hash(entry_at(&shard.entries, victim).key());
            if sketch.estimate(victim_hash) >= wanted {
                return false;
            }
            self.evict(shard, victim);
        }
        true
    }

    fn evict(&self, shard: &mut Shard, victim: u32) {
        let evicted = shard.remove_at(victim);
        self.ghost
            .remember(table_hash(evicted.key()), evicted.charge_bytes());
        self.evictions.fetch_add(1, Relaxed);
    }

    /// Changes the byte budget; shrinking evicts at once. The sketch is
    /// resized with it, and starts counting afresh if its size changes.
    pub fn set_capacity(&self, capacity_bytes: u64) {
        let sketch = sketch_for(capacity_bytes);
        if sketch.memory_bytes() != self.sketch.load().memory_bytes() {
            self.sketch.store(std::sync::Arc::new(sketch));
        }
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
            entries += shard.index.len() as u64;
        }
        RecordCacheCounts {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
            refusals: self.refusals.load(Relaxed),
            used_bytes: used_bytes + self.sketch.load().memory_bytes(),
            capacity_bytes: self.capacity_bytes.load(Relaxed),
            entries,
            ghost_recalls: self.ghost_recalls(),
        }
    }
}

fn charge(key: &[u8], value: Option<&Value>) -> u64 {
    (key.len() + value.map_or(0, Value::stored_len)) as u64 + ENTRY_OVERHEAD_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Value {
        Value::Inline(Bytes::copy_from_slice(s.as_bytes()))
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

    /// A separated value read through a cached pointer takes the pointer's
    /// place, and only while the entry still holds that pointer.
    #[test]
    fn a_resolved_value_replaces_only_its_own_pointer() {
        let cache = RecordCache::new(1 << 20);
        let pointer = |s: &str| Value::Pointer(Bytes::copy_from_slice(s.as_bytes()));
        let bytes = Bytes::from_static(b"the separated value");
        cache.admit(b"k", Some(&pointer("p1")), 10);
        cache.admit_resolved(b"k", &pointer("p0"), &bytes);
        assert_eq!(
            cache.get(b"k", 10),
            Some(Some(pointer("p1"))),
            "another pointer"
        );
        cache.admit_resolved(b"k", &pointer("p1"), &bytes);
        assert_eq!(cache.get(b"k", 9), None, "its sequence number stays");
        assert_eq!(
            cache.get(b"k", 10),
            Some(Some(Value::Inline(bytes.clone())))
        );
        cache.record_write(b"k", Some(&pointer("p2")), 12);
        cache.admit_resolved(b"k", &pointer("p1"), &bytes);
        assert_eq!(
            cache.get(b"k", 12),
            Some(Some(pointer("p2"))),
            "a newer write"
        );
        cache.admit_resolved(b"absent", &pointer("p1"), &bytes);
        assert_eq!(cache.get(b"absent", 20), None, "nothing is admitted");
    }

    /// The frequency counters are charged to the capacity, so a cache too
    /// small for the smallest sketch (or off, at 0) has none: with one, it
    /// would report 512 bytes used against a capacity of 0.
    #[test]
    fn a_cache_too_small_for_its_counters_stays_within_its_capacity() {
        for capacity_bytes in [0, 1, 511, 512, 64 << 10] {
            let cache = RecordCache::new(capacity_bytes);
            cache.admit(b"k", Some(&v("value")), 1);
            let _ = cache.get(b"k", 1);
            let counts = cache.counts();
            assert!(
                counts.used_bytes <= capacity_bytes,
                "{capacity_bytes}: {counts:?}"
            );
            cache.set_capacity(0);
            assert_eq!(cache.counts().used_bytes, 0);
            assert_eq!(cache.get(b"k", 1), None);
        }
    }

    #[test]
    fn a_range_deletion_drops_covered_entries_and_blocks_older_answers() {
        let cache = RecordCache::new(1 << 20);
        for key in ["a", "b", "c", "d"] {
            cache.admit(key.as_bytes(), Some(&v(key)), 5);
        }
        cache.record_range_delete(b"b", b"d", 7);
        assert_eq!(cache.get(b"a", 9), Some(Some(v("a"))));
        assert_eq!(cache.get(b"b", 9), None);
        assert_eq!(cache.get(b"c", 9), None);
        assert_eq!(cache.get(b"d", 9), Some(Some(v("d"))));
        // An answer read before the deletion is not admitted after it.
        cache.admit(b"c", Some(&v("c")), 6);
        assert_eq!(cache.get(b"c", 9), None);
        cache.admit(b"c", None, 8);
        assert_eq!(cache.get(b"c", 9), Some(None));
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
    fn a_write_too_large_for_the_shard_drops_the_entry() {
        let cache = RecordCache::new(64 * 1024);
        cache.admit(b"k", Some(&v("small")), 1);
        assert_eq!(cache.get(b"k", 1), Some(Some(v("small"))));
        let huge = Value::Inline(Bytes::from(vec![1u8; 4096]));
        cache.record_write(b"k", Some(&huge), 2);
        assert_eq!(cache.get(b"k", 2), None, "neither cached nor stale");
        assert_eq!(cache.counts().entries, 0);
        // The old answer, read before the write, cannot come back.
        cache.admit(b"k", Some(&v("small")), 1);
        assert_eq!(cache.get(b"k", 5), None);
    }

    #[test]
    fn values_handed_out_are_exact_and_survive_eviction() {
        let cache = RecordCache::new(64 * 1024);
        cache.admit(b"key", Some(&v("value")), 1);
        cache.admit(b"gone", None, 1);
        let held = cache.get(b"key", 1).flatten().expect("cached");
        assert_eq!(cache.get(b"gone", 1), Some(None));
        cache.set_capacity(0);
        assert_eq!(held, v("value"));
        assert_eq!(cache.counts().entries, 0);
    }

    #[test]
    fn stays_within_its_budget_and_evicts_cold_entries_first() {
        let capacity = 64 * 1024u64;
        let cache = RecordCache::new(capacity);
        for i in 0..10_000u32 {
            let key = i.to_be_bytes();
            cache.admit(&key, Some(&Value::Inline(Bytes::from(vec![0u8; 100]))), 1);
            // Key 0 is hot: read after every admission.
            cache.get(&0u32.to_be_bytes(), 1);
        }
        let counts = cache.counts();
        assert!(counts.used_bytes <= capacity, "{counts:?}");
        // Cold keys either replaced each other or were refused.
        assert!(counts.evictions + counts.refusals > 9_000, "{counts:?}");
        assert!(
            cache.get(&0u32.to_be_bytes(), 1).is_some(),
            "hot key evicted"
        );
        cache.set_capacity(0);
        assert_eq!(cache.counts().entries, 0);
        assert_eq!(cache.get(&0u32.to_be_bytes(), 1), None);
    }

    /// A get, and on a miss the admission of what it read, as `Db::get`
    /// does. Returns whether the cache answered.
    fn get_or_admit(cache: &RecordCache, key: u32) -> bool {
        let key = key.to_be_bytes();
        if cache.get(&key, 1).is_some() {
            return true;
        }
        cache.admit(&key, Some(&Value::Inline(Bytes::from(vec![0u8; 100]))), 1);
        false
    }

    #[test]
    fn a_flood_of_keys_read_once_does_not_flush_the_hot_ones() {
        // Room for about 3,000 entries; 2,000 hot keys read once a round,
        // and between rounds 10,000 keys never read again. CLOCK alone
        // would sweep past each hot key several times a round and evict it.
        let cache = RecordCache::new(3_000 * 212 + 16 * 1024);
        let mut cold = 1_000_000u32;
        let mut hot_hits = 0;
        for round in 0..20 {
            for key in 0..2_000 {
                hot_hits += usize::from(get_or_admit(&cache, key) && round >= 10);
            }
            for _ in 0..10_000 {
                get_or_admit(&cache, cold);
                cold += 1;
            }
        }
        assert!(hot_hits >= 10 * 2_000 * 95 / 100, "{hot_hits} of 20000");
        let counts = cache.counts();
        assert!(counts.refusals > 150_000, "{counts:?}");
        assert!(counts.used_bytes <= cache.capacity_bytes(), "{counts:?}");
    }

    #[test]
    fn a_key_that_turns_hot_gets_in() {
        let cache = RecordCache::new(3_000 * 212 + 16 * 1024);
        // Fill with keys read twice each, so that none is a free victim.
        for _ in 0..2 {
            for key in 0..4_000 {
                get_or_admit(&cache, key);
            }
        }
        let newcomer = 5_000_000;
        let answered = (0..8).filter(|_| get_or_admit(&cache, newcomer)).count();
        assert!(answered >= 4, "admitted only after {} gets", 8 - answered);
    }
}

/// Measures what an entry really costs, to keep `ENTRY_OVERHEAD_BYTES`
/// honest. Ignored by default: RSS is process-wide, so it must run alone
/// and in release mode:
/// `cargo test --release -p turtlekv --lib charge_covers_resident_memory -- --ignored`.
#[cfg(test)]
mod probe {
    use super::*;

    fn resident_bytes() -> u64 {
        crate::mem::process_status_bytes("VmRSS:")
    }

    #[test]
    #[ignore = "measures process RSS; run alone, in release mode"]
    fn charge_covers_resident_memory() {
        let cache = RecordCache::new(300 << 20);
        // Values are slices of 4 KiB blocks, as gets that read a leaf pass them.
        let block = Bytes::from(vec![7u8; 4096]);
        let before = resident_bytes();
        let records = 1_000_000u64;
        for i in 0..records {
            let key = i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes();
            let at = (i % 30) as usize * 130;
            cache.admit(&key, Some(&Value::Inline(block.slice(at..at + 120))), 1);
            // A hit, as the entries worth caching get.
            assert!(cache.get(&key, 1).is_some());
        }
        let real_per_entry = (resident_bytes() - before) / records;
        let sketch_bytes = cache.sketch.load().memory_bytes();
        let charged_per_entry = (cache.counts().used_bytes - sketch_bytes) / records;
        eprintln!("per entry: charged {charged_per_entry} B, resident {real_per_entry} B");
        assert!(
            real_per_entry <= charged_per_entry + charged_per_entry / 20,
            "charged {charged_per_entry} B, resident {real_per_entry} B"
        );
    }
}
