//! Items (key, op, value), their sizes, separators and stable merges.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use bytes::Bytes;

use crate::key::{compare_keys, key_prefix};
use crate::varint;

/// The fewest bytes an item takes in either layout: a tombstone's
/// one-byte tag and one-byte key in version 2.
pub(crate) const MIN_ITEM_BYTES: usize = 2;
/// Low bit of a version 2 item's tag: set for a put, clear for a tombstone.
const TAG_PUT: u64 = 1;

/// How a leaf page lays out its items, named by the format version in the
/// page's header (`docs/format.md`, "Items"). Pages are written in the
/// current layout; older ones are still read, so a database written by
/// an earlier build opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ItemLayout {
    /// Version 1: a 7-byte header of op, key length and value length.
    V1,
    /// Version 2: LEB128 tag (key length and op) and value length, 2 bytes
    /// for short keys and values.
    #[default]
    V2,
}

impl ItemLayout {
    pub(crate) const CURRENT: Self = Self::V2;
    #[cfg(test)]
    pub(crate) const ALL: [Self; 2] = [Self::V1, Self::V2];

    pub(crate) fn from_version(version: u16) -> Option<Self> {
        match version {
            1 => Some(Self::V1),
            2 => Some(Self::V2),
            _ => None,
        }
    }

    pub(crate) fn version(self) -> u16 {
        match self {
            Self::V1 => 1,
            Self::V2 => 2,
        }
    }

    /// Bytes an item of these lengths takes (`value_len` `None`: tombstone).
    #[inline]
    pub(crate) fn item_len(self, key_len: usize, value_len: Option<usize>) -> usize {
        let value = value_len.unwrap_or(0);
        match self {
            Self::V1 => 7 + key_len + value,
            Self::V2 => {
                // Leaf sizing asks this for every item of every cut: plain
                // comparisons for the usual lengths.
                let tag = if key_len < 64 {
                    1
                } else {
                    varint::len_bytes((key_len as u64) << 1 | TAG_PUT)
                };
                let value_header = match value_len {
                    None => 0,
                    Some(v) if v < 0x80 => 1,
                    Some(v) if v < 0x4000 => 2,
                    Some(v) => varint::len_bytes(v as u64),
                };
                tag + key_len + value_header + value
            }
        }
    }

    /// Appends `item`'s encoding to `out`.
    pub(crate) fn encode(self, item: &Item, out: &mut Vec<u8>) {
        let value = item.value.as_deref();
        match self {
            Self::V1 => {
                out.push(u8::from(value.is_some()));
                out.extend_from_slice(&(item.key.len() as u16).to_le_bytes());
                out.extend_from_slice(&(value.map_or(0, <[u8]>::len) as u32).to_le_bytes());
            }
            Self::V2 => {
                let op = if value.is_some() { TAG_PUT } else { 0 };
                varint::put(out, (item.key.len() as u64) << 1 | op);
                if let Some(v) = value {
                    varint::put(out, v.len() as u64);
                }
            }
        }
        out.extend_from_slice(&item.key);
        out.extend_from_slice(value.unwrap_or_default());
    }

    /// Where the item at `at` of `bytes` keeps its key and value: `(key
    /// start, key length, value length)`, the value `None` for a tombstone;
    /// `None` if its header is malformed or cut short. Lengths are not
    /// checked against `bytes`.
    #[inline]
    pub(crate) fn parse_header(
        self,
        bytes: &[u8],
        at: usize,
    ) -> Option<(usize, usize, Option<usize>)> {
        if self == Self::V2 {
            // Keys under 64 bytes and values under 128 take one byte each:
            // read those without the general decoder (a lookup parses
            // every item before its key in the chunk).
            let tag = *bytes.get(at)?;
            if tag < 0x80 {
                let key_len = usize::from(tag >> 1);
                if u64::from(tag) & TAG_PUT == 0 {
                    return Some((at + 1, key_len, None));
                }
                let value_len = *bytes.get(at + 1)?;
                if value_len < 0x80 {
                    return Some((at + 2, key_len, Some(usize::from(value_len))));
                }
            }
        }
        self.parse_header_in_general(bytes, at)
    }

    /// `parse_header` for every item: out of line, so that the common
    /// case above stays small enough to inline into the item walks.
    #[inline(never)]
    fn parse_header_in_general(
        self,
        bytes: &[u8],
        at: usize,
    ) -> Option<(usize, usize, Option<usize>)> {
        match self {
            Self::V1 => {
                let fixed = bytes.get(at..at.checked_add(7)?)?;
                let key_len = u16::from_le_bytes([fixed[1], fixed[2]]) as usize;
                let value_len = u32::from_le_bytes(fixed[3..7].try_into().ok()?) as usize;
                match fixed[0] {
                    1 => Some((at + 7, key_len, Some(value_len))),
                    0 if value_len == 0 => Some((at + 7, key_len, None)),
                    _ => None,
                }
            }
            Self::V2 => {
                let (tag, tag_len) = varint::get(bytes.get(at..)?).ok()?;
                let key_len = usize::try_from(tag >> 1).ok()?;
                if tag & TAG_PUT == 0 {
                    return Some((at + tag_len, key_len, None));
                }
                let (value_len, len) = varint::get(bytes.get(at + tag_len..)?).ok()?;
                let value_len = usize::try_from(value_len).ok()?;
                Some((at + tag_len + len, key_len, Some(value_len)))
            }
        }
    }
}

