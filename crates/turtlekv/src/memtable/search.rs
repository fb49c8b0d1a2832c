//! What the MemTable's structures share: which entries a search passes
//! (`Edge`), bound checks, and turning found entries into `Bytes`.

use std::cmp::Ordering;
use std::ops::Bound;

use bytes::{Bytes, BytesMut};

use super::node::{KeyParts, NodeRef};
use super::{Direction, Versioned};
use crate::values::Value;

/// Versions of one key a forward scan steps over before seeking past the
/// key instead (a hot key may hold many).
const MAX_VERSION_STEPS: usize = 4;

/// Which entries a search passes: those before a version, those whose key
/// is below a key, those whose key is at most a key, or all of them.
/// Entries are in version order, so the passed ones come first.
#[derive(Clone, Copy)]
pub(crate) enum Edge<'k> {
    Version(KeyParts<'k>),
    Below(KeyParts<'k>),
    UpTo(KeyParts<'k>),
    All,
}

impl<'k> Edge<'k> {
    /// Entries of keys below `key` (every version of `key` is at or after
    /// `(key, u64::MAX)`).
    pub fn below(key: &'k [u8]) -> Self {
        Edge::Below(KeyParts::new(key, u64::MAX))
    }

    /// Entries of keys up to `key` (every version is at or before `(key, 0)`).
    pub fn up_to(key: &'k [u8]) -> Self {
        Edge::UpTo(KeyParts::new(key, 0))
    }

    pub fn passes(self, node: NodeRef<'_>) -> bool {
        match self {
            Edge::Version(p) | Edge::Below(p) => node.cmp_parts(p) == Ordering::Less,
            Edge::UpTo(p) => node.cmp_parts(p) != Ordering::Greater,
            Edge::All => true,
        }
    }

    /// The key prefix entries are compared with first: an entry whose
    /// prefix is below it passes, one above it does not. `None` for `All`.
    pub fn prefix(self) -> Option<u64> {
        match self {
            Edge::Version(p) | Edge::Below(p) | Edge::UpTo(p) => Some(p.prefix),
            Edge::All => None,
        }
    }
}

/// `true` when `key` lies on the inner side of `bound`.
pub(super) fn within(
    key: &[u8],
    bound: Bound<&[u8]>,
    excluded: fn(&[u8], &[u8]) -> bool,
    included: fn(&[u8], &[u8]) -> bool,
) -> bool {
    match bound {
        Bound::Included(b) => included(key, b),
        Bound::Excluded(b) => excluded(key, b),
        Bound::Unbounded => true,
    }
}

/// The found entries as `Bytes`: slices of the sealed arena's chunks when
/// there are any, or else copies into one buffer per call.
fn emit(sealed: Option<&Vec<Bytes>>, found: &[NodeRef<'_>], out: &mut Vec<Versioned>) {
    if let Some(chunks) = sealed {
        out.extend(found.iter().map(|&n| {
            let chunk = &chunks[n.chunk() as usize];
            let at = n.ptr() as usize - chunk.as_ptr() as usize;
            let slice = |r: std::ops::Range<usize>| chunk.slice(at + r.start..at + r.end);
            let value = n
                .value_range()
                .map(|r| Value::of_kind(n.is_pointer(), slice(r)));
            (slice(n.key_range()), value)
        }));
        return;
    }
    let total = found
        .iter()
        .map(|n| n.key().len() + n.value().map_or(0, <[u8]>::len))
        .sum();
    let mut buf = BytesMut::with_capacity(total);
    for n in found {
        buf.extend_from_slice(n.key());
        buf.extend_from_slice(n.value().unwrap_or_default());
    }
    let buf = buf.freeze();
    let mut at = 0;
    let mut take = |len: usize| {
        at += len;
        buf.slice(at - len..at)
    };
    out.extend(found.iter().map(|n| {
        let key = take(n.key().len());
        let value = n
            .value()
            .map(|v| Value::of_kind(n.is_pointer(), take(v.len())));
        (key, value)
    }));
}

/// The searches gets and reverse scans are made of, on either structure.
pub(super) trait Search: Sized {
    /// The last entry `edge` passes (`None`: none does) and the first it
    /// does not (`None`: every entry passes).
    fn around(&self, edge: Edge<'_>) -> (Option<NodeRef<'_>>, Option<NodeRef<'_>>);

    /// Walks entries in order (keys ascending, each key's versions newest
    /// first) one step per entry, instead of searching from the top for
    /// every key.
    type Forward<'a>: Iterator<Item = NodeRef<'a>>
    where
        Self: 'a;

    /// A forward walk from the first entry at or after `lower`.
    fn forward_from<'a>(&'a self, lower: Bound<&[u8]>) -> Self::Forward<'a>;

    /// Appends to `found` up to `limit` keys within `(lower, upper)`, each
    /// with its newest version visible at `seq`, from the lower end up.
    fn scan_forward<'a>(
        &'a self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        seq: u64,
        limit: usize,
        found: &mut Vec<NodeRef<'a>>,
    ) {
        let mut walk = self.forward_from(lower);
        let mut next = walk.next();
        while found.len() < limit {
            let Some(first) = next else {
                return;
            };
            let key = first.key();
            if !within(key, upper, |k, b| k < b, |k, b| k <= b) {
                return;
            }
            // Versions come newest first: the first at or below `seq` is
            // the visible one. Past it, step over a few older versions to
            // the next key, or seek past them.
            let mut visible = (first.seq() <= seq).then_some(first);
            let mut steps = 0;
            next = loop {
                match walk.next() {
                    Some(n) if n.key() == key => {
                        steps += 1;
                        if visible.is_none() && n.seq() <= seq {
                            visible = Some(n);
                        } else if visible.is_some() && steps > MAX_VERSION_STEPS {
                            walk = self.forward_from(Bound::Excluded(key));
                            break walk.next();
                        }
                    }
                    other => break other,
                }
            };
            found.extend(visible);
        }
    }

    /// The arena's chunks once the MemTable is sealed (reads then share
    /// them), `None` while it takes writes (reads copy).
    fn sealed_chunks(&self) -> Option<&Vec<Bytes>>;

    /// Whether `key` may have been inserted (the MemTable's key filter).
    fn may_contain(&self, key: &[u8]) -> bool;

    /// The last entry at or before `upper`.
    fn last_from(&self, upper: Bound<&[u8]>) -> Option<NodeRef<'_>> {
        match upper {
            Bound::Included(k) => self.around(Edge::up_to(k)).0,
            Bound::Excluded(k) => self.around(Edge::below(k)).0,
            Bound::Unbounded => self.around(Edge::All).0,
        }
    }

    /// The newest version of `key` at or below `seq`.
    fn visible(&self, key: &[u8], seq: u64) -> Option<NodeRef<'_>> {
        let (_, next) = self.around(Edge::Version(KeyParts::new(key, seq)));
        next.filter(|n| n.key() == key)
    }

    /// `MemTable::get` for either structure.
    fn get_visible(&self, key: &[u8], seq: u64) -> Option<Option<Value>> {
        if !self.may_contain(key) {
            return None;
        }
        let node = self.visible(key, seq)?;
        let mut out = Vec::with_capacity(1);
        emit(self.sealed_chunks(), &[node], &mut out);
        out.pop().map(|(_, value)| value)
    }

    /// `MemTable::visible_seq` for either structure.
    fn visible_seq_of(&self, key: &[u8], seq: u64) -> Option<u64> {
        if !self.may_contain(key) {
            return None;
        }
        self.visible(key, seq).map(|n| n.seq())
    }

    /// `MemTable::newest_seq` for either structure.
    fn newest_seq_of(&self, key: &[u8]) -> Option<u64> {
        if !self.may_contain(key) {
            return None;
        }
        self.visible(key, u64::MAX).map(|n| n.seq())
    }

    /// `MemTable::scan` for either structure.
    fn scan_visible(
        &self,
        (lower, upper): (Bound<&[u8]>, Bound<&[u8]>),
        seq: u64,
        direction: Direction,
        limit: usize,
        out: &mut Vec<Versioned>,
    ) {
        let mut found = Vec::with_capacity(limit.min(1024));
        match direction {
            Direction::Forward => self.scan_forward(lower, upper, seq, limit, &mut found),
            Direction::Reverse => scan_reverse(self, lower, upper, seq, limit, &mut found),
        }
        emit(self.sealed_chunks(), &found, out);
    }
}

/// Appends to `found` up to `limit` keys within `(lower, upper)`, each with
/// its newest version visible at `seq`, from the upper end down. One or two
/// searches per key rather than a walk over versions: a hot key may hold
/// many versions older than the visible one.
fn scan_reverse<'a, T: Search>(
    table: &'a T,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    seq: u64,
    limit: usize,
    found: &mut Vec<NodeRef<'a>>,
) {
    let mut resume: Option<&'a [u8]> = None;
    while found.len() < limit {
        let last = match resume {
            None => table.last_from(upper),
            Some(k) => table.last_from(Bound::Excluded(k)),
        };
        let Some(last) = last else {
            return;
        };
        let key = last.key();
        if !within(key, lower, |k, b| k > b, |k, b| k >= b) {
            return;
        }
        found.extend(table.visible(key, seq));
        resume = Some(key);
    }
}
