//! What the checkpoint pipeline needs from the tree below it.
//!
//! The engine's target is the TurtleTree on the page store; tests of the
//! pipeline's control flow can plug in a simpler one.

use std::fmt::Debug;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use crate::Result;
use crate::memtable::{Direction, Versioned};

/// One durable, immutable version of the tree: the result of a checkpoint.
/// Readers holding it keep its pages from being reused.
pub(crate) trait TreeVersion: Send + Sync + Debug {
    /// The value of `key` in this version.
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>>;

    /// Appends to `out` up to `limit` live pairs within `(lower, upper)` in
    /// `direction` order, starting from the matching end of the range.
    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        out: &mut Vec<(Bytes, Bytes)>,
    ) -> Result<()>;

    /// Highest sequence number whose write this version contains.
    fn covered_seq(&self) -> u64;

    /// Verifies every page and invariant of this version (`Db::check`).
    fn check(&self) -> Result<TreeCheck>;
}

/// What a tree check verified.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TreeCheck {
    /// Live keys.
    pub keys: u64,
    /// Pages read and verified.
    pub pages: u64,
}

/// Where checkpoints go.
pub(crate) trait CheckpointTarget: Send + Sync + Debug {
    /// The newest durable version.
    fn current(&self) -> Arc<dyn TreeVersion>;

    /// Applies `items` (key order, one newest version per key, `None` for a
    /// tombstone) on top of the current version, makes the result durable,
    /// and returns it. `covered_seq` is recorded with it, so that recovery
    /// replays only the WAL records above it.
    fn checkpoint(
        &self,
        items: &mut dyn Iterator<Item = Versioned>,
        covered_seq: u64,
    ) -> Result<Arc<dyn TreeVersion>>;
}
