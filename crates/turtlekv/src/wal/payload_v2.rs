//! Record payloads of format version 2, the one the log writes: every
//! number a LEB128 integer (`crate::util::varint`; `docs/format.md`, "Payload").
//! A put of an 8-byte key and a 120-byte value takes 23 bytes of frame,
//! header and entry header, against 39 in version 1.

use crate::batch::BatchOp;
use crate::error::DecodeError;
use crate::util::varint;
use crate::wal::record::{PayloadReader, Record};

/// Low bit of an entry's tag: set for a put, clear for a delete.
const TAG_PUT: u64 = 1;

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
        let key_len = op.key.len() as u64;
        match &op.value {
            Some(v) => {
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

/// The payload `encode` writes for `ops`, at most: its two sequence
/// numbers are counted at their longest.
pub(crate) fn max_len(ops: &[BatchOp]) -> usize {
    let entries: usize = ops
        .iter()
        .map(|op| {
            let tag = varint::len_bytes((op.key.len() as u64) << 1 | TAG_PUT);
            let value = op
                .value
                .as_ref()
                .map_or(0, |v| varint::len_bytes(v.len() as u64) + v.len());
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

fn decode_entry(r: &mut PayloadReader<'_>) -> Result<BatchOp, DecodeError> {
    let tag_at = r.offset();
    let tag = r.varint()?;
    let key_len = tag >> 1;
    if key_len == 0 || key_len > crate::key::MAX_STORED_KEY_BYTES as u64 {
        return Err(DecodeError::new(tag_at, "key length out of range"));
    }
    let value_len = if tag & TAG_PUT == TAG_PUT {
        let len_at = r.offset();
        let len = r.varint()?;
        if len > crate::MAX_VALUE_SIZE as u64 {
            return Err(DecodeError::new(len_at, "value length out of range"));
        }
        Some(len as usize)
    } else {
        None
    };
    let key = r.field(key_len as usize)?;
    let value = match value_len {
        Some(len) => Some(r.field(len)?),
        None => None,
    };
    Ok(BatchOp::stored(key, value))
}
