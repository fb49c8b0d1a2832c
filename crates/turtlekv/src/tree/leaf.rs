//! Leaf (and buffer segment) page format: header, chunk index, block
//! checksums, filter, data blocks. Layout in `docs/format.md`, "Leaf pages".
//! Serialisation is a pure function of the items, so new leaves can be
//! serialised in parallel.

use bytes::Bytes;

use super::item::{ITEM_OVERHEAD_BYTES, Item, shortest_separator};
use crate::filter;

const MAGIC: &[u8; 4] = b"TKLF";
const VERSION: u16 = 1;
pub(crate) const HEADER_BYTES: usize = 48;
const INDEX_ENTRY_FIXED_BYTES: usize = 10;
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
#[derive(Debug, Clone)]
pub(crate) struct LeafSizer {
    block_size: usize,
    filter_bits_per_key: u32,
    data_end: usize,
    index_bytes: usize,
    items: usize,
    last_key: Option<Bytes>,
}

impl LeafSizer {
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

    pub(crate) fn add(&mut self, item: &Item) {
        let size = item.size_bytes();
        let (start, new_chunk) = place(self.data_end, size, self.block_size);
        if new_chunk {
            let sep_len = match &self.last_key {
                Some(prev) => shortest_separator(prev, &item.key).len(),
                None => 0,
            };
            self.index_bytes += INDEX_ENTRY_FIXED_BYTES + sep_len;
        }
        self.data_end = start + size;
        self.items += 1;
        self.last_key = Some(item.key.clone());
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
    debug_assert!(
        items.windows(2).all(|w| w[0].key < w[1].key),
        "leaf items must be sorted and unique"
    );
    let mut data = Vec::new();
    let mut index = Vec::new();
    let mut chunks = 0u32;
    let mut tombstones = false;
    for (i, item) in items.iter().enumerate() {
        let (start, new_chunk) = place(data.len(), item.size_bytes(), block_size);
        data.resize(start, 0);
        if new_chunk {
            let sep = if i == 0 {
                Bytes::new()
            } else {
                shortest_separator(&items[i - 1].key, &item.key)
            };
            index.extend_from_slice(&(i as u32).to_le_bytes());
            index.extend_from_slice(&((start / block_size) as u32).to_le_bytes());
            index.extend_from_slice(&(sep.len() as u16).to_le_bytes());
            index.extend_from_slice(&sep);
            chunks += 1;
        }
        tombstones |= item.value.is_none();
        encode_item(item, &mut data);
    }
    let blocks = data.len().div_ceil(block_size);
    data.resize(blocks * block_size, 0);
    let head_len = HEADER_BYTES + index.len() + 4 * blocks;
    let mut filter_bytes = filter::build(
        items.iter().map(|it| filter::key_hash(&it.key)).collect(),
        filter_bits_per_key,
    );
    if data_offset(head_len + filter_bytes.len(), block_size) + data.len() > max_page_bytes {
        filter_bytes.clear();
    }
    let offset = data_offset(head_len + filter_bytes.len(), block_size);
    let mut out = Vec::with_capacity(offset + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&u16::from(tombstones).to_le_bytes());
    for field in [
        items.len(),
        chunks as usize,
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
    for block in data.chunks_exact(block_size) {
        out.extend_from_slice(&crc32c::crc32c(block).to_le_bytes());
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[..44]), &out[HEADER_BYTES..]);
    out[44..48].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&filter_bytes);
    out.resize(offset, 0);
    out.extend_from_slice(&data);
    out
}

/// `(head_len, filter_len)` of serialised leaf contents.
pub(crate) fn page_lens(page: &[u8]) -> (u32, u32) {
    (u32_at(page, 24), u32_at(page, 28))
}

fn encode_item(item: &Item, out: &mut Vec<u8>) {
    out.push(u8::from(item.value.is_some()));
    out.extend_from_slice(&(item.key.len() as u16).to_le_bytes());
    let value = item.value.as_deref().unwrap_or_default();
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(&item.key);
    out.extend_from_slice(value);
}

/// One chunk index entry.
#[derive(Debug, Clone)]
pub(crate) struct ChunkEntry {
    pub first_item: u32,
    pub first_block: u32,
    pub separator: Bytes,
}

