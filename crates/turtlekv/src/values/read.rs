//! Reads of value records: one at a time, or many with their reads in
//! flight together (`multi_get`). Every record read is verified against
//! the pointer that named it (`docs/format.md`, "Value files").

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::ValuePointer;
use super::file::{self, HEADER_BYTES};
use super::store::{ValueFile, ValueStore, file_name};
use crate::io::{
    AlignedBuf, BatchRead, DIRECT_IO_ALIGN_BYTES, File, read_exact_at, read_exact_batch,
};
use crate::{Error, Result};

/// Records longer than this are read through the OS page cache even by a
/// store that reads with `O_DIRECT`: the aligned buffer would hold a second
/// copy of a value that may be as large as the memory budget.
const MAX_DIRECT_READ_BYTES: u64 = 1 << 20;

/// A record about to be read: its file, and the buffer its bytes go to.
struct PlannedRead {
    value_file: Arc<ValueFile>,
    buf: ReadBuf,
}

enum ReadBuf {
    /// The aligned blocks that cover the record, read with `O_DIRECT`
    /// from `start`; the record begins `skip` bytes in.
    Direct {
        blocks: AlignedBuf,
        start: u64,
        skip: usize,
    },
    /// The record itself, read through the OS page cache.
    Buffered(Vec<u8>),
}

impl PlannedRead {
    /// The file, buffer and offset of its read, for a batch.
    fn batch_read(&mut self, p: &ValuePointer) -> BatchRead<'_> {
        match &mut self.buf {
            ReadBuf::Direct { blocks, start, .. } => BatchRead {
                file: &**self.value_file.direct.as_ref().expect("planned direct"),
                buf: &mut blocks[..],
                offset: *start,
            },
            ReadBuf::Buffered(record) => BatchRead {
                file: &*self.value_file.file,
                buf: record,
                offset: p.offset,
            },
        }
    }

    /// Reads the record alone.
    fn read(&mut self, p: &ValuePointer, len: usize) -> io::Result<()> {
        match &mut self.buf {
            ReadBuf::Direct {
                blocks,
                start,
                skip,
            } => {
                let direct = self.value_file.direct.as_ref().expect("planned direct");
                read_blocks(&**direct, blocks, *start, *skip + len)
            }
            ReadBuf::Buffered(record) => read_exact_at(&*self.value_file.file, record, p.offset),
        }
    }

    /// The record's bytes.
    fn into_record(self, len: usize) -> Vec<u8> {
        match self.buf {
            ReadBuf::Direct { blocks, skip, .. } => blocks[skip..skip + len].to_vec(),
            ReadBuf::Buffered(record) => record,
        }
    }
}

impl ValueStore {
    /// The value `pointer` names, whose record must hold `key` (a stored
    /// key). Reads the record with one read and verifies it.
    pub fn read(&self, key: &[u8], pointer: &ValuePointer) -> Result<Bytes> {
        let (_, record, value_at) = self.read_record(key, pointer)?;
        self.reads.fetch_add(1, Ordering::Relaxed);
        Ok(Bytes::from(record).slice(value_at..))
    }

    /// [`ValueStore::read`] of every `(key, pointer)` of `wanted`, with
    /// the reads in flight together: one outcome each, in order.
    pub fn read_many(&self, wanted: &[(&[u8], ValuePointer)]) -> Vec<Result<Bytes>> {
        let mut plans: Vec<Result<PlannedRead>> = wanted
            .iter()
            .map(|(key, p)| self.plan_read(key, p))
            .collect();
        let planned: Vec<usize> = (0..plans.len()).filter(|&i| plans[i].is_ok()).collect();
        let outcomes = {
            let mut reads: Vec<BatchRead<'_>> = plans
                .iter_mut()
                .zip(wanted)
                .filter_map(|(plan, (_, p))| Some(plan.as_mut().ok()?.batch_read(p)))
                .collect();
            read_exact_batch(&mut reads)
        };
        let mut read = vec![false; plans.len()];
        for (i, outcome) in planned.into_iter().zip(outcomes.into_iter().flatten()) {
            read[i] = outcome.is_ok();
        }
        plans
            .into_iter()
            .zip(wanted)
            .zip(read)
            .map(|((plan, (key, p)), read)| {
                // A read the batch did not finish (the last record of a
                // file read with `O_DIRECT`, a failed read, no io_uring)
                // is read alone, which reports its error precisely.
                let (_, record, value_at) = match read {
                    true => self.check_read(plan?, key, p)?,
                    false => self.read_record(key, p)?,
                };
                self.reads.fetch_add(1, Ordering::Relaxed);
                Ok(Bytes::from(record).slice(value_at..))
            })
            .collect()
    }

