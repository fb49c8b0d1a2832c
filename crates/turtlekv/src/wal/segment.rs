//! WAL segment files: naming, header, and the appending writer.

use std::io;
use std::path::Path;
use std::sync::Arc;

use super::reserve_ahead::{Request, ReserveAhead};
use crate::error::DecodeError;
use crate::io::{File, FileSystem, OpenOptions, WriteMapping};
use crate::wal::record::PayloadFormat;

pub(crate) const SEGMENT_MAGIC: &[u8; 8] = b"TKVWAL\0\x01";
/// Header length of the segments this build writes (version 4).
pub(crate) const SEGMENT_HEADER_BYTES: u64 = 48;
/// Header length of versions 1 to 3, and the part of a version-4 header
/// that means the same in every version.
pub(crate) const SEGMENT_HEADER_BYTES_V3: u64 = 32;
const SEGMENT_SUFFIX: &str = ".wal";
/// Storage is reserved ahead of appends through the mapping in steps of
/// this size: one `fallocate` per about 6,000 records of the load. A
/// worker thread reserves the steps ahead of the one being written
/// (`reserve_ahead.rs`).
const RESERVE_STEP_BYTES: u64 = 1 << 20;
/// How many steps past the reserved storage the worker is asked for: up
/// to 5 MiB of a segment's file may lie past its last record.
const RESERVE_AHEAD_STEPS: u64 = 4;
/// The mapping covers this much past the segment's size limit, since the
/// group that crosses the limit is appended whole. Larger appends there
/// go through `write_at`.
const MAPPING_SLACK_BYTES: u64 = 4 << 20;

/// File name of segment `id`: zero-padded so names sort by id.
pub(crate) fn segment_file_name(id: u64) -> String {
    format!("{id:020}{SEGMENT_SUFFIX}")
}

/// Ids of the segments in `dir`, ascending.
pub(crate) fn list_segments(fs: &dyn FileSystem, dir: &Path) -> io::Result<Vec<u64>> {
    let mut ids: Vec<u64> = fs
        .list_dir(dir)?
        .iter()
        .filter_map(|name| name.strip_suffix(SEGMENT_SUFFIX)?.parse().ok())
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// The header of segment `id` of database `database_id`, in the current
/// version (`docs/format.md`, "Segment header").
pub(crate) fn encode_header(id: u64, database_id: u64) -> [u8; SEGMENT_HEADER_BYTES as usize] {
    let mut h = [0u8; SEGMENT_HEADER_BYTES as usize];
    h[0..8].copy_from_slice(SEGMENT_MAGIC);
    h[8..12].copy_from_slice(&SegmentFormat::CURRENT.version().to_le_bytes());
    h[16..24].copy_from_slice(&id.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..24]);
    h[24..28].copy_from_slice(&crc.to_le_bytes());
    h[32..40].copy_from_slice(&database_id.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..40]);
    h[40..44].copy_from_slice(&crc.to_le_bytes());
    h
}

/// What a segment's header version says about the segment: how its
/// records are laid out, whether it opens with a marker, and whether its
/// header names the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentFormat {
    pub payload: PayloadFormat,
    /// Version 3 on: the segment opens with a marker (a record without
    /// updates, synced with the header) whose `first_seq` is the
    /// segment's first sequence number, and the segments before it may
    /// not have been synced when it was created. Earlier builds synced a
    /// segment before creating the next and wrote no marker.
    pub opens_with_marker: bool,
    /// Version 4: a 48-byte header naming the database's identity, and a
    /// link at the end of every segment but the newest.
    pub names_database: bool,
}

impl SegmentFormat {
    pub(crate) const CURRENT: Self = Self {
        payload: PayloadFormat::V2,
        opens_with_marker: true,
        names_database: true,
    };
    const ALL: [Self; 4] = [
        Self {
            payload: PayloadFormat::V1,
            opens_with_marker: false,
            names_database: false,
        },
        Self {
            payload: PayloadFormat::V2,
            opens_with_marker: false,
            names_database: false,
        },
        Self {
            payload: PayloadFormat::V2,
            opens_with_marker: true,
            names_database: false,
        },
        Self::CURRENT,
    ];

    pub(crate) fn version(self) -> u32 {
        match (self.payload, self.opens_with_marker, self.names_database) {
            (PayloadFormat::V1, _, _) => 1,
            (PayloadFormat::V2, false, _) => 2,
            (PayloadFormat::V2, true, false) => 3,
            (PayloadFormat::V2, true, true) => 4,
        }
    }

