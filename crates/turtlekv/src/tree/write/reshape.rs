//! Node splits and joins, and joins of underfull children.
//!
//! Joining two children first takes every pending item of both pivots out of
//! the buffer and applies it to the joined child: a merged pivot could not
//! otherwise describe what has been flushed with one bound per segment (the
//! flushed items of the right pivot would not be a prefix of the merged range).

use bytes::Bytes;

use super::cut;
use super::flush::{Piece, take_child_node};
use super::merge::merge_runs;
use super::update::Update;
use crate::Result;
use crate::tree::format::node::{Child, LeafData, MAX_LEVELS, Node, Pivot, Segment};

impl Update<'_> {
    /// Splits a node whose pivots or page overflow into pieces that fit, each
    /// with its buffer bound restored. The first piece's lower key is empty
    /// (it keeps the parent pivot's key).
    pub(in crate::tree) fn split_node(&mut self, node: Node) -> Result<Vec<(Bytes, Node)>> {
        let config = self.tree.config;
        // A node must split when its page overflows; it should split when its
        // pivots take more than their half, unless they are so few (huge
        // keys) that the halves would be nearly empty (`Node::should_split`).
        let must = node.encoded_len() > config.node_max_bytes && node.pivots.len() >= 2;
        if !must && !node.should_split(&config) {
            return Ok(vec![(Bytes::new(), node)]);
        }
        let (_, m) = node.best_split();
        self.events.node_splits += 1;
        let (mut left, right) = split_at(node, m);
        if left.height == 1 {
            // The left half's last leaf may be small beside a leaf it could
            // not join. It was paired with its right neighbour (now in the
            // right half) and is now paired with its left one: look again.
            let last = left.pivots.len() - 1;
            self.fix_underfull(&mut left, last, 1)?;
        }
        let sep = right.range_lo.clone();
        let mut out = Vec::new();
        for (lower, mut half) in [(Bytes::new(), left), (sep, right)] {
            self.restore(&mut half)?;
            for (i, (sub_lower, sub)) in self.split_node(half)?.into_iter().enumerate() {
                out.push((if i == 0 { lower.clone() } else { sub_lower }, sub));
            }
        }
        Ok(out)
    }

    /// Joins children `p` and `p + 1` (with everything pending for them) and
    /// replaces them by the result, cut again if it is too large. Returns the
    /// number of pivots that replaced the two.
    pub(in crate::tree) fn join_pivots(&mut self, node: &mut Node, p: usize) -> Result<usize> {
        let mut batch = self.take_all_pending(node, p)?;
        batch.extend(self.take_all_pending(node, p + 1)?);
        let sep = node.pivots[p + 1].lower.clone();
        if node.height == 1 {
            self.events.leaf_joins += 1;
        } else {
            self.events.node_joins += 1;
        }
        let pieces: Vec<Piece> = if node.height == 1 {
            let mut old = self.take_leaf(&node.pivots[p].child)?.to_vec();
            old.extend(self.take_leaf(&node.pivots[p + 1].child)?.iter().cloned());
            self.leaf_pieces(merge_runs(&[&batch, &old], true))
        } else {
            self.child_node(node, p)?;
            self.child_node(node, p + 1)?;
            let right = take_child_node(&mut node.pivots[p + 1]);
            let left = take_child_node(&mut node.pivots[p]);
            let mut joined = join_nodes(left, right, sep);
            // A side may have had a single child, which could not be joined
            // with a sibling there; now it can.
            let children = joined.pivots.len();
            self.fix_underfull(&mut joined, 0, children)?;
            for piece in cut::cut_batch(batch, self.tree.config.leaf_max_bytes) {
                self.insert_and_flush(&mut joined, piece)?;
            }
            self.restore(&mut joined)?;
            self.split_node(joined)?
                .into_iter()
                .map(|(lower, n)| (lower, Child::Node(Box::new(n))))
                .collect()
        };
        node.pivots.remove(p + 1);
        for seg in &mut node.segments {
            debug_assert!(seg.bounds[p + 1].is_none() && seg.bounds[p].is_none());
            seg.bounds.remove(p + 1);
        }
        let count = pieces.len();
        self.replace_pivot(node, p, pieces)?;
        self.drop_inactive_segments(node)?;
        Ok(count)
    }

    /// Joins underfull children among pivots `start..start + count` with a neighbour.
    pub(in crate::tree) fn fix_underfull(
        &mut self,
        node: &mut Node,
        start: usize,
        count: usize,
    ) -> Result<()> {
        let mut i = start;
        let mut end = start + count;
        while i < end.min(node.pivots.len()) {
            if node.pivots.len() > 1 && self.is_underfull(&node.pivots[i].child)? {
                let left = if i + 1 < node.pivots.len() { i } else { i - 1 };
                let pieces = self.join_pivots(node, left)?;
                let (left, pieces) = self.join_left_if_it_fits(node, left, pieces)?;
                // One piece may still be small: look at it again (it then
                // joins its next neighbour). Several pieces of leaves were
                // cut evenly. Several pieces of a node were split evenly,
                // but restoring their buffers may have joined children of
                // one and left it small: look at them again too, when
                // joining them again makes one node (so the loop ends:
                // that join leaves one pivot fewer).
                let again = pieces == 1
                    || (node.height > 1
                        && self.rejoin_fits(node, left, pieces)
                        && self.any_underfull(&node.pivots[left..left + pieces])?);
                // Several pieces of leaves hold no small piece their cut
                // could join, but the last may be small beside the next
                // leaf: look at it again when there is one (it joins
                // rightwards, so the loop still moves on).
                let last_again = !again && node.height == 1 && left + pieces < node.pivots.len();
                let looked_at = if again { pieces } else { 1 };
                end = (end + pieces).saturating_sub(2).max(left + looked_at);
                i = if again { left } else { left + pieces };
                if last_again {
                    i -= 1;
                    end = end.max(i + 1);
                }
                // The last leaf pairs with its left neighbour: when that is
                // the leaf the join just made, look at the last one too.
                if node.height == 1 && left + pieces + 1 == node.pivots.len() {
                    end = node.pivots.len();
                }
                continue;
            }
            i += 1;
        }
        Ok(())
    }

    /// After a leaf join at `left` made `pieces`: the leaf before them may
    /// be small beside a leaf it could not join, which the join replaced
    /// (by a smaller one, when the join took deletes or smaller values
    /// along, or by a cut). It joins the first new piece when both fit one
    /// page. Returns where the changed pivots start and how many they are.
    /// (Once per join, and only when one page holds both, so the caller's
    /// loop still moves on.)
    fn join_left_if_it_fits(
        &mut self,
        node: &mut Node,
        left: usize,
        pieces: usize,
    ) -> Result<(usize, usize)> {
        if node.height != 1 || left == 0 {
            return Ok((left, pieces));
        }
        let before = &node.pivots[left - 1].child;
        if !self.is_underfull(before)? {
            return Ok((left, pieces));
        }
        let (Child::Leaf(before), Child::Leaf(first)) = (before, &node.pivots[left].child) else {
            return Ok((left, pieces));
        };
        let (before, first) = (before.clone(), first.clone());
        let mut both = self.items(&before)?.to_vec();
        both.extend(self.items(&first)?.iter().cloned());
        let config = &self.tree.config;
        if cut::leaf_page_bytes(&both, config) > config.leaf_max_bytes {
            return Ok((left, pieces));
        }
        let joined = self.join_pivots(node, left - 1)?;
        Ok((left - 1, joined + pieces - 1))
    }

    /// Whether the child nodes of pivots `start..start + count`, joined
    /// back into one, would need no split: their pivots, with the
    /// separators the join adds, within a node's share for pivots.
    fn rejoin_fits(&self, node: &Node, start: usize, count: usize) -> bool {
        let mut bytes = 0;
        for (i, pivot) in node.pivots[start..start + count].iter().enumerate() {
            let Child::Node(child) = &pivot.child else {
                return false;
            };
            bytes += child.pivot_bytes() + if i > 0 { 2 + pivot.lower.len() } else { 0 };
        }
        bytes <= self.tree.config.node_pivot_max_bytes()
    }

    fn any_underfull(&self, pivots: &[Pivot]) -> Result<bool> {
        for pivot in pivots {
            if self.is_underfull(&pivot.child)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn is_underfull(&self, child: &Child) -> Result<bool> {
        let config = &self.tree.config;
        Ok(match child {
            Child::Leaf(LeafData::New(items)) => {
                cut::leaf_page_bytes(items, config) < config.leaf_min_bytes
            }
            Child::Node(n) => n.pivot_bytes() < config.node_pivot_min_bytes(),
            // A stored leaf is normally viable, but one left small next to a
            // leaf of huge items may join once that neighbour changes. Its
            // head (small, usually cached) tells its size.
            // Measured as stored raw, as leaves are cut: a compressed page
            // is smaller than its items' measure.
            Child::Leaf(LeafData::Stored(r)) => {
                let head = self.tree.read_leaf_head(r)?;
                (head.raw_page_bytes as usize) < config.leaf_min_bytes
            }
            Child::StoredNode(_) => false,
        })
    }
}

/// Splits a node before pivot `m`; segments active on both sides are shared.
fn split_at(mut node: Node, m: usize) -> (Node, Node) {
    let sep = node.pivots[m].lower.clone();
    let mut right_pivots = node.pivots.split_off(m);
    right_pivots[0].lower = Bytes::new();
    let (mut left_segs, mut right_segs) = (Vec::new(), Vec::new());
    for mut seg in node.segments {
        let right_bounds = seg.bounds.split_off(m);
        let on_left = seg.bounds.iter().any(Option::is_some);
        let on_right = right_bounds.iter().any(Option::is_some);
        seg.shared |= on_left && on_right;
        if on_right {
            right_segs.push(Segment {
                bounds: right_bounds,
                ..seg.clone()
            });
        }
        if on_left {
            left_segs.push(seg);
        }
    }
    let right = Node {
        height: node.height,
        pivots: right_pivots,
        segments: right_segs,
        range_lo: sep.clone(),
        range_hi: node.range_hi,
        page: node.page,
    };
    let left = Node {
        height: node.height,
        pivots: node.pivots,
        segments: left_segs,
        range_lo: node.range_lo,
        range_hi: Some(sep),
        page: node.page,
    };
    (left, right)
}

/// Concatenates two sibling nodes; `sep` is the right one's lower key. A
/// segment both reference (from an earlier split) becomes one entry again.
fn join_nodes(left: Node, mut right: Node, sep: Bytes) -> Node {
    let (nl, nr) = (left.pivots.len(), right.pivots.len());
    right.pivots[0].lower = sep;
    let mut segments: Vec<Segment> = Vec::new();
    for level in 0..MAX_LEVELS {
        let level_start = segments.len();
        for seg in left.segments.iter().filter(|s| s.level == level) {
            let mut seg = seg.clone();
            seg.bounds.resize(nl + nr, None);
            segments.push(seg);
        }
        let left_end = segments.len();
        for seg in right.segments.iter().filter(|s| s.level == level) {
            let same_page = |s: &Segment| matches!((&s.data, &seg.data), (LeafData::Stored(a), LeafData::Stored(b)) if a.id == b.id);
            if left_end > level_start
                && same_page(&segments[left_end - 1])
                && segments.len() == left_end
            {
                segments[left_end - 1].bounds[nl..].clone_from_slice(&seg.bounds);
                continue;
            }
            let mut bounds = vec![None; nl];
            bounds.extend_from_slice(&seg.bounds);
            segments.push(Segment {
                bounds,
                ..seg.clone()
            });
        }
    }
    let mut pivots = left.pivots;
    pivots.extend(right.pivots);
    // The counts of a node joined from two stored ones came from two
    // pages: no one page to name.
    let page = match (left.page, right.page) {
        (Some(a), Some(b)) if a != b => None,
        (a, b) => a.or(b),
    };
    Node {
        height: left.height,
        pivots,
        segments,
        range_lo: left.range_lo,
        range_hi: right.range_hi,
        page,
    }
}