/// The decoded head of a leaf page.
#[derive(Debug, Clone)]
pub(crate) struct LeafHead {
    pub item_count: u32,
    pub block_count: u32,
    pub block_size: u32,
    pub head_len: u32,
    pub filter_len: u32,
    pub data_offset: u32,
    pub has_tombstones: bool,
    pub chunks: Vec<ChunkEntry>,
    pub block_crcs: Vec<u32>,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

impl LeafHead {
    /// Decodes and verifies the head (`head` = the page's first `head_len` bytes).
    pub(crate) fn decode(head: &Bytes) -> Result<Self, String> {
        if head.len() < HEADER_BYTES || &head[..4] != MAGIC {
            return Err("leaf head: bad magic or too short".into());
        }
        if u16::from_le_bytes([head[4], head[5]]) != VERSION {
            return Err("leaf head: unknown version".into());
        }
        let field = |i: usize| u32_at(head, 8 + 4 * i);
        let (item_count, chunk_count, block_count, block_size) =
            (field(0), field(1), field(2), field(3));
        let (head_len, filter_len, data_offset) = (field(4), field(5), field(6));
        if head_len as usize != head.len() {
            return Err(format!(
                "leaf head: length {} but header says {head_len}",
                head.len()
            ));
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&head[..44]), &head[HEADER_BYTES..]);
        if crc != u32_at(head, 44) {
            return Err("leaf head: checksum mismatch".into());
        }
        let mut at = HEADER_BYTES;
        let mut chunks = Vec::with_capacity(chunk_count as usize);
        for _ in 0..chunk_count {
            if at + INDEX_ENTRY_FIXED_BYTES > head.len() {
                return Err("leaf head: index overruns head".into());
            }
            let sep_len = u16::from_le_bytes([head[at + 8], head[at + 9]]) as usize;
            let sep_at = at + INDEX_ENTRY_FIXED_BYTES;
            if sep_at + sep_len > head.len() {
                return Err("leaf head: separator overruns head".into());
            }
            chunks.push(ChunkEntry {
                first_item: u32_at(head, at),
                first_block: u32_at(head, at + 4),
                separator: head.slice(sep_at..sep_at + sep_len),
            });
            at = sep_at + sep_len;
        }
        if at + 4 * block_count as usize != head.len() || block_size == 0 {
            return Err("leaf head: block checksums do not fill the head".into());
        }
        let block_crcs = (0..block_count as usize)
            .map(|b| u32_at(head, at + 4 * b))
            .collect();
        let ordered = chunks
            .windows(2)
            .all(|w| w[0].first_item < w[1].first_item && w[0].first_block < w[1].first_block);
        let in_range = chunks
            .last()
            .is_none_or(|c| c.first_item < item_count && c.first_block < block_count);
        if !ordered || !in_range || (item_count == 0) != chunks.is_empty() {
            return Err("leaf head: chunk index out of order or out of range".into());
        }
        Ok(LeafHead {
            item_count,
            block_count,
            block_size,
            head_len,
            filter_len,
            data_offset,
            has_tombstones: u16::from_le_bytes([head[6], head[7]]) & 1 == 1,
            chunks,
            block_crcs,
        })
    }

    /// The chunk a key would be in.
    pub(crate) fn chunk_for(&self, key: &[u8]) -> usize {
        self.chunks
            .partition_point(|c| c.separator.as_ref() <= key)
            .saturating_sub(1)
    }

    /// `(offset in page, length)` of chunk `c`'s blocks.
    pub(crate) fn chunk_range(&self, c: usize) -> (u64, u64) {
        let first = self.chunks[c].first_block as u64;
        let end = self
            .chunks
            .get(c + 1)
            .map_or(self.block_count, |n| n.first_block) as u64;
        let bs = self.block_size as u64;
        (self.data_offset as u64 + first * bs, (end - first) * bs)
    }

    /// Item index range of chunk `c`.
    pub(crate) fn chunk_items(&self, c: usize) -> (u32, u32) {
        let end = self
            .chunks
            .get(c + 1)
            .map_or(self.item_count, |n| n.first_item);
        (self.chunks[c].first_item, end)
    }

    /// Verifies and decodes chunk `c` from its blocks' bytes.
    pub(crate) fn decode_chunk(&self, c: usize, blocks: &Bytes) -> Result<Vec<Item>, String> {
        let (_, len) = self.chunk_range(c);
        if blocks.len() as u64 != len {
            return Err(format!(
                "leaf chunk {c}: {} bytes, expected {len}",
                blocks.len()
            ));
        }
        let first_block = self.chunks[c].first_block as usize;
        for (i, block) in blocks.chunks_exact(self.block_size as usize).enumerate() {
            if crc32c::crc32c(block) != self.block_crcs[first_block + i] {
                return Err(format!("leaf block {}: checksum mismatch", first_block + i));
            }
        }
        let (first, end) = self.chunk_items(c);
        let mut items = Vec::with_capacity((end - first) as usize);
        let mut at = 0usize;
        for _ in first..end {
            let (item, next) = decode_item(blocks, at)
                .ok_or_else(|| format!("leaf chunk {c}: item overruns chunk"))?;
            items.push(item);
            at = next;
        }
        Ok(items)
    }

    /// Decodes every item of a whole page.
    pub(crate) fn decode_all(&self, page: &Bytes) -> Result<Vec<Item>, String> {
        let mut items = Vec::with_capacity(self.item_count as usize);
        for c in 0..self.chunks.len() {
            let (offset, len) = self.chunk_range(c);
            let end = (offset + len) as usize;
            if end > page.len() {
                return Err("leaf: data blocks overrun the page".into());
            }
            items.extend(self.decode_chunk(c, &page.slice(offset as usize..end))?);
        }
        let sorted = items.windows(2).all(|w| w[0].key < w[1].key);
        if !sorted || (!self.has_tombstones && items.iter().any(|it| it.value.is_none())) {
            return Err("leaf: items out of order or unexpected tombstone".into());
        }
        Ok(items)
    }
}

fn decode_item(bytes: &Bytes, at: usize) -> Option<(Item, usize)> {
    let fixed = bytes.get(at..at + ITEM_OVERHEAD_BYTES)?;
    let op = fixed[0];
    let key_len = u16::from_le_bytes([fixed[1], fixed[2]]) as usize;
    let value_len = u32::from_le_bytes(fixed[3..7].try_into().ok()?) as usize;
    let key_at = at + ITEM_OVERHEAD_BYTES;
    let end = key_at + key_len + value_len;
    if op > 1 || key_len == 0 || end > bytes.len() || (op == 0 && value_len != 0) {
        return None;
    }
    let key = bytes.slice(key_at..key_at + key_len);
    let value = (op == 1).then(|| bytes.slice(key_at + key_len..end));
    Some((Item { key, value }, end))
}

#[cfg(test)]
#[path = "leaf_tests.rs"]
mod tests;
