//! Writing a batch update's result: every new leaf and segment is serialised
//! in parallel (a pure function of its items), then nodes bottom-up, since a
//! node page names its children's ids.

use std::sync::Arc;

use rayon::prelude::*;

use super::item::Item;
use super::leaf;
use super::node::{Child, LeafData, LeafRef, Node};
use super::update::Update;
use crate::page::{PageId, PageKind};
use crate::{Error, Result};

impl Update<'_> {
    /// Writes the in-memory tree under `root`; returns the root's page id and
    /// every page written.
    pub(super) fn write_tree(&mut self, mut root: Node) -> Result<(PageId, Vec<PageId>)> {
        let config = self.tree.config;
        let mut jobs = Vec::new();
        collect_new_leaves(&root, &mut jobs);
        // Each worker serialises a leaf and writes it, so only the pages in
        // flight are held as bytes; ids come back in job order.
        let io = &self.tree.io;
        let written: Vec<Result<(LeafRef, usize)>> = jobs
            .par_iter()
            .map(|items| {
                let bytes = leaf::serialize(
                    items,
                    config.block_size_bytes,
                    config.filter_bits_per_key,
                    config.leaf_max_bytes,
                );
                if bytes.len() > config.leaf_max_bytes {
                    return Err(Error::InvalidOptions(format!(
                        "a leaf of {} bytes exceeds the leaf page limit of {} bytes: leaf_size_bytes is too small for these items",
                        bytes.len(),
                        config.leaf_max_bytes
                    )));
                }
                let id = io.write_page(PageKind::Leaf, &bytes)?;
                let (head_len, filter_len) = leaf::page_lens(&bytes);
                Ok((LeafRef { id, head_len, filter_len }, bytes.len()))
            })
            .collect();
        let mut new_pages = Vec::with_capacity(written.len());
        let mut refs = Vec::with_capacity(written.len());
        for r in written {
            // On an error the pages already written are unreachable garbage
            // for the page store to reclaim, as after a crash mid-checkpoint.
            let (r, len_bytes) = r?;
            self.events.leaf_pages_written += 1;
            self.events.leaf_bytes_written += len_bytes as u64;
            self.events.filter_bytes_written += u64::from(r.filter_len);
            new_pages.push(r.id);
            refs.push(r);
        }
        let mut refs = refs.into_iter();
        let id = self.write_nodes(&mut root, &mut refs, &mut new_pages)?;
        Ok((id, new_pages))
    }

    fn write_nodes(
        &mut self,
        node: &mut Node,
        refs: &mut impl Iterator<Item = LeafRef>,
        new_pages: &mut Vec<PageId>,
    ) -> Result<PageId> {
        for pivot in &mut node.pivots {
            match &mut pivot.child {
                Child::Leaf(LeafData::New(_)) => {
                    pivot.child = Child::Leaf(LeafData::Stored(
                        refs.next().expect("one page per new leaf"),
                    ))
                }
                Child::Node(child) => {
                    let id = self.write_nodes(child, refs, new_pages)?;
                    pivot.child = Child::StoredNode(id);
                }
                Child::Leaf(LeafData::Stored(_)) | Child::StoredNode(_) => {}
            }
        }
        for seg in &mut node.segments {
            if let LeafData::New(_) = seg.data {
                seg.data = LeafData::Stored(refs.next().expect("one page per new segment"));
            }
        }
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

/// New leaves and segments, in the order `write_nodes` assigns their ids.
fn collect_new_leaves(node: &Node, out: &mut Vec<Arc<Vec<Item>>>) {
    for pivot in &node.pivots {
        match &pivot.child {
            Child::Leaf(LeafData::New(items)) => out.push(items.clone()),
            Child::Node(child) => collect_new_leaves(child, out),
            Child::Leaf(LeafData::Stored(_)) | Child::StoredNode(_) => {}
        }
    }
    for seg in &node.segments {
        if let LeafData::New(items) = &seg.data {
            out.push(items.clone());
        }
    }
}
