use bytes::Bytes;

use super::*;
use crate::error::DecodeError;
use crate::tree::format::chunk::ChunkItems;
use crate::tree::format::item_layout::ItemLayout;

const COMPRESSIONS: [Compression; 4] = [
    Compression::None,
    Compression::Lz4,
    Compression::Zstd { level: 3 },
    Compression::Zstd { level: -2 },
];

fn items(n: usize, value_len: impl Fn(usize) -> usize) -> Vec<Item> {
    (0..n)
        .map(|i| {
            let key = format!("key{i:06}");
            if i % 7 == 3 {
                Item::tombstone(key)
            } else {
                Item::put(key, vec![i as u8; value_len(i)])
            }
        })
        .collect()
}

/// Round-trips `items` through a page of every compression; returns the
/// uncompressed page.
fn roundtrip(items: &[Item], block_size: usize) -> Bytes {
    let pages = COMPRESSIONS.map(|c| roundtrip_as(c, items, block_size));
    pages[0].clone()
}

fn roundtrip_as(compression: Compression, items: &[Item], block_size: usize) -> Bytes {
    let page = Bytes::from(serialize(items, block_size, 10, usize::MAX, compression));
    let mut sizer = LeafSizer::new(block_size, 10);
    items.iter().for_each(|it| sizer.add(it));
    assert!(
        page.len() <= sizer.page_bytes(),
        "sizer {} < page {}",
        sizer.page_bytes(),
        page.len()
    );
    let head =
        LeafHead::decode(&page.slice(..HEADER_BYTES.max(u32_at(&page, 24) as usize))).unwrap();
    assert_eq!(head.decode_all(&page).unwrap(), items);
    // Every key is found in the chunk the index points to.
    for item in items {
        let c = head.chunk_for(&item.key);
        let (offset, len) = head.chunk_range(c);
        let blocks = page.slice(offset as usize..(offset + len) as usize);
        let chunk = head.decode_chunk(c, &blocks).unwrap();
        assert!(chunk.contains(item));
        let index = items.iter().position(|it| it == item).unwrap() as u32;
        let found = head.find_in_chunk(c, &blocks, &item.key).unwrap();
        assert_eq!(found, Some((index, item.clone())), "{compression:?}");
        let mut located = ChunkItems::default();
        head.open_chunk(c, blocks, &mut located).unwrap();
        let at = located.lower_bound(&item.key).unwrap();
        assert_eq!(located.item(at), *item, "{compression:?}");
    }
    page
}

#[test]
fn small_items_roundtrip() {
    roundtrip(&items(500, |i| i % 50), 256);
    roundtrip(&items(0, |_| 0), 256);
    roundtrip(&items(1, |_| 3), 4088);
}

#[test]
fn values_larger_than_a_block_span_blocks() {
    let page = roundtrip(&items(40, |i| if i % 5 == 0 { 3000 } else { 20 }), 512);
    assert!(page.len() > 40 * 512);
    roundtrip(&items(3, |_| crate::options::MAX_INLINE_VALUE_BYTES), 4088);
}

#[test]
fn small_item_chunks_are_one_block() {
    let page = Bytes::from(serialize(
        &items(300, |_| 30),
        512,
        10,
        usize::MAX,
        Compression::None,
    ));
    let head = LeafHead::decode(&page.slice(..u32_at(&page, 24) as usize)).unwrap();
    for c in 0..head.chunks.len() {
        assert_eq!(head.chunk_range(c).1, 512);
    }
    assert_eq!(
        (head.data_offset as usize + 16) % 512,
        0,
        "data blocks align with store blocks"
    );
}

#[test]
fn corruption_is_detected() {
    let page = serialize(&items(100, |_| 10), 256, 10, usize::MAX, Compression::None);
    let head_len = u32_at(&page, 24) as usize;
    for at in [0, 9, 50, head_len - 1] {
        let mut bad = page.clone();
        bad[at] ^= 0x10;
        assert!(
            LeafHead::decode(&Bytes::from(bad).slice(..head_len)).is_err(),
            "flip at {at}"
        );
    }
    let mut bad = page.clone();
    let last = bad.len() - 1;
    bad[last - 300] ^= 1;
    let bad = Bytes::from(bad);
    let head = LeafHead::decode(&bad.slice(..head_len)).unwrap();
    assert!(head.decode_all(&bad).is_err());
}

