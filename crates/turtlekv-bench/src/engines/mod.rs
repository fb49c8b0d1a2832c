//! The stores under test, behind one small trait.
//!
//! Every adapter gets the same [`EngineConfig`]: one cache budget, one
//! durability setting, how compressible the values are, a fresh directory.
//! Peer engines are compiled only with their cargo feature.

use std::fmt;
use std::path::Path;

use anyhow::{Result, bail};

#[cfg(feature = "fjall")]
mod fjall;
#[cfg(feature = "lmdb")]
mod lmdb;
#[cfg(feature = "redb")]
mod redb;
#[cfg(feature = "rocksdb")]
mod rocksdb;
mod turtlekv;

/// The LMDB C library's version (`LMDB 0.9.70`), when LMDB is built in.
pub fn lmdb_library_version() -> Option<String> {
    #[cfg(feature = "lmdb")]
    {
        let v = ::heed::lmdb_version();
        Some(format!("LMDB {}.{}.{}", v.major, v.minor, v.patch))
    }
    #[cfg(not(feature = "lmdb"))]
    {
        None
    }
}

/// Settings every engine is opened with.
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    /// Bytes of cache the engine may use for data it reads.
    pub cache_bytes: u64,
    /// Bypass the OS page cache where the engine supports it.
    pub direct_io: bool,
    /// `true`: every write is on stable storage before it returns.
    /// `false`: the write-ahead log is written, not fsynced, per write.
    pub sync: bool,
    /// Threads the run will use, for engines that size pools by it.
    pub threads: usize,
    /// TurtleKV's own knobs.
    pub turtlekv: TurtlekvKnobs,
    /// RocksDB: MemTables, index and filter blocks count against the block
    /// cache too (`--rocksdb-memory-in-cache`).
    pub rocksdb_memory_in_cache: bool,
    /// RocksDB's blob files and fjall's key-value separation
    /// (`--peer-kv-separation`).
    pub peer_kv_separation: bool,
    /// Share of each value LZ4 removes (`--value-compressibility`); above
    /// 0, the peers that compress (RocksDB, fjall) do, with LZ4.
    pub value_compressibility: f64,
    /// Read-modify-writes run as transactions (`--rmw-transactions`):
    /// RocksDB opens as an `OptimisticTransactionDB` and fjall as an
    /// `OptimisticTxDatabase`, whose plain puts are then transactions too;
    /// the other engines need nothing at open.
    pub rmw_transactions: bool,
}

impl EngineConfig {
    /// Whether the values compress, so that engines should compress them.
    pub fn compressible_values(&self) -> bool {
        self.value_compressibility > 0.0
    }
}

/// TurtleKV's own knobs for a run; `None` keeps the engine's default.
#[derive(Debug, Clone, Copy, Default)]
pub struct TurtlekvKnobs {
    /// MemTable capacity (checkpoint distance).
    pub checkpoint_distance_bytes: Option<u64>,
    /// MemTable capacity while writes come alone.
    pub write_only_checkpoint_distance_bytes: Option<u64>,
    /// Record-cache share of the budget (0 turns it off).
    pub record_cache_bytes: Option<u64>,
    /// Leaf and segment page size.
    pub leaf_size_bytes: Option<u64>,
    /// Filter bits per key (0 turns filters off).
    pub filter_bits_per_key: Option<u32>,
    /// Garbage the tree may hold, in percent of its live bytes.
    pub garbage_percent: Option<u32>,
    /// Values at least this long go to value files.
    pub value_separation_threshold_bytes: Option<u64>,
    /// Live share under which a value file is collected.
    pub value_file_min_live_percent: Option<u8>,
    /// Threads of the checkpoint pool.
    pub checkpoint_threads: Option<usize>,
    /// Let the engine move memory between its record cache and page cache.
    pub record_cache_auto_split: bool,
    /// Checkpoints in the idle I/O class while nobody waits for one.
    pub checkpoint_io_idle: bool,
}

/// What [`Engine::read_modify_write`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmwOutcome {
    /// The key was found; its value is in the `out` buffer.
    pub found: bool,
    /// Commits the engine refused (conflicts, and RocksDB's Busy and
    /// TryAgain), each followed by a retry from the read.
    pub retries: u64,
}

/// How one attempt at a transactional read-modify-write ended.
pub(crate) enum Attempt {
    /// Committed; whether the key was found.
    Committed(bool),
    /// The commit was refused; nothing was written.
    Conflicted,
}

/// Attempts before a read-modify-write gives up: an engine that refuses
/// this many commits in a row is live-locked, not busy.
const MAX_RMW_ATTEMPTS: u64 = 100_000;

