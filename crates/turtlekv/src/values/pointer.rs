//! The value pointer a separated put stores in place of its value
//! (`docs/format.md`, "Value files").

use bytes::Bytes;

use crate::error::DecodeError;
use crate::util::varint;

/// Where a separated value lies: its record in a value file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ValuePointer {
    pub file_id: u64,
    /// Offset of the record in the file.
    pub offset: u64,
    pub value_len: u64,
    /// The record's checksum.
    pub crc: u32,
}

impl ValuePointer {
    /// The encoded pointer.
    pub(crate) fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(3 * varint::MAX_LEN_BYTES + 4);
        varint::put(&mut out, self.file_id);
        varint::put(&mut out, self.offset);
        varint::put(&mut out, self.value_len);
        out.extend_from_slice(&self.crc.to_le_bytes());
        Bytes::from(out)
    }

    /// Decodes a pointer; an error's offset is within `bytes`.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut at = 0;
        let mut number = |what: &'static str| {
            let (n, len) = varint::get(&bytes[at..]).map_err(|_| DecodeError::new(at, what))?;
            at += len;
            Ok::<u64, DecodeError>(n)
        };
        let file_id = number("value pointer: bad file id")?;
        let offset = number("value pointer: bad offset")?;
        let value_len = number("value pointer: bad value length")?;
        let crc_bytes: [u8; 4] = bytes
            .get(at..)
            .and_then(|rest| rest.try_into().ok())
            .ok_or_else(|| DecodeError::new(at, "value pointer: bad length"))?;
        Ok(ValuePointer {
            file_id,
            offset,
            value_len,
            crc: u32::from_le_bytes(crc_bytes),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_round_trip_and_damage_is_refused() {
        let p = ValuePointer {
            file_id: 300,
            offset: 1 << 33,
            value_len: 1 << 30,
            crc: 0xdead_beef,
        };
        let bytes = p.encode();
        assert_eq!(ValuePointer::decode(&bytes).unwrap(), p);
        assert!(ValuePointer::decode(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert!(ValuePointer::decode(&longer).is_err());
        assert!(ValuePointer::decode(&[]).is_err());
    }
}
