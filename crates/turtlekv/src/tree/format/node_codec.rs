//! Byte encoding of node pages (docs/format.md, "Node pages").

use bytes::Bytes;

use super::node::{
    Child, Flushed, HEADER_BYTES, LeafData, LeafRef, MAX_LEVELS, Node, Pivot, Segment,
};
use crate::page::PageId;

const MAGIC: &[u8; 4] = b"TKND";
const VERSION: u8 = 1;

/// More pending bytes than any stored node holds: a node buffers at most
/// a leaf page (64 MiB at most) per pivot (65,535 at most), under 2^42
/// bytes. Updates add item sizes to the counts and sum them, which a
/// count near `u64::MAX` would overflow.
const MAX_PENDING_BYTES: u64 = 1 << 48;

impl Node {
    /// Encodes the node; every child and segment must be stored.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.push(self.height);
        out.extend_from_slice(&(self.pivots.len() as u16).to_le_bytes());
        out.extend_from_slice(&(self.segments.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0; 2]);
        out.extend_from_slice(&(self.encoded_len() as u32).to_le_bytes());
        out.extend_from_slice(&[0; 4]); // checksum, filled below
        for (i, p) in self.pivots.iter().enumerate() {
            match &p.child {
                Child::Leaf(LeafData::Stored(r)) => push_leaf_ref(&mut out, r),
                Child::StoredNode(id) => out.extend_from_slice(&id.to_raw().to_le_bytes()),
                _ => unreachable!("encode runs after every child is written"),
            }
            out.extend_from_slice(&p.pending_bytes.to_le_bytes());
            if i > 0 {
                out.extend_from_slice(&(p.lower.len() as u16).to_le_bytes());
                out.extend_from_slice(&p.lower);
            }
        }
        for seg in &self.segments {
            out.push(seg.level);
            out.push(u8::from(seg.shared));
            match &seg.data {
                LeafData::Stored(r) => push_leaf_ref(&mut out, r),
                LeafData::New(_) => unreachable!("encode runs after every segment is written"),
            }
            out.extend_from_slice(&seg.item_count.to_le_bytes());
            let first = seg.bounds.iter().position(Option::is_some).unwrap_or(0);
            let last = seg
                .bounds
                .iter()
                .rposition(Option::is_some)
                .map_or(first, |l| l + 1);
            out.extend_from_slice(&(first as u16).to_le_bytes());
            out.extend_from_slice(&((last - first) as u16).to_le_bytes());
            let mut bits = vec![0u8; (last - first).div_ceil(8)];
            let mut nonzero = Vec::new();
            for (i, b) in seg.bounds[first..last].iter().enumerate() {
                if let Some(bound) = b {
                    bits[i / 8] |= 1 << (i % 8);
                    if bound.index > 0 {
                        nonzero.push(((first + i) as u16, bound));
                    }
                }
            }
            out.extend_from_slice(&bits);
            out.extend_from_slice(&(nonzero.len() as u16).to_le_bytes());
            for (pivot, bound) in nonzero {
                out.extend_from_slice(&pivot.to_le_bytes());
                out.extend_from_slice(&bound.index.to_le_bytes());
                out.extend_from_slice(&(bound.key.len() as u16).to_le_bytes());
                out.extend_from_slice(&bound.key);
            }
        }
        debug_assert_eq!(out.len(), self.encoded_len());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&out[..16]), &out[HEADER_BYTES..]);
        out[16..20].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes and verifies a node page.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Node, String> {
        let (header, mut r) = Header::parse(bytes)?;
        let Header {
            height,
            pivot_count,
            segment_count,
        } = header;
        let mut pivots = Vec::with_capacity(pivot_count);
        let mut total_pending_bytes = 0u64;
        for i in 0..pivot_count {
            let child = if height == 1 {
                Child::Leaf(LeafData::Stored(r.leaf_ref()?))
            } else {
                Child::StoredNode(PageId::from_raw(r.u64()?))
            };
            let pending_bytes = r.u64()?;
            total_pending_bytes = total_pending_bytes.saturating_add(pending_bytes);
            if total_pending_bytes > MAX_PENDING_BYTES {
                return Err("node: more pending bytes than a buffer holds".into());
            }
            let lower = if i == 0 {
                Bytes::new()
            } else {
                let len = r.u16()? as usize;
                Bytes::copy_from_slice(r.take(len)?)
            };
            pivots.push(Pivot {
                lower,
                child,
                pending_bytes,
            });
        }
        if !pivots.windows(2).skip(1).all(|w| w[0].lower < w[1].lower)
            || pivots.iter().skip(1).any(|p| p.lower.is_empty())
        {
            return Err("node: pivot keys out of order".into());
        }
        let mut segments = Vec::with_capacity(segment_count);
        for _ in 0..segment_count {
            let level = r.u8()?;
            let shared = r.u8()? & 1 == 1;
            let leaf = r.leaf_ref()?;
            let item_count = r.u32()?;
            let first = r.u16()? as usize;
            let span = r.u16()? as usize;
            if first + span > pivot_count || level >= MAX_LEVELS || span == 0 {
                return Err("node: segment pivot span or level out of range".into());
            }
            let bits = r.take(span.div_ceil(8))?.to_vec();
            let mut bounds = vec![None; pivot_count];
            for i in 0..span {
                if bits[i / 8] >> (i % 8) & 1 == 1 {
                    bounds[first + i] = Some(Flushed::default());
                }
            }
            for _ in 0..r.u16()? {
                let pivot = r.u16()? as usize;
                let index = r.u32()?;
                let key_len = r.u16()? as usize;
                let key = Bytes::copy_from_slice(r.take(key_len)?);
                match bounds.get_mut(pivot) {
                    Some(Some(b)) if index <= item_count && index > 0 => {
                        *b = Flushed { index, key }
                    }
                    _ => return Err("node: flushed bound for an inactive pivot".into()),
                }
            }
            segments.push(Segment {
                level,
                shared,
                data: LeafData::Stored(leaf),
                item_count,
                bounds,
            });
        }
        if r.at != bytes.len() || !segments.windows(2).all(|w| w[0].level <= w[1].level) {
            return Err("node: trailing bytes or segments out of level order".into());
        }
        let node = Node {
            height,
            pivots,
            segments,
            range_lo: Bytes::new(),
            range_hi: None,
        };
        // The node's own range is not known here: the last pivot's flushed
        // keys are checked again once the parent gives it (`child_node`).
        node.check_flushed_keys()?;
        Ok(node)
    }
}

