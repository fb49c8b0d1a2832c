//! Range iteration: a merge of every source of the read view, resolved to the
//! newest version per key, with tombstones hidden. Both ends can be consumed
//! (`DoubleEndedIterator`); they meet without overlapping.

use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};

use bytes::Bytes;

use crate::Result;
use crate::db::range_filter;
use crate::key::compare_keys;
use crate::memtable::{Direction, MemTable, Versioned};
use crate::store::ReadView;
use crate::store::{TreeCursor, TreeVersion};
use crate::values::Value;

/// Keys fetched from one source by its first refill. Small, because the
/// merge needs from each source only the keys up to where the caller stops:
/// a YCSB E scan of 50 records over a MemTable holding a few percent of the
/// keys needs one or two of them, and fetching 64 from every MemTable was
/// most of its MemTable-search and key-comparison time.
const FIRST_FETCH_KEYS: usize = 8;
/// Each refill of a MemTable doubles the fetch up to this, which amortises
/// the cost of a refill (a MemTable search) for long scans.
const MAX_FETCH_KEYS: usize = 64;
/// Keys every refill from the tree fetches. The tree's cursor stays open
/// between refills, so a refill costs no search and there is nothing to
/// amortise by growing it: doubling, a scan of 57 to 100 keys (YCSB E's
/// lengths are uniform over 1-100) took 120 from the tree and dropped the
/// rest unread.
const TREE_FETCH_KEYS: usize = 8;

/// Iterator over `(key, value)` pairs of a range at one point in time.
/// Returned by [`crate::Db::range`], [`crate::Db::prefix`] and their
/// [`crate::Snapshot`] twins. Like a snapshot, it keeps the database open
/// until it is dropped: another `Db::open` of the directory gets
/// [`crate::Error::Locked`].
///
/// An error (a damaged page, a failed read) is returned once, and then the
/// iteration ends in both directions: later calls return `None`. So
/// `filter_map(Result::ok)` would silently stop short; handle the `Err`.
#[derive(Debug)]
pub struct Iter {
    view: ReadView,
    lower: Bound<Bytes>,
    upper: Bound<Bytes>,
    /// The last key `next` consumed (`None` before the first). A reused copy
    /// rather than a `Bytes` bound, so that emitting an item costs no
    /// reference-count traffic; it narrows `lower` where `lower` is read.
    front_last: Option<Vec<u8>>,
    /// The last key `next_back` consumed; narrows `upper` likewise.
    back_last: Option<Vec<u8>>,
    front: Vec<Cursor>,
    back: Vec<Cursor>,
    /// The keyspace's tag, cut off each key before it is returned and put
    /// before a key to seek.
    tag: Bytes,
    /// An error was returned: the iteration is over for good, seeks
    /// included.
    broken: bool,
    /// An error to return first (the keyspace was dropped), after which
    /// the iteration is over.
    failed: Option<crate::Error>,
    /// Keeps the database open (its `LOCK` held) while the iterator reads
    /// pages its view pins: another handle must not reuse them. Last, so
    /// that it is dropped after the view.
    db: std::sync::Arc<crate::db::DbInner>,
}

/// Buffered position in one source, for one direction.
struct Cursor {
    buf: VecDeque<Versioned>,
    /// What a refill fetched, moved into `buf` at once; kept to reuse its
    /// allocation.
    fetched: Vec<Versioned>,
    /// Where the next refill starts (exclusive of what was already fetched).
    resume: Bound<Bytes>,
    exhausted: bool,
    /// Keys the next refill of a MemTable asks for.
    fetch_keys: usize,
    /// The tree source's scan, kept between refills so that the tree is
    /// descended once per leaf, not once per refill. Its pages stay valid
    /// because the iterator's read view pins the tree version.
    tree: Option<TreeCursor>,
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("buffered", &self.buf.len())
            .field("resume", &self.resume)
            .field("exhausted", &self.exhausted)
            .finish_non_exhaustive()
    }
}

