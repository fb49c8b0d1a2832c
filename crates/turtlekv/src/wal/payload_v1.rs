//! Record payloads of format version 1, with fixed-width numbers
//! (`docs/format.md`, "Payload, version 1"). No longer written by the log;
//! segments written by earlier builds are still replayed, and tests write
//! it to check that.

use crate::batch::BatchOp;
use crate::error::DecodeError;
use crate::values::Value;
use crate::wal::record::{PayloadReader, Record};

/// first_seq + synced_through + count.
const HEADER_BYTES: usize = 20;
const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;

pub(crate) fn encode(out: &mut Vec<u8>, first_seq: u64, synced_through: u64, ops: &[BatchOp]) {
    out.extend_from_slice(&first_seq.to_le_bytes());
    out.extend_from_slice(&synced_through.to_le_bytes());
    out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    for op in ops {
        debug_assert!(!op.is_range(), "version 1 holds no range deletions");
        let key_len = op.key.len() as u16;
        match &op.value {
            Some(v) => {
                debug_assert!(!v.is_pointer(), "version 1 holds no value pointers");
                let v = v.stored();
                out.push(OP_PUT);
                out.extend_from_slice(&key_len.to_le_bytes());
                out.extend_from_slice(&(v.len() as u32).to_le_bytes());
                out.extend_from_slice(&op.key);
                out.extend_from_slice(v);
            }
            None => {
                out.push(OP_DELETE);
                out.extend_from_slice(&key_len.to_le_bytes());
                out.extend_from_slice(&op.key);
            }
        }
    }
}

/// Decodes a payload; an error's offset is within the payload.
pub(crate) fn decode(payload: &[u8]) -> Result<Record, DecodeError> {
    if payload.len() < HEADER_BYTES {
        return Err(DecodeError::new(0, "payload shorter than its header"));
    }
    let mut r = PayloadReader::new(payload);
    let first_seq = u64::from_le_bytes(r.fixed()?);
    let synced_through = u64::from_le_bytes(r.fixed()?);
    let count = u32::from_le_bytes(r.fixed()?) as usize;
    // Every entry takes at least 4 bytes, so a huge count cannot make us allocate much.
    if count > r.remaining() / 4 {
        return Err(DecodeError::new(16, "entry count exceeds payload"));
    }
    let mut ops = Vec::with_capacity(count);
    for _ in 0..count {
        ops.push(decode_entry(&mut r)?);
    }
    r.finish()?;
    Record::checked(first_seq, synced_through, ops)
}

fn decode_entry(r: &mut PayloadReader<'_>) -> Result<BatchOp, DecodeError> {
    let entry_at = r.offset();
    let [kind] = r.fixed()?;
    let key_len = u16::from_le_bytes(r.fixed()?) as usize;
    let value_len = match kind {
        OP_PUT => Some(u32::from_le_bytes(r.fixed()?) as usize),
        OP_DELETE => None,
        _ => return Err(DecodeError::new(entry_at, "unknown entry kind")),
    };
    if key_len == 0 || key_len > crate::key::MAX_STORED_KEY_BYTES {
        return Err(DecodeError::new(entry_at + 1, "key length out of range"));
    }
    if value_len.is_some_and(|len| len > crate::options::MAX_INLINE_VALUE_BYTES) {
        return Err(DecodeError::new(entry_at + 3, "value length out of range"));
    }
    let key = r.field(key_len)?;
    let value = match value_len {
        Some(len) => Some(Value::Inline(r.field(len)?)),
        None => None,
    };
    Ok(BatchOp::stored(key, value))
}
