//! The superblock: two alternating checksummed slots naming the committed
//! root (layout in `docs/format.md`, "Superblock").

use super::PageId;
use crate::Result;
use crate::io::{AlignedBuf, File, read_exact_at};

/// File name of the superblock in the database directory.
pub(crate) const SUPERBLOCK_FILE_NAME: &str = "SUPERBLOCK";
/// Bytes per slot; 4 KiB keeps each slot one aligned `O_DIRECT` write.
pub(crate) const SLOT_BYTES: usize = 4096;
const MAGIC: &[u8; 8] = b"TKVSUPER";
const FORMAT_VERSION: u32 = 1;
const NO_ROOT: u64 = u64::MAX;
const CHECKED_BYTES: usize = 72;

/// Where WAL replay starts after this checkpoint. The WAL defines the
/// meaning; the page store only keeps it durable with the root.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) struct WalPosition {
    pub segment_id: u64,
    pub offset_bytes: u64,
}

/// What one commit makes durable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) struct SuperblockRecord {
    /// Root page of the tree; `None` for an empty tree.
    pub root: Option<PageId>,
    /// Last sequence number whose write the tree contains.
    pub covered_seq: u64,
    /// Where WAL replay starts.
    pub wal_replay_from: WalPosition,
}

/// A decoded, valid slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub generation: u64,
    pub node_size_bytes: u64,
    pub leaf_size_bytes: u64,
    pub record: SuperblockRecord,
}

impl Slot {
    /// Byte offset of the slot this generation is written to.
    pub fn offset(generation: u64) -> u64 {
        (generation % 2) * SLOT_BYTES as u64
    }