/// Runs `attempt` (one transaction: read, write, commit) until it commits.
pub(crate) fn retry_on_conflict(
    mut attempt: impl FnMut() -> Result<Attempt>,
) -> Result<RmwOutcome> {
    for retries in 0..MAX_RMW_ATTEMPTS {
        if let Attempt::Committed(found) = attempt()? {
            return Ok(RmwOutcome { found, retries });
        }
    }
    bail!("a read-modify-write conflicted {MAX_RMW_ATTEMPTS} times in a row")
}

/// A key-value store as the driver sees it. All methods may be called from
/// several threads at once.
pub trait Engine: Send + Sync {
    /// Inserts or overwrites `key`.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;

    /// Copies the value of `key` into `out`; `false` when absent.
    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;

    /// Visits up to `count` records with keys `>= start`, in key order.
    /// Returns how many were visited.
    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize>;

    /// Reads `key` into `out` and writes `value` to it as one transaction
    /// (`--rmw-transactions`), retrying from the read while the commit is
    /// refused. Every adapter here overrides it; the default, for an
    /// engine without transactions, is a get and then a put, not atomic.
    fn read_modify_write(&self, key: &[u8], value: &[u8], out: &mut Vec<u8>) -> Result<RmwOutcome> {
        let found = self.get(key, out)?;
        self.put(key, value)?;
        Ok(RmwOutcome { found, retries: 0 })
    }

    /// Makes every acknowledged write durable, at the end of a phase, so
    /// that the next phase starts from the same state for every engine.
    fn persist(&self) -> Result<()>;

    /// Finishes the background work earlier writes left (MemTable flushes,
    /// compactions, checkpoints), so that a phase is charged for its own
    /// writes and the next starts without another phase's debt. Untimed.
    fn settle(&self) -> Result<()> {
        Ok(())
    }

    /// Engine counters worth printing after each phase, if the engine
    /// offers any (TurtleKV with `TURTLEKV_BENCH_STATS` set).
    fn phase_report(&self) -> Option<String> {
        None
    }
}

/// The engines this benchmark knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum EngineKind {
    Turtlekv,
    Rocksdb,
    Fjall,
    Redb,
    Lmdb,
}

