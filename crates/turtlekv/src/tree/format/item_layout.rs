//! How leaf pages lay out an item's op and lengths, in each format version
//! (`docs/format.md`, "Items"): sizes, encoding, and parsing of the
//! header before an item's key and value.

use super::item::Item;
use crate::util::varint;

/// The fewest bytes an item takes in either layout: a tombstone's
/// one-byte tag and one-byte key in version 2.
pub(crate) const MIN_ITEM_BYTES: usize = 2;
/// Low bit of a version 2 item's tag: set for a put, clear for a tombstone.
const TAG_PUT: u64 = 1;
/// The byte before a separated put's own tag (a put with an empty key,
/// which no item has otherwise): its value is a value pointer.
const TAG_POINTER: u8 = 1;

/// What an item's header says: where its key starts, the key's length,
/// the value's (`None`: a tombstone), and whether the value is a value
/// pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ItemHeader {
    pub key_at: usize,
    pub key_len: usize,
    pub value_len: Option<usize>,
    pub pointer: bool,
}

/// How a leaf page lays out its items, which the format version in the
/// page's header selects (`docs/format.md`, "Items"; `leaf::version_format`). Pages are written in the
/// current layout; older ones are still read, so a database written by
/// an earlier build opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ItemLayout {
    /// Version 1: a 7-byte header of op, key length and value length.
    V1,
    /// Version 2: LEB128 tag (key length and op) and value length, 2 bytes
    /// for short keys and values.
    #[default]
    V2,
    /// Version 2 items, and separated puts: a `TAG_POINTER` byte before
    /// the put's tag (pages of version 4). `V2` writes such items too, as
    /// the page's version is chosen from its items, but reads refuse them.
    Separated,
}

impl ItemLayout {
    pub(crate) const CURRENT: Self = Self::V2;
    #[cfg(test)]
    pub(crate) const ALL: [Self; 3] = [Self::V1, Self::V2, Self::Separated];

    /// Bytes `item` takes.
    #[inline]
    pub(crate) fn len_of(self, item: &Item) -> usize {
        let pointer = item.value.as_ref().is_some_and(|v| v.is_pointer());
        usize::from(pointer && self != Self::V1)
            + self.item_len(item.key.len(), item.value.as_ref().map(|v| v.stored_len()))
    }

    /// Bytes an item of these lengths takes (`value_len` `None`: tombstone).
    #[inline]
    pub(crate) fn item_len(self, key_len: usize, value_len: Option<usize>) -> usize {
        let value = value_len.unwrap_or(0);
        match self {
            Self::V1 => 7 + key_len + value,
            Self::V2 | Self::Separated => {
                // Leaf sizing asks this for every item of every cut: plain
                // comparisons for the usual lengths.
                let tag = if key_len < 64 {
                    1
                } else {
                    varint::len_bytes((key_len as u64) << 1 | TAG_PUT)
                };
                let value_header = match value_len {
                    None => 0,
                    Some(v) if v < 0x80 => 1,
                    Some(v) if v < 0x4000 => 2,
                    Some(v) => varint::len_bytes(v as u64),
                };
                tag + key_len + value_header + value
            }
        }
    }

    /// Appends `item`'s encoding to `out`.
    pub(crate) fn encode(self, item: &Item, out: &mut Vec<u8>) {
        let value = item.value.as_ref().map(|v| &v.stored()[..]);
        match self {
            Self::V1 => {
                debug_assert!(!item.value.as_ref().is_some_and(|v| v.is_pointer()));
                out.push(u8::from(value.is_some()));
                out.extend_from_slice(&(item.key.len() as u16).to_le_bytes());
                out.extend_from_slice(&(value.map_or(0, <[u8]>::len) as u32).to_le_bytes());
            }
            Self::V2 | Self::Separated => {
                if item.value.as_ref().is_some_and(|v| v.is_pointer()) {
                    out.push(TAG_POINTER);
                }
                let op = if value.is_some() { TAG_PUT } else { 0 };
                varint::put(out, (item.key.len() as u64) << 1 | op);
                if let Some(v) = value {
                    varint::put(out, v.len() as u64);
                }
            }
        }
        out.extend_from_slice(&item.key);
        out.extend_from_slice(value.unwrap_or_default());
    }

    /// What the header of the item at `at` of `bytes` says; `None` if it
    /// is malformed or cut short. Lengths are not checked against `bytes`.
    #[inline]
    pub(crate) fn parse_header(self, bytes: &[u8], at: usize) -> Option<ItemHeader> {
        if self != Self::V1 {
            // Keys under 64 bytes and values under 128 take one byte each:
            // read those without the general decoder (a lookup parses
            // every item before its key in the chunk).
            let tag = *bytes.get(at)?;
            if tag < 0x80 && tag != TAG_POINTER {
                let key_len = usize::from(tag >> 1);
                if u64::from(tag) & TAG_PUT == 0 {
                    return Some(ItemHeader {
                        key_at: at + 1,
                        key_len,
                        value_len: None,
                        pointer: false,
                    });
                }
                let value_len = *bytes.get(at + 1)?;
                if value_len < 0x80 {
                    return Some(ItemHeader {
                        key_at: at + 2,
                        key_len,
                        value_len: Some(usize::from(value_len)),
                        pointer: false,
                    });
                }
            }
        }
        self.parse_header_in_general(bytes, at)
    }

