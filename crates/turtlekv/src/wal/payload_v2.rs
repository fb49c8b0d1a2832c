//! Record payloads of format version 2, the one the log writes: every
//! number a LEB128 integer (`crate::util::varint`; `docs/format.md`, "Payload").
//! A put of an 8-byte key and a 120-byte value takes 23 bytes of frame,
//! header and entry header, against 39 in version 1.

use crate::batch::BatchOp;
use crate::error::DecodeError;
use crate::util::varint;
use crate::values::Value;
use crate::wal::record::{PayloadReader, Record};

/// Low bit of an entry's tag: set for a put, clear for a delete.
const TAG_PUT: u64 = 1;
/// The tag of a range deletion: no put or delete has it (their keys hold
/// at least one byte).
const TAG_RANGE: u64 = 0;
/// The tag before a separated put's own (a put with an empty key, which no
/// entry has otherwise): its value is a value pointer.
const TAG_POINTER: u64 = 1;

/// Appends the payload; `next_segment` makes a record without updates a
/// link (`docs/format.md`, "Link").
pub(crate) fn encode(
    out: &mut Vec<u8>,
    first_seq: u64,
    synced_through: u64,
    ops: &[BatchOp],
    next_segment: Option<u64>,
) {
    debug_assert!(next_segment.is_none() || ops.is_empty());
    varint::put(out, first_seq);
    varint::put(out, synced_through);
    varint::put(out, ops.len() as u64);
    for op in ops {
        if let Some(end) = &op.end {
            encode_range(out, &op.key, end);
            continue;
        }
        let key_len = op.key.len() as u64;
        match &op.value {
            Some(v) => {
                if v.is_pointer() {
                    varint::put(out, TAG_POINTER);
                }
                let v = v.stored();
                varint::put(out, key_len << 1 | TAG_PUT);
                varint::put(out, v.len() as u64);
                out.extend_from_slice(&op.key);
                out.extend_from_slice(v);
            }
            None => {
                varint::put(out, key_len << 1);
                out.extend_from_slice(&op.key);
            }
        }
    }
    if let Some(next) = next_segment {
        varint::put(out, next);
    }
}

/// A range deletion: tag 0, both lengths, both keys.
fn encode_range(out: &mut Vec<u8>, start: &[u8], end: &[u8]) {
    varint::put(out, TAG_RANGE);
    varint::put(out, start.len() as u64);
    varint::put(out, end.len() as u64);
    out.extend_from_slice(start);
    out.extend_from_slice(end);
}

/// The payload `encode` writes for `ops`, at most: its two sequence
/// numbers are counted at their longest.
pub(crate) fn max_len(ops: &[BatchOp]) -> usize {
    let entries: usize = ops
        .iter()
        .map(|op| {
            if let Some(end) = &op.end {
                let lens =
                    varint::len_bytes(op.key.len() as u64) + varint::len_bytes(end.len() as u64);
                return 1 + lens + op.key.len() + end.len();
            }
            let tag = varint::len_bytes((op.key.len() as u64) << 1 | TAG_PUT);
            let value = op.value.as_ref().map_or(0, |v| {
                usize::from(v.is_pointer())
                    + varint::len_bytes(v.stored_len() as u64)
                    + v.stored_len()
            });
            tag + op.key.len() + value
        })
        .sum();
    2 * varint::MAX_LEN_BYTES + varint::len_bytes(ops.len() as u64) + entries
}

