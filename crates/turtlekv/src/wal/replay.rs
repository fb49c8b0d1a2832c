//! Recovery: reads every segment in order and hands valid records to the caller.
//!
//! Only the newest segment may end in a torn tail, because a segment is synced
//! before the next one is created. In the newest segment, an invalid frame is
//! a torn tail unless a later valid frame says that the bytes at the damaged
//! offset had been synced when it was written; then it is corruption.

use std::path::Path;

use crate::batch::BatchOp;
use crate::io::{FileSystem, OpenOptions, read_all};
use crate::wal::record::{self, FRAME_MAGIC, Frame, PayloadFormat};
use crate::wal::segment::{
    HeaderError, SEGMENT_HEADER_BYTES, check_header, list_segments, segment_file_name,
};
use crate::{Error, Result};

/// What replay found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ReplayOutcome {
    /// Highest sequence number in the log, or `covered_seq` when none is higher.
    pub last_seq: u64,
    /// Id for the next segment to create.
    pub next_segment_id: u64,
    /// Records handed to the caller.
    pub records_applied: u64,
    /// Bytes of torn tail cut off the newest segment.
    pub tail_bytes_dropped: u64,
    /// Surviving segments, oldest first, each with the sequence number of
    /// its first record (for an empty one: of the record that would follow).
    pub segments: Vec<(u64, u64)>,
    /// Ids of segments that hold no record (each open starts a segment;
    /// those of opens that wrote nothing are removed).
    pub empty_segments: Vec<u64>,
}

struct Progress {
    covered_seq: u64,
    expected_next_seq: Option<u64>,
    outcome: ReplayOutcome,
}

/// Replays records above `covered_seq` (older ones are already in the tree)
/// in sequence order, and cuts a torn tail off the newest segment.
pub(crate) fn replay(
    fs: &dyn FileSystem,
    dir: &Path,
    covered_seq: u64,
    apply: &mut dyn FnMut(u64, &[BatchOp]),
) -> Result<ReplayOutcome> {
    let ids = list_segments(fs, dir)?;
    let mut progress = Progress {
        covered_seq,
        expected_next_seq: None,
        outcome: ReplayOutcome {
            last_seq: covered_seq,
            next_segment_id: ids.last().map_or(1, |id| id + 1),
            ..ReplayOutcome::default()
        },
    };
    for (i, &id) in ids.iter().enumerate() {
        let is_newest = i + 1 == ids.len();
        replay_segment(fs, dir, id, is_newest, &mut progress, apply)?;
    }
    Ok(progress.outcome)
}

fn replay_segment(
    fs: &dyn FileSystem,
    dir: &Path,
    id: u64,
    is_newest: bool,
    progress: &mut Progress,
    apply: &mut dyn FnMut(u64, &[BatchOp]),
) -> Result<()> {
    let path = dir.join(segment_file_name(id));
    let buf = read_all(&*fs.open(&path, OpenOptions::read_only())?)?;
    let format = match check_header(&buf, id) {
        Ok(format) => format,
        Err(e @ HeaderError::UnknownVersion(_)) => {
            // Its records cannot be read, and must not be dropped.
            return Err(Error::corruption(&path, 8, e.reason()));
        }
        Err(HeaderError::Damaged(reason)) => {
            if !is_newest {
                return Err(Error::corruption(&path, 0, reason));
            }
            // A crash while the segment was being created leaves no record
            // behind it, since the header is synced before any record is
            // written: a frame whose checksum holds after a damaged header
            // proves rot (whatever its payload's layout, which the header
            // no longer tells).
            if checksummed_frame_after(&buf, 0) {
                return Err(Error::corruption(&path, 0, reason));
            }
            fs.remove_file(&path)?;
            fs.sync_dir(dir)?;
            progress.outcome.tail_bytes_dropped += buf.len() as u64;
            return Ok(());
        }
    };
    let next_expected = progress
        .expected_next_seq
        .unwrap_or(progress.covered_seq + 1);
    let first_seq = match record::decode(&buf[SEGMENT_HEADER_BYTES as usize..], format) {
        Frame::Valid(rec, _) => rec.first_seq,
        _ => next_expected,
    };
    progress.outcome.segments.push((id, first_seq));
    let header_only = buf.len() == SEGMENT_HEADER_BYTES as usize
        || matches!(
            record::decode(&buf[SEGMENT_HEADER_BYTES as usize..], format),
            Frame::Truncated | Frame::Invalid(_)
        );
    if header_only {
        progress.outcome.empty_segments.push(id);
    }
    let mut offset = SEGMENT_HEADER_BYTES as usize;
    while offset < buf.len() {
        match record::decode(&buf[offset..], format) {
            Frame::Valid(rec, len) => {
                apply_record(progress, rec, &path, offset, apply)?;
                offset += len;
            }
            Frame::Malformed(reason) => {
                return Err(Error::corruption(&path, offset as u64, reason));
            }
            Frame::Truncated | Frame::Invalid(_) if is_newest => {
                if let Some(reason) = damage_before_synced_data(&buf, offset, format) {
                    return Err(Error::corruption(&path, offset as u64, reason));
                }
                cut_torn_tail(fs, &path, offset as u64)?;
                progress.outcome.tail_bytes_dropped += written_len(&buf[offset..]);
                return Ok(());
            }
            Frame::Truncated => {
                return Err(Error::corruption(&path, offset as u64, "record cut short"));
            }
            Frame::Invalid(reason) => {
                return Err(Error::corruption(&path, offset as u64, reason));
            }
        }
    }
    if is_newest {
        // Its records may still be only in the OS's cache (a kill, not a
        // power cut). The log goes on in a new segment and syncs only that
        // one from now on: a later synced record must not outlive these.
        fs.open(&path, OpenOptions::read_write_create())?
            .sync_data()?;
    }
    Ok(())
}

