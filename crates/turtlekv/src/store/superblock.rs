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
pub(crate) const MAGIC: &[u8; 8] = b"TKVSUPER";
/// The version this build writes; version 1 is still read.
const FORMAT_VERSION: u32 = 2;
const NO_ROOT: u64 = u64::MAX;
/// Bytes under the checksum, per version (the checksum follows them).
const CHECKED_BYTES_V1: usize = 72;
const CHECKED_BYTES_V2: usize = 88;
/// Flag bit: the database got its identity at an open after an earlier
/// build had written it (`docs/format.md`, "Database identity").
const FLAG_UPGRADED: u32 = 1;
/// Flag bit: every stored key begins with its keyspace's tag (`docs/format.md`,
/// "Keyspaces"); databases created by earlier builds store bare keys.
const FLAG_KEYSPACES: u32 = 2;
const KNOWN_FLAGS: u32 = FLAG_UPGRADED | FLAG_KEYSPACES;
#[cfg(test)]
thread_local! {
    /// Makes databases this thread creates store bare keys, as earlier
    /// builds did (the compatibility tests' old databases).
    pub(crate) static CREATE_BARE_KEYS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether a new database stores keys behind keyspace tags: always,
/// except for the old databases tests make.
fn creates_keyspaces() -> bool {
    #[cfg(test)]
    if CREATE_BARE_KEYS.get() {
        return false;
    }
    true
}

/// Where a slot keeps the fields its decode errors name.
const VERSION_AT: usize = 8;
const FLAGS_AT: usize = 12;
const GENERATION_AT: usize = 16;
const COVERED_SEQ_AT: usize = 48;
const IDENTITY_AT: usize = 72;
const WAL_FLOOR_AT: usize = 80;

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

/// The database's identity, as the superblock records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Identity {
    /// Random and not zero, fixed at creation.
    pub id: u64,
    /// Assigned at an open after an earlier build had written the
    /// database: WAL segments without identity may precede the first one
    /// with it, and page blocks without a seeded checksum may remain.
    pub upgraded: bool,
    /// Stored keys carry their keyspace's tag: set at creation by builds
    /// that have keyspaces, never later (an earlier build's bare keys
    /// stay as they are, in the default keyspace).
    pub keyspaces: bool,
}

/// A decoded, valid slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub generation: u64,
    pub node_size_bytes: u64,
    pub leaf_size_bytes: u64,
    /// `None` in a version-1 slot, which names none.
    pub identity: Option<Identity>,
    /// A WAL segment with this id or a higher one must exist (0: none
    /// named, as in a version-1 slot).
    pub wal_floor: u64,
    pub record: SuperblockRecord,
}

impl Slot {
    /// Byte offset of the slot this generation is written to.
    pub fn offset(generation: u64) -> u64 {
        (generation % 2) * SLOT_BYTES as u64
    }

    /// The slot's bytes in the current version, padded to a full aligned
    /// slot. Only a slot with an identity has a current encoding.
    pub fn encode(&self) -> AlignedBuf {
        self.encode_version(FORMAT_VERSION)
    }

