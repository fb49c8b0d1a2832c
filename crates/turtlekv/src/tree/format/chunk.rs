//! Items of one leaf chunk, located in its bytes but not cut out of them.
//! Layout of an item: `docs/format.md`, "Leaf pages".
//!
//! A scan opens one cursor per segment on its path and each reads a whole
//! chunk, of which the merge usually emits a few items. Decoding every item
//! into `Bytes` slices cost two reference counts to make and two to drop
//! per item; locating them costs none, and only emitted items are sliced.

use bytes::Bytes;

use super::item::Item;
use super::item_layout::{ItemLayout, MIN_ITEM_BYTES};
use crate::error::DecodeError;
use crate::key::compare_keys;
use crate::util::prefetch::{Locality, prefetch};
use crate::values::Value;

/// The CPU's cache line size (x86-64 and most ARM cores).
const CACHE_LINE_BYTES: usize = 64;

/// Most bytes of a chunk worth prefetching: a chunk of many items is one
/// block; a longer chunk holds one large item, whose key comes first.
const PREFETCH_MAX_BYTES: usize = 4096;

/// Where one item's key and value lie in its chunk's bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ItemSpan {
    key_at: u32,
    key_end: u32,
    /// End of the value; equal to `key_end` for a tombstone.
    value_end: u32,
    is_put: bool,
    /// The value is a value pointer.
    pointer: bool,
}

/// Parses the item at `at` of `bytes`, laid out as `layout`; `None` if it
/// is malformed or overruns them.
#[inline]
pub(in crate::tree) fn parse_item(bytes: &[u8], at: usize, layout: ItemLayout) -> Option<ItemSpan> {
    let header = layout.parse_header(bytes, at)?;
    let (key_at, key_len, value_len) = (header.key_at, header.key_len, header.value_len);
    let key_end = key_at.checked_add(key_len)?;
    let value_end = key_end.checked_add(value_len.unwrap_or(0))?;
    if key_len == 0 || value_end > bytes.len() {
        return None;
    }
    // Chunks are at most a page long, and page lengths fit in a u32.
    let narrow = |n: usize| u32::try_from(n).ok();
    Some(ItemSpan {
        key_at: narrow(key_at)?,
        key_end: narrow(key_end)?,
        value_end: narrow(value_end)?,
        is_put: value_len.is_some(),
        pointer: header.pointer,
    })
}

impl ItemSpan {
    /// Where the next item starts.
    #[inline]
    pub(in crate::tree) fn end(&self) -> usize {
        self.value_end as usize
    }

    #[inline]
    pub(in crate::tree) fn key<'a>(&self, bytes: &'a [u8]) -> &'a [u8] {
        &bytes[self.key_at as usize..self.key_end as usize]
    }

    #[inline]
    pub(in crate::tree) fn is_put(&self) -> bool {
        self.is_put
    }

    /// The item as slices of `bytes`, which must be the bytes it was parsed from.
    #[inline]
    pub(in crate::tree) fn item(&self, bytes: &Bytes) -> Item {
        let key = bytes.slice(self.key_at as usize..self.key_end as usize);
        let value = self.is_put.then(|| {
            let value = bytes.slice(self.key_end as usize..self.value_end as usize);
            Value::of_kind(self.pointer, value)
        });
        Item { key, value }
    }
}

/// The items of one chunk, in key order, located on demand: a forward
/// cursor parses items only as far as it reads, so the items of a chunk
/// before the scan's start and after its end are never touched (each
/// item's header is a cache miss of its own when the chunk is cold).
#[derive(Debug, Default)]
pub(crate) struct ChunkItems {
    bytes: Bytes,
    layout: ItemLayout,
    /// Items the chunk index says the chunk holds.
    count: usize,
    /// Where the chunk starts in its page's contents, for errors.
    page_offset: u64,
    /// Whether `bytes` are the page's own (a chunk stored raw), so that an
    /// error can name its place in the page; a compressed chunk's are
    /// reported at its start.
    raw: bool,
    /// The items located so far, from the first.
    spans: Vec<ItemSpan>,
}

