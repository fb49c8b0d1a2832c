//! The page store with its superblock: pages whose committed root, and the
//! WAL position recorded with it, survive a crash.

use std::io;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::superblock::{
    Identity, SUPERBLOCK_FILE_NAME, Slot, SlotDamage, Superblock, SuperblockRecord,
};
use crate::io::FileSystem;
use crate::page::{ListChildren, PageId, PageRange, PageStore, PageStoreOptions};
use crate::util::identity::{checksum_seed, new_database_id};
use crate::wal::WAL_DIR;
use crate::{Error, Result};

/// A page store whose commits are made durable in the superblock. Derefs
/// to the page store for reads, writes and pins.
#[derive(Debug)]
pub(crate) struct DurablePages {
    pages: Arc<PageStore>,
    superblock: Superblock,
    /// Superblock syncs made by commits (counted with the page files').
    superblock_syncs: AtomicU64,
    /// The database's identity; durable once a version-2 slot was
    /// committed (at the latest by the first commit of this handle).
    identity: Identity,
    /// The WAL floor of the newest commit (`docs/format.md`, "Superblock").
    wal_floor: AtomicU64,
    /// A slot that failed to validate when the store was opened.
    damage: Option<SlotDamage>,
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
        // A database without a recorded identity (an earlier build's, or
        // a creation cut short) takes the one its log already names, if an
        // open of this build started a segment before the superblock could
        // record it, else a new one.
        let legacy_identity = || match crate::wal::log_identity(&**fs, &dir.join(WAL_DIR))? {
            Some(id) => Ok(id),
            None => Ok(new_database_id()?),
        };
        let recovered = superblock.recover(&**fs, dir, &pages, options, &legacy_identity)?;
        let slot = recovered.slot;
        let identity = slot.identity.expect("recover assigns an identity");
        pages.set_checksum_seed(checksum_seed(identity.id), identity.upgraded);
        // With a damaged slot we cannot tell a torn commit from a decayed
        // newer one; keep the bytes the other slot may name, for repair.
        pages.install_root(
            slot.generation,
            slot.record.root,
            !recovered.damaged,
            list_children,
        )?;
        let store = DurablePages {
            pages: Arc::new(pages),
            superblock,
            superblock_syncs: AtomicU64::new(0),
            identity,
            wal_floor: AtomicU64::new(slot.wal_floor),
            damage: recovered.damage,
        };
        Ok((store, slot.record))
    }

    /// Makes `record` the durable root: syncs the pages written so far,
    /// writes the next superblock slot and syncs it (the commit point).
    /// `unreachable` lists the pages the new root no longer reaches; their
    /// slots are reused once no reader pins an older generation. Returns
    /// the new generation.
    #[cfg(test)]
    pub fn commit(&self, record: SuperblockRecord, unreachable: &[PageId]) -> Result<u64> {
        // A checkpoint's replay position is a segment the log created
        // durably before the freeze it follows.
        self.commit_retiring(record, unreachable, Vec::new())
    }

    /// `commit`, also leaving `dead_ranges` of pages the new root still
    /// reaches to no reader of it (`PageStore::commit_retiring`).
    pub fn commit_retiring(
        &self,
        record: SuperblockRecord,
        unreachable: &[PageId],
        dead_ranges: Vec<PageRange>,
    ) -> Result<u64> {
        let floor = self.wal_floor().max(record.wal_replay_from.segment_id);
        self.commit_with_floor(record, (unreachable, dead_ranges), floor)
    }

    /// Commits `record` again (the root it names is the current one) with
    /// `floor` as the WAL floor: an open records the segment it started,
    /// once that segment's header is durable. Also makes an identity
    /// assigned at this open durable, and rewrites the older slot.
    pub fn commit_wal_floor(&self, record: SuperblockRecord, floor: u64) -> Result<u64> {
        self.commit_with_floor(record, (&[], Vec::new()), floor.max(self.wal_floor()))
    }

    fn commit_with_floor(
        &self,
        record: SuperblockRecord,
        (unreachable, dead_ranges): (&[PageId], Vec<PageRange>),
        wal_floor: u64,
    ) -> Result<u64> {
        let (node_size_bytes, leaf_size_bytes) = self.superblock.page_sizes();
        let generation = self.pages.commit_retiring(
            record.root,
            unreachable,
            dead_ranges,
            &mut |generation| {
                let slot = Slot {
                    generation,
                    node_size_bytes,
                    leaf_size_bytes,
                    identity: Some(self.identity),
                    wal_floor,
                    record,
                };
                self.superblock.write(&slot)?;
                self.superblock_syncs.fetch_add(1, Ordering::Relaxed);
                Ok(())
            },
        )?;
        self.wal_floor.store(wal_floor, Ordering::Relaxed);
        Ok(generation)
    }

    /// The database's identity.
    pub fn identity(&self) -> Identity {
        self.identity
    }

    /// The WAL floor of the newest commit.
    pub fn wal_floor(&self) -> u64 {
        self.wal_floor.load(Ordering::Relaxed)
    }

    /// A slot that failed to validate when the store was opened.
    pub fn damage(&self) -> Option<&SlotDamage> {
        self.damage.as_ref()
    }

    /// Reads both superblock slots back and checks them against each
    /// other and against this store (`Db::check`).
    pub fn check_superblock(&self) -> Result<()> {
        self.pages
            .without_commits(|generation| self.check_superblock_at(generation))
    }

    fn check_superblock_at(&self, generation: u64) -> Result<()> {
        let newest = self.superblock.check()?;
        // A newer slot than this handle committed is a commit whose sync
        // failed (the handle is poisoned), not damage; an older one lost a
        // commit.
        if newest.identity.map(|i| i.id) != Some(self.identity.id) || newest.generation < generation
        {
            return Err(Error::corruption(
                self.superblock.path(),
                Slot::offset(newest.generation),
                format!(
                    "the newest slot holds generation {} of database {:#018x}, but this handle \
                     committed generation {generation} of {:#018x}",
                    newest.generation,
                    newest.identity.map_or(0, |i| i.id),
                    self.identity.id
                ),
            ));
        }
        Ok(())
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