    pub(crate) fn from_version(version: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.version() == version)
    }

    /// Bytes of the header; the marker, if any, follows it.
    pub(crate) fn header_bytes(self) -> u64 {
        if self.names_database {
            SEGMENT_HEADER_BYTES
        } else {
            SEGMENT_HEADER_BYTES_V3
        }
    }
}

/// A segment header that verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    pub format: SegmentFormat,
    /// The database it names (version 4); `None` before.
    pub database_id: Option<u64>,
}

impl SegmentHeader {
    /// Where the marker (or the first record) starts.
    pub(crate) fn body_start(&self) -> usize {
        self.format.header_bytes() as usize
    }
}

/// Why a segment header is unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeaderError {
    /// Damaged or not a segment header at all, at an offset within the
    /// header: the field that failed, or 0 for a checksum mismatch (a
    /// checksum covers the fields before it).
    Damaged(DecodeError),
    /// Intact, but of a format version this build does not know: written
    /// by a newer build. Never taken for a torn creation.
    UnknownVersion(u32),
}

impl HeaderError {
    /// The corruption error for the header of the segment at `path`.
    pub(crate) fn into_corruption(self, path: &Path) -> crate::Error {
        match self {
            Self::Damaged(e) => e.into_corruption(path, 0),
            Self::UnknownVersion(v) => crate::Error::corruption(
                path,
                VERSION_AT,
                format!(
                    "WAL format version {v} is unknown to this build (written by a newer one?)"
                ),
            ),
        }
    }
}

/// Where the header keeps the format version.
const VERSION_AT: u64 = 8;
/// Where the header keeps the segment id.
const ID_AT: usize = 16;
/// Where a version-4 header keeps the database identity.
const DATABASE_ID_AT: usize = 32;

fn damaged(at: usize, what: &'static str) -> HeaderError {
    HeaderError::Damaged(DecodeError::new(at, what))
}

/// Checks a segment header and gives the segment's format and the
/// database it names. Whether that is the right database is the
/// caller's to judge (`wal::binding`).
pub(crate) fn check_header(header: &[u8], id: u64) -> Result<SegmentHeader, HeaderError> {
    if header.len() < SEGMENT_HEADER_BYTES_V3 as usize {
        return Err(damaged(header.len(), "segment header cut short"));
    }
    if crc32c::crc32c(&header[0..24]).to_le_bytes() != header[24..28] {
        return Err(damaged(0, "segment header checksum mismatch"));
    }
    if &header[0..8] != SEGMENT_MAGIC {
        return Err(damaged(0, "not a TurtleKV WAL segment"));
    }
    // The version first: a newer build's header is reported as such even
    // if it also lays out the rest differently.
    let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
    let format =
        SegmentFormat::from_version(version).ok_or(HeaderError::UnknownVersion(version))?;
    if header[ID_AT..ID_AT + 8] != id.to_le_bytes() {
        return Err(damaged(ID_AT, "segment id does not match its file name"));
    }
    if !format.names_database {
        return Ok(SegmentHeader {
            format,
            database_id: None,
        });
    }
    if header.len() < SEGMENT_HEADER_BYTES as usize {
        return Err(damaged(header.len(), "segment header cut short"));
    }
    if crc32c::crc32c(&header[0..40]).to_le_bytes() != header[40..44] {
        return Err(damaged(0, "segment header checksum mismatch"));
    }
    let database_id = u64::from_le_bytes(
        header[DATABASE_ID_AT..DATABASE_ID_AT + 8]
            .try_into()
            .expect("8 bytes"),
    );
    if database_id == 0 {
        return Err(damaged(DATABASE_ID_AT, "segment header names no database"));
    }
    Ok(SegmentHeader {
        format,
        database_id: Some(database_id),
    })
}

/// Appends records to one segment.
#[derive(Debug)]
pub(crate) struct SegmentWriter {
    file: Arc<dyn File>,
    id: u64,
    len_bytes: u64,
    synced_len_bytes: u64,
    segment_size_bytes: u64,
    /// I/O not yet reported to the engine's counters.
    unreported: WalIo,
    /// Appends are copied into this mapping of the file where storage is
    /// reserved, instead of each costing a `write` (`io::WriteMapping`).
    mapping: Option<WriteMapping>,
    /// The file's storage reaches this far: appends through the mapping
    /// stay below it. The file is this long, or longer by what the worker
    /// has reserved ahead (`requested_len_bytes` at most).
    reserved_len_bytes: u64,
    /// Reserves the steps ahead and faults their pages in, off the
    /// leader's turn; `None` without a mapping.
    ahead: Option<ReserveAhead>,
    /// The end of the furthest step asked of `ahead`.
    requested_len_bytes: u64,
    /// `cut_reserve` shortened the file since the last sync.
    length_unsynced: bool,
}