fn apply_record(
    progress: &mut Progress,
    rec: record::Record,
    path: &Path,
    offset: usize,
    apply: &mut dyn FnMut(u64, &[BatchOp]),
) -> Result<()> {
    let first = rec.first_seq;
    let next = first + rec.ops.len() as u64;
    if next <= progress.covered_seq + 1 {
        // Already in the checkpoint. Segments trimmed out of order by a
        // crash may leave gaps among such records; they do not matter.
        progress.expected_next_seq = None;
        return Ok(());
    }
    let gap = match progress.expected_next_seq {
        Some(expected) => first != expected,
        // The oldest surviving record may predate the checkpoint, but none
        // after the checkpoint may be missing.
        None => first > progress.covered_seq + 1,
    };
    if gap {
        return Err(Error::corruption(
            path,
            offset as u64,
            format!("sequence gap before record starting at {first}"),
        ));
    }
    progress.expected_next_seq = Some(next);
    if rec.ops.is_empty() {
        // A seal (`Wal::seal`): proof of what was synced, no updates.
        return Ok(());
    }
    // A record straddling the checkpoint cannot occur (a MemTable holds
    // whole batches), so a record is either covered or replayed whole.
    apply(first, &rec.ops);
    progress.outcome.records_applied += 1;
    progress.outcome.last_seq = next - 1;
    Ok(())
}

/// A valid frame after `damaged_at` that was written once `damaged_at` had
/// been synced proves the damage hit durable data, not a torn write.
fn damage_before_synced_data(
    buf: &[u8],
    damaged_at: usize,
    format: PayloadFormat,
) -> Option<&'static str> {
    find_valid_frame(buf, damaged_at + 1, format, |rec| {
        rec.synced_through > damaged_at as u64
    })
    .then_some("damaged record before data that was already synced")
}

/// Whether a frame whose checksum holds (its payload parsing or not)
/// starts at or after `from`.
fn checksummed_frame_after(buf: &[u8], from: usize) -> bool {
    frame_starts(buf, from).any(|at| {
        matches!(
            record::decode(&buf[at..], PayloadFormat::CURRENT),
            Frame::Valid(..) | Frame::Malformed(_)
        )
    })
}

/// Offsets at or after `from` where a frame's magic is.
fn frame_starts(buf: &[u8], from: usize) -> impl Iterator<Item = usize> + '_ {
    let magic = FRAME_MAGIC.to_le_bytes();
    (from..buf.len().saturating_sub(3)).filter(move |&at| buf[at..at + 4] == magic)
}

/// Whether a valid frame that `wanted` accepts starts at or after `from`.
fn find_valid_frame(
    buf: &[u8],
    from: usize,
    format: PayloadFormat,
    wanted: impl Fn(&record::Record) -> bool,
) -> bool {
    frame_starts(buf, from).any(
        |at| matches!(record::decode(&buf[at..], format), Frame::Valid(rec, _) if wanted(&rec)),
    )
}

/// Bytes of a torn `tail` that were written: up to its last non-zero
/// byte, or to the end of the frame that starts it if its header still
/// gives a length (a record may end in zero bytes). The zeros after that
/// are storage the writer reserved ahead of its appends and never wrote
/// (`wal::segment`), not a torn write.
fn written_len(tail: &[u8]) -> u64 {
    let to_last_non_zero = tail
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |last| last + 1);
    let frame = record::frame_len_from_header(tail).map_or(0, |len| len.min(tail.len()));
    to_last_non_zero.max(frame) as u64
}

fn cut_torn_tail(fs: &dyn FileSystem, path: &Path, valid_len: u64) -> Result<()> {
    let file = fs.open(path, OpenOptions::read_write_create())?;
    file.set_len(valid_len)?;
    file.sync_data()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_tail_counts_its_written_bytes_not_the_reserved_zeros() {
        assert_eq!(written_len(&[0u8; 4096]), 0, "reserved space only");
        assert_eq!(written_len(&[7, 0, 3, 0, 0, 0]), 3);
        // A seal ends in zero bytes (its synced length and count); its
        // header gives its length.
        let mut seal = Vec::new();
        record::encode(&mut seal, 5, 0, &[]);
        assert!(seal.ends_with(&[0, 0]));
        let mut tail = seal.clone();
        tail[14] ^= 1; // damaged payload, header intact
        tail.resize(seal.len() + 1000, 0);
        assert_eq!(written_len(&tail), seal.len() as u64);
    }
}
