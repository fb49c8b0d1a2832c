//! Recovery: reads every segment in order and hands valid records to the caller.
//!
//! Before any record, the log's files must be its database's: every
//! segment header names the database's identity, some segment reaches
//! the superblock's WAL floor, and the newest segment names no successor
//! (`wal::binding`; `docs/format.md`, "Recovery rules", rule 0).
//!
//! A rotation does not sync the segment it finishes (`Wal`), so after a
//! power cut any segment may end in a torn tail, not only the newest. An
//! invalid frame at offset `X` of a segment is, in this order:
//! - *covered*: the next segment's marker (synced with its header when it
//!   was created) starts at or below the checkpoint, so the damaged records
//!   are in the tree; the rest of the segment is skipped;
//! - *nothing lost*: the next segment's marker starts right after the
//!   records read, so the damaged bytes held no update (a torn link, seal
//!   or proof); the segment is cut at `X` and replay goes on;
//! - *corruption*: the segment links to a segment that is missing; or a
//!   later valid frame of the same segment says the bytes at `X` had been
//!   synced when it was written, or a later segment proves every earlier
//!   one it needed durable (a frame claiming more than its header as
//!   synced, or a header of a build that synced every segment before
//!   creating the next);
//! - else a *torn tail*: the log ends there. The segment is cut at `X` and
//!   every later segment removed, since their records follow a gap; none
//!   of them was acknowledged as synced, or a proof would be there.
//!
//! With `WalRecovery::PointInTime`, corruption of this database's log
//! ends the log there instead of failing the open: what follows is cut
//! and removed, and counted.

use std::path::Path;

use crate::WalRecovery;
use crate::batch::BatchOp;
use crate::error::DecodeError;
use crate::io::{FileSystem, OpenOptions, read_all};
use crate::wal::binding::{LogBinding, check_identities};
use crate::wal::record::{self, FRAME_MAGIC, Frame, PayloadFormat};
use crate::wal::segment::{
    HeaderError, SEGMENT_HEADER_BYTES, SEGMENT_HEADER_BYTES_V3, SegmentHeader, check_header,
    list_segments, segment_file_name,
};
use crate::{Error, Result};

/// What replay hands each record's updates to, with the first's sequence
/// number. It may refuse a record (`Refused`).
pub(crate) type Apply<'a> = dyn FnMut(u64, &[BatchOp]) -> std::result::Result<(), Refused> + 'a;

/// Why `Apply` did not take a record.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The record is not whole: its value pointers name value records
    /// that are missing or damaged. Replay judges it as a record that does
    /// not verify: a torn tail, unless a later record proves it synced.
    NotWhole(DecodeError),
    /// Checking it failed (an I/O error): the open fails, and nothing of
    /// the log is changed.
    Failed(Error),
}

/// What replay found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ReplayOutcome {
    /// Highest sequence number in the log, or `covered_seq` when none is higher.
    pub last_seq: u64,
    /// Id for the next segment to create.
    pub next_segment_id: u64,
    /// Records handed to the caller.
    pub records_applied: u64,
    /// Bytes of torn tail cut off, and of the segments after it removed.
    pub tail_bytes_dropped: u64,
    /// Surviving segments, oldest first, each with the sequence number of
    /// its first record (for an empty one: of the record that would follow).
    pub segments: Vec<(u64, u64)>,
    /// Ids of segments that hold no update (each open starts a segment;
    /// those of opens that wrote nothing are removed).
    pub empty_segments: Vec<u64>,
    /// Segments found missing (the floor's, a link's) that
    /// `WalRecovery::PointInTime` opened without.
    pub missing_segments: u64,
    /// Bytes of records `WalRecovery::PointInTime` dropped after the last
    /// consistent point.
    pub recovery_bytes_dropped: u64,
}

struct Progress {
    covered_seq: u64,
    expected_next_seq: Option<u64>,
    recovery: WalRecovery,
    /// The link the last segment kept ends in, read in order: (segment,
    /// the segment it names).
    link: Option<(u64, u64)>,
    /// The last segment read to its end and kept.
    last_kept: Option<u64>,
    outcome: ReplayOutcome,
    /// `Apply` failed (`Refused::Failed`): replay stops and returns it.
    failed: Option<Error>,
}

impl Progress {
    /// A segment `missing` was named (by the floor or a link): corruption,
    /// or counted when recovering to a point in time.
    fn missing(&mut self, path: &Path, offset: u64, reason: String) -> Result<()> {
        match self.recovery {
            WalRecovery::PointInTime => {
                self.outcome.missing_segments += 1;
                Ok(())
            }
            _ => Err(Error::corruption(path, offset, reason)),
        }
    }
}

