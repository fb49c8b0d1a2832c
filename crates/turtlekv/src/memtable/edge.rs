//! Which nodes a search of the MemTable passes on its way to a position:
//! shared by the skiplist's levels and the index over its tall nodes.

use std::cmp::Ordering;

use super::node::{KeyParts, NodeRef};

/// Which nodes a search passes: those before a version, those whose key is
/// below a key, or those whose key is at most a key.
#[derive(Clone, Copy)]
pub(super) enum Edge<'k> {
    Version(KeyParts<'k>),
    Below(KeyParts<'k>),
    UpTo(KeyParts<'k>),
    All,
}

impl<'k> Edge<'k> {
    /// Nodes of keys below `key` (every version of `key` is at or after
    /// `(key, u64::MAX)`).
    pub(super) fn below(key: &'k [u8]) -> Self {
        Edge::Below(KeyParts::new(key, u64::MAX))
    }

    /// Nodes of keys up to `key` (every version is at or before `(key, 0)`).
    pub(super) fn up_to(key: &'k [u8]) -> Self {
        Edge::UpTo(KeyParts::new(key, 0))
    }

    pub(super) fn passes(self, node: NodeRef<'_>) -> bool {
        match self {
            Edge::Version(p) | Edge::Below(p) => node.cmp_parts(p) == Ordering::Less,
            Edge::UpTo(p) => node.cmp_parts(p) != Ordering::Greater,
            Edge::All => true,
        }
    }

    /// Whether a node whose key starts with `prefix` is passed, when the
    /// prefix alone tells; `None` when it ties the edge's (the caller then
    /// compares the node).
    pub(super) fn passes_prefix(self, prefix: u64) -> Option<bool> {
        match self {
            Edge::Version(p) | Edge::Below(p) | Edge::UpTo(p) => match prefix.cmp(&p.prefix) {
                Ordering::Less => Some(true),
                Ordering::Greater => Some(false),
                Ordering::Equal => None,
            },
            Edge::All => Some(true),
        }
    }
}