impl ChunkItems {
    /// Starts over on a chunk of `count` items laid out as `layout`, at
    /// `page_offset` of its page's contents (`raw`: `bytes` are the page's
    /// own, not decompressed), reusing this value's allocation. Nothing is
    /// parsed yet.
    pub(in crate::tree) fn reset(
        &mut self,
        bytes: Bytes,
        count: usize,
        layout: ItemLayout,
        page_offset: u64,
        raw: bool,
    ) {
        self.spans.clear();
        // Room for every item at once: growing the spans one doubling at a
        // time cost a scan three or four reallocations per source. The
        // count is only a claim until parsed: items take at least
        // `MIN_ITEM_BYTES` each, which bounds it.
        self.spans.reserve(count.min(bytes.len() / MIN_ITEM_BYTES));
        self.bytes = bytes;
        self.layout = layout;
        self.count = count;
        self.page_offset = page_offset;
        self.raw = raw;
    }

    /// Asks the CPU to fetch the chunk's bytes into its caches. Locating
    /// items is a chain of dependent loads (each item's lengths say where
    /// the next one starts), so in a chunk the CPU cache does not hold,
    /// each item header is a memory stall of its own; a scan prefetches
    /// the chunks of all its sources first, so those fetches overlap.
    pub(crate) fn prefetch(&self) {
        let first_block = &self.bytes[..self.bytes.len().min(PREFETCH_MAX_BYTES)];
        for line in first_block.chunks(CACHE_LINE_BYTES) {
            prefetch(line.as_ptr(), Locality::Near);
        }
    }

    /// Items in the chunk, located or not.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Locates items up to and including `i` (`i < len()`). An error's
    /// offset is within the page's contents.
    pub(crate) fn locate_to(&mut self, i: usize) -> Result<(), DecodeError> {
        debug_assert!(i < self.count);
        while self.spans.len() <= i {
            let at = self.spans.last().map_or(0, ItemSpan::end);
            let Some(span) = parse_item(&self.bytes, at, self.layout) else {
                return Err(self.bad_item(at));
            };
            self.spans.push(span);
        }
        Ok(())
    }

    /// An item at `at` of the chunk that does not parse.
    #[cold]
    fn bad_item(&self, at: usize) -> DecodeError {
        let at = if self.raw { at } else { 0 };
        DecodeError::new(at, "item overruns chunk").within(self.page_offset)
    }

