//! Deep check of the B+-tree MemTable's structure, for `Db::check` and
//! tests: each level, walked along its right links, holds its entries in
//! strict version order with the right prefixes; each node's high fence is
//! its right sibling's low fence; each inner node's children are the next
//! level's nodes, in order, each starting at the fence its parent gives
//! it; and the leaves hold every entry inserted.

use super::btree_node::{Header, NodePtr, entry_prefix};
use super::node::{NodeRef, compare};

pub(super) fn check(root: NodePtr<'_>, len: usize) -> Result<(), String> {
    if root.right().is_some() {
        return Err("the root has a right sibling".into());
    }
    let mut first = Some(root);
    // The nodes the level above says come next, in order.
    let mut expected: Option<Vec<*mut Header>> = None;
    let mut entries = 0;
    while let Some(leftmost) = first {
        let level = leftmost.level();
        let mut children = Vec::new();
        let mut nodes = Vec::new();
        let mut prev: Option<NodeRef<'_>> = None;
        let mut at = Some(leftmost);
        while let Some(n) = at {
            nodes.push(n.as_ptr());
            check_node(n, level, nodes.len() == 1, &mut prev, &mut children)?;
            if level == 0 {
                entries += n.len();
            }
            at = n.right();
        }
        if let Some(expected) = expected.take()
            && expected != nodes
        {
            return Err(format!("level {level}: not the nodes its parents list"));
        }
        first = match level {
            0 => None,
            _ => leftmost.child(0),
        };
        expected = Some(children);
    }
    if entries != len {
        return Err(format!("{entries} entries in the leaves, {len} inserted"));
    }
    Ok(())
}

/// One node of `level`: its slots in order after `prev` (the last entry of
/// the level so far), its fences, and its children (appended to
/// `children`).
fn check_node<'a>(
    n: NodePtr<'a>,
    level: u32,
    leftmost: bool,
    prev: &mut Option<NodeRef<'a>>,
    children: &mut Vec<*mut Header>,
) -> Result<(), String> {
    if n.level() != level {
        return Err(format!("a node of level {} at level {level}", n.level()));
    }
    let empty_root_leaf = level == 0 && leftmost && n.right().is_none();
    if n.len() == 0 && !empty_root_leaf {
        return Err(format!("an empty node at level {level}"));
    }
    for i in 0..n.len() {
        let slot = n.entry_ref(i);
        if level > 0 {
            let child = n.child(i).ok_or(format!("a null child at level {level}"))?;
            if child.level() + 1 != level {
                return Err(format!("a child of level {} under {level}", child.level()));
            }
            // The leftmost inner nodes have no low fence; their first
            // child's is its own first entry.
            if slot.is_some() && child.entry(0) != n.entry(i) {
                return Err(format!(
                    "level {level}: a child's low fence is not its separator"
                ));
            }
            children.push(child.as_ptr());
            if slot.is_none() && (i > 0 || !leftmost) {
                return Err(format!("level {level}: a separator is missing"));
            }
        }
        let Some(e) = slot else {
            continue;
        };
        if n.prefix_at(i) != entry_prefix(slot) {
            return Err(format!(
                "level {level}: a stored prefix differs from its entry's"
            ));
        }
        // Inner levels repeat a child's low fence as the next node's.
        let in_order = match *prev {
            None => true,
            Some(p) if level > 0 && i == 0 => {
                std::ptr::eq(p.ptr(), e.ptr()) || compare(p.parts(), e.parts()).is_lt()
            }
            Some(p) => compare(p.parts(), e.parts()).is_lt(),
        };
        if !in_order {
            return Err(format!("level {level} out of order at {:?}", e.key()));
        }
        *prev = Some(e);
    }
    check_fences(n, level)
}

/// The high fence is the right sibling's first slot, and above the node's.
fn check_fences(n: NodePtr<'_>, level: u32) -> Result<(), String> {
    let high = n.high_ref();
    match n.right() {
        None if high.is_none() => Ok(()),
        None => Err(format!(
            "level {level}: a high fence without a right sibling"
        )),
        Some(r) if r.entry(0) != n.high() || high.is_none() => Err(format!(
            "level {level}: a high fence that is not the right's low fence"
        )),
        Some(_) if n.high_prefix() != entry_prefix(high) => Err(format!(
            "level {level}: a high fence's prefix differs from its entry's"
        )),
        Some(_) => {
            let last = n.entry_ref(n.len().saturating_sub(1));
            let high = high.expect("checked not null");
            match last {
                Some(l) if !compare(l.parts(), high.parts()).is_lt() => Err(format!(
                    "level {level}: an entry at or above the high fence"
                )),
                _ => Ok(()),
            }
        }
    }
}
