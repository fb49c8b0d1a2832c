//! Per-leaf static filters (binary fuse, `xorf`): built once when a leaf or
//! segment is serialised, consulted before any of the page's other bytes are
//! read. Layout in `docs/format.md`, section "Filters".

use xorf::{BinaryFuse8, BinaryFuse8Ref, BinaryFuse16, BinaryFuse32, Filter, FilterRef};

use crate::error::DecodeError;

/// Bytes before the fingerprints.
const HEADER_BYTES: usize = 32;
/// Where the fingerprint width, the descriptor (from its segment length
/// on) and the fingerprint count lie in the header.
const WIDTH_AT: usize = 4;
const DESCRIPTOR_AT: usize = 16;
const COUNT_AT: usize = 28;

/// Hash of a key as the filters see it.
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// Fingerprint width for a `filter_bits_per_key` setting; `None` = no filter.
fn width_bits(bits_per_key: u32) -> Option<u8> {
    match bits_per_key {
        0 => None,
        1..=12 => Some(8),
        13..=24 => Some(16),
        _ => Some(32),
    }
}

/// An upper bound on the encoded size of a filter over `key_count` keys, so
/// leaves can be cut to fit their page before the filter exists. It mirrors
/// the sizing rule of `xorf`'s binary fuse construction.
pub(crate) fn max_encoded_len(key_count: usize, bits_per_key: u32) -> usize {
    let Some(width) = width_bits(bits_per_key) else {
        return 0;
    };
    if key_count == 0 {
        return 0;
    }
    HEADER_BYTES + fingerprint_slots(key_count) * usize::from(width / 8)
}

/// Key counts below this have their slot count looked up, not computed:
/// cutting a run into leaves sizes the filter once per item, and the
/// formula's logarithms were a few percent of a checkpoint's CPU. Leaves of
/// the default 2 MiB hold far fewer keys than this.
const SLOT_TABLE_KEYS: usize = 1 << 16;

fn fingerprint_slots(key_count: usize) -> usize {
    static TABLE: std::sync::OnceLock<Box<[u32]>> = std::sync::OnceLock::new();
    if key_count >= SLOT_TABLE_KEYS {
        return fingerprint_slots_computed(key_count);
    }
    let table = TABLE.get_or_init(|| {
        (0..SLOT_TABLE_KEYS)
            .map(|n| u32::try_from(fingerprint_slots_computed(n)).expect("slots of a small filter"))
            .collect()
    });
    table[key_count] as usize
}

/// Fingerprints in a binary fuse filter over `key_count` (at least one)
/// keys: the same formulas as the construction (arity 3), segment length
/// and capacity factor; a single key gets the minimum array.
fn fingerprint_slots_computed(key_count: usize) -> usize {
    let n = key_count.max(1) as f64;
    let ln_n = n.ln();
    let segment_length = 1usize << ((ln_n / 3.33f64.ln() + 2.25).floor().max(0.0) as u32).min(18);
    let capacity = if key_count > 1 {
        let factor = (0.875 + 0.25 * 1_000_000f64.ln() / ln_n).max(1.125);
        (n * factor).round() as usize
    } else {
        0
    };
    let segments = capacity.div_ceil(segment_length).max(3) + 1;
    segments * segment_length
}

