//! A concurrent Bloom filter over a MemTable's keys, so that a get of a key
//! the MemTable does not hold (most gets, once data is in the tree) skips
//! the MemTable search and its cache misses.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Entry size a MemTable's filter is sized for: a small key and value plus
/// the entry's 40 or so bytes of header and links. Smaller entries only
/// raise its false positives.
pub(crate) const ENTRY_ESTIMATE_BYTES: u64 = 128;

/// Bits per expected key; with 6 probes in one block about 1.2% false
/// positives (0.8% if the probes could go anywhere).
const BITS_PER_KEY: u64 = 10;
/// Most keys a filter is sized for: 8 GiB of entries, a 80 MiB filter.
const MAX_EXPECTED_KEYS: u64 = (8 << 30) / ENTRY_ESTIMATE_BYTES;
const PROBES: u32 = 6;
/// Bits a probe's position within its block takes from the hash.
const BLOCK_BIT_INDEX_BITS: u32 = 9;

/// One cache line of the filter. All of a key's probes fall into one
/// block, so an insert or a test costs one cache miss instead of one per
/// probe: the leader of a group commit inserted every key of its group,
/// and each missed the cache up to six times (in-cache load profile,
/// `docs/benchmarks.md`, "The load's CPU: four cuts in the write path and
/// the checkpoint").
#[derive(Debug)]
#[repr(C, align(64))]
struct Block([AtomicU64; 8]);

const BLOCK_BITS: u64 = 512;
const _: () = assert!(1 << BLOCK_BIT_INDEX_BITS == BLOCK_BITS);
const _: () = assert!(PROBES * BLOCK_BIT_INDEX_BITS <= 64);

#[derive(Debug)]
pub(crate) struct KeyBloom {
    blocks: Box<[Block]>,
}

impl KeyBloom {
    /// A filter sized for about `expected_keys` keys.
    pub fn new(expected_keys: u64) -> Self {
        // Capped: the MemTable's capacity follows runtime knobs that accept
        // any size (a budget is a bound, not an allocation); past the cap
        // the filter stays correct with more false positives.
        let expected_keys = expected_keys.clamp(64, MAX_EXPECTED_KEYS);
        let blocks = (expected_keys * BITS_PER_KEY).div_ceil(BLOCK_BITS);
        KeyBloom {
            blocks: (0..blocks)
                .map(|_| Block(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }

    /// Memory the filter takes.
    pub fn size_bytes(&self) -> u64 {
        self.blocks.len() as u64 * BLOCK_BITS / 8
    }

    /// Where the key's bits lie: its block, from the hash's high bits (a
    /// multiply, not a division).
    fn locate(&self, key: &[u8]) -> KeyBits<'_> {
        let hash = xxhash_rust::xxh3::xxh3_64(key);
        let block = &self.blocks[((u128::from(hash) * self.blocks.len() as u128) >> 64) as usize];
        KeyBits { block, hash }
    }

    pub fn insert(&self, key: &[u8]) {
        self.locate(key).set();
    }

    /// `false` when the key was certainly never inserted.
    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.locate(key).all_set()
    }
}

/// One key's bits in a `KeyBloom` (`KeyBloom::locate`).
struct KeyBits<'a> {
    block: &'a Block,
    hash: u64,
}

impl KeyBits<'_> {
    /// The probes as `(word, mask)` in the block, nine low bits of the hash
    /// each.
    fn probes(&self) -> impl Iterator<Item = (&AtomicU64, u64)> {
        (0..PROBES).map(|i| {
            let bit = (self.hash >> (i * BLOCK_BIT_INDEX_BITS)) & (BLOCK_BITS - 1);
            (&self.block.0[(bit / 64) as usize], 1 << (bit % 64))
        })
    }

    fn set(&self) {
        for (word, mask) in self.probes() {
            if word.load(Relaxed) & mask == 0 {
                word.fetch_or(mask, Relaxed);
            }
        }
    }

    fn all_set(&self) -> bool {
        self.probes()
            .all(|(word, mask)| word.load(Relaxed) & mask != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A filter sized for `expected_keys`, holding the keys `0..n` (8 bytes
    /// each), every one of which it has been checked to pass.
    fn filled(expected_keys: u64, n: u64) -> KeyBloom {
        let bloom = KeyBloom::new(expected_keys);
        (0..n).for_each(|i| bloom.insert(&i.to_be_bytes()));
        assert!(
            (0..n).all(|i| bloom.may_contain(&i.to_be_bytes())),
            "a false negative"
        );
        bloom
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only, and too slow under Miri")]
    fn no_false_negatives_and_few_false_positives() {
        let bloom = filled(10_000, 10_000);
        let false_positives = (10_000..110_000u64)
            .filter(|i| bloom.may_contain(&i.to_be_bytes()))
            .count();
        // About 1% expected for a blocked filter at 10 bits a key (0.9-1.3%
        // measured); allow for hashing luck.
        assert!(false_positives < 2_000, "{false_positives} of 100000");
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only, and too slow under Miri")]
    fn an_overfull_filter_still_has_no_false_negatives() {
        filled(0, 50_000);
    }

    #[test]
    fn a_key_sets_bits_in_one_block_only() {
        let bloom = KeyBloom::new(100_000);
        let set_bits = |bloom: &KeyBloom| -> Vec<(usize, u32)> {
            bloom
                .blocks
                .iter()
                .enumerate()
                .map(|(i, b)| (i, b.0.iter().map(|w| w.load(Relaxed).count_ones()).sum()))
                .filter(|&(_, ones)| ones > 0)
                .collect()
        };
        for key in [&b"a"[..], b"key", &[0u8; 8], &[0xff; 40]] {
            let before = set_bits(&bloom);
            bloom.insert(key);
            let after = set_bits(&bloom);
            let changed: Vec<_> = after.iter().filter(|b| !before.contains(b)).collect();
            assert_eq!(changed.len(), 1, "{key:?} touched {changed:?}");
            assert!(changed[0].1 <= PROBES);
            assert!(bloom.may_contain(key));
        }
        assert_eq!(std::mem::align_of::<Block>(), 64);
        assert_eq!(bloom.size_bytes(), bloom.blocks.len() as u64 * 64);
    }
}
