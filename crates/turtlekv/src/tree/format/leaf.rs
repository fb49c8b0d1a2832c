//! Leaf (and buffer segment) page format: header, chunk index, block
//! checksums, filter, data blocks. Layout in `docs/format.md`, "Leaf pages".
//! Serialisation is a pure function of the items and the compression, so
//! new leaves can be serialised in parallel.

use super::codec::{self, ChunkCodec};
use super::item::{Item, separator_len};
use super::item_layout::ItemLayout;
pub(crate) use super::leaf_head::LeafHead;
#[cfg(test)]
use super::leaf_head::u32_at;
use super::pack;
use crate::Compression;
use crate::filter;

pub(in crate::tree) const MAGIC: &[u8; 4] = b"TKLF";
pub(crate) const HEADER_BYTES: usize = 48;
/// Where version 3 keeps the page's length in the raw layout.
pub(in crate::tree) const RAW_PAGE_BYTES_AT: usize = 36;
/// The format version this build writes (`docs/format.md`, "Format
/// versions"), for pages without value pointers.
pub(crate) const VERSION: u16 = 3;
/// The version of pages that hold value pointers: builds before value
/// files refuse them as a version they do not read.
pub(crate) const VERSION_WITH_POINTERS: u16 = 4;
/// Fixed bytes of a chunk index entry in the version written: first item,
/// first block, codec, separator length.
pub(crate) const INDEX_ENTRY_FIXED_BYTES: usize = 11;

/// What leaf format `version` lays out differently: its items, and whether
/// chunk index entries carry a codec byte. `None`: a version this build
/// does not read.
pub(crate) fn version_format(version: u16) -> Option<(ItemLayout, bool)> {
    match version {
        1 => Some((ItemLayout::V1, false)),
        2 => Some((ItemLayout::V2, false)),
        3 => Some((ItemLayout::V2, true)),
        4 => Some((ItemLayout::Separated, true)),
        _ => None,
    }
}

/// Fixed bytes of a chunk index entry, with or without a codec byte.
pub(in crate::tree) fn index_entry_fixed_bytes(has_codec: bool) -> usize {
    10 + usize::from(has_codec)
}
/// The page store prefixes page contents with 16 bytes; data blocks are
/// placed so that they line up with its blocks.
const STORE_PREFIX_BYTES: usize = 16;

/// Where an item goes in the data stream: `(start offset, starts a chunk)`.
pub(in crate::tree::format) fn place(pos: usize, size: usize, block_size: usize) -> (usize, bool) {
    let used = pos % block_size;
    if used == 0 {
        (pos, true)
    } else if size <= block_size - used {
        (pos, false)
    } else {
        (pos.next_multiple_of(block_size), true)
    }
}

/// Running size of a leaf being filled item by item, exact except for the
/// filter (an upper bound), so cuts never exceed the page.
/// It borrows the last key added (cloning a `Bytes` per item showed up as a
/// tenth of checkpoint time).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeafSizer<'a> {
    block_size: usize,
    filter_bits_per_key: u32,
    data_end: usize,
    index_bytes: usize,
    items: usize,
    last_key: Option<&'a [u8]>,
}

impl<'a> LeafSizer<'a> {
    pub(crate) fn new(block_size: usize, filter_bits_per_key: u32) -> Self {
        LeafSizer {
            block_size,
            filter_bits_per_key,
            data_end: 0,
            index_bytes: 0,
            items: 0,
            last_key: None,
        }
    }

    pub(crate) fn items(&self) -> usize {
        self.items
    }

    #[inline]
    pub(crate) fn add(&mut self, item: &'a Item) {
        let size = ItemLayout::CURRENT.len_of(item);
        let (start, new_chunk) = place(self.data_end, size, self.block_size);
        if new_chunk {
            let sep_len = match &self.last_key {
                Some(prev) => separator_len(prev, &item.key),
                None => 0,
            };
            self.index_bytes += INDEX_ENTRY_FIXED_BYTES + sep_len;
        }
        self.data_end = start + size;
        self.items += 1;
        self.last_key = Some(&item.key);
    }