/// One layer of the read view.
#[derive(Clone, Copy)]
enum Source<'a> {
    MemTable(&'a dyn MemTable),
    Tree(&'a dyn TreeVersion),
}

impl Source<'_> {
    /// Appends up to `limit` entries from `(lo, hi)` in `dir` order; the
    /// tree's scan is opened once and kept in `tree`.
    fn scan(
        self,
        (lo, hi): (Bound<&[u8]>, Bound<&[u8]>),
        (seq, dir, limit): (u64, Direction, usize),
        tree: &mut Option<TreeCursor>,
        out: &mut Vec<Versioned>,
    ) -> Result<()> {
        match self {
            Source::MemTable(m) => {
                m.scan(lo, hi, seq, dir, limit, out);
                Ok(())
            }
            Source::Tree(t) => {
                let own = |b: Bound<&[u8]>| b.map(Bytes::copy_from_slice);
                let cursor = tree.get_or_insert_with(|| t.cursor(own(lo), own(hi), dir));
                cursor.fill(limit, out)
            }
        }
    }
}

fn sources(view: &ReadView) -> impl Iterator<Item = Source<'_>> {
    let memtables = view.state.memtables().map(|m| Source::MemTable(&**m));
    memtables.chain(view.state.tree.as_deref().map(Source::Tree))
}

impl Cursor {
    fn new(start: Bound<Bytes>) -> Self {
        Cursor {
            buf: VecDeque::new(),
            fetched: Vec::new(),
            resume: start,
            exhausted: false,
            fetch_keys: FIRST_FETCH_KEYS,
            tree: None,
        }
    }

    fn peek(
        &mut self,
        source: Source<'_>,
        end: Bound<&[u8]>,
        seq: u64,
        dir: Direction,
    ) -> Result<Option<&Bytes>> {
        if self.buf.is_empty() && !self.exhausted {
            let limit = match source {
                Source::MemTable(_) => {
                    let limit = self.fetch_keys;
                    self.fetch_keys = (limit * 2).min(MAX_FETCH_KEYS);
                    limit
                }
                Source::Tree(_) => TREE_FETCH_KEYS,
            };
            let range = match dir {
                Direction::Forward => (as_ref(&self.resume), end),
                Direction::Reverse => (end, as_ref(&self.resume)),
            };
            let out = &mut self.fetched;
            source.scan(range, (seq, dir, limit), &mut self.tree, out)?;
            self.exhausted = out.len() < limit;
            if let Some((last, _)) = out.last() {
                self.resume = Bound::Excluded(last.clone());
            }
            self.buf.extend(out.drain(..));
        }
        Ok(self.buf.front().map(|(k, _)| k))
    }
}

/// The next key a cursor holds, if any.
fn front(cursor: &Cursor) -> Option<&Bytes> {
    cursor.buf.front().map(|(k, _)| k)
}

