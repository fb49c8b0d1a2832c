//! Reading leaf pages: the head (header, chunk index, block checksums) and
//! chunks of items (docs/format.md, "Leaf pages").

use bytes::Bytes;

use super::chunk::{ChunkItems, parse_item};
use super::codec::{self, ChunkCodec};
use super::item::Item;
use super::item_layout::{ItemLayout, MIN_ITEM_BYTES};
use super::leaf::{HEADER_BYTES, MAGIC, index_entry_fixed_bytes, version_format};
use crate::error::DecodeError;
use crate::key::{compare_keys, key_prefix};

/// Where header fields an error names lie (`docs/format.md`, "Fixed header").
pub(in crate::tree) const ITEM_COUNT_AT: usize = 8;
const BLOCK_COUNT_AT: usize = 16;
const BLOCK_SIZE_AT: usize = 20;
pub(in crate::tree) const HEAD_LEN_AT: usize = 24;
pub(in crate::tree) const FILTER_LEN_AT: usize = 28;
const DATA_OFFSET_AT: usize = 32;

/// One chunk index entry, decoded for lookups: 16 bytes, so that a binary
/// search's last probes and the neighbouring entries a lookup reads next
/// (the next chunk's first item and block) share cache lines. The
/// separator itself stays in the head's bytes (`LeafHead::separator`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChunkEntry {
    /// The separator as a `key_prefix`: lookups compare these and read a
    /// separator only where prefixes tie.
    pub separator_prefix: u64,
    pub first_item: u32,
    pub first_block: u32,
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
    /// The page's length with every chunk stored raw, which leaf sizing
    /// measures (`LeafSizer`): the header says it in version 3; earlier
    /// pages are stored raw.
    pub raw_page_bytes: u32,
    pub has_tombstones: bool,
    /// How the page's items are laid out (its format version).
    pub item_layout: ItemLayout,
    pub chunks: Vec<ChunkEntry>,
    /// Each chunk's codec (version 3); empty for pages of earlier
    /// versions, whose chunks are all stored raw. Kept apart from
    /// `chunks`, whose entries fit a lookup's cache lines.
    codecs: Vec<ChunkCodec>,
    /// Where each chunk's separator lies in `raw`, `(start, end)`.
    separator_spans: Vec<(u32, u32)>,
    /// The head's bytes, which hold the separators.
    raw: Bytes,
    pub block_crcs: Vec<u32>,
}

pub(in crate::tree) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