/// Builds the encoded filter over `hashes` (sorted and deduplicated here, as
/// the construction fails on repeated hashes). Returns an empty vector when
/// filters are off or the construction fails: the page then has no filter and
/// every lookup reads it.
pub(crate) fn build(mut hashes: Vec<u64>, bits_per_key: u32) -> Vec<u8> {
    let Some(width) = width_bits(bits_per_key) else {
        return Vec::new();
    };
    hashes.sort_unstable();
    hashes.dedup();
    if hashes.is_empty() {
        return Vec::new();
    }
    let mut out = vec![0u8; HEADER_BYTES];
    out[4] = width;
    let descriptor = match width {
        8 => match BinaryFuse8::try_from(&hashes) {
            Ok(f) => {
                out.extend_from_slice(&f.fingerprints);
                f.descriptor
            }
            Err(_) => return Vec::new(),
        },
        16 => match BinaryFuse16::try_from(&hashes) {
            Ok(f) => {
                f.fingerprints
                    .iter()
                    .for_each(|fp| out.extend_from_slice(&fp.to_le_bytes()));
                f.descriptor
            }
            Err(_) => return Vec::new(),
        },
        _ => match BinaryFuse32::try_from(&hashes) {
            Ok(f) => {
                f.fingerprints
                    .iter()
                    .for_each(|fp| out.extend_from_slice(&fp.to_le_bytes()));
                f.descriptor
            }
            Err(_) => return Vec::new(),
        },
    };
    let count = (out.len() - HEADER_BYTES) / usize::from(width / 8);
    out[8..16].copy_from_slice(&descriptor.seed.to_le_bytes());
    out[16..20].copy_from_slice(&descriptor.segment_length.to_le_bytes());
    out[20..24].copy_from_slice(&descriptor.segment_length_mask.to_le_bytes());
    out[24..28].copy_from_slice(&descriptor.segment_count_length.to_le_bytes());
    out[28..32].copy_from_slice(&(count as u32).to_le_bytes());
    let crc = crc32c::crc32c(&out[4..]);
    out[0..4].copy_from_slice(&crc.to_le_bytes());
    out
}

/// A decoded filter, ready for membership queries.
#[derive(Debug, Clone)]
pub(crate) enum KeyFilter {
    Fuse8(BinaryFuse8),
    Fuse16(BinaryFuse16),
    Fuse32(BinaryFuse32),
}

impl KeyFilter {
    /// Decodes an encoded filter and verifies its checksum; an error's
    /// offset is within the filter, so the caller can report corruption at
    /// the page's location.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        if bytes.len() < HEADER_BYTES {
            return Err(DecodeError::new(
                0,
                format!("filter of {} bytes is shorter than its header", bytes.len()),
            ));
        }
        let stored_crc = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes"));
        if crc32c::crc32c(&bytes[4..]) != stored_crc {
            return Err(DecodeError::new(0, "filter checksum mismatch"));
        }
        Self::decode_unverified(bytes)
    }

    /// Decodes without the checksum (the structure is still validated, so a
    /// lookup cannot index out of bounds).
    fn decode_unverified(bytes: &[u8]) -> Result<Self, DecodeError> {
        if bytes.len() < HEADER_BYTES {
            return Err(DecodeError::new(
                0,
                format!("filter of {} bytes is shorter than its header", bytes.len()),
            ));
        }
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let descriptor = xorf::Descriptor {
            seed: u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")),
            segment_length: u32_at(16),
            segment_length_mask: u32_at(20),
            segment_count_length: u32_at(24),
        };
        let count = u32_at(28) as usize;
        let width = bytes[4];
        let body = &bytes[HEADER_BYTES..];
        let width_bytes = usize::from(width / 8);
        if !matches!(width, 8 | 16 | 32) {
            return Err(DecodeError::new(
                WIDTH_AT,
                format!("filter fingerprint width {width}"),
            ));
        }
        if body.len() != count * width_bytes {
            return Err(DecodeError::new(
                COUNT_AT,
                format!(
                    "filter of {count} fingerprints of {width} bits in {} bytes",
                    body.len()
                ),
            ));
        }
        // The fuse lookup indexes up to segment_count_length + 2 segments.
        let needed =
            descriptor.segment_count_length as usize + 2 * descriptor.segment_length as usize;
        if count < needed
            || !descriptor.segment_length.is_power_of_two()
            || descriptor.segment_length_mask != descriptor.segment_length - 1
        {
            return Err(DecodeError::new(
                DESCRIPTOR_AT,
                "filter descriptor does not match its fingerprints",
            ));
        }
        Ok(match width {
            8 => KeyFilter::Fuse8(BinaryFuse8 {
                descriptor,
                fingerprints: body.into(),
            }),
            16 => KeyFilter::Fuse16(BinaryFuse16 {
                descriptor,
                fingerprints: body
                    .chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect(),
            }),
            _ => KeyFilter::Fuse32(BinaryFuse32 {
                descriptor,
                fingerprints: body
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            }),
        })
    }

    /// `false` means the key is certainly absent.
    pub(crate) fn may_contain(&self, hash: u64) -> bool {
        match self {
            KeyFilter::Fuse8(f) => f.contains(&hash),
            KeyFilter::Fuse16(f) => f.contains(&hash),
            KeyFilter::Fuse32(f) => f.contains(&hash),
        }
    }
}

