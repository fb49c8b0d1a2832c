//! One committed tree version of the paged store, as readers hold it.

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use super::backup::CopiedVersion;
use super::{Coverage, TreeCheck, TreeCursor, TreeScan, TreeVersion};
use crate::Result;
use crate::memtable::{Direction, Versioned};
use crate::page::{PageId, PageStore, RootPin};
use crate::tree::{RootMemo, ScanCursor, Tree, referenced_pages};
use crate::values::Value;

/// One committed root, pinned for as long as this value lives.
#[derive(Debug)]
pub(crate) struct StoredVersion {
    tree: Tree,
    pages: Arc<PageStore>,
    pin: RootPin,
    /// What the commit recorded with the root.
    coverage: Coverage,
    /// The root's node index, as gets last found it in the page cache.
    root_memo: RootMemo,
}

impl StoredVersion {
    /// Pins the page store's newest root, which `coverage` was committed
    /// with.
    pub fn new(tree: Tree, pages: Arc<PageStore>, coverage: Coverage) -> StoredVersion {
        let pin = pages.pin();
        StoredVersion {
            tree,
            pages,
            pin,
            coverage,
            root_memo: RootMemo::default(),
        }
    }

    /// The pinned root; `None` for an empty tree.
    pub fn coverage(&self) -> Coverage {
        self.coverage
    }

    pub fn root(&self) -> Option<PageId> {
        self.pin.root()
    }
}

impl TreeScan for ScanCursor {
    fn fill(&mut self, limit: usize, out: &mut Vec<Versioned>) -> Result<()> {
        ScanCursor::fill(self, limit, out)
    }
}

impl TreeVersion for StoredVersion {
    fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        self.tree
            .get_with_root_memo(self.pin.root(), &self.root_memo, key)
    }

    fn approximate_items(&self, span: crate::tree::count::KeySpan<'_>) -> Result<u64> {
        self.tree.approximate_items(self.pin.root(), span)
    }

    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Value>>> {
        self.tree.get_many(self.pin.root(), &self.root_memo, keys)
    }

    fn cursor(&self, lower: Bound<Bytes>, upper: Bound<Bytes>, direction: Direction) -> TreeCursor {
        let reverse = direction == Direction::Reverse;
        Box::new(self.tree.scan(self.pin.root(), lower, upper, reverse))
    }

    fn covered_seq(&self) -> u64 {
        self.coverage.covered_seq
    }

    fn copy_pages(
        &self,
        fs: &dyn crate::io::FileSystem,
        dest: &std::path::Path,
        dest_seed: u32,
    ) -> Result<Option<CopiedVersion>> {
        let list = |bytes: &[u8]| referenced_pages(bytes);
        let pages = self
            .pages
            .copy_pinned(&self.pin, &list, fs, dest, dest_seed)?;
        let (node_size_bytes, leaf_size_bytes) = self.pages.page_sizes();
        Ok(Some(CopiedVersion {
            root: self.pin.root(),
            generation: self.pin.generation(),
            covered_seq: self.coverage.covered_seq,
            node_size_bytes,
            leaf_size_bytes,
            pages,
        }))
    }

    fn check(&self) -> Result<TreeCheck> {
        let root = self.pin.root();
        let tree = self.tree.check(root)?;
        let list = |bytes: &[u8]| referenced_pages(bytes);
        self.pages.check(&self.pin, &list)?;
        let mut keys = 0;
        for pair in self
            .tree
            .scan(root, Bound::Unbounded, Bound::Unbounded, false)
        {
            pair?;
            keys += 1;
        }
        Ok(TreeCheck {
            keys,
            pages: tree.node_pages + tree.leaf_pages + tree.segment_pages,
        })
    }
}
