//! Ghost lists: the hashes of what a cache evicted (or declined) most
//! recently, covering a fixed number of bytes of charge. A miss on a key
//! still in the ghost is a miss that a cache larger by that many bytes
//! would have served, so two caches' ghost hits over equal windows compare
//! what the next slice of memory is worth to each (ARC's idea, used here to
//! split the memory budget between the record and page caches).
//!
//! A ghost whose window holds many entries keeps only a fixed sample of the
//! hashes (one in [`SAMPLE_ONE_IN`]) and scales its window and its recall
//! count to match. Why: every miss and every eviction or refusal of both
//! caches asks the ghost, under one lock; a profile of YCSB F in cache put
//! ~5% of the time in that bookkeeping. The sample only estimates the
//! recalls, which is all the split and `Stats` need of them.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;

/// One hash in this many is remembered by a sampling ghost.
pub(crate) const SAMPLE_ONE_IN: u64 = 8;
/// Windows of at least this many bytes are sampled: at 4 KiB a block,
/// a sampled window then still holds at least 128 hashes.
const SAMPLING_MIN_WINDOW_BYTES: u64 = 4 << 20;

/// Whether `hash` is in the sample: its top bits after a multiply, so that
/// hashes which differ only in high or only in low bits spread alike.
fn in_sample(hash: u64) -> bool {
    hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 61 == 0
}

#[derive(Debug, Default)]
struct Inner {
    /// Oldest first: hash, charge and the generation it was remembered at.
    order: VecDeque<(u64, u64, u64)>,
    /// Hash → generation of its newest remembrance.
    members: HashMap<u64, u64>,
    held_bytes: u64,
    generation: u64,
}

/// A ghost list; thread-safe.
#[derive(Debug, Default)]
pub(crate) struct Ghost {
    inner: Mutex<Inner>,
    window_bytes: AtomicU64,
    recalls: AtomicU64,
}

/// Whether a ghost of `window_bytes` keeps a sample rather than every hash.
fn sampling(window_bytes: u64) -> bool {
    window_bytes >= SAMPLING_MIN_WINDOW_BYTES
}

impl Ghost {
    pub fn new(window_bytes: u64) -> Self {
        Ghost {
            window_bytes: AtomicU64::new(window_bytes),
            ..Ghost::default()
        }
    }

    /// Changes the bytes of charge the ghost covers; the oldest hashes go
    /// first when it shrinks. A change between sampled and exact starts
    /// over empty, as the hashes held were chosen the other way.
    pub fn set_window_bytes(&self, bytes: u64) {
        let before = self.window_bytes.swap(bytes, Relaxed);
        let mut inner = self.inner.lock();
        if sampling(before) != sampling(bytes) {
            *inner = Inner::default();
        }
        self.trim(&mut inner);
    }

    /// How many hashes each one held stands for: 1, or [`SAMPLE_ONE_IN`].
    fn weight(&self) -> u64 {
        if sampling(self.window_bytes.load(Relaxed)) {
            SAMPLE_ONE_IN
        } else {
            1
        }
    }

    /// Whether `hash` is one this ghost holds, when asked.
    fn considers(&self, hash: u64) -> bool {
        self.weight() == 1 || in_sample(hash)
    }

    /// Remembers that an entry of `charge_bytes` under `hash` left (or was
    /// kept out of) the cache.
    pub fn remember(&self, hash: u64, charge_bytes: u64) {
        if self.window_bytes.load(Relaxed) == 0 || !self.considers(hash) {
            return;
        }
        let mut inner = self.inner.lock();
        inner.generation += 1;
        let generation = inner.generation;
        inner.members.insert(hash, generation);
        inner.order.push_back((hash, charge_bytes, generation));
        inner.held_bytes += charge_bytes;
        self.trim(&mut inner);
    }

    /// Whether `hash` was remembered and not yet forgotten; forgets it, so
    /// that one eviction counts for at most one miss.
    pub fn recall(&self, hash: u64) -> bool {
        if !self.considers(hash) {
            return false;
        }
        let found = self.inner.lock().members.remove(&hash).is_some();
        if found {
            self.recalls.fetch_add(self.weight(), Relaxed);
        }
        found
    }

