//! The page cache: sharded CLOCK with priorities, bounded in bytes.
//!
//! Hits take one shard's read lock and bump an atomic weight, so hits never
//! wait for I/O and rarely for each other; misses read outside any lock and
//! insert afterwards. Bytes are reserved from a global budget *before* an
//! entry is inserted, evicting as needed, so the cached total never exceeds
//! the capacity. Callers get `Bytes` handles: data stays valid after
//! eviction for as long as they hold it, and is not charged to the cache.
//!
//! Besides bytes, the cache holds decoded objects that the tree builds from
//! a page once (a verified leaf head, a whole filter) under their own key
//! parts, charged what the caller says they cost.

use std::any::Any;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};

use bytes::Bytes;
use parking_lot::RwLock;

use super::CachePriority;
use crate::mem::MappingPool;
use crate::util::ghost::Ghost;
use frames::{FrameCounts, FramePool};

pub(crate) mod frames;

const SHARDS: usize = 16;
/// Priority levels, one per [`CachePriority`].
pub(crate) const LEVELS: usize = 4;
/// While heads, filters and nodes hold at most this fraction of the
/// capacity, leaf blocks are evicted before them whatever their weights
/// (see `metadata_protected`). Half, as RocksDB's high-priority pool for
/// index and filter blocks.
const METADATA_SHARE_DIVISOR: u64 = 2;

/// What one sweep of the CLOCK hand may evict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sweep {
    LeafBlocksOnly,
    All,
}
/// Evictions an insert may make while the cache is over its capacity (see
/// `reserve`).
const EVICTIONS_PER_INSERT_WHILE_SHRINKING: u64 = 4;
/// Entries a shrinking cache evicts per shard lock (see `set_capacity`).
const EVICT_BATCH_ENTRIES: usize = 64;
/// Charged per entry on top of its bytes: key, map slot, `Bytes` header.
pub(crate) const ENTRY_OVERHEAD_BYTES: u64 = 96;

/// Passes `check` makes before it reports a mismatch of charged and used
/// bytes (see there).
const CHECK_PASSES: usize = 50;
/// Key part naming a whole page rather than one block.
pub(crate) const WHOLE_PAGE: u32 = u32::MAX;

/// A decoded object cached for a page.
pub(crate) type CachedObject = Arc<dyn Any + Send + Sync>;

/// What an entry holds.
#[derive(Clone)]
enum Value {
    Bytes(Bytes),
    Object(CachedObject),
}

impl Value {
    fn into_bytes(self) -> Option<Bytes> {
        match self {
            Value::Bytes(bytes) => Some(bytes),
            Value::Object(_) => None,
        }
    }
}

impl std::fmt::Debug for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Bytes(b) => write!(f, "Bytes({})", b.len()),
            Value::Object(_) => f.write_str("Object"),
        }
    }
}

/// Hashes cache keys (two integers) with one multiply each: SipHash showed
/// up in profiles of cached reads, and the keys are not attacker-chosen
/// in a way that matters (page ids come from our allocator).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(26) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

/// A whole page, or one block of a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CacheKey {
    pub page: u64,
    pub part: u32,
}

#[derive(Debug)]
struct Entry {
    key: CacheKey,
    value: Value,
    charge_bytes: u64,
    /// CLOCK weight: `level - 1` when inserted, `level` after a hit,
    /// decremented by each sweep that passes; evicted at zero. Higher
    /// priorities survive more sweeps.
    weight: AtomicU8,
    level: u8,
}

#[derive(Debug, Default)]
struct ShardInner {
    map: HashMap<CacheKey, usize, BuildHasherDefault<KeyHasher>>,
    entries: Vec<Option<Entry>>,
    vacant: Vec<usize>,
    hand: usize,
}

