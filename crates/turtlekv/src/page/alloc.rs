//! Slot allocation within one page file. Lowest free slot first, so files
//! stay compact and the tail can be truncated at the next open.

use std::collections::{BTreeSet, HashMap};

use super::id::{MAX_BLOCKS, MAX_SLOT};
use super::{PageId, PageKind};

/// Which slots of one page file hold pages, and which are free.
#[derive(Debug)]
pub(crate) struct SlotAllocator {
    kind: PageKind,
    slot_blocks: u32,
    /// Every slot at or above this has never held a page since open.
    next_slot: u64,
    /// Free slots below `next_slot`.
    free: BTreeSet<u64>,
    /// Allocated slots and the id of the page each holds.
    live: HashMap<u64, PageId>,
}

impl SlotAllocator {
    /// The allocator of a file whose pages are exactly `live`; every other
    /// slot below the highest one is free.
    pub fn with_live(
        kind: PageKind,
        slot_blocks: u32,
        live: impl IntoIterator<Item = PageId>,
    ) -> Self {
        debug_assert!((1..=MAX_BLOCKS).contains(&slot_blocks));
        let live: HashMap<u64, PageId> = live.into_iter().map(|id| (id.slot(), id)).collect();
        let next_slot = live.keys().max().map_or(0, |&s| s + 1);
        let free = (0..next_slot).filter(|s| !live.contains_key(s)).collect();
        let alloc = SlotAllocator {
            kind,
            slot_blocks,
            next_slot,
            free,
            live,
        };
        debug_assert_eq!(alloc.check(), Ok(()));
        alloc
    }

    /// Takes a slot for a page of `blocks` blocks written for `generation`.
    /// `None` when the page id space is exhausted.
    pub fn allocate(&mut self, blocks: u32, generation: u64) -> Option<PageId> {
        debug_assert!((1..=self.slot_blocks).contains(&blocks));
        let slot = match self.free.pop_first() {
            Some(slot) => slot,
            None if self.next_slot <= MAX_SLOT => {
                self.next_slot += 1;
                self.next_slot - 1
            }
            None => return None,
        };
        let id = PageId::new(self.kind, slot, blocks, generation);
        let previous = self.live.insert(slot, id);
        debug_assert!(previous.is_none(), "slot {slot} handed out twice");
        Some(id)
    }

    /// Returns the slot of `id` to the free list. Fails, changing nothing,
    /// when `id` is not the page its slot holds (a double or stale free).
    pub fn free(&mut self, id: PageId) -> Result<(), String> {
        debug_assert_eq!(id.kind(), self.kind);
        match self.live.get(&id.slot()) {
            Some(&held) if held == id => {
                self.live.remove(&id.slot());
                self.free.insert(id.slot());
                Ok(())
            }
            Some(held) => Err(format!(
                "freeing page {:#x}, but its slot holds {:#x}",
                id.to_raw(),
                held.to_raw()
            )),
            None => Err(format!(
                "freeing page {:#x}, which is not allocated",
                id.to_raw()
            )),
        }
    }

    /// `true` when `id` is the page its slot currently holds.
    pub fn is_live(&self, id: PageId) -> bool {
        self.live.get(&id.slot()) == Some(&id)
    }

    /// Whether `slot` is free below the high-water mark.
    pub fn is_free(&self, slot: u64) -> bool {
        self.free.contains(&slot)
    }

    /// Pages allocated and not freed.
    pub fn live_count(&self) -> u64 {
        self.live.len() as u64
    }

    /// Free slots below the high-water mark.
    pub fn free_count(&self) -> u64 {
        self.free.len() as u64
    }

    /// One past the highest slot used since open.
    pub fn high_water_slot(&self) -> u64 {
        self.next_slot
    }

    /// Ids of the allocated pages.
    pub fn live_ids(&self) -> impl Iterator<Item = PageId> + '_ {
        self.live.values().copied()
    }

    /// Free slots, lowest first.
    pub fn free_slots(&self) -> impl Iterator<Item = u64> + '_ {
        self.free.iter().copied()
    }

    /// Deep consistency check: every slot below the high-water mark is
    /// exactly one of live or free, and live ids match their slots.
    pub fn check(&self) -> Result<(), String> {
        if self.free.len() + self.live.len() != self.next_slot as usize {
            return Err(format!(
                "{} free + {} live slots != high water {}",
                self.free.len(),
                self.live.len(),
                self.next_slot
            ));
        }
        if let Some(slot) = self.free.iter().find(|s| self.live.contains_key(s)) {
            return Err(format!("slot {slot} is both free and live"));
        }
        for (&slot, id) in &self.live {
            if id.slot() != slot || id.kind() != self.kind || id.blocks() > self.slot_blocks {
                return Err(format!("slot {slot} holds malformed id {:#x}", id.to_raw()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_lowest_free_slot_and_rejects_bad_frees() {
        let mut a = SlotAllocator::with_live(PageKind::Leaf, 16, []);
        let ids: Vec<_> = (0..4).map(|i| a.allocate(1 + i, 1).unwrap()).collect();
        assert_eq!(
            ids.iter().map(|id| id.slot()).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        a.free(ids[2]).unwrap();
        a.free(ids[1]).unwrap();
        assert!(a.free(ids[1]).is_err(), "double free");
        let again = a.allocate(5, 2).unwrap();
        assert_eq!(again.slot(), 1);
        assert!(a.free(ids[1]).is_err(), "stale free of a reused slot");
        assert!(a.is_live(again) && !a.is_live(ids[1]));
        assert_eq!(
            (a.live_count(), a.free_count(), a.high_water_slot()),
            (3, 1, 4)
        );
        a.check().unwrap();
    }

    #[test]
    fn rebuilt_from_live_pages_frees_the_gaps() {
        let live = [2u64, 5, 6].map(|s| PageId::new(PageKind::Node, s, 1, 0));
        let mut a = SlotAllocator::with_live(PageKind::Node, 1, live);
        assert_eq!(a.free_slots().collect::<Vec<_>>(), [0, 1, 3, 4]);
        assert_eq!(a.high_water_slot(), 7);
        assert_eq!(a.allocate(1, 1).unwrap().slot(), 0);
        a.check().unwrap();
    }
}
