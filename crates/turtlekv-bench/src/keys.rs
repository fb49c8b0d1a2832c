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

/// The bytes text of compressible values is drawn from, one per 6 random
/// bits: lower-case letters weighted roughly as in English, spaces, a few
/// capitals, digits and punctuation.
const TEXT_ALPHABET: &[u8; 64] =
    b"eeeettaaoinshrdlcumwfgypbvkjxqz     EATONS0123456789,.-'etaoinsr";

/// What LZ4 spends on a value of repeated text besides the literals: the
/// sequence's token, its 2-byte offset and its length bytes (one to three
/// for the value sizes benchmarked).
const LZ4_SEQUENCE_BYTES: usize = 5;

/// Builds values that can be checked against their key without remembering
/// what was written: an 8-byte write nonce followed by a payload drawn from
/// a generator seeded by (run seed, key, nonce). A value returned for the
/// wrong key, torn, or from garbage fails the check.
///
/// The payload is random bytes, or, for compressible values, a fragment of
/// random text repeated to the value's end: LZ4 keeps the nonce and the
/// fragment as literals and the repeats as one match, so the fragment's
/// length sets what share of the value it removes.
#[derive(Debug, Clone, Copy)]
pub struct ValueCodec {
    seed: u64,
    value_size_bytes: usize,
    /// `None`: random bytes. `Some(n)`: `n` random text bytes, repeated.
    text_period_bytes: Option<usize>,
}

impl ValueCodec {
    /// Random values; `value_size_bytes` must be at least
    /// [`VALUE_HEADER_BYTES`].
    pub fn new(seed: u64, value_size_bytes: usize) -> ValueCodec {
        ValueCodec::with_compressibility(seed, value_size_bytes, 0.0)
    }

