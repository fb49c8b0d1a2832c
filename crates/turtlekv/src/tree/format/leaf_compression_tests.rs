//! Leaf pages with compressed chunks: round trips with every codec, the
//! packing's promises (block-aligned chunks, never larger than the raw
//! layout, incompressible values stored raw) and damage to compressed
//! chunks reported as errors.

use bytes::Bytes;

use super::*;
use crate::tree::format::chunk::ChunkItems;
use crate::tree::fuzz_hook::leaf_with_valid_checksums;

const CODECS: [Compression; 3] = [
    Compression::Lz4,
    Compression::Zstd { level: 3 },
    Compression::Zstd { level: 19 },
];

/// A small leaf's block size (4 KiB leaves) and the default one.
const SMALL_BLOCK: usize = 256;
const BLOCK: usize = 4088;

/// A little pseudo-random generator, so the values are the same each run.
fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Text-like bytes: words from a small vocabulary.
fn text(len: usize, seed: u64) -> Vec<u8> {
    let words = [
        "the ",
        "turtle ",
        "carries ",
        "a ",
        "tree ",
        "of ",
        "leaves ",
        "and ",
        "buffers ",
        "user:",
        "id=",
        "\"name\": ",
        "42, ",
        "true, ",
    ];
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        out.extend_from_slice(words[(xorshift(&mut x) % words.len() as u64) as usize].as_bytes());
    }
    out.truncate(len);
    out
}

fn random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len).map(|_| xorshift(&mut x) as u8).collect()
}

/// `n` items, every seventh a tombstone, values from `value(i)`.
fn items_of(n: usize, value: impl Fn(usize) -> Vec<u8>) -> Vec<Item> {
    (0..n)
        .map(|i| {
            let key = format!("user{i:08}");
            if i % 7 == 3 {
                Item::tombstone(key)
            } else {
                Item::put(key, value(i))
            }
        })
        .collect()
}

fn head_of(page: &Bytes) -> LeafHead {
    LeafHead::decode(&page.slice(..u32_at(page, 24) as usize)).unwrap()
}

fn blocks_of(page: &Bytes, head: &LeafHead, c: usize) -> Bytes {
    let (offset, len) = head.chunk_range(c);
    page.slice(offset as usize..(offset + len) as usize)
}

/// Serialises `items` compressed as `compression` with at most
/// `max_page_bytes` and reads every item back through every reader.
fn round_trip(
    compression: Compression,
    items: &[Item],
    block_size: usize,
    max_page_bytes: usize,
) -> Bytes {
    let page = Bytes::from(serialize(
        items,
        block_size,
        10,
        max_page_bytes,
        compression,
    ));
    let mut sizer = LeafSizer::new(block_size, 10);
    items.iter().for_each(|it| sizer.add(it));
    assert!(
        page.len() <= sizer.page_bytes(),
        "{compression:?}: past the sizer's bound"
    );
    assert!(page.len() <= max_page_bytes);
    let head = head_of(&page);
    assert_eq!(head.decode_all(&page).unwrap(), items, "{compression:?}");
    let mut located = ChunkItems::default();
    for (c, window) in (0..head.chunks.len()).zip(0..) {
        let blocks = blocks_of(&page, &head, c);
        let (first, end) = head.chunk_items(c);
        // Every item of every chunk, looked up and located; a few chunks
        // only for the large pages, whose lookups each decompress a chunk.
        if window % 7 != 0 && head.chunks.len() > 64 {
            continue;
        }
        for index in first..end {
            let item = &items[index as usize];
            assert_eq!(head.chunk_for(&item.key), c);
            let found = head.find_in_chunk(c, &blocks, &item.key).unwrap();
            assert_eq!(found, Some((index, item.clone())), "{compression:?}");
            head.open_chunk(c, blocks.clone(), &mut located).unwrap();
            let at = located.lower_bound(&item.key).unwrap();
            assert_eq!(located.item(at), *item);
        }
    }
    page
}

fn compressed_chunks(page: &Bytes) -> usize {
    let head = head_of(page);
    (0..head.chunks.len())
        .filter(|&c| head.codec(c) != ChunkCodec::None)
        .count()
}

#[test]
fn compressible_items_round_trip_smaller_with_every_codec() {
    let small = items_of(120, |i| text(20 + i % 60, i as u64));
    let large = items_of(12_000, |i| text(100 + i % 60, i as u64));
    let cases = [(&small, SMALL_BLOCK, 3_808), (&large, BLOCK, 2_093_040)];
    for (items, block_size, max_page_bytes) in cases {
        let raw = round_trip(Compression::None, items, block_size, usize::MAX);
        assert_eq!(compressed_chunks(&raw), 0);
        for compression in CODECS {
            let page = round_trip(
                compression,
                items,
                block_size,
                max_page_bytes.max(raw.len()),
            );
            assert!(compressed_chunks(&page) > 0, "{compression:?}");
            assert!(
                page.len() * 10 <= raw.len() * 7,
                "{compression:?}: {} bytes against {} raw",
                page.len(),
                raw.len()
            );
            let again = serialize(items, block_size, 10, usize::MAX, compression);
            assert!(
                page == again,
                "serialisation is a pure function of the items"
            );
        }
    }
}

