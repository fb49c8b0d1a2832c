//! Damaged pages decode to errors, never panics or wrong data.

use bytes::Bytes;
use proptest::prelude::*;

use super::item::Item;
use super::leaf::{self, LeafHead};
use super::node::Node;
use crate::filter;

/// Parses a node page for lookups and probes `key`, as a get does.
fn probe(page: &[u8], key: &[u8]) -> Result<usize, String> {
    use super::probe::{NodeIndex, PivotTarget};
    let index = NodeIndex::parse(Bytes::copy_from_slice(page))?;
    Ok(index.probe(PivotTarget::Holding(key)).segments.len())
}

fn sample_leaf() -> Vec<u8> {
    let items: Vec<Item> = (0..60u32)
        .map(|i| Item::put(format!("key{i:04}"), vec![i as u8; (i % 30) as usize]))
        .collect();
    leaf::serialize(&items, 256, 10, usize::MAX)
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

/// Node pages from a real tree, for mutation.
fn sample_nodes() -> Vec<Vec<u8>> {
    use crate::page::{CachePriority, PageIo, PageKind};
    let mut h = super::harness::Harness::new(super::harness::small_config(512));
    let mut rng = super::harness::Rng::new(2);
    for _ in 0..15 {
        h.apply(super::harness::random_batch(&mut rng, 3000, 300, 10));
    }
    h.io.page_ids()
        .into_iter()
        .filter(|id| h.io.kind(*id) == Some(PageKind::Node))
        .map(|id| h.io.read_page(id, CachePriority::Node).unwrap().to_vec())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Damage that a checksum would not catch (the checksum is recomputed)
    /// still decodes to an error or a node, never a panic.
    #[test]
    fn mutated_nodes_with_valid_checksums_never_panic(flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
        for mut page in sample_nodes().into_iter().take(4) {
            for (at, byte) in &flips {
                let at = 20 + at % (page.len() - 20);
                page[at] = *byte;
            }
            let crc = crc32c::crc32c_append(crc32c::crc32c(&page[..16]), &page[20..]);
            page[16..20].copy_from_slice(&crc.to_le_bytes());
            let _ = Node::decode(&page);
            let _ = probe(&page, b"k0001000");
            let _ = super::node_codec::referenced_pages(&page);
        }
    }
}

/// What a scan window on one pivot sees: the pivot's lower and upper keys
/// (`None`: the node's own bound), its active segments with their flushed
/// index, and its child (a leaf id or a node id).
type Window = (Option<Bytes>, Option<Bytes>, Vec<(u64, u32)>, u64);

/// The window on pivot `p`, from a full decode.
fn window_by_decode(node: &Node, p: usize) -> Window {
    use super::node::{Child, LeafData};
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
    use super::probe::{NodeIndex, PivotTarget};
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