/// One update: a put (`value: Some`) or a tombstone (`None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Item {
    pub key: Bytes,
    pub value: Option<Bytes>,
}

impl Item {
    #[cfg(test)]
    pub(crate) fn put(key: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        Item {
            key: key.into(),
            value: Some(value.into()),
        }
    }

    #[cfg(test)]
    pub(crate) fn tombstone(key: impl Into<Bytes>) -> Self {
        Item {
            key: key.into(),
            value: None,
        }
    }

    /// Encoded size in the current layout: what pending bytes, leaf fill
    /// and batch cuts count.
    pub(crate) fn size_bytes(&self) -> usize {
        ItemLayout::CURRENT.item_len(self.key.len(), self.value.as_ref().map(Bytes::len))
    }
}

/// An item's key copied out, so that it does not keep its page's buffer
/// alive; empty for no item.
pub(crate) fn edge_key(item: Option<&Item>) -> Bytes {
    item.map(|i| Bytes::copy_from_slice(&i.key))
        .unwrap_or_default()
}

/// Sum of item sizes.
pub(crate) fn total_size_bytes(items: &[Item]) -> usize {
    items.iter().map(Item::size_bytes).sum()
}

/// The shortest key `s` with `prev < s <= next` (requires `prev < next`).
/// Used for pivot keys and chunk index entries: short separators keep nodes
/// and leaf heads small.
pub(crate) fn shortest_separator(prev: &[u8], next: &[u8]) -> Bytes {
    Bytes::copy_from_slice(&next[..separator_len(prev, next)])
}

/// Length of `shortest_separator(prev, next)`, without making it: leaf
/// sizing needs only the length, once per chunk of every leaf it sizes.
pub(crate) fn separator_len(prev: &[u8], next: &[u8]) -> usize {
    debug_assert!(prev < next, "separator needs prev < next");
    let common = prev.iter().zip(next).take_while(|(a, b)| a == b).count();
    // next[..common + 1] is > prev (it differs at `common` with a larger byte,
    // or prev is a prefix of it) and <= next.
    (common + 1).min(next.len())
}

/// Index of the first item whose key is >= `key`.
pub(crate) fn lower_bound(items: &[Item], key: &[u8]) -> usize {
    items.partition_point(|it| compare_keys(&it.key, key) == Ordering::Less)
}

#[derive(Clone, Copy)]
struct HeapEntry<'a> {
    /// The key's first 8 bytes (`key_prefix`), kept beside the reference:
    /// most comparisons end on it without loading the key's bytes, which
    /// lie in another buffer per run.
    prefix: u64,
    item: &'a Item,
    run: usize,
    pos: usize,
}

impl PartialEq for HeapEntry<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for HeapEntry<'_> {}
impl PartialOrd for HeapEntry<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for HeapEntry<'_> {
    // BinaryHeap is a max-heap: reverse so the smallest key, then the newest
    // run (lowest index), comes out first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .prefix
            .cmp(&self.prefix)
            .then_with(|| compare_keys(&other.item.key, &self.item.key))
            .then(other.run.cmp(&self.run))
    }
}

/// Two-run merge (`newer` wins on equal keys): the common case of a batch
/// meeting one level or one leaf, without the heap.
fn merge_two(newer: &[Item], older: &[Item], drop_tombstones: bool) -> Vec<Item> {
    let keep = |item: &&Item| !drop_tombstones || item.value.is_some();
    let mut out = Vec::with_capacity(newer.len() + older.len());
    let (mut i, mut j) = (0, 0);
    while let (Some(a), Some(b)) = (newer.get(i), older.get(j)) {
        let next = match compare_keys(&a.key, &b.key) {
            Ordering::Less => {
                i += 1;
                a
            }
            Ordering::Greater => {
                j += 1;
                b
            }
            Ordering::Equal => {
                i += 1;
                j += 1;
                a
            }
        };
        if keep(&next) {
            out.push(next.clone());
        }
    }
    out.extend(newer[i..].iter().filter(keep).cloned());
    out.extend(older[j..].iter().filter(keep).cloned());
    out
}

/// Merges sorted runs of unique keys, `runs[0]` newest, on this thread. For
/// a key in several runs only the newest item is kept. Tombstones are kept
/// unless `drop_tombstones` (at the bottom of the tree nothing older lies
/// below). [`super::merge::merge_runs`] splits large merges across threads.
pub(crate) fn merge_sequential(runs: &[&[Item]], drop_tombstones: bool) -> Vec<Item> {
    if let [newer, older] = runs {
        return merge_two(newer, older, drop_tombstones);
    }
    merge(runs, drop_tombstones, usize::MAX).0
}

