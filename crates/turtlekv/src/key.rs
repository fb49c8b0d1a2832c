//! Key order. Keys compare byte by byte, as `<[u8]>::cmp`; the helpers
//! here give the same answers with integer compares on the first 8 bytes,
//! which decide nearly every pair of real keys. The tree, the MemTable and
//! the iterators all order keys with them.

use std::cmp::Ordering;

/// Longest keyspace tag before a stored key (`docs/format.md`, "Keyspaces").
pub(crate) const MAX_TAG_BYTES: usize = 5;

/// Longest key the tree and the WAL store: a user key of up to
/// [`crate::MAX_KEY_SIZE`] bytes behind its keyspace's tag.
pub(crate) const MAX_STORED_KEY_BYTES: usize = crate::MAX_KEY_SIZE + MAX_TAG_BYTES;

/// Byte-wise key order, as `<[u8]>::cmp`, without a `memcmp` call unless
/// two keys longer than 8 bytes share their first 8: one integer compare
/// decides most pairs. Merges and scans spend much of their time here; a
/// scan compares against the empty lower bound of a node's first pivot.
#[inline]
pub(crate) fn compare_keys(a: &[u8], b: &[u8]) -> Ordering {
    let order = key_prefix(a).cmp(&key_prefix(b));
    if order != Ordering::Equal {
        return order;
    }
    // Equal prefixes: a key of at most 8 bytes is then a prefix of the
    // other key (see `key_prefix`), so the shorter is the smaller.
    if a.len() > 8 && b.len() > 8 {
        a[8..].cmp(&b[8..])
    } else {
        a.len().cmp(&b.len())
    }
}

/// The first 8 bytes of `key`, zero-padded, as a big-endian number. If
/// `key_prefix(a) < key_prefix(b)` then `a < b`: the first differing byte
/// is either a real byte of both, or a padding zero of the shorter key,
/// which then is a prefix of the other. Equal prefixes decide nothing.
#[inline]
pub(crate) fn key_prefix(key: &[u8]) -> u64 {
    if let Some(first) = key.first_chunk::<8>() {
        return u64::from_be_bytes(*first);
    }
    short_key_prefix(key)
}

/// `key_prefix` of a key shorter than 8 bytes (separators, bounds), apart
/// so that `compare_keys` stays small enough to inline. A copy into a
/// padded buffer compiled to a `memcpy` call; this takes two overlapping
/// loads, or three bytes, each shifted to its place (where they overlap,
/// they hold the same bytes at the same places).
#[inline(never)]
fn short_key_prefix(key: &[u8]) -> u64 {
    let n = key.len();
    debug_assert!(n < 8);
    if n >= 4 {
        let head = u64::from(u32::from_be_bytes(
            *key.first_chunk::<4>().expect("4 bytes"),
        ));
        let tail = u64::from(u32::from_be_bytes(*key.last_chunk::<4>().expect("4 bytes")));
        (head << 32) | (tail << (8 * (8 - n)))
    } else if n > 0 {
        let byte_at = |i: usize| u64::from(key[i]) << (56 - 8 * i);
        byte_at(0) | byte_at(n / 2) | byte_at(n - 1)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys around the cases the shortcuts treat apart: empty, shorter than
    /// 8 bytes with and without trailing zeros, exactly 8, longer with
    /// equal first 8 bytes.
    const EDGE_KEYS: [&[u8]; 14] = [
        b"",
        b"\0",
        b"\0\0",
        b"\0\0\0\0\0\0\0\0",
        b"\0\0\0\0\0\0\0\0\0",
        b"a",
        b"a\0",
        b"a\0\x01",
        b"ab",
        b"abcdefgh",
        b"abcdefgh\0",
        b"abcdefghi",
        b"abcdefgi",
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    ];

    #[test]
    fn edge_keys_compare_in_byte_order() {
        for a in EDGE_KEYS {
            for b in EDGE_KEYS {
                assert_eq!(compare_keys(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    /// The first 8 bytes, zero-padded: the definition the shortcuts for
    /// short keys must agree with, at every length and with bytes that
    /// differ at every place.
    #[test]
    fn key_prefix_is_the_padded_first_eight_bytes() {
        let reference = |key: &[u8]| {
            let mut bytes = [0u8; 8];
            let n = key.len().min(8);
            bytes[..n].copy_from_slice(&key[..n]);
            u64::from_be_bytes(bytes)
        };
        for fill in [
            [0x11u8, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99],
            [0xff; 9],
            [0; 9],
        ] {
            for n in 0..=fill.len() {
                let key = &fill[..n];
                assert_eq!(key_prefix(key), reference(key), "{key:?}");
            }
        }
    }

    #[test]
    fn key_prefix_order_implies_key_order() {
        for a in EDGE_KEYS {
            for b in EDGE_KEYS {
                if key_prefix(a) < key_prefix(b) {
                    assert!(a < b, "{a:?} {b:?}");
                }
            }
        }
    }
}
