//! Node pages whose checksums hold but whose buffer contradicts itself (a
//! crafted file, or a bug in an older writer): an update or a lookup at
//! them ends in `Error::Corruption`, never in a panic or an endless loop
//! (`docs/testing.md`, "Known bugs fixed").

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use bytes::Bytes;

use super::harness::{Rng, key, random_batch, small_config};
use super::mem_io::MemPageIo;
use crate::page::{CachePriority, PageId, PageIo, PageKind};
use crate::tree::Tree;
use crate::tree::TreeConfig;
use crate::tree::format::node::{Child, Flushed, LeafData, Node};
use crate::tree::write::update::{BatchOutcome, Update};
use crate::{Error, Result};

/// A tree grown by 20 random batches, every version of it kept readable
/// (dead pages are never freed): the roots cover buffers of every shape
/// the update path meets, at heights 1 and 2.
struct Versions {
    io: Arc<MemPageIo>,
    tree: Tree,
    roots: Vec<PageId>,
}

fn versions() -> Versions {
    let io = Arc::new(MemPageIo::default());
    let tree = Tree::new(io.clone(), small_config(512));
    let mut rng = Rng::new(3);
    let mut root = None;
    let mut roots = Vec::new();
    for _ in 0..20 {
        let batch = random_batch(&mut rng, 3000, 300, 10);
        root = tree.apply_batch(root, &batch).unwrap().root;
        roots.extend(root);
    }
    Versions { io, tree, roots }
}

impl Versions {
    fn config(&self) -> TreeConfig {
        *self.tree.config()
    }

    fn node(&self, id: PageId) -> Node {
        Node::decode(&self.io.read_page(id, CachePriority::Node).unwrap()).unwrap()
    }

    /// Writes `node` as a new page (its checksum computed as a writer would).
    fn write(&self, node: &Node) -> PageId {
        self.io.write_page(PageKind::Node, &node.encode()).unwrap()
    }

    fn items(&self, data: &LeafData) -> Vec<crate::tree::Item> {
        let LeafData::Stored(r) = data else {
            unreachable!("decoded nodes reference stored pages")
        };
        self.tree.read_leaf_items(r).unwrap()
    }

    /// Applies a small batch at `root` on a thread of its own, so that an
    /// update that never ends fails the test instead of hanging it.
    fn apply_small_batch(&self, root: PageId) -> Result<BatchOutcome> {
        let tree = self.tree.clone();
        let (done, result) = mpsc::channel();
        std::thread::spawn(move || {
            let batch: Vec<(Bytes, Option<Bytes>)> = [5, 1_234, 2_222, 2_999]
                .into_iter()
                .map(|i| (key(i), Some(Bytes::from_static(b"new"))))
                .collect();
            let _ = done.send(tree.apply_batch(Some(root), &batch));
        });
        match result.recv_timeout(Duration::from_secs(30)) {
            Ok(outcome) => outcome,
            Err(RecvTimeoutError::Timeout) => panic!("the update at a crafted root never ended"),
            Err(RecvTimeoutError::Disconnected) => panic!("the update at a crafted root panicked"),
        }
    }
}

fn is_corruption<T: std::fmt::Debug>(result: &Result<T>) -> bool {
    matches!(result, Err(Error::Corruption { .. }))
}

/// The pivots a segment at `level` of `node` is active for.
fn active_at_level(node: &Node, level: u8) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (s, seg) in node.segments.iter().enumerate() {
        if seg.level != level {
            continue;
        }
        for (p, bound) in seg.bounds.iter().enumerate() {
            if bound.is_some() {
                out.push((s, p));
            }
        }
    }
    out
}

/// `pending_bytes` far above what the segments hold, on a pivot no segment
/// is active for: the flush found nothing to move, left the count as it
/// was, and `restore` picked the same pivot again, forever.
#[test]
fn pending_bytes_no_segment_holds_are_corruption_not_a_loop() {
    let v = versions();
    let mut cases = 0;
    for &root in &v.roots {
        let node = v.node(root);
        for p in 0..node.pivots.len() {
            let inactive = node.segments.iter().all(|s| s.bounds[p].is_none());
            if node.segments.is_empty() || !inactive {
                continue;
            }
            let mut crafted = node.clone();
            crafted.pivots[p].pending_bytes += 100 * v.config().leaf_max_bytes as u64;
            let outcome = v.apply_small_batch(v.write(&crafted));
            assert!(is_corruption(&outcome), "pivot {p}: {outcome:?}");
            cases += 1;
        }
    }
    assert!(cases >= 3, "only {cases} pivots without active segments");
}

