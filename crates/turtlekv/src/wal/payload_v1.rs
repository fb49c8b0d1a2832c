//! Record payloads of format version 1, with fixed-width numbers
//! (`docs/format.md`, "Payload, version 1"). No longer written by the log;
//! segments written by earlier builds are still replayed, and tests write
//! it to check that.

use crate::batch::BatchOp;
use crate::wal::record::{Record, copy_field};

/// first_seq + synced_through + count.
const HEADER_BYTES: usize = 20;
const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;

pub(crate) fn encode(out: &mut Vec<u8>, first_seq: u64, synced_through: u64, ops: &[BatchOp]) {
    out.extend_from_slice(&first_seq.to_le_bytes());
    out.extend_from_slice(&synced_through.to_le_bytes());
    out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    for op in ops {
        let key_len = op.key.len() as u16;
        match &op.value {
            Some(v) => {
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

pub(crate) fn decode(payload: &[u8]) -> Result<Record, &'static str> {
    if payload.len() < HEADER_BYTES {
        return Err("payload shorter than its header");
    }
    let first_seq = u64::from_le_bytes(take(payload, 0)?);
    let synced_through = u64::from_le_bytes(take(payload, 8)?);
    let count = u32::from_le_bytes(take(payload, 16)?) as usize;
    let mut rest = &payload[HEADER_BYTES..];
    // Every entry takes at least 4 bytes, so a huge count cannot make us allocate much.
    if count > rest.len() / 4 {
        return Err("entry count exceeds payload");
    }
    let mut ops = Vec::with_capacity(count);
    for _ in 0..count {
        let (op, used) = decode_entry(rest)?;
        ops.push(op);
        rest = &rest[used..];
    }
    if !rest.is_empty() {
        return Err("trailing bytes after entries");
    }
    Record::checked(first_seq, synced_through, ops)
}

fn decode_entry(buf: &[u8]) -> Result<(BatchOp, usize), &'static str> {
    let kind = *buf.first().ok_or("entry header cut short")?;
    let key_len = u16::from_le_bytes(take(buf, 1)?) as usize;
    let (value_len, header) = match kind {
        OP_PUT => (Some(u32::from_le_bytes(take(buf, 3)?) as usize), 7),
        OP_DELETE => (None, 3),
        _ => return Err("unknown entry kind"),
    };
    if key_len == 0 || key_len > crate::MAX_KEY_SIZE {
        return Err("key length out of range");
    }
    if value_len.is_some_and(|len| len > crate::MAX_VALUE_SIZE) {
        return Err("value length out of range");
    }
    let key = copy_field(&buf[header..], key_len)?;
    let value = match value_len {
        Some(len) => Some(copy_field(&buf[header + key_len..], len)?),
        None => None,
    };
    let total = header + key_len + value_len.unwrap_or(0);
    Ok((BatchOp { key, value }, total))
}

fn take<const N: usize>(buf: &[u8], at: usize) -> Result<[u8; N], &'static str> {
    buf.get(at..at + N)
        .and_then(|s| s.try_into().ok())
        .ok_or("entry header cut short")
}
