//! Keys and values of the stress workload. Every value names its key and
//! its version and is otherwise derived from them, so a reader can tell
//! whether a value is one that some write produced.

/// One key's state: the version of its last write, and whether that write
/// was a put (`present`) or a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Entry {
    pub version: u32,
    pub present: bool,
}

impl Entry {
    /// Packs into the 4 bytes of the expected-state file.
    pub fn to_raw(self) -> u32 {
        self.version << 1 | u32::from(self.present)
    }

    pub fn from_raw(raw: u32) -> Entry {
        Entry {
            version: raw >> 1,
            present: raw & 1 == 1,
        }
    }

    /// Whether the database holding `found` (its value's version, or
    /// `None` for no value) is in this state.
    pub fn matches(self, found: Option<u32>) -> bool {
        match found {
            Some(v) => self.present && v == self.version,
            None => !self.present,
        }
    }
}

pub fn key(id: u32) -> Vec<u8> {
    format!("key{id:08}").into_bytes()
}

/// The key id of a stress key, if it is one.
pub fn key_id(key: &[u8]) -> Option<u32> {
    let digits = key.strip_prefix(b"key")?;
    if digits.len() != 8 {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The value version `version` of key `id` holds: 8 bytes naming both,
/// then a filler whose length and bytes depend on them (mostly under
/// 400 bytes, one in 64 about 8 KiB, so leaves fill unevenly).
pub fn value(id: u32, version: u32) -> Vec<u8> {
    let h = mix(u64::from(id) << 32 | u64::from(version));
    let filler = if h.is_multiple_of(64) {
        8192 + (h >> 8) as usize % 1024
    } else {
        (h >> 8) as usize % 400
    };
    let mut v = Vec::with_capacity(8 + filler);
    v.extend_from_slice(&id.to_le_bytes());
    v.extend_from_slice(&version.to_le_bytes());
    v.extend((0..filler).map(|i| (h >> (i % 7 * 8)) as u8 ^ i as u8));
    v
}

/// The version a value holds, if it is exactly a value some write of key
/// `id` produced; `Err` describes what is wrong with it.
pub fn decode_value(id: u32, bytes: &[u8]) -> Result<u32, String> {
    if bytes.len() < 8 {
        return Err(format!("value of {} bytes is too short", bytes.len()));
    }
    let named = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"));
    let version = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
    if named != id {
        return Err(format!("value names key {named}"));
    }
    if bytes != value(id, version).as_slice() {
        return Err(format!("value of version {version} has wrong bytes"));
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_reject_damage() {
        for (id, version) in [(0, 1), (7, 100), (9999, 65_000)] {
            let mut v = value(id, version);
            assert_eq!(decode_value(id, &v), Ok(version));
            assert!(decode_value(id + 1, &v).is_err());
            let last = v.len() - 1;
            v[last] ^= 1;
            assert!(decode_value(id, &v).is_err() || v.len() == 8);
        }
        assert_eq!(key_id(&key(42)), Some(42));
        assert_eq!(key_id(b"other"), None);
        let e = Entry {
            version: 5,
            present: true,
        };
        assert_eq!(Entry::from_raw(e.to_raw()), e);
        assert!(e.matches(Some(5)) && !e.matches(Some(4)) && !e.matches(None));
    }
}