/// `pending_bytes` below what the segments hold: a merge that takes the
/// pivot's items out of the buffer would take more than the count (left
/// unchecked, a debug assertion fails: a panic in test builds).
#[test]
fn pending_bytes_below_what_the_segments_hold_are_corruption() {
    let v = versions();
    let mut cases = 0;
    for &root in &v.roots {
        let node = v.node(root);
        // Level 0 is occupied, so the next batch merges it with the
        // segments of level 0.
        for (_, p) in active_at_level(&node, 0) {
            let mut crafted = node.clone();
            crafted.pivots[p].pending_bytes = 1;
            let outcome = v.apply_small_batch(v.write(&crafted));
            assert!(is_corruption(&outcome), "pivot {p}: {outcome:?}");
            cases += 1;
        }
    }
    assert!(cases >= 3, "only {cases} pivots active at level 0");
}

/// A flushed key above the item at its bound's index: reading the
/// pivot's unflushed items from that key skipped the items between, which
/// left the buffer (lost) while their bytes stayed counted.
#[test]
fn a_flushed_key_above_its_bounds_item_is_corruption() {
    let v = versions();
    let mut cases = 0;
    for &root in &v.roots {
        let node = v.node(root);
        for (s, p) in active_at_level(&node, 0) {
            let seg = &node.segments[s];
            // The read that starts at the flushed key is the segment's
            // first: for a later pivot, the items between are read anyway
            // and the bound's index decides.
            if seg.bounds[..p].iter().any(Option::is_some) {
                continue;
            }
            let items = v.items(&seg.data);
            let live = node.unflushed_range(seg, p, &items);
            if live.len() < 4 {
                continue;
            }
            let mut crafted = node.clone();
            // Item `live.start` counts as flushed now (its bytes leave the
            // pivot's count, which stays right), but the key is that of
            // item `live.start + 3`.
            crafted.segments[s].bounds[p] = Some(Flushed {
                index: live.start as u32 + 1,
                key: items[live.start + 3].key.clone(),
            });
            crafted.pivots[p].pending_bytes -= items[live.start].size_bytes() as u64;
            let outcome = v.apply_small_batch(v.write(&crafted));
            assert!(
                is_corruption(&outcome),
                "segment {s} pivot {p}: {outcome:?}"
            );
            cases += 1;
        }
    }
    assert!(cases >= 3, "only {cases} segments to craft");
}

/// A flushed key above the pivot's range: the update read the pivot's
/// items from that key to the pivot's upper bound, and a span whose start
/// lay chunks past its end underflowed (`read_chunk_run`). Lookups took
/// the segment for flushed and skipped it. Node pages with such a key are
/// corruption wherever the range is known: at decode for every pivot but
/// the last, and for the last once the parent gives the node's range.
#[test]
fn a_flushed_key_beyond_its_pivot_is_corruption() {
    let v = versions();
    let far = Bytes::from_static(b"\xff\xff");
    let mut cases = 0;
    for &root in &v.roots {
        let node = v.node(root);
        for (s, seg) in node.segments.iter().enumerate() {
            let last = node.pivots.len() - 1;
            for p in (0..last).filter(|&p| seg.bounds[p].is_some()) {
                let mut crafted = node.clone();
                crafted.segments[s].bounds[p] = Some(Flushed {
                    index: 1,
                    key: far.clone(),
                });
                let id = v.write(&crafted);
                let outcome = v.apply_small_batch(id);
                assert!(
                    is_corruption(&outcome),
                    "segment {s} pivot {p}: {outcome:?}"
                );
                let got = v.tree.get_bytes(Some(id), &key(1_000));
                assert!(is_corruption(&got), "segment {s} pivot {p}: {got:?}");
                cases += 1;
            }
        }
    }
    assert!(cases >= 10, "only {cases} bounds crafted");
    // The last pivot of a child: its range ends where the parent's next
    // pivot begins.
    let mut children = 0;
    for &root in &v.roots {
        let mut parent = v.node(root);
        if parent.height < 2 {
            continue;
        }
        for c in 0..parent.pivots.len() - 1 {
            let Child::StoredNode(child_id) = parent.pivots[c].child else {
                unreachable!("children of a height-2 node are nodes")
            };
            let mut child = v.node(child_id);
            let last = child.pivots.len() - 1;
            let Some(seg) = child.segments.iter_mut().find(|s| s.bounds[last].is_some()) else {
                continue;
            };
            // Above the child's range, below the node's end.
            let mut beyond = parent.pivots[c + 1].lower.to_vec();
            beyond.push(0);
            seg.bounds[last] = Some(Flushed {
                index: 1,
                key: Bytes::from(beyond),
            });
            let crafted = v.write(&child);
            parent.pivots[c].child = Child::StoredNode(crafted);
            let loaded = Update::new(&v.tree).child_node(&mut parent, c).map(|_| ());
            assert!(is_corruption(&loaded), "child {c}: {loaded:?}");
            parent.pivots[c].child = Child::StoredNode(child_id);
            children += 1;
        }
    }
    assert!(children >= 1, "no child with a buffer on its last pivot");
}
