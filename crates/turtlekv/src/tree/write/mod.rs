//! The write path: a batch update applied copy-on-write to a stored root.
//! Level-tiered insertion into node buffers, flushes toward the leaves,
//! splits and joins, the parallel merges they need, and the new pages they
//! write (some before the update ends, so that its memory stays bounded).

pub(crate) mod background_drop;
pub(crate) mod buffer;
pub(crate) mod cut;
pub(crate) mod dead_chunks;
pub(crate) mod flush;
pub(crate) mod level_merge;
pub(crate) mod merge;
pub(crate) mod new_pages;
pub(crate) mod reclaim;
pub(crate) mod reshape;
pub(crate) mod space;
pub(crate) mod span;
pub(crate) mod update;
