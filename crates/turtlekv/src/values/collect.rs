//! What value garbage collection needs of the files: their records in
//! order, copying a record into the current file, and removing retired
//! files (the policy is the database's: `db::value_gc`).

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::file::{self, HEADER_BYTES, MAX_RECORD_HEAD_BYTES};
use super::store::{PendingWrite, ValueFile, file_name};
use super::{ValuePointer, ValueStore};
use crate::io::read_exact_at;
use crate::{Error, Result};

/// Bytes read at a time while scanning or copying a file.
const CHUNK_BYTES: usize = 1 << 20;

/// One record of a value file, as a scan finds it (its value unread).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordInfo {
    pub key: Bytes,
    pub pointer: ValuePointer,
}

impl RecordInfo {
    /// Bytes the record takes in its file.
    pub fn len_bytes(&self) -> u64 {
        file::record_len(self.key.len(), self.pointer.value_len)
    }
}

impl ValueStore {
    /// Files no handle appends to and with no write pending, oldest
    /// first, with their lengths.
    pub fn sealed_files(&self) -> Vec<(u64, u64)> {
        let current = self.appender.lock().as_ref().map(|a| a.file.id);
        self.files
            .read()
            .values()
            .filter(|f| Some(f.id) != current)
            .filter(|f| f.pending_writes.load(Ordering::Acquire) == 0)
            .map(|f| (f.id, f.len_bytes.load(Ordering::Acquire)))
            .collect()
    }

    /// Every file's id and length, oldest first.
    pub fn file_lens(&self) -> Vec<(u64, u64)> {
        self.files
            .read()
            .values()
            .map(|f| (f.id, f.len_bytes.load(Ordering::Acquire)))
            .collect()
    }

    /// Bytes of file `id` (0 if there is none).
    pub fn file_len(&self, id: u64) -> u64 {
        self.files
            .read()
            .get(&id)
            .map_or(0, |f| f.len_bytes.load(Ordering::Acquire))
    }

    /// The records of file `id`, in order, up to the first that is not
    /// whole (a crash's torn tail: nothing points there) or the end.
    /// Reads the file in large chunks; values are skipped, not checked.
    pub fn records(&self, id: u64) -> Result<Vec<RecordInfo>> {
        let Some(f) = self.files.read().get(&id).cloned() else {
            return Ok(Vec::new());
        };
        let len_bytes = f.file.len()?;
        let mut out = Vec::new();
        let mut buf = Vec::new();
        let mut buf_at = 0u64;
        let mut offset = HEADER_BYTES;
        while offset < len_bytes {
            let head_end = (offset
                + (MAX_RECORD_HEAD_BYTES + crate::key::MAX_STORED_KEY_BYTES) as u64)
                .min(len_bytes);
            if offset < buf_at || head_end > buf_at + buf.len() as u64 {
                let n = (len_bytes - offset).min(CHUNK_BYTES as u64) as usize;
                buf.resize(n, 0);
                read_exact_at(&*f.file, &mut buf, offset)?;
                buf_at = offset;
            }
            let at = (offset - buf_at) as usize;
            let Some(info) = parse_record(&buf[at..], id, offset) else {
                break;
            };
            let end = offset + info.len_bytes();
            if end > len_bytes {
                break;
            }
            out.push(info);
            offset = end;
        }
        Ok(out)
    }

    /// Copies record `info` of file `info.pointer.file_id` into the file
    /// appends go to, checking the source's checksum as it reads, and
    /// returns the copy's pointer. Bounded memory whatever the value's
    /// size.
    pub fn relocate(&self, info: &RecordInfo) -> Result<(ValuePointer, PendingWrite)> {
        let p = info.pointer;
        let Some(source) = self.files.read().get(&p.file_id).cloned() else {
            return Err(Error::corruption(
                self.dir.join(file_name(p.file_id)),
                p.offset,
                "a value record to move lies in a file that does not exist",
            ));
        };
        let len = info.len_bytes();
        let (target, offset, pending) = self.reserve(len)?;
        let mut head = file::record_head(info.key.len(), p.value_len);
        head.extend_from_slice(&info.key);
        let value_at = p.offset + head.len() as u64;
        let new_crc = copy_value(
            &source,
            &target,
            &info.key,
            p,
            value_at,
            offset + head.len() as u64,
        )?;
        let crc = {
            let mut crc = file::record_crc(target.id, offset, &[&head[4..]]);
            crc = crc32c::crc32c_combine(crc, new_crc, p.value_len as usize);
            crc
        };
        head[..4].copy_from_slice(&crc.to_le_bytes());
        target.file.write_at(&head, offset)?;
        self.note_written(&target, len);
        let pointer = ValuePointer {
            file_id: target.id,
            offset,
            value_len: p.value_len,
            crc,
        };
        Ok((pointer, pending))
    }

    /// Removes the retired files no pin holds any more (`retire`), and
    /// makes their removal durable. Returns how many went.
    pub fn remove_unpinned(&self) -> io::Result<u64> {
        let ids = std::mem::take(&mut *self.deletable.lock());
        for &id in &ids {
            self.files.write().remove(&id);
            self.removed.write().insert(id);
            match self.fs.remove_file(&self.dir.join(file_name(id))) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        if !ids.is_empty() {
            self.fs.sync_dir(&self.dir)?;
        }
        Ok(ids.len() as u64)
    }

    /// Whether garbage collection removed file `id` while this handle
    /// was open: a point read that found a pointer into it raced the
    /// removal, and finds the moved copy when it reads again.
    pub fn was_removed(&self, id: u64) -> bool {
        self.removed.read().contains(&id)
    }
}

/// The record at the start of `bytes` (at `offset` of file `id`), if its
/// head and key are there and parse.
fn parse_record(bytes: &[u8], id: u64, offset: u64) -> Option<RecordInfo> {
    let (key_len, value_len, head_len) = file::parse_head(bytes).ok()?;
    let key = bytes.get(head_len..head_len + key_len)?;
    let crc = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    Some(RecordInfo {
        key: Bytes::copy_from_slice(key),
        pointer: ValuePointer {
            file_id: id,
            offset,
            value_len,
            crc,
        },
    })
}

/// Copies the value of record `p` (at `from` in `source`) to `to` in
/// `target`, verifying the source record's checksum with `key` as it
/// goes. Returns the CRC32C of the value alone.
fn copy_value(
    source: &Arc<ValueFile>,
    target: &Arc<ValueFile>,
    key: &[u8],
    p: ValuePointer,
    from: u64,
    to: u64,
) -> Result<u32> {
    let head = file::record_head(key.len(), p.value_len);
    let mut source_crc = file::record_crc(p.file_id, p.offset, &[&head[4..], key]);
    let mut value_crc = 0u32;
    let mut buf = vec![0u8; (p.value_len as usize).min(CHUNK_BYTES)];
    let mut done = 0u64;
    while done < p.value_len {
        let n = (p.value_len - done).min(CHUNK_BYTES as u64) as usize;
        let chunk = &mut buf[..n];
        read_exact_at(&*source.file, chunk, from + done).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => Error::corruption(
                &source.path,
                p.offset,
                "value record lies past the file's end",
            ),
            _ => e.into(),
        })?;
        source_crc = crc32c::crc32c_append(source_crc, chunk);
        value_crc = crc32c::crc32c_append(value_crc, chunk);
        target.file.write_at(chunk, to + done)?;
        done += n as u64;
    }
    if source_crc != p.crc {
        return Err(Error::corruption(
            &source.path,
            p.offset,
            "value record checksum mismatch",
        ));
    }
    Ok(value_crc)
}