/// How the reading of one segment ended.
#[derive(Debug, PartialEq, Eq)]
enum SegmentEnd {
    /// Read to its end (or to damage the checkpoint covers): go on.
    Read,
    /// The log ends in this segment: later ones are to be removed.
    TornTail,
    /// Corruption, found by the check that failed at `offset`: reported,
    /// or, when recovering to a point in time, the log ends at `cut_at`,
    /// the start of the record (or segment) that holds it.
    Corrupt {
        cut_at: u64,
        offset: u64,
        reason: String,
    },
}

/// Whether `err`, from replay, says the log does not reach back to the
/// checkpoint or on to the segments it must: a sequence gap, or a missing
/// segment. With a damaged superblock slot, that is what a durable commit
/// in it, since rotted, leaves (`db::open` reports the slot then).
pub(crate) fn falls_short(err: &Error) -> bool {
    matches!(err, Error::Corruption { reason, .. }
        if reason.starts_with(GAP) || reason.contains(MISSING) || reason.starts_with(LINK_GONE))
}

const GAP: &str = "sequence gap";
const MISSING: &str = " is missing";
const LINK_GONE: &str =
    "records are missing after a segment whose link names a segment that is gone";

/// Replays records above `covered_seq` (older ones are already in the tree)
/// in sequence order, cuts a torn tail, and syncs every segment it keeps
/// (after a `kill -9` their records may be only in the OS's cache, and the
/// log goes on in a new segment whose syncs would not cover them).
pub(crate) fn replay(
    fs: &dyn FileSystem,
    dir: &Path,
    covered_seq: u64,
    binding: &LogBinding,
    apply: &mut Apply<'_>,
) -> Result<ReplayOutcome> {
    let ids = list_segments(fs, dir)?;
    check_identities(fs, dir, &ids, binding)?;
    let mut progress = Progress {
        covered_seq,
        expected_next_seq: None,
        recovery: binding.recovery,
        link: None,
        last_kept: None,
        failed: None,
        outcome: ReplayOutcome {
            last_seq: covered_seq,
            ..ReplayOutcome::default()
        },
    };
    if binding.floor > 0 && ids.last().is_none_or(|&newest| newest < binding.floor) {
        progress.missing(
            &dir.join(segment_file_name(binding.floor)),
            0,
            format!(
                "WAL segment {}{MISSING}: the superblock names it as the newest segment an \
                 open started (its WAL floor), and no segment from it on is left{}",
                binding.floor,
                ids.last()
                    .map_or(String::new(), |n| format!(" (the newest is {n})"))
            ),
        )?;
    }
    let mut newest_link = 0;
    let mut read_to_the_end = true;
    for (i, &id) in ids.iter().enumerate() {
        let later = &ids[i + 1..];
        let path = dir.join(segment_file_name(id));
        let end = replay_segment(fs, dir, id, later, &mut progress, apply)?;
        newest_link = newest_link.max(progress.link.map_or(0, |(_, to)| to));
        match end {
            SegmentEnd::Read => {}
            SegmentEnd::TornTail => {
                remove_after_tail(fs, dir, later, &mut progress.outcome.tail_bytes_dropped)?;
                read_to_the_end = false;
                break;
            }
            SegmentEnd::Corrupt {
                cut_at,
                offset,
                reason,
            } => {
                if progress.recovery != WalRecovery::PointInTime {
                    return Err(Error::corruption(&path, offset, reason));
                }
                end_log_at(fs, dir, &path, cut_at, &mut progress.outcome)?;
                remove_after_tail(fs, dir, later, &mut progress.outcome.recovery_bytes_dropped)?;
                read_to_the_end = false;
                break;
            }
        }
    }
    // The newest segment kept ends in a link: the segment it names, and
    // any after it, are gone (one removed as a torn creation is never
    // named: see `replay_segment`).
    if read_to_the_end
        && let Some((from, to)) = progress.link
        && progress.last_kept == Some(from)
    {
        progress.missing(
            &dir.join(segment_file_name(from)),
            0,
            format!(
                "WAL segment {to}{MISSING}: segment {from}, the newest left, names it as the \
                 one that follows"
            ),
        )?;
    }
    // Ids are never reused, not even those of missing segments.
    let highest = ids
        .last()
        .copied()
        .unwrap_or(0)
        .max(binding.floor)
        .max(newest_link);
    progress.outcome.next_segment_id = highest.checked_add(1).ok_or_else(|| {
        Error::corruption(
            dir.join(segment_file_name(highest)),
            0,
            "segment id too large",
        )
    })?;
    Ok(progress.outcome)
}

