//! The one reader of node page bytes (`docs/format.md`, "Node pages"):
//! header, pivots, segments and flushed bounds, field by field, without
//! copying. Every bounds and structure check of the layout is here, so the
//! full decode into an in-memory node (`Node::decode`, for updates,
//! `check()` and open's live-set walk) and the read path's lookup index
//! (`NodeIndex::parse`) accept and refuse the same pages. Each builds what
//! it keeps from the fields: the decode copies keys out, the index keeps
//! their positions in the page.
//!
//! What the two do beyond the reader: the decode verifies the node's
//! checksum (`Header::parse`; the index trusts the page store's block
//! checksums, `Header::parse_trusted`), bounds the sum of the pending
//! bytes, and checks each pivot's flushed key (the last of its entries,
//! which the node keeps) against the next pivot's key; the index checks
//! every flushed key entry so (it keeps every entry, and a lookup takes
//! the last). Both checks use `check_flushed_key`.
//!
//! Errors are `DecodeError`s at the offset of the failing field within the
//! page's contents, or at 0 for the node's own checksum, which covers the
//! whole page.

use std::ops::Range;

use super::node::{HEADER_BYTES, LeafRef, MAX_LEVELS};
use crate::error::DecodeError;
use crate::page::PageId;

pub(in crate::tree) const MAGIC: &[u8; 4] = b"TKND";
pub(in crate::tree) const VERSION: u8 = 1;

/// The fixed header of a node page, checked.
#[derive(Clone, Copy, Debug)]
pub(in crate::tree) struct Header {
    pub height: u8,
    pub pivot_count: usize,
    pub segment_count: usize,
}

impl Header {
    /// Checks magic, version, length and checksum; returns a reader at the
    /// first pivot.
    pub(in crate::tree) fn parse(bytes: &[u8]) -> Result<(Header, NodeReader<'_>), DecodeError> {
        Self::parse_checked(bytes, true)
    }

    /// `parse` without recomputing the node's checksum, for pages the page
    /// store read and verified block by block (point lookups and scans,
    /// which would otherwise checksum every node they pass on every
    /// lookup). Everything else is still checked as it is read.
    pub(in crate::tree) fn parse_trusted(
        bytes: &[u8],
    ) -> Result<(Header, NodeReader<'_>), DecodeError> {
        Self::parse_checked(bytes, false)
    }

    fn parse_checked(
        bytes: &[u8],
        verify_crc: bool,
    ) -> Result<(Header, NodeReader<'_>), DecodeError> {
        if bytes.len() < HEADER_BYTES {
            return Err(DecodeError::new(
                0,
                format!(
                    "node: page of {} bytes is shorter than its header",
                    bytes.len()
                ),
            ));
        }
        if &bytes[..4] != MAGIC {
            return Err(DecodeError::new(0, "node: bad magic"));
        }
        if bytes[4] != VERSION {
            return Err(DecodeError::new(
                4,
                format!("node: unknown format version {}", bytes[4]),
            ));
        }
        let u16_at = |at: usize| usize::from(u16::from_le_bytes([bytes[at], bytes[at + 1]]));
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        if u32_at(12) as usize != bytes.len() {
            return Err(DecodeError::new(
                12,
                "node: length field does not match the page",
            ));
        }
        if verify_crc {
            let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[..16]), &bytes[HEADER_BYTES..]);
            if u32_at(16) != crc {
                return Err(DecodeError::new(0, "node: checksum mismatch"));
            }
        }
        let header = Header {
            height: bytes[5],
            pivot_count: u16_at(6),
            segment_count: u16_at(8),
        };
        if header.height == 0 {
            return Err(DecodeError::new(5, "node: zero height"));
        }
        if header.pivot_count == 0 {
            return Err(DecodeError::new(6, "node: no pivots"));
        }
        let reader = NodeReader {
            bytes,
            at: HEADER_BYTES,
            header,
            pivots_read: 0,
            previous_key: 0..0,
            segments_read: 0,
            previous_level: 0,
        };
        Ok((header, reader))
    }
}

/// One pivot entry.
#[derive(Clone, Debug)]
pub(in crate::tree) struct PivotField {
    /// The child's page id as stored.
    child: u64,
    /// The child leaf's `head_len` and `filter_len` (height 1 only).
    leaf_lens: Option<(u32, u32)>,
    pub pending_bytes: u64,
    /// Where `pending_bytes` lies in the page.
    pub pending_at: usize,
    /// The lower key's bytes in the page; empty for pivot 0, which has none.
    pub lower: Range<u32>,
}