/// Probes an encoded filter: `Ok(false)` means the key is certainly absent.
/// The checksum is not recomputed on this hot path: the page store verified
/// the bytes when it read them, and `check()` verifies the filter's own
/// checksum. The 8-bit filter (the default) is probed in place.
/// An error's offset is within the filter.
pub(crate) fn may_contain(encoded: &[u8], hash: u64) -> Result<bool, DecodeError> {
    if let Some(header) = Fuse8Header::parse(encoded) {
        // Validate the structure once, then probe without copying.
        let body = &encoded[HEADER_BYTES..];
        let (segment_length, segment_count_length) = (
            header.segment_length as usize,
            header.segment_count_length as usize,
        );
        if body.len() != header.count as usize {
            return Err(DecodeError::new(
                COUNT_AT,
                format!(
                    "filter of {} fingerprints of 8 bits in {} bytes",
                    header.count,
                    body.len()
                ),
            ));
        }
        if body.len() < segment_count_length + 2 * segment_length
            || !segment_length.is_power_of_two()
            || header.mask as usize != segment_length - 1
        {
            return Err(DecodeError::new(
                DESCRIPTOR_AT,
                "filter descriptor does not match its fingerprints",
            ));
        }
        return Ok(BinaryFuse8Ref::from_dma(&encoded[8..28], body).contains(&hash));
    }
    Ok(KeyFilter::decode_unverified(encoded)?.may_contain(hash))
}

/// The header fields of an encoded 8-bit filter (the default), probed in
/// place; `None` for the wider fingerprints or a header cut short.
struct Fuse8Header {
    seed: u64,
    segment_length: u32,
    mask: u32,
    segment_count_length: u32,
    /// Fingerprint bytes after the header.
    count: u32,
}

impl Fuse8Header {
    fn parse(encoded: &[u8]) -> Option<Self> {
        if encoded.len() < HEADER_BYTES || encoded[4] != 8 {
            return None;
        }
        let word = |at: usize| u32::from_le_bytes(encoded[at..at + 4].try_into().expect("4 bytes"));
        Some(Fuse8Header {
            seed: u64::from_le_bytes(encoded[8..16].try_into().expect("8 bytes")),
            segment_length: word(16),
            mask: word(20),
            segment_count_length: word(24),
            count: word(28),
        })
    }
}

/// Asks the CPU to fetch the three fingerprints that `may_contain(encoded,
/// hash)` will read, so that a lookup probing several filters waits for
/// their memory once instead of once per filter. A hint: does nothing for
/// the wider fingerprints or a malformed header.
pub(crate) fn prefetch_probe(encoded: &[u8], hash: u64) {
    if let Some(offsets) = probe_offsets(encoded, hash) {
        for offset in offsets {
            crate::util::prefetch::prefetch(
                encoded.as_ptr().wrapping_add(offset),
                crate::util::prefetch::Locality::Nearest,
            );
        }
    }
}

/// Byte offsets in `encoded` of the three fingerprints an 8-bit binary fuse
/// filter XORs for `hash` (the construction's mapping: the hash mixed with
/// the seed, a segment picked by its high bits, then one slot in each of
/// three consecutive segments). Unchecked against the length: only for
/// prefetching.
fn probe_offsets(encoded: &[u8], hash: u64) -> Option<[usize; 3]> {
    let h = Fuse8Header::parse(encoded)?;
    let mixed = murmur3_finalizer(hash.wrapping_add(h.seed));
    let first = ((u128::from(mixed) * u128::from(h.segment_count_length)) >> 64) as u32;
    let second = first.wrapping_add(h.segment_length) ^ ((mixed >> 18) as u32 & h.mask);
    let third = first.wrapping_add(h.segment_length.wrapping_mul(2)) ^ (mixed as u32 & h.mask);
    Some([first, second, third].map(|slot| HEADER_BYTES + slot as usize))
}

/// MurmurHash3's 64-bit finalizer, which the filter applies to each hash.
fn murmur3_finalizer(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

#[cfg(test)]
mod tests;