fn replay_segment(
    fs: &dyn FileSystem,
    dir: &Path,
    id: u64,
    later: &[u64],
    progress: &mut Progress,
    apply: &mut Apply<'_>,
) -> Result<SegmentEnd> {
    let path = dir.join(segment_file_name(id));
    let buf = read_all(&*fs.open(&path, OpenOptions::read_only())?)?;
    let previous_link = progress.link.take();
    let header = match check_header(&buf, id) {
        Ok(header) => header,
        Err(e @ HeaderError::UnknownVersion(_)) => {
            // Its records cannot be read, and must not be dropped.
            return Err(e.into_corruption(&path));
        }
        Err(HeaderError::Damaged(damage)) => {
            let offset = damage.offset;
            let reason = damage.what;
            let corrupt = |reason: String| {
                Ok(SegmentEnd::Corrupt {
                    cut_at: 0,
                    offset,
                    reason,
                })
            };
            // A header is synced before the segment's first record and
            // before any later segment exists.
            if !later.is_empty() {
                return corrupt(reason.into());
            }
            // A crash while the newest segment was being created leaves no
            // record behind it: a frame whose checksum holds after a
            // damaged header proves rot (whatever its payload's layout,
            // which the header no longer tells).
            if checksummed_frame_after(&buf, 0) {
                return corrupt(reason.into());
            }
            // Nor does it leave a link to it: the link is written once the
            // header is durable.
            if previous_link.is_some_and(|(_, to)| to == id) {
                return corrupt(format!(
                    "{reason}, and the segment before names it, so its header was durable"
                ));
            }
            fs.remove_file(&path)?;
            fs.sync_dir(dir)?;
            progress.outcome.tail_bytes_dropped += buf.len() as u64;
            progress.link = previous_link;
            return Ok(SegmentEnd::Read);
        }
    };
    let body = header.body_start();
    let format = header.format.payload;
    let first_seq = match record::decode(&buf[body..], format) {
        Frame::Valid(rec, _) => rec.first_seq,
        _ => expected_after(progress),
    };
    progress.outcome.segments.push((id, first_seq));
    let applied = apply_records(&buf, &header, id, progress, apply);
    if let Some(e) = progress.failed.take() {
        return Err(e);
    }
    let (mut damage, holds_updates) = match applied {
        Ok(read) => read,
        Err(end) => return Ok(end),
    };
    let next_first_seq = later.first().and_then(|&id| first_seq_of(fs, dir, id));
    if damage.is_none() && next_first_seq.is_some_and(|next| next > expected_after(progress)) {
        // Records the next segment's marker says were written here are
        // gone: lost with the unsynced end of the file.
        let missing = DecodeError::new(buf.len(), "records the next segment follows are missing");
        damage = Some((buf.len(), missing));
    }
    let mut end = SegmentEnd::Read;
    if let Some((at, why)) = damage {
        // The judgement first, then the check that failed, where it failed.
        let reason = |judgement: &str| format!("{judgement}: {}", why.what);
        end = match judge_damage(fs, dir, &buf, at, format, later, next_first_seq, progress) {
            Ok(end) => end,
            Err(Damage::Corrupt(judgement)) => SegmentEnd::Corrupt {
                cut_at: at as u64,
                offset: why.offset,
                reason: reason(judgement),
            },
            Err(Damage::Fatal(judgement)) => {
                return Err(Error::corruption(&path, why.offset, reason(judgement)));
            }
            Err(Damage::Io(e)) => return Err(e.into()),
        };
        let nothing_lost = matches!(end, SegmentEnd::Read)
            && next_first_seq == Some(expected_after(progress))
            && progress.expected_next_seq.is_some();
        if end == SegmentEnd::TornTail || nothing_lost {
            cut_torn_tail(fs, &path, at as u64)?;
            progress.outcome.tail_bytes_dropped += written_len(&buf[at..]);
        }
    }
    if !holds_updates {
        progress.outcome.empty_segments.push(id);
    }
    if end == SegmentEnd::Read {
        fs.open(&path, OpenOptions::read_write_create())?
            .sync_data()?;
        progress.last_kept = Some(id);
    }
    Ok(end)
}

