//! The log as the engine uses it: numbered, framed groups of batches in a
//! chain of segments that checkpoints trim from the front.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::io::FileSystem;
use crate::wal::WalPosition;
use crate::wal::binding::LogBinding;
use crate::wal::record;
use crate::wal::replay::{ReplayOutcome, replay};
use crate::wal::segment::{SEGMENT_HEADER_BYTES, SegmentWriter, WalIo, segment_file_name};
use crate::wal::verify::{WalReport, verify};
use crate::{Result, WriteBatch};

/// A WAL check to run without holding the log.
#[derive(Debug)]
pub(crate) struct WalVerification {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    segments: Vec<(u64, u64)>,
    binding: LogBinding,
}

impl WalVerification {
    pub fn verify(&self) -> Result<WalReport> {
        verify(&*self.fs, &self.dir, &self.segments, &self.binding)
    }

    /// The error for segments that were live and are gone, once the log
    /// says they are still live (not trimmed meanwhile).
    pub fn missing(&self, still_live: &[u64]) -> Result<()> {
        match still_live.first() {
            None => Ok(()),
            Some(&id) => Err(crate::Error::corruption(
                self.dir.join(segment_file_name(id)),
                0,
                format!("WAL segment {id} is missing: it holds records no checkpoint covers"),
            )),
        }
    }
}

/// Segments a checkpoint covers, out of the log and still on disk.
#[derive(Debug)]
#[must_use = "the segments stay on disk until removed"]
pub(crate) struct CoveredSegments {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    ids: Vec<u64>,
}

impl CoveredSegments {
    /// Deletes the segment files and syncs the directory; returns how many.
    /// A crash before that leaves them for the next open, which skips
    /// records the checkpoint covers, as after a crash before the detach.
    pub fn remove(self) -> io::Result<usize> {
        for &id in &self.ids {
            self.fs.remove_file(&self.dir.join(segment_file_name(id)))?;
        }
        if !self.ids.is_empty() {
            self.fs.sync_dir(&self.dir)?;
        }
        Ok(self.ids.len())
    }

    /// Deletes the segment files without syncing the directory: a crash
    /// before the next directory sync brings them back, as when one hits
    /// `remove` between its deletions and its sync.
    #[cfg(test)]
    pub fn remove_unsynced(self) -> io::Result<usize> {
        for &id in &self.ids {
            self.fs.remove_file(&self.dir.join(segment_file_name(id)))?;
        }
        Ok(self.ids.len())
    }
}

/// The write side of the WAL. Owned by one group-commit leader at a time.
#[derive(Debug)]
pub(crate) struct Wal {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    /// The database the segments belong to, as the superblock says.
    binding: LogBinding,
    segment_size_bytes: u64,
    writer: SegmentWriter,
    /// Live segments, oldest first: (id, sequence number of its first record).
    segments: VecDeque<(u64, u64)>,
    next_seq: u64,
    encode_buf: Vec<u8>,
    /// Rotated segments not synced yet, oldest first. A rotation does not
    /// sync the finished segment: most are covered by a checkpoint and
    /// removed before the kernel writes them back, so their bytes never
    /// reach the disk. The first sync after a rotation syncs them, before
    /// the current segment, so that what it makes durable has no gap.
    unsynced: Vec<(u64, Arc<dyn crate::io::File>)>,
    /// No record of the current segment lacks a later proof that it was
    /// synced, and no earlier segment lacks a proof in this one (see
    /// `seal`).
    sealed: bool,
    /// A write or sync of the log failed. Nothing is written or synced
    /// after that: a retried `fsync` can report success for pages the
    /// kernel already dropped.
    failed: bool,
    /// Run before every sync of the log: makes the value records its
    /// records point at durable first (`docs/durability.md`).
    before_sync: Option<BeforeSync>,
}

/// What the log runs before each of its syncs (`Wal::set_before_sync`).
#[derive(Clone)]
pub(crate) struct BeforeSync(pub std::sync::Arc<dyn Fn() -> io::Result<()> + Send + Sync>);

impl std::fmt::Debug for BeforeSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BeforeSync")
    }
}

impl Wal {
    /// Replays every record above `covered_seq` into `apply`, then starts a
    /// fresh segment for new records.
    /// The log must be the one `binding` describes (`wal::binding`).
    pub fn open(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        covered_seq: u64,
        binding: &LogBinding,
        segment_size_bytes: u64,
        apply: &mut super::replay::Apply<'_>,
    ) -> Result<(Wal, ReplayOutcome)> {
        let replayed = replay(&*fs, dir, covered_seq, binding, apply)?;
        let next_seq = replayed.last_seq + 1;
        let id = replayed.next_segment_id;
        // Replay synced every segment it kept; the new one's marker says
        // so before an empty one, whose removal would lose that proof, is
        // removed. Its id becomes the WAL floor once the caller records it.
        let writer = SegmentWriter::create(
            fs.clone(),
            dir,
            id,
            binding.database_id,
            segment_size_bytes,
            next_seq,
            true,
        )?;
        for &empty in &replayed.empty_segments {
            fs.remove_file(&dir.join(segment_file_name(empty)))?;
        }
        let mut segments: VecDeque<_> = replayed
            .segments
            .iter()
            .copied()
            .filter(|(id, _)| !replayed.empty_segments.contains(id))
            .collect();
        segments.push_back((id, next_seq));
        let mut wal = Wal {
            fs,
            dir: dir.to_path_buf(),
            binding: *binding,
            segment_size_bytes,
            writer,
            segments,
            next_seq,
            encode_buf: Vec::new(),
            unsynced: Vec::new(),
            sealed: true,
            failed: false,
            before_sync: None,
        };
        // Segments a crash kept from being removed after their checkpoint:
        // a power cut may have torn them, which `Db::check` would report.
        wal.detach_covered(covered_seq).remove()?;
        Ok((wal, replayed))
    }

    /// Where the next record will be logged, if the current segment were
    /// empty: the start of the current segment. Right after a rotation this
    /// is exactly where the next MemTable's records begin.
    pub fn segment_start(&self) -> WalPosition {
        WalPosition {
            segment_id: self.writer.segment_id(),
            offset_bytes: SEGMENT_HEADER_BYTES,
        }
    }

    /// Sequence number the next entry will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Id of the segment being written.
    pub fn current_segment_id(&self) -> u64 {
        self.writer.segment_id()
    }

    /// Those of `ids` that are live segments of the log (not trimmed).
    pub fn still_live(&self, ids: &[u64]) -> Vec<u64> {
        ids.iter()
            .copied()
            .filter(|id| self.segments.iter().any(|(live, _)| live == id))
            .collect()
    }