impl PivotField {
    /// The child leaf (height 1), or `None` for a child node.
    pub(in crate::tree) fn child_leaf(&self) -> Option<LeafRef> {
        self.leaf_lens.map(|(head_len, filter_len)| LeafRef {
            id: PageId::from_raw(self.child),
            head_len,
            filter_len,
        })
    }

    /// The child's page.
    pub(in crate::tree) fn child_id(&self) -> PageId {
        PageId::from_raw(self.child)
    }
}

/// One segment entry, up to its flushed bounds (read next, one by one).
#[derive(Clone, Debug)]
pub(in crate::tree) struct SegmentField<'a> {
    pub level: u8,
    pub shared: bool,
    pub leaf: LeafRef,
    pub item_count: u32,
    pub first_pivot: usize,
    pub pivot_span: usize,
    /// The active bit set's bytes in the page.
    pub active_bits: Range<u32>,
    bits: &'a [u8],
    pub bound_count: usize,
}

impl SegmentField<'_> {
    /// Whether the segment still holds unflushed items for `pivot`.
    pub(in crate::tree) fn is_active(&self, pivot: usize) -> bool {
        is_active(self.bits, self.first_pivot, self.pivot_span, pivot)
    }
}

/// Whether bit `pivot - first_pivot` of `bits` is set, for a pivot within
/// `first_pivot..first_pivot + pivot_span` (`bits` holds the span's bits).
pub(in crate::tree) fn is_active(
    bits: &[u8],
    first_pivot: usize,
    pivot_span: usize,
    pivot: usize,
) -> bool {
    (first_pivot..first_pivot + pivot_span).contains(&pivot)
        && bits[(pivot - first_pivot) / 8] >> ((pivot - first_pivot) % 8) & 1 == 1
}

/// One flushed bound entry of a segment.
#[derive(Clone, Debug)]
pub(in crate::tree) struct BoundField {
    pub pivot: usize,
    /// Index of the first unflushed item: within `1..=item_count`.
    pub index: u32,
    /// The flushed key's bytes in the page.
    pub key: Range<u32>,
}

/// Reads a node page's entries in their order: `header.pivot_count` pivots
/// (`next_pivot`), then `header.segment_count` segments (`next_segment`),
/// each followed by its `bound_count` bounds (`next_bound`), then `finish`.
#[derive(Debug)]
pub(in crate::tree) struct NodeReader<'a> {
    bytes: &'a [u8],
    at: usize,
    header: Header,
    pivots_read: usize,
    /// The previous pivot's key, which the next must be above.
    previous_key: Range<u32>,
    segments_read: usize,
    /// The previous segment's level, which the next must not be below.
    previous_level: u8,
}