fn as_ref(bound: &Bound<Bytes>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Converts caller bounds into owned byte bounds.
pub(crate) fn owned_bounds<K: AsRef<[u8]>, R: RangeBounds<K>>(
    range: &R,
) -> (Bound<Bytes>, Bound<Bytes>) {
    let own = |b: Bound<&K>| match b {
        Bound::Included(k) => Bound::Included(Bytes::copy_from_slice(k.as_ref())),
        Bound::Excluded(k) => Bound::Excluded(Bytes::copy_from_slice(k.as_ref())),
        Bound::Unbounded => Bound::Unbounded,
    };
    (own(range.start_bound()), own(range.end_bound()))
}

/// The range of keys starting with `prefix`.
pub(crate) fn prefix_bounds(prefix: &[u8]) -> (Bound<Bytes>, Bound<Bytes>) {
    let lower = Bound::Included(Bytes::copy_from_slice(prefix));
    // The successor of a prefix: drop trailing 0xff bytes, increment the last.
    let mut succ = prefix.to_vec();
    while succ.last() == Some(&0xff) {
        succ.pop();
    }
    let upper = match succ.last_mut() {
        Some(last) => {
            *last += 1;
            Bound::Excluded(Bytes::from(succ))
        }
        None => Bound::Unbounded,
    };
    (lower, upper)
}

/// `key` without its first `tag_len` bytes (its keyspace's tag).
#[inline]
fn strip(mut key: Bytes, tag_len: usize) -> Bytes {
    bytes::Buf::advance(&mut key, tag_len);
    key
}

/// `true` when no key can lie between the bounds.
fn is_empty_range(lower: &Bound<Bytes>, upper: &Bound<Bytes>) -> bool {
    match (lower, upper) {
        (Bound::Included(l), Bound::Included(u)) => l > u,
        (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(u))
        | (Bound::Excluded(l), Bound::Included(u)) => l >= u,
        _ => false,
    }
}

/// `bound` narrowed to exclude `last` and everything beyond it, where `last`
/// is the key the other end of the iteration consumed last.
fn narrowed<'a>(bound: &'a Bound<Bytes>, last: Option<&'a [u8]>) -> Bound<&'a [u8]> {
    match last {
        Some(key) => Bound::Excluded(key),
        None => as_ref(bound),
    }
}

/// Copies `key` into `slot`, reusing its allocation.
fn remember(slot: &mut Option<Vec<u8>>, key: &[u8]) {
    let last = slot.get_or_insert_with(Vec::new);
    last.clear();
    last.extend_from_slice(key);
}

fn below_upper(key: &[u8], upper: Bound<&[u8]>) -> bool {
    match upper {
        Bound::Included(u) => compare_keys(key, u).is_le(),
        Bound::Excluded(u) => compare_keys(key, u).is_lt(),
        Bound::Unbounded => true,
    }
}

fn above_lower(key: &[u8], lower: Bound<&[u8]>) -> bool {
    match lower {
        Bound::Included(l) => compare_keys(key, l).is_ge(),
        Bound::Excluded(l) => compare_keys(key, l).is_gt(),
        Bound::Unbounded => true,
    }
}

impl Iter {
    pub(crate) fn new(
        db: std::sync::Arc<crate::db::DbInner>,
        view: ReadView,
        lower: Bound<Bytes>,
        upper: Bound<Bytes>,
    ) -> Self {
        let sources = if is_empty_range(&lower, &upper) {
            0
        } else {
            sources(&view).count()
        };
        Iter {
            db,
            front: (0..sources).map(|_| Cursor::new(lower.clone())).collect(),
            back: (0..sources).map(|_| Cursor::new(upper.clone())).collect(),
            view,
            lower,
            upper,
            front_last: None,
            back_last: None,
            tag: Bytes::new(),
            broken: false,
            failed: None,
        }
    }

    /// An iterator that yields only `error`.
    pub(crate) fn failing(
        db: std::sync::Arc<crate::db::DbInner>,
        view: ReadView,
        error: crate::Error,
    ) -> Self {
        let empty = (Bound::Included(Bytes::new()), Bound::Excluded(Bytes::new()));
        let mut iter = Iter::new(db, view, empty.0, empty.1);
        iter.failed = Some(error);
        iter
    }

    /// Iterates over the user-key range `(lower, upper)` of the keyspace
    /// `core`, or yields only the error that it was dropped.
    pub(crate) fn in_keyspace(
        db: std::sync::Arc<crate::db::DbInner>,
        view: ReadView,
        core: &crate::db::keyspace::KeyspaceCore,
        lower: Bound<Bytes>,
        upper: Bound<Bytes>,
    ) -> Self {
        if let Err(e) = core.check_live() {
            return Iter::failing(db, view, e);
        }
        let (lower, upper) = core.tag.bounds(lower, upper);
        let mut iter = Iter::new(db, view, lower, upper);
        iter.tag = Bytes::copy_from_slice(core.tag.as_bytes());
        iter
    }

    /// Takes the smallest (forward) or largest (reverse) key across sources;
    /// on equal keys the newest source's version wins and the rest are dropped.
    fn step(&mut self, dir: Direction) -> Result<Option<Versioned>> {
        let view = &self.view;
        let (cursors, end) = match dir {
            Direction::Forward => (
                &mut self.front,
                narrowed(&self.upper, self.back_last.as_deref()),
            ),
            Direction::Reverse => (
                &mut self.back,
                narrowed(&self.lower, self.front_last.as_deref()),
            ),
        };
        for (cursor, source) in cursors.iter_mut().zip(sources(view)) {
            cursor.peek(source, end, view.seq, dir)?;
        }
        // Compared in place: no key is cloned while the winner is sought.
        let mut best: Option<(usize, &Bytes)> = None;
        for (i, key) in cursors
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((i, front(c)?)))
        {
            let better = best.is_none_or(|(_, b)| match dir {
                Direction::Forward => compare_keys(key, b).is_lt(),
                Direction::Reverse => compare_keys(key, b).is_gt(),
            });
            if better {
                best = Some((i, key));
            }
        }
        let Some(winner) = best.map(|(i, _)| i) else {
            return Ok(None);
        };
        // Ties go to the first (newest) source, so only later sources can
        // hold older versions of the winning key; they are dropped by
        // comparing with the popped key rather than with a clone of it.
        let (upto_winner, later) = cursors.split_at_mut(winner + 1);
        let item = upto_winner[winner]
            .buf
            .pop_front()
            .expect("the winner was chosen for its front entry");
        for cursor in later {
            if front(cursor).is_some_and(|k| compare_keys(k, &item.0).is_eq()) {
                cursor.buf.pop_front();
            }
        }
        Ok(Some(range_filter::hide_range_deleted(view, item, winner)))
    }

    /// Ends the iteration from both sides (after an error or when the ends meet).
    fn finish(&mut self) {
        self.front.clear();
        self.back.clear();
    }

    /// Ends the iteration for good after an error.
    fn fail(&mut self) {
        self.broken = true;
        self.finish();
    }

    /// Moves the forward end to the first key at or after `key` within the
    /// iterator's range (and its keyspace): the next [`Iterator::next`]
    /// returns it. Seeking backwards is allowed. The reverse end stays
    /// where it is: keys `next_back` returned are not returned again, and
    /// once the ends have met a seek finds nothing more. After an error
    /// the iteration stays over.
    pub fn seek(&mut self, key: impl AsRef<[u8]>) {
        let target = Bound::Included(self.stored(key.as_ref()));
        let start = tighter(&self.lower, target, Direction::Forward);
        self.front_last = None;
        self.front = self.reopened(&start, (&start, &self.upper));
    }

    /// Moves the reverse end to the last key at or before `key` within the
    /// iterator's range: the next [`DoubleEndedIterator::next_back`]
    /// returns it. The mirror of [`Iter::seek`].
    pub fn seek_back(&mut self, key: impl AsRef<[u8]>) {
        let target = Bound::Included(self.stored(key.as_ref()));
        let start = tighter(&self.upper, target, Direction::Reverse);
        self.back_last = None;
        self.back = self.reopened(&start, (&self.lower, &start));
    }

    /// The same iteration, yielding keys only. Values are not read: a
    /// separated value's file is never touched, so listing the keys of
    /// large values costs what listing small ones does.
    pub fn keys(self) -> super::Keys {
        super::Keys::new(self)
    }

    /// `key` behind the iterator's keyspace tag.
    fn stored(&self, key: &[u8]) -> Bytes {
        let mut stored = Vec::with_capacity(self.tag.len() + key.len());
        stored.extend_from_slice(&self.tag);
        stored.extend_from_slice(key);
        Bytes::from(stored)
    }

    /// Fresh cursors for one end, starting at `start`; none when the range
    /// `(lower, upper)` left is empty or the iteration is over (an error,
    /// or the ends met).
    fn reopened(
        &self,
        start: &Bound<Bytes>,
        (lower, upper): (&Bound<Bytes>, &Bound<Bytes>),
    ) -> Vec<Cursor> {
        let over = self.broken || (self.front.is_empty() && self.back.is_empty());
        if over || is_empty_range(lower, upper) {
            return Vec::new();
        }
        sources(&self.view)
            .map(|_| Cursor::new(start.clone()))
            .collect()
    }
}

