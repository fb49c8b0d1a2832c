//! Returning leaf slot space to the file system, once per commit.
//!
//! A freed leaf slot is not hole-punched the moment it is reclaimed, which
//! is in the middle of the next checkpoint's page writes. On ext4 with
//! direct I/O a punch waits for every direct I/O in flight on the file, so
//! each takes about 2 ms there (punching at once, a sixth of a load's
//! checkpoint time goes to punches and to re-allocating blocks for slots
//! that the same checkpoint writes again at once). Instead a reclaimed slot
//! is only marked dirty. A page written into a dirty slot leaves the slot's
//! tail past the page to punch.
//! Each commit, before its syncs and while no page write is in flight,
//! punches the tails of those pages and every dirty slot no write reused.
//! Between checkpoints `punch_surplus` punches the dirty slots the next
//! checkpoint's writes are not expected to take. Disk usage then follows
//! live data to within about one checkpoint's writes (`docs/format.md`,
//! "Page files").

use std::collections::BTreeSet;
use std::io;
use std::sync::atomic::Ordering;

use super::PageId;
use super::alloc::SlotAllocator;
use super::store::{PageFile, PageStore, bump};
use crate::Result;

/// Leaf slot space still allocated that no live page uses.
#[derive(Debug, Default)]
pub(super) struct DeferredPunches {
    /// Free slots whose old bytes are still allocated.
    dirty_slots: BTreeSet<u64>,
    /// Pages written into a dirty slot that end before the slot does.
    tails: Vec<PageId>,
}

impl DeferredPunches {
    /// A leaf slot was freed without punching it.
    pub fn slot_freed(&mut self, slot: u64) {
        self.dirty_slots.insert(slot);
    }

    /// A leaf page was written into its slot: only the tail past the page
    /// can still hold old bytes, and only if the slot was dirty.
    pub fn page_written(&mut self, id: PageId, slot_blocks: u32) {
        if self.dirty_slots.remove(&id.slot()) && id.blocks() < slot_blocks {
            self.tails.push(id);
        }
    }

    /// Byte ranges of `file` to punch now: the dirty slots still free
    /// from `first_slot` on, sorted and joined where they touch. Forgets
    /// them; the others wait for the commit.
    fn take_slots_from(
        &mut self,
        first_slot: u64,
        file: &PageFile,
        alloc: &SlotAllocator,
    ) -> Vec<(u64, u64)> {
        let slot_bytes = file.geometry.slot_bytes;
        let surplus = self.dirty_slots.split_off(&first_slot);
        let ranges = surplus
            .into_iter()
            .filter(|&slot| alloc.is_free(slot))
            .map(|slot| (slot * slot_bytes, slot_bytes))
            .collect();
        join_touching(ranges)
    }

    /// Byte ranges of `file` to punch now, sorted and joined where they
    /// touch: the tails of pages still live, and the dirty slots still free.
    /// Forgets them all.
    fn take_ranges(&mut self, file: &PageFile, alloc: &SlotAllocator) -> Vec<(u64, u64)> {
        let slot_bytes = file.geometry.slot_bytes;
        let block_bytes = file.geometry.block_bytes as u64;
        let tails = self
            .tails
            .drain(..)
            .filter(|&id| alloc.is_live(id))
            .map(|id| {
                let used = u64::from(id.blocks()) * block_bytes;
                (file.offset_of(id) + used, slot_bytes - used)
            });
        let slots = std::mem::take(&mut self.dirty_slots)
            .into_iter()
            .filter(|&slot| alloc.is_free(slot))
            .map(|slot| (slot * slot_bytes, slot_bytes));
        let mut ranges: Vec<(u64, u64)> = tails.chain(slots).collect();
        ranges.sort_unstable();
        join_touching(ranges)
    }
}

/// Joins sorted, non-overlapping ranges that end where the next begins.
fn join_touching(ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let mut joined: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (offset, len) in ranges {
        match joined.last_mut() {
            Some((start, run)) if *start + *run == offset => *run += len,
            _ => joined.push((offset, len)),
        }
    }
    joined
}

impl PageStore {
    /// Punches what `DeferredPunches` holds. Runs in `commit`, under the
    /// commit lock, so no reclaim frees a page whose tail it punches; the
    /// allocator stays locked throughout, so no write can take a slot
    /// while it is being punched.
    pub(super) fn punch_deferred(&self) -> Result<()> {
        let pf = &self.files[super::store::kind_index(super::PageKind::Leaf)];
        let alloc = self.alloc.lock();
        let leaf_alloc = &alloc[super::store::kind_index(super::PageKind::Leaf)];
        let ranges = self.punches.lock().take_ranges(pf, leaf_alloc);
        self.punch_ranges(pf, ranges)
    }

    /// Reclaims, then punches the freed leaf slots the next writes are not
    /// expected to take: the allocator takes the lowest free slots first,
    /// so the lowest `keep_bytes` worth stay for them (a write into a
    /// punched slot must allocate its blocks anew) and the rest go back
    /// to the file system now rather than at the next commit.
    pub fn punch_surplus(&self, keep_bytes: u64) -> Result<()> {
        let _serial = self.commit_lock.lock();
        self.check_writable()?;
        self.reclaim_locked()?;
        let pf = &self.files[super::store::kind_index(super::PageKind::Leaf)];
        let alloc = self.alloc.lock();
        let leaf_alloc = &alloc[super::store::kind_index(super::PageKind::Leaf)];
        let keep_slots = keep_bytes.div_ceil(pf.geometry.slot_bytes) as usize;
        let Some(first_slot) = leaf_alloc.free_slots().nth(keep_slots) else {
            return Ok(());
        };
        let ranges = self
            .punches
            .lock()
            .take_slots_from(first_slot, pf, leaf_alloc);
        self.punch_ranges(pf, ranges)
    }

    fn punch_ranges(&self, pf: &PageFile, ranges: Vec<(u64, u64)>) -> Result<()> {
        for (offset, len) in ranges {
            match pf.file.punch_hole(offset, len) {
                Ok(()) => {
                    pf.dirty.store(true, Ordering::Release);
                    bump(&self.counters.bytes_punched, len);
                }
                // Punching only saves space; a file system without it
                // keeps the bytes, as it would have before.
                Err(e) if e.kind() == io::ErrorKind::Unsupported => break,
                Err(e) => return Err(self.poison_with(e)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touching_ranges_are_joined_and_gaps_kept() {
        let ranges = vec![(0, 10), (10, 5), (20, 4), (24, 6), (40, 1)];
        assert_eq!(join_touching(ranges), vec![(0, 15), (20, 10), (40, 1)]);
        assert_eq!(join_touching(Vec::new()), Vec::new());
    }
}
