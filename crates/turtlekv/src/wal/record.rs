//! WAL record frames (layout in `docs/format.md`): the frame around each
//! payload, and the payload layout a segment's format version selects.

use bytes::Bytes;

use crate::batch::BatchOp;
use crate::error::DecodeError;
use crate::util::varint;
use crate::wal::{payload_v1, payload_v2};

/// Marks the start of every frame, so a scan can find frames after damage.
pub(crate) const FRAME_MAGIC: u32 = 0x4C57_4B54; // "TKWL" little-endian
/// magic + payload length + checksum.
pub(crate) const FRAME_HEADER_BYTES: usize = 12;
/// Where the frame keeps its payload length.
const LENGTH_AT: usize = 4;
/// The smallest payload of either layout: a version 2 seal.
const MIN_PAYLOAD_BYTES: usize = 3;
/// Largest payload a frame may carry; bigger batches are refused up front.
pub(crate) const MAX_PAYLOAD_BYTES: usize = 1 << 30;

/// The payload layout of a segment's records, named by the format version
/// in its header. Segments are written in the current one; older ones are
/// still replayed, so a database written by an earlier build opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PayloadFormat {
    /// Version 1: fixed-width numbers.
    V1,
    /// Version 2: variable-length integers, 16 bytes less per put.
    V2,
}

impl PayloadFormat {
    pub(crate) const CURRENT: Self = Self::V2;
    #[cfg(any(test, feature = "sim"))]
    pub(crate) const ALL: [Self; 2] = [Self::V1, Self::V2];

    #[cfg(any(test, feature = "sim"))]
    pub(crate) fn from_version(version: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.version() == version)
    }

    #[cfg(any(test, feature = "sim"))]
    pub(crate) fn version(self) -> u32 {
        match self {
            Self::V1 => 1,
            Self::V2 => 2,
        }
    }
}

/// A decoded record: one `WriteBatch`, its entries numbered from `first_seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub first_seq: u64,
    /// Bytes of this segment known durable when the record was written.
    pub synced_through: u64,
    pub ops: Vec<BatchOp>,
    /// In a link (a record without updates at the end of a finished
    /// segment), the id of the segment that follows.
    pub next_segment: Option<u64>,
}

impl Record {
    /// The record, if its numbers are possible: sequence numbers start at 1
    /// and its entries' numbers must not overflow.
    /// An error is at the start of the payload, where `first_seq` is.
    pub(crate) fn checked(
        first_seq: u64,
        synced_through: u64,
        ops: Vec<BatchOp>,
    ) -> Result<Self, DecodeError> {
        if first_seq == 0 || first_seq.checked_add(ops.len() as u64).is_none() {
            return Err(DecodeError::new(0, "impossible sequence number"));
        }
        Ok(Self {
            first_seq,
            synced_through,
            ops,
            next_segment: None,
        })
    }
}

/// Outcome of reading one frame at some offset. Errors are at offsets
/// within the frame: the field that failed, or 0 for a checksum mismatch
/// (the checksum covers the frame's length and payload).
#[derive(Debug)]
pub(crate) enum Frame {
    /// A valid record and its total encoded length.
    Valid(Record, usize),
    /// Not enough bytes left for the frame the header announces.
    Truncated,
    /// Bad magic, bad length or checksum mismatch.
    Invalid(DecodeError),
    /// The checksum holds but the payload does not parse: never a torn write.
    Malformed(DecodeError),
}

/// Size of a batch's record in the current format, frame header included,
/// counting its sequence numbers at their longest: at least the size
/// `encode` gives it.
pub(crate) fn encoded_len(ops: &[BatchOp]) -> usize {
    FRAME_HEADER_BYTES + payload_v2::max_len(ops)
}

/// Appends one framed record in the current format to `out`.
pub(crate) fn encode(out: &mut Vec<u8>, first_seq: u64, synced_through: u64, ops: &[BatchOp]) {
    encode_as(PayloadFormat::CURRENT, out, first_seq, synced_through, ops);
}

