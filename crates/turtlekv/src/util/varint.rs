//! LEB128 variable-length integers, as WAL record payloads and leaf items
//! store their lengths and numbers: 7 bits per byte, low bits first, the
//! high bit set on every byte but the last. Decoding accepts only the shortest encoding of a value, so
//! a valid record has exactly one encoding.

/// Longest encoding of a `u64`.
pub(crate) const MAX_LEN_BYTES: usize = 10;

/// Appends `value`'s encoding to `out`.
pub(crate) fn put(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Bytes `put` appends for `value`.
#[inline]
pub(crate) fn len_bytes(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Decodes the integer at the start of `buf` and the bytes it took.
#[inline]
pub(crate) fn get(buf: &[u8]) -> Result<(u64, usize), &'static str> {
    let mut value = 0u64;
    for (i, &byte) in buf.iter().enumerate().take(MAX_LEN_BYTES) {
        let bits = u64::from(byte & 0x7F);
        // The tenth byte holds bit 63 only.
        if i == MAX_LEN_BYTES - 1 && byte > 1 {
            return Err("integer overflows 64 bits");
        }
        value |= bits << (7 * i);
        if byte & 0x80 == 0 {
            if byte == 0 && i > 0 {
                return Err("integer not in its shortest encoding");
            }
            return Ok((value, i + 1));
        }
    }
    // A tenth byte always ends the loop above, so the input ran out.
    Err("integer cut short")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_round_trip_at_their_length() {
        for (value, len) in [
            (0, 1),
            (127, 1),
            (128, 2),
            (16_383, 2),
            (16_384, 3),
            (u64::from(u32::MAX), 5),
            (u64::MAX, 10),
        ] {
            let mut out = Vec::new();
            put(&mut out, value);
            assert_eq!(out.len(), len, "{value}");
            assert_eq!(len_bytes(value), len, "{value}");
            assert_eq!(get(&out), Ok((value, len)), "{value}");
        }
    }

    #[test]
    fn longer_encodings_are_refused() {
        assert!(get(&[0x80, 0x00]).is_err(), "zero in two bytes");
        assert!(get(&[0xFF, 0x80, 0x00]).is_err());
        assert!(get(&[0xFF; 9]).is_err(), "cut short");
        let mut eleven = vec![0xFF; 10];
        eleven.push(0x01);
        assert!(get(&eleven).is_err(), "more than ten bytes");
        let mut over = vec![0xFF; 9];
        over.push(0x02);
        assert!(get(&over).is_err(), "bit 64 set");
        assert!(get(&[]).is_err());
    }

    proptest::proptest! {
        #[test]
        fn every_value_round_trips(value: u64, tail: Vec<u8>) {
            let mut out = Vec::new();
            put(&mut out, value);
            let len = out.len();
            out.extend(tail);
            proptest::prop_assert_eq!(get(&out), Ok((value, len)));
        }
    }
}