    /// Logs the batches as consecutive records with one `write`, and syncs
    /// when asked. Returns the first sequence number of the group.
    pub fn append_group<'a>(
        &mut self,
        batches: impl Iterator<Item = &'a WriteBatch> + Clone,
        sync: bool,
    ) -> io::Result<u64> {
        self.check_failed()?;
        let result = self.append_group_unchecked(batches, sync);
        self.note_failure(result)
    }

    fn append_group_unchecked<'a>(
        &mut self,
        batches: impl Iterator<Item = &'a WriteBatch> + Clone,
        sync: bool,
    ) -> io::Result<u64> {
        if self.writer.is_full() {
            self.rotate_unchecked()?;
        }
        if sync {
            // Earlier segments first, so that this group's records carry
            // the proof that they are durable (`synced_through`).
            self.sync_predecessors()?;
        }
        let first_seq = self.next_seq;
        let synced_through = self.synced_through();
        self.encode_buf.clear();
        let mut seq = first_seq;
        for batch in batches {
            record::encode(&mut self.encode_buf, seq, synced_through, &batch.ops);
            seq += batch.len() as u64;
        }
        if !self.encode_buf.is_empty() {
            self.sealed = false;
            self.writer.append(&self.encode_buf)?;
        }
        if sync {
            self.sync_unchecked()?;
        }
        self.next_seq = seq;
        Ok(first_seq)
    }

    /// What a record written now may claim as synced: the bytes of the
    /// current segment known durable, once no earlier segment still needed
    /// is unsynced, and nothing (zero) before that. Replay takes a record
    /// that claims more than the header as proof that every earlier
    /// segment the checkpoint does not cover was durable.
    fn synced_through(&self) -> u64 {
        if self.unsynced.is_empty() {
            self.writer.synced_len_bytes()
        } else {
            0
        }
    }

    /// Makes every record so far durable.
    pub fn sync(&mut self) -> io::Result<()> {
        self.check_failed()?;
        let result = self.sync_unchecked();
        self.note_failure(result)
    }

    /// Has every later sync of the log run `hook` first.
    pub fn set_before_sync(&mut self, hook: BeforeSync) {
        self.before_sync = Some(hook);
    }

    /// Syncs the rotated segments still unsynced, oldest first, then the
    /// current one.
    fn sync_unchecked(&mut self) -> io::Result<()> {
        self.run_before_sync()?;
        if !self.unsynced.is_empty() {
            self.sync_predecessors()?;
            // Nothing written since the rotation proves the earlier
            // segments durable; a record without updates does, and the
            // sync below that the caller asked for covers it. Without it,
            // rot in their last records after a crash would be taken for
            // a torn tail, and everything after dropped.
            let current_synced = self.writer.records_synced();
            self.append_proof()?;
            self.writer.sync()?;
            // Then it proves this segment's records too: a close need not
            // seal again.
            self.sealed |= current_synced;
            return Ok(());
        }
        self.writer.sync()
    }

    /// Appends a record without updates whose `synced_through` claims
    /// what is synced now (a seal's layout; `format.md`, "Payload").
    fn append_proof(&mut self) -> io::Result<()> {
        self.encode_buf.clear();
        let synced_through = self.synced_through();
        record::encode(&mut self.encode_buf, self.next_seq, synced_through, &[]);
        self.writer.append(&self.encode_buf)
    }

    fn run_before_sync(&self) -> io::Result<()> {
        match &self.before_sync {
            Some(hook) => (hook.0)(),
            None => Ok(()),
        }
    }

    fn sync_predecessors(&mut self) -> io::Result<()> {
        if !self.unsynced.is_empty() {
            self.run_before_sync()?;
        }
        for (_, file) in &self.unsynced {
            file.sync_data()?;
            self.writer.count_sync();
        }
        self.unsynced.clear();
        Ok(())
    }

    /// Makes every record durable and proves it on disk, for a clean close:
    /// after the sync, appends a record with no updates whose
    /// `synced_through` covers everything before it, and syncs that too.
    /// Recovery then reports later damage to the records before it as
    /// corruption instead of dropping them as a torn tail. Costs a second
    /// sync, so only the close pays it, and only when the segment holds
    /// records written since the last seal.
    pub fn seal(&mut self) -> io::Result<()> {
        self.check_failed()?;
        let result = self.seal_unchecked();
        self.note_failure(result)
    }

    fn seal_unchecked(&mut self) -> io::Result<()> {
        self.sync_unchecked()?;
        if self.sealed {
            // Nothing left to prove, but the space reserved ahead still
            // goes back (a no-op when it already has).
            return self.writer.finish();
        }
        self.append_proof()?;
        self.writer.finish()?;
        self.sealed = true;
        Ok(())
    }

    /// Gives back the storage reserved ahead of the appends, for a
    /// database whose writes have stopped; the next append reserves again.
    pub fn release_reserve(&mut self) -> io::Result<()> {
        self.check_failed()?;
        let result = self.writer.release_reserve();
        self.note_failure(result)
    }

    /// Closes the current segment (cut to its last record, not synced) and
    /// starts the next, so that segment boundaries can follow MemTable
    /// boundaries.
    pub fn rotate(&mut self) -> io::Result<()> {
        self.check_failed()?;
        let result = self.rotate_unchecked();
        self.note_failure(result)
    }

    fn rotate_unchecked(&mut self) -> io::Result<()> {
        // A segment whose records are all durable already (the last group
        // was synced, or `flush_wal` came last) is finished durably, length
        // included, for one cheap `fdatasync`: the next marker can then
        // prove it, and rot in its last records is reported, not dropped
        // as a torn tail.
        let all_synced = self.unsynced.is_empty() && self.writer.records_synced();
        if all_synced {
            self.writer.finish()?;
        } else {
            self.writer.cut_reserve()?;
        }
        let id = self.writer.segment_id() + 1;
        let mut next = SegmentWriter::create(
            self.fs.clone(),
            &self.dir,
            id,
            self.binding.database_id,
            self.segment_size_bytes,
            self.next_seq,
            all_synced,
        )?;
        // The finished segment names the next one, now that the next one's
        // header is durable: losing it, or all after it, is then noticed
        // (`docs/format.md`, "Link"). Not synced here: the next sync syncs
        // the finished segment, link and all, before the current one.
        let synced_through = self.synced_through();
        self.encode_buf.clear();
        record::encode_link(&mut self.encode_buf, self.next_seq, synced_through, id);
        self.writer.append_after_cut(&self.encode_buf)?;
        next.add_unreported(self.writer.take_io());
        self.unsynced
            .push((self.writer.segment_id(), self.writer.file()));
        // Until a sync, nothing proves the older segments durable: a clean
        // close must seal, even if this segment stays empty. A durable
        // finish is proven by the new marker.
        self.sealed = all_synced;
        self.writer = next;
        self.segments.push_back((id, self.next_seq));
        Ok(())
    }

    /// Removes the segments whose every record is at or below `covered_seq`
    /// (now in a durable checkpoint). The current segment always stays.
    /// Returns how many were removed.
    #[cfg(test)]
    pub fn trim(&mut self, covered_seq: u64) -> io::Result<usize> {
        self.detach_covered(covered_seq).remove()
    }

    /// Takes the segments whose every record is at or below `covered_seq`
    /// (now in a durable checkpoint) out of the log, and returns them for
    /// removal. The current segment always stays. Removing a 64 MiB file
    /// took 55-70 ms on ext4 here; done apart from the log, it does not
    /// hold up the writers' appends.
    pub fn detach_covered(&mut self, covered_seq: u64) -> CoveredSegments {
        let mut ids = Vec::new();
        while self.segments.len() > 1 && self.segments[1].1 <= covered_seq + 1 {
            ids.extend(self.segments.pop_front().map(|(id, _)| id));
        }
        // Covered segments need no sync any more.
        self.unsynced.retain(|(id, _)| !ids.contains(id));
        CoveredSegments {
            fs: self.fs.clone(),
            dir: self.dir.clone(),
            ids,
        }
    }

    /// Live segments as (id, bytes written).
    fn segment_lengths(&self) -> io::Result<Vec<(u64, u64)>> {
        let current = self.writer.segment_id();
        self.segments
            .iter()
            .map(|&(id, _)| {
                if id == current {
                    return Ok((id, self.writer.len_bytes()));
                }
                let path = self.dir.join(segment_file_name(id));
                match self.fs.open(&path, crate::io::OpenOptions::read_only()) {
                    Ok(file) => Ok((id, file.len()?)),
                    // Trimmed meanwhile, or lost: the check tells which.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok((id, 0)),
                    Err(e) => Err(e),
                }
            })
            .collect()
    }

    /// Checks every record written so far (`Db::check`). Only the lengths
    /// are taken under the caller's lock; call `verify` on the result after
    /// releasing it, so writers are not held up by the reads.
    pub fn verification(&self) -> io::Result<WalVerification> {
        Ok(WalVerification {
            fs: self.fs.clone(),
            dir: self.dir.clone(),
            segments: self.segment_lengths()?,
            binding: self.binding,
        })
    }

    /// WAL I/O since the last call.
    pub fn take_io(&mut self) -> WalIo {
        self.writer.take_io()
    }

    fn check_failed(&self) -> io::Result<()> {
        if self.failed {
            return Err(io::Error::other(
                "an earlier write or sync of the WAL failed",
            ));
        }
        Ok(())
    }

    fn note_failure<T>(&mut self, result: io::Result<T>) -> io::Result<T> {
        self.failed |= result.is_err();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::FaultFs;
    use crate::wal::segment::list_segments;

    const DIR: &str = "/db/wal";
    /// The identity of the database these logs belong to.
    const DB_ID: u64 = 0xdb;

    fn binding() -> LogBinding {
        LogBinding::new(DB_ID)
    }

    /// Opens the log on `fs` with `covered_seq`: the log, the sequence
    /// numbers replay found, and what it reported.
    fn try_open(fs: &FaultFs, covered_seq: u64) -> crate::Result<(Wal, Vec<u64>, ReplayOutcome)> {
        let mut seen = Vec::new();
        let (wal, outcome) = Wal::open(
            Arc::new(fs.clone()),
            Path::new(DIR),
            covered_seq,
            &binding(),
            1 << 20,
            &mut |first, ops| {
                seen.extend(first..first + ops.len() as u64);
                Ok(())
            },
        )?;
        Ok((wal, seen, outcome))
    }

    fn open(fs: &FaultFs, covered_seq: u64) -> (Wal, Vec<u64>) {
        let (wal, seen, _) = try_open(fs, covered_seq).unwrap();
        (wal, seen)
    }

    /// An empty file system holding a new log.
    fn new_log() -> (FaultFs, Wal) {
        let fs = FaultFs::new();
        fs.create_dir_all(Path::new(DIR)).unwrap();
        let (wal, _) = open(&fs, 0);
        (fs, wal)
    }

    /// Replay's verdict for damage a later segment proves was synced.
    fn assert_proven_by_a_later_segment(err: &crate::Error) {
        assert!(
            matches!(err, crate::Error::Corruption { reason, .. } if reason.contains("later one proves")),
            "{err}"
        );
    }

    fn batch(n: usize) -> WriteBatch {
        let mut b = WriteBatch::new();
        for i in 0..n {
            b.put(format!("k{i}"), b"v");
        }
        b
    }

    #[test]
    fn reopening_without_writes_leaves_no_empty_segments_behind() {
        let (fs, mut wal) = new_log();
        wal.append_group([&batch(3)].into_iter(), true).unwrap();
        drop(wal);
        for _ in 0..5 {
            let (wal, seen) = open(&fs, 0);
            assert_eq!(seen, vec![1, 2, 3]);
            drop(wal);
        }
        // The segment with the records, and the one the last open started.
        assert_eq!(fs.list_dir(Path::new(DIR)).unwrap().len(), 2);
    }

    #[test]
    fn trim_removes_only_fully_covered_segments() {
        let (fs, mut wal) = new_log();
        // Segments: [1..=3], [4..=5], [6..=9], and the current one from 10.
        wal.append_group([batch(3)].iter(), false).unwrap();
        wal.rotate().unwrap();
        wal.append_group([batch(2)].iter(), false).unwrap();
        wal.rotate().unwrap();
        wal.append_group([batch(4)].iter(), true).unwrap();
        wal.rotate().unwrap();
        assert_eq!(wal.segment_lengths().unwrap().len(), 4);
        assert_eq!(wal.trim(2).unwrap(), 0, "segment 1 still holds seq 3");
        assert_eq!(wal.trim(3).unwrap(), 1);
        assert_eq!(wal.trim(8).unwrap(), 1, "segment 3 still holds seq 9");
        assert_eq!(wal.trim(9).unwrap(), 1);
        assert_eq!(wal.trim(100).unwrap(), 0, "the current segment stays");
        assert_eq!(wal.segment_lengths().unwrap().len(), 1);
        drop(wal);
        let (wal, seen) = open(&fs, 9);
        assert!(seen.is_empty());
        assert_eq!(wal.next_seq(), 10);
    }

    #[test]
    fn replay_skips_covered_records_and_keeps_the_rest() {
        let (fs, mut wal) = new_log();
        wal.append_group([batch(3), batch(2)].iter(), false)
            .unwrap();
        wal.rotate().unwrap();
        wal.append_group([batch(4)].iter(), true).unwrap();
        drop(wal);
        let (wal, seen) = open(&fs, 3);
        assert_eq!(seen, (4..=9).collect::<Vec<_>>());
        assert_eq!(wal.next_seq(), 10);
    }

    #[test]
    fn gaps_among_covered_records_are_harmless() {
        let (fs, mut wal) = new_log();
        for _ in 0..3 {
            wal.append_group([batch(2)].iter(), false).unwrap();
            wal.rotate().unwrap();
        }
        wal.append_group([batch(2)].iter(), true).unwrap();
        drop(wal);
        // As if a crash undid the removal of segment 1 but not of segment 2.
        fs.remove_file(&Path::new(DIR).join(segment_file_name(2)))
            .unwrap();
        let (wal, seen) = open(&fs, 6);
        assert_eq!(seen, vec![7, 8]);
        assert_eq!(wal.next_seq(), 9);
    }

    /// The real file system maps segments for appends: a process that dies
    /// without closing leaves the newest segment with zeros reserved past
    /// its last record, and rotated segments cut to their last record.
    #[test]
    fn mapped_segments_replay_after_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn FileSystem> = Arc::new(crate::io::RealFs);
        let open_real = |covered_seq| {
            let mut seen = Vec::new();
            let (wal, outcome) = Wal::open(
                fs.clone(),
                dir.path(),
                covered_seq,
                &binding(),
                1 << 20,
                &mut |first, ops| {
                    seen.extend(first..first + ops.len() as u64);
                    Ok(())
                },
            )
            .unwrap();
            (wal, outcome, seen)
        };
        let (mut wal, _, _) = open_real(0);
        // 3 groups of 100 batches, ~40 KiB each; a rotation after the first.
        for group in 0..3 {
            let batches: Vec<WriteBatch> = (0..100).map(|_| batch(3)).collect();
            wal.append_group(batches.iter(), group == 1).unwrap();
            if group == 0 {
                wal.rotate().unwrap();
            }
        }
        let lengths = wal.segment_lengths().unwrap();
        // As if killed: no seal, nothing cut.
        wal.writer.stop_reserving_ahead();
        std::mem::forget(wal);
        let file_len = |id| {
            let path = dir.path().join(segment_file_name(id));
            fs.open(&path, crate::io::OpenOptions::read_only())
                .unwrap()
                .len()
                .unwrap()
        };
        let (old, newest) = (lengths[0], lengths[1]);
        assert_eq!(
            file_len(old.0),
            old.1,
            "a rotated segment ends with its last record"
        );
        assert!(file_len(newest.0) > newest.1, "storage was reserved ahead");
        let (wal, outcome, seen) = open_real(0);
        assert_eq!(seen, (1..=900).collect::<Vec<_>>());
        assert_eq!(
            outcome.tail_bytes_dropped, 0,
            "unwritten zeros are no torn tail"
        );
        assert_eq!(file_len(newest.0), newest.1, "replay cut the zeros");
        drop(wal);
        let (_, outcome, seen) = open_real(0);
        assert_eq!(seen.len(), 900);
        assert_eq!(outcome.tail_bytes_dropped, 0);
    }

    #[test]
    fn missing_records_after_the_checkpoint_are_corruption() {
        let (fs, mut wal) = new_log();
        wal.append_group([batch(3)].iter(), false).unwrap();
        wal.rotate().unwrap();
        wal.append_group([batch(3)].iter(), true).unwrap();
        wal.trim(3).unwrap();
        drop(wal);
        // The checkpoint claims to cover only 1..=2, but 3 is gone.
        let err = replay_all(&fs, 2).unwrap_err();
        assert!(matches!(err, crate::Error::Corruption { .. }), "{err}");
    }

    /// Three records (one group, synced or not), then a kill: the process
    /// ends without syncing or sealing, the OS keeps what was written.
    /// With `torn` the kill also cut the next record's copy in half,
    /// `Some(true)` with those bytes reaching the disk.
    fn three_records_then_a_kill(fs: &FaultFs, synced: bool, torn: Option<bool>) {
        fs.create_dir_all(Path::new(DIR)).unwrap();
        let (mut wal, _) = open(fs, 0);
        wal.append_group([batch(3)].iter(), synced).unwrap();
        let (id, end) = (wal.writer.segment_id(), wal.writer.len_bytes());
        std::mem::forget(wal);
        if let Some(torn_bytes_synced) = torn {
            let mut record = Vec::new();
            record::encode(&mut record, 4, 0, &batch(2).ops);
            record.truncate(record.len() / 2);
            let path = Path::new(DIR).join(segment_file_name(id));
            let file = fs
                .open(&path, crate::io::OpenOptions::read_write_create())
                .unwrap();
            file.write_at(&record, end).unwrap();
            if torn_bytes_synced {
                file.sync_data().unwrap();
            }
        }
    }

    /// Reopens (replaying records 1-3), writes two more with `sync`, cuts
    /// the power, and returns the sequence numbers replay then finds.
    fn sync_write_then_power_cut(fs: &FaultFs) -> Vec<u64> {
        let (mut wal, seen) = open(fs, 0);
        assert_eq!(seen, vec![1, 2, 3]);
        wal.append_group([batch(2)].iter(), true).unwrap();
        std::mem::forget(wal);
        let after_power_cut = fs.crash(crate::io::CrashMode::DropUnsynced);
        replay_all(&after_power_cut, 0)
            .unwrap_or_else(|e| panic!("reopen after the power cut: {e}"))
            .0
    }

    /// kill -9 leaves acknowledged unsynced records in the OS's cache;
    /// the reopened log replays them and numbers new records after them.
    /// A later sync write promises "the record and every record before
    /// it" are on stable storage, so a power cut after it must find them.
    #[test]
    fn records_replayed_after_a_kill_survive_a_power_cut_after_a_sync_write() {
        let fs = FaultFs::new();
        three_records_then_a_kill(&fs, false, None);
        assert_eq!(sync_write_then_power_cut(&fs), (1..=5).collect::<Vec<_>>());
    }

    /// As above, with the kill tearing the last record (a copy into the
    /// mapping cut short): replay cuts the torn tail, and the records
    /// before it must be as durable as when no tail was torn.
    #[test]
    fn records_before_a_torn_tail_survive_a_power_cut_after_a_sync_write() {
        let fs = FaultFs::new();
        three_records_then_a_kill(&fs, false, Some(false));
        assert_eq!(sync_write_then_power_cut(&fs), (1..=5).collect::<Vec<_>>());
    }

    /// A torn tail cut off at replay must stay cut: records synced before
    /// the kill, torn bytes after them on disk, reopen (cut), a sync write
    /// in the new segment, then a power cut. If the cut was not made
    /// durable, the torn bytes come back in what is now an older segment.
    #[test]
    fn a_torn_tail_cut_at_replay_stays_cut_after_a_power_cut() {
        let fs = FaultFs::new();
        three_records_then_a_kill(&fs, true, Some(true));
        assert_eq!(sync_write_then_power_cut(&fs), (1..=5).collect::<Vec<_>>());
    }

    /// Replays `fs` with `covered_seq`; the sequence numbers found and
    /// what replay reported.
    fn replay_all(fs: &FaultFs, covered_seq: u64) -> crate::Result<(Vec<u64>, ReplayOutcome)> {
        try_open(fs, covered_seq).map(|(_, seen, outcome)| (seen, outcome))
    }

    /// Records 1 and 2-3 in segment 1, a rotation, records 4-5 in segment 2
    /// (synced when `sync_last`), and the log abandoned as by a crash.
    fn two_segments(sync_last: bool) -> FaultFs {
        let (fs, mut wal) = new_log();
        wal.append_group([batch(1), batch(2)].iter(), false)
            .unwrap();
        wal.rotate().unwrap();
        wal.append_group([batch(2)].iter(), sync_last).unwrap();
        std::mem::forget(wal);
        fs
    }

    #[test]
    fn a_rotation_does_not_sync_the_finished_segment() {
        let fs = two_segments(false);
        let crashed = fs.crash(crate::io::CrashMode::DropUnsynced);
        let (seen, outcome) = replay_all(&crashed, 0).unwrap();
        assert!(seen.is_empty(), "nothing was synced: {seen:?}");
        // Only the markers were left: segment 2 followed a gap, segment 1
        // holds no update; 3 is the open's new segment.
        assert_eq!(outcome.tail_bytes_dropped, 0);
        assert_eq!(list_segments(&crashed, Path::new(DIR)).unwrap(), vec![3]);
    }

    #[test]
    fn a_sync_after_a_rotation_syncs_the_earlier_segments_first() {
        let fs = two_segments(true);
        let crashed = fs.crash(crate::io::CrashMode::DropUnsynced);
        assert_eq!(replay_all(&crashed, 0).unwrap().0, vec![1, 2, 3, 4, 5]);
    }

    /// Any subset of the unsynced writes of both segments may survive:
    /// replay keeps a prefix, removes what follows a gap, and the next
    /// open finds the same prefix.
    #[test]
    fn unsynced_segments_torn_anywhere_replay_as_a_prefix() {
        let fs = two_segments(false);
        let mut lengths = std::collections::BTreeSet::new();
        for seed in 0..200 {
            for mode in [
                crate::io::CrashMode::KeepRandomSubset { seed },
                crate::io::CrashMode::TearLastWrite { seed },
            ] {
                let crashed = fs.crash(mode);
                let (seen, _) = replay_all(&crashed, 0).unwrap();
                let prefix: Vec<u64> = (1..=seen.len() as u64).collect();
                assert_eq!(seen, prefix, "{mode:?}");
                lengths.insert(seen.len());
                let (again, outcome) = replay_all(&crashed, 0).unwrap();
                assert_eq!(again, seen, "{mode:?}: a second open");
                assert_eq!(outcome.tail_bytes_dropped, 0, "{mode:?}");
            }
        }
        // Whole records survive: 0, 1, 3 or 5 sequence numbers.
        assert!(lengths.contains(&0) && lengths.contains(&5), "{lengths:?}");
    }

    /// Flips a bit in the last byte of segment `id`'s last record, the
    /// link a rotation wrote after it aside.
    fn flip_last_byte(fs: &FaultFs, id: u64) {
        let path = Path::new(DIR).join(segment_file_name(id));
        let bytes =
            crate::io::read_all(&*fs.open(&path, crate::io::OpenOptions::read_only()).unwrap())
                .unwrap();
        let header = crate::wal::segment::check_header(&bytes, id).unwrap();
        let (mut offset, mut last_end) = (header.body_start(), 0);
        while let record::Frame::Valid(rec, len) =
            record::decode(&bytes[offset..], header.format.payload)
        {
            if rec.next_segment.is_none() {
                last_end = offset + len;
            }
            offset += len;
        }
        fs.flip_bit(&path, (last_end as u64 - 1) * 8).unwrap();
    }

    #[test]
    fn damage_in_a_segment_a_later_sync_covered_is_corruption() {
        let fs = two_segments(true);
        flip_last_byte(&fs, 1);
        let err = replay_all(&fs, 0).unwrap_err();
        assert_proven_by_a_later_segment(&err);
    }

    #[test]
    fn damage_in_an_unsynced_segment_without_proof_is_a_torn_tail() {
        let fs = two_segments(false);
        flip_last_byte(&fs, 1);
        let (seen, outcome) = replay_all(&fs, 0).unwrap();
        assert_eq!(seen, vec![1], "the damaged record (2-3) and all after it");
        assert!(outcome.tail_bytes_dropped > 0);
        assert_eq!(
            list_segments(&fs, Path::new(DIR)).unwrap(),
            vec![1, 3],
            "segment 2 followed the gap; 3 is the open's new segment"
        );
    }

    /// A close that has nothing to prove (nothing written since the open)
    /// still cuts the space reserved ahead: otherwise a clean close leaves
    /// 5 MiB of zeros that the next open cuts as a torn tail.
    #[test]
    fn a_clean_close_gives_the_reserve_back_with_nothing_to_prove() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn FileSystem> = Arc::new(crate::io::RealFs);
        let (mut wal, _) =
            Wal::open(fs, dir.path(), 0, &binding(), 64 << 20, &mut |_, _| Ok(())).unwrap();
        let path = dir.path().join(segment_file_name(wal.writer.segment_id()));
        let file_len = || std::fs::metadata(&path).unwrap().len();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while file_len() <= 4096 {
            assert!(std::time::Instant::now() < deadline, "nothing reserved");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(wal.sealed, "nothing to prove");
        wal.seal().unwrap();
        drop(wal);
        assert!(file_len() < 4096, "{} bytes left", file_len());
    }

    /// A segment named with the largest id leaves none for the next one:
    /// corruption, not an overflow.
    #[test]
    fn a_segment_with_the_largest_id_is_corruption() {
        let fs = FaultFs::new();
        fs.create_dir_all(Path::new(DIR)).unwrap();
        let path = Path::new(DIR).join(segment_file_name(u64::MAX));
        fs.open(&path, crate::io::OpenOptions::read_write_create())
            .unwrap()
            .write_at(&crate::wal::segment::encode_header(u64::MAX, DB_ID), 0)
            .unwrap();
        let err = replay_all(&fs, 0).unwrap_err();
        assert!(
            matches!(&err, crate::Error::Corruption { reason, .. } if reason.contains("too large")),
            "{err}"
        );
    }

    /// Rewrites segment `id`'s header as a newer build (version 5) would.
    fn set_newer_version(fs: &FaultFs, id: u64) {
        let header = crate::wal::compat_tests::header_of_version(id, 5);
        let path = Path::new(DIR).join(segment_file_name(id));
        let file = fs
            .open(&path, crate::io::OpenOptions::read_write_create())
            .unwrap();
        file.write_at(&header, 0).unwrap();
    }

    /// A later segment that cannot tell whether the damaged one was synced
    /// is no licence to cut it and remove the later ones: with a newer
    /// build's segment after rot, that would lose every record of both.
    #[test]
    fn damage_before_a_segment_that_cannot_tell_is_corruption_and_all_are_kept() {
        // A newer build's segment.
        let fs = two_segments(false);
        set_newer_version(&fs, 2);
        flip_last_byte(&fs, 1);
        let err = replay_all(&fs, 0).unwrap_err();
        assert!(
            matches!(&err, crate::Error::Corruption { reason, .. } if reason.contains("newer format")),
            "{err}"
        );
        assert_eq!(list_segments(&fs, Path::new(DIR)).unwrap(), vec![1, 2]);
        // A damaged header with a segment after it.
        let (fs, mut wal) = new_log();
        for _ in 0..2 {
            wal.append_group([batch(2)].iter(), false).unwrap();
            wal.rotate().unwrap();
        }
        wal.append_group([batch(1)].iter(), false).unwrap();
        std::mem::forget(wal);
        fs.flip_bit(&Path::new(DIR).join(segment_file_name(2)), 8 * 8)
            .unwrap();
        flip_last_byte(&fs, 1);
        let err = replay_all(&fs, 0).unwrap_err();
        assert!(
            matches!(&err, crate::Error::Corruption { reason, .. } if reason.contains("header is damaged")),
            "{err}"
        );
        assert_eq!(list_segments(&fs, Path::new(DIR)).unwrap(), vec![1, 2, 3]);
    }

    /// The newest segment's damaged header is a crash while it was created,
    /// which proves nothing: damage before it is still a torn tail.
    #[test]
    fn damage_before_a_torn_newest_segment_is_a_torn_tail() {
        let fs = two_segments(false);
        fs.flip_bit(&Path::new(DIR).join(segment_file_name(2)), 8 * 8)
            .unwrap();
        flip_last_byte(&fs, 1);
        let (seen, _) = replay_all(&fs, 0).unwrap();
        assert_eq!(seen, vec![1]);
    }

    #[test]
    fn damage_the_checkpoint_covers_is_skipped_and_its_segment_removed() {
        // Proof of a sync after it or not: the records are in the tree.
        for sync_last in [false, true] {
            let fs = two_segments(sync_last);
            flip_last_byte(&fs, 1);
            let (seen, outcome) = replay_all(&fs, 3).unwrap();
            assert_eq!(seen, vec![4, 5]);
            assert_eq!(outcome.tail_bytes_dropped, 0);
            assert_eq!(list_segments(&fs, Path::new(DIR)).unwrap(), vec![2, 3]);
        }
    }

    /// After a kill, both unsynced segments are in the OS's cache; the
    /// reopened log must make them durable before a sync in its new
    /// segment is acknowledged, or a power cut would keep a synced record
    /// and lose the ones before it.
    #[test]
    fn segments_replayed_after_a_kill_survive_a_power_cut_after_a_sync_write() {
        let fs = two_segments(false);
        let (mut wal, seen) = open(&fs, 0);
        assert_eq!(seen, vec![1, 2, 3, 4, 5]);
        wal.append_group([batch(1)].iter(), true).unwrap();
        std::mem::forget(wal);
        let crashed = fs.crash(crate::io::CrashMode::DropUnsynced);
        assert_eq!(
            replay_all(&crashed, 0).unwrap().0,
            (1..=6).collect::<Vec<_>>()
        );
    }

    /// A segment whose last group was a `sync` write is finished durably at
    /// the rotation, and the next marker proves it: rot in that group after
    /// a crash is corruption, not a torn tail that would drop it and the
    /// segments after it.
    #[test]
    fn rot_in_a_segment_synced_before_its_rotation_is_corruption() {
        let (fs, mut wal) = new_log();
        wal.append_group([batch(1)].iter(), false).unwrap();
        wal.append_group([batch(2)].iter(), true).unwrap();
        wal.rotate().unwrap();
        wal.append_group([batch(2)].iter(), false).unwrap();
        std::mem::forget(wal);
        let crashed = fs.crash(crate::io::CrashMode::DropUnsynced);
        flip_last_byte(&crashed, 1);
        let err = replay_all(&crashed, 0).unwrap_err();
        assert_proven_by_a_later_segment(&err);
    }

    /// A frame inside a value of a later segment (found by its magic, as
    /// the search inside a damaged segment does) is no proof: after a power
    /// cut that kept segment 2 and lost segment 1's records, replay must
    /// end the log in segment 1, not report corruption.
    #[test]
    fn a_frame_inside_a_value_is_no_proof() {
        let (fs, mut wal) = new_log();
        wal.append_group([batch(3)].iter(), false).unwrap();
        wal.rotate().unwrap();
        let mut fake = Vec::new();
        record::encode(&mut fake, 1, 1_000, &batch(1).ops);
        let mut with_frame = WriteBatch::new();
        with_frame.put("blob", fake);
        wal.append_group([with_frame].iter(), false).unwrap();
        std::mem::forget(wal);
        // The kernel wrote segment 2 back, not segment 1.
        let path = Path::new(DIR).join(segment_file_name(2));
        let file = fs
            .open(&path, crate::io::OpenOptions::read_write_create())
            .unwrap();
        file.sync_data().unwrap();
        let crashed = fs.crash(crate::io::CrashMode::DropUnsynced);
        let (seen, _) = replay_all(&crashed, 0).unwrap();
        assert!(seen.is_empty(), "{seen:?}");
    }

    /// Rule 2 of the recovery rules finds frames after damage by their
    /// magic; a frame inside a later value of the same segment, claiming
    /// more than its own position as synced, is no proof: taken as one, it
    /// would make the power cut's torn tail read as corruption.
    #[test]
    fn a_frame_inside_a_value_of_the_same_segment_is_no_proof() {
        let (fs, mut wal) = new_log();
        wal.append_group([batch(3)].iter(), false).unwrap();
        let mut fake = Vec::new();
        record::encode(&mut fake, 1, 1_000_000, &[]);
        let mut with_frame = WriteBatch::new();
        with_frame.put("blob", fake);
        wal.append_group([with_frame].iter(), false).unwrap();
        std::mem::forget(wal);
        let mut kept_only_the_second = 0;
        for seed in 0..64 {
            let crashed = fs.crash(crate::io::CrashMode::KeepRandomSubset { seed });
            let (seen, _) = replay_all(&crashed, 0)
                .unwrap_or_else(|e| panic!("seed {seed}: a power cut reported as {e}"));
            assert!(
                seen.is_empty() || seen == [1, 2, 3] || seen == [1, 2, 3, 4],
                "{seen:?}"
            );
            kept_only_the_second += usize::from(seen.is_empty());
        }
        assert!(kept_only_the_second > 0, "no seed lost the first group");
    }

    /// `flush_wal` after a rotation leaves a proof of everything; the close
    /// then has nothing left to seal.
    #[test]
    fn a_close_after_a_flush_that_proved_everything_adds_no_seal() {
        let (fs, mut wal) = new_log();
        wal.append_group([batch(3)].iter(), false).unwrap();
        wal.rotate().unwrap();
        wal.sync().unwrap();
        let len = wal.writer.len_bytes();
        wal.seal().unwrap();
        assert_eq!(wal.writer.len_bytes(), len, "a second seal was written");
        // And the proof holds: rot in segment 1 is corruption.
        drop(wal);
        flip_last_byte(&fs, 1);
        assert!(matches!(
            replay_all(&fs, 0),
            Err(crate::Error::Corruption { .. })
        ));
    }

    /// Replays `fs` as an open with `binding` would; the sequence numbers
    /// found and what replay reported.
    fn replay_bound(
        fs: &FaultFs,
        covered_seq: u64,
        binding: &LogBinding,
    ) -> crate::Result<(Vec<u64>, ReplayOutcome)> {
        let mut seen = Vec::new();
        let (_, outcome) = Wal::open(
            Arc::new(fs.clone()),
            Path::new(DIR),
            covered_seq,
            binding,
            1 << 20,
            &mut |first, ops| {
                seen.extend(first..first + ops.len() as u64);
                Ok(())
            },
        )?;
        Ok((seen, outcome))
    }

    fn segment_bytes(fs: &FaultFs, id: u64) -> Vec<u8> {
        let path = Path::new(DIR).join(segment_file_name(id));
        crate::io::read_all(&*fs.open(&path, crate::io::OpenOptions::read_only()).unwrap()).unwrap()
    }

    /// The records of segment `id`, in order.
    fn records_of(fs: &FaultFs, id: u64) -> Vec<(usize, record::Record)> {
        let bytes = segment_bytes(fs, id);
        let header = crate::wal::segment::check_header(&bytes, id).unwrap();
        let mut offset = header.body_start();
        let mut records = Vec::new();
        while let record::Frame::Valid(rec, len) =
            record::decode(&bytes[offset..], header.format.payload)
        {
            records.push((offset, rec));
            offset += len;
        }
        records
    }

    fn remove_segment(fs: &FaultFs, id: u64) {
        fs.remove_file(&Path::new(DIR).join(segment_file_name(id)))
            .unwrap();
    }

    fn point_in_time() -> LogBinding {
        LogBinding {
            recovery: crate::WalRecovery::PointInTime,
            ..binding()
        }
    }

    fn assert_missing(err: &crate::Error, id: u64) {
        let named = format!("segment {id} is missing");
        assert!(
            matches!(err, crate::Error::Corruption { reason, .. } if reason.contains(&named)),
            "{err}"
        );
    }

    /// Three segments of records, 1-3, 4-5 and 6, the first two finished
    /// by rotations: synced throughout, or never synced at all. Abandoned
    /// as a `kill -9` leaves it (everything written is readable).
    fn three_linked_segments(synced: bool) -> FaultFs {
        let (fs, mut wal) = new_log();
        wal.append_group([batch(3)].iter(), synced).unwrap();
        wal.rotate().unwrap();
        wal.append_group([batch(2)].iter(), synced).unwrap();
        wal.rotate().unwrap();
        wal.append_group([batch(1)].iter(), synced).unwrap();
        std::mem::forget(wal);
        fs
    }

    /// A rotation ends the finished segment with a link naming the next,
    /// after its own records; the newest segment has none.
    #[test]
    fn a_rotation_links_the_finished_segment_to_the_next() {
        let fs = three_linked_segments(false);
        for (id, next) in [(1, Some(2)), (2, Some(3)), (3, None)] {
            let records = records_of(&fs, id);
            let last = &records.last().unwrap().1;
            assert_eq!(last.next_segment, next, "segment {id}");
            let links = records.iter().filter(|(_, r)| r.next_segment.is_some());
            assert_eq!(links.count(), usize::from(next.is_some()));
        }
        assert_eq!(replay_all(&fs, 0).unwrap().0, (1..=6).collect::<Vec<_>>());
    }

    /// The link is written after the next segment's header is durable and
    /// is not synced at the rotation: a power cut may tear it while the
    /// next segment survives. Its marker starts right after the records
    /// read, so nothing was lost: the link is cut and replay goes on.
    #[test]
    fn a_torn_link_loses_nothing_and_replay_goes_on() {
        for synced in [false, true] {
            let fs = three_linked_segments(synced);
            let (at, _) = *records_of(&fs, 1).last().unwrap();
            let path = Path::new(DIR).join(segment_file_name(1));
            fs.flip_bit(&path, (at as u64 + 14) * 8).unwrap();
            let (seen, outcome) = replay_all(&fs, 0)
                .unwrap_or_else(|e| panic!("synced {synced}: a torn link reported as {e}"));
            assert_eq!(seen, (1..=6).collect::<Vec<_>>(), "synced {synced}");
            assert!(outcome.tail_bytes_dropped > 0);
            assert_eq!(segment_bytes(&fs, 1).len(), at, "cut at the link");
            // And the log stays whole for the next open.
            assert_eq!(replay_all(&fs, 0).unwrap().0.len(), 6);
        }
    }

    /// Without a link to tell, losing the newest segments would look like
    /// a log that ends there.
    #[test]
    fn a_link_to_a_missing_segment_is_corruption() {
        for synced in [false, true] {
            // The newest segment lost: the one before names it.
            let fs = three_linked_segments(synced);
            remove_segment(&fs, 3);
            let err = replay_all(&fs, 0).unwrap_err();
            assert_missing(&err, 3);
            assert_eq!(list_segments(&fs, Path::new(DIR)).unwrap(), vec![1, 2]);
            // The two newest lost.
            remove_segment(&fs, 2);
            assert_missing(&replay_all(&fs, 0).unwrap_err(), 2);
            // A middle one lost, its records with it: even with nothing
            // synced after it (no proof), the link before the gap tells.
            let fs = three_linked_segments(synced);
            remove_segment(&fs, 2);
            let err = replay_all(&fs, 0).unwrap_err();
            assert!(
                matches!(&err, crate::Error::Corruption { reason, .. } if reason.contains("link")),
                "{err}"
            );
            assert_eq!(list_segments(&fs, Path::new(DIR)).unwrap(), vec![1, 3]);
        }
    }

    /// A segment that held no update, removed by an open after it started
    /// a newer one, is named by a link but was not lost.
    #[test]
    fn an_empty_segment_removed_by_an_open_is_no_loss() {
        let (fs, mut wal) = new_log();
        wal.append_group([batch(3)].iter(), true).unwrap();
        wal.rotate().unwrap();
        wal.seal().unwrap();
        drop(wal);
        assert_eq!(records_of(&fs, 1).last().unwrap().1.next_segment, Some(2));
        let (wal, seen) = open(&fs, 0);
        assert_eq!(seen, vec![1, 2, 3]);
        drop(wal);
        assert_eq!(list_segments(&fs, Path::new(DIR)).unwrap(), vec![1, 3]);
        assert_eq!(replay_all(&fs, 0).unwrap().0, vec![1, 2, 3]);
    }

    /// The superblock's WAL floor names the segment the last open started:
    /// losing it, and every segment after it, leaves nothing to reach it.
    #[test]
    fn a_floor_no_segment_reaches_is_corruption() {
        let fs = three_linked_segments(true);
        let with_floor = |floor| LogBinding { floor, ..binding() };
        assert_eq!(replay_bound(&fs, 0, &with_floor(3)).unwrap().0.len(), 6);
        let fs = three_linked_segments(true);
        assert_missing(&replay_bound(&fs, 0, &with_floor(4)).unwrap_err(), 4);
        // All of the log gone.
        for id in 1..=3 {
            remove_segment(&fs, id);
        }
        assert_missing(&replay_bound(&fs, 0, &with_floor(1)).unwrap_err(), 1);
        // Nothing was created in its place.
        assert!(list_segments(&fs, Path::new(DIR)).unwrap().is_empty());
    }

    /// Point-in-time recovery opens where strict recovery reports: the log
    /// ends at the first missing segment, what follows is removed, and both
    /// are counted; the new segment's id is above every id named.
    #[test]
    fn point_in_time_recovery_ends_the_log_at_the_first_missing_segment() {
        // The newest lost.
        let fs = three_linked_segments(true);
        remove_segment(&fs, 3);
        let (seen, outcome) = replay_bound(&fs, 0, &point_in_time()).unwrap();
        assert_eq!(seen, (1..=5).collect::<Vec<_>>());
        assert_eq!(outcome.missing_segments, 1);
        assert_eq!(outcome.next_segment_id, 4, "segment 3's id is not reused");
        // The open's new segment is newer: strict opens go on.
        assert_eq!(replay_all(&fs, 0).unwrap().0.len(), 5);
        // A middle one lost: the segment after the gap is dropped.
        let fs = three_linked_segments(true);
        remove_segment(&fs, 2);
        let (seen, outcome) = replay_bound(&fs, 0, &point_in_time()).unwrap();
        assert_eq!(seen, vec![1, 2, 3]);
        assert_eq!(outcome.missing_segments, 1);
        assert!(outcome.recovery_bytes_dropped > 0);
        assert_eq!(list_segments(&fs, Path::new(DIR)).unwrap(), vec![1, 4]);
        assert_eq!(replay_all(&fs, 0).unwrap().0, vec![1, 2, 3]);
        // Damage a later segment proves was synced: the log ends before it.
        let fs = three_linked_segments(true);
        flip_last_byte(&fs, 2);
        assert!(matches!(
            replay_all(&fs, 0),
            Err(crate::Error::Corruption { .. })
        ));
        let (seen, outcome) = replay_bound(&fs, 0, &point_in_time()).unwrap();
        assert_eq!(seen, vec![1, 2, 3]);
        assert_eq!(outcome.missing_segments, 0);
        assert!(outcome.recovery_bytes_dropped > 0);
        assert_eq!(replay_all(&fs, 0).unwrap().0, vec![1, 2, 3]);
    }

    /// Segments of another database, or without identity in a database
    /// that names itself, are refused in every recovery mode and left as
    /// they are.
    #[test]
    fn segments_of_another_database_are_refused_and_kept() {
        let fs = three_linked_segments(true);
        let before: Vec<Vec<u8>> = (1..=3).map(|id| segment_bytes(&fs, id)).collect();
        for recovery in [crate::WalRecovery::Strict, crate::WalRecovery::PointInTime] {
            let other = LogBinding {
                recovery,
                ..LogBinding::new(DB_ID + 1)
            };
            let err = replay_bound(&fs, 0, &other).unwrap_err();
            assert!(
                matches!(&err, crate::Error::Corruption { reason, .. } if reason.contains("another database")),
                "{err}"
            );
        }
        let after: Vec<Vec<u8>> = (1..=3).map(|id| segment_bytes(&fs, id)).collect();
        assert_eq!(before, after);
        // An earlier build's segment after one that names the database.
        crate::wal::compat_tests::downgrade_at(
            &fs,
            &Path::new(DIR).join(segment_file_name(3)),
            3,
            3,
        );
        let legacy = LogBinding {
            legacy_segments: true,
            ..binding()
        };
        for binding in [binding(), legacy] {
            let err = replay_bound(&fs, 0, &binding).unwrap_err();
            assert!(
                matches!(&err, crate::Error::Corruption { reason, .. } if reason.contains("names no database")),
                "{err}"
            );
        }
    }
}
