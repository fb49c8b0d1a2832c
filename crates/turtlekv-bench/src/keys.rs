//! Record numbers to keys, and self-checking values.
//!
//! YCSB names record `n` by hashing `n` with 64-bit FNV-1 (so inserts arrive
//! in random key order) and printing it as `user<digits>`. We hash the same
//! way and store either those strings or the hash as a big-endian `u64`.

use crate::rng::{Rng, mix64};

const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: FNV over the eight bytes of `value`, low byte
/// first, then the absolute value as a Java `long` (so the top bit is clear,
/// except for `i64::MIN`, which Java's `Math.abs` leaves alone).
pub fn fnv_hash64(value: u64) -> u64 {
    let mut hash = FNV_OFFSET_BASIS_64;
    let mut rest = value;
    for _ in 0..8 {
        hash ^= rest & 0xFF;
        hash = hash.wrapping_mul(FNV_PRIME_64);
        rest >>= 8;
    }
    (hash as i64).wrapping_abs() as u64
}

/// How a hashed record number is written as a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyFormat {
    /// 8 bytes, big-endian, so byte order equals numeric order.
    Binary,
    /// YCSB's `user<decimal digits>` string (up to 23 bytes).
    Ycsb,
}

impl KeyFormat {
    /// Writes the key of record `record` into `out` (cleared first).
    pub fn encode(self, record: u64, out: &mut Vec<u8>) {
        out.clear();
        let hashed = fnv_hash64(record);
        match self {
            KeyFormat::Binary => out.extend_from_slice(&hashed.to_be_bytes()),
            KeyFormat::Ycsb => {
                use std::io::Write as _;
                out.extend_from_slice(b"user");
                write!(out, "{hashed}").expect("writing to a Vec cannot fail");
            }
        }
    }

    /// Average key length in bytes, for user-byte accounting.
    pub fn average_len_bytes(self, records: u64) -> f64 {
        match self {
            KeyFormat::Binary => 8.0,
            KeyFormat::Ycsb => {
                // Sample rather than sum: the exact figure only scales the
                // amplification ratios, and sampling keeps start-up instant.
                let sample = records.clamp(1, 10_000);
                let step = (records / sample).max(1);
                let mut key = Vec::new();
                let total: usize = (0..sample)
                    .map(|i| {
                        self.encode(i * step, &mut key);
                        key.len()
                    })
                    .sum();
                total as f64 / sample as f64
            }
        }
    }
}

/// Bytes at the front of every value that name the write it came from.
pub const VALUE_HEADER_BYTES: usize = 8;

/// Builds values that can be checked against their key without remembering
/// what was written: an 8-byte write nonce followed by bytes drawn from a
/// generator seeded by (run seed, key, nonce). A value returned for the wrong
/// key, torn, or from garbage fails the check.
#[derive(Debug, Clone, Copy)]
pub struct ValueCodec {
    seed: u64,
    value_size_bytes: usize,
}

impl ValueCodec {
    /// `value_size_bytes` must be at least [`VALUE_HEADER_BYTES`].
    pub fn new(seed: u64, value_size_bytes: usize) -> ValueCodec {
        assert!(value_size_bytes >= VALUE_HEADER_BYTES);
        ValueCodec {
            seed,
            value_size_bytes,
        }
    }

    /// The length of every value.
    pub fn value_size_bytes(&self) -> usize {
        self.value_size_bytes
    }