    /// Page size if the leaf ended now.
    pub(crate) fn page_bytes(&self) -> usize {
        let blocks = self.data_end.div_ceil(self.block_size);
        let head = HEADER_BYTES + self.index_bytes + 4 * blocks;
        let filter = filter::max_encoded_len(self.items, self.filter_bits_per_key);
        data_offset(head + filter, self.block_size) + blocks * self.block_size
    }
}

fn data_offset(head_and_filter: usize, block_size: usize) -> usize {
    (head_and_filter + STORE_PREFIX_BYTES).next_multiple_of(block_size) - STORE_PREFIX_BYTES
}

/// Serialises sorted, unique items into leaf page contents, in the
/// current format version, their chunks compressed as `compression` says
/// (`pack.rs`). The filter is left out if it would push the page past
/// `max_page_bytes`.
#[cfg(any(test, feature = "sim"))]
pub(crate) fn serialize(
    items: &[Item],
    block_size: usize,
    filter_bits_per_key: u32,
    max_page_bytes: usize,
    compression: Compression,
) -> Vec<u8> {
    serialize_counted(
        items,
        block_size,
        filter_bits_per_key,
        max_page_bytes,
        compression,
    )
    .bytes
}

/// Serialised leaf contents, and what its chunks took.
#[derive(Debug)]
pub(crate) struct LeafBytes {
    pub bytes: Vec<u8>,
    /// Item bytes of the page's chunks.
    pub chunk_raw_bytes: u64,
    /// Bytes the chunks take as stored: the item bytes of uncompressed
    /// ones, the lengths and compressed bytes of the others (padding to
    /// the block's end not counted).
    pub chunk_stored_bytes: u64,
}

/// `serialize`, with the bytes its chunks took before and after
/// compression.
pub(crate) fn serialize_counted(
    items: &[Item],
    block_size: usize,
    filter_bits_per_key: u32,
    max_page_bytes: usize,
    compression: Compression,
) -> LeafBytes {
    debug_assert!(
        items.windows(2).all(|w| w[0].key < w[1].key),
        "leaf items must be sorted and unique"
    );
    let layout = ItemLayout::CURRENT;
    let raw = plan_raw(layout, items, block_size);
    let filter = page_filter(items, filter_bits_per_key);
    let size = |p: &Plan, filter_len| p.page_bytes(items, block_size, filter_len, true);
    // The raw layout's length, as `write_page` would write it.
    let raw_page_bytes = match size(&raw, filter.len()) {
        n if n > max_page_bytes => size(&raw, 0),
        n => n,
    };
    let plan = match compression {
        Compression::None => raw,
        _ => {
            // A compressed page never outgrows the raw layout, which
            // `LeafSizer` bounds and leaves are cut by.
            let packed = pack::plan_packed(items, block_size, compression);
            if size(&packed, filter.len()) <= size(&raw, filter.len()) {
                packed
            } else {
                raw
            }
        }
    };
    let (chunk_raw_bytes, chunk_stored_bytes) = plan.chunk_bytes();
    let pointers = items
        .iter()
        .any(|i| i.value.as_ref().is_some_and(|v| v.is_pointer()));
    let version = if pointers {
        VERSION_WITH_POINTERS
    } else {
        VERSION
    };
    let mut bytes = write_page(
        version,
        layout,
        items,
        &plan,
        block_size,
        filter,
        max_page_bytes,
    );
    set_raw_page_bytes(&mut bytes, raw_page_bytes);
    LeafBytes {
        bytes,
        chunk_raw_bytes,
        chunk_stored_bytes,
    }
}

/// Leaf contents of `items` in format `version`, no chunk compressed: the
/// tree writes only the current version; older ones are written by tests
/// and fuzz seeds, to check that they are still read.
///
/// # Panics
/// If this build does not read `version`.
#[cfg(any(test, feature = "sim"))]
pub(crate) fn serialize_as(
    version: u16,
    items: &[Item],
    block_size: usize,
    filter_bits_per_key: u32,
    max_page_bytes: usize,
) -> Vec<u8> {
    let (layout, _) = version_format(version).expect("a leaf format version");
    let plan = plan_raw(layout, items, block_size);
    let filter = page_filter(items, filter_bits_per_key);
    let mut page = write_page(
        version,
        layout,
        items,
        &plan,
        block_size,
        filter,
        max_page_bytes,
    );
    if version >= 3 {
        let len = page.len();
        set_raw_page_bytes(&mut page, len);
    }
    page
}

