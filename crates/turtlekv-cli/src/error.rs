//! Exit codes, and how an error found anywhere maps to one.
//!
//! Commands return `anyhow::Error`s with context; the kind of failure is
//! recovered at the top by looking for a marker type or an engine error
//! anywhere in the chain, so a command can add context freely without
//! losing its exit code.

use std::fmt;
use std::process::ExitCode;

/// Exit statuses, documented in `docs/cli.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything else that failed: I/O errors, a bad input file, a
    /// bad stored `OPTIONS` file, keys or values the engine refuses.
    Failure = 1,
    /// The command line was wrong (clap uses 2 for its own errors too).
    Usage = 2,
    /// `get` found no value for the key.
    NotFound = 3,
    /// No database at the path given (or, for `put` and `load`, a path
    /// where none may be created).
    NoDatabase = 4,
    /// Another handle, in this or another process, holds the database.
    Locked = 5,
    /// Stored bytes failed a checksum or an invariant.
    Corruption = 6,
    /// No keyspace of the name given (`--keyspace` of a command that does
    /// not create one, `drop-keyspace`).
    NoKeyspace = 7,
    /// A `--read-only` command found that the process holding the
    /// database committed a checkpoint while it read: nothing it read was
    /// printed as data past that point; run it again.
    Changed = 8,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit as u8)
    }
}

/// A command-line value that parsed but means nothing (bad hex, say).
#[derive(Debug)]
pub struct UsageError(pub String);

/// The path names no database.
#[derive(Debug)]
pub struct NoDatabase(pub String);

/// `get` found nothing for this key (as the user wrote it).
#[derive(Debug)]
pub struct NotFound(pub String);

/// The database has no keyspace of the name given.
#[derive(Debug)]
pub struct NoKeyspace(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for NoDatabase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for NotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key {:?} not found", self.0)
    }
}

impl fmt::Display for NoKeyspace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}
impl std::error::Error for NoDatabase {}
impl std::error::Error for NotFound {}
impl std::error::Error for NoKeyspace {}

/// Shorthand for a usage error.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

/// The exit status for `err`: the first cause in its chain that says what
/// kind of failure this was.
pub fn exit_for(err: &anyhow::Error) -> Exit {
    for cause in err.chain() {
        if cause.is::<UsageError>() {
            return Exit::Usage;
        }
        if cause.is::<NoDatabase>() {
            return Exit::NoDatabase;
        }
        if cause.is::<NotFound>() {
            return Exit::NotFound;
        }
        if cause.is::<NoKeyspace>() {
            return Exit::NoKeyspace;
        }
        match cause.downcast_ref::<turtlekv::Error>() {
            Some(turtlekv::Error::Locked(_)) => return Exit::Locked,
            Some(turtlekv::Error::NestedDatabase { .. }) => return Exit::NoDatabase,
            Some(turtlekv::Error::Corruption { .. }) => return Exit::Corruption,
            Some(turtlekv::Error::KeyspaceNotFound(_)) => return Exit::NoKeyspace,
            Some(turtlekv::Error::ChangedWhileReading(_)) => return Exit::Changed,
            // A destination `backup` refuses is a bad argument.
            Some(turtlekv::Error::BackupTarget { .. }) => return Exit::Usage,
            // Checked before anything is opened; this is the engine's word.
            Some(turtlekv::Error::InvalidKeyspaceName { .. }) => return Exit::Usage,
            _ => {}
        }
    }
    Exit::Failure
}

/// True when `err` comes from writing to a closed pipe (`turtlekv scan
/// DB | head`): the reader has all it wanted, so that is not a failure.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use anyhow::Context as _;

    use super::*;

    #[test]
    fn the_kind_survives_added_context() {
        let locked = Err::<(), _>(turtlekv::Error::Locked("/db".into()))
            .context("opening /db")
            .unwrap_err();
        assert_eq!(exit_for(&locked), Exit::Locked);
        let corrupt = anyhow::Error::from(turtlekv::Error::Io(std::io::Error::other("x")));
        assert_eq!(exit_for(&corrupt), Exit::Failure);
        let bad = Err::<(), _>(usage("bad hex")).context("key").unwrap_err();
        assert_eq!(exit_for(&bad), Exit::Usage);
        assert_eq!(exit_for(&NotFound("k".into()).into()), Exit::NotFound);
        let gone = Err::<(), _>(turtlekv::Error::KeyspaceNotFound(b"ks".to_vec()))
            .context("dropping")
            .unwrap_err();
        assert_eq!(exit_for(&gone), Exit::NoKeyspace);
        let pipe = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("writing");
        assert!(is_broken_pipe(&pipe));
        assert!(!is_broken_pipe(&bad));
    }
}
