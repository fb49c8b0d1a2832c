//! Damaged pages decode to errors, never panics or wrong data.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;

use super::harness::{Harness, Model, Rng, key, random_batch, small_config};
use super::mem_io::MemPageIo;
use crate::filter;
use crate::page::{CachePriority, PageId, PageIo, PageKind};
use crate::tree::Tree;
use crate::tree::format::item::Item;
use crate::tree::format::leaf::{self, LeafHead};
use crate::tree::format::node::{Child, LeafData, LeafRef, Node};
use crate::tree::fuzz_hook::leaf_with_valid_checksums;
use crate::{Error, Result};

/// Parses a node page for lookups and probes `key`, as a get does.
fn probe(page: &[u8], key: &[u8]) -> Result<usize, String> {
    use crate::tree::read::probe::{NodeIndex, PivotTarget};
    let index = NodeIndex::parse(Bytes::copy_from_slice(page))?;
    Ok(index.probe(PivotTarget::Holding(key)).segments.len())
}

fn sample_leaf() -> Vec<u8> {
    let items: Vec<Item> = (0..60u32)
        .map(|i| Item::put(format!("key{i:04}"), vec![i as u8; (i % 30) as usize]))
        .collect();
    leaf::serialize(&items, 256, 10, usize::MAX, crate::Compression::None)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = Node::decode(&bytes);
        let _ = probe(&bytes, b"key");
        let b = Bytes::from(bytes.clone());
        if let Ok(head) = LeafHead::decode(&b) {
            let _ = head.decode_all(&b);
        }
        let _ = filter::may_contain(&bytes, 42);
        let _ = filter::KeyFilter::decode(&bytes);
    }

    #[test]
    fn flipped_leaf_bytes_are_caught(at in 0usize..4000, bit in 0u8..8) {
        let mut page = sample_leaf();
        let at = at % page.len();
        page[at] ^= 1 << bit;
        let (head_len, filter_len) = leaf::page_lens(&page);
        let page = Bytes::from(page);
        let head = LeafHead::decode(&page.slice(..(head_len as usize).min(page.len())));
        let filter_start = head_len as usize;
        let filter_ok = filter_len == 0 || page.get(filter_start..filter_start + filter_len as usize).is_some_and(|f| filter::KeyFilter::decode(f).is_ok());
        let all_ok = head.is_ok_and(|h| h.decode_all(&page).is_ok()) && filter_ok;
        // Only the zero padding between the filter and the data blocks is
        // outside every checksum (it is never read).
        prop_assert!(!all_ok || flip_in_padding(at), "flip at {} went unnoticed", at);
    }
}

/// Whether `at` lies in the zero padding before the data blocks.
fn flip_in_padding(at: usize) -> bool {
    let original = sample_leaf();
    let (head_len, filter_len) = leaf::page_lens(&original);
    let data_offset = u32::from_le_bytes(original[32..36].try_into().unwrap()) as usize;
    ((head_len + filter_len) as usize..data_offset).contains(&at)
}

/// A real tree, grown once and shared by the tests below, which add pages
/// to its store (crafted roots) but never free or change its own.
struct Sample {
    io: Arc<MemPageIo>,
    tree: Tree,
    model: Model,
    /// Its node pages, newest (the root) first.
    nodes: Vec<(PageId, Vec<u8>)>,
}

fn sample() -> &'static Sample {
    static SAMPLE: OnceLock<Sample> = OnceLock::new();
    SAMPLE.get_or_init(|| {
        let mut h = Harness::new(small_config(512));
        let mut rng = Rng::new(2);
        for _ in 0..15 {
            h.apply(random_batch(&mut rng, 3000, 300, 10));
        }
        let mut ids: Vec<PageId> = h.io.page_ids();
        ids.sort_by_key(|id| std::cmp::Reverse(id.to_raw()));
        let nodes = ids
            .into_iter()
            .filter(|id| h.io.kind(*id) == Some(PageKind::Node))
            .map(|id| {
                (
                    id,
                    h.io.read_page(id, CachePriority::Node).unwrap().to_vec(),
                )
            })
            .collect();
        Sample {
            io: h.io,
            tree: h.tree,
            model: h.model,
            nodes,
        }
    })
}