    /// The slot's bytes in format `version` (1 or 2): version 1 rewrites
    /// a slot of an earlier build as it was, and builds such slots in
    /// tests.
    pub fn encode_version(&self, version: u32) -> AlignedBuf {
        let mut buf = AlignedBuf::zeroed(SLOT_BYTES);
        let root = self.record.root.map_or(NO_ROOT, PageId::to_raw);
        buf[..8].copy_from_slice(MAGIC);
        buf[8..12].copy_from_slice(&version.to_le_bytes());
        let mut fields = vec![
            self.generation,
            self.node_size_bytes,
            self.leaf_size_bytes,
            root,
            self.record.covered_seq,
            self.record.wal_replay_from.segment_id,
            self.record.wal_replay_from.offset_bytes,
        ];
        let checked = if version == 1 {
            CHECKED_BYTES_V1
        } else {
            let identity = self.identity.expect("a version-2 slot names its identity");
            let flags = if identity.upgraded { FLAG_UPGRADED } else { 0 }
                | if identity.keyspaces {
                    FLAG_KEYSPACES
                } else {
                    0
                };
            buf[12..16].copy_from_slice(&flags.to_le_bytes());
            fields.extend([identity.id, self.wal_floor]);
            CHECKED_BYTES_V2
        };
        for (i, v) in fields.iter().enumerate() {
            buf[16 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        let crc = crc32c::crc32c(&buf[..checked]);
        buf[checked..checked + 4].copy_from_slice(&crc.to_le_bytes());
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
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4"));
        if &bytes[..8] != MAGIC {
            return Err(DecodeError::new(
                0,
                format!("slot {slot_index} has no magic"),
            ));
        }
        // The version picks where the checksum is; a version the build
        // does not know fails like damage, whatever its checksum.
        let version = u32_at(VERSION_AT);
        let checked = if version == 1 {
            CHECKED_BYTES_V1
        } else {
            CHECKED_BYTES_V2
        };
        if u32_at(checked) != crc32c::crc32c(&bytes[..checked]) {
            return Err(DecodeError::new(
                0,
                format!("slot {slot_index} fails its checksum"),
            ));
        }
        if !(1..=FORMAT_VERSION).contains(&version) {
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
        let (identity, wal_floor) = if version == 1 {
            (None, 0)
        } else {
            let flags = u32_at(FLAGS_AT);
            if flags & !KNOWN_FLAGS != 0 {
                return Err(DecodeError::new(
                    FLAGS_AT,
                    format!("slot {slot_index} holds unknown flags {flags:#x}"),
                ));
            }
            let id = u64_at(IDENTITY_AT);
            if id == 0 {
                return Err(DecodeError::new(
                    IDENTITY_AT,
                    format!("slot {slot_index} names no database identity"),
                ));
            }
            let identity = Identity {
                id,
                upgraded: flags & FLAG_UPGRADED != 0,
                keyspaces: flags & FLAG_KEYSPACES != 0,
            };
            (Some(identity), u64_at(WAL_FLOOR_AT))
        };
        let root = u64_at(40);
        Ok(Slot {
            generation,
            node_size_bytes: u64_at(24),
            leaf_size_bytes: u64_at(32),
            identity,
            wal_floor,
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

    /// The format version this slot was read in: 1 for a slot without
    /// identity.
    pub fn version(&self) -> u32 {
        if self.identity.is_some() {
            FORMAT_VERSION
        } else {
            1
        }
    }
}

/// The largest generation or covered sequence number a valid slot holds.
pub(crate) const MAX_PLAUSIBLE_COUNTER: u64 = 1 << 62;

/// What one slot of the superblock file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SlotState {
    Valid(Slot),
    /// Zeros only: never written, or cut off by the file's end at a slot
    /// boundary.
    Empty,
    /// Bytes that fail to validate (a torn commit, or decay), and why, at
    /// an offset of the file.
    Damaged(DecodeError),
}

/// What the superblock file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SuperblockState {
    /// The valid slot with the higher generation; `None` when neither is
    /// valid (the caller decides whether that is an interrupted creation).
    pub newest: Option<Slot>,
    /// Some slot holds bytes that do not validate: a torn commit, or decay.
    pub damaged: bool,
    /// Each slot, by index.
    pub slots: [SlotState; 2],
}

impl SuperblockState {
    /// The slot that does not hold the newest generation.
    pub fn other_slot(&self) -> Option<(u64, &SlotState)> {
        let newest = self.newest?;
        let index = (newest.generation + 1) % 2;
        Some((index, &self.slots[index as usize]))
    }

    /// Why each slot holding bytes failed to validate, at offsets of the
    /// file.
    pub fn failures(&self) -> Vec<DecodeError> {
        self.slots
            .iter()
            .filter_map(|slot| match slot {
                SlotState::Damaged(e) => Some(e.clone()),
                _ => None,
            })
            .collect()
    }
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
        slots: [SlotState::Empty, SlotState::Empty],
    };
    for (i, bytes) in buf.chunks_exact(SLOT_BYTES).enumerate() {
        state.slots[i] = match Slot::decode(bytes, i as u64) {
            Ok(slot) => {
                // Parity makes the two generations differ: the newest is
                // unique.
                if state.newest.is_none_or(|n| n.generation < slot.generation) {
                    state.newest = Some(slot);
                }
                SlotState::Valid(slot)
            }
            Err(_) if bytes.iter().all(|&b| b == 0) => SlotState::Empty,
            Err(e) => {
                state.damaged = true;
                SlotState::Damaged(e.within((i * SLOT_BYTES) as u64))
            }
        };
    }
    // A slot cut short by the file's end is damage too (a cut file, or a
    // torn first write of slot 1, which was never durable): never clean up
    // pages a newer root it held may name.
    if !len.is_multiple_of(SLOT_BYTES) {
        state.damaged = true;
        let cut = len / SLOT_BYTES;
        if state.slots[cut] == SlotState::Empty {
            state.slots[cut] =
                SlotState::Damaged(DecodeError::new(len, format!("slot {cut} is cut short")));
        }
    }
    Ok(state)
}

/// Checks what a superblock file holds while its database is open: both
/// slots valid, consecutive generations, one identity and one page size
/// each (`docs/format.md`, "Superblock", "Checking both slots"). The
/// newest generation 0 alone may leave the other slot empty.
pub(crate) fn check_state(state: &SuperblockState, path: &Path) -> Result<Slot> {
    let corrupt =
        |index: u64, reason: String| Error::corruption(path, index * SLOT_BYTES as u64, reason);
    let Some(newest) = state.newest else {
        return Err(corrupt(0, "neither superblock slot is valid".into()));
    };
    let (other_index, other) = state.other_slot().expect("a newest slot");
    match other {
        SlotState::Valid(older) => {
            if older.generation + 1 != newest.generation {
                return Err(corrupt(
                    other_index,
                    format!(
                        "slot {other_index} holds generation {}, not {} before the newest",
                        older.generation,
                        newest.generation.wrapping_sub(1)
                    ),
                ));
            }
            let same_identity = match (older.identity, newest.identity) {
                (Some(a), Some(b)) => a.id == b.id,
                // An earlier build's slot beside the commit that upgraded it.
                (None, Some(b)) => b.upgraded,
                _ => false,
            };
            if !same_identity
                || (older.node_size_bytes, older.leaf_size_bytes)
                    != (newest.node_size_bytes, newest.leaf_size_bytes)
            {
                return Err(corrupt(
                    other_index,
                    format!(
                        "slot {other_index} disagrees with the newest slot on the database's \
                         identity or page sizes"
                    ),
                ));
            }
        }
        SlotState::Empty if newest.generation == 0 => {}
        SlotState::Empty => {
            return Err(corrupt(
                other_index,
                format!(
                    "slot {other_index} is zeroed, but generation {} was committed after it was \
                     written",
                    newest.generation
                ),
            ));
        }
        SlotState::Damaged(e) => return Err(e.clone().into_corruption(path, 0)),
    }
    Ok(newest)
}

/// A slot that failed to validate at open: reported with the WAL's
/// verdict when the WAL does not reach back to the valid slot's
/// checkpoint, and counted in the statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotDamage {
    pub path: PathBuf,
    pub index: u64,
    pub reason: String,
}

impl SlotDamage {
    /// The error to report when the WAL does not reach back to the valid
    /// slot's checkpoint: the damaged slot held a durable commit.
    pub fn with_wal_error(&self, wal: &Error) -> Error {
        Error::corruption(
            &self.path,
            self.index * SLOT_BYTES as u64,
            format!(
                "{}, and the WAL does not reach back to the other slot's checkpoint ({wal}): \
                 the damaged slot held a durable commit",
                self.reason
            ),
        )
    }
}

/// The superblock file of an open store.
#[derive(Debug)]
pub(crate) struct Superblock {
    file: Arc<dyn File>,
    path: PathBuf,
    node_size_bytes: u64,
    leaf_size_bytes: u64,
}

/// What `Superblock::recover` found.
#[derive(Debug)]
pub(crate) struct Recovered {
    /// The newest committed slot, with the identity the database has or
    /// gets at this open (a version-1 slot's is not yet durable).
    pub slot: Slot,
    /// Some slot held bytes that failed to validate (`damage` says which,
    /// unless the file's end cut it).
    pub damaged: bool,
    pub damage: Option<SlotDamage>,
}

impl Superblock {
    /// Opens (creating it when missing) the superblock file in `dir`.
    pub fn open(fs: &dyn FileSystem, dir: &Path, direct_io: bool) -> Result<Superblock> {
        let path = dir.join(SUPERBLOCK_FILE_NAME);
        let file = fs
            .open(
                &path,
                OpenOptions::read_write_create().with_direct(direct_io),
            )
            .map_err(|e| crate::Error::opening(e, direct_io, &path))?;
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
    /// empty tree) is then written, under `legacy_identity` (the log's, or
    /// a new one); otherwise it is corruption. Page sizes that differ from `options` are
    /// `InvalidOptions`. A version-1 slot (an earlier build's) gets
    /// `legacy_identity` in the slot returned; the next commit makes it
    /// durable.
    pub fn recover(
        &mut self,
        fs: &dyn FileSystem,
        dir: &Path,
        pages: &PageStore,
        options: &PageStoreOptions,
        legacy_identity: &dyn Fn() -> Result<u64>,
    ) -> Result<Recovered> {
        let state = read_newest(&*self.file)?;
        let mut slot = match state.newest {
            Some(slot) => {
                // The newest slot may be one whose sync failed (read back
                // from the OS's cache, never durable): write it again, in
                // the version it was read in, and sync it before freeing
                // the pages only the older slot reaches, so that a power
                // cut cannot fall back to a root whose pages this handle
                // reuses.
                self.write_version(&slot, slot.version())?;
                slot
            }
            None => self.initialise(
                fs,
                dir,
                pages,
                options,
                legacy_identity()?,
                &state.failures(),
            )?,
        };
        if let Some((index, SlotState::Empty)) = state.other_slot()
            && slot.generation > 0
        {
            // Generation 1 and later were written after both slots had
            // been: a crash tears a slot, it never zeroes one.
            return Err(Error::corruption(
                &self.path,
                index * SLOT_BYTES as u64,
                format!(
                    "slot {index} is zeroed, but generation {} was committed after it was written",
                    slot.generation
                ),
            ));
        }
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
        if slot.identity.is_none() {
            slot.identity = Some(Identity {
                id: legacy_identity()?,
                upgraded: true,
                keyspaces: false,
            });
        }
        self.node_size_bytes = slot.node_size_bytes;
        self.leaf_size_bytes = slot.leaf_size_bytes;
        let damage = state.slots.iter().enumerate().find_map(|(i, s)| match s {
            SlotState::Damaged(e) => Some(SlotDamage {
                path: self.path.clone(),
                index: i as u64,
                reason: format!("superblock {}", e.what),
            }),
            _ => None,
        });
        Ok(Recovered {
            slot,
            damaged: state.damaged,
            damage,
        })
    }

    /// Writes generation 0 (empty tree) into a new store, or one whose
    /// creation was interrupted before its first slot was durable:
    /// recognised by empty page files, so a damaged superblock over real
    /// data is never overwritten. `id` is the identity the log already
    /// names, if it names one, so that its records stay readable, else a
    /// new one. `failures` are why the slots holding bytes failed to
    /// validate: the error names the first one's offset, and gives every
    /// reason.
    fn initialise(
        &self,
        fs: &dyn FileSystem,
        dir: &Path,
        pages: &PageStore,
        options: &PageStoreOptions,
        id: u64,
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
            identity: Some(Identity {
                id,
                upgraded: false,
                keyspaces: creates_keyspaces(),
            }),
            wal_floor: 0,
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
        self.write_version(slot, FORMAT_VERSION)
    }

    fn write_version(&self, slot: &Slot, version: u32) -> io::Result<()> {
        self.file
            .write_at(&slot.encode_version(version), Slot::offset(slot.generation))?;
        self.file.sync_data()
    }

    /// Reads both slots back and checks them (`Db::check`); the caller
    /// keeps commits out meanwhile, so that no slot is read half written.
    pub fn check(&self) -> Result<Slot> {
        check_state(&read_newest(&*self.file)?, &self.path)
    }

    /// The superblock file's path.
    pub fn path(&self) -> &Path {
        &self.path
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
            identity: Some(Identity {
                id: 0x5eed_0000_0000_0001 + generation,
                upgraded: generation.is_multiple_of(3),
                keyspaces: generation.is_multiple_of(2),
            }),
            wal_floor: generation + 7,
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
            for bit in (0..CHECKED_BYTES_V2 * 8 + 32).step_by(7) {
                let mut bad = bytes.to_vec();
                bad[bit / 8] ^= 1 << (bit % 8);
                assert!(Slot::decode(&bad, g % 2).is_err(), "bit {bit}");
            }
        }
    }

    /// An earlier build's slot (version 1) is read without identity and
    /// floor, and rewritten as it was.
    #[test]
    fn version_1_slots_round_trip_without_identity() {
        for g in [0, 1, 2, 99] {
            let s = Slot {
                identity: None,
                wal_floor: 0,
                ..slot(g)
            };
            let bytes = s.encode_version(1);
            assert_eq!(&bytes[8..12], &1u32.to_le_bytes());
            assert!(bytes[76..].iter().all(|&b| b == 0));
            let back = Slot::decode(&bytes, g % 2).unwrap();
            assert_eq!(back, s);
            assert_eq!(back.version(), 1);
            for bit in (0..CHECKED_BYTES_V1 * 8 + 32).step_by(7) {
                let mut bad = bytes.to_vec();
                bad[bit / 8] ^= 1 << (bit % 8);
                assert!(Slot::decode(&bad, g % 2).is_err(), "bit {bit}");
            }
        }
        // A version-2 slot must name an identity and no unknown flag.
        for (offset, value) in [(72, 0u64), (12, 4)] {
            let mut bytes = slot(2).encode().to_vec();
            bytes[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
            let crc = crc32c::crc32c(&bytes[..CHECKED_BYTES_V2]);
            bytes[88..92].copy_from_slice(&crc.to_le_bytes());
            assert!(Slot::decode(&bytes, 0).is_err(), "{offset}");
        }
    }

    /// A slot's errors are at the field that failed, or at 0 for a failed
    /// magic or checksum.
    #[test]
    fn errors_name_the_field_that_failed() {
        let crafted = |at: usize, value: u64| {
            let mut bytes = slot(3).encode().to_vec();
            bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
            let crc = crc32c::crc32c(&bytes[..CHECKED_BYTES_V2]);
            bytes[CHECKED_BYTES_V2..CHECKED_BYTES_V2 + 4].copy_from_slice(&crc.to_le_bytes());
            Slot::decode(&bytes, 1).unwrap_err().offset
        };
        // Version 3, flags 0.
        assert_eq!(crafted(VERSION_AT, 3), VERSION_AT as u64);
        // Version 2, an unknown flag.
        assert_eq!(crafted(VERSION_AT, 2 | 4 << 32), FLAGS_AT as u64);
        assert_eq!(crafted(IDENTITY_AT, 0), IDENTITY_AT as u64);
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
        let check = |f: &dyn File| check_state(&read_newest(f).unwrap(), path);
        assert_eq!(read(&*f), (None, false));
        f.write_at(&slot(4).encode(), Slot::offset(4)).unwrap();
        assert_eq!(read(&*f), (Some(slot(4)), false));
        // Generation 4 with the other slot zeroed: never a crash's work.
        assert!(matches!(
            check(&*f),
            Err(Error::Corruption { offset: 4096, .. })
        ));
        let same_identity = |g| Slot {
            identity: slot(4).identity,
            ..slot(g)
        };
        f.write_at(&same_identity(5).encode(), Slot::offset(5))
            .unwrap();
        assert_eq!(read(&*f), (Some(same_identity(5)), false));
        assert_eq!(check(&*f).unwrap(), same_identity(5));
        fs.flip_bit(path, 4096 * 8 + 20).unwrap();
        assert_eq!(read(&*f), (Some(slot(4)), true));
        assert!(matches!(
            check(&*f),
            Err(Error::Corruption { offset: 4096, .. })
        ));
        f.write_at(&slot(4).encode(), Slot::offset(5)).unwrap();
        assert_eq!(read(&*f), (Some(slot(4)), true));
        // Consecutive generations of two identities: one is not this
        // database's.
        f.write_at(&slot(3).encode(), Slot::offset(3)).unwrap();
        assert!(matches!(
            check(&*f),
            Err(Error::Corruption { offset: 4096, .. })
        ));
        // Generations that do not follow each other.
        f.write_at(&same_identity(7).encode(), Slot::offset(7))
            .unwrap();
        let err = check(&*f).unwrap_err();
        assert!(err.to_string().contains("not 6"), "{err}");
    }
}
