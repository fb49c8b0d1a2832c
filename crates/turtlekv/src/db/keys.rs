//! Keys-only iteration: [`Iter`] without reading values.

use bytes::Bytes;

use crate::Result;
use crate::db::Iter;
use crate::memtable::Direction;

/// Iterator over the keys of a range at one point in time, from
/// [`Iter::keys`]. It never reads a value file; errors and the end of the
/// iteration behave as in [`Iter`].
#[derive(Debug)]
pub struct Keys {
    iter: Iter,
}

impl Keys {
    pub(super) fn new(iter: Iter) -> Self {
        Keys { iter }
    }

    /// Moves the forward end to the first key at or after `key`, as
    /// [`Iter::seek`] does.
    pub fn seek(&mut self, key: impl AsRef<[u8]>) {
        self.iter.seek(key);
    }

    /// Moves the reverse end to the last key at or before `key`, as
    /// [`Iter::seek_back`] does.
    pub fn seek_back(&mut self, key: impl AsRef<[u8]>) {
        self.iter.seek_back(key);
    }

    fn advance(&mut self, dir: Direction) -> Option<Result<Bytes>> {
        let item = self.iter.advance(dir)?;
        Some(item.map(|(key, _)| self.iter.user_key(key)))
    }
}

impl Iterator for Keys {
    type Item = Result<Bytes>;

    fn next(&mut self) -> Option<Self::Item> {
        self.advance(Direction::Forward)
    }
}

impl DoubleEndedIterator for Keys {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.advance(Direction::Reverse)
    }
}
