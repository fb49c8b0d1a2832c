//! A toy tree for page store tests: a node page is a list of 8-byte child
//! ids; leaves hold bytes derived from a seed so their content can be
//! checked. The store layer's tests of the durable page store use it too.

use std::path::Path;
use std::sync::Arc;

use crate::Result;
use crate::error::DecodeError;
use crate::io::{FaultFs, FileSystem};
use crate::page::{PageId, PageIo, PageKind, PageStore, PageStoreOptions};

pub(crate) const DIR: &str = "/db";

/// The toy node format's child list.
pub(crate) fn list_children(bytes: &[u8]) -> Result<Vec<PageId>, DecodeError> {
    if !bytes.len().is_multiple_of(8) {
        return Err(DecodeError::new(
            bytes.len() / 8 * 8,
            "toy node length is not a multiple of 8",
        ));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| PageId::from_raw(u64::from_le_bytes(c.try_into().expect("8 bytes"))))
        .collect())
}

pub(crate) fn node_bytes(children: &[PageId]) -> Vec<u8> {
    children
        .iter()
        .flat_map(|c| c.to_raw().to_le_bytes())
        .collect()
}

/// Deterministic leaf content of `len_bytes` for `seed`.
pub(crate) fn leaf_bytes(seed: u64, len_bytes: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len_bytes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Small pages so tests stay fast: 4 KiB nodes, 64 KiB leaves.
pub(crate) fn small_options() -> PageStoreOptions {
    PageStoreOptions {
        node_size_bytes: 4096,
        leaf_size_bytes: 64 * 1024,
        cache_capacity_bytes: 1 << 20,
        direct_io: false,
        // These tests count device reads after writes.
        cache_written_leaves: false,
    }
}

/// A new page store in `DIR`, and its committed root (none).
pub(crate) fn open(
    fs: &FaultFs,
    options: &PageStoreOptions,
) -> Result<(PageStore, Option<PageId>)> {
    let fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    Ok((open_at(fs, Path::new(DIR), options, 0, None)?, None))
}

/// The page store in `dir`, opened at `root`, committed as `generation`
/// (what the store layer reads from its superblock).
pub(crate) fn open_at(
    fs: Arc<dyn FileSystem>,
    dir: &Path,
    options: &PageStoreOptions,
    generation: u64,
    root: Option<PageId>,
) -> Result<PageStore> {
    fs.create_dir_all(dir)?;
    let mut store = PageStore::open(fs, dir, options)?;
    store.install_root(generation, root, true, &list_children)?;
    Ok(store)
}

/// Commits `root` without recording it anywhere durable: page-level tests
/// that reopen name the root themselves (`open_at`).
pub(crate) fn commit(
    store: &PageStore,
    root: Option<PageId>,
    unreachable: &[PageId],
) -> Result<u64> {
    store.commit(root, unreachable, &mut |_| Ok(()))
}

/// One committed version of the toy tree: a root node over leaves, each
/// leaf given by (seed, length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Version {
    pub root: PageId,
    pub leaves: Vec<(PageId, u64, usize)>,
}

impl Version {
    /// Writes a root node over `leaves` and returns the version (not committed).
    pub fn write(store: &PageStore, leaves: Vec<(PageId, u64, usize)>) -> Result<Version> {
        let ids: Vec<PageId> = leaves.iter().map(|l| l.0).collect();
        let root = store.write_page(PageKind::Node, &node_bytes(&ids))?;
        Ok(Version { root, leaves })
    }

    /// Writes one new leaf.
    pub fn new_leaf(
        store: &PageStore,
        seed: u64,
        len_bytes: usize,
    ) -> Result<(PageId, u64, usize)> {
        let id = store.write_page(PageKind::Leaf, &leaf_bytes(seed, len_bytes))?;
        Ok((id, seed, len_bytes))
    }

    /// Reads every page of the version through `PageIo` and compares.
    pub fn verify(&self, store: &PageStore) -> Result<()> {
        use crate::page::CachePriority;
        let children = list_children(&store.read_page(self.root, CachePriority::Node)?)
            .map_err(|e| e.into_corruption(DIR, 0))?;
        assert_eq!(
            children,
            self.leaves.iter().map(|l| l.0).collect::<Vec<_>>()
        );
        for &(id, seed, len) in &self.leaves {
            let got = store.read_page(id, CachePriority::LeafBlock)?;
            assert_eq!(got, leaf_bytes(seed, len), "leaf {:#x}", id.to_raw());
        }
        Ok(())
    }
}
