//! The space policy: how much of a tree version is garbage, and what the
//! next update reclaims (`docs/tuning.md`, "Disk space").
//!
//! Garbage is estimated from the node pages alone (`TreeShape`): segment
//! pages keep their flushed items until every pivot they cover has
//! flushed, and what is buffered above the leaves shadows older versions
//! in them (tombstones shadow whole records). How much a buffered byte
//! shadows is learnt from the flushes into leaves, which see both sides.

use crate::tree::{NodeSpace, ReclaimPlan, TreeShape, UpdateEvents};

/// Until flushes say otherwise, a buffered put is taken to shadow half its
/// size below, and a tombstone (with itself) eight times its size (a
/// 16-byte key's tombstone over a 100-byte value), each with the weight of
/// this many flushed bytes.
const PRIOR_FLUSHED_BYTES: f64 = (4 << 20) as f64;
const PRIOR_PUT_RATIO: f64 = 0.5;
const PRIOR_TOMBSTONE_RATIO: f64 = 8.0;
/// Flushed bytes after which older observations count half: the ratios
/// follow a workload that turns from inserts to overwrites.
const OBSERVATION_WINDOW_BYTES: f64 = (64 << 20) as f64;
/// Nodes one update drains at most.
const MAX_TARGETS: usize = 8;

/// Garbage and live data of a tree version, in bytes as stored.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SpaceEstimate {
    /// Leaf pages less what buffered updates make dead in them, plus the
    /// buffered puts.
    pub live_bytes: u64,
    /// Flushed items segment pages keep, the leaf data that buffered
    /// updates make dead, and buffered tombstones.
    pub garbage_bytes: u64,
}

/// Dead bytes per byte flushed into leaves, learnt as flushes see both
/// sides.
#[derive(Debug, Clone, Copy)]
struct ShadowRatio {
    flushed_bytes: f64,
    dead_bytes: f64,
    prior: f64,
}

impl ShadowRatio {
    fn new(prior: f64) -> Self {
        ShadowRatio {
            flushed_bytes: 0.0,
            dead_bytes: 0.0,
            prior,
        }
    }

    fn get(&self) -> f64 {
        (self.dead_bytes + self.prior * PRIOR_FLUSHED_BYTES)
            / (self.flushed_bytes + PRIOR_FLUSHED_BYTES)
    }

    fn observe(&mut self, flushed_bytes: u64, dead_bytes: u64) {
        if self.flushed_bytes > OBSERVATION_WINDOW_BYTES {
            self.flushed_bytes /= 2.0;
            self.dead_bytes /= 2.0;
        }
        self.flushed_bytes += flushed_bytes as f64;
        self.dead_bytes += dead_bytes as f64;
    }
}

/// When reclamation runs: while the database is in use, it keeps the
/// garbage under `garbage_percent`; once writes and reads have stopped it
/// goes on down to a third of that, as its rewriting then takes nothing
/// from a writer or a reader, and a database at rest keeps less garbage
/// than one in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pace {
    Writing,
    Idle,
}

/// The garbage threshold while idle is this fraction of `garbage_percent`.
const IDLE_THRESHOLD_DIVISOR: u32 = 3;

/// What the store learnt of the workload's overwrites and deletes, and
/// the threshold.
#[derive(Debug, Clone)]
pub(crate) struct SpacePolicy {
    /// Garbage the tree may hold, in percent of its live bytes; 0 turns
    /// reclamation off.
    garbage_percent: u32,
    puts: ShadowRatio,
    tombstones: ShadowRatio,
    /// Bytes pages take on disk per item byte they hold (compression).
    stored: ShadowRatio,
    /// Tombstone bytes checkpoints put into the tree less those flushed
    /// into leaves since this handle opened: an estimate of those
    /// buffered (node pages do not count them).
    pending_tombstone_bytes: u64,
}

impl SpacePolicy {
    pub fn new(garbage_percent: u32) -> Self {
        SpacePolicy {
            garbage_percent,
            puts: ShadowRatio::new(PRIOR_PUT_RATIO),
            tombstones: ShadowRatio::new(PRIOR_TOMBSTONE_RATIO),
            stored: ShadowRatio::new(1.0),
            pending_tombstone_bytes: 0,
        }
    }

    /// Learns from what an update buffered and what its flushes into
    /// leaves found.
    pub fn observe(&mut self, events: &UpdateEvents) {
        self.puts
            .observe(events.leaf_flush_bytes, events.leaf_flush_dead_bytes);
        self.tombstones.observe(
            events.leaf_flush_tombstone_bytes,
            events.leaf_flush_tombstone_dead_bytes,
        );
        self.stored.observe(
            events.compression_input_bytes,
            events.compression_output_bytes,
        );
        self.pending_tombstone_bytes = (self.pending_tombstone_bytes
            + events.batch_tombstone_bytes)
            .saturating_sub(events.leaf_flush_tombstone_bytes);
    }