    /// `parse_header` for every item: out of line, so that the common
    /// case above stays small enough to inline into the item walks.
    #[inline(never)]
    fn parse_header_in_general(self, bytes: &[u8], at: usize) -> Option<ItemHeader> {
        match self {
            Self::V1 => {
                let fixed = bytes.get(at..at.checked_add(7)?)?;
                let key_len = u16::from_le_bytes([fixed[1], fixed[2]]) as usize;
                let value_len = u32::from_le_bytes(fixed[3..7].try_into().ok()?) as usize;
                let value_len = match fixed[0] {
                    1 => Some(value_len),
                    0 if value_len == 0 => None,
                    _ => return None,
                };
                Some(ItemHeader {
                    key_at: at + 7,
                    key_len,
                    value_len,
                    pointer: false,
                })
            }
            Self::V2 | Self::Separated => {
                let pointer = *bytes.get(at)? == TAG_POINTER;
                if pointer && self != Self::Separated {
                    return None;
                }
                let at = at + usize::from(pointer);
                let (tag, tag_len) = varint::get(bytes.get(at..)?).ok()?;
                let key_len = usize::try_from(tag >> 1).ok()?;
                if tag & TAG_PUT == 0 {
                    return (!pointer).then_some(ItemHeader {
                        key_at: at + tag_len,
                        key_len,
                        value_len: None,
                        pointer: false,
                    });
                }
                let (value_len, len) = varint::get(bytes.get(at + tag_len..)?).ok()?;
                let value_len = usize::try_from(value_len).ok()?;
                Some(ItemHeader {
                    key_at: at + tag_len + len,
                    key_len,
                    value_len: Some(value_len),
                    pointer,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::values::Value;

    /// Every length at a boundary of the short forms, in both layouts:
    /// `item_len` is what `encode` writes, and `parse_header` reads back
    /// the lengths from behind any prefix.
    #[test]
    fn lengths_round_trip_at_every_boundary() {
        let key_lens = [1, 63, 64, 65, 200, crate::MAX_KEY_SIZE];
        let value_lens = [
            None,
            Some(0),
            Some(127),
            Some(128),
            Some(16_383),
            Some(16_384),
            Some(crate::options::MAX_INLINE_VALUE_BYTES),
        ];
        for layout in ItemLayout::ALL {
            for key_len in key_lens {
                for value_len in value_lens {
                    let item = Item {
                        key: Bytes::from(vec![b'k'; key_len]),
                        value: value_len.map(|n| Value::Inline(Bytes::from(vec![b'v'; n]))),
                    };
                    let mut out = vec![9; 3];
                    layout.encode(&item, &mut out);
                    let len = layout.item_len(key_len, value_len);
                    assert_eq!(out.len() - 3, len, "{layout:?} {key_len} {value_len:?}");
                    let h = layout.parse_header(&out, 3).expect("parses");
                    let (key_at, k, v) = (h.key_at, h.key_len, h.value_len);
                    assert_eq!((k, v), (key_len, value_len), "{layout:?}");
                    assert_eq!(&out[key_at..key_at + k], &item.key[..]);
                    assert_eq!(key_at + k + v.unwrap_or(0), out.len());
                    assert!(item.size_bytes() >= len, "{layout:?}");
                    if layout == ItemLayout::V1 {
                        assert_eq!(item.size_bytes(), len);
                    }
                }
            }
        }
    }

    /// A value pointer's item reads back as one in the layout of version-4
    /// pages, and is refused by the layout of earlier pages.
    #[test]
    fn pointer_items_parse_only_where_the_page_allows_them() {
        let item = Item {
            key: Bytes::from_static(b"key"),
            value: Some(Value::Pointer(Bytes::from(vec![7u8; 14]))),
        };
        let mut out = vec![9; 2];
        ItemLayout::V2.encode(&item, &mut out);
        assert_eq!(out.len() - 2, ItemLayout::V2.len_of(&item));
        assert_eq!(
            ItemLayout::V2.len_of(&item),
            1 + ItemLayout::V2.item_len(3, Some(14))
        );
        let h = ItemLayout::Separated.parse_header(&out, 2).expect("parses");
        assert!(h.pointer);
        assert_eq!((h.key_len, h.value_len), (3, Some(14)));
        assert_eq!(&out[h.key_at..h.key_at + 3], b"key");
        assert_eq!(ItemLayout::V2.parse_header(&out, 2), None);
        // The pointer byte before a tombstone's tag is no item.
        let bad = [1u8, 3 << 1, b'k', b'e', b'y'];
        assert_eq!(ItemLayout::Separated.parse_header(&bad, 0), None);
    }

    #[test]
    fn a_header_cut_short_does_not_parse() {
        let item = Item::put(vec![b'k'; 100], vec![b'v'; 300]);
        for layout in ItemLayout::ALL {
            let mut out = Vec::new();
            layout.encode(&item, &mut out);
            let header = layout.item_len(100, Some(300)) - 400;
            for cut in 0..header {
                assert_eq!(
                    layout.parse_header(&out[..cut], 0),
                    None,
                    "{layout:?} {cut}"
                );
            }
        }
    }
}