/// The lowest-key prefix of the merge of `runs` (newest first) holding at
/// most `max_bytes` (at least one item), and the first key left out. Only
/// the prefix is merged, so taking one leaf from a large buffer is cheap.
pub(crate) fn merge_prefix(runs: &[&[Item]], max_bytes: usize) -> (Vec<Item>, Option<Bytes>) {
    merge(runs, false, max_bytes)
}

fn merge(runs: &[&[Item]], drop_tombstones: bool, max_bytes: usize) -> (Vec<Item>, Option<Bytes>) {
    let total: usize = runs.iter().map(|r| r.len()).sum();
    let mut out = Vec::with_capacity(if max_bytes == usize::MAX { total } else { 0 });
    let mut heap: BinaryHeap<HeapEntry<'_>> = runs
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.is_empty())
        .map(|(run, r)| HeapEntry {
            prefix: key_prefix(&r[0].key),
            item: &r[0],
            run,
            pos: 0,
        })
        .collect();
    let mut bytes = 0usize;
    let mut last_key: Option<&Bytes> = None;
    while let Some(mut top) = heap.peek_mut() {
        let HeapEntry { item, run, pos, .. } = *top;
        // Advance this run in place: one sift instead of a pop and a push.
        match runs[run].get(pos + 1) {
            Some(next) => {
                *top = HeapEntry {
                    prefix: key_prefix(&next.key),
                    item: next,
                    run,
                    pos: pos + 1,
                }
            }
            None => drop(std::collections::binary_heap::PeekMut::pop(top)),
        }
        if last_key == Some(&item.key) {
            continue; // an older version of a key already emitted
        }
        if !out.is_empty() && bytes + item.size_bytes() > max_bytes {
            return (out, Some(item.key.clone()));
        }
        last_key = Some(&item.key);
        if drop_tombstones && item.value.is_none() {
            continue;
        }
        bytes += item.size_bytes();
        out.push(item.clone());
    }
    (out, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys of 0 to 12 bytes from a small alphabet, so that equal 8-byte
    /// prefixes, prefixes of each other and equal keys all occur.
    fn random_key(state: &mut u64) -> Vec<u8> {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let len = (*state % 13) as usize;
        (0..len)
            .map(|i| (*state >> (i * 5 % 60)) as u8 & 3)
            .collect()
    }

    #[test]
    fn compare_keys_is_byte_order() {
        let mut state = 7u64;
        for _ in 0..20_000 {
            let (a, b) = (random_key(&mut state), random_key(&mut state));
            assert_eq!(compare_keys(&a, &b), a.cmp(&b), "{a:?} vs {b:?}");
            assert_eq!(compare_keys(&a, &a), Ordering::Equal);
        }
    }

    #[test]
    fn two_run_merge_equals_the_heap_merge() {
        let mut state = 11u64;
        let mut run = |n: usize| {
            let mut keys: Vec<Vec<u8>> = (0..n).map(|_| random_key(&mut state)).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter()
                .enumerate()
                .map(|(i, k)| {
                    if i % 3 == 0 {
                        Item::tombstone(k)
                    } else {
                        Item::put(k, vec![n as u8])
                    }
                })
                .collect::<Vec<_>>()
        };
        for (n, m) in [(0, 5), (5, 0), (40, 300), (300, 40), (500, 500)] {
            let (newer, older) = (run(n), run(m));
            for drop_tombstones in [false, true] {
                let runs: [&[Item]; 2] = [&newer, &older];
                assert_eq!(
                    merge_sequential(&runs, drop_tombstones),
                    merge(&runs, drop_tombstones, usize::MAX).0
                );
            }
        }
    }

    #[test]
    fn separators_are_shortest_and_between() {
        let cases: [(&[u8], &[u8], &[u8]); 4] = [
            (b"apple", b"banana", b"b"),
            (b"abc", b"abd", b"abd"),
            (b"ab", b"abc", b"abc"),
            (b"abcx", b"abd", b"abd"),
        ];
        for (prev, next, want) in cases {
            let sep = shortest_separator(prev, next);
            assert_eq!(sep.as_ref(), want);
            assert!(prev < sep.as_ref() && sep.as_ref() <= next);
        }
    }

    #[test]
    fn merge_keeps_newest_and_drops_tombstones_on_request() {
        let newer = vec![Item::put("b", "new"), Item::tombstone("c")];
        let older = vec![
            Item::put("a", "1"),
            Item::put("b", "old"),
            Item::put("c", "3"),
        ];
        let merged = merge_sequential(&[&newer, &older], false);
        assert_eq!(
            merged,
            vec![
                Item::put("a", "1"),
                Item::put("b", "new"),
                Item::tombstone("c")
            ]
        );
        let merged = merge_sequential(&[&newer, &older], true);
        assert_eq!(merged, vec![Item::put("a", "1"), Item::put("b", "new")]);
    }
}
