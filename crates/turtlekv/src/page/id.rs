//! How a [`PageId`] packs kind, slot, size and generation into 64 bits
//! (layout in `docs/format.md`, "Page id").

use super::{PageId, PageKind};

const SLOT_BITS: u32 = 40;
const BLOCKS_BITS: u32 = 16;
const TAG_BITS: u32 = 7;
const KIND_SHIFT: u32 = 63;

/// Largest slot index a page id can name.
pub(crate) const MAX_SLOT: u64 = (1 << SLOT_BITS) - 1;
/// Most blocks one page can occupy.
pub(crate) const MAX_BLOCKS: u32 = 1 << BLOCKS_BITS;
/// Generation tags wrap at this value.
pub(crate) const TAG_MODULUS: u64 = 1 << TAG_BITS;

impl PageId {
    /// Packs the fields. `blocks` in `1..=MAX_BLOCKS`, `slot <= MAX_SLOT`.
    pub(crate) fn new(kind: PageKind, slot: u64, blocks: u32, generation: u64) -> PageId {
        debug_assert!(slot <= MAX_SLOT, "slot {slot} out of range");
        debug_assert!((1..=MAX_BLOCKS).contains(&blocks), "{blocks} blocks");
        let kind_bit = match kind {
            PageKind::Node => 0,
            PageKind::Leaf => 1u64 << KIND_SHIFT,
        };
        let tag = generation % TAG_MODULUS;
        PageId::from_raw(
            kind_bit | tag << (SLOT_BITS + BLOCKS_BITS) | u64::from(blocks - 1) << SLOT_BITS | slot,
        )
    }

    /// Node or leaf: which page file holds it.
    pub(crate) fn kind(self) -> PageKind {
        if self.to_raw() >> KIND_SHIFT == 1 {
            PageKind::Leaf
        } else {
            PageKind::Node
        }
    }

    /// Slot index in the kind's page file.
    pub(crate) fn slot(self) -> u64 {
        self.to_raw() & MAX_SLOT
    }

    /// Number of blocks the page occupies.
    pub(crate) fn blocks(self) -> u32 {
        ((self.to_raw() >> SLOT_BITS) & u64::from(MAX_BLOCKS - 1)) as u32 + 1
    }

    /// Generation tag the page was written with.
    pub(crate) fn tag(self) -> u64 {
        (self.to_raw() >> (SLOT_BITS + BLOCKS_BITS)) & (TAG_MODULUS - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        for (kind, slot, blocks, generation) in [
            (PageKind::Node, 0, 1, 0),
            (PageKind::Leaf, MAX_SLOT, MAX_BLOCKS, 127),
            (PageKind::Leaf, 12345, 512, 1000),
            (PageKind::Node, 7, 16, 128),
        ] {
            let id = PageId::new(kind, slot, blocks, generation);
            assert_eq!(id.kind(), kind);
            assert_eq!(id.slot(), slot);
            assert_eq!(id.blocks(), blocks);
            assert_eq!(id.tag(), generation % TAG_MODULUS);
            assert_eq!(PageId::from_raw(id.to_raw()), id);
        }
    }

    #[test]
    fn different_generations_give_different_ids_for_one_slot() {
        let a = PageId::new(PageKind::Leaf, 9, 3, 4);
        let b = PageId::new(PageKind::Leaf, 9, 3, 5);
        assert_ne!(a, b);
        assert_eq!((a.slot(), a.blocks()), (b.slot(), b.blocks()));
    }
}
