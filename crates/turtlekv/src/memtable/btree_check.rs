//! Deep check of the B+-tree MemTable's structure, for `Db::check` and
//! tests: each level, walked along its right links, holds its entries in
//! strict version order with the right prefixes; each node's high fence is
//! its right sibling's low fence; each inner node's children are the next
//! level's nodes, in order, each starting at the fence its parent gives
//! it; and the leaves hold every entry inserted.

use super::btree_node::{Header, entry_prefix, slot_entry as entry};
use super::node::{NodeRef, compare};

fn node<'a>(ptr: *mut Header) -> Option<&'a Header> {
    // SAFETY: the writer lock is held (no node changes), and links hold
    // null or nodes of the MemTable that owns `root`, which outlives this.
    unsafe { ptr.as_ref() }
}

pub(super) fn check(root: &Header, len: usize) -> Result<(), String> {
    if !root.right().is_null() {
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
            nodes.push(std::ptr::from_ref(n).cast_mut());
            check_node(n, level, nodes.len() == 1, &mut prev, &mut children)?;
            if level == 0 {
                entries += n.len();
            }
            at = node(n.right());
        }
        if let Some(expected) = expected.take()
            && expected != nodes
        {
            return Err(format!("level {level}: not the nodes its parents list"));
        }
        first = match level {
            0 => None,
            _ => node(leftmost.child(0)),
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
    n: &'a Header,
    level: u32,
    leftmost: bool,
    prev: &mut Option<NodeRef<'a>>,
    children: &mut Vec<*mut Header>,
) -> Result<(), String> {
    if n.level() != level {
        return Err(format!("a node of level {} at level {level}", n.level()));
    }
    let empty_root_leaf = level == 0 && leftmost && n.right().is_null();
    if n.len() == 0 && !empty_root_leaf {
        return Err(format!("an empty node at level {level}"));
    }
    for i in 0..n.len() {
        let slot = entry(n.entry(i));
        if level > 0 {
            let child = node(n.child(i)).ok_or(format!("a null child at level {level}"))?;
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
            children.push(n.child(i));
            if slot.is_none() && (i > 0 || !leftmost) {
                return Err(format!("level {level}: a separator is missing"));
            }
        }
        let Some(e) = slot else {
            continue;
        };
        if n.prefix_at(i) != entry_prefix(n.entry(i)) {
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
fn check_fences(n: &Header, level: u32) -> Result<(), String> {
    let right = node(n.right());
    let high = n.high();
    match right {
        None if high.is_null() => Ok(()),
        None => Err(format!(
            "level {level}: a high fence without a right sibling"
        )),
        Some(r) if r.entry(0) != high || high.is_null() => Err(format!(
            "level {level}: a high fence that is not the right's low fence"
        )),
        Some(_) if n.high_prefix() != entry_prefix(high) => Err(format!(
            "level {level}: a high fence's prefix differs from its entry's"
        )),
        Some(_) => {
            let last = entry(n.entry(n.len().saturating_sub(1)));
            let high = entry(high).expect("checked not null");
            match last {
                Some(l) if !compare(l.parts(), high.parts()).is_lt() => Err(format!(
                    "level {level}: an entry at or above the high fence"
                )),
                _ => Ok(()),
            }
        }
    }
}