#[test]
fn filter_is_dropped_when_it_would_not_fit() {
    let its = items(200, |_| 4);
    let with = serialize(&its, 256, 10, usize::MAX, Compression::None);
    let without = serialize(&its, 256, 10, with.len() - 1, Compression::None);
    assert!(without.len() < with.len());
    assert_eq!(u32_at(&without, 28), 0);
}

#[test]
fn serialisation_is_deterministic() {
    let its = items(300, |i| i % 40);
    assert_eq!(
        serialize(&its, 256, 10, usize::MAX, Compression::None),
        serialize(&its, 256, 10, usize::MAX, Compression::None)
    );
    assert_eq!(
        serialize(&its, 4088, 16, usize::MAX, Compression::None),
        serialize(&its, 4088, 16, usize::MAX, Compression::None)
    );
}

/// `chunk_for` searches separator prefixes first; it must pick the chunk
/// the separators themselves pick, where prefixes tie most of all: keys
/// sharing 8-byte prefixes, keys shorter than 8 bytes, trailing zeros.
#[test]
fn chunk_for_agrees_with_the_separators() {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for stem in [&b"commonpr"[..], b"ab", b"ab\0", b"\0\0\0\0\0\0\0\0", b"z"] {
        for i in 0..60u32 {
            let mut k = stem.to_vec();
            k.extend_from_slice(&i.to_be_bytes()[(i % 4) as usize..]);
            keys.push(k);
        }
    }
    keys.sort();
    keys.dedup();
    let items: Vec<Item> = keys
        .iter()
        .map(|k| Item::put(k.clone(), vec![1; 40]))
        .collect();
    let page = Bytes::from(serialize(&items, 256, 10, usize::MAX, Compression::None));
    let head = LeafHead::decode(&page.slice(..u32_at(&page, 24) as usize)).unwrap();
    assert!(head.chunks.len() > 20, "{} chunks", head.chunks.len());
    let naive = |key: &[u8]| {
        (0..head.chunks.len())
            .filter(|&c| head.separator(c) <= key)
            .count()
            .saturating_sub(1)
    };
    let mut probes = keys.clone();
    for k in &keys {
        probes.push(k[..k.len() - 1].to_vec());
        probes.push([k.as_slice(), b"\0"].concat());
        probes.push([k.as_slice(), b"\xff"].concat());
    }
    probes.push(Vec::new());
    for probe in &probes {
        assert_eq!(head.chunk_for(probe), naive(probe), "key {probe:?}");
    }
    // Searched side by side, heads of different sizes (empty, one chunk,
    // a few, many) answer as each alone does.
    let page_of = |n: usize| {
        Bytes::from(serialize(
            &items[..n],
            256,
            10,
            usize::MAX,
            Compression::None,
        ))
    };
    let pages: Vec<Bytes> = [0, 1, 5, 40, 137, items.len()].map(page_of).into();
    let heads: Vec<LeafHead> = pages
        .iter()
        .map(|p| LeafHead::decode(&p.slice(..u32_at(p, 24) as usize)).unwrap())
        .collect();
    let refs: Vec<&LeafHead> = heads.iter().collect();
    let mut together = Vec::new();
    for probe in &probes {
        LeafHead::chunks_for(&refs, probe, &mut together);
        let alone: Vec<usize> = heads.iter().map(|h| h.chunk_for(probe)).collect();
        assert_eq!(together, alone, "key {probe:?}");
    }
    LeafHead::chunks_for(&[], b"k", &mut together);
    assert!(together.is_empty());
}