/// Applies the segment's records up to its end or its first frame that
/// does not verify; returns that frame's offset and why it does not verify
/// (at an offset of the segment, within the frame), if one does not, and
/// whether a record held updates. Remembers the link the records end in. A frame
/// that does not parse, or a gap in the numbering, ends the segment as
/// corrupt.
fn apply_records(
    buf: &[u8],
    header: &SegmentHeader,
    id: u64,
    progress: &mut Progress,
    apply: &mut Apply<'_>,
) -> std::result::Result<(Option<(usize, DecodeError)>, bool), SegmentEnd> {
    let format = header.format.payload;
    let mut holds_updates = false;
    let mut offset = header.body_start();
    while offset < buf.len() {
        match record::decode(&buf[offset..], format) {
            Frame::Valid(rec, len) => {
                holds_updates |= !rec.ops.is_empty();
                // A link is the last record of its segment; only one read
                // in order counts.
                let link = rec
                    .next_segment
                    .filter(|&to| to > id && header.format.names_database)
                    .map(|to| (id, to));
                if let Some(refused) = apply_record(progress, rec, offset, apply)? {
                    // Values the record points at are not whole: judged
                    // as a frame that does not verify.
                    return Ok((Some((offset, refused.within(offset as u64))), holds_updates));
                }
                progress.link = link;
                offset += len;
            }
            Frame::Malformed(e) => {
                return Err(SegmentEnd::Corrupt {
                    cut_at: offset as u64,
                    offset: offset as u64 + e.offset,
                    reason: e.what.into_owned(),
                });
            }
            Frame::Invalid(e) => {
                return Ok((Some((offset, e.within(offset as u64))), holds_updates));
            }
            Frame::Truncated => {
                let cut = DecodeError::new(offset, "record cut short by the segment's end");
                return Ok((Some((offset, cut)), holds_updates));
            }
        }
    }
    Ok((None, holds_updates))
}

/// A segment's bytes after its header and, if its first frame is a
/// marker (no updates), after that: what a removal loses.
fn records_after_marker(buf: &[u8], id: u64) -> &[u8] {
    let start = check_header(buf, id).map_or(SEGMENT_HEADER_BYTES_V3 as usize, |h| h.body_start());
    let body = buf.get(start..).unwrap_or(&[]);
    match record::decode(body, PayloadFormat::CURRENT) {
        Frame::Valid(rec, len) if rec.ops.is_empty() => &body[len..],
        _ => body,
    }
}

/// The sequence number the next record must have.
fn expected_after(progress: &Progress) -> u64 {
    progress
        .expected_next_seq
        .unwrap_or(progress.covered_seq + 1)
}

/// What an invalid frame at `damaged_at` is (see the module's comment).
/// `Ok(Read)` when the checkpoint covers it or nothing was lost (the
/// caller tells which), `Ok(TornTail)` for a torn tail, `Err` for
/// corruption.
#[expect(
    clippy::too_many_arguments,
    reason = "the damaged segment and what is known of the later ones"
)]
fn judge_damage(
    fs: &dyn FileSystem,
    dir: &Path,
    buf: &[u8],
    damaged_at: usize,
    format: PayloadFormat,
    later: &[u64],
    next_first_seq: Option<u64>,
    progress: &mut Progress,
) -> std::result::Result<SegmentEnd, Damage> {
    if next_first_seq.is_some_and(|seq| seq <= progress.covered_seq + 1) {
        progress.expected_next_seq = None;
        return Ok(SegmentEnd::Read);
    }
    if next_first_seq == Some(expected_after(progress)) {
        // The next segment starts where the records read end: the damaged
        // bytes held no update (a link a power cut tore, a seal, a proof).
        return Ok(SegmentEnd::Read);
    }
    if let Some((_, to)) = progress.link
        && !later.contains(&to)
    {
        if progress.recovery == WalRecovery::PointInTime {
            progress.outcome.missing_segments += 1;
        }
        return Err(Damage::Corrupt(LINK_GONE));
    }
    // Frames after damage can only be found by their magic, which a value
    // may hold too. A record claims only bytes before itself as synced,
    // and follows the damaged one in sequence: a frame inside a value that
    // breaks either is no proof.
    let damaged_seq = expected_after(progress);
    if find_valid_frame(buf, damaged_at + 1, format, |at, rec| {
        rec.synced_through > damaged_at as u64
            && rec.synced_through <= at as u64
            && rec.first_seq >= damaged_seq
    }) {
        return Err(Damage::Corrupt(
            "damaged record before data that was already synced",
        ));
    }
    for (i, &id) in later.iter().enumerate() {
        let Some((buf, header)) = read_later_segment(fs, dir, id, i + 1 == later.len())? else {
            continue;
        };
        if proves_predecessors_synced(&buf, &header) {
            return Err(Damage::Corrupt(
                "damaged record in a segment that a later one proves was synced",
            ));
        }
    }
    Ok(SegmentEnd::TornTail)
}