/// Appends a framed link in the current format to `out`: a record
/// without updates naming the segment that follows (`docs/format.md`,
/// "Link").
pub(crate) fn encode_link(out: &mut Vec<u8>, first_seq: u64, synced_through: u64, next: u64) {
    encode_frame(
        PayloadFormat::CURRENT,
        out,
        first_seq,
        synced_through,
        &[],
        Some(next),
    );
}

/// Appends one framed record in `format` to `out`.
pub(crate) fn encode_as(
    format: PayloadFormat,
    out: &mut Vec<u8>,
    first_seq: u64,
    synced_through: u64,
    ops: &[BatchOp],
) {
    encode_frame(format, out, first_seq, synced_through, ops, None);
}

/// Appends `record` framed in `format` (only the current one holds links).
#[cfg(any(test, feature = "sim"))]
pub(crate) fn encode_record(format: PayloadFormat, out: &mut Vec<u8>, record: &Record) {
    encode_frame(
        format,
        out,
        record.first_seq,
        record.synced_through,
        &record.ops,
        record.next_segment,
    );
}

fn encode_frame(
    format: PayloadFormat,
    out: &mut Vec<u8>,
    first_seq: u64,
    synced_through: u64,
    ops: &[BatchOp],
    next_segment: Option<u64>,
) {
    let start = out.len();
    out.extend_from_slice(&FRAME_MAGIC.to_le_bytes());
    out.extend_from_slice(&[0; 8]); // length and checksum, filled below
    match format {
        PayloadFormat::V1 => {
            debug_assert!(next_segment.is_none(), "version 1 holds no link");
            payload_v1::encode(out, first_seq, synced_through, ops);
        }
        PayloadFormat::V2 => payload_v2::encode(out, first_seq, synced_through, ops, next_segment),
    }
    let payload_len = out.len() - start - FRAME_HEADER_BYTES;
    debug_assert!((MIN_PAYLOAD_BYTES..=MAX_PAYLOAD_BYTES).contains(&payload_len));
    out[start + 4..start + 8].copy_from_slice(&(payload_len as u32).to_le_bytes());
    let crc = frame_crc(
        &out[start + 4..start + 8],
        &out[start + FRAME_HEADER_BYTES..],
    );
    out[start + 8..start + 12].copy_from_slice(&crc.to_le_bytes());
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
    (MIN_PAYLOAD_BYTES..=MAX_PAYLOAD_BYTES)
        .contains(&payload_len)
        .then_some(FRAME_HEADER_BYTES + payload_len)
}

/// Reads the frame at the start of `buf`, its payload laid out in `format`.
pub(crate) fn decode(buf: &[u8], format: PayloadFormat) -> Frame {
    if buf.len() < FRAME_HEADER_BYTES {
        return Frame::Truncated;
    }
    if u32_at(buf, 0) != FRAME_MAGIC {
        return Frame::Invalid(DecodeError::new(0, "bad frame magic"));
    }
    let payload_len = u32_at(buf, 4) as usize;
    if !(MIN_PAYLOAD_BYTES..=MAX_PAYLOAD_BYTES).contains(&payload_len) {
        return Frame::Invalid(DecodeError::new(
            LENGTH_AT,
            format!("impossible payload length {payload_len}"),
        ));
    }
    let Some(payload) = buf.get(FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + payload_len) else {
        return Frame::Truncated;
    };
    if frame_crc(&buf[4..8], payload) != u32_at(buf, 8) {
        return Frame::Invalid(DecodeError::new(0, "record checksum mismatch"));
    }
    let decoded = match format {
        PayloadFormat::V1 => payload_v1::decode(payload),
        PayloadFormat::V2 => payload_v2::decode(payload),
    };
    match decoded {
        Ok(record) => Frame::Valid(record, FRAME_HEADER_BYTES + payload_len),
        Err(e) => Frame::Malformed(e.within(FRAME_HEADER_BYTES as u64)),
    }
}