/// `chunk_of_item_from` looks at the next chunk before it searches; it
/// must give the later of the starting chunk and the chunk a full search
/// over the index finds.
#[test]
fn chunk_of_item_from_is_the_later_of_both() {
    let items: Vec<Item> = (0..400u32)
        .map(|i| Item::put(i.to_be_bytes().to_vec(), vec![1; 20 + (i % 50) as usize]))
        .collect();
    let page = Bytes::from(serialize(&items, 256, 10, usize::MAX, Compression::None));
    let head = LeafHead::decode(&page.slice(..u32_at(&page, 24) as usize)).unwrap();
    assert!(head.chunks.len() > 20, "{} chunks", head.chunks.len());
    for from in 0..head.chunks.len() {
        for index in 0..=items.len() as u32 {
            assert_eq!(
                head.chunk_of_item_from(from, index),
                from.max(
                    head.chunks
                        .partition_point(|c| c.first_item <= index)
                        .saturating_sub(1)
                ),
                "from chunk {from}, item {index}"
            );
        }
    }
}

#[test]
fn pages_of_every_version_are_read() {
    let its = items(400, |i| if i % 41 == 0 { 700 } else { i % 130 });
    for version in [1, 2, 3] {
        let layout = version_format(version).unwrap().0;
        let page = Bytes::from(serialize_as(version, &its, 512, 10, usize::MAX));
        assert_eq!(u16::from_le_bytes([page[4], page[5]]), version);
        let head = LeafHead::decode(&page.slice(..u32_at(&page, 24) as usize)).unwrap();
        assert_eq!(head.item_layout, layout);
        assert_eq!(head.decode_all(&page).unwrap(), its, "{layout:?}");
        for (index, item) in its.iter().enumerate() {
            let c = head.chunk_for(&item.key);
            let (offset, len) = head.chunk_range(c);
            let blocks = page.slice(offset as usize..(offset + len) as usize);
            let found = head.find_in_chunk(c, &blocks, &item.key).unwrap();
            assert_eq!(found, Some((index as u32, item.clone())), "{layout:?}");
            let mut located = ChunkItems::default();
            head.open_chunk(c, blocks, &mut located).unwrap();
            let at = located.lower_bound(&item.key).unwrap();
            assert_eq!(located.item(at), *item, "{layout:?}");
        }
    }
}

#[test]
fn version_2_items_fit_one_more_benchmark_record_per_block() {
    // YCSB's records: 8-byte keys, 120-byte values. Version 1 items take
    // 135 bytes, 30 to a 4088-byte block; version 2 items 130, 31.
    let its: Vec<Item> = (0..3100)
        .map(|i| Item::put(format!("k{i:07}"), vec![7; 120]))
        .collect();
    let blocks = |version| {
        let page = serialize_as(version, &its, 4088, 0, usize::MAX);
        u32_at(&page, 16)
    };
    assert_eq!(blocks(1), 3100_u32.div_ceil(30));
    assert_eq!(blocks(2), 3100_u32.div_ceil(31));
    assert_eq!(blocks(3), 3100_u32.div_ceil(31));
    assert_eq!(ItemLayout::CURRENT.item_len(8, Some(120)), 130);
    // Buffers count every item in the version 1 measure, whatever its page.
    assert_eq!(its[0].size_bytes(), 135);
}

/// A chunk index entry: first item, first block, separator, and the codec
/// byte of a version-3 page.
type IndexEntry = (u32, u32, Vec<u8>, Option<u8>);

