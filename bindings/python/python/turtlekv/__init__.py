"""TurtleKV: an embedded, durable, ordered key-value store.

`turtlekv.open(path, **options)` returns a `Db`, a mapping of bytes to
bytes in key order with snapshots, transactions, keyspaces and backups.
See `help(turtlekv.Db)` and `docs/python.md` in the repository.
"""

from ._errors import (
    BackupTargetError,
    ChangedWhileReadingError,
    ClosedError,
    ConflictError,
    CorruptionError,
    Error,
    InvalidArgumentError,
    InvalidOptionsError,
    IoError,
    KeyspaceDroppedError,
    KeyspaceError,
    KeyspaceNotFoundError,
    LockedError,
    NestedDatabaseError,
    PoisonedError,
    ReadOnlyError,
)
from ._turtlekv import (
    MAX_KEY_SIZE,
    MAX_VALUE_SIZE,
    Db,
    Keyspace,
    RangeIterator,
    Snapshot,
    Transaction,
    WriteBatch,
    backup_at,
    is_in_use,
    open,
)

from . import _errors

__all__ = [
    "open",
    "backup_at",
    "is_in_use",
    "Db",
    "Keyspace",
    "Snapshot",
    "Transaction",
    "WriteBatch",
    "RangeIterator",
    "MAX_KEY_SIZE",
    "MAX_VALUE_SIZE",
    *_errors.__all__,
]
