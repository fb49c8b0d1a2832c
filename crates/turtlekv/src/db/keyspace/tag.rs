//! Where a keyspace's keys lie in the one key order of the WAL, the
//! MemTables and the tree: behind a tag that names the keyspace
//! (`docs/format.md`, "Keyspaces").

use std::ops::Bound;

use bytes::{BufMut, Bytes, BytesMut};

use crate::key::MAX_TAG_BYTES;

/// A keyspace's number; never reused, so that keys a dropped keyspace left
/// behind are out of every live keyspace's range.
pub(crate) type KeyspaceId = u32;

/// The keyspace of `Db`'s own reads and writes.
pub(crate) const DEFAULT_ID: KeyspaceId = 0;
/// The catalog: which names map to which ids, and drops not yet cleaned.
pub(crate) const CATALOG_ID: KeyspaceId = 1;
/// The first id a named keyspace gets.
pub(crate) const FIRST_NAMED_ID: KeyspaceId = 2;
/// Ids below this have a one-byte tag; the rest `0xF0` and four bytes.
const ONE_BYTE_IDS: KeyspaceId = 0xF0;
/// The last id a keyspace may get: its range's end is the next id's tag.
pub(crate) const MAX_ID: KeyspaceId = KeyspaceId::MAX - 1;

/// The bytes before every key of one keyspace. Tags form a prefix-free
/// code whose order is the ids' order, so each keyspace's keys are one
/// contiguous range. A database an earlier build created stores bare keys:
/// its default keyspace has the empty tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tag {
    bytes: [u8; MAX_TAG_BYTES],
    len: u8,
}

impl Tag {
    /// The empty tag of a database without keyspaces.
    pub const BARE: Tag = Tag {
        bytes: [0; MAX_TAG_BYTES],
        len: 0,
    };

    pub fn of(id: KeyspaceId) -> Tag {
        let mut bytes = [0; MAX_TAG_BYTES];
        if id < ONE_BYTE_IDS {
            bytes[0] = id as u8;
            return Tag { bytes, len: 1 };
        }
        bytes[0] = ONE_BYTE_IDS as u8;
        bytes[1..].copy_from_slice(&id.to_be_bytes());
        Tag { bytes, len: 5 }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// `key` behind this tag, in a buffer of its own.
    pub fn stored_key(&self, key: &[u8]) -> Bytes {
        let mut out = BytesMut::with_capacity(self.len() + key.len());
        out.put_slice(self.as_bytes());
        out.put_slice(key);
        out.freeze()
    }

    /// Runs `read` on `key` behind this tag, built on the stack.
    #[inline]
    pub fn with_stored_key<T>(&self, key: &[u8], read: impl FnOnce(&[u8]) -> T) -> T {
        if self.len == 0 {
            return read(key);
        }
        let mut buf = [0u8; crate::key::MAX_STORED_KEY_BYTES];
        let len = self.len() + key.len();
        if len > buf.len() {
            // Validated callers never get here; stay correct anyway.
            return read(&self.stored_key(key));
        }
        buf[..self.len()].copy_from_slice(self.as_bytes());
        buf[self.len()..len].copy_from_slice(key);
        read(&buf[..len])
    }

    /// The stored-key range of the user-key range `(lower, upper)`: each
    /// bound behind the tag, an open end closed at the keyspace's own end.
    pub fn bounds(&self, lower: Bound<Bytes>, upper: Bound<Bytes>) -> (Bound<Bytes>, Bound<Bytes>) {
        if self.len == 0 {
            return (lower, upper);
        }
        let lower = match lower {
            Bound::Included(k) => Bound::Included(self.stored_key(&k)),
            Bound::Excluded(k) => Bound::Excluded(self.stored_key(&k)),
            Bound::Unbounded => Bound::Included(Bytes::copy_from_slice(self.as_bytes())),
        };
        let upper = match upper {
            Bound::Included(k) => Bound::Included(self.stored_key(&k)),
            Bound::Excluded(k) => Bound::Excluded(self.stored_key(&k)),
            Bound::Unbounded => self.end(),
        };
        (lower, upper)
    }

    /// The exclusive end of this tag's keys: the next id's tag.
    fn end(&self) -> Bound<Bytes> {
        let id = self.id();
        if id >= MAX_ID {
            // No keyspace gets an id past `MAX_ID`, so nothing lies above.
            return Bound::Unbounded;
        }
        Bound::Excluded(Bytes::copy_from_slice(Tag::of(id + 1).as_bytes()))
    }

    fn id(&self) -> KeyspaceId {
        match self.len {
            1 => KeyspaceId::from(self.bytes[0]),
            _ => KeyspaceId::from_be_bytes(self.bytes[1..5].try_into().expect("four bytes")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_sort_as_their_ids_and_no_tag_prefixes_another() {
        let ids = [
            0,
            1,
            2,
            0xEE,
            0xEF,
            0xF0,
            0xF1,
            0x1_0000,
            0xFFFF_FF00,
            MAX_ID,
        ];
        for pair in ids.windows(2) {
            let (a, b) = (Tag::of(pair[0]), Tag::of(pair[1]));
            assert!(a.as_bytes() < b.as_bytes(), "{pair:?}");
            assert!(!b.as_bytes().starts_with(a.as_bytes()), "{pair:?}");
            // Every key of `a` sorts below every key of `b`.
            let last_of_a = [a.as_bytes(), &[0xFF; 600][..]].concat();
            assert!(last_of_a.as_slice() < b.as_bytes());
        }
        for id in ids {
            assert_eq!(Tag::of(id).id(), id);
        }
    }

    #[test]
    fn open_ends_close_at_the_next_tag() {
        let tag = Tag::of(0xEF);
        let (lower, upper) = tag.bounds(Bound::Unbounded, Bound::Unbounded);
        assert_eq!(lower, Bound::Included(Bytes::from_static(&[0xEF])));
        assert_eq!(
            upper,
            Bound::Excluded(Bytes::from_static(&[0xF0, 0, 0, 0, 0xF0]))
        );
        let (_, upper) = Tag::of(0xF0).bounds(Bound::Unbounded, Bound::Unbounded);
        assert_eq!(
            upper,
            Bound::Excluded(Bytes::from_static(&[0xF0, 0, 0, 0, 0xF1]))
        );
        let bare = Tag::BARE.bounds(Bound::Unbounded, Bound::Unbounded);
        assert_eq!(bare, (Bound::Unbounded, Bound::Unbounded));
        Tag::of(3).with_stored_key(b"k", |k| assert_eq!(k, b"\x03k"));
    }
}