/// Decodes a payload; an error's offset is within the payload.
pub(crate) fn decode(payload: &[u8]) -> Result<Record, DecodeError> {
    let mut r = PayloadReader::new(payload);
    let first_seq = r.varint()?;
    let synced_through = r.varint()?;
    let count_at = r.offset();
    let count = r.varint()?;
    // Every entry takes at least 2 bytes (tag and a 1-byte key), so a huge
    // count cannot make us allocate much.
    if count > r.remaining() as u64 / 2 {
        return Err(DecodeError::new(count_at, "entry count exceeds payload"));
    }
    let mut ops = Vec::with_capacity(count as usize);
    for _ in 0..count {
        ops.push(decode_entry(&mut r)?);
    }
    // A record without updates may end in the id of the next segment: a
    // link. Zero names no segment, so a link has one encoding.
    let mut next_segment = None;
    if count == 0 && r.remaining() > 0 {
        let next_at = r.offset();
        let next = r.varint()?;
        if next == 0 {
            return Err(DecodeError::new(next_at, "link to segment 0"));
        }
        next_segment = Some(next);
    }
    r.finish()?;
    let mut record = Record::checked(first_seq, synced_through, ops)?;
    record.next_segment = next_segment;
    Ok(record)
}

/// The longest encoded value pointer: three LEB128 numbers and a checksum.
const MAX_POINTER_BYTES: u64 = 3 * varint::MAX_LEN_BYTES as u64 + 4;

fn decode_entry(r: &mut PayloadReader<'_>) -> Result<BatchOp, DecodeError> {
    let mut tag_at = r.offset();
    let mut tag = r.varint()?;
    if tag == TAG_RANGE {
        return decode_range(r, tag_at);
    }
    let pointer = tag == TAG_POINTER;
    if pointer {
        let marker_at = tag_at;
        tag_at = r.offset();
        tag = r.varint()?;
        if tag & TAG_PUT != TAG_PUT {
            return Err(DecodeError::new(
                marker_at,
                "a value pointer's entry is not a put",
            ));
        }
    }
    let key_len = tag >> 1;
    if key_len == 0 || key_len > crate::key::MAX_STORED_KEY_BYTES as u64 {
        return Err(DecodeError::new(tag_at, "key length out of range"));
    }
    let value_len = if tag & TAG_PUT == TAG_PUT {
        let len_at = r.offset();
        let len = r.varint()?;
        if len > crate::options::MAX_INLINE_VALUE_BYTES as u64
            || (pointer && len > MAX_POINTER_BYTES)
        {
            return Err(DecodeError::new(len_at, "value length out of range"));
        }
        Some(len as usize)
    } else {
        None
    };
    let key = r.field(key_len as usize)?;
    let value = match value_len {
        Some(len) => Some(Value::of_kind(pointer, r.field(len)?)),
        None => None,
    };
    Ok(BatchOp::stored(key, value))
}

/// The rest of a range deletion whose tag is at `tag_at`.
fn decode_range(r: &mut PayloadReader<'_>, tag_at: usize) -> Result<BatchOp, DecodeError> {
    let mut key_len = || {
        let len_at = r.offset();
        let len = r.varint()?;
        if len == 0 || len > crate::key::MAX_STORED_KEY_BYTES as u64 {
            return Err(DecodeError::new(len_at, "range key length out of range"));
        }
        Ok(len as usize)
    };
    let (start_len, end_len) = (key_len()?, key_len()?);
    let start = r.field(start_len)?;
    let end = r.field(end_len)?;
    if start >= end {
        return Err(DecodeError::new(tag_at, "empty or inverted deleted range"));
    }
    Ok(BatchOp::stored_range(start, end))
}

#[cfg(test)]
mod range_tests {
    use bytes::Bytes;

    use super::*;

    fn payload(ops: &[BatchOp]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(&mut out, 5, 0, ops, None);
        out
    }

    fn range(start: &'static [u8], end: &'static [u8]) -> BatchOp {
        BatchOp::stored_range(Bytes::from_static(start), Bytes::from_static(end))
    }

