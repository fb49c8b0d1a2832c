//! Encoding and decoding of WAL record frames (layout in `docs/format.md`).

use bytes::Bytes;

use crate::batch::BatchOp;

/// Marks the start of every frame, so a scan can find frames after damage.
pub(crate) const FRAME_MAGIC: u32 = 0x4C57_4B54; // "TKWL" little-endian
/// magic + payload length + checksum.
pub(crate) const FRAME_HEADER_BYTES: usize = 12;
/// first_seq + synced_through + count.
const PAYLOAD_HEADER_BYTES: usize = 20;
/// Largest payload a frame may carry; bigger batches are refused up front.
pub(crate) const MAX_PAYLOAD_BYTES: usize = 1 << 30;

const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;

/// A decoded record: one `WriteBatch`, its entries numbered from `first_seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub first_seq: u64,
    /// Bytes of this segment known durable when the record was written.
    pub synced_through: u64,
    pub ops: Vec<BatchOp>,
}

/// Outcome of reading one frame at some offset.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A valid record and its total encoded length.
    Valid(Record, usize),
    /// Not enough bytes left for the frame the header announces.
    Truncated,
    /// Bad magic, bad length or checksum mismatch.
    Invalid(&'static str),
    /// The checksum holds but the payload does not parse: never a torn write.
    Malformed(&'static str),
}

/// Encoded size of a batch's record, frame header included.
pub(crate) fn encoded_len(ops: &[BatchOp]) -> usize {
    let entries: usize = ops
        .iter()
        .map(|op| 3 + op.key.len() + op.value.as_ref().map_or(0, |v| 4 + v.len()))
        .sum();
    FRAME_HEADER_BYTES + PAYLOAD_HEADER_BYTES + entries
}

/// Appends one framed record to `out`.
pub(crate) fn encode(out: &mut Vec<u8>, first_seq: u64, synced_through: u64, ops: &[BatchOp]) {
    let start = out.len();
    let payload_len = encoded_len(ops) - FRAME_HEADER_BYTES;
    debug_assert!(payload_len <= MAX_PAYLOAD_BYTES);
    out.extend_from_slice(&FRAME_MAGIC.to_le_bytes());
    out.extend_from_slice(&(payload_len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]); // checksum, filled below
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
    let crc = frame_crc(
        &out[start + 4..start + 8],
        &out[start + FRAME_HEADER_BYTES..],
    );
    out[start + 8..start + 12].copy_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(out.len() - start, payload_len + FRAME_HEADER_BYTES);
}

fn frame_crc(len_bytes: &[u8], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(len_bytes), payload)
}

/// The length of the frame at the start of `buf` as its header gives it
/// (magic and a possible payload length; nothing verified), if it does.
pub(crate) fn frame_len_from_header(buf: &[u8]) -> Option<usize> {
    if buf.len() < FRAME_HEADER_BYTES || u32_at(buf, 0) != FRAME_MAGIC {
        return None;
    }
    let payload_len = u32_at(buf, 4) as usize;
    (PAYLOAD_HEADER_BYTES..=MAX_PAYLOAD_BYTES)
        .contains(&payload_len)
        .then_some(FRAME_HEADER_BYTES + payload_len)
}

/// Reads the frame at the start of `buf`.
pub(crate) fn decode(buf: &[u8]) -> Frame {
    if buf.len() < FRAME_HEADER_BYTES {
        return Frame::Truncated;
    }
    if u32_at(buf, 0) != FRAME_MAGIC {
        return Frame::Invalid("bad frame magic");
    }
    let payload_len = u32_at(buf, 4) as usize;
    if !(PAYLOAD_HEADER_BYTES..=MAX_PAYLOAD_BYTES).contains(&payload_len) {
        return Frame::Invalid("impossible payload length");
    }
    let Some(payload) = buf.get(FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + payload_len) else {
        return Frame::Truncated;
    };
    if frame_crc(&buf[4..8], payload) != u32_at(buf, 8) {
        return Frame::Invalid("checksum mismatch");
    }
    match decode_payload(payload) {
        Ok(record) => Frame::Valid(record, FRAME_HEADER_BYTES + payload_len),
        Err(reason) => Frame::Malformed(reason),
    }
}

fn decode_payload(payload: &[u8]) -> Result<Record, &'static str> {
    let first_seq = u64_at(payload, 0);
    let synced_through = u64_at(payload, 8);
    let count = u32_at(payload, 16) as usize;
    let mut rest = &payload[PAYLOAD_HEADER_BYTES..];
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
    if first_seq == 0 || first_seq.checked_add(count as u64).is_none() {
        return Err("impossible sequence number");
    }
    Ok(Record {
        first_seq,
        synced_through,
        ops,
    })
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
    let total = header + key_len + value_len.unwrap_or(0);
    let entry = buf.get(..total).ok_or("entry runs past payload")?;
    let key = Bytes::copy_from_slice(&entry[header..header + key_len]);
    let value = value_len.map(|_| Bytes::copy_from_slice(&entry[header + key_len..]));
    Ok((BatchOp { key, value }, total))
}

fn take<const N: usize>(buf: &[u8], at: usize) -> Result<[u8; N], &'static str> {
    buf.get(at..at + N)
        .and_then(|s| s.try_into().ok())
        .ok_or("entry header cut short")
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops() -> Vec<BatchOp> {
        vec![
            BatchOp {
                key: Bytes::from_static(b"alpha"),
                value: Some(Bytes::from_static(b"one")),
            },
            BatchOp {
                key: Bytes::from_static(b"beta"),
                value: None,
            },
            BatchOp {
                key: Bytes::from_static(b"gamma"),
                value: Some(Bytes::new()),
            },
        ]
    }

    #[test]
    fn round_trip() {
        let mut buf = Vec::new();
        encode(&mut buf, 42, 7, &ops());
        assert_eq!(buf.len(), encoded_len(&ops()));
        match decode(&buf) {
            Frame::Valid(r, n) => {
                assert_eq!(n, buf.len());
                assert_eq!((r.first_seq, r.synced_through), (42, 7));
                assert_eq!(r.ops, ops());
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn every_truncation_is_detected() {
        let mut buf = Vec::new();
        encode(&mut buf, 1, 0, &ops());
        for len in 0..buf.len() {
            assert!(matches!(decode(&buf[..len]), Frame::Truncated), "len {len}");
        }
    }

    #[test]
    fn every_bit_flip_is_detected() {
        let mut buf = Vec::new();
        encode(&mut buf, 1, 0, &ops());
        for bit in 0..buf.len() * 8 {
            let mut damaged = buf.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(
                !matches!(decode(&damaged), Frame::Valid(..)),
                "bit {bit} went unnoticed"
            );
        }
    }

    proptest::proptest! {
        /// Arbitrary bytes, and valid frames with arbitrary damage, decode to
        /// an answer without panicking or reading past the buffer.
        #[test]
        fn decoding_arbitrary_bytes_never_panics(
            noise in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
            at in 0usize..200,
            cut in 0usize..200,
        ) {
            let _ = decode(&noise);
            let mut framed = Vec::new();
            encode(&mut framed, 9, 0, &ops());
            let end = framed.len().min(cut.max(1));
            for (i, b) in noise.iter().enumerate() {
                if let Some(byte) = framed.get_mut(at + i) {
                    *byte ^= b;
                }
            }
            let _ = decode(&framed[..end]);
        }
    }

    #[test]
    fn zeros_are_not_a_frame() {
        assert!(matches!(decode(&[0u8; 64]), Frame::Invalid(_)));
    }
}