/// Bytes written to and syncs of WAL segments, headers included.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WalIo {
    pub bytes_written: u64,
    pub syncs: u64,
}

impl SegmentWriter {
    /// Creates segment `id` with a durable header, marker and directory
    /// entry. `first_seq` is the sequence number its first record will
    /// get; `predecessors_synced` says whether every earlier segment still
    /// needed is durable, which the marker records for replay.
    pub fn create(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        id: u64,
        database_id: u64,
        segment_size_bytes: u64,
        first_seq: u64,
        predecessors_synced: bool,
    ) -> io::Result<Self> {
        let path = dir.join(segment_file_name(id));
        let options = OpenOptions {
            create_new: true,
            write: true,
            ..OpenOptions::default()
        };
        let file = fs.open(&path, options)?;
        let start = header_and_marker(id, database_id, first_seq, predecessors_synced);
        let start_len_bytes = start.len() as u64;
        file.write_at(&start, 0)?;
        file.sync_data()?;
        fs.sync_dir(dir)?;
        // A mapping only saves system calls: without one, appends write.
        let mapping = file
            .map_for_writes(segment_size_bytes + MAPPING_SLACK_BYTES)
            .unwrap_or(None);
        // Without a worker the leader reserves every step itself.
        let ahead = mapping
            .as_ref()
            .and_then(WriteMapping::populater)
            .and_then(|p| ReserveAhead::start(file.clone(), p).ok());
        let mut writer = SegmentWriter {
            mapping,
            reserved_len_bytes: start_len_bytes,
            ahead,
            requested_len_bytes: start_len_bytes,
            file,
            id,
            len_bytes: start_len_bytes,
            synced_len_bytes: start_len_bytes,
            length_unsynced: false,
            segment_size_bytes,
            unreported: WalIo {
                bytes_written: start_len_bytes,
                syncs: 1,
            },
        };
        writer.request_next_step();
        Ok(writer)
    }

    /// WAL I/O since the last call.
    pub fn take_io(&mut self) -> WalIo {
        std::mem::take(&mut self.unreported)
    }

    /// Bytes of the current segment known durable; records carry it so that
    /// recovery can tell a torn tail from damage to synced data.
    pub fn synced_len_bytes(&self) -> u64 {
        self.synced_len_bytes
    }

    /// Whether every record appended so far is durable (the file's
    /// length may still not be).
    pub fn records_synced(&self) -> bool {
        self.synced_len_bytes == self.len_bytes
    }

    /// Bytes appended so far, header included.
    pub fn len_bytes(&self) -> u64 {
        self.len_bytes
    }

    /// `true` once the segment has reached its size limit.
    pub fn is_full(&self) -> bool {
        self.len_bytes >= self.segment_size_bytes
    }

    /// Id of the segment being written.
    pub fn segment_id(&self) -> u64 {
        self.id
    }

    /// The segment's file, to sync after the writer is gone.
    pub fn file(&self) -> Arc<dyn File> {
        self.file.clone()
    }

    /// Counts a sync made elsewhere (of an earlier segment's file).
    pub fn count_sync(&mut self) {
        self.unreported.syncs += 1;
    }

    /// Carries I/O counts over from the segment this one follows.
    pub fn add_unreported(&mut self, io: WalIo) {
        self.unreported.bytes_written += io.bytes_written;
        self.unreported.syncs += io.syncs;
    }

