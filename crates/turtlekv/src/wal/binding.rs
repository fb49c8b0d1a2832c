//! What ties a log to its database: the identity every segment header
//! must name, and the newest segment the superblock knows was created
//! (its *WAL floor*). The store layer reads both from the superblock
//! (`docs/format.md`, "Database identity", "Recovery rules" rule 0).

use std::io::ErrorKind;
use std::path::Path;

use crate::WalRecovery;
use crate::io::{FileSystem, OpenOptions, read_exact_at};
use crate::wal::segment::{SEGMENT_HEADER_BYTES, check_header, list_segments, segment_file_name};
use crate::{Error, Result};

/// The log's expectations, from the superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogBinding {
    /// The identity every segment's header must name.
    pub database_id: u64,
    /// Segments of versions 1 to 3, which name no database, may precede
    /// the first one that does: the database was written by an earlier
    /// build.
    pub legacy_segments: bool,
    /// A segment with this id or a higher one must exist (0: none).
    pub floor: u64,
    /// What replay does with a log that is not whole.
    pub recovery: WalRecovery,
}

impl LogBinding {
    /// A log of database `database_id` that has no floor yet and no
    /// segments of earlier builds (a new backup's, `db::backup`).
    pub fn new(database_id: u64) -> LogBinding {
        LogBinding {
            database_id,
            legacy_segments: false,
            floor: 0,
            recovery: WalRecovery::Strict,
        }
    }

    /// Checks the identity a segment's header names, `seen_named` telling
    /// whether an earlier segment (in id order) named one.
    pub fn check_identity(&self, path: &Path, named: Option<u64>, seen_named: bool) -> Result<()> {
        match named {
            Some(id) if id == self.database_id => Ok(()),
            Some(id) => Err(Error::corruption(
                path,
                32,
                format!(
                    "the segment belongs to another database (identity {id:#018x}; this \
                     database is {:#018x})",
                    self.database_id
                ),
            )),
            None if self.legacy_segments && !seen_named => Ok(()),
            None => Err(Error::corruption(
                path,
                8,
                format!(
                    "the segment names no database (format version 3 or earlier), but this \
                     database ({:#018x}) {}",
                    self.database_id,
                    if self.legacy_segments {
                        "started naming itself in an earlier segment"
                    } else {
                        "was created by a build that names it in every segment"
                    }
                ),
            )),
        }
    }
}

/// The identity the newest segment of `dir` that names one names: that of
/// a database upgraded by an open that started a segment but crashed
/// before its superblock recorded the identity. `None` when no segment
/// names one (or there is no log).
pub(crate) fn log_identity(fs: &dyn FileSystem, dir: &Path) -> Result<Option<u64>> {
    let ids = match list_segments(fs, dir) {
        Ok(ids) => ids,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    for &id in ids.iter().rev() {
        if let Some(header) = read_header(fs, dir, id)?
            && let Ok(header) = check_header(&header, id)
            && let Some(database_id) = header.database_id
        {
            return Ok(Some(database_id));
        }
    }
    Ok(None)
}

/// The first bytes of segment `id`, up to a header's length (fewer when
/// the file is shorter); `None` when it is gone.
pub(crate) fn read_header(fs: &dyn FileSystem, dir: &Path, id: u64) -> Result<Option<Vec<u8>>> {
    let file = match fs.open(&dir.join(segment_file_name(id)), OpenOptions::read_only()) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let len = file.len()?.min(SEGMENT_HEADER_BYTES);
    let mut header = vec![0u8; len as usize];
    read_exact_at(&*file, &mut header, 0)?;
    Ok(Some(header))
}

/// Rule 0's identities: every segment of `ids` whose header verifies must
/// name this database (or be an earlier build's, where allowed). Checked
/// before replay reads or changes anything, so that a file of another
/// database is never cut or removed; damaged headers are left to replay.
pub(crate) fn check_identities(
    fs: &dyn FileSystem,
    dir: &Path,
    ids: &[u64],
    binding: &LogBinding,
) -> Result<()> {
    let mut seen_named = false;
    for &id in ids {
        let Some(header) = read_header(fs, dir, id)? else {
            continue;
        };
        let Ok(header) = check_header(&header, id) else {
            continue;
        };
        let path = dir.join(segment_file_name(id));
        binding.check_identity(&path, header.database_id, seen_named)?;
        seen_named |= header.database_id.is_some();
    }
    Ok(())
}