    fn payload_rng(&self, key: &[u8], nonce: u64) -> Rng {
        let mut h = self.seed ^ nonce.rotate_left(17);
        for chunk in key.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            h = mix64(h ^ u64::from_le_bytes(word));
        }
        Rng::new(mix64(h ^ key.len() as u64))
    }

    /// Writes the value for `key` from write `nonce` into `out`.
    pub fn encode(&self, key: &[u8], nonce: u64, out: &mut Vec<u8>) {
        out.clear();
        out.resize(self.value_size_bytes, 0);
        out[..VALUE_HEADER_BYTES].copy_from_slice(&nonce.to_le_bytes());
        self.payload_rng(key, nonce)
            .fill(&mut out[VALUE_HEADER_BYTES..]);
    }

    /// Whether `value` is one this codec could have written for `key`.
    pub fn verify(&self, key: &[u8], value: &[u8]) -> bool {
        if value.len() != self.value_size_bytes {
            return false;
        }
        let (header, payload) = value.split_at(VALUE_HEADER_BYTES);
        let nonce = u64::from_le_bytes(header.try_into().expect("header is 8 bytes"));
        let mut rng = self.payload_rng(key, nonce);
        // Word compares, not slice compares: a scan verifies every value it
        // returns, and a library call per 8 bytes was a fifth of YCSB E's
        // time in cache, charged to whichever engine ran.
        let mut words = payload.chunks_exact(8);
        let whole_words_match = words.by_ref().all(|word| {
            u64::from_le_bytes(word.try_into().expect("chunks of 8")) == rng.next_u64()
        });
        let tail = words.remainder();
        whole_words_match
            && (tail.is_empty() || tail == &rng.next_u64().to_le_bytes()[..tail.len()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_hash_matches_an_independent_implementation() {
        // Reference values from a separate Python implementation of YCSB's
        // fnvhash64 (FNV-1 over the little-endian bytes, then Java abs).
        assert_eq!(fnv_hash64(0), 6_284_781_860_667_377_211);
        assert_eq!(fnv_hash64(1), 8_517_097_267_634_966_620);
        assert_eq!(fnv_hash64(42), 55_488_592_825_689_361);
        assert_eq!(fnv_hash64(1_000_000), 1_011_632_231_655_643_464);
        for n in 0..10_000 {
            assert!(fnv_hash64(n) <= i64::MAX as u64);
        }
    }

    #[test]
    fn hashed_keys_are_distinct_and_unordered() {
        let mut keys: Vec<u64> = (0..100_000).map(fnv_hash64).collect();
        let in_order = keys.windows(2).filter(|w| w[0] < w[1]).count();
        // Sequential record numbers must not give sequential keys: about
        // half of neighbouring pairs should be ascending.
        assert!((40_000..60_000).contains(&in_order), "{in_order}");
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 100_000);
    }

    #[test]
    fn key_formats() {
        let mut key = Vec::new();
        KeyFormat::Binary.encode(42, &mut key);
        assert_eq!(key, fnv_hash64(42).to_be_bytes());
        KeyFormat::Ycsb.encode(42, &mut key);
        assert_eq!(key, format!("user{}", fnv_hash64(42)).into_bytes());
        assert_eq!(KeyFormat::Binary.average_len_bytes(1000), 8.0);
        let ycsb_len = KeyFormat::Ycsb.average_len_bytes(1000);
        assert!((5.0..=23.0).contains(&ycsb_len), "{ycsb_len}");
    }

    #[test]
    fn values_verify_only_for_their_key() {
        let codec = ValueCodec::new(9, 120);
        let mut value = Vec::new();
        codec.encode(b"key-a", 77, &mut value);
        assert_eq!(value.len(), 120);
        assert!(codec.verify(b"key-a", &value));
        assert!(!codec.verify(b"key-b", &value));
        let mut torn = value.clone();
        torn[100] ^= 1;
        assert!(!codec.verify(b"key-a", &torn));
        assert!(!codec.verify(b"key-a", &value[..119]));
        let mut other = Vec::new();
        codec.encode(b"key-a", 78, &mut other);
        assert_ne!(value, other);
        assert!(codec.verify(b"key-a", &other));
    }

    #[test]
    fn values_of_any_length_verify_to_their_last_byte() {
        // Sizes whose payload ends in a partial word, and one with none.
        for size in [8, 9, 15, 16, 17, 23, 121] {
            let codec = ValueCodec::new(3, size);
            let mut value = Vec::new();
            codec.encode(b"k", 5, &mut value);
            assert!(codec.verify(b"k", &value), "size {size}");
            for at in VALUE_HEADER_BYTES..size {
                let mut torn = value.clone();
                torn[at] ^= 0x80;
                assert!(!codec.verify(b"k", &torn), "size {size}, byte {at}");
            }
        }
    }
}