    /// Hands `bytes` to the OS at the end of the segment: a copy into the
    /// mapping where storage can be reserved, else a `write`.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let (start, end) = (self.len_bytes, self.len_bytes + bytes.len() as u64);
        match self.mapping_reserved_to(end) {
            Some(mapping) => mapping.write(start, bytes),
            None => self.file.write_at(bytes, start)?,
        }
        self.len_bytes = end;
        self.reserved_len_bytes = self.reserved_len_bytes.max(end);
        self.unreported.bytes_written += bytes.len() as u64;
        Ok(())
    }

    /// The mapping, once the file's storage reaches `end`; `None` when the
    /// append must `write` instead: no mapping, an append too large for
    /// it, or storage that cannot be reserved. Then `write_at` reports
    /// whatever still fails (`ENOSPC`, a file-size limit) as it always did.
    fn mapping_reserved_to(&mut self, end: u64) -> Option<&mut WriteMapping> {
        let mapping_len_bytes = self.mapping.as_ref()?.len_bytes();
        if end > mapping_len_bytes {
            return None;
        }
        if end <= self.reserved_len_bytes {
            return self.mapping.as_mut();
        }
        if let Some(ahead) = &self.ahead {
            // One step at a time, so that what lies reserved past the last
            // record stays within `RESERVE_AHEAD_STEPS` steps.
            let step_end = end
                .next_multiple_of(RESERVE_STEP_BYTES)
                .min(mapping_len_bytes);
            let ready = ahead.ready_to_bytes().min(step_end);
            self.reserved_len_bytes = self.reserved_len_bytes.max(ready);
        }
        if end > self.reserved_len_bytes {
            // The worker is behind (or failed): reserve here, as it would.
            let from = self.reserved_len_bytes;
            let to = end
                .next_multiple_of(RESERVE_STEP_BYTES)
                .min(mapping_len_bytes);
            match self.file.allocate(from, to - from) {
                Ok(()) => self.reserved_len_bytes = to,
                Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                    self.mapping = None;
                    self.ahead = None;
                    return None;
                }
                Err(_) => return None,
            }
        }
        self.request_next_step();
        let mapping = self.mapping.as_mut()?;
        if self.ahead.is_none() {
            // Written pages need not stay in the process's resident set
            // (the worker drops them where there is one).
            mapping.release_before(self.len_bytes);
        }
        Some(mapping)
    }

    /// Asks the worker for the steps up to `RESERVE_AHEAD_STEPS` past the
    /// reserved storage, once fewer than two are asked for.
    fn request_next_step(&mut self) {
        let (Some(ahead), Some(mapping)) = (&self.ahead, &self.mapping) else {
            return;
        };
        // Asked for in batches: waking the worker for every step cost the
        // leader its core about half the time (the woken worker ran in its
        // place), so the worker is woken once the lead is down to a step.
        let from = self.requested_len_bytes.max(self.reserved_len_bytes);
        if from - self.reserved_len_bytes > RESERVE_STEP_BYTES {
            return;
        }
        let to = (self.reserved_len_bytes + RESERVE_AHEAD_STEPS * RESERVE_STEP_BYTES)
            .next_multiple_of(RESERVE_STEP_BYTES)
            .min(mapping.len_bytes());
        if from < to {
            ahead.request(Request {
                reserve: from..to,
                written_to_bytes: self.len_bytes,
            });
            self.requested_len_bytes = to;
        }
    }

    /// Makes everything appended so far durable. `fdatasync` covers the
    /// pages written through the mapping as well.
    pub fn sync(&mut self) -> io::Result<()> {
        if self.synced_len_bytes < self.len_bytes || self.length_unsynced {
            self.sync_now()?;
        }
        Ok(())
    }

    fn sync_now(&mut self) -> io::Result<()> {
        self.file.sync_data()?;
        self.synced_len_bytes = self.len_bytes;
        self.length_unsynced = false;
        self.unreported.syncs += 1;
        Ok(())
    }

    /// Ends the reserving worker as a crash would: whatever it reserved
    /// stays, and it changes the file no more. (A test that leaks a writer
    /// to play a crash would otherwise leave the worker reserving behind
    /// the reopened log's back; a killed process takes it along.)
    #[cfg(test)]
    pub(crate) fn stop_reserving_ahead(&mut self) {
        self.ahead = None;
    }

    /// Cuts the storage reserved past the last record off the file, so a
    /// finished segment (rotated, or sealed on a clean close) ends with its
    /// last record. Syncs nothing: a rotated segment is synced when a later
    /// sync needs it (`Wal`), and most never are, since a checkpoint covers
    /// them first. Until then a power cut may leave its file longer, with
    /// zeros after the last record, or shorter.
    pub fn cut_reserve(&mut self) -> io::Result<()> {
        // The worker must not lengthen the file once it is cut: dropping
        // its handle ends it.
        self.ahead = None;
        // The worker may have reserved up to what was asked of it; only
        // what is known reserved counts as such if the cut fails.
        let may_reach_bytes = self.reserved_len_bytes.max(self.requested_len_bytes);
        if may_reach_bytes > self.len_bytes {
            self.file.set_len(self.len_bytes)?;
            self.reserved_len_bytes = self.len_bytes;
            // `fdatasync` must now make the changed length durable too,
            // even when every record already was.
            self.length_unsynced = true;
        }
        Ok(())
    }

    /// Gives back the storage reserved past the last record while writes
    /// have stopped (an idle database should not hold a few MiB of zeros
    /// per segment), and starts a new worker so that the next appends are
    /// reserved ahead again. Syncs nothing, as `cut_reserve`.
    pub fn release_reserve(&mut self) -> io::Result<()> {
        if self.reserved_len_bytes.max(self.requested_len_bytes) <= self.len_bytes {
            return Ok(());
        }
        self.cut_reserve()?;
        self.requested_len_bytes = self.len_bytes;
        self.ahead = self
            .mapping
            .as_ref()
            .and_then(WriteMapping::populater)
            .and_then(|p| ReserveAhead::start(self.file.clone(), p).ok());
        Ok(())
    }

    /// Cuts the reserve and makes everything durable (a clean close).
    pub fn finish(&mut self) -> io::Result<()> {
        self.cut_reserve()?;
        self.sync()
    }

    /// Appends `bytes` after the reserve was cut (a link at the end of a
    /// finished segment): a `write`, so that no storage is reserved past
    /// them again. Not synced.
    pub fn append_after_cut(&mut self, bytes: &[u8]) -> io::Result<()> {
        debug_assert!(self.ahead.is_none(), "the reserve is cut first");
        self.file.write_at(bytes, self.len_bytes)?;
        self.len_bytes += bytes.len() as u64;
        self.reserved_len_bytes = self.reserved_len_bytes.max(self.len_bytes);
        self.unreported.bytes_written += bytes.len() as u64;
        Ok(())
    }
}

