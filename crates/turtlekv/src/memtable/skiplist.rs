//! The MemTable on `crossbeam-skiplist`: lock-free inserts and reads.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use bytes::Bytes;
use crossbeam_skiplist::SkipMap;

use super::bloom::KeyBloom;
use super::{Direction, ENTRY_OVERHEAD_BYTES, MemTable, Versioned};

/// Orders versions by user key ascending, then sequence number descending,
/// so the newest version of a key comes first.
trait VersionKey {
    fn parts(&self) -> KeyParts<'_>;
}

/// What comparisons look at. `prefix` caches the key's first 8 bytes
/// (big-endian, zero-padded) so most comparisons are one integer compare
/// instead of a `memcmp` call.
#[derive(Clone, Copy)]
struct KeyParts<'a> {
    prefix: u64,
    user_key: &'a [u8],
    seq: u64,
}

fn key_prefix(key: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let n = key.len().min(8);
    buf[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(buf)
}

fn compare(a: KeyParts<'_>, b: KeyParts<'_>) -> Ordering {
    // Equal prefixes say nothing about shorter keys ("a" vs "a\0"), so ties
    // fall back to the full comparison.
    a.prefix
        .cmp(&b.prefix)
        .then_with(|| a.user_key.cmp(b.user_key))
        .then_with(|| b.seq.cmp(&a.seq))
}

#[derive(Debug)]
struct InternalKey {
    prefix: u64,
    user_key: Bytes,
    seq: u64,
}

/// A borrowed lookup key, so reads do not allocate.
struct Probe<'a> {
    prefix: u64,
    user_key: &'a [u8],
    seq: u64,
}

impl<'a> Probe<'a> {
    fn new(user_key: &'a [u8], seq: u64) -> Self {
        Probe {
            prefix: key_prefix(user_key),
            user_key,
            seq,
        }
    }
}

impl VersionKey for InternalKey {
    fn parts(&self) -> KeyParts<'_> {
        KeyParts {
            prefix: self.prefix,
            user_key: &self.user_key,
            seq: self.seq,
        }
    }
}

impl VersionKey for Probe<'_> {
    fn parts(&self) -> KeyParts<'_> {
        KeyParts {
            prefix: self.prefix,
            user_key: self.user_key,
            seq: self.seq,
        }
    }
}

impl Ord for dyn VersionKey + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        compare(self.parts(), other.parts())
    }
}
impl PartialOrd for dyn VersionKey + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for dyn VersionKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for dyn VersionKey + '_ {}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare(self.parts(), other.parts())
    }
}
impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for InternalKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for InternalKey {}

impl<'a> Borrow<dyn VersionKey + 'a> for InternalKey {
    fn borrow(&self) -> &(dyn VersionKey + 'a) {
        self
    }
}

/// Concurrent skiplist of versions.
#[derive(Debug)]
pub(crate) struct SkipListMemTable {
    map: SkipMap<InternalKey, Option<Bytes>>,
    size_bytes: AtomicU64,
    /// Every key inserted; gets of other keys skip the search.
    bloom: KeyBloom,
}

impl SkipListMemTable {
    /// A MemTable whose key filter is sized for `capacity_bytes` of entries
    /// (it stays correct beyond, with more false positives). The filter's
    /// memory is charged to the MemTable's size.
    pub fn with_capacity(capacity_bytes: u64) -> Self {
        let bloom = KeyBloom::new(capacity_bytes / ENTRY_OVERHEAD_BYTES);
        SkipListMemTable {
            map: SkipMap::new(),
            size_bytes: AtomicU64::new(bloom.size_bytes()),
            bloom,
        }
    }

    #[cfg(test)]
    pub fn new() -> Self {
        Self::with_capacity(1 << 20)
    }
}

