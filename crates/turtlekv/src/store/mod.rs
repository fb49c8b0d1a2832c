//! The store layer: what is durable, and which version readers see.
//!
//! It owns the tree versions (a [`TreeStore`]: the TurtleTree on the page
//! store, committed through the [`superblock`]), the WAL positions each
//! checkpoint records, and the published [`State`]: which MemTables and
//! which tree version hold the data at one moment. Layers below it (the
//! page store, the tree, the WAL) know nothing of each other; the
//! checkpoint pipeline and the database handle above it reach storage
//! only through it. `docs/design.md` describes the layers.

pub(crate) mod backup;
mod durable_pages;
#[cfg(test)]
pub(crate) mod memory;
mod paged;
mod range_delete;
pub(crate) mod space;
mod state;
mod stored_version;
pub(crate) mod superblock;
#[cfg(test)]
mod tests;
mod tree_store;
mod version;
mod version_set;

#[cfg(test)]
pub(crate) use durable_pages::DurablePages;
pub(crate) use paged::{PagedTreeStore, StoreConfig};
pub(crate) use space::Pace;
pub(crate) use state::{Frozen, ReadView, State};
pub(crate) use tree_store::{Coverage, StoreStats, TreeStore};
pub(crate) use version::{TreeCheck, TreeCursor, TreeScan, TreeVersion};
pub(crate) use version_set::VersionSet;
