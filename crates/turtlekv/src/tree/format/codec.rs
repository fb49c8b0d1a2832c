//! Compression of leaf chunks (`docs/format.md`, "Compressed chunks"): a
//! compressed chunk's blocks hold `raw_len` (u32), `stored_len` (u32), the
//! compressed bytes and zero padding; they decompress to the chunk's items
//! back to back. The codecs are `lz4_flex`'s raw block format and zstd.

use std::cell::RefCell;

use bytes::Bytes;

use crate::Compression;
use crate::error::DecodeError;

/// `raw_len` and `stored_len` before a compressed chunk's bytes.
pub(crate) const CHUNK_HEADER_BYTES: usize = 8;
/// Where `stored_len` lies in a compressed chunk.
const STORED_LEN_AT: usize = 4;
/// The most item bytes a compressed chunk may decompress to, in blocks of
/// its page: room for one item of `MAX_KEY_SIZE + MAX_INLINE_VALUE_BYTES` in
/// 4088-byte blocks (64.3 blocks) with its chunk's other items. A reader
/// refuses a longer `raw_len` before it allocates anything.
pub(crate) const MAX_RAW_BLOCKS: usize = 128;

/// How one chunk's bytes are stored: the `codec` byte of its index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub(crate) enum ChunkCodec {
    /// The items themselves, from the chunk's first block.
    #[default]
    None = 0,
    Lz4 = 1,
    Zstd = 2,
}

impl ChunkCodec {
    pub(crate) fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            0 => Some(Self::None),
            1 => Some(Self::Lz4),
            2 => Some(Self::Zstd),
            _ => None,
        }
    }
}

/// Most item bytes a compressed chunk of a page with `block_size`-byte
/// blocks decompresses to.
pub(crate) fn max_raw_len(block_size: usize) -> usize {
    MAX_RAW_BLOCKS * block_size
}

thread_local! {
    /// zstd contexts are costly to make (hundreds of KiB each): one of
    /// each per thread, reused by every chunk it compresses or reads.
    static ZSTD_COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
    static ZSTD_DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

/// `raw` compressed as `compression` says, with the codec that names it;
/// `None` for `Compression::None` or when the codec fails (the chunk is
/// then stored as it is).
pub(crate) fn compress(compression: Compression, raw: &[u8]) -> Option<(ChunkCodec, Vec<u8>)> {
    match compression {
        Compression::None => None,
        Compression::Lz4 => Some((ChunkCodec::Lz4, lz4_flex::block::compress(raw))),
        Compression::Zstd { level } => zstd_compress(level, raw).map(|c| (ChunkCodec::Zstd, c)),
    }
}

fn zstd_compress(level: i32, raw: &[u8]) -> Option<Vec<u8>> {
    ZSTD_COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|(l, _)| *l != level) {
            *slot = Some((level, zstd::bulk::Compressor::new(level).ok()?));
        }
        let (_, compressor) = slot.as_mut()?;
        compressor.compress(raw).ok()
    })
}

/// The item bytes of a compressed chunk whose blocks are `blocks` (a
/// whole number of `block_size`-byte blocks). An error's offset is within
/// the chunk. `codec` must not be `ChunkCodec::None`.
pub(crate) fn decompress(
    codec: ChunkCodec,
    blocks: &[u8],
    block_size: usize,
) -> Result<Bytes, DecodeError> {
    let field = |at: usize| {
        blocks
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
            .ok_or_else(|| DecodeError::new(at, "compressed chunk: cut short before its lengths"))
    };
    let (raw_len, stored_len) = (field(0)?, field(STORED_LEN_AT)?);
    if raw_len == 0 || raw_len > max_raw_len(block_size) {
        return Err(DecodeError::new(
            0,
            format!(
                "compressed chunk: raw length {raw_len} outside 1..={}",
                max_raw_len(block_size)
            ),
        ));
    }
    // The chunk occupies exactly the blocks its stored bytes need.
    let used = CHUNK_HEADER_BYTES.saturating_add(stored_len);
    if used > blocks.len() || used.div_ceil(block_size) * block_size != blocks.len() {
        return Err(DecodeError::new(
            STORED_LEN_AT,
            format!(
                "compressed chunk: stored length {stored_len} does not fit its {} bytes",
                blocks.len()
            ),
        ));
    }
    let stored = &blocks[CHUNK_HEADER_BYTES..used];
    let raw = match codec {
        ChunkCodec::Lz4 => lz4_decompress(stored, raw_len),
        ChunkCodec::Zstd => zstd_decompress(stored, raw_len),
        ChunkCodec::None => Err("not compressed".to_string()),
    };
    raw.map(Bytes::from)
        .map_err(|why| DecodeError::new(CHUNK_HEADER_BYTES, format!("compressed chunk: {why}")))
}

fn lz4_decompress(stored: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    let mut raw = vec![0; raw_len];
    match lz4_flex::block::decompress_into(stored, &mut raw) {
        Ok(n) if n == raw_len => Ok(raw),
        Ok(n) => Err(format!("lz4 gave {n} bytes, raw length says {raw_len}")),
        Err(e) => Err(format!("lz4: {e}")),
    }
}

fn zstd_decompress(stored: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    // The buffer's capacity bounds what zstd writes, whatever the frame claims.
    let mut raw = Vec::with_capacity(raw_len);
    let n = ZSTD_DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new().map_err(|e| e.to_string())?);
        }
        let decompressor = slot.as_mut().expect("made above");
        decompressor
            .decompress_to_buffer(stored, &mut raw)
            .map_err(|e| format!("zstd: {e}"))
    })?;
    if n != raw_len {
        return Err(format!("zstd gave {n} bytes, raw length says {raw_len}"));
    }
    Ok(raw)
}

/// A compressed chunk's bytes as its blocks start: the lengths, then
/// `stored` (the writer pads to the block end).
pub(crate) fn chunk_bytes(raw_len: usize, stored: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(raw_len as u32).to_le_bytes());
    out.extend_from_slice(&(stored.len() as u32).to_le_bytes());
    out.extend_from_slice(stored);
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
