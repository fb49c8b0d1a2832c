//! The expected-state file, kept beside the database as RocksDB's
//! `db_stress` does: for every key, the state of its last acknowledged
//! write and, while a write is in flight, the state it is about to write.
//!
//! Each update is one `pwrite` of the key's 12-byte record, so a `kill -9`
//! leaves every record either before or after the update: the OS keeps what
//! the process handed it. (The file is not synced: it guards against a
//! killed process, not a power cut, like the promise it checks.)
//!
//! Layout: a 32-byte header (`TKVEXPST`, format 1, key count), then per key
//! `committed`, `pending` (both [`Entry::to_raw`]) and `pending_batch`
//! (0: nothing in flight), each a little-endian u32.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::value::Entry;

const MAGIC: &[u8; 8] = b"TKVEXPST";
const HEADER_BYTES: u64 = 32;
const RECORD_BYTES: u64 = 12;

#[derive(Debug, Default)]
struct Slot {
    committed: AtomicU32,
    pending: AtomicU32,
    batch: AtomicU32,
    /// Highest version ever marked in flight (not stored: readers use it as
    /// the upper bound of what the database may hold).
    issued: AtomicU32,
}

/// The expected state of every key, in memory and in the file.
#[derive(Debug)]
pub struct ExpectedState {
    file: File,
    slots: Vec<Slot>,
}

impl ExpectedState {
    /// Opens the file at `path`, creating it (all keys absent) if missing.
    pub fn open(path: &Path, keys: u32) -> io::Result<ExpectedState> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let len = HEADER_BYTES + RECORD_BYTES * u64::from(keys);
        let mut header = [0u8; HEADER_BYTES as usize];
        if file.metadata()?.len() == 0 {
            header[..8].copy_from_slice(MAGIC);
            header[8..12].copy_from_slice(&1u32.to_le_bytes());
            header[12..16].copy_from_slice(&keys.to_le_bytes());
            file.set_len(len)?;
            file.write_all_at(&header, 0)?;
        }
        file.read_exact_at(&mut header, 0)?;
        let stored_keys = u32::from_le_bytes(header[12..16].try_into().expect("4 bytes"));
        if &header[..8] != MAGIC || stored_keys != keys || file.metadata()?.len() != len {
            return Err(io::Error::other(format!(
                "{} is not an expected-state file for {keys} keys",
                path.display()
            )));
        }
        let mut records = vec![0u8; (RECORD_BYTES * u64::from(keys)) as usize];
        file.read_exact_at(&mut records, HEADER_BYTES)?;
        let slots = records
            .chunks_exact(RECORD_BYTES as usize)
            .map(|r| {
                let at = |i: usize| u32::from_le_bytes(r[i..i + 4].try_into().expect("4 bytes"));
                let pending = Entry::from_raw(at(4));
                let committed = Entry::from_raw(at(0));
                Slot {
                    committed: AtomicU32::new(at(0)),
                    pending: AtomicU32::new(at(4)),
                    batch: AtomicU32::new(at(8)),
                    issued: AtomicU32::new(pending.version.max(committed.version)),
                }
            })
            .collect();
        Ok(ExpectedState { file, slots })
    }

    pub fn keys(&self) -> u32 {
        self.slots.len() as u32
    }

    /// The state of the key's last acknowledged write.
    pub fn committed(&self, key: u32) -> Entry {
        Entry::from_raw(self.slots[key as usize].committed.load(Ordering::Acquire))
    }

    /// The write in flight for the key and its batch id, if any.
    pub fn pending(&self, key: u32) -> Option<(Entry, u32)> {
        let slot = &self.slots[key as usize];
        let batch = slot.batch.load(Ordering::Acquire);
        (batch != 0).then(|| (Entry::from_raw(slot.pending.load(Ordering::Acquire)), batch))
    }

    /// The highest version any write of the key may have stored.
    pub fn issued(&self, key: u32) -> u32 {
        self.slots[key as usize].issued.load(Ordering::Acquire)
    }

    /// Records that `entry` is about to be written as part of batch `batch`
    /// (nonzero). Must come before the database write.
    pub fn mark_pending(&self, key: u32, entry: Entry, batch: u32) -> io::Result<()> {
        debug_assert_ne!(batch, 0);
        let slot = &self.slots[key as usize];
        slot.issued.fetch_max(entry.version, Ordering::AcqRel);
        slot.pending.store(entry.to_raw(), Ordering::Release);
        slot.batch.store(batch, Ordering::Release);
        self.store(key)
    }

    /// Records that the key's pending write was acknowledged.
    pub fn commit(&self, key: u32) -> io::Result<()> {
        let slot = &self.slots[key as usize];
        slot.committed
            .store(slot.pending.load(Ordering::Acquire), Ordering::Release);
        slot.batch.store(0, Ordering::Release);
        self.store(key)
    }

    /// Sets the key's state to what recovery found, clearing any write in
    /// flight.
    pub fn resolve(&self, key: u32, entry: Entry) -> io::Result<()> {
        let slot = &self.slots[key as usize];
        slot.committed.store(entry.to_raw(), Ordering::Release);
        slot.pending.store(entry.to_raw(), Ordering::Release);
        slot.batch.store(0, Ordering::Release);
        self.store(key)
    }

    fn store(&self, key: u32) -> io::Result<()> {
        let slot = &self.slots[key as usize];
        let mut record = [0u8; RECORD_BYTES as usize];
        record[0..4].copy_from_slice(&slot.committed.load(Ordering::Acquire).to_le_bytes());
        record[4..8].copy_from_slice(&slot.pending.load(Ordering::Acquire).to_le_bytes());
        record[8..12].copy_from_slice(&slot.batch.load(Ordering::Acquire).to_le_bytes());
        self.file
            .write_all_at(&record, HEADER_BYTES + RECORD_BYTES * u64::from(key))
    }
}
