//! Page images: a page is a run of self-verifying blocks (layout in
//! `docs/format.md`, "Blocks" and "Page payload"). Every block carries its
//! own checksum so that a range read verifies only the blocks it touches.

use bytes::{Bytes, BytesMut};

use super::{PageId, PageKind};
use crate::error::DecodeError;
use crate::io::DIRECT_IO_ALIGN_BYTES;

/// Bytes at the end of every block: `used_bytes` and the CRC32C.
pub(crate) const BLOCK_TRAILER_BYTES: usize = 8;
/// Bytes at the start of every page stream: magic, length, page id.
pub(crate) const PAGE_HEADER_BYTES: usize = 16;
const PAGE_MAGIC: &[u8; 4] = b"TKPG";
/// Where the page header keeps the contents' length and the page id.
const HEADER_LEN_AT: usize = 4;
const HEADER_ID_AT: usize = 8;

/// Block and slot sizes of one page kind, and how its block checksums
/// are seeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub block_bytes: usize,
    pub slot_bytes: u64,
    /// The CRC32C state every block checksum starts from: that of the
    /// database identity's bytes (`util::identity::checksum_seed`), so a
    /// block of another database never verifies; 0 starts from nothing.
    pub checksum_seed: u32,
    /// A block whose seeded checksum fails may verify unseeded: blocks a
    /// database upgraded from an earlier build wrote before it had an
    /// identity.
    pub accept_unseeded: bool,
}

impl Geometry {
    /// The geometry of `kind` for the given page sizes (validated options).
    pub fn new(kind: PageKind, node_size_bytes: u64, leaf_size_bytes: u64) -> Geometry {
        let slot_bytes = match kind {
            PageKind::Node => node_size_bytes,
            PageKind::Leaf => leaf_size_bytes,
        };
        let block_bytes = (slot_bytes as usize).min(DIRECT_IO_ALIGN_BYTES);
        debug_assert_eq!(slot_bytes % block_bytes as u64, 0);
        Geometry {
            block_bytes,
            slot_bytes,
            checksum_seed: 0,
            accept_unseeded: false,
        }
    }

    /// The same geometry with block checksums seeded by `checksum_seed`,
    /// also accepting unseeded ones with `accept_unseeded`.
    pub fn with_checksum_seed(self, checksum_seed: u32, accept_unseeded: bool) -> Geometry {
        Geometry {
            checksum_seed,
            accept_unseeded,
            ..self
        }
    }

    /// Payload bytes per block.
    pub fn payload_bytes(&self) -> usize {
        self.block_bytes - BLOCK_TRAILER_BYTES
    }

    /// Blocks per slot.
    pub fn slot_blocks(&self) -> u32 {
        (self.slot_bytes / self.block_bytes as u64) as u32
    }

    /// Largest page content, in bytes, that fits one slot.
    pub fn capacity_bytes(&self) -> usize {
        self.slot_blocks() as usize * self.payload_bytes() - PAGE_HEADER_BYTES
    }

    /// Where byte `offset` of a page's contents lies in the page's image:
    /// past the page header, in block `(16 + offset) / payload`, before
    /// that block's trailer (`docs/format.md`, "Page payload").
    pub fn content_offset_in_image(&self, offset: u64) -> u64 {
        let stream = offset.saturating_add(PAGE_HEADER_BYTES as u64);
        let payload = self.payload_bytes() as u64;
        (stream / payload).saturating_mul(self.block_bytes as u64) + stream % payload
    }

    /// Blocks needed for a page of `len_bytes` content bytes.
    pub fn blocks_for(&self, len_bytes: usize) -> u32 {
        (PAGE_HEADER_BYTES + len_bytes).div_ceil(self.payload_bytes()) as u32
    }

    /// Writes the image of page `id` holding `data` into `out`, which must be
    /// exactly `id.blocks()` blocks long (and zeroed or reused: every byte is
    /// overwritten).
    pub fn encode(&self, id: PageId, data: &[u8], out: &mut [u8]) {
        let payload_bytes = self.payload_bytes();
        debug_assert_eq!(id.blocks(), self.blocks_for(data.len()));
        debug_assert_eq!(out.len(), id.blocks() as usize * self.block_bytes);
        let mut header = [0u8; PAGE_HEADER_BYTES];
        header[..4].copy_from_slice(PAGE_MAGIC);
        header[4..8].copy_from_slice(&(data.len() as u32).to_le_bytes());
        header[8..16].copy_from_slice(&id.to_raw().to_le_bytes());
        let stream_len = PAGE_HEADER_BYTES + data.len();
        for (index, block) in out.chunks_exact_mut(self.block_bytes).enumerate() {
            let (payload, trailer) = block.split_at_mut(payload_bytes);
            let start = index * payload_bytes;
            let used = (stream_len - start).min(payload_bytes);
            // The stream is the header followed by the data; only block 0
            // holds header bytes (a payload is far larger than the header).
            let mut filled = 0;
            if start < PAGE_HEADER_BYTES {
                filled = PAGE_HEADER_BYTES - start;
                payload[..filled].copy_from_slice(&header[start..]);
            }
            let data_start = start + filled - PAGE_HEADER_BYTES;
            let data_end = start + used - PAGE_HEADER_BYTES;
            payload[filled..used].copy_from_slice(&data[data_start..data_end]);
            payload[used..].fill(0);
            trailer[..4].copy_from_slice(&(used as u32).to_le_bytes());
            let crc = block_crc(self.checksum_seed, id, index as u32, payload, used as u32);
            trailer[4..].copy_from_slice(&crc.to_le_bytes());
        }
    }