    /// Key of item `i`, which must be located.
    #[inline]
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        self.spans[i].key(&self.bytes)
    }

    /// Where item `i` lies in `bytes()`; it must be located.
    #[inline]
    pub(crate) fn span(&self, i: usize) -> ItemSpan {
        self.spans[i]
    }

    /// The chunk's bytes.
    #[inline]
    pub(crate) fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Item `i` as slices of the chunk; it must be located.
    #[cfg(any(test, feature = "sim"))]
    #[inline]
    pub(crate) fn item(&self, i: usize) -> Item {
        self.spans[i].item(&self.bytes)
    }

    /// Index of the first item whose key is >= `key` (forward seeks: items
    /// after it stay unparsed).
    pub(crate) fn lower_bound(&mut self, key: &[u8]) -> Result<usize, DecodeError> {
        self.first_where(|k| compare_keys(k, key).is_ge())
    }

    /// Index of the first item whose key is > `key` (reverse seeks).
    pub(crate) fn upper_bound(&mut self, key: &[u8]) -> Result<usize, DecodeError> {
        self.first_where(|k| compare_keys(k, key).is_gt())
    }

    /// The first item whose key satisfies `past` (monotone over the
    /// sorted items), or `len()`, locating items up to it.
    fn first_where(&mut self, past: impl Fn(&[u8]) -> bool) -> Result<usize, DecodeError> {
        for i in 0..self.count {
            self.locate_to(i)?;
            if past(self.key(i)) {
                return Ok(i);
            }
        }
        Ok(self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(items: &[Item], layout: ItemLayout) -> Bytes {
        let mut out = Vec::new();
        for item in items {
            layout.encode(item, &mut out);
        }
        out.resize(out.len() + 9, 0); // block padding after the last item
        Bytes::from(out)
    }

    #[test]
    fn located_items_are_the_encoded_items() {
        let items = vec![
            Item::put("apple", "red"),
            Item::tombstone("banana"),
            Item::put("cherry", ""),
            Item::put("date", "brown"),
            Item::put(vec![b'k'; 300], vec![b'v'; 20_000]),
        ];
        for layout in ItemLayout::ALL {
            let mut chunk = ChunkItems::default();
            chunk.reset(encode(&items, layout), items.len(), layout, 0, true);
            assert_eq!(chunk.len(), 5);
            assert_eq!(chunk.lower_bound(b"b"), Ok(1));
            assert_eq!(
                chunk.spans.len(),
                2,
                "a seek locates items only up to its answer"
            );
            assert_eq!(chunk.lower_bound(b"banana"), Ok(1));
            assert_eq!(chunk.upper_bound(b"banana"), Ok(2));
            assert_eq!(chunk.upper_bound(b"zebra"), Ok(5));
            let mut at = 0;
            for (i, item) in items.iter().enumerate() {
                chunk.locate_to(i).expect("locate");
                assert_eq!(chunk.key(i), item.key.as_ref());
                assert_eq!(&chunk.item(i), item);
                at += layout.len_of(item);
                assert_eq!(chunk.span(i).end(), at, "{layout:?}: item_len of item {i}");
            }
            // Reuse keeps nothing of the previous chunk.
            chunk.reset(encode(&items[2..3], layout), 1, layout, 0, true);
            chunk.locate_to(0).expect("locate");
            assert_eq!(chunk.len(), 1);
            assert_eq!(chunk.item(0), items[2]);
        }
    }

    #[test]
    fn malformed_items_are_errors() {
        // Version 1: op, key length (2), value length (4), "k", "v".
        let good = encode(&[Item::put("k", "v")], ItemLayout::V1);
        let mut cases = Vec::new();
        for (at, byte) in [(0, 2u8), (3, 0xff), (1, 0), (0, 0)] {
            // A bad op; a value overrunning the chunk; an empty key; a
            // tombstone with a value.
            let mut bad = good.to_vec();
            bad[at] = byte;
            cases.push((ItemLayout::V1, bad));
        }
        // Version 2: tag (key length 1, put), value length, "k", "v".
        let good_v2 = encode(&[Item::put("k", "v")], ItemLayout::V2);
        assert_eq!(good_v2[..4], [3, 1, b'k', b'v']);
        for (at, byte) in [(1, 0x7f), (0, 1), (0, 0x83), (1, 0x81)] {
            // A value overrunning the chunk; an empty key; a tag and a
            // value length that run on into the bytes after them.
            let mut bad = good_v2.to_vec();
            bad[at] = byte;
            cases.push((ItemLayout::V2, bad));
        }
        // The tag 3 in two bytes: not its shortest encoding.
        cases.push((ItemLayout::V2, vec![0x83, 0x00, 1, b'k', b'v', 0, 0]));
        let mut chunk = ChunkItems::default();
        for layout in ItemLayout::ALL {
            let good = encode(&[Item::put("k", "v")], layout);
            chunk.reset(good, 2, layout, 0, true);
            assert!(chunk.locate_to(1).is_err(), "a count past the items");
        }
        for (layout, bad) in cases {
            chunk.reset(Bytes::from(bad.clone()), 1, layout, 0, true);
            assert!(chunk.locate_to(0).is_err(), "{layout:?} {bad:?}");
            chunk.reset(Bytes::from(bad.clone()), 1, layout, 0, true);
            assert!(chunk.lower_bound(b"k").is_err(), "{layout:?} {bad:?}");
        }
    }
}
