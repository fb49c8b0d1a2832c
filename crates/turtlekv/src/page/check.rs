//! Deep integrity check of the page store, for tests and `Db::check`.

use super::store::{PageStore, kind_index};
use super::versions::RootPin;
use super::{ListChildren, PageKind};
use crate::{Error, Result};

/// What a deep check visited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CheckReport {
    /// Node pages reachable from the checked root.
    pub node_pages: u64,
    /// Leaf pages reachable from the checked root.
    pub leaf_pages: u64,
    /// Content bytes of those leaf pages.
    pub leaf_bytes: u64,
}

impl PageStore {
    /// Reads and verifies every page reachable from the pinned root straight
    /// from disk (bypassing the cache), and checks the allocator, the pages
    /// waiting for reuse and the cache against each other.
    pub fn check(&self, pin: &RootPin, list_children: ListChildren<'_>) -> Result<CheckReport> {
        let live = self.reachable(pin.root(), list_children, None)?;
        let mut report = CheckReport::default();
        for id in live[kind_index(PageKind::Leaf)].values() {
            report.leaf_bytes += self.read_whole(*id, None)?.len() as u64;
        }
        report.node_pages = live[kind_index(PageKind::Node)].len() as u64;
        report.leaf_pages = live[kind_index(PageKind::Leaf)].len() as u64;
        let broken = |i: usize, reason: String| Error::corruption(&self.files[i].path, 0, reason);
        let alloc = self.alloc.lock();
        for (i, pages) in live.iter().enumerate() {
            alloc[i].check().map_err(|r| broken(i, r))?;
            if let Some(id) = pages.values().find(|id| !alloc[i].is_live(**id)) {
                return Err(broken(
                    i,
                    format!("reachable page {:#x} is not allocated", id.to_raw()),
                ));
            }
        }
        let current = self.versions.current();
        for id in self.versions.pending_pages() {
            let i = kind_index(id.kind());
            if !alloc[i].is_live(id) {
                return Err(broken(
                    i,
                    format!("page {:#x} waits for reuse but is free", id.to_raw()),
                ));
            }
            if pin.generation() == current.0 && live[i].get(&id.slot()) == Some(&id) {
                return Err(broken(
                    i,
                    format!(
                        "page {:#x} waits for reuse but the newest root reaches it",
                        id.to_raw()
                    ),
                ));
            }
        }
        self.cache
            .check()
            .map_err(|r| Error::corruption(&self.superblock_path, 0, format!("page cache: {r}")))?;
        Ok(report)
    }
}