    /// Checks block `index` of page `id` and returns its used payload
    /// bytes. An error's offset is in the page's image: the block's start
    /// for a checksum mismatch, else the field that failed (`used_bytes`
    /// in the trailer, or a field of the page header in block 0).
    pub fn verify_block<'a>(
        &self,
        id: PageId,
        index: u32,
        block: &'a [u8],
    ) -> Result<&'a [u8], DecodeError> {
        let offset_in_page = index as usize * self.block_bytes;
        let bad = |reason: String| DecodeError::new(offset_in_page, reason);
        debug_assert_eq!(block.len(), self.block_bytes);
        let (payload, trailer) = block.split_at(self.payload_bytes());
        let used = u32::from_le_bytes(trailer[..4].try_into().expect("4 bytes"));
        let stored_crc = u32::from_le_bytes(trailer[4..].try_into().expect("4 bytes"));
        let crc = block_crc(self.checksum_seed, id, index, payload, used);
        if crc != stored_crc
            && !(self.accept_unseeded && block_crc(0, id, index, payload, used) == stored_crc)
        {
            return Err(bad(format!(
                "checksum mismatch in block {index} of page {:#x}: stored {stored_crc:#010x}, computed {crc:#010x}",
                id.to_raw()
            )));
        }
        let last = index + 1 == id.blocks();
        let used = used as usize;
        if used == 0 || used > payload.len() || (!last && used != payload.len()) {
            return Err(DecodeError::new(
                offset_in_page + self.payload_bytes(),
                format!(
                    "block {index} of page {:#x} claims {used} used bytes",
                    id.to_raw()
                ),
            ));
        }
        if index == 0 {
            // Block 0 starts the image: the header's offsets are the image's.
            check_header(id, payload, used, self)?;
        }
        Ok(&payload[..used])
    }

    /// Writes block `index` of page `id` a new trailer checksum, under
    /// this geometry's seed: a block verified under another database's
    /// identity becomes this one's (a backup's copy, `page::copy`). The
    /// payload and `used_bytes` stay as they are.
    pub fn reseal_block(&self, id: PageId, index: u32, block: &mut [u8]) {
        debug_assert_eq!(block.len(), self.block_bytes);
        let (payload, trailer) = block.split_at_mut(self.payload_bytes());
        let used = u32::from_le_bytes(trailer[..4].try_into().expect("4 bytes"));
        let crc = block_crc(self.checksum_seed, id, index, payload, used);
        trailer[4..].copy_from_slice(&crc.to_le_bytes());
    }

    /// Verifies a whole page image and returns its content. An error's
    /// offset is in the image (`verify_block`; the last block's start when
    /// the blocks hold other than the header's length).
    pub fn decode(&self, id: PageId, image: &[u8]) -> Result<Bytes, DecodeError> {
        debug_assert_eq!(image.len(), id.blocks() as usize * self.block_bytes);
        let mut content = BytesMut::with_capacity(image.len());
        for (index, block) in image.chunks_exact(self.block_bytes).enumerate() {
            let used = self.verify_block(id, index as u32, block)?;
            let skip = if index == 0 { PAGE_HEADER_BYTES } else { 0 };
            content.extend_from_slice(&used[skip..]);
        }
        // `check_header` ties the header's length to the block count and to
        // block 0's used bytes, but a block read alone cannot know the last
        // block's share: a crafted last block (its checksum recomputed) could
        // claim fewer or more bytes than the header says.
        let header_len_bytes = header_len(image) as usize;
        if content.len() != header_len_bytes {
            return Err(DecodeError::new(
                (id.blocks() - 1) as usize * self.block_bytes,
                format!(
                    "page {:#x}: its blocks hold {} bytes, its header says {header_len_bytes}",
                    id.to_raw(),
                    content.len()
                ),
            ));
        }
        Ok(content.freeze())
    }
}

fn header_len(block0: &[u8]) -> u32 {
    u32::from_le_bytes(block0[4..8].try_into().expect("4 bytes"))
}

