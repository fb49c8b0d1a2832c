//! Space reclamation (`write/space.rs`): draining the buffers above the
//! leaves keeps every key's newest version, and frees what it promises.

use bytes::Bytes;

use super::harness::{Harness, Rng, config, key, random_batch, small_config};
use crate::tree::{ReclaimPlan, TreeShape};

/// Every node above the leaves, the fullest buffers first, with `budget`.
fn drain_all(shape: &TreeShape, budget_bytes: u64) -> ReclaimPlan {
    let mut nodes = shape.nodes_above_leaves.clone();
    nodes.sort_by_key(|n| std::cmp::Reverse(n.pending_bytes));
    ReclaimPlan {
        targets: nodes.into_iter().map(|n| n.key).collect(),
        budget_bytes,
    }
}

fn value(rng: &mut Rng) -> Bytes {
    Bytes::from(vec![b'a' + rng.below(26) as u8; 8 + rng.below(40) as usize])
}

/// A tree of height >= 2 whose buffers above the leaves hold overwrites.
fn overwritten_tree(rng: &mut Rng) -> Harness {
    let mut h = Harness::new(small_config(512));
    for chunk in (0..6_000u64).collect::<Vec<_>>().chunks(500) {
        h.apply(chunk.iter().map(|&i| (key(i), Some(value(rng)))).collect());
    }
    for _ in 0..20 {
        h.apply(random_batch(rng, 6_000, 300, 10));
    }
    h
}

#[test]
fn draining_with_random_budgets_matches_the_model() {
    for seed in 0..6 {
        let mut rng = Rng::new(seed);
        let mut h = overwritten_tree(&mut rng);
        for round in 0..30 {
            let shape = h.tree.shape(h.root).unwrap();
            let budget = 1 + rng.below(64 << 10);
            // Half the rounds drain alongside a batch, half on their own
            // (the idle checkpoint thread's update).
            let batch = match round % 2 {
                0 => random_batch(&mut rng, 6_000, 200, 30),
                _ => Vec::new(),
            };
            h.apply_with(batch, &drain_all(&shape, budget));
            h.assert_matches_model(&mut rng, 200);
        }
        h.assert_scans_match(&mut rng, 20);
        assert!(h.events.reclaim_flushes > 0, "seed {seed}: nothing drained");
    }
}

#[test]
fn draining_everything_empties_the_buffers_above_the_leaves() {
    let mut rng = Rng::new(7);
    let mut h = overwritten_tree(&mut rng);
    let before = h.tree.shape(h.root).unwrap();
    assert!(before.pending_bytes_above_leaves > 0, "{before:?}");
    for _ in 0..10 {
        let shape = h.tree.shape(h.root).unwrap();
        h.apply_with(Vec::new(), &drain_all(&shape, u64::MAX));
    }
    let after = h.tree.shape(h.root).unwrap();
    assert_eq!(after.pending_bytes_above_leaves, 0, "{after:?}");
    let segments_above_leaves: u64 = after
        .nodes_above_leaves
        .iter()
        .map(|n| n.segment_page_bytes)
        .sum();
    assert_eq!(segments_above_leaves, 0, "{after:?}");
    h.assert_scans_match(&mut rng, 20);
}

#[test]
fn draining_deletes_shrinks_the_leaves() {
    let mut rng = Rng::new(8);
    // Leaves of several blocks, so that emptier leaves take fewer.
    let mut h = Harness::new(config(512, 16 * 1024));
    for chunk in (0..8_000u64).collect::<Vec<_>>().chunks(500) {
        h.apply(
            chunk
                .iter()
                .map(|&i| (key(i), Some(value(&mut rng))))
                .collect(),
        );
    }
    let full = h.tree.shape(h.root).unwrap();
    // Delete every other key in small batches: the tombstones stay
    // buffered, shadowing half of the leaves' records.
    for chunk in (0..8_000u64).step_by(2).collect::<Vec<_>>().chunks(200) {
        h.apply(chunk.iter().map(|&i| (key(i), None)).collect());
    }
    for _ in 0..20 {
        let shape = h.tree.shape(h.root).unwrap();
        if shape.pending_bytes == 0 {
            break;
        }
        h.apply_with(Vec::new(), &drain_all(&shape, u64::MAX));
    }
    let drained = h.tree.shape(h.root).unwrap();
    assert_eq!(drained.pending_bytes_above_leaves, 0, "{drained:?}");
    let stored = drained.leaf_page_bytes + drained.segment_page_bytes;
    assert!(
        stored * 10 <= full.leaf_page_bytes * 7,
        "half the records deleted, {stored} bytes left of {}",
        full.leaf_page_bytes
    );
    assert_eq!(h.model.len(), 4_000);
    h.assert_scans_match(&mut rng, 20);
}

#[test]
fn an_empty_plan_or_an_empty_tree_changes_nothing() {
    let mut rng = Rng::new(9);
    let mut h = Harness::new(small_config(512));
    let plan = ReclaimPlan {
        targets: vec![Bytes::new()],
        budget_bytes: u64::MAX,
    };
    h.apply_with(Vec::new(), &plan);
    assert_eq!(h.root, None);
    h.apply(random_batch(&mut rng, 1_000, 300, 0));
    let root = h.root;
    h.apply_with(Vec::new(), &ReclaimPlan::default());
    assert_eq!(h.root, root, "no plan: no new version");
}