/// Sets the header's `raw_page_bytes` (version 3) of a serialised page and
/// the head checksum that covers it.
fn set_raw_page_bytes(page: &mut [u8], raw_page_bytes: usize) {
    page[RAW_PAGE_BYTES_AT..RAW_PAGE_BYTES_AT + 4]
        .copy_from_slice(&(raw_page_bytes as u32).to_le_bytes());
    let head_len = u32::from_le_bytes(page[24..28].try_into().expect("4 bytes")) as usize;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&page[..44]), &page[HEADER_BYTES..head_len]);
    page[44..48].copy_from_slice(&crc.to_le_bytes());
}

fn page_filter(items: &[Item], filter_bits_per_key: u32) -> Vec<u8> {
    filter::build(
        items.iter().map(|it| filter::key_hash(&it.key)).collect(),
        filter_bits_per_key,
    )
}

/// Writes the page `plan` lays out. The plan placed every chunk, so the
/// head's and filter's lengths, and with them the data's offset, are
/// known before any item is copied; each item is then copied once, to its
/// place in the page. (Encoding into a data buffer of its own and copying
/// that after the head cost a copy of every page a checkpoint writes.)
fn write_page(
    version: u16,
    layout: ItemLayout,
    items: &[Item],
    plan: &Plan,
    block_size: usize,
    mut filter_bytes: Vec<u8>,
    max_page_bytes: usize,
) -> Vec<u8> {
    let (_, has_codec) = version_format(version).expect("a leaf format version");
    let index = plan.index(items, has_codec);
    let blocks = plan.blocks;
    let data_len = blocks * block_size;
    let head_len = HEADER_BYTES + index.len() + 4 * blocks;
    if data_offset(head_len + filter_bytes.len(), block_size) + data_len > max_page_bytes {
        filter_bytes.clear();
    }
    let offset = data_offset(head_len + filter_bytes.len(), block_size);
    let mut out = Vec::with_capacity(offset + data_len);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&u16::from(plan.tombstones).to_le_bytes());
    for field in [
        items.len(),
        plan.chunks.len(),
        blocks,
        block_size,
        head_len,
        filter_bytes.len(),
        offset,
        0,
        0,
    ] {
        out.extend_from_slice(&(field as u32).to_le_bytes());
    }
    out.extend_from_slice(&[0; 4]); // head checksum, filled below
    out.extend_from_slice(&index);
    out.resize(head_len, 0); // block checksums, filled below
    out.extend_from_slice(&filter_bytes);
    out.resize(offset, 0);
    for (c, chunk) in plan.chunks.iter().enumerate() {
        let start = offset + chunk.first_block * block_size;
        out.resize(start, 0);
        match &chunk.packed {
            Some(packed) => codec::chunk_bytes(packed.raw_len, &packed.stored, &mut out),
            None => {
                for item in &items[chunk.first_item..plan.chunk_end(c, items.len())] {
                    let (at, _) = place(out.len() - start, layout.len_of(item), block_size);
                    out.resize(start + at, 0);
                    layout.encode(item, &mut out);
                }
            }
        }
    }
    debug_assert!(out.len() <= offset + data_len);
    out.resize(offset + data_len, 0);
    let (head, data) = out.split_at_mut(offset);
    let checksums = &mut head[head_len - 4 * blocks..head_len];
    for (block, crc) in data
        .chunks_exact(block_size)
        .zip(checksums.chunks_exact_mut(4))
    {
        crc.copy_from_slice(&crc32c::crc32c(block).to_le_bytes());
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[..44]), &out[HEADER_BYTES..head_len]);
    out[44..48].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Where a page's chunks go, before any byte is written.
