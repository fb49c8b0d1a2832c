//! WAL segment files: naming, header, and the appending writer.

use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::io::{File, FileSystem, OpenOptions};

pub(crate) const SEGMENT_MAGIC: &[u8; 8] = b"TKVWAL\0\x01";
pub(crate) const SEGMENT_FORMAT_VERSION: u32 = 1;
pub(crate) const SEGMENT_HEADER_BYTES: u64 = 32;
const SEGMENT_SUFFIX: &str = ".wal";

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

pub(crate) fn encode_header(id: u64) -> [u8; SEGMENT_HEADER_BYTES as usize] {
    let mut h = [0u8; SEGMENT_HEADER_BYTES as usize];
    h[0..8].copy_from_slice(SEGMENT_MAGIC);
    h[8..12].copy_from_slice(&SEGMENT_FORMAT_VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&id.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..24]);
    h[24..28].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Checks a segment header; `Err` carries the reason it is unusable.
pub(crate) fn check_header(header: &[u8], id: u64) -> Result<(), &'static str> {
    if header.len() < SEGMENT_HEADER_BYTES as usize {
        return Err("segment header cut short");
    }
    if crc32c::crc32c(&header[0..24]).to_le_bytes() != header[24..28] {
        return Err("segment header checksum mismatch");
    }
    if &header[0..8] != SEGMENT_MAGIC {
        return Err("not a TurtleKV WAL segment");
    }
    if header[8..12] != SEGMENT_FORMAT_VERSION.to_le_bytes() {
        return Err("unsupported WAL format version");
    }
    if header[16..24] != id.to_le_bytes() {
        return Err("segment id does not match its file name");
    }
    Ok(())
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
}

/// Bytes written to and syncs of WAL segments, headers included.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WalIo {
    pub bytes_written: u64,
    pub syncs: u64,
}

impl SegmentWriter {
    /// Creates segment `id` with a durable header and directory entry.
    pub fn create(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        id: u64,
        segment_size_bytes: u64,
    ) -> io::Result<Self> {
        let path = dir.join(segment_file_name(id));
        let options = OpenOptions {
            create_new: true,
            write: true,
            ..OpenOptions::default()
        };
        let file = fs.open(&path, options)?;
        file.write_at(&encode_header(id), 0)?;
        file.sync_data()?;
        fs.sync_dir(dir)?;
        Ok(SegmentWriter {
            file,
            id,
            len_bytes: SEGMENT_HEADER_BYTES,
            synced_len_bytes: SEGMENT_HEADER_BYTES,
            segment_size_bytes,
            unreported: WalIo {
                bytes_written: SEGMENT_HEADER_BYTES,
                syncs: 1,
            },
        })
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

    /// Carries I/O counts over from the segment this one follows.
    pub fn add_unreported(&mut self, io: WalIo) {
        self.unreported.bytes_written += io.bytes_written;
        self.unreported.syncs += io.syncs;
    }

    /// Hands `bytes` to the OS at the end of the segment.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_at(bytes, self.len_bytes)?;
        self.len_bytes += bytes.len() as u64;
        self.unreported.bytes_written += bytes.len() as u64;
        Ok(())
    }

    /// Makes everything appended so far durable.
    pub fn sync(&mut self) -> io::Result<()> {
        if self.synced_len_bytes < self.len_bytes {
            self.file.sync_data()?;
            self.synced_len_bytes = self.len_bytes;
            self.unreported.syncs += 1;
        }
        Ok(())
    }
}