    /// The slot's bytes, padded to a full aligned slot.
    pub fn encode(&self) -> AlignedBuf {
        let mut buf = AlignedBuf::zeroed(SLOT_BYTES);
        let root = self.record.root.map_or(NO_ROOT, PageId::to_raw);
        buf[..8].copy_from_slice(MAGIC);
        buf[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        let fields = [
            self.generation,
            self.node_size_bytes,
            self.leaf_size_bytes,
            root,
            self.record.covered_seq,
            self.record.wal_replay_from.segment_id,
            self.record.wal_replay_from.offset_bytes,
        ];
        for (i, v) in fields.iter().enumerate() {
            buf[16 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        let crc = crc32c::crc32c(&buf[..CHECKED_BYTES]);
        buf[CHECKED_BYTES..CHECKED_BYTES + 4].copy_from_slice(&crc.to_le_bytes());
        buf
    }

    /// The slot stored at `slot_index` (0 or 1), or why it is not valid.
    pub fn decode(bytes: &[u8], slot_index: u64) -> Result<Slot, String> {
        if bytes.len() < SLOT_BYTES {
            return Err(format!("slot {slot_index} is cut short"));
        }
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8"));
        let crc = u32::from_le_bytes(bytes[72..76].try_into().expect("4"));
        if &bytes[..8] != MAGIC || crc != crc32c::crc32c(&bytes[..CHECKED_BYTES]) {
            return Err(format!("slot {slot_index} fails its checksum"));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4"));
        if version != FORMAT_VERSION {
            return Err(format!("slot {slot_index} has format version {version}"));
        }
        let generation = u64_at(16);
        if generation % 2 != slot_index {
            return Err(format!(
                "slot {slot_index} holds generation {generation} of the other slot"
            ));
        }
        // Counters this large take longer than a lifetime to reach: a slot
        // naming one is crafted or decayed, and `+ 1` on it would overflow.
        let covered_seq = u64_at(48);
        if generation > MAX_PLAUSIBLE_COUNTER || covered_seq > MAX_PLAUSIBLE_COUNTER {
            return Err(format!(
                "slot {slot_index} holds generation {generation} and sequence number {covered_seq}, beyond {MAX_PLAUSIBLE_COUNTER}"
            ));
        }
        let root = u64_at(40);
        Ok(Slot {
            generation,
            node_size_bytes: u64_at(24),
            leaf_size_bytes: u64_at(32),
            record: SuperblockRecord {
                root: (root != NO_ROOT).then_some(PageId::from_raw(root)),
                covered_seq,
                wal_replay_from: WalPosition {
                    segment_id: u64_at(56),
                    offset_bytes: u64_at(64),
                },
            },
        })
    }
}

/// The largest generation or covered sequence number a valid slot holds.
pub(crate) const MAX_PLAUSIBLE_COUNTER: u64 = 1 << 62;

/// What the superblock file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SuperblockState {
    /// The valid slot with the higher generation; `None` when neither is
    /// valid (the caller decides whether that is an interrupted creation).
    pub newest: Option<Slot>,
    /// Some slot holds bytes that do not validate: a torn commit, or decay.
    pub damaged: bool,
}

/// Reads and decodes both slots of the superblock file.
pub(crate) fn read_newest(file: &dyn File) -> Result<SuperblockState> {
    let mut buf = AlignedBuf::zeroed(2 * SLOT_BYTES);
    let len = file.len()?.min(buf.len() as u64) as usize;
    // Read whole aligned slots (O_DIRECT); bytes past the end stay zero.
    let readable = len / SLOT_BYTES * SLOT_BYTES;
    read_exact_at(file, &mut buf[..readable], 0)?;
    let mut state = SuperblockState {
        newest: None,
        damaged: false,
    };
    // A slot cut short by the file's end is damage too (a cut file, or a
    // torn first write of slot 1, which was never durable): never clean up
    // pages a newer root it held may name.
    state.damaged = !len.is_multiple_of(SLOT_BYTES);
    for (i, bytes) in buf.chunks_exact(SLOT_BYTES).enumerate() {
        match Slot::decode(bytes, i as u64) {
            // Parity makes the two generations differ: the newest is unique.
            Ok(slot) if state.newest.is_none_or(|n| n.generation < slot.generation) => {
                state.newest = Some(slot);
            }
            Ok(_) => {}
            Err(_) => state.damaged |= bytes.iter().any(|&b| b != 0),
        }
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FaultFs, FileSystem, OpenOptions};
    use std::path::Path;

    fn slot(generation: u64) -> Slot {
        Slot {
            generation,
            node_size_bytes: 4096,
            leaf_size_bytes: 1 << 21,
            record: SuperblockRecord {
                root: (generation > 0).then(|| PageId::from_raw(generation * 3)),
                covered_seq: generation * 100,
                wal_replay_from: WalPosition {
                    segment_id: generation,
                    offset_bytes: 32,
                },
            },
        }
    }

    #[test]
    fn slots_round_trip_and_reject_damage() {
        for g in [0, 1, 2, 99] {
            let s = slot(g);
            let bytes = s.encode();
            assert_eq!(Slot::decode(&bytes, g % 2).unwrap(), s);
            assert!(Slot::decode(&bytes, (g + 1) % 2).is_err());
            for bit in (0..CHECKED_BYTES * 8 + 32).step_by(7) {
                let mut bad = bytes.to_vec();
                bad[bit / 8] ^= 1 << (bit % 8);
                assert!(Slot::decode(&bad, g % 2).is_err(), "bit {bit}");
            }
        }
    }

    #[test]
    fn newest_valid_slot_wins() {
        let fs = FaultFs::new();
        fs.create_dir_all(Path::new("/d")).unwrap();
        let path = Path::new("/d/SUPERBLOCK");
        let f = fs.open(path, OpenOptions::read_write_create()).unwrap();
        let read = |f: &dyn File| {
            let state = read_newest(f).unwrap();
            (state.newest, state.damaged)
        };
        assert_eq!(read(&*f), (None, false));
        f.write_at(&slot(4).encode(), Slot::offset(4)).unwrap();
        assert_eq!(read(&*f), (Some(slot(4)), false));
        f.write_at(&slot(5).encode(), Slot::offset(5)).unwrap();
        assert_eq!(read(&*f), (Some(slot(5)), false));
        fs.flip_bit(path, 4096 * 8 + 20).unwrap();
        assert_eq!(read(&*f), (Some(slot(4)), true));
        f.write_at(&slot(4).encode(), Slot::offset(5)).unwrap();
        assert_eq!(read(&*f), (Some(slot(4)), true));
    }
}
