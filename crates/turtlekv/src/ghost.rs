//! Ghost lists: the hashes of what a cache evicted (or declined) most
//! recently, covering a fixed number of bytes of charge. A miss on a key
//! still in the ghost is a miss that a cache larger by that many bytes
//! would have served, so two caches' ghost hits over equal windows compare
//! what the next slice of memory is worth to each (ARC's idea, used here to
//! split the memory budget between the record and page caches).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;

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

impl Ghost {
    pub fn new(window_bytes: u64) -> Self {
        Ghost {
            window_bytes: AtomicU64::new(window_bytes),
            ..Ghost::default()
        }
    }

    /// Changes the bytes of charge the ghost covers; the oldest hashes go
    /// first when it shrinks.
    pub fn set_window_bytes(&self, bytes: u64) {
        self.window_bytes.store(bytes, Relaxed);
        self.trim(&mut self.inner.lock());
    }

    /// Remembers that an entry of `charge_bytes` under `hash` left (or was
    /// kept out of) the cache.
    pub fn remember(&self, hash: u64, charge_bytes: u64) {
        if self.window_bytes.load(Relaxed) == 0 {
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
        let found = self.inner.lock().members.remove(&hash).is_some();
        if found {
            self.recalls.fetch_add(1, Relaxed);
        }
        found
    }

    /// Forgets `hash` without counting a recall (what it named is gone).
    pub fn forget(&self, hash: u64) {
        self.inner.lock().members.remove(&hash);
    }

    /// Successful recalls so far.
    pub fn recalls(&self) -> u64 {
        self.recalls.load(Relaxed)
    }

    fn trim(&self, inner: &mut Inner) {
        let window = self.window_bytes.load(Relaxed);
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
}
