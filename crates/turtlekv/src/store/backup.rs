//! The store half of a backup: the pages of one pinned tree version
//! (`page::copy`) and, written last, the superblock that makes the
//! destination a database (`docs/format.md`, "Backups").

use std::path::Path;

use super::superblock::{Identity, SLOT_BYTES, SUPERBLOCK_FILE_NAME, Slot, SuperblockRecord};
use crate::Result;
use crate::io::{AlignedBuf, FileSystem, OpenOptions};
use crate::page::{CopyReport, PageId};
use crate::wal::WalPosition;

/// The superblock as it is written before it takes its name: a crash
/// leaves at most this file, which no open reads.
pub(crate) const SUPERBLOCK_TEMP_NAME: &str = "SUPERBLOCK.backup";

/// A tree version whose pages were copied into a backup's page files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CopiedVersion {
    /// The version's root; `None` for an empty tree.
    pub root: Option<PageId>,
    /// The generation it was committed as.
    pub generation: u64,
    /// Highest sequence number its tree holds.
    pub covered_seq: u64,
    pub node_size_bytes: u64,
    pub leaf_size_bytes: u64,
    pub pages: CopyReport,
}

/// What the backup's superblock records beside the copied version.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BackupLog {
    /// The backup's own identity.
    pub identity: Identity,
    /// Where its log (written before the superblock) starts: its first
    /// segment, which is also its WAL floor.
    pub replay_from: WalPosition,
}

/// Writes the backup's superblock into `dest` as the last step of a
/// backup, once its page files and log are durable: both slots (the
/// copied generation's successor and the one before it, naming the same
/// root, so that `Db::check` finds two consecutive generations) into a
/// temporary file, synced, then renamed to `SUPERBLOCK` and the directory
/// synced. Before the rename, `dest` holds no superblock and every open
/// refuses it.
pub(crate) fn commit_backup(
    fs: &dyn FileSystem,
    dest: &Path,
    copied: &CopiedVersion,
    log: &BackupLog,
) -> Result<()> {
    let newest = copied.generation + 1;
    let mut image = AlignedBuf::zeroed(2 * SLOT_BYTES);
    for generation in [newest - 1, newest] {
        let slot = Slot {
            generation,
            node_size_bytes: copied.node_size_bytes,
            leaf_size_bytes: copied.leaf_size_bytes,
            identity: Some(log.identity),
            wal_floor: log.replay_from.segment_id,
            record: SuperblockRecord {
                root: copied.root,
                covered_seq: copied.covered_seq,
                wal_replay_from: log.replay_from,
            },
        };
        let at = Slot::offset(generation) as usize;
        image[at..at + SLOT_BYTES].copy_from_slice(&slot.encode());
    }
    let temp = dest.join(SUPERBLOCK_TEMP_NAME);
    let create = OpenOptions {
        create_new: true,
        write: true,
        ..OpenOptions::default()
    };
    let file = fs.open(&temp, create)?;
    file.write_at(&image, 0)?;
    file.sync_data()?;
    drop(file);
    fs.rename(&temp, &dest.join(SUPERBLOCK_FILE_NAME))?;
    fs.sync_dir(dest)?;
    Ok(())
}