/// A point lookup reads one block for small items, compressed or not.
#[test]
fn chunks_of_small_items_are_one_block() {
    let items = items_of(3_000, |i| text(120, i as u64));
    for compression in CODECS {
        let page = Bytes::from(serialize(&items, BLOCK, 10, usize::MAX, compression));
        let head = head_of(&page);
        for c in 0..head.chunks.len() {
            assert_eq!(
                head.chunk_range(c).1,
                BLOCK as u64,
                "{compression:?} chunk {c}"
            );
        }
    }
}

#[test]
fn large_items_spanning_blocks_round_trip() {
    let items = items_of(40, |i| match i % 5 {
        0 => text(3_000 + 10 * i, i as u64),
        1 => random(900, i as u64),
        _ => text(30, i as u64),
    });
    for compression in CODECS {
        round_trip(compression, &items, SMALL_BLOCK, usize::MAX);
    }
    let huge = items_of(6, |i| match i {
        0 => text(crate::options::MAX_INLINE_VALUE_BYTES, 1),
        2 => random(crate::options::MAX_INLINE_VALUE_BYTES, 2),
        _ => text(70_000, i as u64),
    });
    for compression in CODECS {
        let page = round_trip(compression, &huge, BLOCK, usize::MAX);
        assert!(compressed_chunks(&page) > 0, "{compression:?}");
    }
}

/// Random values: only the chunks sampled first may be compressed (the
/// keys alone may save a few percent), the rest are stored raw untried,
/// and the page is no larger than the uncompressed one.
#[test]
fn incompressible_items_are_stored_raw() {
    let items = items_of(2_000, |i| random(100 + i % 50, i as u64));
    let raw = serialize(&items, BLOCK, 10, usize::MAX, Compression::None);
    for compression in CODECS {
        let page = round_trip(compression, &items, BLOCK, usize::MAX);
        let n = compressed_chunks(&page);
        assert!(n <= 4, "{compression:?}: {n} chunks compressed");
        assert!(page.len() <= raw.len(), "{compression:?}");
    }
    // Values and keys alike random: nothing saves, the page is the
    // uncompressed one byte for byte.
    let items: Vec<Item> = (0..2_000u64)
        .map(|i| {
            let mut key = random(16, i + (1 << 40));
            key[0] = (i >> 8) as u8;
            key[1] = i as u8;
            Item::put(key, random(120, i))
        })
        .collect();
    let raw = serialize(&items, BLOCK, 10, usize::MAX, Compression::None);
    for compression in CODECS {
        let page = round_trip(compression, &items, BLOCK, usize::MAX);
        assert!(page.as_ref() == &raw[..], "{compression:?}: other bytes");
    }
}

/// A compressed chunk damaged under valid checksums (a crafted file or a
/// writer's bug): an error at the chunk's start or at the field, from
/// every reader, never a panic.
#[test]
fn damaged_compressed_chunks_are_errors_at_the_chunk() {
    let items = items_of(300, |i| text(40 + i % 30, i as u64));
    for compression in CODECS {
        let page = serialize(&items, SMALL_BLOCK, 0, usize::MAX, compression);
        let head = head_of(&Bytes::from(page.clone()));
        let c = (0..head.chunks.len())
            .find(|&c| head.codec(c) != ChunkCodec::None)
            .expect("a compressed chunk");
        let (chunk_at, _) = head.chunk_range(c);
        let at = chunk_at as usize;
        let stored = u32_at(&page, at + 4) as usize;
        // Lengths that lie, which every read must refuse (`true`), and
        // stream bytes changed, which may decode to other items: a changed
        // literal is only caught by the block checksums these bypass.
        let mut damaged = Vec::new();
        for (field, value) in [(0, 0u32), (0, 1), (0, u32::MAX), (4, u32::MAX), (4, 1)] {
            let mut bad = page.clone();
            bad[at + field..at + field + 4].copy_from_slice(&value.to_le_bytes());
            damaged.push((bad, true));
        }
        for offset in [8, 9, 8 + stored / 2, 8 + stored - 1] {
            for byte in [0x00, 0xff, 0x5a] {
                let mut bad = page.clone();
                bad[at + offset] = byte;
                damaged.push((bad, false));
            }
        }
        for (bad, must_fail) in damaged {
            if bad == page {
                continue;
            }
            let bad = Bytes::from(leaf_with_valid_checksums(&bad));
            let head = head_of(&bad);
            let decoded = head.decode_all(&bad);
            assert!(decoded.is_ok() || must_fail || decoded.is_err(), "no panic");
            if must_fail {
                assert!(
                    decoded.is_err(),
                    "{compression:?}: lengths that lie decoded"
                );
            }
            if let Err(e) = decoded {
                // Items that decompress but changed: their chunk's
                // separator no longer separates (in the head), or they
                // are out of order (at the chunk).
                let in_head = e.offset < u64::from(head.head_len);
                let in_chunk = e
                    .offset
                    .checked_sub(chunk_at)
                    .is_some_and(|w| [0, 4, 8].contains(&w));
                assert!(in_head || in_chunk, "{compression:?}: {e:?}");
            }
            let blocks = blocks_of(&bad, &head, c);
            for item in &items[head.chunk_items(c).0 as usize..head.chunk_items(c).1 as usize] {
                // A lookup may still find an item before the damage.
                if let Err(e) = head.find_in_chunk(c, &blocks, &item.key) {
                    assert!(e.offset >= chunk_at && e.offset <= chunk_at + 8, "{e:?}");
                }
            }
            let _ = head.open_chunk(c, blocks, &mut ChunkItems::default());
        }
    }
}

