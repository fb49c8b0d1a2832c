//! A place in the log: where replay starts after a checkpoint.

/// A byte offset in one segment. The store layer keeps the one a
/// checkpoint starts replay from durable with the tree's root
/// (`store::superblock`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) struct WalPosition {
    pub segment_id: u64,
    pub offset_bytes: u64,
}
