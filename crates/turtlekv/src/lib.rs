//! TurtleKV: an embedded, durable, ordered key-value store.
//!
//! Writes go to a write-ahead log and a big MemTable; checkpoints move them
//! into a TurtleTree (a B-epsilon-plus tree with level-tiered node buffers).
//! See `docs/` in the repository for formats and durability promises.
//!
//! ```
//! use turtlekv::{Db, Options, WriteBatch, WriteOptions};
//! # let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(dir.path(), Options::default())?;
//! db.put(b"apple", b"red")?;
//! let mut batch = WriteBatch::new();
//! batch.put(b"banana", b"yellow").delete(b"apple");
//! db.write(batch, &WriteOptions::new().sync(true))?;
//! assert_eq!(db.get(b"apple")?, None);
//! let keys: Vec<_> = db.prefix(b"ban").map(|kv| kv.map(|(k, _)| k)).collect::<Result<_, _>>()?;
//! assert_eq!(keys, vec![&b"banana"[..]]);
//! # Ok::<(), turtlekv::Error>(())
//! ```

/// Compiles and runs the README's example, so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeExample;

mod batch;
#[cfg(any(test, feature = "sim"))]
pub mod bench_hooks;
mod checkpoint;
mod db;
mod error;
mod filter;
#[cfg(any(test, feature = "sim"))]
pub mod fuzz;
// The file layer is public only for the tests that swap in a file system
// of their own (`sim`): without it nothing public names its types.
#[cfg(feature = "sim")]
pub mod io;
#[cfg(not(feature = "sim"))]
mod io;
mod key;
mod mem;
mod memtable;
mod options;
mod options_file;
mod page;
mod policy;
mod record_cache;
mod stats;
mod store;
mod tree;
mod util;
mod values;
mod wal;

pub use batch::WriteBatch;
pub use bytes::Bytes;
pub use db::BackupReport;
pub use db::CheckReport;
pub use db::Snapshot;
pub use db::{CONTROL_SOCKET_NAME, Db, LOCK_FILE_NAME};
pub use db::{CompareAndSwapError, Transaction, TransactionIter};
pub use db::{Iter, Keys};
pub use db::{Keyspace, KeyspaceStats};
pub use error::{Error, Result};
pub use options::{Compression, MAX_KEY_SIZE, MAX_VALUE_SIZE, Options, WalRecovery, WriteOptions};
pub use options_file::OPTIONS_FILE_NAME;
pub use stats::Stats;