/// A payload being decoded, field by field: an error names the offset, in
/// the payload, of the field that failed.
pub(crate) struct PayloadReader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> PayloadReader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        PayloadReader { buf, at: 0 }
    }

    /// Where the next field starts.
    pub(crate) fn offset(&self) -> usize {
        self.at
    }

    /// Bytes after the fields read so far.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    /// The next `N` bytes of an entry header or the payload header.
    pub(crate) fn fixed<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let bytes = self
            .buf
            .get(self.at..self.at + N)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| DecodeError::new(self.at, "entry header cut short"))?;
        self.at += N;
        Ok(bytes)
    }

    /// The next LEB128 integer (`util::varint`).
    pub(crate) fn varint(&mut self) -> Result<u64, DecodeError> {
        let (value, used) =
            varint::get(&self.buf[self.at..]).map_err(|what| DecodeError::new(self.at, what))?;
        self.at += used;
        Ok(value)
    }

    /// A key or value of `len` bytes, copied out.
    pub(crate) fn field(&mut self, len: usize) -> Result<Bytes, DecodeError> {
        let field = self
            .buf
            .get(self.at..)
            .and_then(|rest| rest.get(..len))
            .map(Bytes::copy_from_slice)
            .ok_or_else(|| DecodeError::new(self.at, "entry runs past payload"))?;
        self.at += len;
        Ok(field)
    }

    /// Checks that the payload ends after the last entry.
    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        if self.at != self.buf.len() {
            return Err(DecodeError::new(self.at, "trailing bytes after entries"));
        }
        Ok(())
    }
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::Value;

    fn ops() -> Vec<BatchOp> {
        vec![
            BatchOp::stored(
                Bytes::from_static(b"alpha"),
                Some(Value::Inline(Bytes::from_static(b"one"))),
            ),
            BatchOp::stored(Bytes::from_static(b"beta"), None),
            BatchOp::stored(
                Bytes::from_static(b"gamma"),
                Some(Value::Inline(Bytes::new())),
            ),
        ]
    }

    fn encoded(format: PayloadFormat, first_seq: u64, ops: &[BatchOp]) -> Vec<u8> {
        let mut buf = Vec::new();
        encode_as(format, &mut buf, first_seq, 7, ops);
        buf
    }

    #[test]
    fn round_trip_in_each_format() {
        for format in PayloadFormat::ALL {
            let buf = encoded(format, 42, &ops());
            match decode(&buf, format) {
                Frame::Valid(r, n) => {
                    assert_eq!(n, buf.len());
                    assert_eq!((r.first_seq, r.synced_through), (42, 7));
                    assert_eq!(r.ops, ops());
                }
                other => panic!("{format:?}: unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn sizes_match_the_documented_layouts() {
        let put = |key_len, value_len| {
            vec![BatchOp::stored(
                Bytes::from(vec![1; key_len]),
                Some(Value::Inline(Bytes::from(vec![2; value_len]))),
            )]
        };
        // docs/format.md: 12 frame + 20 header + 7 entry header + 4 + 10.
        assert_eq!(encoded(PayloadFormat::V1, 1, &put(4, 10)).len(), 53);
        // 12 frame + 3 header (seq 1, synced 7, count 1) + 2 entry header.
        assert_eq!(encoded(PayloadFormat::V2, 1, &put(4, 10)).len(), 31);
        // The benchmark's put at sequence number 10 million: a 4-byte
        // sequence number, 23 bytes beside the key and value.
        let mut buf = Vec::new();
        encode(&mut buf, 10_000_000, 60 << 20, &put(8, 120));
        assert_eq!(buf.len() - 128, 23);
        // `encoded_len` bounds every encoding, at the longest numbers too.
        let mut longest = Vec::new();
        encode(&mut longest, u64::MAX - 1, u64::MAX, &put(512, 1 << 18));
        assert_eq!(longest.len(), encoded_len(&put(512, 1 << 18)));
        assert!(buf.len() <= encoded_len(&put(8, 120)));
    }

    #[test]
    fn a_frame_is_only_valid_in_its_own_format() {
        for format in PayloadFormat::ALL {
            let buf = encoded(format, 42, &ops());
            let other = PayloadFormat::ALL.into_iter().find(|f| *f != format);
            let other = other.expect("two formats");
            assert!(
                matches!(decode(&buf, other), Frame::Malformed(_)),
                "{format:?} frame read as {other:?}"
            );
        }
    }

    #[test]
    fn every_truncation_is_detected() {
        for format in PayloadFormat::ALL {
            let buf = encoded(format, 1, &ops());
            for len in 0..buf.len() {
                assert!(
                    matches!(decode(&buf[..len], format), Frame::Truncated),
                    "{format:?} len {len}"
                );
            }
        }
    }

    #[test]
    fn every_bit_flip_is_detected() {
        for format in PayloadFormat::ALL {
            let buf = encoded(format, 1, &ops());
            for bit in 0..buf.len() * 8 {
                let mut damaged = buf.clone();
                damaged[bit / 8] ^= 1 << (bit % 8);
                assert!(
                    !matches!(decode(&damaged, format), Frame::Valid(..)),
                    "{format:?} bit {bit} went unnoticed"
                );
            }
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
            for format in PayloadFormat::ALL {
                let _ = decode(&noise, format);
                let mut framed = encoded(format, 9, &ops());
                let end = framed.len().min(cut.max(1));
                for (i, b) in noise.iter().enumerate() {
                    if let Some(byte) = framed.get_mut(at + i) {
                        *byte ^= b;
                    }
                }
                let _ = decode(&framed[..end], format);
            }
        }

        /// Any batch round-trips in the current format, and within its bound.
        #[test]
        fn arbitrary_batches_round_trip(
            first_seq in 1u64..u64::MAX / 2,
            synced_through: u64,
            entries in proptest::collection::vec(
                (
                    proptest::collection::vec(proptest::prelude::any::<u8>(), 1..600),
                    proptest::option::of(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)),
                ),
                0..20,
            ),
        ) {
            let ops: Vec<BatchOp> = entries
                .into_iter()
                .map(|(mut key, value)| {
                    key.truncate(crate::MAX_KEY_SIZE);
                    BatchOp::stored(key.into(), value.map(|v| Value::Inline(v.into())))
                })
                .collect();
            let mut buf = Vec::new();
            encode(&mut buf, first_seq, synced_through, &ops);
            proptest::prop_assert!(buf.len() <= encoded_len(&ops));
            match decode(&buf, PayloadFormat::CURRENT) {
                Frame::Valid(r, n) => {
                    proptest::prop_assert_eq!(n, buf.len());
                    proptest::prop_assert_eq!(r, Record { first_seq, synced_through, ops, next_segment: None });
                }
                other => proptest::prop_assert!(false, "unexpected {:?}", other),
            }
        }
    }

    /// Errors are at the offset, in the frame, of the field that failed,
    /// or at 0 where a checksum fails (it covers the whole frame).
    #[test]
    fn errors_name_the_field_that_failed() {
        let fix_crc = |buf: &mut Vec<u8>| {
            let crc = frame_crc(&buf[4..8], &buf[FRAME_HEADER_BYTES..]);
            buf[8..12].copy_from_slice(&crc.to_le_bytes());
        };
        let error = |buf: &[u8], format| match decode(buf, format) {
            Frame::Invalid(e) | Frame::Malformed(e) => e.offset,
            other => panic!("{format:?}: {other:?}"),
        };
        for format in PayloadFormat::ALL {
            let good = encoded(format, 1, &ops()[..1]);
            let mut bad = good.clone();
            bad[1] ^= 1;
            assert_eq!(error(&bad, format), 0, "magic");
            let mut bad = good.clone();
            bad[4..8].copy_from_slice(&[0xFF; 4]);
            assert_eq!(error(&bad, format), 4, "payload length");
            let mut bad = good.clone();
            *bad.last_mut().expect("a payload") ^= 1;
            assert_eq!(error(&bad, format), 0, "checksum");
        }
        // Version 2: first_seq, synced_through and count take a byte each,
        // the entry's tag follows. A tag of 1 marks a value pointer's put
        // (0 is a range deletion's): before a delete's tag, the error is
        // at the marker.
        let mut bad = encoded(PayloadFormat::V2, 1, &ops()[..1]);
        bad[15] = 1;
        bad[16] = 5 << 1;
        fix_crc(&mut bad);
        assert_eq!(
            error(&bad, PayloadFormat::V2),
            15,
            "a pointer marker before a delete"
        );
        // Version 1: a 20-byte payload header, then the entry's kind.
        let mut bad = encoded(PayloadFormat::V1, 1, &ops()[..1]);
        bad[32] = 9;
        fix_crc(&mut bad);
        assert_eq!(error(&bad, PayloadFormat::V1), 32, "entry kind");
        // A payload that ends before the entry's value does.
        let mut bad = encoded(PayloadFormat::V2, 1, &ops()[..1]);
        bad.pop();
        let len = (bad.len() - FRAME_HEADER_BYTES) as u32;
        bad[4..8].copy_from_slice(&len.to_le_bytes());
        fix_crc(&mut bad);
        // Tag, value length and the 5-byte key "alpha" come before it.
        assert_eq!(error(&bad, PayloadFormat::V2), 15 + 2 + 5, "value");
    }

    #[test]
    fn zeros_are_not_a_frame() {
        for format in PayloadFormat::ALL {
            assert!(matches!(decode(&[0u8; 64], format), Frame::Invalid(_)));
        }
    }

    /// A link round-trips, is only valid in the layout that has links, and
    /// names a segment other than 0; every flipped bit is caught.
    #[test]
    fn links_round_trip_and_are_checked() {
        let mut buf = Vec::new();
        encode_link(&mut buf, 9, 63, 12_345);
        match decode(&buf, PayloadFormat::CURRENT) {
            Frame::Valid(r, n) => {
                assert_eq!(n, buf.len());
                assert_eq!((r.first_seq, r.synced_through), (9, 63));
                assert!(r.ops.is_empty());
                assert_eq!(r.next_segment, Some(12_345));
                let mut again = Vec::new();
                encode_record(PayloadFormat::CURRENT, &mut again, &r);
                assert_eq!(again, buf);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(
            decode(&buf, PayloadFormat::V1),
            Frame::Malformed(_)
        ));
        for bit in 0..buf.len() * 8 {
            let mut damaged = buf.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(!matches!(
                decode(&damaged, PayloadFormat::CURRENT),
                Frame::Valid(..)
            ));
        }
        let mut zero = Vec::new();
        encode_link(&mut zero, 9, 63, 0);
        assert!(matches!(
            decode(&zero, PayloadFormat::CURRENT),
            Frame::Malformed(_)
        ));
        // A record with updates carries no link: a trailing number is
        // trailing bytes.
        let mut with_ops = Vec::new();
        encode_frame(PayloadFormat::V2, &mut with_ops, 1, 0, &ops(), None);
        let mut payload = with_ops[FRAME_HEADER_BYTES..].to_vec();
        payload.push(5);
        let mut framed = FRAME_MAGIC.to_le_bytes().to_vec();
        framed.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        framed.extend_from_slice(&frame_crc(&framed[4..8], &payload).to_le_bytes());
        framed.extend_from_slice(&payload);
        assert!(matches!(
            decode(&framed, PayloadFormat::V2),
            Frame::Malformed(_)
        ));
    }
}