/// Why a damaged record is not a torn tail: corruption of this log (which
/// point-in-time recovery may cut), corruption that no recovery may drop
/// (a newer build's segment behind it), or a later segment that could not
/// be read to tell.
#[derive(Debug)]
enum Damage {
    Corrupt(&'static str),
    Fatal(&'static str),
    Io(std::io::Error),
}

/// A later segment's bytes and header, read to see whether it proves the
/// damaged one was synced; `None` when it cannot tell: its header is
/// damaged, and it is the newest segment (a crash while it was created).
/// A failed read is an error, not "no proof": the damaged segment would
/// be cut and the later ones removed on the strength of it. So is a newer
/// build's header (its records cannot be read, and must not be dropped),
/// and a damaged header with segments after it (a header is synced before
/// any later segment exists).
fn read_later_segment(
    fs: &dyn FileSystem,
    dir: &Path,
    id: u64,
    newest: bool,
) -> std::result::Result<Option<(Vec<u8>, SegmentHeader)>, Damage> {
    let path = dir.join(segment_file_name(id));
    let buf = fs
        .open(&path, OpenOptions::read_only())
        .and_then(|f| read_all(&*f))
        .map_err(Damage::Io)?;
    match check_header(&buf, id) {
        Ok(header) => Ok(Some((buf, header))),
        Err(HeaderError::UnknownVersion(_)) => Err(Damage::Fatal(
            "damaged record before a segment of a newer format",
        )),
        Err(HeaderError::Damaged(_)) if newest => Ok(None),
        Err(HeaderError::Damaged(_)) => Err(Damage::Corrupt(
            "damaged record before a segment whose header is damaged",
        )),
    }
}

/// Segment `id`'s first sequence number, from its first frame (from
/// version 3 on, its marker) when that is valid. Reads only the start of
/// the file unless the first frame is longer.
fn first_seq_of(fs: &dyn FileSystem, dir: &Path, id: u64) -> Option<u64> {
    const START_BYTES: u64 = 4096;
    let file = fs
        .open(&dir.join(segment_file_name(id)), OpenOptions::read_only())
        .ok()?;
    let len = file.len().ok()?;
    let mut start = vec![0u8; len.min(START_BYTES) as usize];
    crate::io::read_exact_at(&*file, &mut start, 0).ok()?;
    let header = check_header(&start, id).ok()?;
    let body = header.body_start();
    match record::decode(&start[body..], header.format.payload) {
        Frame::Valid(rec, _) => Some(rec.first_seq),
        Frame::Truncated if len > START_BYTES => {
            let whole = read_all(&*file).ok()?;
            match record::decode(&whole[body..], header.format.payload) {
                Frame::Valid(rec, _) => Some(rec.first_seq),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Builds before format version 3 synced a segment before creating the
/// next; from version 3 on, a record claiming at least the header as
/// synced was written once every earlier segment still needed was synced.
/// Records are read in order from the marker, up to the first that does
/// not verify: a frame found by its magic alone may lie inside a value,
/// and a proof is never written after bytes that were not synced with it.
fn proves_predecessors_synced(buf: &[u8], header: &SegmentHeader) -> bool {
    if !header.format.opens_with_marker {
        return true;
    }
    let mut offset = header.body_start();
    while let Frame::Valid(rec, len) = record::decode(&buf[offset..], header.format.payload) {
        if rec.synced_through >= header.format.header_bytes() {
            return true;
        }
        offset += len;
    }
    false
}

/// Removes the segments after the end of the log: their records follow a
/// gap. Their bytes are added to `dropped`.
fn remove_after_tail(
    fs: &dyn FileSystem,
    dir: &Path,
    later: &[u64],
    dropped: &mut u64,
) -> Result<()> {
    for &id in later {
        let path = dir.join(segment_file_name(id));
        let buf = read_all(&*fs.open(&path, OpenOptions::read_only())?)?;
        *dropped += written_len(records_after_marker(&buf, id));
        fs.remove_file(&path)?;
    }
    if !later.is_empty() {
        fs.sync_dir(dir)?;
    }
    Ok(())
}

/// Ends the log at `offset` of the segment at `path` (point-in-time
/// recovery): cut there, or removed when the damage is in its header.
fn end_log_at(
    fs: &dyn FileSystem,
    dir: &Path,
    path: &Path,
    offset: u64,
    outcome: &mut ReplayOutcome,
) -> Result<()> {
    let buf = read_all(&*fs.open(path, OpenOptions::read_only())?)?;
    let at = (offset as usize).min(buf.len());
    if at < SEGMENT_HEADER_BYTES_V3 as usize {
        outcome.recovery_bytes_dropped += written_len(&buf);
        fs.remove_file(path)?;
        fs.sync_dir(dir)?;
        outcome
            .segments
            .retain(|&(id, _)| dir.join(segment_file_name(id)) != path);
        return Ok(());
    }
    outcome.recovery_bytes_dropped += written_len(&buf[at..]);
    cut_torn_tail(fs, path, at as u64)
}

/// Applies one record; `Ok(Some(why))` when `apply` refused it (its
/// value pointers do not verify), which leaves the progress as before it.
fn apply_record(
    progress: &mut Progress,
    rec: record::Record,
    offset: usize,
    apply: &mut Apply<'_>,
) -> std::result::Result<Option<DecodeError>, SegmentEnd> {
    let first = rec.first_seq;
    let next = first + rec.ops.len() as u64;
    if next <= progress.covered_seq + 1 {
        // Already in the checkpoint. Segments trimmed out of order by a
        // crash may leave gaps among such records; they do not matter.
        progress.expected_next_seq = None;
        return Ok(None);
    }
    let gap = match progress.expected_next_seq {
        Some(expected) => first != expected,
        // The oldest surviving record may predate the checkpoint, but none
        // after the checkpoint may be missing.
        None => first > progress.covered_seq + 1,
    };
    if gap {
        return Err(SegmentEnd::Corrupt {
            cut_at: offset as u64,
            offset: offset as u64,
            reason: format!("{GAP} before record starting at {first}"),
        });
    }
    if rec.ops.is_empty() {
        // A marker, seal, proof or link: no updates.
        progress.expected_next_seq = Some(next);
        return Ok(None);
    }
    // A record straddling the checkpoint cannot occur (a MemTable holds
    // whole batches), so a record is either covered or replayed whole.
    match apply(first, &rec.ops) {
        Ok(()) => {}
        Err(Refused::NotWhole(why)) => return Ok(Some(why)),
        Err(Refused::Failed(e)) => {
            progress.failed = Some(e);
            return Err(SegmentEnd::Read);
        }
    }
    progress.expected_next_seq = Some(next);
    progress.outcome.records_applied += 1;
    progress.outcome.last_seq = next - 1;
    Ok(None)
}

/// Whether a frame whose checksum holds (its payload parsing or not)
/// starts at or after `from`, other than a marker right after the header
/// (of either length): the marker is written with the header, so a torn
/// creation can leave it beside a damaged header.
fn checksummed_frame_after(buf: &[u8], from: usize) -> bool {
    frame_starts(buf, from).any(
        |at| match record::decode(&buf[at..], PayloadFormat::CURRENT) {
            Frame::Valid(rec, _) => {
                let after_header =
                    at == SEGMENT_HEADER_BYTES_V3 as usize || at == SEGMENT_HEADER_BYTES as usize;
                !(after_header && rec.ops.is_empty())
            }
            Frame::Malformed(_) => true,
            Frame::Truncated | Frame::Invalid(_) => false,
        },
    )
}

/// Offsets at or after `from` where a frame's magic is.
fn frame_starts(buf: &[u8], from: usize) -> impl Iterator<Item = usize> + '_ {
    let magic = FRAME_MAGIC.to_le_bytes();
    (from..buf.len().saturating_sub(3)).filter(move |&at| buf[at..at + 4] == magic)
}

/// Whether a valid frame that `wanted` accepts (given its offset) starts
/// at or after `from`.
fn find_valid_frame(
    buf: &[u8],
    from: usize,
    format: PayloadFormat,
    wanted: impl Fn(usize, &record::Record) -> bool,
) -> bool {
    frame_starts(buf, from).any(
        |at| matches!(record::decode(&buf[at..], format), Frame::Valid(rec, _) if wanted(at, &rec)),
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