/// A new segment's first bytes: its header, then the marker that gives
/// its first sequence number. The marker's `synced_through` is the
/// header's length when every earlier segment was durable at creation (a
/// proof replay relies on, `wal::replay`), else zero.
pub(crate) fn header_and_marker(
    id: u64,
    database_id: u64,
    first_seq: u64,
    predecessors_synced: bool,
) -> Vec<u8> {
    let mut out = encode_header(id, database_id).to_vec();
    let synced_through = if predecessors_synced {
        SEGMENT_HEADER_BYTES
    } else {
        0
    };
    crate::wal::record::encode(&mut out, first_seq, synced_through, &[]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FaultFs, RealFs, read_all};

    /// The identity of the database these segments belong to.
    const DB: u64 = 0xdb;

    fn writer(dir: &Path, segment_size_bytes: u64) -> SegmentWriter {
        SegmentWriter::create(Arc::new(RealFs), dir, 1, DB, segment_size_bytes, 1, true).unwrap()
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed | 1)
            .collect()
    }

    /// A version-4 header names the database under a second checksum,
    /// while its first 28 bytes mean what they did in version 3: a build
    /// reading only versions 1 to 3 finds a newer version, not damage.
    #[test]
    fn a_version_4_header_names_its_database() {
        let header = encode_header(7, DB);
        let read = check_header(&header, 7).unwrap();
        assert_eq!(read.format, SegmentFormat::CURRENT);
        assert_eq!(read.database_id, Some(DB));
        assert_eq!(read.body_start(), 48);
        assert_eq!(
            u32::from_le_bytes(header[24..28].try_into().unwrap()),
            crc32c::crc32c(&header[..24]),
            "the first checksum covers bytes 0..24 as before"
        );
        for bit in 0..44 * 8 {
            let mut bad = header;
            bad[bit / 8] ^= 1 << (bit % 8);
            let named = check_header(&bad, 7).ok().and_then(|h| h.database_id);
            assert_ne!(named, Some(DB), "bit {bit}");
        }
        assert!(check_header(&header[..40], 7).is_err(), "cut short");
        assert!(
            check_header(&encode_header(7, 0), 7).is_err(),
            "no database"
        );
    }

    #[test]
    fn appends_through_the_mapping_reach_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path(), 64 << 20);
        assert!(w.mapping.is_some(), "a real file is mapped");
        let mut expected = header_and_marker(1, DB, 1, true);
        for i in 0..20_000u32 {
            let bytes = pattern(100 + (i % 150) as usize, i as u8);
            w.append(&bytes).unwrap();
            expected.extend_from_slice(&bytes);
        }
        assert!(w.mapping.is_some(), "no append fell back to write_at");
        assert!(w.ahead.is_some(), "a mapped segment reserves ahead");
        // Storage is reserved ahead, in whole steps; the worker may be
        // further on.
        assert_eq!(w.reserved_len_bytes % RESERVE_STEP_BYTES, 0);
        assert!(w.reserved_len_bytes > w.len_bytes());
        let on_disk = read_all(&*w.file).unwrap();
        let file_len = on_disk.len() as u64;
        assert!(
            (w.reserved_len_bytes..=w.requested_len_bytes).contains(&file_len),
            "file of {file_len} bytes, reserved {} and asked for {}",
            w.reserved_len_bytes,
            w.requested_len_bytes
        );
        assert_eq!(&on_disk[..expected.len()], &expected[..]);
        assert!(on_disk[expected.len()..].iter().all(|&b| b == 0));
        w.finish().unwrap();
        assert_eq!(
            read_all(&*w.file).unwrap(),
            expected,
            "finish cuts the reserve"
        );
        assert_eq!(w.synced_len_bytes(), expected.len() as u64);
    }

    /// On the fault-injecting file system too, appends are copies into a
    /// (simulated) mapping, in storage the writer reserved itself.
    #[test]
    fn appends_on_fault_fs_go_through_its_mapping() {
        let fs = FaultFs::new();
        fs.create_dir_all(Path::new("/wal")).unwrap();
        let mut w = SegmentWriter::create(
            Arc::new(fs.clone()),
            Path::new("/wal"),
            1,
            DB,
            64 << 20,
            1,
            true,
        )
        .unwrap();
        assert!(
            w.mapping.is_some() && w.ahead.is_none(),
            "mapped, no worker"
        );
        let mut expected = header_and_marker(1, DB, 1, true);
        for i in 0..3000u32 {
            let bytes = pattern(100 + (i % 700) as usize, i as u8);
            w.append(&bytes).unwrap();
            expected.extend_from_slice(&bytes);
        }
        assert!(w.mapping.is_some(), "no append fell back to write_at");
        assert_eq!(fs.store_count(), 3000);
        assert_eq!(fs.op_counts().0, 3, "the header and two steps reserved");
        let on_file = read_all(&*w.file).unwrap();
        assert_eq!(on_file.len() as u64, 2 * RESERVE_STEP_BYTES);
        assert_eq!(&on_file[..expected.len()], &expected[..]);
        w.finish().unwrap();
        assert_eq!(read_all(&*w.file).unwrap(), expected);
    }

    /// The writer copies into the mapping only where the file has storage:
    /// a store anywhere else would raise SIGBUS, and the simulation aborts
    /// the process there. With the reserving worker running, and writes
    /// (reservations, appends the mapping cannot take) failing once now and
    /// then, as on a nearly full disk, every append lands in reserved
    /// storage or is written, and the file holds what was appended.
    #[test]
    fn appends_stay_in_reserved_storage_while_reservations_fail() {
        for seed in 0..6u64 {
            let fs = FaultFs::new();
            fs.set_mappings(crate::io::Mappings::SimulatedWithWorker);
            fs.create_dir_all(Path::new("/wal")).unwrap();
            let mut w = SegmentWriter::create(
                Arc::new(fs.clone()),
                Path::new("/wal"),
                1,
                DB,
                12 << 20,
                1,
                true,
            )
            .unwrap();
            assert!(w.ahead.is_some(), "the worker runs");
            let mut rng = crate::io::SplitMix(seed);
            let mut expected = header_and_marker(1, DB, 1, true);
            while expected.len() < 10 << 20 {
                if rng.next().is_multiple_of(200) {
                    fs.inject(crate::io::Fault {
                        on: crate::io::FaultOn::Write,
                        after: rng.next() % 3,
                        kind: crate::io::FaultKind::NoSpace,
                        persistent: false,
                        path_contains: None,
                    });
                }
                let bytes = pattern(20 + (rng.next() % 6000) as usize, rng.next() as u8);
                match w.append(&bytes) {
                    Ok(()) => expected.extend_from_slice(&bytes),
                    Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}"),
                }
            }
            fs.clear_fault();
            w.finish().unwrap();
            assert_eq!(read_all(&*w.file).unwrap(), expected, "seed {seed}");
            assert!(fs.store_count() > 1000, "seed {seed}: appends were mapped");
        }
    }

    /// Waits until the worker has reserved everything asked of it.
    fn wait_for_worker(w: &SegmentWriter) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let ahead = w.ahead.as_ref().expect("a worker");
        while ahead.ready_to_bytes() < w.requested_len_bytes {
            assert!(
                std::time::Instant::now() < deadline,
                "the worker never got there"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn the_worker_reserves_steps_ahead_and_finish_cuts_them() {
        const MIB: u64 = RESERVE_STEP_BYTES;
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path(), 64 << 20);
        let file_len = |w: &SegmentWriter| read_all(&*w.file).unwrap().len() as u64;
        // A new segment asks for its first steps at once.
        assert_eq!(w.requested_len_bytes, (1 + RESERVE_AHEAD_STEPS) * MIB);
        wait_for_worker(&w);
        assert_eq!(file_len(&w), (1 + RESERVE_AHEAD_STEPS) * MIB);
        let record = pattern(1000, 7);
        let mut expected = header_and_marker(1, DB, 1, true);
        for step in 1..=2 * RESERVE_AHEAD_STEPS {
            // Into the next step: the appends take it from the worker.
            while (expected.len() as u64) < (step - 1) * MIB + 10_000 {
                w.append(&record).unwrap();
                expected.extend_from_slice(&record);
            }
            assert_eq!(w.reserved_len_bytes, step * MIB);
            // Asked for in batches, once the lead is down to one step.
            let lead = w.requested_len_bytes - w.reserved_len_bytes;
            assert!(
                lead > MIB && lead <= RESERVE_AHEAD_STEPS * MIB,
                "step {step}: {lead} bytes asked for ahead"
            );
            wait_for_worker(&w);
            assert_eq!(file_len(&w), w.requested_len_bytes);
        }
        let expected_len = expected.len() as u64;
        w.finish().unwrap();
        assert!(w.ahead.is_none(), "finish ends the worker");
        assert_eq!(file_len(&w), expected_len, "finish cuts what was reserved");
        assert_eq!(read_all(&*w.file).unwrap(), expected);
    }

    /// An idle database gives its reserve back; the appends that come
    /// later find storage reserved ahead again, and every byte lands.
    #[test]
    fn a_released_reserve_comes_back_with_the_next_appends() {
        const MIB: u64 = RESERVE_STEP_BYTES;
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path(), 64 << 20);
        let file_len = |w: &SegmentWriter| read_all(&*w.file).unwrap().len() as u64;
        let allocated = || {
            use std::os::unix::fs::MetadataExt as _;
            std::fs::metadata(dir.path().join(segment_file_name(1)))
                .unwrap()
                .blocks()
                * 512
        };
        let record = pattern(1000, 3);
        let mut expected = header_and_marker(1, DB, 1, true);
        for round in 0..3 {
            while (expected.len() as u64) < (2 * round + 1) * MIB + 5_000 {
                w.append(&record).unwrap();
                expected.extend_from_slice(&record);
            }
            wait_for_worker(&w);
            assert!(file_len(&w) > expected.len() as u64 + MIB, "reserved ahead");
            w.release_reserve().unwrap();
            assert_eq!(file_len(&w), expected.len() as u64, "round {round}");
            assert!(allocated() < expected.len() as u64 + 64 * 1024);
            // Nothing reserved: a second release changes nothing.
            w.release_reserve().unwrap();
            assert_eq!(file_len(&w), expected.len() as u64);
        }
        w.append(&record).unwrap();
        expected.extend_from_slice(&record);
        assert!(w.ahead.is_some(), "a worker reserves ahead again");
        wait_for_worker(&w);
        assert!(file_len(&w) > expected.len() as u64 + MIB);
        w.finish().unwrap();
        assert_eq!(read_all(&*w.file).unwrap(), expected);
    }

    #[test]
    fn appends_too_large_for_the_mapping_are_written() {
        let dir = tempfile::tempdir().unwrap();
        // The mapping covers 64 KiB + 4 MiB.
        let mut w = writer(dir.path(), 64 << 10);
        let mut expected = header_and_marker(1, DB, 1, true);
        let sizes = [1000, 5 << 20, 300, (4 << 20) - 100, 2000];
        for (i, size) in sizes.into_iter().enumerate() {
            let bytes = pattern(size, i as u8);
            w.append(&bytes).unwrap();
            expected.extend_from_slice(&bytes);
        }
        w.finish().unwrap();
        assert_eq!(read_all(&*w.file).unwrap(), expected);
    }

    /// A real file whose successful `allocate` and `write_at` calls record
    /// the storage they gave it, and which fails one chosen `allocate` (as
    /// a full disk would, once) with `ENOSPC`.
    #[derive(Debug)]
    struct RecordingFile {
        inner: Arc<dyn File>,
        backed: Arc<std::sync::Mutex<Vec<std::ops::Range<u64>>>>,
        fail_allocate: (u64, u64),
        failed: Arc<std::sync::atomic::AtomicU64>,
    }

    impl File for RecordingFile {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            self.inner.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
            self.inner.write_at(buf, offset)?;
            self.backed
                .lock()
                .unwrap()
                .push(offset..offset + buf.len() as u64);
            Ok(())
        }
        fn sync_data(&self) -> io::Result<()> {
            self.inner.sync_data()
        }
        fn len(&self) -> io::Result<u64> {
            self.inner.len()
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.inner.set_len(len)
        }
        fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
            if (offset, len) == self.fail_allocate {
                self.failed
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.inner.allocate(offset, len)?;
            self.backed.lock().unwrap().push(offset..offset + len);
            Ok(())
        }
        fn map_for_writes(&self, len_bytes: u64) -> io::Result<Option<WriteMapping>> {
            self.inner.map_for_writes(len_bytes)
        }
    }

    /// A step the worker failed to reserve must not count as reserved
    /// because a later step succeeded: the leader would copy records into
    /// a hole of the file through the mapping, where a full disk answers
    /// with SIGBUS instead of an error.
    #[test]
    fn a_step_the_worker_failed_to_reserve_is_not_written_through_the_mapping() {
        const MIB: u64 = RESERVE_STEP_BYTES;
        let dir = tempfile::tempdir().unwrap();
        let backed = Arc::new(std::sync::Mutex::new(Vec::new()));
        let failed = Arc::new(std::sync::atomic::AtomicU64::new(0));
        // The worker's first request: from the marker's end to 5 MiB.
        let start = header_and_marker(1, DB, 1, true).len() as u64;
        let first_request = (start, (1 + RESERVE_AHEAD_STEPS) * MIB - start);
        let (file_backed, file_failed) = (backed.clone(), failed.clone());
        let fs = Arc::new(crate::io::WrapFs {
            inner: Arc::new(RealFs),
            wrap: move |inner| -> Arc<dyn File> {
                Arc::new(RecordingFile {
                    inner,
                    backed: file_backed.clone(),
                    fail_allocate: first_request,
                    failed: file_failed.clone(),
                })
            },
        });
        let mut w = SegmentWriter::create(fs, dir.path(), 1, DB, 64 << 20, 1, true).unwrap();
        while failed.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // The disk has room again: the leader reserves 0..4 MiB itself and
        // then asks the worker for 5..8 MiB, which it reserves.
        let record = pattern(1000, 3);
        while w.len_bytes() < 3 * MIB + 10_000 {
            w.append(&record).unwrap();
        }
        // The worker either takes the requests made since (one that skipped
        // its failed step would) or has stopped at its failure.
        let ahead = w.ahead.as_ref().expect("a worker");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while ahead.ready_to_bytes() < w.requested_len_bytes && !ahead.has_ended() {
            assert!(std::time::Instant::now() < deadline, "the worker hangs");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        while w.len_bytes() < 4 * MIB + 10_000 {
            w.append(&record).unwrap();
        }
        // Every byte appended lies in storage reserved or written first.
        let mut ranges = backed.lock().unwrap().clone();
        ranges.sort_by_key(|r| r.start);
        let mut covered_to = start;
        for r in &ranges {
            if r.start <= covered_to {
                covered_to = covered_to.max(r.end);
            }
        }
        assert!(
            covered_to >= w.len_bytes(),
            "appended up to {} through the mapping, but storage was reserved only up to {covered_to} \
             (ranges {ranges:?})",
            w.len_bytes()
        );
    }

    /// A real file that keeps, at each `fdatasync`, what the file held
    /// then: the image a power cut right after it would leave. Reads see
    /// the shared mapping's pages (the page cache), so it covers appends
    /// through the mapping, which `FaultFs` (no mapping) cannot.
    #[derive(Debug)]
    struct ShadowFile {
        inner: Arc<dyn File>,
        durable: Arc<std::sync::Mutex<Vec<u8>>>,
    }

    impl File for ShadowFile {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            self.inner.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
            self.inner.write_at(buf, offset)
        }
        fn sync_data(&self) -> io::Result<()> {
            self.inner.sync_data()?;
            *self.durable.lock().unwrap() = read_all(&*self.inner)?;
            Ok(())
        }
        fn len(&self) -> io::Result<u64> {
            self.inner.len()
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.inner.set_len(len)
        }
        fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
            self.inner.allocate(offset, len)
        }
        fn map_for_writes(&self, len_bytes: u64) -> io::Result<Option<WriteMapping>> {
            self.inner.map_for_writes(len_bytes)
        }
    }

    #[test]
    fn a_sync_after_appends_through_the_mapping_makes_them_durable() {
        let dir = tempfile::tempdir().unwrap();
        let durable = Arc::new(std::sync::Mutex::new(Vec::new()));
        let shadow = durable.clone();
        let fs = Arc::new(crate::io::WrapFs {
            inner: Arc::new(RealFs),
            wrap: move |inner| -> Arc<dyn File> {
                Arc::new(ShadowFile {
                    inner,
                    durable: shadow.clone(),
                })
            },
        });
        let mut w = SegmentWriter::create(fs, dir.path(), 1, DB, 64 << 20, 1, true).unwrap();
        assert!(w.mapping.is_some(), "a real file is mapped");
        let mut expected = header_and_marker(1, DB, 1, true);
        for i in 0..50u8 {
            let bytes = pattern(300, i);
            w.append(&bytes).unwrap();
            expected.extend_from_slice(&bytes);
            w.sync().unwrap();
            let image = durable.lock().unwrap().clone();
            assert!(
                image.len() >= expected.len() && image[..expected.len()] == expected[..],
                "append {i}: synced, but a power cut would not find it"
            );
        }
    }
}
