//! The superblock: two alternating checksummed slots naming the committed
//! root and where WAL replay starts (layout in `docs/format.md`,
//! "Superblock"). Writing a slot and syncing it is a checkpoint's commit
//! point.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Coverage;
use crate::error::DecodeError;
use crate::io::{AlignedBuf, File, FileSystem, OpenOptions, read_exact_at};
use crate::page::{PageId, PageStore, PageStoreOptions};
use crate::wal::WalPosition;
use crate::{Error, Result};

/// File name of the superblock in the database directory.
pub(crate) const SUPERBLOCK_FILE_NAME: &str = "SUPERBLOCK";
/// Bytes per slot; 4 KiB keeps each slot one aligned `O_DIRECT` write.
pub(crate) const SLOT_BYTES: usize = 4096;
const MAGIC: &[u8; 8] = b"TKVSUPER";
const FORMAT_VERSION: u32 = 1;
const NO_ROOT: u64 = u64::MAX;
const CHECKED_BYTES: usize = 72;
/// Where a slot keeps the fields its decode errors name.
const VERSION_AT: usize = 8;
const GENERATION_AT: usize = 16;
const COVERED_SEQ_AT: usize = 48;

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

impl SuperblockRecord {
    /// What the checkpoint that wrote this record covers.
    pub fn coverage(&self) -> Coverage {
        Coverage {
            covered_seq: self.covered_seq,
            wal_replay_from: self.wal_replay_from,
        }
    }
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