impl LeafHead {
    /// Decodes and verifies the head (`head` = the page's first `head_len`
    /// bytes). An error's offset is within the page's contents, as the
    /// head starts them.
    pub(crate) fn decode(head: &Bytes) -> Result<Self, DecodeError> {
        if head.len() < HEADER_BYTES {
            return Err(DecodeError::new(
                0,
                format!("leaf head of {} bytes is too short", head.len()),
            ));
        }
        if &head[..4] != MAGIC {
            return Err(DecodeError::new(0, "leaf head: bad magic"));
        }
        let version = u16::from_le_bytes([head[4], head[5]]);
        let Some((item_layout, has_codec)) = version_format(version) else {
            return Err(DecodeError::new(
                4,
                format!("leaf head: unknown format version {version}"),
            ));
        };
        let field = |i: usize| u32_at(head, 8 + 4 * i);
        let (item_count, chunk_count, block_count, block_size) =
            (field(0), field(1), field(2), field(3));
        let (head_len, filter_len, data_offset) = (field(4), field(5), field(6));
        if head_len as usize != head.len() {
            return Err(DecodeError::new(
                HEAD_LEN_AT,
                format!(
                    "leaf head: length {} but header says {head_len}",
                    head.len()
                ),
            ));
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&head[..44]), &head[HEADER_BYTES..]);
        if crc != u32_at(head, 44) {
            return Err(DecodeError::new(0, "leaf head: checksum mismatch"));
        }
        let mut at = HEADER_BYTES;
        let entry_fixed = index_entry_fixed_bytes(has_codec);
        // Counts are only claims until parsed: bound the allocation by the
        // bytes that could hold them, so a bad count is an error, not an abort.
        let claimed = (chunk_count as usize).min(head.len() / entry_fixed);
        let mut chunks = Vec::with_capacity(claimed);
        let mut separator_spans = Vec::with_capacity(claimed);
        let mut codecs = Vec::with_capacity(if has_codec { claimed } else { 0 });
        for _ in 0..chunk_count {
            if at + entry_fixed > head.len() {
                return Err(DecodeError::new(at, "leaf head: index overruns head"));
            }
            if has_codec {
                let Some(codec) = ChunkCodec::from_byte(head[at + 8]) else {
                    return Err(DecodeError::new(
                        at + 8,
                        format!("leaf head: unknown chunk codec {}", head[at + 8]),
                    ));
                };
                codecs.push(codec);
            }
            let sep_len_at = at + entry_fixed - 2;
            let sep_len = u16::from_le_bytes([head[sep_len_at], head[sep_len_at + 1]]) as usize;
            let sep_at = at + entry_fixed;
            if sep_at + sep_len > head.len() {
                return Err(DecodeError::new(
                    sep_len_at,
                    "leaf head: separator overruns head",
                ));
            }
            let separator = &head[sep_at..sep_at + sep_len];
            chunks.push(ChunkEntry {
                separator_prefix: key_prefix(separator),
                first_item: u32_at(head, at),
                first_block: u32_at(head, at + 4),
            });
            // The head's length is a u32 (`head_len`), so these fit.
            separator_spans.push((sep_at as u32, (sep_at + sep_len) as u32));
            at = sep_at + sep_len;
        }
        if block_size == 0 {
            return Err(DecodeError::new(BLOCK_SIZE_AT, "leaf head: block size 0"));
        }
        if at + 4 * block_count as usize != head.len() {
            return Err(DecodeError::new(
                BLOCK_COUNT_AT,
                "leaf head: block checksums do not fill the head",
            ));
        }
        let block_crcs = (0..block_count as usize)
            .map(|b| u32_at(head, at + 4 * b))
            .collect();
        // Separators ascend (the first is empty, so the others are not):
        // a lookup takes the last chunk whose separator is <= its key, and
        // would search the wrong chunk otherwise. Chunk 0 starts the items
        // and the data, or the items before it would have no chunk.
        let separator = |c: usize| {
            let (start, end) = separator_spans[c];
            &head[start as usize..end as usize]
        };
        // Index entry `c` starts before its separator's fixed fields.
        let entry_at = |c: usize| separator_spans[c].0 as usize - entry_fixed;
        let out_of_order = (1..chunks.len()).find(|&c| {
            let (before, after) = (&chunks[c - 1], &chunks[c]);
            before.first_item >= after.first_item
                || before.first_block >= after.first_block
                || separator(c - 1) >= separator(c)
        });
        if let Some(c) = out_of_order {
            return Err(DecodeError::new(
                entry_at(c),
                format!("leaf head: chunk index entry {c} out of order"),
            ));
        }
        let first_at_start = chunks
            .first()
            .is_none_or(|c| c.first_item == 0 && c.first_block == 0 && separator(0).is_empty());
        if !first_at_start {
            return Err(DecodeError::new(
                HEADER_BYTES,
                "leaf head: chunk 0 does not start the items and the data",
            ));
        }
        let in_range = chunks
            .last()
            .is_none_or(|c| c.first_item < item_count && c.first_block < block_count);
        if !in_range {
            return Err(DecodeError::new(
                entry_at(chunks.len() - 1),
                "leaf head: last chunk beyond the items or blocks",
            ));
        }
        if (item_count == 0) != chunks.is_empty() {
            return Err(DecodeError::new(
                ITEM_COUNT_AT,
                format!("leaf head: {item_count} items in {} chunks", chunks.len()),
            ));
        }
        // The data follows the head and the filter (both are read as
        // ranges of their own, and a chunk read must not return their bytes).
        if u64::from(data_offset) < u64::from(head_len) + u64::from(filter_len) {
            return Err(DecodeError::new(
                DATA_OFFSET_AT,
                "leaf head: data overlaps the head or the filter",
            ));
        }
        let raw_page_bytes = match has_codec {
            true => u32_at(head, super::leaf::RAW_PAGE_BYTES_AT),
            false => data_offset.saturating_add(block_count.saturating_mul(block_size)),
        };
        Ok(LeafHead {
            item_count,
            block_count,
            block_size,
            head_len,
            filter_len,
            data_offset,
            raw_page_bytes,
            has_tombstones: u16::from_le_bytes([head[6], head[7]]) & 1 == 1,
            item_layout,
            chunks,
            codecs,
            separator_spans,
            raw: head.clone(),
            block_crcs,
        })
    }

    /// Chunk `c`'s separator: its keys are at or above it, the previous
    /// chunk's below it (the first chunk's is empty).
    #[inline]
    pub(crate) fn separator(&self, c: usize) -> &[u8] {
        let (start, end) = self.separator_spans[c];
        &self.raw[start as usize..end as usize]
    }

    /// Chunk `c`'s separator as a slice of the head's bytes, for callers
    /// that keep it.
    pub(crate) fn separator_bytes(&self, c: usize) -> Bytes {
        self.raw.slice_ref(self.separator(c))
    }

    /// The head's bytes, which the decoded head keeps.
    #[cfg(test)]
    pub(crate) fn raw_bytes(&self) -> &Bytes {
        &self.raw
    }

    /// Memory the decoded head takes, for the page cache's accounting,
    /// including the head's bytes, which hold the separators.
    pub(crate) fn memory_bytes(&self) -> u64 {
        let per_chunk = std::mem::size_of::<ChunkEntry>() + std::mem::size_of::<(u32, u32)>();
        let chunks = self.chunks.len() * per_chunk;
        let crcs = self.block_crcs.len() * 4;
        let codecs = self.codecs.len();
        (std::mem::size_of::<Self>() + chunks + codecs + crcs + self.head_len as usize) as u64
    }

    /// Finds `key` in chunk `c` given its blocks' bytes, without decoding the
    /// other items. The blocks' checksums are not recomputed: the page store
    /// verified them when it read them (`decode_chunk` and `check()` do
    /// verify). Returns the item's index in the leaf and the item.
    pub(crate) fn find_in_chunk(
        &self,
        c: usize,
        blocks: &Bytes,
        key: &[u8],
    ) -> Result<Option<(u32, Item)>, DecodeError> {
        let bytes = self.chunk_item_bytes(c, blocks)?;
        let (first, end) = self.chunk_items(c);
        let mut at = 0usize;
        for index in first..end {
            let span =
                parse_item(&bytes, at, self.item_layout).ok_or_else(|| self.bad_item(c, at))?;
            match compare_keys(span.key(&bytes), key) {
                std::cmp::Ordering::Less => at = span.end(),
                std::cmp::Ordering::Equal => return Ok(Some((index, span.item(&bytes)))),
                std::cmp::Ordering::Greater => return Ok(None),
            }
        }
        Ok(None)
    }

    /// How chunk `c` is stored.
    #[inline]
    pub(crate) fn codec(&self, c: usize) -> ChunkCodec {
        self.codecs.get(c).copied().unwrap_or_default()
    }

    /// Chunk `c`'s items back to back, given its blocks' bytes: the blocks
    /// themselves for a chunk stored raw (its items start them; padding
    /// follows), else their bytes decompressed. Every reader of a chunk
    /// goes through here. An error's offset is within the page's contents.
    pub(crate) fn chunk_item_bytes(&self, c: usize, blocks: &Bytes) -> Result<Bytes, DecodeError> {
        match self.codec(c) {
            ChunkCodec::None => Ok(blocks.clone()),
            codec => codec::decompress(codec, blocks, self.block_size as usize)
                .map_err(|e| e.within(self.chunk_range(c).0)),
        }
    }

    /// Where damage to the item whose key is `key`, in chunk `c` read from
    /// `blocks`, is reported: where the key lies in the page for a chunk
    /// stored raw, the chunk's start for a compressed one (its items are
    /// not bytes of the page).
    pub(crate) fn key_offset(&self, c: usize, blocks: &Bytes, key: &[u8]) -> u64 {
        let chunk_at = self.chunk_range(c).0;
        let in_blocks = (key.as_ptr() as usize).wrapping_sub(blocks.as_ptr() as usize);
        match self.codec(c) {
            ChunkCodec::None if in_blocks < blocks.len() => chunk_at + in_blocks as u64,
            _ => chunk_at,
        }
    }

    /// The chunk a key would be in: the last whose separator is `<= key`.
    pub(crate) fn chunk_for(&self, key: &[u8]) -> usize {
        let key_prefix = key_prefix(key);
        // Below the key's prefix: below the key. Above it: above the key.
        let below = self
            .chunks
            .partition_point(|c| c.separator_prefix < key_prefix);
        self.chunk_from_prefix_rank(below, key_prefix, key)
    }

    /// `chunk_for(key)` of every head in `heads`, into `out`. A scan's
    /// window searches the head of every segment on its path and the
    /// leaf's for the same key, and each search is a chain of cache
    /// misses in a head of hundreds of chunks; searched side by side, one
    /// step of each per round, the misses of different heads overlap.
    pub(crate) fn chunks_for(heads: &[&LeafHead], key: &[u8], out: &mut Vec<usize>) {
        let key_prefix = key_prefix(key);
        // Each head's search as `(base, size)`: the answer lies in
        // `base..base + size`, as in a branch-free `partition_point`.
        out.clear();
        out.extend(heads.iter().map(|h| h.chunks.len()));
        let mut bases = vec![0usize; heads.len()];
        loop {
            let mut searching = false;
            for ((head, base), size) in heads.iter().zip(&mut bases).zip(out.iter_mut()) {
                if *size > 1 {
                    let half = *size / 2;
                    let mid = *base + half;
                    if head.chunks[mid].separator_prefix < key_prefix {
                        *base = mid;
                    }
                    *size -= half;
                    searching |= *size > 1;
                }
            }
            if !searching {
                break;
            }
        }
        for ((head, base), size) in heads.iter().zip(bases).zip(out.iter_mut()) {
            let below = match head.chunks.get(base) {
                Some(c) if *size == 1 => base + usize::from(c.separator_prefix < key_prefix),
                _ => 0,
            };
            *size = head.chunk_from_prefix_rank(below, key_prefix, key);
        }
    }

    /// The chunk for `key` given `below`, the number of separators whose
    /// prefix lies below the key's.
    fn chunk_from_prefix_rank(&self, below: usize, key_prefix: u64, key: &[u8]) -> usize {
        let chunks = &self.chunks;
        // Usually no separator ties the key's prefix: check the next one
        // before a second binary search, whose probes would each miss the
        // CPU cache in a head of hundreds of chunks.
        let tied = match chunks.get(below) {
            Some(c) if c.separator_prefix == key_prefix => {
                chunks[below..].partition_point(|c| c.separator_prefix == key_prefix)
            }
            _ => 0,
        };
        // Among the ties, the first separator above the key.
        let (mut at_most, mut above) = (below, below + tied);
        while at_most < above {
            let mid = at_most + (above - at_most) / 2;
            if self.separator(mid) <= key {
                at_most = mid + 1;
            } else {
                above = mid;
            }
        }
        at_most.saturating_sub(1)
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

    /// The later of chunk `from` and the chunk holding item `index` (the
    /// last chunk for an index past the end). Most often the item is in
    /// `from` or before it, which the next chunk's entry tells without a
    /// search over the whole index (whose probes each miss the CPU cache
    /// in a head of hundreds of chunks).
    pub(crate) fn chunk_of_item_from(&self, from: usize, index: u32) -> usize {
        match self.chunks.get(from + 1) {
            Some(next) if next.first_item <= index => {
                from + 1 + self.chunks[from + 1..].partition_point(|c| c.first_item <= index) - 1
            }
            _ => from,
        }
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
    pub(crate) fn decode_chunk(&self, c: usize, blocks: &Bytes) -> Result<Vec<Item>, DecodeError> {
        let items = self.decode_chunk_trusted(c, blocks)?;
        let first_block = self.chunks[c].first_block as usize;
        let (chunk_at, _) = self.chunk_range(c);
        for (i, block) in blocks.chunks_exact(self.block_size as usize).enumerate() {
            if crc32c::crc32c(block) != self.block_crcs[first_block + i] {
                let block_at = chunk_at + i as u64 * u64::from(self.block_size);
                return Err(DecodeError::new(
                    0,
                    format!("leaf block {}: checksum mismatch", first_block + i),
                )
                .within(block_at));
            }
        }
        Ok(items)
    }

    /// An item of chunk `c` at `at` of its item bytes that does not parse:
    /// at its place in the page, or the chunk's start if it is compressed.
    fn bad_item(&self, c: usize, at: usize) -> DecodeError {
        let at = if self.codec(c) == ChunkCodec::None {
            at
        } else {
            0
        };
        DecodeError::new(at, format!("leaf chunk {c}: item overruns chunk"))
            .within(self.chunk_range(c).0)
    }

    /// `decode_chunk` without recomputing the blocks' checksums, for blocks
    /// the page store read and verified (scans: the leaf-level checksums
    /// would check the same bytes twice). Structure is still checked.
    pub(crate) fn decode_chunk_trusted(
        &self,
        c: usize,
        blocks: &Bytes,
    ) -> Result<Vec<Item>, DecodeError> {
        self.check_chunk_len(c, blocks)?;
        let bytes = self.chunk_item_bytes(c, blocks)?;
        let (first, end) = self.chunk_items(c);
        let mut items =
            Vec::with_capacity(((end - first) as usize).min(bytes.len() / MIN_ITEM_BYTES));
        let mut at = 0usize;
        for _ in first..end {
            let span =
                parse_item(&bytes, at, self.item_layout).ok_or_else(|| self.bad_item(c, at))?;
            items.push(span.item(&bytes));
            at = span.end();
        }
        // A compressed chunk decompresses to its items exactly.
        if self.codec(c) != ChunkCodec::None && at != bytes.len() {
            return Err(
                DecodeError::new(0, format!("leaf chunk {c}: bytes after the last item"))
                    .within(self.chunk_range(c).0),
            );
        }
        Ok(items)
    }

    /// Starts `out` on chunk `c` given its blocks' bytes (scans; items are
    /// located as the scan reaches them, see `ChunkItems`).
    pub(crate) fn open_chunk(
        &self,
        c: usize,
        blocks: Bytes,
        out: &mut ChunkItems,
    ) -> Result<(), DecodeError> {
        self.check_chunk_len(c, &blocks)?;
        let bytes = self.chunk_item_bytes(c, &blocks)?;
        let (first, end) = self.chunk_items(c);
        let (chunk_at, _) = self.chunk_range(c);
        let raw = self.codec(c) == ChunkCodec::None;
        out.reset(
            bytes,
            (end - first) as usize,
            self.item_layout,
            chunk_at,
            raw,
        );
        Ok(())
    }

    fn check_chunk_len(&self, c: usize, blocks: &Bytes) -> Result<(), DecodeError> {
        let (chunk_at, len) = self.chunk_range(c);
        if blocks.len() as u64 != len {
            return Err(DecodeError::new(
                0,
                format!("leaf chunk {c}: {} bytes, expected {len}", blocks.len()),
            )
            .within(chunk_at));
        }
        Ok(())
    }

    /// Decodes every item of a whole page. An error's offset is within
    /// the page's contents.
    pub(crate) fn decode_all(&self, page: &Bytes) -> Result<Vec<Item>, DecodeError> {
        let mut items =
            Vec::with_capacity((self.item_count as usize).min(page.len() / MIN_ITEM_BYTES));
        for c in 0..self.chunks.len() {
            let (offset, len) = self.chunk_range(c);
            let end = (offset + len) as usize;
            if end > page.len() {
                return Err(DecodeError::new(
                    offset as usize,
                    format!("leaf chunk {c}: data blocks overrun the page"),
                ));
            }
            let blocks = page.slice(offset as usize..end);
            let before = items.len();
            items.extend(self.decode_chunk(c, &blocks)?);
            self.check_separator(c, &items, before)?;
            self.check_chunk_items(c, &blocks, &items, before)?;
        }
        Ok(items)
    }

    /// Each separator lies above the previous chunk's last key and at or
    /// below its own chunk's first (`docs/format.md`): lookups go by
    /// separators alone, so one that points elsewhere makes keys of the
    /// page unreachable (checks and updates read pages whole, in
    /// `decode_all`, and would not notice otherwise). Chunk `c`'s items
    /// start at `items[first]`.
    fn check_separator(&self, c: usize, items: &[Item], first: usize) -> Result<(), DecodeError> {
        let separator = self.separator(c);
        let below_first = items.get(first).is_none_or(|it| separator <= it.key);
        let above_previous = first == 0 || items[first - 1].key < separator;
        if !below_first || !above_previous {
            return Err(DecodeError::new(
                self.separator_spans[c].0 as usize,
                format!("leaf chunk {c}: separator does not separate its chunk"),
            ));
        }
        Ok(())
    }

    /// Chunk `c`'s items, `items[first..]`, read from `blocks`: in order
    /// after the previous chunk's, and no tombstone where the header says
    /// there is none.
    fn check_chunk_items(
        &self,
        c: usize,
        blocks: &Bytes,
        items: &[Item],
        first: usize,
    ) -> Result<(), DecodeError> {
        let from = first.saturating_sub(1);
        if let Some(w) = items[from..].windows(2).find(|w| w[0].key >= w[1].key) {
            let at = self.key_offset(c, blocks, &w[1].key);
            return Err(DecodeError::new(0, "leaf: items out of order").within(at));
        }
        if !self.has_tombstones
            && let Some(it) = items[first..].iter().find(|it| it.value.is_none())
        {
            return Err(DecodeError::new(
                0,
                "leaf: a tombstone in a page whose header says it holds none",
            )
            .within(self.key_offset(c, blocks, &it.key)));
        }
        Ok(())
    }
}