/// Checks the page header in block 0 against the id it was read by; an
/// error is at the header field that failed.
fn check_header(id: PageId, payload: &[u8], used: usize, g: &Geometry) -> Result<(), DecodeError> {
    if used < PAGE_HEADER_BYTES || &payload[..4] != PAGE_MAGIC {
        return Err(DecodeError::new(
            0,
            format!("page {:#x} has no page header", id.to_raw()),
        ));
    }
    let stored_id = u64::from_le_bytes(payload[8..16].try_into().expect("8 bytes"));
    if stored_id != id.to_raw() {
        return Err(DecodeError::new(
            HEADER_ID_AT,
            format!(
                "page {:#x} holds the header of page {stored_id:#x}",
                id.to_raw()
            ),
        ));
    }
    let len_bytes = header_len(payload) as usize;
    if g.blocks_for(len_bytes) != id.blocks() || len_bytes > g.capacity_bytes() {
        return Err(DecodeError::new(
            HEADER_LEN_AT,
            format!(
                "page {:#x} of {} blocks claims {len_bytes} bytes",
                id.to_raw(),
                id.blocks()
            ),
        ));
    }
    let blocks = id.blocks() as usize;
    let expected_used = if blocks == 1 {
        PAGE_HEADER_BYTES + len_bytes
    } else {
        g.payload_bytes()
    };
    if used != expected_used {
        return Err(DecodeError::new(
            HEADER_LEN_AT,
            format!(
                "page {:#x}: header length {len_bytes} disagrees with block 0",
                id.to_raw()
            ),
        ));
    }
    Ok(())
}

