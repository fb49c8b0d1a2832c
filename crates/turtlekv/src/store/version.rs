//! The read side of the store: one durable tree version, and scans over it.

use std::fmt::Debug;
use std::ops::Bound;

use bytes::Bytes;

use crate::Result;
use crate::memtable::{Direction, Versioned};
use crate::values::Value;

/// One durable, immutable version of the tree: the result of a checkpoint.
/// Readers holding it keep its pages from being reused.
pub(crate) trait TreeVersion: Send + Sync + Debug {
    /// The value of `key` in this version.
    fn get(&self, key: &[u8]) -> Result<Option<Value>>;

    /// The values of `keys` in this version, in order, as `get` gives
    /// them; a version on disk issues the lookups' reads together.
    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Value>>> {
        keys.iter().map(|key| self.get(key)).collect()
    }

    /// About how many records this version holds in `span`
    /// (`Tree::approximate_items`).
    fn approximate_items(&self, span: crate::tree::count::KeySpan<'_>) -> Result<u64>;

    /// An iterator over the live pairs within `(lower, upper)` in
    /// `direction` order, starting from the matching end of the range. It
    /// reads this version's pages: the caller keeps the version alive for
    /// as long as it uses the cursor.
    fn cursor(&self, lower: Bound<Bytes>, upper: Bound<Bytes>, direction: Direction) -> TreeCursor;

    /// Highest sequence number whose write this version contains.
    fn covered_seq(&self) -> u64;

    /// Verifies every page and invariant of this version (`Db::check`).
    fn check(&self) -> Result<TreeCheck>;

    /// Copies the pages this version reaches into new page files in
    /// `dest`, verified and resealed with `dest_seed` (a backup,
    /// `store::backup`); `None` for a store that keeps no pages.
    fn copy_pages(
        &self,
        _fs: &dyn crate::io::FileSystem,
        _dest: &std::path::Path,
        _dest_seed: u32,
    ) -> Result<Option<super::backup::CopiedVersion>> {
        Ok(None)
    }
}

/// A scan over one tree version, taken in batches.
pub(crate) trait TreeScan: Send {
    /// Appends the next live pairs to `out`, in the cursor's direction: up
    /// to `limit` of them, fewer only when the scan is over. After an
    /// error the scan yields nothing more.
    fn fill(&mut self, limit: usize, out: &mut Vec<Versioned>) -> Result<()>;
}

/// A scan over one tree version.
pub(crate) type TreeCursor = Box<dyn TreeScan>;

/// What a tree check verified.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TreeCheck {
    /// Live keys.
    pub keys: u64,
    /// Pages read and verified.
    pub pages: u64,
}