/// Node pages from a real tree, for mutation.
fn sample_nodes() -> Vec<Vec<u8>> {
    sample()
        .nodes
        .iter()
        .map(|(_, page)| page.clone())
        .collect()
}

/// What the read and update paths made of a tree with a damaged page.
#[derive(Debug)]
struct Outcome {
    /// `check()` found nothing wrong.
    checked: bool,
    /// `get` of each probed key.
    gets: Vec<(Bytes, Result<Option<Bytes>>)>,
    /// A forward scan of everything (at most `SCAN_LIMIT` pairs).
    scan: Result<Vec<(Bytes, Bytes)>>,
    /// A small batch applied at the root.
    update: Result<()>,
}

const SCAN_LIMIT: usize = 2_000;

/// Runs lookups, a scan, the checker and an update at `root`, on a thread
/// of its own: a panic or an endless loop fails the test with a message.
fn exercise(root: PageId, keys: Vec<Bytes>) -> Outcome {
    let tree = sample().tree.clone();
    let (done, outcome) = mpsc::channel();
    std::thread::spawn(move || {
        let root = Some(root);
        let gets = keys
            .into_iter()
            .map(|k| {
                let got = tree.get_bytes(root, &k);
                (k, got)
            })
            .collect();
        let scan = tree
            .scan(root, Bound::Unbounded, Bound::Unbounded, false)
            .take(SCAN_LIMIT)
            .collect();
        let checked = tree.check(root).is_ok();
        let batch: Vec<(Bytes, Option<Bytes>)> = [7, 1_500, 2_998]
            .into_iter()
            .map(|i| (key(i), Some(Bytes::from_static(b"after"))))
            .collect();
        let update = tree.apply_batch(root, &batch).map(|_| ());
        let _ = done.send(Outcome {
            checked,
            gets,
            scan,
            update,
        });
    });
    match outcome.recv_timeout(Duration::from_secs(30)) {
        Ok(outcome) => outcome,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("reading or updating a damaged tree never ended")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            panic!("reading or updating a damaged tree panicked")
        }
    }
}

/// Errors of damaged pages are corruption, or the store's own error for
/// an id naming no page (`MemPageIo`; the page store calls that corruption).
fn is_damage<T>(result: &Result<T>) -> bool {
    matches!(result, Ok(_) | Err(Error::Corruption { .. } | Error::Io(_)))
}

impl Outcome {
    fn assert_errors_are_damage(&self) {
        for (k, got) in &self.gets {
            assert!(is_damage(got), "get {k:?}: {got:?}");
        }
        assert!(
            is_damage(&self.scan),
            "scan: {:?}",
            self.scan.as_ref().err()
        );
        assert!(is_damage(&self.update), "update: {:?}", self.update);
    }