/// Counters the cache keeps itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CacheCounts {
    pub used_bytes: u64,
    pub capacity_bytes: u64,
    /// Kept mappings of written pages and MemTable arena chunks (see
    /// `io::mapping_pool`), part of `used_bytes`.
    pub pooled_bytes: u64,
    pub entries: u64,
    pub evictions: u64,
    /// Disk reads of blocks the cache had evicted shortly before (see
    /// [`PageCache::recall_evicted`]).
    pub ghost_recalls: u64,
    /// Bytes charged to each priority, indexed by `level - 1` (leaf
    /// blocks, leaf heads, filters, nodes): shows whether the small, hot
    /// metadata stays cached while blocks churn.
    pub bytes_by_level: [u64; LEVELS],
    /// The frames holding copies of blocks read from disk.
    pub frames: FrameCounts,
}

/// The cache.
#[derive(Debug)]
pub(crate) struct PageCache {
    shards: Box<[RwLock<ShardInner>]>,
    /// Shared with `pool`, which charges what it keeps to the same budget.
    capacity_bytes: Arc<AtomicU64>,
    used_bytes: Arc<AtomicU64>,
    /// Mappings of written pages the cache let go and of dropped MemTables'
    /// chunks, for the next ones.
    pool: Arc<MappingPool>,
    /// Frames for copies of blocks read from disk (see `io::frames`).
    frames: Arc<FramePool>,
    evictions: AtomicU64,
    /// Bytes charged per priority level (see [`CacheCounts::bytes_by_level`]).
    level_bytes: [AtomicU64; LEVELS],
    /// Blocks evicted most recently, for the record/page cache split.
    ghost: Ghost,
}

fn ghost_hash(key: CacheKey) -> u64 {
    use std::hash::Hash;
    let mut hasher = KeyHasher::default();
    key.hash(&mut hasher);
    hasher.finish()
}

fn level(priority: CachePriority) -> u8 {
    match priority {
        CachePriority::LeafBlock => 1,
        CachePriority::LeafHead => 2,
        CachePriority::Filter => 3,
        CachePriority::Node => 4,
    }
}

/// Index of a level in the per-level byte counters.
fn slot(level: u8) -> usize {
    usize::from(level) - 1
}

impl CacheCounts {
    /// Bytes charged to entries of `priority`.
    pub fn bytes_of(&self, priority: CachePriority) -> u64 {
        self.bytes_by_level[slot(level(priority))]
    }
}

impl PageCache {
    /// An empty cache holding at most `capacity_bytes`.
    pub fn new(capacity_bytes: u64) -> PageCache {
        let capacity_bytes = Arc::new(AtomicU64::new(capacity_bytes));
        let used_bytes = Arc::new(AtomicU64::new(0));
        PageCache {
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
            pool: Arc::new(MappingPool::new(capacity_bytes.clone(), used_bytes.clone())),
            capacity_bytes,
            used_bytes,
            frames: FramePool::new(),
            evictions: AtomicU64::new(0),
            level_bytes: Default::default(),
            ghost: Ghost::new(0),
        }
    }

    /// How many bytes of recently evicted blocks the ghost list covers
    /// (0: none).
    pub fn set_ghost_window_bytes(&self, bytes: u64) {
        self.ghost.set_window_bytes(bytes);
    }

    /// Whether a block about to be read from disk was evicted recently,
    /// within the ghost window: a cache larger by that window would have
    /// served it.
    pub fn recall_evicted(&self, key: CacheKey) -> bool {
        self.ghost.recall(ghost_hash(key))
    }

    fn shard_of(key: CacheKey) -> usize {
        let h =
            (key.page ^ u64::from(key.part).rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> 59) as usize % SHARDS
    }

    /// Whether `key` is cached, without marking it used.
    pub fn contains(&self, key: CacheKey) -> bool {
        self.shards[Self::shard_of(key)]
            .read()
            .map
            .contains_key(&key)
    }

    /// The cached bytes of `key`, marking them recently used.
    pub fn get(&self, key: CacheKey) -> Option<Bytes> {
        self.lookup(key, true)?.into_bytes()
    }

