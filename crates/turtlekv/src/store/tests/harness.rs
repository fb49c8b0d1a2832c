//! The page layer's toy tree on the durable page store.

use std::path::Path;
use std::sync::Arc;

use crate::Result;
use crate::io::{FaultFs, FileSystem};
pub(super) use crate::page::tests::harness::{
    DIR, Version, leaf_bytes, list_children, node_bytes, small_options,
};
use crate::page::{PageId, PageStoreOptions};
use crate::store::DurablePages;
use crate::store::superblock::SuperblockRecord;
use crate::wal::WalPosition;

/// The store in `DIR`, created when missing.
pub(super) fn open(
    fs: &FaultFs,
    options: &PageStoreOptions,
) -> Result<(DurablePages, SuperblockRecord)> {
    let fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    open_in(&fs, Path::new(DIR), options, true)
}

/// The store in `dir`, created only with `create_if_missing`.
pub(super) fn open_in(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    options: &PageStoreOptions,
    create_if_missing: bool,
) -> Result<(DurablePages, SuperblockRecord)> {
    DurablePages::open(fs, dir, options, create_if_missing, &list_children)
}

/// The record of the `n`-th commit, naming `root`.
pub(super) fn record(root: Option<PageId>, n: u64) -> SuperblockRecord {
    SuperblockRecord {
        root,
        covered_seq: n * 10,
        wal_replay_from: WalPosition {
            segment_id: n,
            offset_bytes: 32,
        },
    }
}