/// CRC32C, continued from `checksum_seed` (the database identity's), over
/// page id, block index, payload and used-byte count, so a block only
/// verifies in the database and at the place it was written for.
fn block_crc(checksum_seed: u32, id: PageId, index: u32, payload: &[u8], used: u32) -> u32 {
    let mut seed = [0u8; 12];
    seed[..8].copy_from_slice(&id.to_raw().to_le_bytes());
    seed[8..].copy_from_slice(&index.to_le_bytes());
    let crc = crc32c::crc32c_append(checksum_seed, &seed);
    let crc = crc32c::crc32c_append(crc, payload);
    crc32c::crc32c_append(crc, &used.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf_geometry() -> Geometry {
        Geometry::new(PageKind::Leaf, 4096, 64 * 1024)
    }

    fn encoded(g: &Geometry, slot: u64, data: &[u8]) -> (PageId, Vec<u8>) {
        let id = PageId::new(PageKind::Leaf, slot, g.blocks_for(data.len()), 1);
        let mut image = vec![0xAAu8; id.blocks() as usize * g.block_bytes];
        g.encode(id, data, &mut image);
        (id, image)
    }

    #[test]
    fn capacities_match_the_documented_figures() {
        assert_eq!(
            Geometry::new(PageKind::Node, 4096, 2 << 20).capacity_bytes(),
            4072
        );
        assert_eq!(
            Geometry::new(PageKind::Leaf, 4096, 2 << 20).capacity_bytes(),
            2_093_040
        );
        let small = Geometry::new(PageKind::Node, 512, 4096);
        assert_eq!((small.block_bytes, small.capacity_bytes()), (512, 488));
    }

    /// A content byte's offset in the image, found by its value in a real
    /// image: past the 16-byte page header in block 0, and past each
    /// earlier block's trailer after it.
    #[test]
    fn content_offsets_map_through_the_blocks() {
        let g = Geometry {
            block_bytes: 512,
            slot_bytes: 4096,
            checksum_seed: 0,
            accept_unseeded: false,
        };
        let data: Vec<u8> = (0..2000u32).map(|i| (i % 251) as u8).collect();
        let (_, image) = encoded(&g, 0, &data);
        for offset in [0u64, 1, 487, 488, 489, 991, 992, 1999] {
            let at = g.content_offset_in_image(offset) as usize;
            assert_eq!(image[at], data[offset as usize], "content byte {offset}");
            assert!(at % 512 < 504, "{offset} lands in a trailer");
        }
        assert_eq!(g.content_offset_in_image(0), 16);
        assert_eq!(g.content_offset_in_image(488), 512);
        assert_eq!(g.content_offset_in_image(489), 513);
    }

    /// Header and trailer fields that fail, their block's checksum
    /// recomputed, are reported at the field.
    #[test]
    fn crafted_header_and_trailer_fields_are_reported_at_the_field() {
        let g = leaf_geometry();
        let reseal = |id: PageId, image: &mut [u8], index: usize| {
            let block = &mut image[index * g.block_bytes..][..g.block_bytes];
            let (payload, trailer) = block.split_at_mut(g.payload_bytes());
            let used = u32::from_le_bytes(trailer[..4].try_into().unwrap());
            let crc = block_crc(g.checksum_seed, id, index as u32, payload, used);
            trailer[4..].copy_from_slice(&crc.to_le_bytes());
        };
        let (id, image) = encoded(&g, 0, &[7u8; 5000]);
        let mut bad = image.clone();
        bad[HEADER_ID_AT] ^= 1;
        reseal(id, &mut bad, 0);
        assert_eq!(g.decode(id, &bad).unwrap_err().offset, 8, "page id");
        let mut bad = image.clone();
        bad[HEADER_LEN_AT + 2] ^= 1;
        reseal(id, &mut bad, 0);
        assert_eq!(g.decode(id, &bad).unwrap_err().offset, 4, "length");
        let mut bad = image.clone();
        let used_at = g.block_bytes + g.payload_bytes();
        bad[used_at..used_at + 4].copy_from_slice(&0u32.to_le_bytes());
        reseal(id, &mut bad, 1);
        assert_eq!(
            g.decode(id, &bad).unwrap_err().offset,
            used_at as u64,
            "used bytes"
        );
    }

    #[test]
    fn pages_of_every_size_round_trip() {
        let g = leaf_geometry();
        for len in [0, 1, 4072, 4073, 4088, 10_000, g.capacity_bytes()] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let (id, image) = encoded(&g, 3, &data);
            assert_eq!(g.decode(id, &image).unwrap(), data);
        }
    }

    #[test]
    fn every_flipped_bit_is_caught() {
        let g = Geometry {
            block_bytes: 512,
            slot_bytes: 4096,
            checksum_seed: crate::util::identity::checksum_seed(77),
            accept_unseeded: false,
        };
        let (id, image) = encoded(&g, 0, &[0x5Au8; 1000]);
        for bit in 0..image.len() * 8 {
            let mut bad = image.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            let err = g.decode(id, &bad).unwrap_err();
            assert_eq!(err.offset, (bit / 8 / 512 * 512) as u64);
        }
    }

    #[test]
    fn a_block_is_bound_to_its_page_and_position() {
        let g = leaf_geometry();
        let (id, image) = encoded(&g, 5, &vec![1u8; 9000]);
        let other = PageId::new(PageKind::Leaf, 5, id.blocks(), 2);
        assert!(g.decode(other, &image).is_err());
        let mut swapped = image.clone();
        swapped.copy_within(0..4096, 4096);
        assert!(g.decode(id, &swapped).is_err());
        let block1 = &image[4096..8192];
        assert_eq!(g.verify_block(id, 1, block1).unwrap().len(), 4088);
        assert!(g.verify_block(id, 2, block1).is_err());
    }

    /// A last block whose used bytes disagree with the header (checksum
    /// recomputed, as a crafted file could) is corruption, not a shorter
    /// page: unchecked, release builds would return the short page.
    #[test]
    fn a_last_block_disagreeing_with_the_header_is_corruption() {
        let g = leaf_geometry();
        for claimed in [100u32, 4088] {
            let (id, mut image) = encoded(&g, 0, &[7u8; 5000]);
            assert_eq!(id.blocks(), 2);
            let block = &mut image[g.block_bytes..];
            let (payload, trailer) = block.split_at_mut(g.payload_bytes());
            trailer[..4].copy_from_slice(&claimed.to_le_bytes());
            let crc = block_crc(g.checksum_seed, id, 1, payload, claimed);
            trailer[4..].copy_from_slice(&crc.to_le_bytes());
            let err = g.decode(id, &image).unwrap_err();
            assert_eq!(err.offset, 4096, "{}", err.what);
        }
    }

    /// A block written for one database fails in another; an unseeded
    /// block (an earlier build's) verifies only where that is allowed.
    #[test]
    fn a_block_is_bound_to_its_database() {
        use crate::util::identity::checksum_seed;
        let ours = leaf_geometry().with_checksum_seed(checksum_seed(1), false);
        let theirs = leaf_geometry().with_checksum_seed(checksum_seed(2), false);
        let (id, image) = encoded(&ours, 4, &vec![3u8; 9000]);
        assert!(ours.decode(id, &image).is_ok());
        let err = theirs.decode(id, &image).unwrap_err();
        assert!(err.what.contains("checksum mismatch"), "{}", err.what);
        let (id, unseeded) = encoded(&leaf_geometry(), 4, &vec![3u8; 9000]);
        assert!(ours.decode(id, &unseeded).is_err());
        let upgraded = ours.with_checksum_seed(checksum_seed(1), true);
        assert!(upgraded.decode(id, &unseeded).is_ok());
        assert!(upgraded.decode(id, &image).is_ok());
        let (id, foreign) = encoded(&theirs, 4, &vec![3u8; 9000]);
        assert!(upgraded.decode(id, &foreign).is_err());
    }
}
