//! Fuzzing entry points for leaf and node page contents (see `crate::fuzz`).
//! Each decodes the way the read path does and returns an error for bad
//! bytes; a panic or an out-of-bounds slice is a bug.

use bytes::Bytes;

use crate::Compression;
use crate::filter;
use crate::page::PageId;
use crate::tree::format::chunk::{ChunkItems, parse_item};
use crate::tree::format::codec::{self, ChunkCodec};
use crate::tree::format::item::Item;
use crate::tree::format::item_layout::ItemLayout;
use crate::tree::format::leaf::{self, HEADER_BYTES as LEAF_HEADER_BYTES, LeafHead};
use crate::tree::format::node::{Child, HEADER_BYTES as NODE_HEADER_BYTES, LeafData, Node};
use crate::tree::format::node_codec::referenced_pages;
use crate::tree::read::probe::{NodeIndex, PivotTarget};
use crate::values::Value;

/// Decodes leaf contents as a lookup and a scan would: filter, head, every
/// chunk, then a point lookup and a scan seek of each item through its chunk.
pub(crate) fn decode_leaf(bytes: &[u8]) -> Result<usize, String> {
    if bytes.len() < LEAF_HEADER_BYTES {
        return Err("shorter than a leaf header".into());
    }
    let (head_len, filter_len) = leaf::page_lens(bytes);
    let page = Bytes::copy_from_slice(bytes);
    let head_bytes = page
        .get(..head_len as usize)
        .ok_or("head runs past the page")?;
    let head = LeafHead::decode(&page.slice_ref(head_bytes))?;
    if filter_len > 0 {
        let start = head_len as usize;
        let encoded = bytes
            .get(start..start.saturating_add(filter_len as usize))
            .ok_or("filter runs past the page")?;
        filter::KeyFilter::decode(encoded)?;
        filter::may_contain(encoded, filter::key_hash(b"probe"))?;
    }
    let items = head.decode_all(&page)?;
    for item in &items {
        if head.chunks.is_empty() {
            break;
        }
        let chunk = head.chunk_for(&item.key);
        let (offset, len) = head.chunk_range(chunk);
        let start = usize::try_from(offset).map_err(|_| "chunk offset overflows")?;
        let len = usize::try_from(len).map_err(|_| "chunk length overflows")?;
        let end = start.checked_add(len).ok_or("chunk end overflows")?;
        let blocks = page.get(start..end).ok_or("chunk runs past the page")?;
        let found = head.decode_chunk(chunk, &page.slice_ref(blocks))?;
        if found.binary_search_by(|it| it.key.cmp(&item.key)).is_err() {
            return Err("an item is not in the chunk its separator names".into());
        }
        // A scan's view of the chunk, located on demand, must agree.
        let mut located = ChunkItems::default();
        head.open_chunk(chunk, page.slice_ref(blocks), &mut located)?;
        let at = located.lower_bound(&item.key)?;
        if at == located.len() || located.item(at) != *item {
            return Err("a scan seek does not find the item the decode has".into());
        }
    }
    Ok(items.len())
}

/// Decodes `bytes` as one compressed chunk, as every chunk read does
/// (`LeafHead::chunk_item_bytes`), then its items: byte 0 picks the codec
/// (LZ4 or zstd), byte 1 the block size (64 to 4096 bytes), and the rest,
/// cut to whole blocks, are the chunk's blocks. Returns the items' count.
pub(crate) fn decode_compressed_chunk(bytes: &[u8]) -> Result<usize, String> {
    let [codec, block_size, blocks @ ..] = bytes else {
        return Err("shorter than the codec and block size".into());
    };
    let (codec, block_size) = chunk_codec_and_block_size(*codec, *block_size);
    let blocks = &blocks[..blocks.len() / block_size * block_size];
    let raw = codec::decompress(codec, blocks, block_size)?;
    let mut at = 0;
    let mut count = 0;
    while at < raw.len() {
        let span = parse_item(&raw, at, ItemLayout::CURRENT).ok_or("an item overruns the chunk")?;
        at = span.end();
        count += 1;
    }
    Ok(count)
}

fn chunk_codec_and_block_size(codec: u8, block_size: u8) -> (ChunkCodec, usize) {
    let codec = match codec % 2 {
        0 => ChunkCodec::Lz4,
        _ => ChunkCodec::Zstd,
    };
    (codec, 64 * (1 + usize::from(block_size % 64)))
}

/// `bytes` as `decode_compressed_chunk` reads them, with the chunk's
/// lengths made to fit its blocks, so a fuzzer gets past them to the
/// codecs.
pub(crate) fn chunk_with_valid_lengths(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if out.len() < 2 + codec::CHUNK_HEADER_BYTES {
        return out;
    }
    let (_, block_size) = chunk_codec_and_block_size(out[0], out[1]);
    let blocks = (out.len() - 2) / block_size * block_size;
    if blocks < block_size {
        return out;
    }
    let field = |out: &[u8], at: usize| u32::from_le_bytes(out[at..at + 4].try_into().expect("4"));
    let raw_len = (field(&out, 2) as usize).clamp(1, codec::max_raw_len(block_size));
    let room = blocks - codec::CHUNK_HEADER_BYTES;
    let stored_len = (field(&out, 6) as usize).min(room);
    // The chunk ends with the block its stored bytes end in.
    let end = (codec::CHUNK_HEADER_BYTES + stored_len).div_ceil(block_size) * block_size;
    out.truncate(2 + end);
    out[2..6].copy_from_slice(&(raw_len as u32).to_le_bytes());
    out[6..10].copy_from_slice(&(stored_len as u32).to_le_bytes());
    out
}