/// A chunk index whose codec byte names no codec, or names one for a
/// chunk stored raw, is corruption.
#[test]
fn bad_codec_bytes_are_corruption() {
    let items = items_of(100, |i| random(30, i as u64));
    let page = serialize(&items, SMALL_BLOCK, 0, usize::MAX, Compression::None);
    // Chunk 0's entry starts the index; its codec byte follows the first
    // item and block.
    let codec_at = HEADER_BYTES + 8;
    assert_eq!(page[codec_at], 0);
    let mut unknown = page.clone();
    unknown[codec_at] = 3;
    let unknown = Bytes::from(leaf_with_valid_checksums(&unknown));
    let e = LeafHead::decode(&unknown.slice(..u32_at(&unknown, 24) as usize)).unwrap_err();
    assert_eq!(e.offset, codec_at as u64);
    let mut claims = page.clone();
    claims[codec_at] = 1;
    let claims = Bytes::from(leaf_with_valid_checksums(&claims));
    assert!(head_of(&claims).decode_all(&claims).is_err());
}

/// Costs to report, not a check: a lookup in one cached chunk (what a
/// point read does after its block is in the page cache) stored raw and
/// compressed, and serialising a 2 MiB leaf of incompressible values
/// with compression off and on (a checkpoint's CPU). Run with
/// `cargo test --release -p turtlekv --lib chunk_costs -- --ignored --nocapture`.
#[test]
#[ignore = "measures; prints numbers"]
fn chunk_costs() {
    use std::time::Instant;
    let text_items = items_of(14_000, |i| text(120, i as u64));
    let random_items = items_of(14_000, |i| random(120, i as u64));
    for compression in [
        Compression::None,
        Compression::Lz4,
        Compression::Zstd { level: 3 },
    ] {
        let page = Bytes::from(serialize(&text_items, BLOCK, 10, 2_093_040, compression));
        let head = head_of(&page);
        let probes: Vec<&Item> = text_items.iter().step_by(7).collect();
        let started = Instant::now();
        let mut found = 0;
        for _ in 0..5 {
            for item in &probes {
                let c = head.chunk_for(&item.key);
                let blocks = blocks_of(&page, &head, c);
                found += usize::from(head.find_in_chunk(c, &blocks, &item.key).unwrap().is_some());
            }
        }
        let per_lookup = started.elapsed().as_nanos() as f64 / (5 * probes.len()) as f64;
        assert_eq!(found, 5 * probes.len());
        let raw_len = serialize(&text_items, BLOCK, 10, 2_093_040, Compression::None).len();
        println!(
            "{compression}: text page {} bytes ({:.2} of raw), {} chunks, lookup in a cached chunk {per_lookup:.0} ns",
            page.len(),
            page.len() as f64 / raw_len as f64,
            head.chunks.len(),
        );
        for (what, items) in [("text", &text_items), ("random", &random_items)] {
            let started = Instant::now();
            for _ in 0..5 {
                std::hint::black_box(serialize(items, BLOCK, 10, 2_093_040, compression));
            }
            let ms = started.elapsed().as_secs_f64() * 1000.0 / 5.0;
            println!("{compression}: serialise a 2 MiB leaf of {what} values: {ms:.2} ms");
        }
    }
}