/// `page` (of no filter) with its head rebuilt after `edit` changed the
/// header's fields (item count, chunk count, block count, block size,
/// head length, filter length, data offset; the head length is set
/// afterwards) or the chunk index, checksums recomputed as a crafted file
/// would have them. The head may grow into the padding before the data.
fn rebuilt(page: &[u8], edit: impl FnOnce(&mut [u32; 7], &mut Vec<IndexEntry>)) -> Bytes {
    let mut fields: [u32; 7] = std::array::from_fn(|i| u32_at(page, 8 + 4 * i));
    assert_eq!(fields[5], 0, "a page without a filter");
    let has_codec = version_format(u16::from_le_bytes([page[4], page[5]]))
        .unwrap()
        .1;
    let fixed = index_entry_fixed_bytes(has_codec);
    let mut at = HEADER_BYTES;
    let mut index = Vec::new();
    for _ in 0..fields[1] {
        let sep_len = u16::from_le_bytes([page[at + fixed - 2], page[at + fixed - 1]]) as usize;
        let sep = page[at + fixed..at + fixed + sep_len].to_vec();
        let codec = has_codec.then(|| page[at + 8]);
        index.push((u32_at(page, at), u32_at(page, at + 4), sep, codec));
        at += fixed + sep_len;
    }
    let block_crcs = page[at..fields[4] as usize].to_vec();
    edit(&mut fields, &mut index);
    let mut head = page[..HEADER_BYTES].to_vec();
    for (item, block, sep, codec) in &index {
        head.extend_from_slice(&item.to_le_bytes());
        head.extend_from_slice(&block.to_le_bytes());
        head.extend(codec);
        head.extend_from_slice(&(sep.len() as u16).to_le_bytes());
        head.extend_from_slice(sep);
    }
    head.extend_from_slice(&block_crcs);
    fields[1] = index.len() as u32;
    fields[4] = head.len() as u32;
    for (i, field) in fields.iter().enumerate() {
        head[8 + 4 * i..12 + 4 * i].copy_from_slice(&field.to_le_bytes());
    }
    let mut out = page.to_vec();
    assert!(
        head.len() <= u32_at(page, 32) as usize,
        "the head outgrew its room"
    );
    out[..head.len()].copy_from_slice(&head);
    Bytes::from(crate::tree::fuzz_hook::leaf_with_valid_checksums(&out))
}

fn head_of(page: &Bytes) -> Result<LeafHead, DecodeError> {
    LeafHead::decode(&page.slice(..u32_at(page, 24) as usize))
}

/// Chunk indexes a writer never makes, with valid checksums: lookups go
/// by the index alone, so each would have searched the wrong chunk or
/// read the head as items, and answered "not found" instead of reporting
/// corruption.
#[test]
fn crafted_chunk_indexes_are_corruption() {
    let its = items(200, |i| i % 20);
    let page = serialize(&its, 256, 0, usize::MAX, Compression::None);
    let same = rebuilt(&page, |_, _| {});
    assert_eq!(same.as_ref(), &page[..], "the rebuild is exact");
    assert_eq!(head_of(&same).unwrap().decode_all(&same).unwrap(), its);
    let cases = [
        (
            "chunk 0 starts at item 1",
            rebuilt(&page, |_, index| index[0].0 = 1),
        ),
        (
            "chunk 0 has a separator",
            rebuilt(&page, |_, index| index[0].2 = b"a".to_vec()),
        ),
        (
            "separators out of order",
            rebuilt(&page, |_, index| {
                let first = std::mem::take(&mut index[1].2);
                index[1].2 = std::mem::replace(&mut index[2].2, first);
            }),
        ),
        (
            "data overlapping the head",
            rebuilt(&page, |fields, _| fields[6] = 48),
        ),
    ];
    for (what, page) in cases {
        assert!(head_of(&page).is_err(), "{what}");
    }
    // A separator above its chunk's first key, still below the next one:
    // only the items show it.
    let page = rebuilt(&page, |_, index| {
        let first = &its[index[1].0 as usize].key;
        index[1].2 = [first.as_ref(), b"\0"].concat();
    });
    let head = head_of(&page).expect("the index alone is in order");
    assert!(head.decode_all(&page).is_err());
}

/// Items holding value pointers keep their kind through pages of every
/// compression, which are then of version 4; pages without them stay
/// version 3, which builds before value files read.
#[test]
fn value_pointers_keep_their_kind_and_mark_the_page_version_4() {
    use crate::values::Value;
    let mut with_pointers = items(300, |i| i % 40);
    for (i, item) in with_pointers.iter_mut().enumerate() {
        if i % 5 == 1 {
            let pointer = Bytes::from(vec![i as u8; 12]);
            item.value = Some(Value::Pointer(pointer));
        }
    }
    let page = roundtrip(&with_pointers, 512);
    assert_eq!(
        u16::from_le_bytes([page[4], page[5]]),
        VERSION_WITH_POINTERS
    );
    let page = roundtrip(&items(300, |i| i % 40), 512);
    assert_eq!(u16::from_le_bytes([page[4], page[5]]), VERSION);
}
