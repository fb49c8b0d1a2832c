//! Deep integrity check of the page store, for tests and `Db::check`.

use super::store::{PageStore, kind_index};
use super::versions::RootPin;
use super::{ListChildren, PageId, PageKind};
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
    /// from disk (bypassing the cache; leaf pages but their punched holes,
    /// `verify_leaf_blocks`), and checks the allocator, the pages
    /// waiting for reuse and the cache against each other.
    pub fn check(&self, pin: &RootPin, list_children: ListChildren<'_>) -> Result<CheckReport> {
        let live = self.reachable(pin.root(), list_children, None)?;
        let mut report = CheckReport::default();
        for id in live[kind_index(PageKind::Leaf)].values() {
            report.leaf_bytes += self.verify_leaf_blocks(*id)?;
        }
        report.node_pages = live[kind_index(PageKind::Node)].len() as u64;
        report.leaf_pages = live[kind_index(PageKind::Leaf)].len() as u64;
        // Findings about the allocator as a whole are at offset 0; those
        // about one page at its slot's start.
        let broken = |i: usize, reason: String| Error::corruption(&self.files[i].path, 0, reason);
        let broken_page = |id: PageId, reason: String| {
            let pf = self.file_of(id);
            Error::corruption(&pf.path, pf.offset_of(id), reason)
        };
        // Commits and reclaims (which take pages off the pending list before
        // freeing them) wait, so every allocated page is accounted for below.
        let _serial = self.commit_lock.lock();
        let alloc = self.alloc.lock();
        for (i, pages) in live.iter().enumerate() {
            alloc[i].check().map_err(|r| broken(i, r))?;
            if let Some(id) = pages.values().find(|id| !alloc[i].is_live(**id)) {
                return Err(broken_page(
                    *id,
                    format!("reachable page {:#x} is not allocated", id.to_raw()),
                ));
            }
        }
        let current = self.versions.current();
        for id in self.versions.pending_pages() {
            let i = kind_index(id.kind());
            if !alloc[i].is_live(id) {
                return Err(broken_page(
                    id,
                    format!("page {:#x} waits for reuse but is free", id.to_raw()),
                ));
            }
            if pin.generation() == current.0 && live[i].get(&id.slot()) == Some(&id) {
                return Err(broken_page(
                    id,
                    format!(
                        "page {:#x} waits for reuse but the newest root reaches it",
                        id.to_raw()
                    ),
                ));
            }
        }
        if pin.generation() == current.0 {
            // Exact: every allocated page is reachable, waits for reuse, or
            // was written for the next commit (one in progress).
            let pending: std::collections::HashSet<_> =
                self.versions.pending_pages().into_iter().collect();
            let next_tag = (current.0 + 1) % super::id::TAG_MODULUS;
            for (i, a) in alloc.iter().enumerate() {
                if let Some(id) = a.live_ids().find(|id| {
                    live[i].get(&id.slot()) != Some(id)
                        && !pending.contains(id)
                        && id.tag() != next_tag
                }) {
                    return Err(broken_page(
                        id,
                        format!(
                            "page {:#x} is allocated, but no root reaches it and nothing frees it",
                            id.to_raw()
                        ),
                    ));
                }
            }
        }
        self.cache
            .check()
            .map_err(|r| Error::corruption(&self.files[1].path, 0, format!("page cache: {r}")))?;
        Ok(report)
    }
}
