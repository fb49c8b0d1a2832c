//! The one error type of the engine, and the one error type of its
//! decoders, which the layer that knows where the decoded bytes live turns
//! into the first.

use std::borrow::Cow;
use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong in TurtleKV.
///
/// Input errors (`EmptyKey`, `KeyTooLarge`, `ValueTooLarge`, `InvalidRange`, `InvalidOptions`)
/// are detected before anything is written, so they never change the database.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system reported an I/O failure. The message includes
    /// the operating system's, so the error is not also its `source()`:
    /// printing the chain (`{:#}` of `anyhow`) would repeat it.
    #[error("I/O error: {0}")]
    Io(std::io::Error),

    /// Stored bytes failed a checksum or a structural check. Never returned as data.
    #[error("corruption in {} at offset {offset}: {reason}", file.display())]
    Corruption {
        /// The file holding the damaged bytes.
        file: PathBuf,
        /// Byte offset in that file of the field that failed a structural
        /// check, or of the start of the bytes a failed checksum covers
        /// (a page block, a WAL record, a superblock slot, a filter, a leaf
        /// page's head or data block). `docs/format.md`, "Corruption
        /// reports", says what it points at in each file.
        offset: u64,
        /// What check failed.
        reason: String,
    },

    /// Keys must hold at least one byte.
    #[error("empty key: keys must be 1..={max} bytes", max = crate::MAX_KEY_SIZE)]
    EmptyKey,

    /// The key is longer than the database takes: [`crate::MAX_KEY_SIZE`], or
    /// less when `node_size_bytes` is below 4 KiB.
    #[error("key of {len_bytes} bytes exceeds the maximum of {max_bytes} bytes")]
    KeyTooLarge {
        /// Length of the rejected key.
        len_bytes: usize,
        /// [`crate::MAX_KEY_SIZE`], or less for a database whose
        /// `node_size_bytes` is below 4 KiB (`Options::node_size_bytes`).
        max_bytes: usize,
    },

    /// The value is longer than [`crate::MAX_VALUE_SIZE`] (1 GiB). Values
    /// too long for a leaf page are stored in value files, so every
    /// database takes values up to that size.
    #[error("value of {len_bytes} bytes exceeds the maximum of {max_bytes} bytes")]
    ValueTooLarge {
        /// Length of the rejected value.
        len_bytes: usize,
        /// The largest value accepted, [`crate::MAX_VALUE_SIZE`].
        max_bytes: usize,
    },

    /// A range deletion's start is not below its end: the range is empty
    /// or inverted. Such a write changes nothing (an empty range is
    /// refused rather than taken as a no-op, so that a caller's swapped
    /// bounds do not pass silently).
    #[error("invalid range: start {start:?} is not below end {end:?}")]
    InvalidRange {
        /// The range's start key.
        start: Vec<u8>,
        /// The range's end key (exclusive).
        end: Vec<u8>,
    },

    /// A write batch is too large to be logged as one record.
    #[error("write batch of {len_bytes} encoded bytes exceeds the maximum of {max_bytes} bytes")]
    BatchTooLarge {
        /// Encoded size of the rejected batch.
        len_bytes: usize,
        /// Largest batch the log accepts.
        max_bytes: usize,
    },

    /// An [`crate::Options`] field is out of range or inconsistent.
    #[error("invalid options: {0}")]
    InvalidOptions(String),

    /// Another handle (in this or another process) holds the database's
    /// `LOCK` file, still after about half a second of trying again.
    #[error("database at {} is locked by another handle", .0.display())]
    Locked(PathBuf),

    /// Creating a database was refused: the directory lies inside another
    /// database's (some ancestor holds a TurtleKV `SUPERBLOCK`). Nothing
    /// was created.
    #[error(
        "refusing to create a database at {}: it lies inside the database at {}",
        path.display(),
        outer.display()
    )]
    NestedDatabase {
        /// The directory asked for.
        path: PathBuf,
        /// The database directory it lies in.
        outer: PathBuf,
    },

    /// A keyspace name must be 1 to 255 bytes.
    #[error("invalid keyspace name of {len_bytes} bytes: names are 1..=255 bytes")]
    InvalidKeyspaceName {
        /// Length of the rejected name.
        len_bytes: usize,
    },

    /// No keyspace of this name exists (`Db::drop_keyspace`).
    #[error("no keyspace named {}", String::from_utf8_lossy(.0))]
    KeyspaceNotFound(Vec<u8>),

    /// The keyspace was dropped: its handles read and write nothing more.
    #[error("keyspace {} was dropped", String::from_utf8_lossy(.0))]
    KeyspaceDropped(Vec<u8>),

    /// A keyspace handle of one database was given to another.
    #[error("keyspace {} belongs to another database", String::from_utf8_lossy(.0))]
    ForeignKeyspace(Vec<u8>),

    /// The database was created by a build without keyspaces: its keys are
    /// stored bare, so it holds only the default keyspace. Copy it into a
    /// new database (`turtlekv dump` and `turtlekv load`) to add others.
    #[error("this database was created before keyspaces existed and holds only the default one")]
    KeyspacesUnsupported,

    /// Every keyspace id was used (ids are never reused).
    #[error("no keyspace id is left: {0} keyspaces were created")]
    TooManyKeyspaces(u64),

    /// A transaction's commit found that a key it read or wrote (or a key
    /// in a range it read) was changed after its snapshot, or could not
    /// tell (see `Transaction::commit`). Nothing was written; retry.
    #[error("transaction conflict: {0}")]
    Conflict(String),

    /// An earlier write or fsync failed, so the handle refuses further writes.
    /// Reads keep working. Reopen the database to recover.
    #[error("database refuses writes after an earlier I/O failure: {cause}")]
    Poisoned {
        /// The failure that poisoned the handle.
        cause: String,
    },

    /// A write (or anything that would write: a flush, a checkpoint, a
    /// keyspace created or dropped, a backup) on a handle opened with
    /// [`crate::Db::open_read_only`]. Nothing was changed.
    #[error("database at {} is open read-only", .0.display())]
    ReadOnly(PathBuf),

    /// A read-only handle of a database that another process holds open
    /// found that the owner committed a checkpoint after the handle read
    /// the superblock: the pages it read may since have been reused, so
    /// it returns this instead of what it read. Open it again to read
    /// the newer checkpoint, or copy it with `Db::backup` (`turtlekv
    /// backup`), which reads through the owner.
    #[error(
        "the database at {} changed while reading (a checkpoint committed since the read-only \
         open); retry, or use `turtlekv backup`",
        .0.display()
    )]
    ChangedWhileReading(PathBuf),

    /// A backup's destination was refused before anything was written:
    /// it exists and is not an empty directory, it lies inside the
    /// database (or the database inside it), or inside another database.
    #[error("cannot back up to {}: {reason}", dest.display())]
    BackupTarget {
        /// The destination given.
        dest: PathBuf,
        /// Why it was refused.
        reason: String,
    },
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        let changed = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<ChangedUnderReader>());
        match changed {
            Some(changed) => Error::ChangedWhileReading(changed.0.clone()),
            None => Error::Io(e),
        }
    }
}