#[derive(Debug, Default)]
pub(in crate::tree::format) struct Plan {
    pub chunks: Vec<PlannedChunk>,
    /// Data blocks.
    pub blocks: usize,
    pub tombstones: bool,
}

#[derive(Debug)]
pub(in crate::tree::format) struct PlannedChunk {
    pub first_item: usize,
    pub first_block: usize,
    /// Bytes of its items.
    pub raw_len: usize,
    /// `None`: the items themselves.
    pub packed: Option<Packed>,
}

/// A compressed chunk's bytes.
#[derive(Debug)]
pub(in crate::tree::format) struct Packed {
    pub codec: ChunkCodec,
    pub raw_len: usize,
    pub stored: Vec<u8>,
}

impl Plan {
    /// The item after chunk `c`'s last.
    fn chunk_end(&self, c: usize, item_count: usize) -> usize {
        self.chunks.get(c + 1).map_or(item_count, |n| n.first_item)
    }

    /// The chunk index as the head stores it; `has_codec`: entries carry
    /// a codec byte (version 3).
    fn index(&self, items: &[Item], has_codec: bool) -> Vec<u8> {
        let mut index = Vec::new();
        for chunk in &self.chunks {
            let i = chunk.first_item;
            let sep = match i {
                0 => &[][..],
                _ => &items[i].key[..separator_len(&items[i - 1].key, &items[i].key)],
            };
            index.extend_from_slice(&(i as u32).to_le_bytes());
            index.extend_from_slice(&(chunk.first_block as u32).to_le_bytes());
            if has_codec {
                let codec = chunk.packed.as_ref().map_or(ChunkCodec::None, |p| p.codec);
                index.push(codec as u8);
            }
            index.extend_from_slice(&(sep.len() as u16).to_le_bytes());
            index.extend_from_slice(sep);
        }
        index
    }

    /// The page's length with a filter of `filter_len` bytes.
    fn page_bytes(
        &self,
        items: &[Item],
        block_size: usize,
        filter_len: usize,
        codec: bool,
    ) -> usize {
        let index: usize = self
            .chunks
            .iter()
            .map(|c| {
                let i = c.first_item;
                let sep = if i == 0 {
                    0
                } else {
                    separator_len(&items[i - 1].key, &items[i].key)
                };
                index_entry_fixed_bytes(codec) + sep
            })
            .sum();
        let head = HEADER_BYTES + index + 4 * self.blocks;
        data_offset(head + filter_len, block_size) + self.blocks * block_size
    }

    /// Item bytes of the chunks, and the bytes they take as stored.
    fn chunk_bytes(&self) -> (u64, u64) {
        let stored = |c: &PlannedChunk| match &c.packed {
            Some(p) => codec::CHUNK_HEADER_BYTES + p.stored.len(),
            None => c.raw_len,
        };
        let raw = self.chunks.iter().map(|c| c.raw_len as u64).sum();
        (raw, self.chunks.iter().map(|c| stored(c) as u64).sum())
    }
}

/// The raw layout: a new chunk starts whenever an item would not fit in
/// the rest of the current block.
fn plan_raw(layout: ItemLayout, items: &[Item], block_size: usize) -> Plan {
    let mut plan = Plan::default();
    let mut data_len = 0;
    for (i, item) in items.iter().enumerate() {
        let size = layout.len_of(item);
        let (start, new_chunk) = place(data_len, size, block_size);
        if new_chunk {
            plan.chunks.push(PlannedChunk {
                first_item: i,
                first_block: start / block_size,
                raw_len: 0,
                packed: None,
            });
        }
        plan.chunks.last_mut().expect("a chunk").raw_len += size;
        plan.tombstones |= item.value.is_none();
        data_len = start + size;
    }
    plan.blocks = data_len.div_ceil(block_size);
    plan
}

/// `(head_len, filter_len)` of serialised leaf contents.
pub(crate) fn page_lens(page: &[u8]) -> (u32, u32) {
    let at = |i: usize| u32::from_le_bytes(page[i..i + 4].try_into().expect("4 bytes"));
    (at(24), at(28))
}

#[cfg(test)]
#[path = "leaf_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "leaf_compression_tests.rs"]
mod compression_tests;