impl<'a> NodeReader<'a> {
    /// The bytes of a span the reader returned.
    pub(in crate::tree) fn bytes(&self, span: &Range<u32>) -> &'a [u8] {
        &self.bytes[span.start as usize..span.end as usize]
    }

    /// The next `n` bytes of the page, or an error at the field they start.
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let out = self
            .at
            .checked_add(n)
            .and_then(|end| self.bytes.get(self.at..end))
            .ok_or_else(|| DecodeError::new(self.at, "node: truncated"))?;
        self.at += n;
        Ok(out)
    }

    /// The next `n` bytes as a span of the page (pages are far below 4 GiB).
    fn take_span(&mut self, n: usize) -> Result<Range<u32>, DecodeError> {
        let start = self.at;
        self.take(n)?;
        Ok(start as u32..self.at as u32)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn leaf_ref(&mut self) -> Result<LeafRef, DecodeError> {
        Ok(LeafRef {
            id: PageId::from_raw(self.u64()?),
            head_len: self.u32()?,
            filter_len: self.u32()?,
        })
    }

    /// The next pivot. Pivot 0 has no key; every other's is not empty and
    /// lies above the previous one's, or a lookup would follow the wrong
    /// child.
    pub(in crate::tree) fn next_pivot(&mut self) -> Result<PivotField, DecodeError> {
        debug_assert!(self.pivots_read < self.header.pivot_count);
        let i = self.pivots_read;
        let (child, leaf_lens) = if self.header.height == 1 {
            let leaf = self.leaf_ref()?;
            (leaf.id.to_raw(), Some((leaf.head_len, leaf.filter_len)))
        } else {
            (self.u64()?, None)
        };
        let pending_at = self.at;
        let pending_bytes = self.u64()?;
        let lower = if i == 0 {
            self.take_span(0)?
        } else {
            let len = usize::from(self.u16()?);
            self.take_span(len)?
        };
        let key = self.bytes(&lower);
        let ordered = match i {
            0 => true,
            1 => !key.is_empty(),
            _ => self.bytes(&self.previous_key) < key,
        };
        if !ordered {
            return Err(DecodeError::new(
                lower.start as usize,
                format!("node: pivot key {i} out of order"),
            ));
        }
        self.previous_key = lower.clone();
        self.pivots_read += 1;
        Ok(PivotField {
            child,
            leaf_lens,
            pending_bytes,
            pending_at,
            lower,
        })
    }

    /// The next segment, after every pivot: its level (segments are stored
    /// newest level first), its page, and the pivots it is active for,
    /// which must be pivots of the node.
    pub(in crate::tree) fn next_segment(&mut self) -> Result<SegmentField<'a>, DecodeError> {
        debug_assert_eq!(self.pivots_read, self.header.pivot_count);
        debug_assert!(self.segments_read < self.header.segment_count);
        let level_at = self.at;
        let level = self.u8()?;
        if level >= MAX_LEVELS || level < self.previous_level {
            return Err(DecodeError::new(
                level_at,
                format!("node: segment level {level} out of range or order"),
            ));
        }
        let shared = self.u8()? & 1 == 1;
        let leaf = self.leaf_ref()?;
        let item_count = self.u32()?;
        let span_at = self.at;
        let first_pivot = usize::from(self.u16()?);
        let pivot_span = usize::from(self.u16()?);
        if first_pivot + pivot_span > self.header.pivot_count || pivot_span == 0 {
            return Err(DecodeError::new(
                span_at,
                "node: segment pivot span out of range",
            ));
        }
        let active_bits = self.take_span(pivot_span.div_ceil(8))?;
        let bound_count = usize::from(self.u16()?);
        self.previous_level = level;
        self.segments_read += 1;
        Ok(SegmentField {
            level,
            shared,
            leaf,
            item_count,
            first_pivot,
            pivot_span,
            bits: self.bytes(&active_bits),
            active_bits,
            bound_count,
        })
    }

    /// The next flushed bound of `segment` (the segment `next_segment` gave
    /// last): on a pivot the segment is active for, at an item the segment
    /// holds past its first (a bound of 0 is stored as none).
    pub(in crate::tree) fn next_bound(
        &mut self,
        segment: &SegmentField<'_>,
    ) -> Result<BoundField, DecodeError> {
        let pivot_at = self.at;
        let pivot = usize::from(self.u16()?);
        let index_at = self.at;
        let index = self.u32()?;
        let len = usize::from(self.u16()?);
        let key = self.take_span(len)?;
        if !segment.is_active(pivot) {
            return Err(DecodeError::new(
                pivot_at,
                format!("node: flushed bound for inactive pivot {pivot}"),
            ));
        }
        if index == 0 || index > segment.item_count {
            return Err(DecodeError::new(
                index_at,
                format!(
                    "node: flushed bound {index} outside the segment's {} items",
                    segment.item_count
                ),
            ));
        }
        Ok(BoundField { pivot, index, key })
    }

    /// Checks that the page ends after the last entry.
    pub(in crate::tree) fn finish(self) -> Result<(), DecodeError> {
        debug_assert_eq!(self.segments_read, self.header.segment_count);
        if self.at != self.bytes.len() {
            return Err(DecodeError::new(self.at, "node: trailing bytes"));
        }
        Ok(())
    }
}

/// Checks a flushed key of `pivot` (at `key_at` in the page) against the
/// next pivot's key, its range's end (`None` for the last pivot, whose
/// range ends where the node's does, which only the parent knows). A
/// writer never stores one at or above it: the key is at most the first
/// unflushed item, which lies in the range. Updates read a pivot's
/// unflushed items from its flushed key up to that end, and lookups skip
/// the segment for keys below the flushed key.
pub(in crate::tree) fn check_flushed_key(
    pivot: usize,
    key: &[u8],
    key_at: usize,
    next_pivot_key: Option<&[u8]>,
) -> Result<(), DecodeError> {
    if next_pivot_key.is_some_and(|hi| key >= hi) {
        return Err(DecodeError::new(
            key_at,
            format!("node: flushed key of pivot {pivot} beyond its range"),
        ));
    }
    Ok(())
}