/// What a read-only handle's file layer (`db::read_only`) fails a read
/// with when the database's owner committed since the handle's open:
/// carried inside an `io::Error` through the layers that only know I/O,
/// and turned into `Error::ChangedWhileReading` by `From<io::Error>`.
#[derive(Debug)]
pub(crate) struct ChangedUnderReader(pub PathBuf);

impl std::fmt::Display for ChangedUnderReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the database at {} changed while reading",
            self.0.display()
        )
    }
}

impl std::error::Error for ChangedUnderReader {}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error for a database file that would not open: with
    /// `direct_io` on, a file system that refuses `O_DIRECT` (`EINVAL`, as
    /// tmpfs before Linux 6.6 and some FUSE and network file systems do)
    /// is an options error that names the option, not a bare "invalid
    /// argument".
    pub(crate) fn opening(e: io::Error, direct_io: bool, path: &Path) -> Error {
        if direct_io && e.raw_os_error() == Some(libc::EINVAL) {
            return Error::InvalidOptions(format!(
                "direct_io: the file system holding {} refuses O_DIRECT ({e}); \
                 open with Options::direct_io off",
                path.display()
            ));
        }
        e.into()
    }

    pub(crate) fn corruption(
        file: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<String>,
    ) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }
}

/// Bytes that break a rule of their format, as a decoder reports them:
/// what failed, and where, as a byte offset within the unit the decoder
/// was given (a page's contents, a WAL record, a superblock slot, a
/// filter). The offset is that of the field that failed a structural check,
/// or the start of the bytes a failed checksum covers (which byte of them
/// changed, a checksum cannot tell). Decoders know nothing of files: the
/// layer that knows where the unit lies turns the error into
/// [`Error::Corruption`] with the file and the absolute offset
/// ([`DecodeError::into_corruption`], or the page store's mapping of
/// content offsets through its blocks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodeError {
    /// What check failed.
    pub what: Cow<'static, str>,
    /// Byte offset within the decoded unit.
    pub offset: u64,
}