/// Maps a user-key bound to a version-key bound covering every version.
fn lower_probe<'a>(bound: Bound<&'a [u8]>) -> Bound<Probe<'a>> {
    match bound {
        Bound::Included(k) => Bound::Included(Probe::new(k, u64::MAX)),
        Bound::Excluded(k) => Bound::Excluded(Probe::new(k, 0)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn upper_probe<'a>(bound: Bound<&'a [u8]>) -> Bound<Probe<'a>> {
    match bound {
        Bound::Included(k) => Bound::Included(Probe::new(k, 0)),
        Bound::Excluded(k) => Bound::Excluded(Probe::new(k, u64::MAX)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// `true` when `key` lies on the inner side of `bound`.
fn within(
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

fn as_dyn<'p, 'a>(bound: &'p Bound<Probe<'a>>) -> Bound<&'p (dyn VersionKey + 'a)> {
    match bound {
        Bound::Included(p) => Bound::Included(p as &dyn VersionKey),
        Bound::Excluded(p) => Bound::Excluded(p as &dyn VersionKey),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Versions of one key a forward scan steps over before seeking past the
/// key instead (a hot key may hold many).
const MAX_VERSION_STEPS: usize = 4;

impl SkipListMemTable {
    /// Forward scans walk the skiplist's bottom level (one step per entry)
    /// instead of seeking from the top for every key.
    fn scan_forward(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        seq: u64,
        limit: usize,
        out: &mut Vec<Versioned>,
    ) {
        let target = out.len() + limit;
        let mut next = self.map.lower_bound(as_dyn(&lower_probe(lower)));
        while out.len() < target {
            let Some(first) = next else {
                return;
            };
            let key = &first.key().user_key;
            if !within(key, upper, |k, b| k < b, |k, b| k <= b) {
                return;
            }
            // Versions come newest first: the first at or below `seq` is
            // the visible one.
            let mut entry = first.clone();
            let mut steps = 0;
            let visible = loop {
                if entry.key().seq <= seq {
                    break Some(entry.value().clone());
                }
                match entry.next() {
                    Some(n) if n.key().user_key == *key => entry = n,
                    _ => break None,
                }
                steps += 1;
            };
            if let Some(value) = visible {
                out.push((key.clone(), value));
            }
            // On to the next key: step over a few older versions, or seek.
            next = entry.next();
            while let Some(n) = &next {
                if n.key().user_key != *key {
                    break;
                }
                steps += 1;
                if steps > MAX_VERSION_STEPS {
                    let past = Bound::Excluded(Probe::new(key, 0));
                    next = self.map.lower_bound(as_dyn(&past));
                    break;
                }
                next = n.next();
            }
        }
    }
}

impl MemTable for SkipListMemTable {
    fn insert(&self, key: Bytes, seq: u64, value: Option<Bytes>) {
        let bytes = key.len() as u64 + value.as_ref().map_or(0, |v| v.len() as u64);
        let prefix = key_prefix(&key);
        // Before the entry: a get that finds the entry must pass the filter.
        self.bloom.insert(&key);
        self.map.insert(
            InternalKey {
                prefix,
                user_key: key,
                seq,
            },
            value,
        );
        self.size_bytes
            .fetch_add(bytes + ENTRY_OVERHEAD_BYTES, AtomicOrdering::Relaxed);
    }

    fn get(&self, key: &[u8], seq: u64) -> Option<Option<Bytes>> {
        if !self.bloom.may_contain(key) {
            return None;
        }
        let probe = Probe::new(key, seq);
        let entry = self
            .map
            .lower_bound(Bound::Included(&probe as &dyn VersionKey))?;
        (entry.key().user_key == key).then(|| entry.value().clone())
    }

    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        seq: u64,
        direction: Direction,
        limit: usize,
        out: &mut Vec<Versioned>,
    ) {
        if direction == Direction::Forward {
            return self.scan_forward(lower, upper, seq, limit, out);
        }
        // One or two seeks per key rather than a walk over versions: a hot
        // key may hold many versions older than the visible one.
        let target = out.len() + limit;
        let mut resume: Option<Bytes> = None;
        while out.len() < target {
            let from = match (&resume, direction) {
                (None, Direction::Forward) => lower_probe(lower),
                (None, Direction::Reverse) => upper_probe(upper),
                (Some(k), Direction::Forward) => Bound::Excluded(Probe::new(k, 0)),
                (Some(k), Direction::Reverse) => Bound::Excluded(Probe::new(k, u64::MAX)),
            };
            let entry = match direction {
                Direction::Forward => self.map.lower_bound(as_dyn(&from)),
                Direction::Reverse => self.map.upper_bound(as_dyn(&from)),
            };
            let Some(entry) = entry else {
                return;
            };
            let key = entry.key().user_key.clone();
            let inside = match direction {
                Direction::Forward => within(&key, upper, |k, b| k < b, |k, b| k <= b),
                Direction::Reverse => within(&key, lower, |k, b| k > b, |k, b| k >= b),
            };
            if !inside {
                return;
            }
            // Forward seeks land on the newest version, often the visible one.
            let visible = if direction == Direction::Forward && entry.key().seq <= seq {
                Some(entry.value().clone())
            } else {
                self.get(&key, seq)
            };
            if let Some(value) = visible {
                out.push((key.clone(), value));
            }
            resume = Some(key);
        }
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes.load(AtomicOrdering::Relaxed)
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn table() -> SkipListMemTable {
        let t = SkipListMemTable::new();
        t.insert(b("a"), 1, Some(b("a1")));
        t.insert(b("a"), 5, Some(b("a5")));
        t.insert(b("b"), 2, None);
        t.insert(b("b"), 1, Some(b("b1")));
        t.insert(b("c"), 7, Some(b("c7")));
        t
    }

    #[test]
    fn get_sees_the_newest_visible_version() {
        let t = table();
        assert_eq!(t.get(b"a", 4), Some(Some(b("a1"))));
        assert_eq!(t.get(b"a", 5), Some(Some(b("a5"))));
        assert_eq!(t.get(b"a", 0), None);
        assert_eq!(t.get(b"b", 9), Some(None));
        assert_eq!(t.get(b"b", 1), Some(Some(b("b1"))));
        assert_eq!(t.get(b"c", 6), None);
        assert_eq!(t.get(b"d", 9), None);
    }

    fn scan(t: &SkipListMemTable, seq: u64, dir: Direction, limit: usize) -> Vec<Versioned> {
        let mut out = Vec::new();
        t.scan(
            Bound::Unbounded,
            Bound::Unbounded,
            seq,
            dir,
            limit,
            &mut out,
        );
        out
    }

    #[test]
    fn scans_resolve_versions_both_ways() {
        let t = table();
        let fwd = scan(&t, 6, Direction::Forward, 10);
        assert_eq!(fwd, vec![(b("a"), Some(b("a5"))), (b("b"), None)]);
        let rev = scan(&t, 6, Direction::Reverse, 10);
        assert_eq!(rev, vec![(b("b"), None), (b("a"), Some(b("a5")))]);
        let rev = scan(&t, 1, Direction::Reverse, 1);
        assert_eq!(rev, vec![(b("b"), Some(b("b1")))]);
    }

    #[test]
    fn scan_bounds_cover_all_versions() {
        let t = table();
        let mut out = Vec::new();
        t.scan(
            Bound::Excluded(b"a"),
            Bound::Included(b"c"),
            9,
            Direction::Forward,
            10,
            &mut out,
        );
        assert_eq!(out, vec![(b("b"), None), (b("c"), Some(b("c7")))]);
        out.clear();
        t.scan(
            Bound::Included(b"a"),
            Bound::Excluded(b"c"),
            9,
            Direction::Reverse,
            10,
            &mut out,
        );
        assert_eq!(out, vec![(b("b"), None), (b("a"), Some(b("a5")))]);
    }

    proptest::proptest! {
        #[test]
        fn prefix_shortcut_orders_like_plain_comparison(
            a in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0xff]), 1..12),
            b in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0xff]), 1..12),
            sa in 0u64..3,
            sb in 0u64..3,
        ) {
            let expected = a.cmp(&b).then(sb.cmp(&sa));
            let got = compare(Probe::new(&a, sa).parts(), Probe::new(&b, sb).parts());
            proptest::prop_assert_eq!(got, expected);
        }
    }

    #[test]
    fn size_counts_every_version() {
        let t = table();
        assert_eq!(t.len(), 5);
        let filter_bytes = SkipListMemTable::new().size_bytes();
        assert_eq!(
            t.size_bytes(),
            filter_bytes + 5 * ENTRY_OVERHEAD_BYTES + 5 + 8
        );
    }
}
