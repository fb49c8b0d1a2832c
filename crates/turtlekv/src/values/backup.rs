//! A backup's copy of the value files (`docs/format.md`, "Backups").

use std::path::Path;
use std::sync::atomic::Ordering;

use super::file::{self, HEADER_BYTES};
use super::store::file_name;
use super::{VALUES_DIR, ValueStore};
use crate::Result;
use crate::io::{FileSystem, OpenOptions, read_exact_at};

/// Bytes copied per read and write.
const COPY_CHUNK_BYTES: u64 = 1 << 20;

/// What a backup copied of the value files.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CopiedValues {
    pub files: u64,
    pub bytes: u64,
}

impl ValueStore {
    /// Copies every value file, as long as it is now, into the `values`
    /// directory of `dest_db_dir`, its header naming database `identity`,
    /// each file and the directory synced. Records keep their offsets, so
    /// every pointer of a version read before this call finds its record
    /// in the copy (records are written before anything points at them).
    pub fn copy_for_backup(
        &self,
        fs: &dyn FileSystem,
        dest_db_dir: &Path,
        identity: u64,
    ) -> Result<CopiedValues> {
        let files: Vec<_> = self.files.read().values().cloned().collect();
        let mut copied = CopiedValues::default();
        if files.is_empty() {
            return Ok(copied);
        }
        let dir = dest_db_dir.join(VALUES_DIR);
        fs.create_dir_all(&dir)?;
        let mut buf = vec![0u8; COPY_CHUNK_BYTES as usize];
        for source in files {
            let len_bytes = source.len_bytes.load(Ordering::Acquire);
            if len_bytes <= HEADER_BYTES {
                // Being created when a crash hit, or empty: nothing in it
                // is pointed at.
                continue;
            }
            let options = OpenOptions {
                create: true,
                create_new: true,
                write: true,
                direct: false,
            };
            let dest = fs.open(&dir.join(file_name(source.id)), options)?;
            dest.write_at(&file::encode_header(source.id, identity), 0)?;
            let mut offset = HEADER_BYTES;
            while offset < len_bytes {
                let n = (len_bytes - offset).min(COPY_CHUNK_BYTES) as usize;
                read_exact_at(&*source.file, &mut buf[..n], offset)?;
                dest.write_at(&buf[..n], offset)?;
                offset += n as u64;
            }
            dest.sync_data()?;
            copied.files += 1;
            copied.bytes += len_bytes;
        }
        fs.sync_dir(&dir)?;
        fs.sync_dir(dest_db_dir)?;
        Ok(copied)
    }
}