    /// The slot stored at `slot_index` (0 or 1), or why it is not valid:
    /// an error's offset is within the slot, at the field that failed, or
    /// at 0 for a checksum mismatch (the checksum covers the slot's fields).
    pub fn decode(bytes: &[u8], slot_index: u64) -> Result<Slot, DecodeError> {
        if bytes.len() < SLOT_BYTES {
            return Err(DecodeError::new(
                bytes.len(),
                format!("slot {slot_index} is cut short"),
            ));
        }
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8"));
        if &bytes[..8] != MAGIC {
            return Err(DecodeError::new(
                0,
                format!("slot {slot_index} has no magic"),
            ));
        }
        let crc = u32::from_le_bytes(bytes[72..76].try_into().expect("4"));
        if crc != crc32c::crc32c(&bytes[..CHECKED_BYTES]) {
            return Err(DecodeError::new(
                0,
                format!("slot {slot_index} fails its checksum"),
            ));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4"));
        if version != FORMAT_VERSION {
            return Err(DecodeError::new(
                VERSION_AT,
                format!("slot {slot_index} has format version {version}"),
            ));
        }
        let generation = u64_at(GENERATION_AT);
        if generation % 2 != slot_index {
            return Err(DecodeError::new(
                GENERATION_AT,
                format!("slot {slot_index} holds generation {generation} of the other slot"),
            ));
        }
        // Counters this large take longer than a lifetime to reach: a slot
        // naming one is crafted or decayed, and `+ 1` on it would overflow.
        let covered_seq = u64_at(COVERED_SEQ_AT);
        for (at, value) in [(GENERATION_AT, generation), (COVERED_SEQ_AT, covered_seq)] {
            if value > MAX_PLAUSIBLE_COUNTER {
                return Err(DecodeError::new(
                    at,
                    format!(
                        "slot {slot_index} holds generation {generation} and sequence number \
                         {covered_seq}, beyond {MAX_PLAUSIBLE_COUNTER}"
                    ),
                ));
            }
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SuperblockState {
    /// The valid slot with the higher generation; `None` when neither is
    /// valid (the caller decides whether that is an interrupted creation).
    pub newest: Option<Slot>,
    /// Some slot holds bytes that do not validate: a torn commit, or decay.
    pub damaged: bool,
    /// Why each slot holding bytes failed to validate, at an offset of
    /// the file.
    pub failures: Vec<DecodeError>,
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
        failures: Vec::new(),
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
            Err(e) if bytes.iter().any(|&b| b != 0) => {
                state.damaged = true;
                state.failures.push(e.within((i * SLOT_BYTES) as u64));
            }
            // Never written.
            Err(_) => {}
        }
    }
    Ok(state)
}

/// The superblock file of an open store.
#[derive(Debug)]
pub(crate) struct Superblock {
    file: Arc<dyn File>,
    path: PathBuf,
    node_size_bytes: u64,
    leaf_size_bytes: u64,
}

impl Superblock {
    /// Opens (creating it when missing) the superblock file in `dir`.
    pub fn open(fs: &dyn FileSystem, dir: &Path, direct_io: bool) -> Result<Superblock> {
        let path = dir.join(SUPERBLOCK_FILE_NAME);
        let file = fs.open(
            &path,
            OpenOptions::read_write_create().with_direct(direct_io),
        )?;
        Ok(Superblock {
            file,
            path,
            node_size_bytes: 0,
            leaf_size_bytes: 0,
        })
    }

    /// The newest committed slot, made durable, and whether some slot held
    /// bytes that failed to validate. A file without a valid slot is an
    /// interrupted creation while `pages` holds nothing: generation 0 (the
    /// empty tree) is then written; otherwise it is corruption. Page sizes
    /// that differ from `options` are `InvalidOptions`.
    pub fn recover(
        &mut self,
        fs: &dyn FileSystem,
        dir: &Path,
        pages: &PageStore,
        options: &PageStoreOptions,
    ) -> Result<(Slot, bool)> {
        let state = read_newest(&*self.file)?;
        let slot = match state.newest {
            Some(slot) => {
                // The newest slot may be one whose sync failed (read back
                // from the OS's cache, never durable): write it again and
                // sync it before freeing the pages only the older slot
                // reaches, so that a power cut cannot fall back to a root
                // whose pages this handle reuses.
                self.write(&slot)?;
                slot
            }
            None => self.initialise(fs, dir, pages, options, &state.failures)?,
        };
        if (slot.node_size_bytes, slot.leaf_size_bytes)
            != (options.node_size_bytes, options.leaf_size_bytes)
        {
            return Err(Error::InvalidOptions(format!(
                "the database was created with node_size_bytes = {} and leaf_size_bytes = {}; \
                 options ask for {} and {}",
                slot.node_size_bytes,
                slot.leaf_size_bytes,
                options.node_size_bytes,
                options.leaf_size_bytes
            )));
        }
        self.node_size_bytes = slot.node_size_bytes;
        self.leaf_size_bytes = slot.leaf_size_bytes;
        Ok((slot, state.damaged))
    }

    /// Writes generation 0 (empty tree) into a new store, or one whose
    /// creation was interrupted before its first slot was durable:
    /// recognised by empty page files, so a damaged superblock over real
    /// data is never overwritten.
    /// `failures` are why the slots holding bytes failed to validate: the
    /// error names the first one's offset, and gives every reason.
    fn initialise(
        &self,
        fs: &dyn FileSystem,
        dir: &Path,
        pages: &PageStore,
        options: &PageStoreOptions,
        failures: &[DecodeError],
    ) -> Result<Slot> {
        if !pages.is_empty()? {
            let reasons: Vec<String> = failures.iter().map(|e| e.what.to_string()).collect();
            return Err(Error::corruption(
                &self.path,
                failures.first().map_or(0, |e| e.offset),
                format!(
                    "neither superblock slot is valid, and the page files hold data: {}",
                    if reasons.is_empty() {
                        "both slots are empty".to_string()
                    } else {
                        reasons.join("; ")
                    }
                ),
            ));
        }
        let slot = Slot {
            generation: 0,
            node_size_bytes: options.node_size_bytes,
            leaf_size_bytes: options.leaf_size_bytes,
            record: SuperblockRecord::default(),
        };
        self.write(&slot)?;
        pages.sync_files()?;
        fs.sync_dir(dir)?;
        Ok(slot)
    }

    /// Writes `slot` into its place (the one the other generation does not
    /// use) and syncs it.
    pub fn write(&self, slot: &Slot) -> io::Result<()> {
        self.file
            .write_at(&slot.encode(), Slot::offset(slot.generation))?;
        self.file.sync_data()
    }

    /// The page sizes the store was created with.
    pub fn page_sizes(&self) -> (u64, u64) {
        (self.node_size_bytes, self.leaf_size_bytes)
    }
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

    /// A slot's errors are at the field that failed, or at 0 for a failed
    /// magic or checksum.
    #[test]
    fn errors_name_the_field_that_failed() {
        let crafted = |at: usize, value: u64| {
            let mut bytes = slot(3).encode().to_vec();
            bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
            let crc = crc32c::crc32c(&bytes[..CHECKED_BYTES]);
            bytes[CHECKED_BYTES..CHECKED_BYTES + 4].copy_from_slice(&crc.to_le_bytes());
            Slot::decode(&bytes, 1).unwrap_err().offset
        };
        assert_eq!(crafted(VERSION_AT, 2), VERSION_AT as u64);
        assert_eq!(crafted(GENERATION_AT, 4), GENERATION_AT as u64);
        assert_eq!(crafted(COVERED_SEQ_AT, u64::MAX), COVERED_SEQ_AT as u64);
        let mut bytes = slot(3).encode().to_vec();
        bytes[40] ^= 1;
        assert_eq!(Slot::decode(&bytes, 1).unwrap_err().offset, 0, "checksum");
        assert_eq!(Slot::decode(&bytes[..100], 1).unwrap_err().offset, 100);
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
