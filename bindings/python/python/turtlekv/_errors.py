"""The exceptions TurtleKV raises: every engine error is a `turtlekv.Error`."""

from __future__ import annotations

__all__ = [
    "Error",
    "IoError",
    "CorruptionError",
    "InvalidArgumentError",
    "InvalidOptionsError",
    "LockedError",
    "NestedDatabaseError",
    "KeyspaceError",
    "KeyspaceNotFoundError",
    "KeyspaceDroppedError",
    "ConflictError",
    "PoisonedError",
    "ReadOnlyError",
    "ChangedWhileReadingError",
    "BackupTargetError",
    "ClosedError",
]


class Error(Exception):
    """Base class of every error TurtleKV raises."""


class IoError(Error, OSError):
    """The operating system reported an I/O failure (`errno` is set when it
    gave one)."""


class CorruptionError(Error):
    """Stored bytes failed a checksum or a structural check; never returned
    as data. Attributes: `file`, `offset`, `reason`."""


class InvalidArgumentError(Error, ValueError):
    """An argument the engine refuses, detected before anything is written:
    an empty or too long key, a too long value, an empty or inverted range
    (`start` and `end` are set), a too large batch, a bad keyspace name."""


class InvalidOptionsError(InvalidArgumentError):
    """An option is out of range or inconsistent with another."""


class LockedError(Error):
    """Another handle, of this or another process, holds the database open
    (`path`)."""


class NestedDatabaseError(Error):
    """Creating a database inside another's directory was refused (`path`,
    `outer`)."""


class KeyspaceError(Error):
    """A keyspace problem: a handle of another database, no keyspace left,
    or a database created before keyspaces existed."""


class KeyspaceNotFoundError(KeyspaceError):
    """No keyspace of that name (`name`) exists."""


class KeyspaceDroppedError(KeyspaceError):
    """The keyspace (`name`) was dropped: its handles read and write nothing
    more."""


class ConflictError(Error):
    """A transaction's commit found that what it read or wrote changed since
    it began. Nothing was written: retry the transaction."""


class PoisonedError(Error):
    """An earlier write or sync failed, so the handle refuses writes (reads
    go on); reopen the database to recover. `cause` says what failed."""


class ReadOnlyError(Error):
    """A write on a handle opened with `read_only=True`."""


class ChangedWhileReadingError(Error):
    """A read-only handle of a database another process holds found that the
    owner checkpointed since the handle opened: open it again."""


class BackupTargetError(Error):
    """A backup's destination was refused before anything was written
    (`dest`, `reason`)."""


class ClosedError(Error, ValueError):
    """A call on a closed database (or on a snapshot, iterator, keyspace or
    transaction of one), a closed snapshot, or a finished transaction."""