fn push_leaf_ref(out: &mut Vec<u8>, r: &LeafRef) {
    out.extend_from_slice(&r.id.to_raw().to_le_bytes());
    out.extend_from_slice(&r.head_len.to_le_bytes());
    out.extend_from_slice(&r.filter_len.to_le_bytes());
}

/// The fixed header of a node page, verified.
#[derive(Clone, Copy, Debug)]
pub(in crate::tree) struct Header {
    pub height: u8,
    pub pivot_count: usize,
    pub segment_count: usize,
}

impl Header {
    /// Verifies magic, length and checksum; returns a reader at the pivots.
    pub(in crate::tree) fn parse(bytes: &[u8]) -> Result<(Header, Reader<'_>), String> {
        Self::parse_checked(bytes, true)
    }

    /// `parse` without recomputing the node's checksum, for pages the page
    /// store read and verified block by block (point lookups and scans,
    /// which would otherwise checksum every node they pass on every
    /// lookup). Everything else is still checked as it is read.
    pub(in crate::tree) fn parse_trusted(bytes: &[u8]) -> Result<(Header, Reader<'_>), String> {
        Self::parse_checked(bytes, false)
    }

    fn parse_checked(bytes: &[u8], verify_crc: bool) -> Result<(Header, Reader<'_>), String> {
        let mut r = Reader { bytes, at: 0 };
        if bytes.len() < HEADER_BYTES || &bytes[..4] != MAGIC || bytes[4] != VERSION {
            return Err("node: bad magic, version or length".into());
        }
        let height = bytes[5];
        r.at = 6;
        let pivot_count = r.u16()? as usize;
        let segment_count = r.u16()? as usize;
        r.at = 12;
        if r.u32()? as usize != bytes.len() {
            return Err("node: length field does not match the page".into());
        }
        let stored_crc = r.u32()?;
        if verify_crc {
            let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[..16]), &bytes[HEADER_BYTES..]);
            if stored_crc != crc {
                return Err("node: checksum mismatch".into());
            }
        }
        if height == 0 || pivot_count == 0 {
            return Err("node: zero height or no pivots".into());
        }
        Ok((
            Header {
                height,
                pivot_count,
                segment_count,
            },
            r,
        ))
    }
}

pub(in crate::tree) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// How far into the page the reader is.
    pub(in crate::tree) fn offset(&self) -> usize {
        self.at
    }
    pub(in crate::tree) fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let out = self
            .bytes
            .get(self.at..self.at + n)
            .ok_or("node: truncated")?;
        self.at += n;
        Ok(out)
    }
    pub(in crate::tree) fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    pub(in crate::tree) fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    pub(in crate::tree) fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    pub(in crate::tree) fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    pub(in crate::tree) fn leaf_ref(&mut self) -> Result<LeafRef, String> {
        Ok(LeafRef {
            id: PageId::from_raw(self.u64()?),
            head_len: self.u32()?,
            filter_len: self.u32()?,
        })
    }
}

/// Every page a node page references (children and segments): what the page
/// store needs, per node page, to rebuild its live set at open.
pub(crate) fn referenced_pages(node_page_bytes: &[u8]) -> crate::Result<Vec<PageId>> {
    let node = Node::decode(node_page_bytes)
        .map_err(|reason| crate::Error::corruption("node page", 0, reason))?;
    let mut out = Vec::with_capacity(node.pivots.len() + node.segments.len());
    for p in &node.pivots {
        match &p.child {
            Child::Leaf(LeafData::Stored(r)) => out.push(r.id),
            Child::StoredNode(id) => out.push(*id),
            _ => unreachable!("decoded nodes reference stored pages only"),
        }
    }
    for s in &node.segments {
        if let LeafData::Stored(r) = &s.data {
            out.push(r.id);
        }
    }
    Ok(out)
}