/// Decodes node contents three ways: fully, as the read path's lookup
/// index probed with a few keys, and as the live-set walk at open. Each
/// probe must find the pivot, child and active segments the full decode
/// gives.
pub(crate) fn decode_node(bytes: &[u8]) -> Result<usize, String> {
    let index = NodeIndex::parse(Bytes::copy_from_slice(bytes));
    let referenced = referenced_pages(bytes).map_err(|e| e.to_string());
    let node = Node::decode(bytes)?;
    let (index, referenced) = (index?, referenced?);
    let probes_agree = [&b""[..], b"a", b"key", b"\xff\xff"].iter().all(|key| {
        let probe = index.probe(PivotTarget::Holding(key));
        let p = node.pivot_for(key);
        let child = probe.child_leaf.map_or(probe.child_node, |leaf| leaf.id);
        let active = node.segments.iter().filter(|s| s.bounds[p].is_some());
        stored_child(&node.pivots[p].child) == Some(child) && probe.segments.len() == active.count()
    });
    if !probes_agree || referenced.len() != node.pivots.len() + node.segments.len() {
        return Err("probe or page walk disagrees with the full decode".into());
    }
    Ok(node.pivots.len())
}

/// The page a decoded pivot's child is stored in.
fn stored_child(child: &Child) -> Option<PageId> {
    match child {
        Child::Leaf(LeafData::Stored(r)) => Some(r.id),
        Child::StoredNode(id) => Some(*id),
        _ => None,
    }
}

/// `bytes` with the leaf head, block and filter checksums recomputed where
/// the lengths allow, so a fuzzer gets past them to the parsers.
pub(crate) fn leaf_with_valid_checksums(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if out.len() < LEAF_HEADER_BYTES {
        return out;
    }
    let (head_len, filter_len) = leaf::page_lens(&out);
    let head_len = (head_len as usize).clamp(LEAF_HEADER_BYTES, out.len());
    let field = |out: &[u8], i: usize| u32::from_le_bytes(out[i..i + 4].try_into().expect("4"));
    let (block_count, block_size, data_offset) = (
        field(&out, 16) as usize,
        field(&out, 20) as usize,
        field(&out, 32) as usize,
    );
    // Block checksums are the last 4 * block_count bytes of the head.
    if block_size > 0 && block_count.saturating_mul(4) <= head_len - LEAF_HEADER_BYTES {
        let crcs_at = head_len - 4 * block_count;
        for b in 0..block_count {
            let start = data_offset.saturating_add(b.saturating_mul(block_size));
            let Some(block) = out.get(start..start.saturating_add(block_size)) else {
                break;
            };
            let crc = crc32c::crc32c(block);
            out[crcs_at + 4 * b..crcs_at + 4 * b + 4].copy_from_slice(&crc.to_le_bytes());
        }
    }
    let crc = crc32c::crc32c_append(
        crc32c::crc32c(&out[..44]),
        &out[LEAF_HEADER_BYTES..head_len],
    );
    out[44..48].copy_from_slice(&crc.to_le_bytes());
    let filter_end = head_len.saturating_add(filter_len as usize);
    if filter_len >= 4 && filter_end <= out.len() {
        let crc = crc32c::crc32c(&out[head_len + 4..filter_end]);
        out[head_len..head_len + 4].copy_from_slice(&crc.to_le_bytes());
    }
    out
}

/// `bytes` with the node page checksum recomputed.
pub(crate) fn node_with_valid_checksum(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if out.len() >= NODE_HEADER_BYTES {
        let crc = crc32c::crc32c_append(crc32c::crc32c(&out[..16]), &out[NODE_HEADER_BYTES..]);
        out[16..20].copy_from_slice(&crc.to_le_bytes());
    }
    out
}

/// Valid leaf contents holding `items` (sorted, unique keys; `None` is a
/// tombstone), for seeds: in format `version`, no chunk compressed.
///
/// # Panics
/// If this build does not read format `version`.
pub(crate) fn encode_leaf(
    version: u16,
    items: &[(Vec<u8>, Option<Vec<u8>>)],
    block_size: usize,
    filter_bits_per_key: u32,
) -> Vec<u8> {
    leaf::serialize_as(
        version,
        &to_items(items),
        block_size,
        filter_bits_per_key,
        usize::MAX,
    )
}

/// Valid leaf contents holding `items` in the current format version,
/// their chunks compressed as `compression` says, for seeds.
pub(crate) fn encode_compressed_leaf(
    compression: Compression,
    items: &[(Vec<u8>, Option<Vec<u8>>)],
    block_size: usize,
    filter_bits_per_key: u32,
) -> Vec<u8> {
    leaf::serialize(
        &to_items(items),
        block_size,
        filter_bits_per_key,
        usize::MAX,
        compression,
    )
}

fn to_items(items: &[(Vec<u8>, Option<Vec<u8>>)]) -> Vec<Item> {
    items
        .iter()
        .map(|(k, v)| Item {
            key: Bytes::copy_from_slice(k),
            value: v
                .as_deref()
                .map(|v| Value::Inline(Bytes::copy_from_slice(v))),
        })
        .collect()
}