    /// Values of which LZ4 removes about `compressibility` (in `[0, 1)`;
    /// 0 gives the random values of [`ValueCodec::new`]).
    pub fn with_compressibility(
        seed: u64,
        value_size_bytes: usize,
        compressibility: f64,
    ) -> ValueCodec {
        assert!(value_size_bytes >= VALUE_HEADER_BYTES);
        assert!(
            (0.0..1.0).contains(&compressibility),
            "compressibility {compressibility} is not in [0, 1)"
        );
        let text_period_bytes = (compressibility > 0.0).then(|| {
            let payload = value_size_bytes - VALUE_HEADER_BYTES;
            let kept = ((1.0 - compressibility) * value_size_bytes as f64).round() as usize;
            kept.saturating_sub(VALUE_HEADER_BYTES + LZ4_SEQUENCE_BYTES)
                .clamp(1, payload.max(1))
        });
        ValueCodec {
            seed,
            value_size_bytes,
            text_period_bytes,
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
        let mut rng = self.payload_rng(key, nonce);
        let payload = &mut out[VALUE_HEADER_BYTES..];
        match self.text_period_bytes {
            None => rng.fill(payload),
            Some(period) => {
                let period = period.min(payload.len());
                for chunk in payload[..period].chunks_mut(8) {
                    let word = rng.next_u64().to_le_bytes();
                    for (byte, bits) in chunk.iter_mut().zip(word) {
                        *byte = text_byte(bits);
                    }
                }
                // Doubling copies: a 1 KiB value takes a handful.
                let mut filled = period;
                while filled < payload.len() {
                    let n = filled.min(payload.len() - filled);
                    payload.copy_within(..n, filled);
                    filled += n;
                }
            }
        }
    }

    /// Whether `value` is one this codec could have written for `key`.
    pub fn verify(&self, key: &[u8], value: &[u8]) -> bool {
        if value.len() != self.value_size_bytes {
            return false;
        }
        let (header, payload) = value.split_at(VALUE_HEADER_BYTES);
        let nonce = u64::from_le_bytes(header.try_into().expect("header is 8 bytes"));
        let mut rng = self.payload_rng(key, nonce);
        if let Some(period) = self.text_period_bytes {
            let period = period.min(payload.len());
            let (text, repeats) = payload.split_at(period);
            let text_matches = text.chunks(8).all(|chunk| {
                let word = rng.next_u64().to_le_bytes();
                chunk
                    .iter()
                    .zip(word)
                    .all(|(&byte, bits)| byte == text_byte(bits))
            });
            // Each byte equals the one a period earlier: the text, repeated.
            return text_matches && repeats == &payload[..payload.len() - period];
        }
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

/// The text byte of 8 random bits (the low 6 pick it).
fn text_byte(bits: u8) -> u8 {
    TEXT_ALPHABET[usize::from(bits & 63)]
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

    #[test]
    fn compressible_values_verify_to_their_last_byte() {
        for size in [8, 9, 15, 16, 17, 23, 64, 121, 1024] {
            for compressibility in [0.1, 0.5, 0.9] {
                let codec = ValueCodec::with_compressibility(3, size, compressibility);
                let mut value = Vec::new();
                codec.encode(b"k", 5, &mut value);
                assert_eq!(value.len(), size);
                assert!(codec.verify(b"k", &value), "size {size}, {compressibility}");
                // (A short value has a text byte or two: another key's
                // could match by chance.)
                assert!(size < 64 || !codec.verify(b"j", &value));
                for at in VALUE_HEADER_BYTES..size {
                    let mut torn = value.clone();
                    torn[at] ^= 0x80;
                    assert!(
                        !codec.verify(b"k", &torn),
                        "size {size}, {compressibility}, byte {at}"
                    );
                }
                // The same seed gives the same value; another write another.
                let mut again = Vec::new();
                ValueCodec::with_compressibility(3, size, compressibility)
                    .encode(b"k", 5, &mut again);
                assert_eq!(again, value);
                if size > VALUE_HEADER_BYTES {
                    codec.encode(b"k", 6, &mut again);
                    assert_ne!(again[VALUE_HEADER_BYTES..], value[VALUE_HEADER_BYTES..]);
                }
            }
        }
        // Random values and text ones are told apart.
        let mut text = Vec::new();
        ValueCodec::with_compressibility(3, 120, 0.5).encode(b"k", 5, &mut text);
        assert!(!ValueCodec::new(3, 120).verify(b"k", &text));
        assert!(
            text[VALUE_HEADER_BYTES..]
                .iter()
                .all(|b| TEXT_ALPHABET.contains(b))
        );
    }

    #[test]
    fn compressibility_zero_is_the_random_values() {
        let (mut random, mut zero) = (Vec::new(), Vec::new());
        ValueCodec::new(4, 120).encode(b"key", 9, &mut random);
        ValueCodec::with_compressibility(4, 120, 0.0).encode(b"key", 9, &mut zero);
        assert_eq!(random, zero);
    }

    /// LZ4 (block format, as RocksDB and fjall use it) over values packed
    /// into 4 KiB blocks, as a storage engine compresses a block of
    /// records: compressed bytes / raw bytes.
    fn lz4_ratio(value_size: usize, compressibility: f64) -> f64 {
        const BLOCK_BYTES: usize = 4096;
        let codec = ValueCodec::with_compressibility(1, value_size, compressibility);
        let mut rng = Rng::new(2);
        let (mut key, mut value, mut block) = (Vec::new(), Vec::new(), Vec::new());
        let (mut raw, mut compressed) = (0, 0);
        let mut flush = |block: &mut Vec<u8>| {
            raw += block.len();
            compressed += lz4_flex::block::compress(block).len();
            block.clear();
        };
        for record in 0..400 {
            KeyFormat::Binary.encode(record, &mut key);
            codec.encode(&key, rng.next_u64(), &mut value);
            if !block.is_empty() && block.len() + value.len() > BLOCK_BYTES {
                flush(&mut block);
            }
            block.extend_from_slice(&value);
        }
        flush(&mut block);
        compressed as f64 / raw as f64
    }

    #[test]
    fn lz4_removes_about_the_compressibility() {
        for size in [120, 1024] {
            let ratio = lz4_ratio(size, 0.5);
            assert!((0.4..0.6).contains(&ratio), "{size}-byte values: {ratio}");
            for compressibility in [0.25, 0.75] {
                let ratio = lz4_ratio(size, compressibility);
                let expected = 1.0 - compressibility;
                assert!(
                    (ratio - expected).abs() < 0.1,
                    "{size}-byte values, {compressibility}: {ratio}"
                );
            }
            // Random values do not compress.
            assert!(lz4_ratio(size, 0.0) > 0.99, "{size}-byte values");
        }
    }

    /// The achieved ratios, for the documentation:
    /// `cargo test -p turtlekv-bench --lib lz4_ratios -- --ignored --nocapture`.
    #[test]
    #[ignore = "prints a table"]
    fn lz4_ratios() {
        for size in [64, 120, 256, 1024, 4096] {
            let ratios: Vec<String> = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9]
                .iter()
                .map(|&f| format!("{f}: {:.3}", lz4_ratio(size, f)))
                .collect();
            println!("{size:>5} B  {}", ratios.join("  "));
        }
    }
}
