//! Items (key, op, value), their sizes, separators and stable merges.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use bytes::Bytes;

use super::item_layout::ItemLayout;
use crate::key::{compare_keys, key_prefix};
use crate::util::prefetch::{Locality, prefetch};
use crate::values::Value;

/// How many items ahead of its head a merge prefetches each run's key.
/// Keys lie outside the item array (in pages or MemTable chunks), so the
/// hardware prefetcher does not follow them; without the hint every
/// comparison of a run's new head waits on a cache miss.
const KEY_PREFETCH_AHEAD: usize = 4;

/// Prefetches the key bytes of `run[pos]`, if there is such an item.
#[inline]
fn prefetch_key(run: &[Item], pos: usize) {
    if let Some(item) = run.get(pos) {
        prefetch(item.key.as_ptr(), Locality::Nearest);
    }
}

/// One update: a put (`value: Some`: the user's bytes or a value
/// pointer) or a tombstone (`None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Item {
    pub key: Bytes,
    pub value: Option<Value>,
}

impl Item {
    #[cfg(test)]
    pub(crate) fn put(key: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        Item {
            key: key.into(),
            value: Some(Value::Inline(value.into())),
        }
    }

    #[cfg(test)]
    pub(crate) fn tombstone(key: impl Into<Bytes>) -> Self {
        Item {
            key: key.into(),
            value: None,
        }
    }

    /// The measure that pending bytes, buffer bounds and batch cuts count
    /// in: the item's length in the version 1 layout, `7 + key + value`,
    /// whatever layout its page has. Node pages store sums of it, so it
    /// must not change with the leaf format; it is at least the item's
    /// length in any layout. Leaf fill counts exact lengths instead
    /// (`LeafSizer`).
    pub(crate) fn size_bytes(&self) -> usize {
        ItemLayout::V1.len_of(self)
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
        prefetch_key(newer, i + KEY_PREFETCH_AHEAD);
        prefetch_key(older, j + KEY_PREFETCH_AHEAD);
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
/// below). [`crate::tree::write::merge::merge_runs`] splits large merges across threads.
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
        .map(|(run, r)| {
            (1..=KEY_PREFETCH_AHEAD).for_each(|pos| prefetch_key(r, pos));
            HeapEntry {
                prefix: key_prefix(&r[0].key),
                item: &r[0],
                run,
                pos: 0,
            }
        })
        .collect();
    let mut bytes = 0usize;
    let mut last_key: Option<&Bytes> = None;
    while let Some(mut top) = heap.peek_mut() {
        let HeapEntry { item, run, pos, .. } = *top;
        // Advance this run in place: one sift instead of a pop and a push.
        prefetch_key(runs[run], pos + 1 + KEY_PREFETCH_AHEAD);
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