    /// Forgets `hash` without counting a recall (what it named is gone).
    pub fn forget(&self, hash: u64) {
        if self.considers(hash) {
            self.inner.lock().members.remove(&hash);
        }
    }

    /// Successful recalls so far (estimated from the sample when sampled).
    pub fn recalls(&self) -> u64 {
        self.recalls.load(Relaxed)
    }

    fn trim(&self, inner: &mut Inner) {
        // A sample of one hash in N covers N times its bytes.
        let window = self.window_bytes.load(Relaxed) / self.weight();
        while inner.held_bytes > window {
            let Some((hash, charge, generation)) = inner.order.pop_front() else {
                break;
            };
            inner.held_bytes -= charge;
            if inner.members.get(&hash) == Some(&generation) {
                inner.members.remove(&hash);
            }
        }
        debug_assert!(inner.members.len() <= inner.order.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_newest_window_of_bytes() {
        let ghost = Ghost::new(300);
        for hash in 0..10 {
            ghost.remember(hash, 100);
        }
        // Only the last three (300 bytes) are remembered.
        assert!(!ghost.recall(6));
        assert!(ghost.recall(7));
        assert!(ghost.recall(9));
        assert!(!ghost.recall(9), "a recall forgets");
        assert_eq!(ghost.recalls(), 2);
        ghost.forget(8);
        assert!(!ghost.recall(8), "forgotten");
        assert_eq!(ghost.recalls(), 2);
    }

    #[test]
    fn a_hash_remembered_again_survives_its_older_copy() {
        let ghost = Ghost::new(200);
        ghost.remember(1, 100);
        ghost.remember(2, 100);
        ghost.remember(1, 100);
        // The first copy of 1 fell out of the window; the second did not.
        assert!(ghost.recall(1));
        assert!(ghost.recall(2));
    }

    #[test]
    fn a_zero_window_remembers_nothing_and_shrinking_forgets_the_oldest() {
        let ghost = Ghost::new(0);
        ghost.remember(1, 10);
        assert!(!ghost.recall(1));
        ghost.set_window_bytes(1000);
        for hash in 0..5 {
            ghost.remember(hash, 100);
        }
        ghost.set_window_bytes(200);
        assert!(!ghost.recall(2));
        assert!(ghost.recall(3));
        assert!(ghost.recall(4));
    }

    /// A large window keeps one hash in eight and estimates the recalls of
    /// the rest: remembered 4 KiB blocks, half of them asked for again.
    #[test]
    fn a_large_window_samples_and_scales_its_recalls() {
        let window = 16 << 20;
        let ghost = Ghost::new(window);
        let hash = |i: u64| xxhash_rust::xxh3::xxh3_64(&i.to_le_bytes());
        // Twice the window: only the second half is remembered.
        let blocks = 2 * window / 4096;
        for i in 0..blocks {
            ghost.remember(hash(i), 4096);
        }
        let held = ghost.inner.lock().order.len() as u64;
        let expected_held = window / 4096 / SAMPLE_ONE_IN;
        assert!(held.abs_diff(expected_held) <= 1, "{held} held");
        let recalled = (0..blocks)
            .filter(|&i| i % 2 == 0 && ghost.recall(hash(i)))
            .count();
        let estimate = ghost.recalls();
        assert_eq!(estimate, recalled as u64 * SAMPLE_ONE_IN);
        let truth = blocks / 4; // even ones of the remembered half
        let error = estimate.abs_diff(truth) as f64 / truth as f64;
        assert!(error < 0.1, "estimated {estimate} recalls of {truth}");
        // Back to a small window: exact again, and empty.
        ghost.set_window_bytes(4096 * 3);
        assert!(ghost.inner.lock().order.is_empty());
        for i in 0..3 {
            ghost.remember(hash(i), 4096);
        }
        assert!((0..3).all(|i| ghost.recall(hash(i))));
    }
}