    #[test]
    fn value_pointers_round_trip_marked_and_malformed_ones_are_refused() {
        let pointer = crate::values::ValuePointer {
            file_id: 3,
            offset: 48,
            value_len: 5000,
            crc: 7,
        }
        .encode();
        let ops = vec![
            BatchOp::stored(
                Bytes::from_static(b"\0a"),
                Some(Value::Pointer(pointer.clone())),
            ),
            BatchOp::stored(
                Bytes::from_static(b"\0b"),
                Some(Value::Inline(pointer.clone())),
            ),
        ];
        let bytes = payload(&ops);
        assert!(bytes.len() <= max_len(&ops));
        let record = decode(&bytes).unwrap();
        assert_eq!(record.ops, ops);
        let kinds: Vec<bool> = record
            .ops
            .iter()
            .map(|op| op.value.as_ref().unwrap().is_pointer())
            .collect();
        assert_eq!(kinds, [true, false], "the same bytes, told apart");
        // The pointer tag before a delete, or before an overlong pointer.
        let mut tombstone = payload(&[]);
        let count_at = tombstone.len() - 1;
        tombstone[count_at] = 1;
        tombstone.extend_from_slice(&[1, 2 << 1, 0, b'a']);
        assert!(decode(&tombstone).is_err());
        let long = BatchOp::stored(
            Bytes::from_static(b"\0c"),
            Some(Value::Pointer(Bytes::from(vec![0u8; 35]))),
        );
        assert!(decode(&payload(&[long])).is_err());
    }

    #[test]
    fn range_deletions_round_trip_among_puts_and_deletes() {
        let ops = vec![
            BatchOp::stored(
                Bytes::from_static(b"\0a"),
                Some(Value::Inline(Bytes::from_static(b"v"))),
            ),
            range(b"\0a", b"\0zz"),
            BatchOp::stored(Bytes::from_static(b"\0b"), None),
            range(b"\x05k", b"\x05l"),
        ];
        let bytes = payload(&ops);
        assert!(bytes.len() <= max_len(&ops));
        let record = decode(&bytes).unwrap();
        assert_eq!(record.ops, ops);
        assert_eq!(record.first_seq, 5);
        assert!(record.ops[1].is_range() && !record.ops[2].is_range());
    }

    #[test]
    fn the_documented_size() {
        // format.md: 3 bytes of tag and lengths, then both keys.
        let bytes = payload(&[range(b"\0aaa", b"\0bbb")]);
        assert_eq!(bytes.len(), 3 + 3 + 4 + 4);
    }

    #[test]
    fn bad_ranges_are_errors_at_their_field() {
        let mut bytes = payload(&[range(b"\0a", b"\0b")]);
        // Swap start and end: an inverted range, reported at the tag (byte 3).
        let n = bytes.len();
        bytes.swap(n - 1, n - 3);
        assert_eq!(decode(&bytes).unwrap_err().offset, 3);
        // Equal keys: an empty range.
        let empty = payload(&[range(b"\0a", b"\0b")]);
        let mut same = empty.clone();
        let n = same.len();
        same[n - 1] = b'a';
        assert_eq!(decode(&same).unwrap_err().offset, 3);
        // A zero start length, at its field.
        let mut zero = empty.clone();
        zero[4] = 0;
        assert_eq!(decode(&zero).unwrap_err().offset, 4);
        // An end length past the stored-key limit.
        let mut long = Vec::new();
        varint::put(&mut long, 5);
        varint::put(&mut long, 0);
        varint::put(&mut long, 1);
        varint::put(&mut long, 0);
        varint::put(&mut long, 1);
        varint::put(&mut long, 10_000);
        long.extend_from_slice(b"a");
        assert_eq!(decode(&long).unwrap_err().offset, 5);
    }

    #[test]
    fn every_truncation_and_byte_flip_is_an_error_or_a_valid_record() {
        let ops = vec![range(b"\0abc", b"\0abd"), range(b"\x07", b"\x08")];
        let bytes = payload(&ops);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..bytes.len() {
            for bit in 0..8 {
                let mut flipped = bytes.clone();
                flipped[at] ^= 1 << bit;
                // Never a panic; a decoded range is never empty.
                if let Ok(record) = decode(&flipped) {
                    for op in record.ops.iter().filter(|op| op.is_range()) {
                        assert!(op.key < *op.end.as_ref().unwrap());
                    }
                }
            }
        }
    }
}
