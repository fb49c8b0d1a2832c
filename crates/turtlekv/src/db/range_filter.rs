//! What range deletions hide from a scan: the merge of a read view's
//! sources (`iter.rs`) picks each key's newest version, and a version that
//! a range tombstone numbered above it covers is hidden like a point
//! tombstone. Point reads ask the same question of the State
//! (`State::get`); both rest on `State::is_range_deleted`.

use crate::memtable::Versioned;
use crate::store::ReadView;

/// `item`, the newest version of its key among the view's sources, found
/// in source `source`: as it is, or as a tombstone when a range deletion
/// the view sees covers it.
pub(crate) fn hide_range_deleted(view: &ReadView, item: Versioned, source: usize) -> Versioned {
    let (key, value) = item;
    if value.is_none() || !view.state.holds_range_tombstones() {
        return (key, value);
    }
    if view.state.is_range_deleted(&key, view.seq, source) {
        return (key, None);
    }
    (key, value)
}
