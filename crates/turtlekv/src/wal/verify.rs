//! The WAL part of `Db::check`: every frame of every live segment must
//! verify, each header must name this database, and sequence numbers
//! must run on without gaps.

use std::io::ErrorKind;
use std::path::Path;

use crate::io::{FileSystem, OpenOptions, read_exact_at};
use crate::wal::binding::LogBinding;
use crate::wal::record::{self, Frame};
use crate::wal::segment::{check_header, segment_file_name};
use crate::{Error, Result};

/// What the WAL check found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct WalReport {
    pub segments: u64,
    pub records: u64,
    pub bytes: u64,
    /// Segments that were live when the lengths were taken but are gone
    /// now: trimmed meanwhile by a checkpoint, or lost. The caller asks
    /// the log which.
    pub gone: Vec<u64>,
}

/// Verifies segments given as (id, bytes written so far). Bytes appended
/// after the lengths were taken are not looked at.
pub(crate) fn verify(
    fs: &dyn FileSystem,
    dir: &Path,
    segments: &[(u64, u64)],
    binding: &LogBinding,
) -> Result<WalReport> {
    let mut report = WalReport::default();
    let mut expected_seq: Option<u64> = None;
    let mut seen_named = false;
    for &(id, len_bytes) in segments {
        let path = dir.join(segment_file_name(id));
        let file = match fs.open(&path, OpenOptions::read_only()) {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                report.gone.push(id);
                expected_seq = None;
                continue;
            }
            other => other?,
        };
        let mut buf = vec![0u8; len_bytes as usize];
        read_exact_at(&*file, &mut buf, 0).map_err(|_| {
            // Where the file ends, the bytes written are missing.
            let end = file.len().unwrap_or(0);
            Error::corruption(&path, end, "segment shorter than written")
        })?;
        let header = check_header(&buf, id).map_err(|e| e.into_corruption(&path))?;
        binding.check_identity(&path, header.database_id, seen_named)?;
        seen_named |= header.database_id.is_some();
        let format = header.format.payload;
        let mut offset = header.body_start();
        while offset < buf.len() {
            let (rec, frame_len) = match record::decode(&buf[offset..], format) {
                Frame::Valid(rec, frame_len) => (rec, frame_len),
                Frame::Invalid(e) | Frame::Malformed(e) => {
                    return Err(e.into_corruption(&path, offset as u64));
                }
                Frame::Truncated => {
                    return Err(Error::corruption(
                        &path,
                        offset as u64,
                        "record cut short by the segment's end",
                    ));
                }
            };
            if expected_seq.is_some_and(|e| e != rec.first_seq) {
                return Err(Error::corruption(&path, offset as u64, "sequence gap"));
            }
            expected_seq = Some(rec.first_seq + rec.ops.len() as u64);
            // Markers, seals, proofs and links hold no update.
            report.records += u64::from(!rec.ops.is_empty());
            offset += frame_len;
        }
        report.segments += 1;
        report.bytes += len_bytes;
    }
    Ok(report)
}
