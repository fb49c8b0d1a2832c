//! Fuzzing entry point for WAL record frames (see `crate::fuzz`).

use super::record::{self, FRAME_HEADER_BYTES, Frame, PayloadFormat};

/// Decodes the frame at the start of `bytes` in every payload format a
/// segment may hold. A frame valid in a format must re-encode in it to
/// exactly the bytes it was read from; `Ok` gives the entries of the
/// current format's decoding, else of an older one's; `Err` when neither
/// decodes.
pub(crate) fn decode_record(bytes: &[u8]) -> Result<usize, String> {
    let mut outcome = Err(String::new());
    for format in PayloadFormat::ALL {
        match (decode_as(bytes, format), &outcome) {
            (Ok(count), _) => outcome = Ok(count),
            (Err(why), Err(_)) => outcome = Err(why),
            (Err(_), Ok(_)) => {}
        }
    }
    outcome
}

fn decode_as(bytes: &[u8], format: PayloadFormat) -> Result<usize, String> {
    match record::decode(bytes, format) {
        Frame::Valid(rec, len) => {
            let mut again = Vec::with_capacity(len);
            record::encode_record(format, &mut again, &rec);
            assert_eq!(
                &again[..],
                &bytes[..len],
                "a valid WAL frame must re-encode to its own bytes ({format:?})"
            );
            Ok(rec.ops.len())
        }
        Frame::Truncated => Err("truncated".into()),
        Frame::Invalid(why) | Frame::Malformed(why) => Err(why.into()),
    }
}

/// `bytes` with the frame checksum recomputed, so that a fuzzer reaches
/// the payload parser instead of stopping at the checksum.
pub(crate) fn with_valid_checksum(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if out.len() < FRAME_HEADER_BYTES {
        return out;
    }
    let payload_len = u32::from_le_bytes(out[4..8].try_into().expect("4 bytes")) as usize;
    let end = FRAME_HEADER_BYTES
        .saturating_add(payload_len)
        .min(out.len());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[4..8]), &out[FRAME_HEADER_BYTES..end]);
    out[8..12].copy_from_slice(&crc.to_le_bytes());
    out
}

/// A valid encoded frame holding `ops` (key, optional value) in the
/// payload format of `version`, for seeds.
///
/// # Panics
/// If no payload format has that version.
pub(crate) fn encode_record(
    version: u32,
    first_seq: u64,
    ops: &[(Vec<u8>, Option<Vec<u8>>)],
) -> Vec<u8> {
    let format = PayloadFormat::from_version(version).expect("a WAL format version");
    let ops: Vec<_> = ops
        .iter()
        .map(|(k, v)| {
            crate::batch::BatchOp::stored(
                bytes::Bytes::copy_from_slice(k),
                v.as_deref()
                    .map(|v| crate::values::Value::Inline(bytes::Bytes::copy_from_slice(v))),
            )
        })
        .collect();
    let mut out = Vec::new();
    record::encode_as(format, &mut out, first_seq, 0, &ops);
    out
}