    /// Reads and verifies the record `p` names: its file, the record's
    /// bytes, and where its value starts in them.
    pub(super) fn read_record(
        &self,
        key: &[u8],
        p: &ValuePointer,
    ) -> Result<(Arc<ValueFile>, Vec<u8>, usize)> {
        let mut plan = self.plan_read(key, p)?;
        let len = file::record_len(key.len(), p.value_len) as usize;
        match plan.read(p, len) {
            Ok(()) => self.check_read(plan, key, p),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                let file_len = plan.value_file.file.len().unwrap_or(0);
                Err(Error::corruption(
                    &plan.value_file.path,
                    p.offset,
                    format!(
                        "value record of {len} bytes lies past the file's end ({file_len} bytes)"
                    ),
                ))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The file and buffer of the read of the record `p` names.
    fn plan_read(&self, key: &[u8], p: &ValuePointer) -> Result<PlannedRead> {
        let value_file = self.file(p.file_id).map_err(|e| match e {
            Error::Io(e) if e.kind() == io::ErrorKind::NotFound => Error::corruption(
                self.dir.join(file_name(p.file_id)),
                p.offset,
                "a value pointer names a value file that does not exist",
            ),
            e => e,
        })?;
        if p.offset < HEADER_BYTES || p.value_len > crate::MAX_VALUE_SIZE as u64 {
            return Err(Error::corruption(
                &value_file.path,
                p.offset,
                "value pointer out of range",
            ));
        }
        let len = file::record_len(key.len(), p.value_len);
        let buf = match value_file.direct {
            Some(_) if len <= MAX_DIRECT_READ_BYTES => {
                let align = DIRECT_IO_ALIGN_BYTES as u64;
                let start = p.offset / align * align;
                let end = (p.offset + len).next_multiple_of(align);
                ReadBuf::Direct {
                    blocks: AlignedBuf::zeroed((end - start) as usize),
                    start,
                    skip: (p.offset - start) as usize,
                }
            }
            _ => ReadBuf::Buffered(vec![0u8; len as usize]),
        };
        Ok(PlannedRead { value_file, buf })
    }

    /// Verifies a record read whole against `key` and `p`.
    fn check_read(
        &self,
        plan: PlannedRead,
        key: &[u8],
        p: &ValuePointer,
    ) -> Result<(Arc<ValueFile>, Vec<u8>, usize)> {
        let value_file = plan.value_file.clone();
        let record = plan.into_record(file::record_len(key.len(), p.value_len) as usize);
        let corrupt = |offset: u64, reason: String| {
            Error::corruption(&value_file.path, p.offset.saturating_add(offset), reason)
        };
        let checked = file::check_record(&record, p.file_id, p.offset, Some(key), p.value_len)
            .map_err(|bad| corrupt(bad.offset, bad.what.into_owned()))?;
        if checked.crc != p.crc {
            return Err(corrupt(
                0,
                "value record is not the one the pointer names".into(),
            ));
        }
        Ok((value_file, record, checked.value_at))
    }
}

/// Reads the first `wanted` bytes of `blocks` from `start` of a file
/// opened with `O_DIRECT`: whole blocks, the last of which may end at the
/// file's end.
fn read_blocks(file: &dyn File, blocks: &mut [u8], start: u64, wanted: usize) -> io::Result<()> {
    let mut done = 0;
    while done < wanted {
        let n = file.read_at(&mut blocks[done..], start + done as u64)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        done += n;
    }
    Ok(())
}