impl DecodeError {
    pub(crate) fn new(offset: usize, what: impl Into<Cow<'static, str>>) -> Self {
        DecodeError {
            what: what.into(),
            offset: offset as u64,
        }
    }

    /// The same error in a unit that holds the decoded one at `unit_offset`
    /// (a chunk's blocks within their page, a record within its segment).
    #[must_use]
    pub(crate) fn within(mut self, unit_offset: u64) -> Self {
        self.offset = self.offset.saturating_add(unit_offset);
        self
    }

    /// The corruption error for a unit that starts at byte `unit_offset`
    /// of `file` and lies there contiguously (a WAL record, a superblock
    /// slot; not page contents, which the page store's blocks interleave
    /// with their trailers).
    pub(crate) fn into_corruption(self, file: impl Into<PathBuf>, unit_offset: u64) -> Error {
        Error::corruption(file, unit_offset.saturating_add(self.offset), self.what)
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (at byte {})", self.what, self.offset)
    }
}

impl std::error::Error for DecodeError {}

/// For the fuzzing entry points and tests, which report decode failures
/// as text.
impl From<DecodeError> for String {
    fn from(e: DecodeError) -> String {
        e.to_string()
    }
}

/// The first failure of a write or sync, after which a handle refuses
/// writes: the state of the failed write on disk is unknown, and a retried
/// `fsync` can report success after the kernel dropped the dirty pages.
///
/// A read-only handle is refused the same way from its open on, with
/// `Error::ReadOnly`: every write path already asks this first.
#[derive(Debug, Default)]
pub(crate) struct Poison {
    first: std::sync::OnceLock<String>,
    read_only: std::sync::OnceLock<PathBuf>,
}

impl Poison {
    /// `Err(ReadOnly)` on a read-only handle, `Err(Poisoned)` once a
    /// failure was recorded.
    pub fn check(&self) -> Result<()> {
        if let Some(path) = self.read_only.get() {
            return Err(Error::ReadOnly(path.clone()));
        }
        match self.first.get() {
            Some(cause) => Err(Error::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Refuses every write from now on, as the handle of `path` is
    /// read-only.
    pub fn set_read_only(&self, path: PathBuf) {
        self.read_only.get_or_init(|| path);
    }

    /// Whether the handle is read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only.get().is_some()
    }

    /// Records `cause` unless an earlier failure was recorded; keeps the
    /// first.
    pub fn set(&self, cause: impl std::fmt::Display) {
        self.first.get_or_init(|| cause.to_string());
    }

    /// Records an I/O failure and returns it as an error.
    pub fn with_io(&self, e: std::io::Error) -> Error {
        self.set(&e);
        Error::Io(e)
    }

    /// Records a failure already wrapped in an `Error`, and returns it.
    pub fn with_error(&self, e: Error) -> Error {
        self.set(&e);
        e
    }
}