    /// Item bytes are counted as pages store them: compressed chunks take
    /// fewer bytes on disk than their items.
    pub fn estimate(&self, shape: &TreeShape) -> SpaceEstimate {
        let stored = self.stored.get().min(1.0);
        let tombstones = self.pending_tombstone_bytes.min(shape.pending_bytes) as f64 * stored;
        let puts = shape.pending_bytes_above_leaves as f64 * stored - tombstones;
        let puts = puts.max(0.0);
        let put_shadow = puts * self.puts.get().min(1.0);
        let tombstone_dead = tombstones * self.tombstones.get();
        let pending = (shape.pending_bytes as f64 * stored) as u64;
        let flushed_kept = shape.segment_page_bytes.saturating_sub(pending);
        // Tombstones are dead themselves; the rest of what they make dead
        // lies in the leaves.
        let leaf_dead = put_shadow + (tombstone_dead - tombstones).max(0.0);
        SpaceEstimate {
            live_bytes: (shape.leaf_page_bytes as f64 + puts - leaf_dead).max(0.0) as u64,
            garbage_bytes: flushed_kept + (put_shadow + tombstone_dead) as u64,
        }
    }

    /// What the next update reclaims: nothing while the garbage is within
    /// the threshold (a third of it at `Pace::Idle`), or while less than
    /// half of the threshold is data
    /// that buffered updates shadow; else the worst nodes, with a budget
    /// of `budget_bytes` of rewriting.
    ///
    /// Why the second condition: flushed items that segments keep are
    /// garbage a load of new keys makes too, and draining for them alone
    /// rewrites leaves for no other gain: it cost a 10M-record load a
    /// quarter of its speed and a tenth more write amplification. Under
    /// overwrites and deletes the drains free those segments as well.
    pub fn plan(&self, shape: &TreeShape, budget_bytes: u64, pace: Pace) -> ReclaimPlan {
        let estimate = self.estimate(shape);
        let percent = match pace {
            Pace::Writing => self.garbage_percent,
            Pace::Idle => (self.garbage_percent / IDLE_THRESHOLD_DIVISOR).max(1),
        };
        let allowed = u128::from(estimate.live_bytes) * u128::from(percent) / 100;
        let stored = self.stored.get().min(1.0);
        let flushed_kept = shape.segment_page_bytes as f64 - shape.pending_bytes as f64 * stored;
        let shadowed = (estimate.garbage_bytes as f64 - flushed_kept.max(0.0)).max(0.0);
        if self.garbage_percent == 0
            || u128::from(estimate.garbage_bytes) <= allowed
            || shadowed as u128 * 2 <= allowed
        {
            return ReclaimPlan::default();
        }
        // Per node, what is buffered is weighed as the tree's mix of puts
        // and tombstones.
        let pending = shape.pending_bytes_above_leaves.max(1) as f64;
        let per_pending_byte = shadowed / pending;
        let reclaimable = |n: &NodeSpace| {
            let kept = (n.segment_page_bytes as f64 - n.pending_bytes as f64 * stored).max(0.0);
            kept + n.pending_bytes as f64 * per_pending_byte
        };
        let mut nodes: Vec<&NodeSpace> = shape
            .nodes_above_leaves
            .iter()
            .filter(|n| n.pending_bytes > 0)
            .collect();
        nodes.sort_by(|a, b| reclaimable(b).total_cmp(&reclaimable(a)));
        ReclaimPlan {
            targets: nodes
                .into_iter()
                .take(MAX_TARGETS)
                .map(|n| n.key.clone())
                .collect(),
            budget_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(leaf: u64, segments: u64, pending: u64) -> TreeShape {
        TreeShape {
            leaf_page_bytes: leaf,
            segment_page_bytes: segments,
            pending_bytes: pending,
            pending_bytes_above_leaves: pending,
            nodes_above_leaves: vec![
                NodeSpace {
                    key: "a".into(),
                    segment_page_bytes: segments / 4,
                    pending_bytes: pending / 4,
                },
                NodeSpace {
                    key: "m".into(),
                    segment_page_bytes: segments * 3 / 4,
                    pending_bytes: pending * 3 / 4,
                },
                NodeSpace {
                    key: "z".into(),
                    segment_page_bytes: 0,
                    pending_bytes: 0,
                },
            ],
            ..TreeShape::default()
        }
    }

    fn flushes(flushed: u64, dead: u64) -> UpdateEvents {
        UpdateEvents {
            leaf_flush_bytes: flushed,
            leaf_flush_dead_bytes: dead,
            ..UpdateEvents::default()
        }
    }

    #[test]
    fn inserts_shadow_nothing_and_overwrites_everything() {
        let mut policy = SpacePolicy::new(20);
        let s = shape(100 << 20, 30 << 20, 30 << 20);
        policy.observe(&flushes(1 << 30, 0));
        let inserts = policy.estimate(&s);
        assert!(inserts.garbage_bytes < 1 << 20, "{inserts:?}");
        assert!(inserts.live_bytes > 129 << 20, "{inserts:?}");
        assert_eq!(
            policy.plan(&s, 1 << 20, Pace::Writing),
            ReclaimPlan::default()
        );

        let mut policy = SpacePolicy::new(20);
        for _ in 0..8 {
            policy.observe(&flushes(1 << 30, 1 << 30));
        }
        let overwrites = policy.estimate(&s);
        assert!(overwrites.garbage_bytes > 29 << 20, "{overwrites:?}");
        let plan = policy.plan(&s, 1 << 20, Pace::Writing);
        assert_eq!(plan.targets, vec![Bytes::from("m"), Bytes::from("a")]);
        assert_eq!(plan.budget_bytes, 1 << 20);
    }

    #[test]
    fn at_rest_the_threshold_is_a_third() {
        let mut policy = SpacePolicy::new(20);
        for _ in 0..8 {
            policy.observe(&flushes(1 << 30, 1 << 30));
        }
        // About 10% of the live bytes shadowed: under 20%, over 20/3%.
        let s = shape(100 << 20, 10 << 20, 10 << 20);
        let e = policy.estimate(&s);
        assert!(e.garbage_bytes * 100 > e.live_bytes * 9, "{e:?}");
        assert!(e.garbage_bytes * 100 < e.live_bytes * 11, "{e:?}");
        assert_eq!(policy.plan(&s, 1, Pace::Writing), ReclaimPlan::default());
        assert_eq!(policy.plan(&s, 1, Pace::Idle).targets.len(), 2);
        // Under a third of the threshold, idle finds nothing either.
        let light = shape(100 << 20, 5 << 20, 5 << 20);
        assert_eq!(policy.plan(&light, 1, Pace::Idle), ReclaimPlan::default());
        // Off stays off at rest.
        let mut off = SpacePolicy::new(0);
        off.observe(&flushes(1 << 30, 1 << 30));
        assert_eq!(off.plan(&s, 1, Pace::Idle), ReclaimPlan::default());
    }

    #[test]
    fn flushed_items_kept_by_segments_are_garbage() {
        let mut policy = SpacePolicy::new(20);
        policy.observe(&flushes(1 << 30, 0));
        let s = shape(100 << 20, 60 << 20, 20 << 20);
        assert!(policy.estimate(&s).garbage_bytes >= 40 << 20);
        // Counted, but under inserts alone (a load) not drained for.
        assert_eq!(policy.plan(&s, 1, Pace::Writing), ReclaimPlan::default());
        // Under overwrites the drains take them along.
        let mut overwriting = SpacePolicy::new(20);
        for _ in 0..8 {
            overwriting.observe(&flushes(1 << 30, 1 << 30));
        }
        assert_eq!(overwriting.plan(&s, 1, Pace::Writing).targets.len(), 2);
        let mut off = SpacePolicy::new(0);
        for _ in 0..8 {
            off.observe(&flushes(1 << 30, 1 << 30));
        }
        assert_eq!(
            off.plan(&s, 1, Pace::Writing),
            ReclaimPlan::default(),
            "0 turns reclamation off"
        );
    }

    #[test]
    fn buffered_tombstones_count_what_they_delete() {
        let mut policy = SpacePolicy::new(20);
        policy.observe(&flushes(1 << 30, 0));
        // Inserts only: 10 MiB buffered, nothing shadowed.
        let s = shape(100 << 20, 10 << 20, 10 << 20);
        assert_eq!(policy.plan(&s, 1, Pace::Writing), ReclaimPlan::default());
        // The same bytes buffered as tombstones: each deletes about eight
        // times its size.
        policy.observe(&UpdateEvents {
            batch_tombstone_bytes: 10 << 20,
            ..UpdateEvents::default()
        });
        let e = policy.estimate(&s);
        assert!(e.garbage_bytes > 70 << 20, "{e:?}");
        assert!(e.live_bytes < 40 << 20, "{e:?}");
        assert_eq!(policy.plan(&s, 1, Pace::Writing).targets.len(), 2);
        // Flushed into the leaves, they no longer count.
        policy.observe(&UpdateEvents {
            leaf_flush_tombstone_bytes: 10 << 20,
            leaf_flush_tombstone_dead_bytes: 90 << 20,
            ..UpdateEvents::default()
        });
        assert!(policy.estimate(&s).garbage_bytes < 1 << 20);
    }

    use bytes::Bytes;
}
