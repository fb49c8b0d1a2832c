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
//!
//! Live segment pages lose blocks too: a commit names the chunks of its
//! segments that hold only flushed items (`tree::write::dead_chunks`), and
//! once no reader of an older root remains their blocks join the punches
//! of the next commit, each block once per page.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io;
use std::sync::atomic::Ordering;

use super::PageId;
use super::alloc::SlotAllocator;
use super::prefetch::PageRange;
use super::store::{PageFile, PageStore, bump};
use crate::Result;

/// Leaf slot space still allocated that no live page uses.
#[derive(Debug, Default)]
pub(super) struct DeferredPunches {
    /// Free slots whose old bytes are still allocated.
    dirty_slots: BTreeSet<u64>,
    /// Pages written into a dirty slot that end before the slot does.
    tails: Vec<PageId>,
    /// Blocks of live pages that no reader reads: `(page, first, end)`.
    dead_blocks: Vec<(PageId, u32, u32)>,
    /// Per live page, a bit per block already in `dead_blocks` or punched:
    /// a chunk dead in one version is dead in every later one, which name
    /// it again.
    punched_blocks: HashMap<PageId, Vec<u64>>,
}

impl DeferredPunches {
    /// A leaf page was freed without punching its slot.
    pub fn slot_freed(&mut self, id: PageId) {
        self.dirty_slots.insert(id.slot());
        if self.punched_blocks.remove(&id).is_some() {
            self.dead_blocks.retain(|(page, _, _)| *page != id);
        }
    }

    /// Blocks of live page `id` punched or queued to be.
    pub fn punched_blocks(&self, id: PageId) -> u32 {
        self.punched_blocks
            .get(&id)
            .map_or(0, |bits| bits.iter().map(|w| w.count_ones()).sum())
    }

    /// Blocks `first..end` of live page `id` hold nothing any reader reads.
    pub fn blocks_dead(&mut self, id: PageId, first: u32, end: u32) {
        let bits = self
            .punched_blocks
            .entry(id)
            .or_insert_with(|| vec![0; id.blocks().div_ceil(64) as usize]);
        let mut run: Option<u32> = None;
        for block in first..end.min(id.blocks()) {
            let (word, bit) = ((block / 64) as usize, 1u64 << (block % 64));
            let new = bits[word] & bit == 0;
            bits[word] |= bit;
            match (new, run) {
                (true, None) => run = Some(block),
                (false, Some(start)) => {
                    self.dead_blocks.push((id, start, block));
                    run = None;
                }
                _ => {}
            }
        }
        if let Some(start) = run {
            self.dead_blocks.push((id, start, end.min(id.blocks())));
        }
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
    /// touch: the tails of pages still live, the dirty slots still free,
    /// and the dead blocks of live pages (whose bytes come second).
    /// Forgets them all.
    fn take_ranges(&mut self, file: &PageFile, alloc: &SlotAllocator) -> (Vec<(u64, u64)>, u64) {
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
        let dead = self
            .dead_blocks
            .drain(..)
            .filter(|&(id, _, _)| alloc.is_live(id))
            .map(|(id, first, end)| {
                let offset = file.offset_of(id) + u64::from(first) * block_bytes;
                (offset, u64::from(end - first) * block_bytes)
            })
            .collect::<Vec<_>>();
        let dead_bytes = dead.iter().map(|(_, len)| len).sum();
        let mut ranges: Vec<(u64, u64)> = tails.chain(slots).chain(dead).collect();
        ranges.sort_unstable();
        (join_touching(ranges), dead_bytes)
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
    /// Queues the blocks wholly inside `dead_ranges` (content ranges of
    /// live leaf pages) for the next commit's punches, but for pages
    /// `freed` now, whose whole slots go.
    pub(super) fn queue_dead_ranges(&self, freed: &[PageId], dead_ranges: Vec<PageRange>) {
        if dead_ranges.is_empty() {
            return;
        }
        let freed: HashSet<PageId> = freed.iter().copied().collect();
        let geometry = self.files[super::store::kind_index(super::PageKind::Leaf)].geometry;
        let payload = geometry.payload_bytes() as u64;
        let header = super::codec::PAGE_HEADER_BYTES as u64;
        let mut punches = self.punches.lock();
        for (id, offset, len) in dead_ranges {
            if id.kind() != super::PageKind::Leaf || freed.contains(&id) {
                continue;
            }
            let first = (header + offset).div_ceil(payload);
            let end = (header + offset + len) / payload;
            if first < end {
                punches.blocks_dead(id, first as u32, end as u32);
            }
        }
    }

    /// Punches what `DeferredPunches` holds. Runs in `commit`, under the
    /// commit lock, so no reclaim frees a page whose tail it punches; the
    /// allocator stays locked throughout, so no write can take a slot
    /// while it is being punched.
    pub(super) fn punch_deferred(&self) -> Result<()> {
        let pf = &self.files[super::store::kind_index(super::PageKind::Leaf)];
        let alloc = self.alloc.lock();
        let leaf_alloc = &alloc[super::store::kind_index(super::PageKind::Leaf)];
        let (ranges, dead_chunk_bytes) = self.punches.lock().take_ranges(pf, leaf_alloc);
        self.punch_ranges(pf, ranges)?;
        bump(&self.counters.dead_chunk_bytes_punched, dead_chunk_bytes);
        Ok(())
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