/// Of the range bound `bound` and a seek's `target`, the one that lets
/// fewer keys through at the end `dir` starts from.
fn tighter(bound: &Bound<Bytes>, target: Bound<Bytes>, dir: Direction) -> Bound<Bytes> {
    let Bound::Included(t) = &target else {
        return target;
    };
    let keep_bound = match bound {
        Bound::Unbounded => false,
        Bound::Included(b) | Bound::Excluded(b) => match dir {
            Direction::Forward => compare_keys(b, t).is_ge(),
            Direction::Reverse => compare_keys(b, t).is_le(),
        },
    };
    if keep_bound { bound.clone() } else { target }
}

impl Iter {
    /// The pair as the user sees it: the key without its tag, and a
    /// separated value read from its value file. A failed read ends the
    /// iteration, as any error does.
    fn emit(&mut self, key: Bytes, value: Value) -> Result<(Bytes, Bytes)> {
        match self.db.resolve(&key, value) {
            Ok(value) => Ok((strip(key, self.tag.len()), value)),
            Err(e) => {
                self.fail();
                Err(e)
            }
        }
    }
}

impl Iter {
    /// The next live entry at the end `dir`: its key still behind the
    /// keyspace tag, its value not yet read from a value file. `None` when
    /// the ends have met or the range is done.
    pub(super) fn advance(&mut self, dir: Direction) -> Option<Result<(Bytes, Value)>> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        loop {
            let (key, value) = match self.step(dir) {
                Ok(Some(item)) => item,
                Ok(None) => return None,
                Err(e) => {
                    self.fail();
                    return Some(Err(e));
                }
            };
            let (inside, last) = match dir {
                Direction::Forward => (
                    below_upper(&key, narrowed(&self.upper, self.back_last.as_deref())),
                    &mut self.front_last,
                ),
                Direction::Reverse => (
                    above_lower(&key, narrowed(&self.lower, self.front_last.as_deref())),
                    &mut self.back_last,
                ),
            };
            if !inside {
                self.finish();
                return None;
            }
            remember(last, &key);
            if let Some(value) = value {
                return Some(Ok((key, value)));
            }
        }
    }

    /// `key` as the user sees it: without the keyspace tag.
    pub(super) fn user_key(&self, key: Bytes) -> Bytes {
        strip(key, self.tag.len())
    }
}

impl Iterator for Iter {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.advance(Direction::Forward)?;
        Some(item.and_then(|(key, value)| self.emit(key, value)))
    }
}

impl DoubleEndedIterator for Iter {
    fn next_back(&mut self) -> Option<Self::Item> {
        let item = self.advance(Direction::Reverse)?;
        Some(item.and_then(|(key, value)| self.emit(key, value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_successor() {
        let (_, upper) = prefix_bounds(b"ab\xff");
        assert_eq!(upper, Bound::Excluded(Bytes::from_static(b"ac")));
        let (_, upper) = prefix_bounds(b"\xff\xff");
        assert_eq!(upper, Bound::Unbounded);
    }

    #[test]
    fn empty_ranges() {
        let b = |s: &'static str| Bytes::from_static(s.as_bytes());
        assert!(is_empty_range(
            &Bound::Included(b("b")),
            &Bound::Excluded(b("a"))
        ));
        assert!(is_empty_range(
            &Bound::Included(b("a")),
            &Bound::Excluded(b("a"))
        ));
        assert!(!is_empty_range(
            &Bound::Included(b("a")),
            &Bound::Included(b("a"))
        ));
    }
}