    /// When the checker passed the tree, lookups and the scan read it
    /// alike: every probed key is found with the value the scan gives it.
    fn assert_reads_agree_if_checked(&self) {
        if !self.checked {
            return;
        }
        let scan = self.scan.as_ref().expect("a checked tree scans");
        if scan.len() == SCAN_LIMIT {
            return; // the scan stopped early: it cannot speak for every key
        }
        let scanned: BTreeMap<&Bytes, &Bytes> = scan.iter().map(|(k, v)| (k, v)).collect();
        for (k, got) in &self.gets {
            let got = got.as_ref().expect("a checked tree answers lookups");
            assert_eq!(
                got.as_ref(),
                scanned.get(k).copied(),
                "get {k:?} against the scan"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Damage that a checksum would not catch (the checksum is recomputed)
    /// decodes to an error or a node, never a panic; as a tree's root, it
    /// makes lookups, scans and updates answer or fail with corruption,
    /// never panic or loop.
    #[test]
    fn mutated_nodes_with_valid_checksums_never_panic(flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
        let keys: Vec<Bytes> = sample().model.keys().step_by(97).cloned().collect();
        for (_, original) in sample().nodes.iter().take(4) {
            let mut page = original.clone();
            for (at, byte) in &flips {
                let at = 20 + at % (page.len() - 20);
                page[at] = *byte;
            }
            let crc = crc32c::crc32c_append(crc32c::crc32c(&page[..16]), &page[20..]);
            page[16..20].copy_from_slice(&crc.to_le_bytes());
            let _ = Node::decode(&page);
            let _ = probe(&page, b"k0001000");
            let _ = crate::tree::format::node_codec::referenced_pages(&page);
            let root = sample().io.write_page(PageKind::Node, &page).unwrap();
            let outcome = exercise(root, keys.clone());
            outcome.assert_errors_are_damage();
            outcome.assert_reads_agree_if_checked();
        }
    }

    /// The same for a leaf's head (checksums recomputed, so the decoder's
    /// own checks are all that stand between the damage and the answers):
    /// a height-1 node referencing the damaged leaf, with the lengths it
    /// had (as the node's page stored them) or the damaged page's own.
    #[test]
    fn mutated_leaf_heads_with_valid_checksums_never_panic(
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        which in any::<usize>(),
        lens_from_page in any::<bool>(),
    ) {
        let s = sample();
        let parents: Vec<Node> = s.nodes.iter()
            .map(|(_, page)| Node::decode(page).unwrap())
            .filter(|n| n.height == 1)
            .collect();
        let mut parent = parents[which % parents.len()].clone();
        let p = (which / parents.len()) % parent.pivots.len();
        let Child::Leaf(LeafData::Stored(r)) = parent.pivots[p].child else {
            unreachable!("a decoded node of height 1 has stored leaves")
        };
        let original = s.io.read_page(r.id, CachePriority::LeafBlock).unwrap();
        let keys: Vec<Bytes> = s.tree.read_leaf_items(&r).unwrap().into_iter().map(|it| it.key).collect();
        let mut page = original.to_vec();
        for (at, byte) in &flips {
            page[at % r.head_len as usize] = *byte;
        }
        let page = leaf_with_valid_checksums(&page);
        let id = s.io.write_page(PageKind::Leaf, &page).unwrap();
        let (head_len, filter_len) = if lens_from_page {
            leaf::page_lens(&page)
        } else {
            (r.head_len, r.filter_len)
        };
        parent.pivots[p].child = Child::Leaf(LeafData::Stored(LeafRef { id, head_len, filter_len }));
        let root = s.io.write_page(PageKind::Node, &parent.encode()).unwrap();
        let outcome = exercise(root, keys);
        outcome.assert_errors_are_damage();
        outcome.assert_reads_agree_if_checked();
    }
}

/// What a scan window on one pivot sees: the pivot's lower and upper keys
/// (`None`: the node's own bound), its active segments with their flushed
/// index, and its child (a leaf id or a node id).
type Window = (Option<Bytes>, Option<Bytes>, Vec<(u64, u32)>, u64);

/// The window on pivot `p`, from a full decode.
fn window_by_decode(node: &Node, p: usize) -> Window {
    use crate::tree::format::node::{Child, LeafData};
    let lo = (p > 0).then(|| node.pivots[p].lower.clone());
    let hi = node.pivots.get(p + 1).map(|next| next.lower.clone());
    let segments = node
        .segments
        .iter()
        .filter_map(|seg| match (&seg.bounds[p], &seg.data) {
            (Some(bound), LeafData::Stored(r)) => Some((r.id.to_raw(), bound.index)),
            _ => None,
        })
        .collect();
    let child = match &node.pivots[p].child {
        Child::Leaf(LeafData::Stored(r)) => r.id.to_raw(),
        Child::StoredNode(id) => id.to_raw(),
        other => panic!("a decoded page references stored children: {other:?}"),
    };
    (lo, hi, segments, child)
}

#[test]
fn scan_window_probes_agree_with_full_decodes() {
    use crate::tree::read::probe::{NodeIndex, PivotTarget};
    let mut compared = 0;
    for page in sample_nodes() {
        let node = Node::decode(&page).unwrap();
        let index = NodeIndex::parse(Bytes::from(page)).unwrap();
        let mut keys: Vec<Bytes> = node.pivots.iter().map(|p| p.lower.clone()).collect();
        // Keys between pivots and beyond both ends too.
        keys.extend(node.pivots.iter().skip(1).map(|p| {
            let mut k = p.lower.to_vec();
            k.push(0);
            Bytes::from(k)
        }));
        keys.push(Bytes::from_static(b"\xff\xff\xff\xff"));
        let mut targets = vec![(PivotTarget::Last, node.pivots.len() - 1)];
        for k in &keys {
            targets.push((PivotTarget::Holding(k), node.pivot_for(k)));
            let before = node.pivots[1..].partition_point(|q| q.lower < *k);
            targets.push((PivotTarget::Before(k), before));
        }
        for (target, p) in targets {
            let probe = index.probe(target);
            let by_probe: Window = (
                probe.lo.map(Bytes::copy_from_slice),
                probe.hi.map(Bytes::copy_from_slice),
                probe
                    .segments
                    .iter()
                    .map(|s| (s.leaf.id.to_raw(), s.flushed_index))
                    .collect::<Vec<_>>(),
                probe
                    .child_leaf
                    .map_or(probe.child_node.to_raw(), |l| l.id.to_raw()),
            );
            assert_eq!(by_probe, window_by_decode(&node, p), "{target:?}");
            compared += 1;
        }
    }
    assert!(compared > 50, "only {compared} windows compared");
}

/// Node pages the full decode refuses, with valid checksums, are refused
/// by the lookup index too: an index that checks only that fields fit the
/// page lets lookups and scans answer from them (a flushed index of 0 or
/// past the segment, or pivots out of order, make a lookup skip a segment
/// or take the wrong child) where a checkpoint reports corruption.
#[test]
fn node_pages_the_full_decode_refuses_are_refused_by_lookups() {
    use crate::tree::format::node::Flushed;
    use crate::tree::format::node_codec::Header;
    use crate::tree::read::probe::NodeIndex;
    let node = sample()
        .nodes
        .iter()
        .map(|(_, page)| Node::decode(page).unwrap())
        .find(|n| n.pivots.len() >= 3 && !n.segments.is_empty())
        .expect("a node with three pivots and a buffer");
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut swapped = node.clone();
    let (one, two) = (
        swapped.pivots[1].lower.clone(),
        swapped.pivots[2].lower.clone(),
    );
    (swapped.pivots[1].lower, swapped.pivots[2].lower) = (two, one);
    cases.push(("pivot keys out of order", swapped.encode()));
    let mut empty_key = node.clone();
    empty_key.pivots[1].lower = Bytes::new();
    cases.push(("an empty pivot key", empty_key.encode()));
    // A flushed bound on the last pivot (no pivot above bounds its key),
    // with a key of its own to find in the page.
    let last = node.pivots.len() - 1;
    let mut bounded = node.clone();
    let seg = &mut bounded.segments[0];
    seg.bounds[last] = Some(Flushed {
        index: seg.item_count,
        key: Bytes::from_static(b"\xfe\xfd\xfc\xfb"),
    });
    let page = bounded.encode();
    Node::decode(&page).expect("a bound within the segment");
    NodeIndex::parse(Bytes::from(page.clone())).expect("a bound within the segment");
    // The bound's entry: pivot (2), index (4), key length (2), key.
    let key_at = page
        .windows(4)
        .position(|w| w == b"\xfe\xfd\xfc\xfb")
        .unwrap();
    let index_at = key_at - 6;
    for (what, index) in [
        ("a flushed index of 0", 0u32),
        (
            "a flushed index past the segment",
            bounded.segments[0].item_count + 1,
        ),
    ] {
        let mut bad = page.clone();
        bad[index_at..index_at + 4].copy_from_slice(&index.to_le_bytes());
        cases.push((what, bad));
    }
    // A pivot past the last, which no active bit covers.
    let pivot_at = index_at - 2;
    let mut no_pivot = page.clone();
    no_pivot[pivot_at..pivot_at + 2].copy_from_slice(&(node.pivots.len() as u16).to_le_bytes());
    cases.push(("a flushed bound on no pivot", no_pivot));
    for (what, page) in cases {
        let page = crate::tree::fuzz_hook::node_with_valid_checksum(&page);
        Header::parse(&page).expect("the checksum holds");
        assert!(Node::decode(&page).is_err(), "{what}: decoded");
        assert!(
            NodeIndex::parse(Bytes::from(page)).is_err(),
            "{what}: parsed for lookups"
        );
    }
}
