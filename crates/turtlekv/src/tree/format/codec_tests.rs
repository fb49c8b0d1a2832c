use proptest::prelude::*;

use super::*;

const BLOCK: usize = 256;

fn text(len: usize, seed: u64) -> Vec<u8> {
    let words = [
        "turtle", "shell", "tree", "leaf", "buffer", "page ", "key=", "42",
    ];
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(words[(x % 8) as usize].as_bytes());
    }
    out.truncate(len);
    out
}

/// A compressed chunk of `raw` as a page holds it: lengths, bytes, padding.
fn chunk(compression: Compression, raw: &[u8]) -> (ChunkCodec, Vec<u8>) {
    let (codec, stored) = compress(compression, raw).expect("compresses");
    let mut out = Vec::new();
    chunk_bytes(raw.len(), &stored, &mut out);
    out.resize(out.len().next_multiple_of(BLOCK), 0);
    (codec, out)
}

const CODECS: [Compression; 3] = [
    Compression::Lz4,
    Compression::Zstd { level: 3 },
    Compression::Zstd { level: -1 },
];

#[test]
fn chunks_round_trip() {
    for compression in CODECS {
        for len in [1, 100, 5000, max_raw_len(BLOCK)] {
            let raw = text(len, len as u64);
            let (codec, blocks) = chunk(compression, &raw);
            assert_eq!(blocks.len() % BLOCK, 0);
            let back = decompress(codec, &blocks, BLOCK).unwrap();
            assert_eq!(back.as_ref(), &raw[..], "{compression:?} {len}");
        }
    }
    assert!(compress(Compression::None, b"abc").is_none());
}

/// Lengths that lie are errors at their fields, before any allocation
/// that a claimed length sizes.
#[test]
fn lengths_that_lie_are_errors() {
    let raw = text(3000, 7);
    for compression in CODECS {
        let (codec, blocks) = chunk(compression, &raw);
        let set = |at: usize, value: u32| {
            let mut bad = blocks.clone();
            bad[at..at + 4].copy_from_slice(&value.to_le_bytes());
            decompress(codec, &bad, BLOCK).unwrap_err()
        };
        for raw_len in [0, 2999, 3001, u32::MAX, (max_raw_len(BLOCK) + 1) as u32] {
            let e = set(0, raw_len);
            assert!(e.offset == 0 || e.offset == 8, "{raw_len}: {e:?}");
        }
        for stored_len in [u32::MAX, blocks.len() as u32, 0] {
            let e = set(4, stored_len);
            assert!(e.offset == 4 || e.offset == 8, "{stored_len}: {e:?}");
        }
        // One block more than the stored bytes need.
        let mut longer = blocks.clone();
        longer.resize(blocks.len() + BLOCK, 0);
        assert_eq!(decompress(codec, &longer, BLOCK).unwrap_err().offset, 4);
        assert!(decompress(codec, &blocks[..4], BLOCK).is_err());
        assert!(decompress(codec, &[], BLOCK).is_err());
    }
}

/// Every byte of a compressed stream flipped, one at a time: the chunk
/// decodes to the same length or is an error, never a panic.
#[test]
fn flipped_stream_bytes_are_errors_or_same_length() {
    let raw = text(4000, 11);
    for compression in CODECS {
        let (codec, blocks) = chunk(compression, &raw);
        let stored = u32::from_le_bytes(blocks[4..8].try_into().unwrap()) as usize;
        for at in CHUNK_HEADER_BYTES..CHUNK_HEADER_BYTES + stored {
            for bit in [0x01, 0x80] {
                let mut bad = blocks.clone();
                bad[at] ^= bit;
                if let Ok(out) = decompress(codec, &bad, BLOCK) {
                    assert_eq!(out.len(), raw.len(), "{compression:?} at {at}");
                }
            }
        }
    }
}

fn any_codec() -> impl Strategy<Value = ChunkCodec> {
    prop_oneof![Just(ChunkCodec::Lz4), Just(ChunkCodec::Zstd)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random bytes as a chunk, with lengths that fit its blocks or not.
    #[test]
    fn random_chunks_are_errors_not_panics(
        codec in any_codec(),
        raw_len in prop_oneof![0u32..20_000, any::<u32>()],
        stored_len in 0u32..(4 * BLOCK as u32),
        body in proptest::collection::vec(any::<u8>(), 0..4 * BLOCK),
    ) {
        let mut blocks = Vec::new();
        blocks.extend_from_slice(&raw_len.to_le_bytes());
        blocks.extend_from_slice(&stored_len.to_le_bytes());
        blocks.extend_from_slice(&body);
        blocks.resize(blocks.len().next_multiple_of(BLOCK), 0);
        if let Ok(out) = decompress(codec, &blocks, BLOCK) {
            prop_assert_eq!(out.len(), raw_len as usize);
        }
    }

    /// A real chunk with a few bytes overwritten anywhere, the lengths too.
    #[test]
    fn mutated_chunks_are_errors_not_panics(
        which in 0usize..CODECS.len(),
        len in 1usize..6000,
        seed in any::<u64>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let raw = text(len, seed);
        let (codec, mut blocks) = chunk(CODECS[which], &raw);
        for (at, byte) in edits {
            let i = at.index(blocks.len());
            blocks[i] = byte;
        }
        if let Ok(out) = decompress(codec, &blocks, BLOCK) {
            prop_assert!(out.len() <= max_raw_len(BLOCK));
        }
    }
}
