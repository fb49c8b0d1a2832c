//! A concurrent Bloom filter over a MemTable's keys, so that a get of a key
//! the MemTable does not hold (most gets, once data is in the tree) skips
//! the skiplist search and its cache misses.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Entry size a MemTable's filter is sized for: a small key and value plus
/// the entry's 40 or so bytes of header and links. Smaller entries only
/// raise its false positives.
pub(crate) const ENTRY_ESTIMATE_BYTES: u64 = 128;

/// Bits per expected key; with 6 probes about 1% false positives.
const BITS_PER_KEY: u64 = 10;
const PROBES: u64 = 6;

#[derive(Debug)]
pub(crate) struct KeyBloom {
    words: Box<[AtomicU64]>,
}

impl KeyBloom {
    /// A filter sized for about `expected_keys` keys.
    pub fn new(expected_keys: u64) -> Self {
        let words = (expected_keys.max(64) * BITS_PER_KEY).div_ceil(64);
        KeyBloom {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Memory the filter takes.
    pub fn size_bytes(&self) -> u64 {
        self.words.len() as u64 * 8
    }

    /// Bit positions of a key (double hashing).
    fn positions(&self, key: &[u8]) -> impl Iterator<Item = u64> {
        let h = xxhash_rust::xxh3::xxh3_64(key);
        let (a, b) = (h, (h >> 32) | 1);
        let bits = self.words.len() as u64 * 64;
        (0..PROBES).map(move |i| a.wrapping_add(i.wrapping_mul(b)) % bits)
    }

    pub fn insert(&self, key: &[u8]) {
        for bit in self.positions(key) {
            let word = &self.words[(bit / 64) as usize];
            let mask = 1 << (bit % 64);
            if word.load(Relaxed) & mask == 0 {
                word.fetch_or(mask, Relaxed);
            }
        }
    }

    /// `false` when the key was certainly never inserted.
    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.positions(key)
            .all(|bit| self.words[(bit / 64) as usize].load(Relaxed) & (1 << (bit % 64)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_few_false_positives() {
        let bloom = KeyBloom::new(10_000);
        for i in 0..10_000u32 {
            bloom.insert(&i.to_be_bytes());
        }
        assert!((0..10_000u32).all(|i| bloom.may_contain(&i.to_be_bytes())));
        let false_positives = (10_000..110_000u32)
            .filter(|i| bloom.may_contain(&i.to_be_bytes()))
            .count();
        // ~1% expected; allow for hashing luck.
        assert!(false_positives < 2_500, "{false_positives} of 100000");
    }
}
