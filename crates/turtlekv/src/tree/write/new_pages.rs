//! Writing a batch update's result: every new leaf and segment is serialised
//! in parallel (a pure function of its items), then nodes bottom-up, since a
//! node page names its children's ids. A large update also writes its new
//! leaves and high-level segments along the way ("spills"), so that its
//! memory stays bounded however much it rewrites.

use std::sync::Arc;

use rayon::prelude::*;

use super::background_drop::drop_in_background;
use super::update::Update;
use crate::page::{PageId, PageKind};
use crate::tree::format::item::Item;
use crate::tree::format::leaf;
use crate::tree::format::node::{Child, LeafData, LeafRef, Node, Segment};
use crate::{Error, Result};

/// Which new pages a pass writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// A spill in the middle of an update: leaves, and segments of levels
    /// from `SPILL_MIN_LEVEL` up. Lower levels stay in memory, since the
    /// binary counter merges them again soon; a higher level is merged
    /// again only after `2^level` more batches reach its node.
    Spill,
    /// Every new leaf and segment: the end of an update.
    All,
}

/// A leaf page written: its reference, its length, and its chunks' item
/// and stored bytes (`leaf::LeafBytes`).
type WrittenLeaf = (LeafRef, usize, (u64, u64));

impl Update<'_> {
    /// Writes the in-memory tree under `root`; returns the root's page id and
    /// every page written.
    pub(in crate::tree) fn write_tree(&mut self, mut root: Node) -> Result<(PageId, Vec<PageId>)> {
        let mut new_pages = self.write_new_pages(&mut root, Pass::All)?;
        let id = self.write_nodes(&mut root, &mut new_pages)?;
        Ok((id, new_pages))
    }

    /// Writes out the new leaves and high-level segments under `root` once
    /// there are `TreeConfig::spill_after_new_pages` of them, and forgets
    /// the decoded pages read so far. A page written here that the same
    /// update replaces later is dead at the commit like any other replaced
    /// page.
    pub(in crate::tree) fn spill_if_large(&mut self, root: &mut Node) -> Result<()> {
        let mut count = 0;
        for_each_new(root, Pass::Spill, &mut |_| count += 1);
        if count < self.tree.config.spill_after_new_pages {
            return Ok(());
        }
        let pages = self.write_new_pages(root, Pass::Spill)?;
        self.spilled.extend(pages);
        self.events.spills += 1;
        self.forget_decoded();
        Ok(())
    }

    /// Serialises and writes the new pages of `pass` in parallel and
    /// replaces each by its stored reference.
    fn write_new_pages(&mut self, root: &mut Node, pass: Pass) -> Result<Vec<PageId>> {
        let mut jobs = Vec::new();
        for_each_new(root, pass, &mut |data| {
            if let LeafData::New(items) = data {
                jobs.push(items.clone());
            }
        });
        let refs = self.write_leaves(jobs)?;
        let new_pages = refs.iter().map(|r| r.id).collect();
        let mut refs = refs.into_iter();
        let mut written = Vec::new();
        for_each_new(root, pass, &mut |data| {
            let stored = LeafData::Stored(refs.next().expect("one page per new leaf"));
            written.push(std::mem::replace(data, stored));
        });
        drop_in_background(written);
        Ok(new_pages)
    }

    /// Writes the new ones of `segments` now and replaces each by its stored
    /// reference: a merge into a high buffer level bounds its memory so.
    /// They count as spilled pages.
    pub(in crate::tree) fn write_segments_now(&mut self, segments: &mut [Segment]) -> Result<()> {
        let jobs: Vec<Arc<Vec<Item>>> = segments
            .iter()
            .filter_map(|s| match &s.data {
                LeafData::New(items) => Some(items.clone()),
                LeafData::Stored(_) => None,
            })
            .collect();
        let mut refs = self.write_leaves(jobs)?.into_iter();
        for seg in segments {
            if matches!(seg.data, LeafData::New(_)) {
                let r = refs.next().expect("one page per new segment");
                self.spilled.push(r.id);
                seg.data = LeafData::Stored(r);
            }
        }
        Ok(())
    }

    /// Serialises and writes leaf pages in parallel (a pure function of
    /// their items); returns their references in job order.
    fn write_leaves(&mut self, jobs: Vec<Arc<Vec<Item>>>) -> Result<Vec<LeafRef>> {
        let config = self.tree.config;
        // Each worker serialises a leaf and writes it, so only the pages in
        // flight are held as bytes.
        let io = &self.tree.io;
        let written: Vec<Result<WrittenLeaf>> = jobs
            .par_iter()
            .map(|items| {
                let page = leaf::serialize_counted(
                    items,
                    config.block_size_bytes,
                    config.filter_bits_per_key,
                    config.leaf_max_bytes,
                    config.compression,
                );
                let chunk_bytes = (page.chunk_raw_bytes, page.chunk_stored_bytes);
                let bytes = page.bytes;
                if bytes.len() > config.leaf_max_bytes {
                    return Err(Error::InvalidOptions(format!(
                        "a leaf of {} bytes exceeds the leaf page limit of {} bytes: leaf_size_bytes is too small for these items",
                        bytes.len(),
                        config.leaf_max_bytes
                    )));
                }
                let id = io.write_page(PageKind::Leaf, &bytes)?;
                let (head_len, filter_len) = leaf::page_lens(&bytes);
                Ok((LeafRef { id, head_len, filter_len }, bytes.len(), chunk_bytes))
            })
            .collect();
        drop(jobs);
        let mut refs = Vec::with_capacity(written.len());
        for r in written {
            // On an error the pages already written are unreachable garbage
            // for the page store to reclaim, as after a crash mid-checkpoint.
            let (r, len_bytes, (chunk_raw_bytes, chunk_stored_bytes)) = r?;
            self.events.compression_input_bytes += chunk_raw_bytes;
            self.events.compression_output_bytes += chunk_stored_bytes;
            self.events.leaf_pages_written += 1;
            self.events.leaf_bytes_written += len_bytes as u64;
            self.events.filter_bytes_written += u64::from(r.filter_len);
            refs.push(r);
        }
        Ok(refs)
    }

    fn write_nodes(&mut self, node: &mut Node, new_pages: &mut Vec<PageId>) -> Result<PageId> {
        for pivot in &mut node.pivots {
            if let Child::Node(child) = &mut pivot.child {
                let id = self.write_nodes(child, new_pages)?;
                pivot.child = Child::StoredNode(id);
            }
        }
        debug_assert!(
            node.segments
                .iter()
                .all(|s| matches!(s.data, LeafData::Stored(_))),
            "new segments are written before their node"
        );
        let bytes = node.encode();
        if bytes.len() > self.tree.config.node_max_bytes {
            return Err(Error::InvalidOptions(format!(
                "a node of {} bytes exceeds the node page limit of {} bytes: node_size_bytes is too small for these keys",
                bytes.len(),
                self.tree.config.node_max_bytes
            )));
        }
        let id = self.tree.io.write_page(PageKind::Node, &bytes)?;
        self.events.node_pages_written += 1;
        self.events.node_bytes_written += bytes.len() as u64;
        new_pages.push(id);
        Ok(id)
    }
}

/// Lowest buffer level whose new segments a spill writes out.
pub(in crate::tree) const SPILL_MIN_LEVEL: u8 = 3;

/// Calls `f` on every new leaf and segment that `pass` writes in the
/// in-memory tree under `node`, always in the same order.
fn for_each_new(node: &mut Node, pass: Pass, f: &mut impl FnMut(&mut LeafData)) {
    for pivot in &mut node.pivots {
        match &mut pivot.child {
            Child::Leaf(data @ LeafData::New(_)) => f(data),
            Child::Node(child) => for_each_new(child, pass, f),
            Child::Leaf(LeafData::Stored(_)) | Child::StoredNode(_) => {}
        }
    }
    for seg in &mut node.segments {
        let written = pass == Pass::All || seg.level >= SPILL_MIN_LEVEL;
        if written && matches!(seg.data, LeafData::New(_)) {
            f(&mut seg.data);
        }
    }
}