impl EngineKind {
    /// Lower-case name, as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Turtlekv => "turtlekv",
            EngineKind::Rocksdb => "rocksdb",
            EngineKind::Fjall => "fjall",
            EngineKind::Redb => "redb",
            EngineKind::Lmdb => "lmdb",
        }
    }

    /// Whether this binary was built with the engine.
    pub fn is_built(self) -> bool {
        match self {
            EngineKind::Turtlekv => true,
            EngineKind::Rocksdb => cfg!(feature = "rocksdb"),
            EngineKind::Fjall => cfg!(feature = "fjall"),
            EngineKind::Redb => cfg!(feature = "redb"),
            EngineKind::Lmdb => cfg!(feature = "lmdb"),
        }
    }

    /// Whether the engine honours `--direct-io` (the others read through
    /// the OS page cache regardless).
    pub fn supports_direct_io(self) -> bool {
        matches!(self, EngineKind::Turtlekv | EngineKind::Rocksdb)
    }

    /// An error naming the cargo feature when the engine is not built in.
    pub fn ensure_built(self) -> Result<()> {
        if !self.is_built() {
            bail!(
                "engine {} is not built into this binary; rebuild with `--features {}`",
                self.name(),
                self.feature_name()
            );
        }
        Ok(())
    }

    /// Opens a new store in the empty directory `dir`.
    pub fn open(self, dir: &Path, config: &EngineConfig) -> Result<Box<dyn Engine>> {
        self.ensure_built()?;
        match self {
            EngineKind::Turtlekv => Ok(Box::new(turtlekv::TurtleKv::open(dir, config)?)),
            #[cfg(feature = "rocksdb")]
            EngineKind::Rocksdb => Ok(Box::new(rocksdb::RocksDb::open(dir, config)?)),
            #[cfg(feature = "fjall")]
            EngineKind::Fjall => Ok(Box::new(fjall::Fjall::open(dir, config)?)),
            #[cfg(feature = "redb")]
            EngineKind::Redb => Ok(Box::new(redb::Redb::open(dir, config)?)),
            #[cfg(feature = "lmdb")]
            EngineKind::Lmdb => Ok(Box::new(lmdb::Lmdb::open(dir, config)?)),
            #[cfg(not(all(
                feature = "rocksdb",
                feature = "fjall",
                feature = "redb",
                feature = "lmdb"
            )))]
            _ => unreachable!("is_built() rejected engines left out of the build"),
        }
    }

    fn feature_name(self) -> &'static str {
        match self {
            EngineKind::Lmdb => "lmdb",
            other => other.name(),
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built engine must agree on the trait's contract; the peers are
    /// checked when their features are on (`cargo test --features ...`).
    /// A small configuration for the engines' tests.
    pub(crate) fn test_config() -> EngineConfig {
        EngineConfig {
            cache_bytes: 8 << 20,
            direct_io: false,
            sync: false,
            threads: 2,
            turtlekv: TurtlekvKnobs::default(),
            rocksdb_memory_in_cache: false,
            peer_kv_separation: false,
            value_compressibility: 0.0,
            rmw_transactions: false,
        }
    }

    #[test]
    fn built_engines_put_get_scan() {
        let config = test_config();
        // RocksDB twice: with only data blocks in its cache, and with its
        // MemTables, index and filter blocks charged to it as well. RocksDB
        // and fjall again with compressible values, which they compress.
        for (kind, memory_in_cache, value_compressibility) in [
            (EngineKind::Turtlekv, false, 0.0),
            (EngineKind::Rocksdb, false, 0.0),
            (EngineKind::Rocksdb, true, 0.0),
            (EngineKind::Rocksdb, false, 0.5),
            (EngineKind::Fjall, false, 0.0),
            (EngineKind::Fjall, false, 0.5),
            (EngineKind::Redb, false, 0.0),
            (EngineKind::Lmdb, false, 0.0),
        ] {
            let config = EngineConfig {
                rocksdb_memory_in_cache: memory_in_cache,
                value_compressibility,
                ..config
            };
            let dir = tempfile::tempdir().unwrap();
            let opened = kind.open(dir.path(), &config);
            if !kind.is_built() {
                let message = opened
                    .err()
                    .expect("unbuilt engine must not open")
                    .to_string();
                assert!(message.contains("--features"), "{message}");
                continue;
            }
            let engine = opened.unwrap();
            for i in [5u8, 1, 3, 9, 7] {
                engine.put(&[b'k', i], &[i; 4]).unwrap();
            }
            engine.put(&[b'k', 3], b"new").unwrap();
            // Settling (flushes, compactions, a checkpoint) keeps every record.
            engine.persist().unwrap();
            engine.settle().unwrap();
            let mut out = Vec::new();
            assert!(engine.get(b"k\x03", &mut out).unwrap(), "{kind}");
            assert_eq!(out, b"new");
            assert!(!engine.get(b"k\x04", &mut out).unwrap(), "{kind}");
            let mut seen = Vec::new();
            let n = engine
                .scan(b"k\x02", 3, &mut |k, _| seen.push(k[1]))
                .unwrap();
            assert_eq!((n, seen), (3, vec![3, 5, 7]), "{kind}");
            let mut tail = Vec::new();
            let n = engine
                .scan(b"k\x08", 10, &mut |k, _| tail.push(k[1]))
                .unwrap();
            assert_eq!((n, tail), (1, vec![9]), "{kind}");
            engine.persist().unwrap();
        }
    }

    /// Every built engine, opened for `--rmw-transactions`: a
    /// read-modify-write returns the value before it and leaves its own,
    /// of a present key and of an absent one, and plain puts, gets and
    /// scans still work beside it.
    #[test]
    fn built_engines_read_modify_write_as_transactions() {
        let config = EngineConfig {
            rmw_transactions: true,
            ..test_config()
        };
        for kind in [
            EngineKind::Turtlekv,
            EngineKind::Rocksdb,
            EngineKind::Fjall,
            EngineKind::Redb,
            EngineKind::Lmdb,
        ] {
            if !kind.is_built() {
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            let engine = kind.open(dir.path(), &config).unwrap();
            engine.put(b"k1", b"old").unwrap();
            let mut out = Vec::new();
            let outcome = engine.read_modify_write(b"k1", b"new", &mut out).unwrap();
            assert_eq!(
                (outcome.found, outcome.retries, &out[..]),
                (true, 0, &b"old"[..]),
                "{kind}"
            );
            let outcome = engine.read_modify_write(b"k2", b"two", &mut out).unwrap();
            assert!(!outcome.found, "{kind}");
            engine.persist().unwrap();
            engine.settle().unwrap();
            for (key, value) in [(&b"k1"[..], &b"new"[..]), (b"k2", b"two")] {
                assert!(engine.get(key, &mut out).unwrap(), "{kind}");
                assert_eq!(out, value, "{kind}");
            }
            let mut seen = Vec::new();
            engine
                .scan(b"k", 10, &mut |k, _| seen.push(k.to_vec()))
                .unwrap();
            assert_eq!(seen, [b"k1".to_vec(), b"k2".to_vec()], "{kind}");
        }
    }

    #[test]
    fn retries_are_counted_and_bounded() {
        let mut refusals = 3;
        let outcome = retry_on_conflict(|| {
            Ok(if refusals > 0 {
                refusals -= 1;
                Attempt::Conflicted
            } else {
                Attempt::Committed(true)
            })
        })
        .unwrap();
        assert_eq!(
            outcome,
            RmwOutcome {
                found: true,
                retries: 3
            }
        );
        let err = retry_on_conflict(|| Ok(Attempt::Conflicted)).unwrap_err();
        assert!(err.to_string().contains("in a row"), "{err}");
    }
}
