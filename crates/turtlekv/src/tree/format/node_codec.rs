//! Node pages to and from the in-memory `Node` (docs/format.md, "Node
//! pages"): the encoder, and the full decode, which reads the page
//! through `node_reader` as the read path's lookup index does.

use std::ops::Range;

use bytes::Bytes;

use super::node::{Child, Flushed, HEADER_BYTES, LeafData, LeafRef, Node, Pivot, Segment};
pub(in crate::tree) use super::node_reader::Header;
use super::node_reader::{MAGIC, VERSION, check_flushed_key};
use crate::error::DecodeError;
use crate::page::PageId;

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
    pub(crate) fn decode(bytes: &[u8]) -> Result<Node, DecodeError> {
        let (header, mut r) = Header::parse(bytes)?;
        let Header {
            height,
            pivot_count,
            segment_count,
        } = header;
        let mut pivots = Vec::with_capacity(pivot_count);
        let mut total_pending_bytes = 0u64;
        for _ in 0..pivot_count {
            let field = r.next_pivot()?;
            total_pending_bytes = total_pending_bytes.saturating_add(field.pending_bytes);
            if total_pending_bytes > MAX_PENDING_BYTES {
                return Err(DecodeError::new(
                    field.pending_at,
                    "node: more pending bytes than a buffer holds",
                ));
            }
            let child = match field.child_leaf() {
                Some(leaf) => Child::Leaf(LeafData::Stored(leaf)),
                None => Child::StoredNode(field.child_id()),
            };
            pivots.push(Pivot {
                lower: Bytes::copy_from_slice(r.bytes(&field.lower)),
                child,
                pending_bytes: field.pending_bytes,
            });
        }
        let mut segments = Vec::with_capacity(segment_count);
        // A segment's bound entries, and which pivots the last pass saw.
        let mut entries: Vec<(usize, Range<u32>)> = Vec::new();
        let mut seen = vec![false; pivot_count];
        for _ in 0..segment_count {
            let seg = r.next_segment()?;
            let mut bounds = vec![None; pivot_count];
            for (p, bound) in bounds
                .iter_mut()
                .enumerate()
                .skip(seg.first_pivot)
                .take(seg.pivot_span)
            {
                if seg.is_active(p) {
                    *bound = Some(Flushed::default());
                }
            }
            entries.clear();
            for _ in 0..seg.bound_count {
                let b = r.next_bound(&seg)?;
                bounds[b.pivot] = Some(Flushed {
                    index: b.index,
                    key: Bytes::copy_from_slice(r.bytes(&b.key)),
                });
                entries.push((b.pivot, b.key));
            }
            // A later entry for a pivot overrides an earlier one: the last
            // is the bound the node keeps, and the one checked. The last
            // pivot's range ends where the node's does, which only the
            // parent knows (`Node::check_range` checks it then).
            for (p, key) in entries.iter().rev() {
                if !std::mem::replace(&mut seen[*p], true) {
                    let next = pivots.get(p + 1).map(|next| next.lower.as_ref());
                    check_flushed_key(*p, r.bytes(key), key.start as usize, next)?;
                }
            }
            for (p, _) in &entries {
                seen[*p] = false;
            }
            segments.push(Segment {
                level: seg.level,
                shared: seg.shared,
                data: LeafData::Stored(seg.leaf),
                item_count: seg.item_count,
                bounds,
                flushed_in_update: false,
            });
        }
        r.finish()?;
        Ok(Node {
            height,
            pivots,
            segments,
            range_lo: Bytes::new(),
            range_hi: None,
            page: None,
        })
    }
}

fn push_leaf_ref(out: &mut Vec<u8>, r: &LeafRef) {
    out.extend_from_slice(&r.id.to_raw().to_le_bytes());
    out.extend_from_slice(&r.head_len.to_le_bytes());
    out.extend_from_slice(&r.filter_len.to_le_bytes());
}

/// Every page a node page references (children and segments): what the page
/// store needs, per node page, to rebuild its live set at open.
/// Errors are at offsets of the page's contents, which the page store
/// turns into offsets of its file.
pub(crate) fn referenced_pages(node_page_bytes: &[u8]) -> Result<Vec<PageId>, DecodeError> {
    let node = Node::decode(node_page_bytes)?;
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
