//! The page store with its superblock: pages whose committed root, and the
//! WAL position recorded with it, survive a crash.

use std::io;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::superblock::{SUPERBLOCK_FILE_NAME, Slot, Superblock, SuperblockRecord};
use crate::io::FileSystem;
use crate::page::{ListChildren, PageId, PageStore, PageStoreOptions};
use crate::{Error, Result};

/// A page store whose commits are made durable in the superblock. Derefs
/// to the page store for reads, writes and pins.
#[derive(Debug)]
pub(crate) struct DurablePages {
    pages: Arc<PageStore>,
    superblock: Superblock,
    /// Superblock syncs made by commits (counted with the page files').
    superblock_syncs: AtomicU64,
}

impl DurablePages {
    /// Opens (or, with `create_if_missing`, creates) the store in `dir`,
    /// at the newest valid superblock slot, and rebuilds the set of live
    /// pages from its root. Returns the store and that slot's record.
    pub fn open(
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        options: &PageStoreOptions,
        create_if_missing: bool,
        list_children: ListChildren<'_>,
    ) -> Result<(DurablePages, SuperblockRecord)> {
        let exists = fs
            .list_dir(dir)
            .is_ok_and(|names| names.iter().any(|n| n == SUPERBLOCK_FILE_NAME));
        if !exists && !create_if_missing {
            return Err(Error::Io(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no page store at {}", dir.display()),
            )));
        }
        fs.create_dir_all(dir)?;
        let mut superblock = Superblock::open(&**fs, dir, options.direct_io)?;
        let mut pages = PageStore::open(fs.clone(), dir, options)?;
        let (slot, damaged) = superblock.recover(&**fs, dir, &pages, options)?;
        // With a damaged slot we cannot tell a torn commit from a decayed
        // newer one; keep the bytes the other slot may name, for repair.
        pages.install_root(slot.generation, slot.record.root, !damaged, list_children)?;
        let store = DurablePages {
            pages: Arc::new(pages),
            superblock,
            superblock_syncs: AtomicU64::new(0),
        };
        Ok((store, slot.record))
    }

    /// Makes `record` the durable root: syncs the pages written so far,
    /// writes the next superblock slot and syncs it (the commit point).
    /// `unreachable` lists the pages the new root no longer reaches; their
    /// slots are reused once no reader pins an older generation. Returns
    /// the new generation.
    pub fn commit(&self, record: SuperblockRecord, unreachable: &[PageId]) -> Result<u64> {
        let (node_size_bytes, leaf_size_bytes) = self.superblock.page_sizes();
        self.pages
            .commit(record.root, unreachable, &mut |generation| {
                let slot = Slot {
                    generation,
                    node_size_bytes,
                    leaf_size_bytes,
                    record,
                };
                self.superblock.write(&slot)?;
                self.superblock_syncs.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
    }

    /// The page store, shared with the tree that reads and writes it.
    pub fn pages(&self) -> &Arc<PageStore> {
        &self.pages
    }

    /// Superblock syncs made by commits so far.
    pub fn superblock_syncs(&self) -> u64 {
        self.superblock_syncs.load(Ordering::Relaxed)
    }
}

impl Deref for DurablePages {
    type Target = PageStore;

    fn deref(&self) -> &PageStore {
        &self.pages
    }
}