    /// The cached object of `key`, marking it recently used.
    pub fn get_object(&self, key: CacheKey) -> Option<CachedObject> {
        match self.lookup(key, true)? {
            Value::Object(object) => Some(object),
            Value::Bytes(_) => None,
        }
    }

    /// The cached bytes of `key`, leaving its CLOCK weight as it is.
    pub fn peek(&self, key: CacheKey) -> Option<Bytes> {
        self.lookup(key, false)?.into_bytes()
    }

    /// The value of `key`, marking it recently used if `renew`.
    fn lookup(&self, key: CacheKey, renew: bool) -> Option<Value> {
        let shard = self.shards[Self::shard_of(key)].read();
        let entry = shard.entries[*shard.map.get(&key)?].as_ref()?;
        // Skip the store when the weight is already full: hits on hot
        // entries then only read the shared cache line.
        if renew && entry.weight.load(Relaxed) != entry.level {
            entry.weight.store(entry.level, Relaxed);
        }
        Some(entry.value.clone())
    }

    /// A copy of a written page to cache, in a mapping of its own (reused
    /// from pages the cache let go, while it has room for them): dropped,
    /// its memory goes back to the pool or the kernel, not the allocator.
    pub fn mapped_copy(&self, bytes: &[u8]) -> Bytes {
        let mapping = self.pool.map(bytes.len());
        // SAFETY: the mapping is `bytes.len()` writable bytes, new to us and
        // not shared yet, so it cannot overlap `bytes`.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), mapping.base().as_ptr(), bytes.len());
        }
        crate::mem::mapping_bytes(Arc::new(mapping))
    }

    /// A copy of a block read from disk, to cache: in a frame whose memory
    /// goes back to the kernel once the cache has let go of enough of them,
    /// so that the cache's resident memory shrinks with its capacity.
    pub fn framed_copy(&self, bytes: &[u8]) -> Bytes {
        if bytes.len() <= frames::FRAME_BYTES {
            self.frames.copy(bytes)
        } else {
            Bytes::copy_from_slice(bytes)
        }
    }

    /// The pool of mappings charged to this cache, for other users of
    /// mappings whose memory the cache may then reuse (MemTable arenas).
    pub fn mapping_pool(&self) -> Arc<MappingPool> {
        self.pool.clone()
    }

    /// Whether an entry of `len_bytes` fits without evicting anything.
    pub fn has_room_for(&self, len_bytes: usize) -> bool {
        let charge_bytes = len_bytes as u64 + ENTRY_OVERHEAD_BYTES;
        self.used_bytes.load(Relaxed) + charge_bytes <= self.capacity_bytes.load(Relaxed)
    }

    /// Caches `bytes` under `key` if room can be made; an entry larger than
    /// the whole budget is not cached.
    pub fn insert(&self, key: CacheKey, bytes: Bytes, priority: CachePriority) {
        let charge_bytes = bytes.len() as u64 + ENTRY_OVERHEAD_BYTES;
        self.insert_value(key, Value::Bytes(bytes), charge_bytes, priority);
    }

    /// Caches a decoded object that costs about `size_bytes` of memory.
    pub fn insert_object(
        &self,
        key: CacheKey,
        object: CachedObject,
        size_bytes: u64,
        priority: CachePriority,
    ) {
        let charge_bytes = size_bytes + ENTRY_OVERHEAD_BYTES;
        self.insert_value(key, Value::Object(object), charge_bytes, priority);
    }

    fn insert_value(
        &self,
        key: CacheKey,
        value: Value,
        charge_bytes: u64,
        priority: CachePriority,
    ) {
        let home = Self::shard_of(key);
        // The read guard must be gone before `reserve`, which may take this
        // shard's write lock to evict.
        let cached = self.shards[home].read().map.contains_key(&key);
        if cached || !self.reserve(charge_bytes, home) {
            return;
        }
        let mut shard = self.shards[home].write();
        if shard.map.contains_key(&key) {
            // Another reader inserted it meanwhile.
            drop(shard);
            self.used_bytes.fetch_sub(charge_bytes, Relaxed);
            return;
        }
        let entry = Entry {
            key,
            value,
            charge_bytes,
            // One life fewer than a hit gives: a block read once (a scan)
            // goes before anything read twice, and before higher priorities.
            weight: AtomicU8::new(level(priority) - 1),
            level: level(priority),
        };
        self.level_bytes[slot(entry.level)].fetch_add(charge_bytes, Relaxed);
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
    }

    /// Adds `charge_bytes` to the used total, evicting until it fits.
    fn reserve(&self, charge_bytes: u64, home: usize) -> bool {
        // A cache already over its capacity is being shrunk by
        // `set_capacity`; a reader that took that work on would stall its
        // read (measured: gets fell to a sixth for a second after each
        // shrink), so it evicts a few entries at most and otherwise leaves
        // its entry uncached.
        let mut evictions_left = if self.over_capacity() {
            EVICTIONS_PER_INSERT_WHILE_SHRINKING
        } else {
            u64::MAX
        };
        loop {
            let used = self.used_bytes.load(Relaxed);
            let capacity = self.capacity_bytes.load(Relaxed);
            if charge_bytes > capacity {
                return false;
            }
            if used + charge_bytes <= capacity {
                if self
                    .used_bytes
                    .compare_exchange_weak(used, used + charge_bytes, SeqCst, Relaxed)
                    .is_err()
                {
                    continue;
                }
                // A shrink that stored its capacity after the load above
                // may have looked at `used` before this charge and found
                // nothing to evict; then the charge is undone and tried
                // again against the new capacity. (Both sides store, then
                // load, in SeqCst: one of them sees the other.)
                if used + charge_bytes <= self.capacity_bytes.load(SeqCst) {
                    return true;
                }
                self.used_bytes.fetch_sub(charge_bytes, SeqCst);
                continue;
            }
            if evictions_left == 0 {
                return false;
            }
            evictions_left -= 1;
            // Kept mappings are free memory: they go before any entry.
            if !self.pool.release_one() && !self.evict_one(home) {
                return false;
            }
            // Outside the shard locks `evict_one` took.
            self.frames.release_excess();
        }
    }

    /// Evicts one entry, trying the home shard first: a leaf block while
    /// metadata fits its protected share, else whatever CLOCK finds.
    /// `false` when every shard is empty.
    fn evict_one(&self, home: usize) -> bool {
        let order = (0..SHARDS).map(|i| (home + i) % SHARDS);
        if self.metadata_protected() {
            let evicted = order
                .clone()
                .any(|s| self.evict_from(&mut self.shards[s].write(), Sweep::LeafBlocksOnly));
            if evicted {
                return true;
            }
        }
        order
            .into_iter()
            .any(|s| self.evict_from(&mut self.shards[s].write(), Sweep::All))
    }

    /// Whether heads, filters and nodes are within their protected share.
    ///
    /// Why: CLOCK ages every entry by one per pass of the hand, and the hand
    /// speeds up with the miss rate. When most leaf-block reads miss (a
    /// working set larger than the cache, or a record cache already holding
    /// the hot records), the hand outruns the metadata of colder leaves;
    /// each metadata miss then reads 10-20 KiB instead of 4, speeding the
    /// hand further. Measured: a 10M-record YCSB B fell from 0.18 to 0.8
    /// disk reads per get and never recovered, with heads and filters
    /// squeezed from 41 to 19 MiB of a 200 MiB cache. Metadata is needed by
    /// every read of its page, so it is worth more per byte than any block.
    fn metadata_protected(&self) -> bool {
        let metadata: u64 = self.level_bytes[1..].iter().map(|b| b.load(Relaxed)).sum();
        metadata <= self.capacity_bytes.load(Relaxed) / METADATA_SHARE_DIVISOR
    }

    fn evict_from(&self, shard: &mut ShardInner, sweep: Sweep) -> bool {
        if shard.map.is_empty() {
            return false;
        }
        // Each pass lowers every weight it visits by one, so `MAX_LEVEL + 1`
        // passes are sure to reach a zero, and two a leaf block's if any.
        let max_level = match sweep {
            Sweep::LeafBlocksOnly => level(CachePriority::LeafBlock),
            Sweep::All => level(CachePriority::Node),
        };
        let steps = shard.entries.len() * (usize::from(max_level) + 1);
        for _ in 0..steps {
            let i = shard.hand;
            shard.hand = (shard.hand + 1) % shard.entries.len();
            let Some(entry) = &shard.entries[i] else {
                continue;
            };
            if sweep == Sweep::LeafBlocksOnly && entry.level > level(CachePriority::LeafBlock) {
                continue; // neither aged nor evicted
            }
            let weight = entry.weight.load(Relaxed);
            if weight > 0 {
                entry.weight.store(weight - 1, Relaxed);
                continue;
            }
            // Only raw bytes are read back from disk under the same key;
            // decoded objects are rebuilt from blocks.
            if matches!(entry.value, Value::Bytes(_)) {
                self.ghost
                    .remember(ghost_hash(entry.key), entry.charge_bytes);
            }
            self.remove_at(shard, i);
            self.evictions.fetch_add(1, Relaxed);
            return true;
        }
        debug_assert!(
            sweep == Sweep::LeafBlocksOnly,
            "a sweep of {steps} steps always finds a zero weight"
        );
        false
    }

    fn remove_at(&self, shard: &mut ShardInner, index: usize) {
        let entry = shard.entries[index].take().expect("occupied");
        shard.map.remove(&entry.key);
        shard.vacant.push(index);
        self.used_bytes.fetch_sub(entry.charge_bytes, Relaxed);
        self.level_bytes[slot(entry.level)].fetch_sub(entry.charge_bytes, Relaxed);
    }

    /// Drops `key` if cached (its page was freed), and from the ghost list:
    /// a new page may reuse the id, and reading it is no recall.
    pub fn remove(&self, key: CacheKey) {
        self.ghost.forget(ghost_hash(key));
        let mut shard = self.shards[Self::shard_of(key)].write();
        if let Some(&index) = shard.map.get(&key) {
            self.remove_at(&mut shard, index);
        }
    }

    /// Every whole leaf page the cache holds.
    #[cfg(test)]
    pub fn whole_leaf_pages(&self) -> Vec<(super::PageId, Bytes)> {
        let mut pages = Vec::new();
        for lock in self.shards.iter() {
            let shard = lock.read();
            for (key, &i) in &shard.map {
                let id = super::PageId::from_raw(key.page);
                if key.part != WHOLE_PAGE || id.kind() != super::PageKind::Leaf {
                    continue;
                }
                if let Some(Value::Bytes(bytes)) = shard.entries[i].as_ref().map(|e| &e.value) {
                    pages.push((id, bytes.clone()));
                }
            }
        }
        pages
    }

    /// Changes the budget, evicting at once when it shrinks.
    #[cfg(test)]
    pub fn set_capacity(&self, capacity_bytes: u64) {
        self.store_capacity(capacity_bytes);
        self.evict_to_capacity();
    }

    /// Changes the budget without evicting: inserts then evict a few
    /// entries at most while the cache is over it, and `evict_to_capacity`
    /// does the rest. Lets a caller order capacity changes under its own
    /// lock and evict outside it.
    pub fn store_capacity(&self, capacity_bytes: u64) {
        self.capacity_bytes.store(capacity_bytes, SeqCst);
    }

    /// Evicts until the cache is within its budget; several threads may
    /// do so at once.
    ///
    /// It evicts a batch per shard lock and hands the frames it freed back
    /// to the kernel between batches: one entry per lock took 0.5-0.75 s
    /// to shrink a full cache by 134 MiB while two readers ran, and their
    /// reads stalled meanwhile.
    pub fn evict_to_capacity(&self) {
        let mut shard = 0;
        let mut barren_shards = 0;
        while self.over_capacity() {
            if self.pool.release_one() {
                continue;
            }
            if self.evict_batch(shard) > 0 {
                barren_shards = 0;
            } else {
                barren_shards += 1;
                // No shard had a leaf block to spare: let CLOCK take
                // metadata too, one entry at a time.
                if barren_shards == SHARDS {
                    if !self.evict_one(shard) {
                        break;
                    }
                    barren_shards = 0;
                }
            }
            shard = (shard + 1) % SHARDS;
            self.frames.release_excess();
        }
        self.frames.release_excess();
    }

    fn over_capacity(&self) -> bool {
        self.used_bytes.load(SeqCst) > self.capacity_bytes.load(SeqCst)
    }

    /// Evicts up to `EVICT_BATCH_ENTRIES` from one shard under one lock,
    /// while the cache is over its capacity; returns how many.
    fn evict_batch(&self, shard: usize) -> usize {
        let sweep = if self.metadata_protected() {
            Sweep::LeafBlocksOnly
        } else {
            Sweep::All
        };
        let mut guard = self.shards[shard].write();
        let mut evicted = 0;
        while evicted < EVICT_BATCH_ENTRIES
            && self.over_capacity()
            && self.evict_from(&mut guard, sweep)
        {
            evicted += 1;
        }
        evicted
    }

    /// Current counters.
    pub fn counts(&self) -> CacheCounts {
        CacheCounts {
            used_bytes: self.used_bytes.load(Relaxed),
            capacity_bytes: self.capacity_bytes.load(Relaxed),
            pooled_bytes: self.pool.kept_bytes(),
            entries: self.shards.iter().map(|s| s.read().map.len() as u64).sum(),
            evictions: self.evictions.load(Relaxed),
            ghost_recalls: self.ghost.recalls(),
            bytes_by_level: self.level_bytes.each_ref().map(|b| b.load(Relaxed)),
            frames: self.frames.counts(),
        }
    }

    /// Deep check: the charges of the entries and the pool's kept mappings
    /// add up to the used total,
    /// which is within budget, and every map slot points at its entry.
    /// An insert reserves its bytes just before it takes its shard's lock,
    /// so a pass that runs beside one (the checkpoint thread's, during
    /// `Db::check`) can see more used than charged; only a mismatch that
    /// persists over several passes is reported.
    pub fn check(&self) -> Result<(), String> {
        let mut outcome = self.check_once();
        for _ in 1..CHECK_PASSES {
            if outcome.is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
            outcome = self.check_once();
        }
        outcome
    }

    fn check_once(&self) -> Result<(), String> {
        let mut charged = 0;
        let mut charged_by_level = [0; LEVELS];
        for (n, lock) in self.shards.iter().enumerate() {
            let shard = lock.read();
            for (key, &i) in &shard.map {
                match &shard.entries[i] {
                    Some(e) if e.key == *key && Self::shard_of(*key) == n => {
                        charged += e.charge_bytes;
                        charged_by_level[slot(e.level)] += e.charge_bytes;
                    }
                    _ => return Err(format!("shard {n}: map entry {key:?} is dangling")),
                }
            }
            let occupied = shard.entries.iter().filter(|e| e.is_some()).count();
            if occupied != shard.map.len() || occupied + shard.vacant.len() != shard.entries.len() {
                return Err(format!("shard {n}: slots and map disagree"));
            }
        }
        let pooled = self.pool.kept_bytes();
        let used = self.used_bytes.load(Relaxed);
        let capacity = self.capacity_bytes.load(Relaxed);
        if charged + pooled != used || used > capacity {
            return Err(format!(
                "charged {charged}, pooled {pooled}, used {used}, capacity {capacity}"
            ));
        }
        let by_level = self.level_bytes.each_ref().map(|b| b.load(Relaxed));
        if charged_by_level != by_level {
            return Err(format!(
                "charged per level {charged_by_level:?}, counted {by_level:?}"
            ));
        }
        Ok(())
    }
}
