//! Packing a leaf's items into compressed chunks (`docs/format.md`,
//! "Compressed chunks"). Chunks stay block-aligned and take no more blocks
//! than the raw chunk of items they start with, so a point lookup still
//! reads one block for small items; as many items as fit are packed into
//! them, compressed. The item count is estimated from the previous
//! chunk's ratio and corrected by at most `MAX_ATTEMPTS` compressions.

use super::codec::{self, CHUNK_HEADER_BYTES};
use super::item::Item;
use super::item_layout::ItemLayout;
use super::leaf::{Packed, Plan, PlannedChunk, place};
use crate::Compression;

/// Compressions tried per chunk.
const MAX_ATTEMPTS: usize = 3;
/// Item bytes the writer packs into one compressed chunk, in blocks,
/// unless the raw chunk it starts with holds more (one large item): a
/// lookup decompresses a whole chunk, so this bounds its work.
const PACK_MAX_BLOCKS: usize = 16;
/// The first chunks of a page try compression whatever they save...
const SAMPLE_CHUNKS: u32 = 4;
/// ...and the rest only if those saved at least this share of their bytes
/// (1/8): values that do not compress cost a page a few compressions.
const SAMPLE_MIN_SAVING_DIVISOR: usize = 8;
/// A compressed chunk saving less than 1/32 of its item bytes is stored
/// raw: it would cost every read a decompression for nothing.
const MIN_SAVING_DIVISOR: usize = 32;

/// The plan of a page whose chunks are compressed where that pays.
pub(in crate::tree::format) fn plan_packed(
    items: &[Item],
    block_size: usize,
    compression: Compression,
) -> Plan {
    let mut packer = Packer {
        items,
        block_size,
        compression,
        last_ratio: (2, 1),
        scratch: Vec::new(),
        scratch_items: 0,
        sampled: 0,
        sampled_raw: 0,
        sampled_stored: 0,
    };
    let mut plan = Plan {
        tombstones: items.iter().any(|it| it.value.is_none()),
        ..Plan::default()
    };
    let mut i = 0;
    while i < items.len() {
        let raw = raw_chunk(items, i, block_size);
        let (end, blocks, raw_len, packed) = match packer.pack(i, &raw) {
            Some((end, p)) => {
                let blocks = (CHUNK_HEADER_BYTES + p.stored.len()).div_ceil(block_size);
                (end, blocks, p.raw_len, Some(p))
            }
            None => (raw.end, raw.blocks, raw.item_bytes, None),
        };
        plan.chunks.push(PlannedChunk {
            first_item: i,
            first_block: plan.blocks,
            raw_len,
            packed,
        });
        plan.blocks += blocks;
        i = end;
    }
    plan
}

/// The chunk the raw layout would start at an item.
struct RawChunk {
    /// The item after its last.
    end: usize,
    blocks: usize,
    item_bytes: usize,
}

fn raw_chunk(items: &[Item], first: usize, block_size: usize) -> RawChunk {
    let (mut pos, mut item_bytes, mut end) = (0, 0, first);
    while let Some(item) = items.get(end) {
        let size = ItemLayout::CURRENT.len_of(item);
        let (start, new_chunk) = place(pos, size, block_size);
        if new_chunk && end > first {
            break;
        }
        pos = start + size;
        item_bytes += size;
        end += 1;
    }
    RawChunk {
        end,
        blocks: pos.div_ceil(block_size),
        item_bytes,
    }
}

struct Packer<'a> {
    items: &'a [Item],
    block_size: usize,
    compression: Compression,
    /// `(item bytes, stored bytes)` of the last compression: the next
    /// chunk's estimate.
    last_ratio: (usize, usize),
    /// The current chunk's items encoded back to back, `scratch_items` of them.
    scratch: Vec<u8>,
    scratch_items: usize,
    /// Chunks tried so far, and their item and stored bytes.
    sampled: u32,
    sampled_raw: usize,
    sampled_stored: usize,
}

impl Packer<'_> {
    /// Whether the page's first chunks compressed well enough to go on.
    fn trying(&self) -> bool {
        self.sampled < SAMPLE_CHUNKS
            || self.sampled_stored * SAMPLE_MIN_SAVING_DIVISOR
                <= self.sampled_raw * (SAMPLE_MIN_SAVING_DIVISOR - 1)
    }

    /// The compressed chunk starting at item `first` that packs the most
    /// items into at most `raw`'s blocks, with the item after its last;
    /// `None` to store `raw` as it is.
    fn pack(&mut self, first: usize, raw: &RawChunk) -> Option<(usize, Packed)> {
        if !self.trying() || raw.item_bytes > codec::max_raw_len(self.block_size) {
            return None;
        }
        self.scratch.clear();
        self.scratch_items = 0;
        let room = raw.blocks * self.block_size;
        let limit = raw.item_bytes.max(PACK_MAX_BLOCKS * self.block_size);
        let mut target = scale(room, self.last_ratio);
        let mut best: Option<(usize, Packed)> = None;
        let mut tried = (0, 0);
        for _ in 0..MAX_ATTEMPTS {
            let end = self.take(first, target.clamp(raw.item_bytes, limit), raw.end);
            let (codec, stored) = codec::compress(self.compression, &self.scratch[..])?;
            let used = CHUNK_HEADER_BYTES + stored.len();
            let raw_len = self.scratch.len();
            self.last_ratio = (raw_len, used);
            tried = (raw_len, used);
            let fits = used <= room;
            if fits && best.as_ref().is_none_or(|(e, _)| end > *e) {
                best = Some((
                    end,
                    Packed {
                        codec,
                        raw_len,
                        stored,
                    },
                ));
            }
            let full = used * 16 >= room * 15 || end == self.items.len() || raw_len >= limit;
            let next = scale(room, (raw_len, used));
            // Done when the chunk is nearly full, or can neither grow nor
            // shrink towards its blocks.
            if (fits && (full || next <= raw_len)) || (!fits && end == raw.end) {
                break;
            }
            target = next;
        }
        self.sampled += 1;
        self.sampled_raw += tried.0;
        self.sampled_stored += tried.1;
        let (end, packed) = best?;
        let used = CHUNK_HEADER_BYTES + packed.stored.len();
        (used * MIN_SAVING_DIVISOR <= packed.raw_len * (MIN_SAVING_DIVISOR - 1))
            .then_some((end, packed))
    }

    /// Encodes items from `first` while they total at most `target` bytes,
    /// and at least up to `min_end`, into `scratch`; returns the item
    /// after the last.
    fn take(&mut self, first: usize, target: usize, min_end: usize) -> usize {
        let mut end = first + self.scratch_items;
        // Fewer items than last time: encode them again from the start.
        let mut len = self.scratch.len();
        if len > target && end > min_end {
            self.scratch.clear();
            (end, len) = (first, 0);
        }
        while let Some(item) = self.items.get(end) {
            let size = ItemLayout::CURRENT.len_of(item);
            if end >= min_end && len + size > target {
                break;
            }
            ItemLayout::CURRENT.encode(item, &mut self.scratch);
            len += size;
            end += 1;
        }
        self.scratch_items = end - first;
        end
    }
}

/// Item bytes expected to fill `room` bytes at a ratio of `(item bytes,
/// stored bytes)`, less a thirty-second for the estimate's error.
fn scale(room: usize, (raw, stored): (usize, usize)) -> usize {
    let bytes = room as u128 * raw as u128 / stored.max(1) as u128;
    (bytes - bytes / 32) as usize
}
