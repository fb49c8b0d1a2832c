//! One value file's bytes: its header and its records (`docs/format.md`,
//! "Value files").

use crate::error::DecodeError;
use crate::util::varint;

pub(super) const HEADER_BYTES: u64 = 48;
const MAGIC: &[u8; 4] = b"TKVF";
const FORMAT_VERSION: u32 = 1;
/// Bytes of a record before its key: the checksum and, at most, two
/// LEB128 lengths.
pub(super) const MAX_RECORD_HEAD_BYTES: usize = 4 + 2 * varint::MAX_LEN_BYTES;

/// The header of file `file_id` of database `identity`.
pub(super) fn encode_header(file_id: u64, identity: u64) -> [u8; HEADER_BYTES as usize] {
    let mut h = [0u8; HEADER_BYTES as usize];
    h[0..4].copy_from_slice(MAGIC);
    h[4..8].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[8..16].copy_from_slice(&file_id.to_le_bytes());
    h[16..24].copy_from_slice(&identity.to_le_bytes());
    let crc = crc32c::crc32c(&h[..44]);
    h[44..48].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Checks a header read from file `file_id` of database `identity`.
pub(super) fn check_header(h: &[u8], file_id: u64, identity: u64) -> Result<(), DecodeError> {
    if h.len() < HEADER_BYTES as usize {
        return Err(DecodeError::new(h.len(), "value file header cut short"));
    }
    let stored_crc = u32::from_le_bytes(h[44..48].try_into().expect("4 bytes"));
    if crc32c::crc32c(&h[..44]) != stored_crc {
        return Err(DecodeError::new(0, "value file header checksum mismatch"));
    }
    if &h[0..4] != MAGIC {
        return Err(DecodeError::new(0, "not a value file (bad magic)"));
    }
    let le64 = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().expect("8 bytes"));
    if u32::from_le_bytes(h[4..8].try_into().expect("4 bytes")) != FORMAT_VERSION {
        return Err(DecodeError::new(4, "value file format version not read"));
    }
    if le64(8) != file_id {
        return Err(DecodeError::new(8, "value file id is not the file's name"));
    }
    if le64(16) != identity {
        return Err(DecodeError::new(
            16,
            format!(
                "value file belongs to database {:#018x}, not {identity:#018x}",
                le64(16)
            ),
        ));
    }
    Ok(())
}

/// The head of a record (checksum left zero) for these lengths.
pub(super) fn record_head(key_len: usize, value_len: u64) -> Vec<u8> {
    let mut head = Vec::with_capacity(MAX_RECORD_HEAD_BYTES);
    head.extend_from_slice(&[0; 4]);
    varint::put(&mut head, key_len as u64);
    varint::put(&mut head, value_len);
    head
}

/// Bytes a record of these lengths takes.
pub(crate) fn record_len(key_len: usize, value_len: u64) -> u64 {
    (4 + varint::len_bytes(key_len as u64) + varint::len_bytes(value_len) + key_len) as u64
        + value_len
}

/// The checksum of a record at `offset` of file `file_id`: over the place
/// and every byte after the checksum field (`parts`, in order). Not
/// seeded with the database's identity, so a backup's copy of the file
/// keeps its records (and the pointers to them) as they are; the header
/// binds the file to its database.
pub(super) fn record_crc(file_id: u64, offset: u64, parts: &[&[u8]]) -> u32 {
    let mut crc = crc32c::crc32c(&file_id.to_le_bytes());
    crc = crc32c::crc32c_append(crc, &offset.to_le_bytes());
    for part in parts {
        crc = crc32c::crc32c_append(crc, part);
    }
    crc
}

/// Where a whole record's fields lie, once checked: its value starts at
/// `value_at`.
pub(super) struct CheckedRecord {
    pub crc: u32,
    pub value_at: usize,
}

/// Checks that `record` (read at `offset` of file `file_id`) is whole, of
/// `key` and a value of `value_len` bytes, and verifies its checksum. An
/// error's offset is within the record.
pub(super) fn check_record(
    record: &[u8],
    file_id: u64,
    offset: u64,
    key: Option<&[u8]>,
    value_len: u64,
) -> Result<CheckedRecord, DecodeError> {
    let (key_len, value_at) = parse_lengths(record, value_len)?;
    if key.is_some_and(|k| k.len() != key_len) {
        return Err(DecodeError::new(4, "value record holds another key"));
    }
    if record.len() as u64 != (value_at as u64) + value_len {
        return Err(DecodeError::new(0, "value record cut short"));
    }
    let stored = u32::from_le_bytes(record[..4].try_into().expect("4 bytes"));
    if record_crc(file_id, offset, &[&record[4..]]) != stored {
        return Err(DecodeError::new(0, "value record checksum mismatch"));
    }
    let key_at = value_at - key_len;
    if key.is_some_and(|k| k != &record[key_at..value_at]) {
        return Err(DecodeError::new(key_at, "value record holds another key"));
    }
    Ok(CheckedRecord {
        crc: stored,
        value_at,
    })
}

/// A record's key length and the offset of its value, from its head;
/// its value length must be `value_len`.
pub(super) fn parse_lengths(record: &[u8], value_len: u64) -> Result<(usize, usize), DecodeError> {
    let (key_len, value_len_found, head_len) = parse_head(record)?;
    if value_len_found != value_len {
        return Err(DecodeError::new(4, "value record of another length"));
    }
    Ok((key_len, head_len + key_len))
}

/// A record head's key length, value length and its own length.
pub(super) fn parse_head(record: &[u8]) -> Result<(usize, u64, usize), DecodeError> {
    let mut at = 4;
    let mut number = |what: &'static str| {
        let (n, len) = varint::get(record.get(at..).unwrap_or_default())
            .map_err(|_| DecodeError::new(at, what))?;
        at += len;
        Ok::<u64, DecodeError>(n)
    };
    let key_len = number("value record: bad key length")?;
    let value_len = number("value record: bad value length")?;
    if key_len == 0 || key_len > crate::key::MAX_STORED_KEY_BYTES as u64 {
        return Err(DecodeError::new(4, "value record: key length out of range"));
    }
    if value_len > crate::MAX_VALUE_SIZE as u64 {
        return Err(DecodeError::new(
            4,
            "value record: value length out of range",
        ));
    }
    Ok((key_len as usize, value_len, at))
}
