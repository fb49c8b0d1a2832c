//! Leaf (and buffer segment) page format: header, chunk index, block
//! checksums, filter, data blocks. Layout in `docs/format.md`, "Leaf pages".
//! Serialisation is a pure function of the items, so new leaves can be
//! serialised in parallel.

use super::item::{Item, separator_len};
use super::item_layout::ItemLayout;
pub(crate) use super::leaf_head::LeafHead;
#[cfg(test)]
use super::leaf_head::u32_at;
use crate::filter;

pub(in crate::tree) const MAGIC: &[u8; 4] = b"TKLF";
pub(crate) const HEADER_BYTES: usize = 48;
pub(in crate::tree) const INDEX_ENTRY_FIXED_BYTES: usize = 10;
/// The page store prefixes page contents with 16 bytes; data blocks are
/// placed so that they line up with its blocks.
const STORE_PREFIX_BYTES: usize = 16;

/// Where an item goes in the data stream: `(start offset, starts a chunk)`.
fn place(pos: usize, size: usize, block_size: usize) -> (usize, bool) {
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

/// Serialises sorted, unique items into leaf page contents. The filter is
/// left out if it would push the page past `max_page_bytes`.
pub(crate) fn serialize(
    items: &[Item],
    block_size: usize,
    filter_bits_per_key: u32,
    max_page_bytes: usize,
) -> Vec<u8> {
    serialize_as(
        ItemLayout::CURRENT,
        items,
        block_size,
        filter_bits_per_key,
        max_page_bytes,
    )
}

/// `serialize` with the items laid out as `layout`: only the current
/// layout is written by the tree; the older one is written by tests and
/// fuzz seeds, to check that it is still read.
///
/// Two passes: the first places the items and builds the chunk index, so
/// the head's and filter's lengths, and with them the data's offset, are
/// known before any item is copied; the second copies each item to its
/// place in the page. (Encoding into a data buffer of its own and copying
/// that after the head cost a copy of every page a checkpoint writes.)
pub(crate) fn serialize_as(
    layout: ItemLayout,
    items: &[Item],
    block_size: usize,
    filter_bits_per_key: u32,
    max_page_bytes: usize,
) -> Vec<u8> {
    debug_assert!(
        items.windows(2).all(|w| w[0].key < w[1].key),
        "leaf items must be sorted and unique"
    );
    let plan = plan_chunks(layout, items, block_size);
    let blocks = plan.data_len.div_ceil(block_size);
    let data_len = blocks * block_size;
    let head_len = HEADER_BYTES + plan.index.len() + 4 * blocks;
    let mut filter_bytes = filter::build(
        items.iter().map(|it| filter::key_hash(&it.key)).collect(),
        filter_bits_per_key,
    );
    if data_offset(head_len + filter_bytes.len(), block_size) + data_len > max_page_bytes {
        filter_bytes.clear();
    }
    let offset = data_offset(head_len + filter_bytes.len(), block_size);
    let mut out = Vec::with_capacity(offset + data_len);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&layout.version().to_le_bytes());
    out.extend_from_slice(&u16::from(plan.tombstones).to_le_bytes());
    for field in [
        items.len(),
        plan.chunks as usize,
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
    out.extend_from_slice(&plan.index);
    out.resize(head_len, 0); // block checksums, filled below
    out.extend_from_slice(&filter_bytes);
    out.resize(offset, 0);
    for item in items {
        let size = layout.len_of(item);
        let (start, _) = place(out.len() - offset, size, block_size);
        out.resize(offset + start, 0);
        layout.encode(item, &mut out);
    }
    debug_assert_eq!(out.len() - offset, plan.data_len);
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

/// Where `serialize_as`'s first pass put the items.
struct ChunkPlan {
    /// The chunk index as the head stores it.
    index: Vec<u8>,
    chunks: u32,
    tombstones: bool,
    /// The data's length up to the end of the last item.
    data_len: usize,
}

fn plan_chunks(layout: ItemLayout, items: &[Item], block_size: usize) -> ChunkPlan {
    let mut plan = ChunkPlan {
        index: Vec::new(),
        chunks: 0,
        tombstones: false,
        data_len: 0,
    };
    for (i, item) in items.iter().enumerate() {
        let size = layout.len_of(item);
        let (start, new_chunk) = place(plan.data_len, size, block_size);
        if new_chunk {
            let sep = match i {
                0 => &[][..],
                _ => &item.key[..separator_len(&items[i - 1].key, &item.key)],
            };
            plan.index.extend_from_slice(&(i as u32).to_le_bytes());
            plan.index
                .extend_from_slice(&((start / block_size) as u32).to_le_bytes());
            plan.index
                .extend_from_slice(&(sep.len() as u16).to_le_bytes());
            plan.index.extend_from_slice(sep);
            plan.chunks += 1;
        }
        plan.tombstones |= item.value.is_none();
        plan.data_len = start + size;
    }
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
