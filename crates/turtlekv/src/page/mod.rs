//! The page store: immutable, checksummed pages in page files, a bounded page
//! cache, and the superblock that names the current tree root.
//!
//! The tree sees pages only through [`PageIo`], so its tests can run on an
//! in-memory double and the engine on the real store.

// Remove once the checkpoint pipeline (issue 5) uses the page store.
#![expect(dead_code, reason = "wired into the engine by the checkpoint pipeline")]

use std::fmt::Debug;

use bytes::Bytes;

use crate::Result;

/// Stable, cheap name of one page. Opaque to the tree, which stores it as
/// 8 little-endian bytes (`to_raw`/`from_raw`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PageId(u64);

impl PageId {
    pub(crate) const fn from_raw(raw: u64) -> Self {
        PageId(raw)
    }

    pub(crate) const fn to_raw(self) -> u64 {
        self.0
    }
}

/// What a page holds, which decides its size class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PageKind {
    /// A tree node: at most `node_size_bytes`.
    Node,
    /// A leaf or buffer segment: at most `leaf_size_bytes`.
    Leaf,
}

/// Eviction priority of cached bytes; higher survives longer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum CachePriority {
    LeafBlock,
    LeafHead,
    Filter,
    Node,
}

/// What the tree needs from storage.
pub(crate) trait PageIo: Send + Sync + Debug {
    /// Writes a new immutable page and returns its id. The page is durable
    /// only once the page store commits a root that reaches it.
    fn write_page(&self, kind: PageKind, bytes: &[u8]) -> Result<PageId>;

    /// The whole page, verified against its checksums.
    fn read_page(&self, id: PageId, priority: CachePriority) -> Result<Bytes>;

    /// `len` bytes at `offset` of the page, reading and verifying only the
    /// blocks that cover them (a leaf lookup reads its head and one block).
    fn read_range(
        &self,
        id: PageId,
        offset: u64,
        len: u64,
        priority: CachePriority,
    ) -> Result<Bytes>;
}
