//! Copying the pages one pinned root reaches into the page files of
//! another directory: the page half of a backup (`db::backup`).
//!
//! Every block is verified against this store's checksums before it is
//! copied, and its checksum is then recomputed under the destination's
//! identity (`docs/format.md`, "Blocks"): a backup is a database of its
//! own, whose files never verify as the source's. Pages keep their ids and
//! slots, so the copied node pages name their children unchanged; slots
//! no copied page uses stay holes.

use std::path::Path;
use std::sync::Arc;

use super::open::PAGE_FILE_NAMES;
use super::read::corruption;
use super::store::{PageFile, PageStore, kind_index};
use super::versions::RootPin;
use super::{ListChildren, PageId, PageKind};
use crate::io::{File, FileSystem, OpenOptions};
use crate::{Error, Result};

/// What a copy wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CopyReport {
    /// Pages copied (node and leaf).
    pub pages: u64,
    /// Bytes written into the destination's page files.
    pub bytes: u64,
}

impl PageStore {
    /// The node and leaf page sizes the store was opened with.
    pub fn page_sizes(&self) -> (u64, u64) {
        (self.options.node_size_bytes, self.options.leaf_size_bytes)
    }

    /// Copies every page `pin`'s root reaches into new page files in
    /// `dest` (which must not hold any), each block verified first, then
    /// resealed with `dest_seed`, the destination identity's checksum
    /// seed; syncs both files. The pin keeps the pages from being reused
    /// while they are read, so writers go on meanwhile. A block that fails
    /// its check is `Error::Corruption` naming this store's file.
    pub fn copy_pinned(
        &self,
        pin: &RootPin,
        list_children: ListChildren<'_>,
        fs: &dyn FileSystem,
        dest: &Path,
        dest_seed: u32,
    ) -> Result<CopyReport> {
        // Node pages are read from disk here, past the cache, and verified.
        let live = self.reachable(pin.root(), list_children, None)?;
        let mut report = CopyReport::default();
        for kind in [PageKind::Node, PageKind::Leaf] {
            let i = kind_index(kind);
            let create = OpenOptions {
                create_new: true,
                write: true,
                ..OpenOptions::default()
            };
            let out = fs.open(&dest.join(PAGE_FILE_NAMES[i]), create)?;
            let mut ids: Vec<PageId> = live[i].values().copied().collect();
            ids.sort_by_key(|id| id.slot());
            for id in ids {
                report.bytes += self.copy_page(id, &out, dest_seed)?;
                report.pages += 1;
            }
            out.sync_data()?;
        }
        Ok(report)
    }

    /// Copies one page: verifies each block, reseals it, and writes runs
    /// of consecutive blocks. Inner all-zero blocks of a leaf page are
    /// chunks punched out of a live segment (`verify_leaf_blocks`): no
    /// reader reads them, and they stay holes in the copy.
    fn copy_page(&self, id: PageId, out: &Arc<dyn File>, dest_seed: u32) -> Result<u64> {
        let pf = self.checked_file(id)?;
        let mut image = self.read_image(pf, id, 0, id.blocks())?;
        let dest = pf.geometry.with_checksum_seed(dest_seed, false);
        let block_bytes = pf.geometry.block_bytes;
        let blocks = id.blocks() as usize;
        let mut keep = vec![false; blocks];
        for (index, block) in image.chunks_exact_mut(block_bytes).enumerate() {
            let inner = index > 0 && index + 1 < blocks;
            if id.kind() == PageKind::Leaf && inner && block.iter().all(|&b| b == 0) {
                continue;
            }
            verify(pf, id, index as u32, block)?;
            dest.reseal_block(id, index as u32, block);
            keep[index] = true;
        }
        let mut written = 0;
        let mut index = 0;
        while index < blocks {
            if !keep[index] {
                index += 1;
                continue;
            }
            let end = (index..blocks).find(|&j| !keep[j]).unwrap_or(blocks);
            let bytes = &image[index * block_bytes..end * block_bytes];
            let offset = pf.offset_of(id) + (index * block_bytes) as u64;
            out.write_at(bytes, offset).map_err(Error::Io)?;
            written += bytes.len() as u64;
            index = end;
        }
        Ok(written)
    }
}

/// Checks block `index` of page `id` as read from `pf`.
fn verify(pf: &PageFile, id: PageId, index: u32, block: &[u8]) -> Result<()> {
    pf.geometry
        .verify_block(id, index, block)
        .map(|_| ())
        .map_err(|bad| corruption(pf, id, bad))
}
