//! Tuning and durability options.

use crate::{Error, Result};

/// Longest key accepted, in bytes.
pub const MAX_KEY_SIZE: usize = 512;
/// Longest value accepted, in bytes (1 GiB). Values at least
/// [`Options::value_separation_threshold_bytes`] long, and any too long
/// for a leaf page, are stored once in value files.
pub const MAX_VALUE_SIZE: usize = 1 << 30;
/// Longest value the WAL, MemTables and leaves hold in place: a value
/// pointer's target takes longer ones.
pub(crate) const MAX_INLINE_VALUE_BYTES: usize = 256 * 1024;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
pub(crate) use crate::policy::{MIN_CACHE_CAPACITY_BYTES, MIN_CHECKPOINT_DISTANCE_BYTES};

/// Options for [`crate::Db::open`]. `Options::default()` is a sound start.
///
/// Page sizes shape the on-disk format and are fixed when a database is
/// created; the memory knobs can also be changed while the database runs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// Create the directory and an empty database when none exists.
    pub create_if_missing: bool,
    /// Memory budget shared by the page cache and the MemTables: the page
    /// cache gets what the MemTables (active and frozen) and the record
    /// cache do not use, less, while a checkpoint runs, twice the MemTable
    /// it checkpoints (its working set), but never less than an eighth of
    /// it. Changeable at runtime with
    /// [`crate::Db::set_cache_capacity`].
    pub cache_capacity_bytes: u64,
    /// MemTable capacity: bytes of updates gathered before one checkpoint.
    /// Larger means lower write amplification and less memory for the page
    /// cache. Capped at a quarter of `cache_capacity_bytes` (the active and
    /// the frozen MemTable then fit in half of the budget, beside the
    /// running checkpoint's working set).
    /// Changeable at runtime with [`crate::Db::set_checkpoint_distance`].
    pub checkpoint_distance_bytes: u64,
    /// MemTable capacity while the database serves writes alone (reads and
    /// scans under 1% of writes over a second of at least 1,000
    /// operations, as in a bulk load) and its checkpoints read pages from
    /// disk (the page cache does not hold the tree). Larger MemTables then
    /// lower write amplification without taking a cached page from a later
    /// reader; the first second in which reads come back, or a checkpoint
    /// finds every page cached, restores `checkpoint_distance_bytes`, and
    /// the next write freezes a MemTable grown past it. Capped so that two
    /// MemTables of it, the working set of a checkpoint of one (twice its
    /// size), the record cache and the page cache's floor (an eighth of
    /// `cache_capacity_bytes`) fit in the budget; a value at or below
    /// `checkpoint_distance_bytes` (the default, 0) turns the switch off.
    /// Off by default: out of cache it cut a 10M-record load's write
    /// amplification by 4.5%, short of RocksDB's, and the phases after the
    /// load peaked about 15 MiB higher in RSS (`docs/tuning.md`). Changeable
    /// at runtime with
    /// [`crate::Db::set_write_only_checkpoint_distance`].
    pub write_only_checkpoint_distance_bytes: u64,
    /// The record cache's share of `cache_capacity_bytes`: newest values of
    /// hot keys read from the tree, a better use of memory than blocks
    /// under skewed point reads. Capped at half the budget; 0 disables it.
    /// Changeable at runtime with [`crate::Db::set_record_cache_capacity`].
    /// With `record_cache_auto_split` this is only the starting share.
    pub record_cache_capacity_bytes: u64,
    /// Grow the record cache at the page cache's expense while the
    /// database runs, a step (1/32 of the budget) at a time, up to half the
    /// budget, when recently evicted records are asked for clearly more
    /// often than recently evicted blocks (ghost lists; `docs/tuning.md`).
    /// It never shrinks the record cache. Experimental and off by default:
    /// in one 10M-record YCSB run it cut disk reads per get by 1.4× against
    /// the best fixed share, in others resizing the page cache under load
    /// made reads several times worse, for a reason not yet found
    /// (`docs/benchmarks.md`).
    pub record_cache_auto_split: bool,
    /// Checkpoint early, before the MemTable is full, when reads dominate
    /// and miss the page cache: the MemTable's memory goes back to the
    /// cache (the TurtleKV paper's future work; see `docs/tuning.md`).
    pub checkpoint_on_read_pressure: bool,
    /// Run the checkpoint's threads in the idle I/O class while no writer
    /// waits for a checkpoint, so that the disk serves reads first; raised
    /// back the moment one waits (Linux). Off by default: on YCSB A out of
    /// cache it cut read p99.9 by more than half, but the deferred
    /// checkpoint I/O slowed the read-mostly phase after it by 10% (see
    /// `docs/tuning.md`).
    pub checkpoint_io_idle: bool,
    /// Threads that merge and serialise pages during a checkpoint; 0 means
    /// one per CPU core.
    pub checkpoint_threads: usize,
    /// Garbage the tree may hold, in percent of its live bytes, before
    /// checkpoints (and the checkpoint thread between them) drain the
    /// buffers that hold the most: flushed items that segment pages keep,
    /// and older versions and deleted records that buffered updates shadow
    /// in the leaves; drains start only while at least half the threshold
    /// is shadowed data (`docs/tuning.md`, "Disk space"). Lower values use less
    /// disk for more write amplification under overwrites and deletes;
    /// 0 turns reclamation off. At most 1000.
    pub garbage_percent: u32,
    /// Largest leaf page, in bytes (multiple of 4 KiB).
    pub leaf_size_bytes: u64,
    /// Size of a node page, in bytes (power of two). Below 4 KiB it bounds
    /// keys below `MAX_KEY_SIZE`, as four pivots must fit a node: 475 bytes
    /// for 2 KiB, 219 for 1 KiB and 91 for 512 B (`Error::KeyTooLarge`).
    pub node_size_bytes: u64,
    /// Bits per key of the per-leaf filters; 0 disables filters.
    pub filter_bits_per_key: u32,
    /// Read and write pages with `O_DIRECT`, bypassing the OS page cache.
    pub direct_io: bool,
    /// A WAL segment is closed and a new one started past this size.
    pub wal_segment_size_bytes: u64,
    /// What an open does when the WAL is not whole: WAL segments missing
    /// (the newest ones, one in the middle, all of `wal/`), records
    /// damaged after a later one proves them synced, a gap after the
    /// checkpoint. Not stored in `OPTIONS`: recovering is a choice made
    /// for one open.
    pub wal_recovery: WalRecovery,
    /// How checkpoints compress the chunks of the leaf and buffer-segment
    /// pages they write ([`Compression`]; `docs/tuning.md`,
    /// "Compression"). Each chunk records its codec, so this may change
    /// between opens: pages already written stay as they are and are read
    /// as they were written.
    pub compression: Compression,
    /// Values at least this long are written once to an append-only value
    /// file, and the WAL and the tree hold a small pointer to them
    /// (`docs/tuning.md`, "Large values"); shorter ones are stored in
    /// place. Values too long for a leaf page are separated whatever this
    /// says. At least 64; `u64::MAX` separates only those.
    pub value_separation_threshold_bytes: u64,
    /// A value file whose live records hold less than this percentage of
    /// its bytes has them moved to the newest file and is removed, in the
    /// background (`docs/tuning.md`, "Large values"). Higher: less disk,
    /// more rewriting. 0 turns value garbage collection off. At most 100;
    /// 75 by default.
    pub value_file_min_live_percent: u32,
    /// A value file takes no more records once it is this long, and the
    /// next one is started. Smaller files are collected sooner and in
    /// smaller steps; larger ones mean fewer files. At least 4 KiB.
    pub value_file_size_bytes: u64,
}

/// How leaf and buffer-segment chunks are compressed (`docs/format.md`,
/// "Compressed chunks"). A chunk that does not shrink is stored as it is.
/// Stored in `OPTIONS` as `none`, `lz4`, `zstd` or `zstd:<level>`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Compression {
    /// Chunks are stored as their items.
    None,
    /// LZ4 (the `lz4_flex` block format): fast to compress and to read,
    /// about half the size of text-like values.
    #[default]
    Lz4,
    /// zstd at `level` (`zstd::compression_level_range()`, -131072..=22;
    /// 0 is zstd's default, 3): smaller than LZ4, slower to compress and
    /// to read.
    Zstd {
        /// zstd's compression level.
        level: i32,
    },
}

impl Compression {
    /// zstd's default level, which `zstd` without a level names.
    pub const ZSTD_DEFAULT_LEVEL: i32 = 3;

    /// Checks a zstd level against the range zstd accepts.
    pub fn validate(self) -> Result<()> {
        match self {
            Compression::Zstd { level } if !zstd::compression_level_range().contains(&level) => {
                Err(Error::InvalidOptions(format!(
                    "compression = zstd:{level}: the level must be in {:?}",
                    zstd::compression_level_range()
                )))
            }
            _ => Ok(()),
        }
    }
}

impl std::str::FromStr for Compression {
    type Err = Error;

    /// `none`, `lz4`, `zstd` or `zstd:<level>`.
    fn from_str(s: &str) -> Result<Self> {
        let parsed = match s.split_once(':') {
            None if s == "none" => Compression::None,
            None if s == "lz4" => Compression::Lz4,
            None if s == "zstd" => Compression::Zstd {
                level: Compression::ZSTD_DEFAULT_LEVEL,
            },
            Some(("zstd", level)) => Compression::Zstd {
                level: level.parse().map_err(|_| {
                    Error::InvalidOptions(format!("compression = {s:?}: bad zstd level"))
                })?,
            },
            _ => {
                return Err(Error::InvalidOptions(format!(
                    "compression = {s:?}: expected \"none\", \"lz4\", \"zstd\" or \"zstd:<level>\""
                )));
            }
        };
        parsed.validate()?;
        Ok(parsed)
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compression::None => f.write_str("none"),
            Compression::Lz4 => f.write_str("lz4"),
            Compression::Zstd { level } => write!(f, "zstd:{level}"),
        }
    }
}

/// How an open treats a WAL that is not whole (`docs/format.md`,
/// "Recovery rules"), as RocksDB's WAL recovery modes do. A torn tail of
/// unsynced writes, which a power cut leaves, is cut in either mode: it
/// is no corruption.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WalRecovery {
    /// Missing segments and damage to records that were synced are
    /// `Error::Corruption`, naming what is missing or damaged; nothing is
    /// changed.
    #[default]
    Strict,
    /// Opens at the last consistent point: the log ends at the first
    /// missing segment or damaged record, and what follows is dropped
    /// (the damaged segment cut there, later segments removed), counted
    /// in `Stats::wal_missing_segments` and
    /// `Stats::wal_recovery_bytes_dropped`. Segments of another database
    /// or of a newer format, and I/O errors, are still reported.
    PointInTime,
}

impl std::str::FromStr for WalRecovery {
    type Err = Error;

    /// `strict` or `point-in-time`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "strict" => Ok(WalRecovery::Strict),
            "point-in-time" => Ok(WalRecovery::PointInTime),
            other => Err(Error::InvalidOptions(format!(
                "wal_recovery = {other:?}: expected \"strict\" or \"point-in-time\""
            ))),
        }
    }
}

impl std::fmt::Display for WalRecovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WalRecovery::Strict => "strict",
            WalRecovery::PointInTime => "point-in-time",
        })
    }
}

/// `Options::garbage_percent` by default.
pub const DEFAULT_GARBAGE_PERCENT: u32 = 15;
const MAX_GARBAGE_PERCENT: u32 = 1000;

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            cache_capacity_bytes: 256 * MIB,
            checkpoint_distance_bytes: 64 * MIB,
            write_only_checkpoint_distance_bytes: 0,
            checkpoint_threads: 0,
            garbage_percent: DEFAULT_GARBAGE_PERCENT,
            checkpoint_on_read_pressure: true,
            checkpoint_io_idle: false,
            record_cache_capacity_bytes: 32 * MIB,
            record_cache_auto_split: false,
            leaf_size_bytes: 2 * MIB,
            node_size_bytes: 4 * KIB,
            filter_bits_per_key: 10,
            direct_io: false,
            wal_segment_size_bytes: 64 * MIB,
            wal_recovery: WalRecovery::Strict,
            compression: Compression::Lz4,
            value_separation_threshold_bytes: DEFAULT_VALUE_SEPARATION_THRESHOLD_BYTES,
            value_file_min_live_percent: 75,
            value_file_size_bytes: 64 * MIB,
        }
    }
}

/// `Options::value_separation_threshold_bytes` by default.
pub const DEFAULT_VALUE_SEPARATION_THRESHOLD_BYTES: u64 = KIB;
/// Shorter separated values would cost more in pointers and reads than
/// they save.
const MIN_VALUE_SEPARATION_THRESHOLD_BYTES: u64 = 64;

impl Options {
    /// Checks every field; [`crate::Db::open`] calls this before touching disk.
    pub fn validate(&self) -> Result<()> {
        let invalid = |msg: String| Err(Error::InvalidOptions(msg));
        if !self.node_size_bytes.is_power_of_two()
            || !(512..=64 * KIB).contains(&self.node_size_bytes)
        {
            return invalid(format!(
                "node_size_bytes = {} must be a power of two in 512..=65536",
                self.node_size_bytes
            ));
        }
        if !self.leaf_size_bytes.is_multiple_of(4 * KIB)
            || !(4 * KIB..=64 * MIB).contains(&self.leaf_size_bytes)
        {
            return invalid(format!(
                "leaf_size_bytes = {} must be a multiple of 4096 in 4 KiB..=64 MiB",
                self.leaf_size_bytes
            ));
        }
        if self.direct_io && self.node_size_bytes < 4 * KIB {
            return invalid(format!(
                "direct_io needs node_size_bytes >= 4096 (aligned I/O), not {}",
                self.node_size_bytes
            ));
        }
        if self.checkpoint_distance_bytes < MIN_CHECKPOINT_DISTANCE_BYTES {
            return invalid(format!(
                "checkpoint_distance_bytes = {} must be at least 4096",
                self.checkpoint_distance_bytes
            ));
        }
        if self.cache_capacity_bytes < MIN_CACHE_CAPACITY_BYTES {
            return invalid(format!(
                "cache_capacity_bytes = {} must be at least 65536",
                self.cache_capacity_bytes
            ));
        }
        if self.garbage_percent > MAX_GARBAGE_PERCENT {
            return Err(Error::InvalidOptions(format!(
                "garbage_percent = {} must be in 0..={MAX_GARBAGE_PERCENT}",
                self.garbage_percent
            )));
        }
        if self.checkpoint_threads > 1024 {
            return invalid(format!(
                "checkpoint_threads = {} must be in 0..=1024 (0: one per core)",
                self.checkpoint_threads
            ));
        }
        if self.filter_bits_per_key > 32 {
            return invalid(format!(
                "filter_bits_per_key = {} must be in 0..=32",
                self.filter_bits_per_key
            ));
        }
        if !(64 * KIB..=4 * 1024 * MIB).contains(&self.wal_segment_size_bytes) {
            return invalid(format!(
                "wal_segment_size_bytes = {} must be in 64 KiB..=4 GiB",
                self.wal_segment_size_bytes
            ));
        }
        if self.value_separation_threshold_bytes < MIN_VALUE_SEPARATION_THRESHOLD_BYTES {
            return invalid(format!(
                "value_separation_threshold_bytes = {} must be at least {MIN_VALUE_SEPARATION_THRESHOLD_BYTES}",
                self.value_separation_threshold_bytes
            ));
        }
        if self.value_file_size_bytes < 4 * KIB {
            return invalid(format!(
                "value_file_size_bytes = {} must be at least 4096",
                self.value_file_size_bytes
            ));
        }
        if self.value_file_min_live_percent > 100 {
            return invalid(format!(
                "value_file_min_live_percent = {} must be in 0..=100",
                self.value_file_min_live_percent
            ));
        }
        self.compression.validate()
    }

    /// The memory policy's share of the options.
    pub(crate) fn memory_config(&self) -> crate::policy::MemoryConfig {
        crate::policy::MemoryConfig {
            budget_bytes: self.cache_capacity_bytes,
            checkpoint_distance_bytes: self.checkpoint_distance_bytes,
            write_only_checkpoint_distance_bytes: self.write_only_checkpoint_distance_bytes,
            checkpoint_on_read_pressure: self.checkpoint_on_read_pressure,
            record_cache_bytes: self.record_cache_capacity_bytes,
            record_cache_auto_split: self.record_cache_auto_split,
        }
    }

    /// The checkpoint pipeline's share of the options.
    pub(crate) fn checkpoint_config(&self) -> crate::checkpoint::CheckpointConfig {
        crate::checkpoint::CheckpointConfig {
            threads: self.checkpoint_threads,
            io_idle: self.checkpoint_io_idle,
        }
    }

    /// The tree store's share of the options.
    pub(crate) fn store_config(&self) -> crate::store::StoreConfig {
        crate::store::StoreConfig {
            pages: crate::page::PageStoreOptions {
                node_size_bytes: self.node_size_bytes,
                leaf_size_bytes: self.leaf_size_bytes,
                cache_capacity_bytes: self.cache_capacity_bytes,
                direct_io: self.direct_io,
                cache_written_leaves: true,
            },
            tree: crate::tree::TreeConfig::new(
                self.node_size_bytes,
                self.leaf_size_bytes,
                self.filter_bits_per_key,
                self.cache_capacity_bytes,
            )
            .with_compression(self.compression),
            create_if_missing: self.create_if_missing,
            garbage_percent: self.garbage_percent,
        }
    }
}

/// Per-write durability, as in RocksDB: `&WriteOptions::new().sync(true)`.
/// Built with its methods, so that options added later leave callers'
/// code as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteOptions {
    /// `true`: return only once the write is on stable storage (`fdatasync`).
    /// `false`: the write is handed to the OS before returning, so it survives
    /// a process crash (`kill -9`) but may be lost on power failure.
    pub sync: bool,
}

impl WriteOptions {
    /// Unsynced writes (the default).
    pub const fn new() -> Self {
        WriteOptions { sync: false }
    }

    /// Sets [`WriteOptions::sync`].
    #[must_use]
    pub const fn sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }
}

/// Rejects keys and values outside the documented limits.
pub(crate) fn validate_entry(key: &[u8], value: Option<&[u8]>) -> Result<()> {
    if key.is_empty() {
        return Err(Error::EmptyKey);
    }
    if key.len() > MAX_KEY_SIZE {
        return Err(Error::KeyTooLarge {
            len_bytes: key.len(),
            max_bytes: MAX_KEY_SIZE,
        });
    }
    match value {
        Some(v) if v.len() > MAX_VALUE_SIZE => Err(Error::ValueTooLarge {
            len_bytes: v.len(),
            max_bytes: MAX_VALUE_SIZE,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_options_are_valid() {
        Options::default().validate().unwrap();
    }

    #[test]
    fn bad_page_sizes_are_rejected() {
        let o = Options {
            node_size_bytes: 1000,
            ..Options::default()
        };
        assert!(matches!(o.validate(), Err(Error::InvalidOptions(_))));
        let o = Options {
            leaf_size_bytes: 5000,
            ..Options::default()
        };
        assert!(matches!(o.validate(), Err(Error::InvalidOptions(_))));
    }

    #[test]
    fn entry_limits() {
        assert!(matches!(validate_entry(b"", None), Err(Error::EmptyKey)));
        let long_key = vec![0u8; MAX_KEY_SIZE + 1];
        assert!(matches!(
            validate_entry(&long_key, None),
            Err(Error::KeyTooLarge { len_bytes: 513, .. })
        ));
        let long_value = vec![0u8; MAX_VALUE_SIZE + 1];
        assert!(matches!(
            validate_entry(b"k", Some(&long_value)),
            Err(Error::ValueTooLarge { .. })
        ));
        validate_entry(&vec![1u8; MAX_KEY_SIZE], Some(&vec![0u8; MAX_VALUE_SIZE])).unwrap();
    }

    #[test]
    fn compression_parses_prints_back_and_checks_zstd_levels() {
        for c in [
            Compression::None,
            Compression::Lz4,
            Compression::Zstd { level: 3 },
            Compression::Zstd { level: -5 },
            Compression::Zstd { level: 22 },
        ] {
            assert_eq!(c.to_string().parse::<Compression>().unwrap(), c);
        }
        assert_eq!(
            "zstd".parse::<Compression>().unwrap(),
            Compression::Zstd { level: 3 }
        );
        assert_eq!(Options::default().compression, Compression::Lz4);
        for bad in ["zstd:23", "zstd:x", "zstd:", "lz5", "", "lz4:1"] {
            assert!(
                matches!(bad.parse::<Compression>(), Err(Error::InvalidOptions(_))),
                "{bad}"
            );
        }
        let o = Options {
            compression: Compression::Zstd { level: 99 },
            ..Options::default()
        };
        assert!(matches!(o.validate(), Err(Error::InvalidOptions(_))));
    }

    #[test]
    fn wal_recovery_modes_parse_and_print_back() {
        for mode in [WalRecovery::Strict, WalRecovery::PointInTime] {
            assert_eq!(mode.to_string().parse::<WalRecovery>().unwrap(), mode);
        }
        assert_eq!(Options::default().wal_recovery, WalRecovery::Strict);
        assert!(matches!(
            "lenient".parse::<WalRecovery>(),
            Err(Error::InvalidOptions(_))
        ));
    }
}

/// Chained setters, one per field of [`Options`], each documented there:
/// `Options::new().cache_capacity_bytes(1 << 30).compression(Compression::Zstd)`.
/// The struct is `#[non_exhaustive]` so that fields can be added without
/// breaking callers; outside this crate it is built with these (or by
/// assigning fields of `Options::default()`), not with a struct literal.
macro_rules! setters {
    ($($field:ident: $ty:ty),* $(,)?) => {
        impl Options {
            /// The defaults (`Options::default()`).
            pub fn new() -> Self {
                Self::default()
            }

            /// Fails to compile when a field has no setter.
            #[cfg(test)]
            #[expect(dead_code, reason = "compiled, never called: the check is the build")]
            fn every_field_has_a_setter(self) {
                let Options { $($field: _),* } = self;
            }

            $(
                #[doc = concat!("Sets [`Options::", stringify!($field), "`].")]
                #[must_use]
                pub fn $field(mut self, value: $ty) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }
    };
}

setters! {
    create_if_missing: bool,
    cache_capacity_bytes: u64,
    checkpoint_distance_bytes: u64,
    write_only_checkpoint_distance_bytes: u64,
    record_cache_capacity_bytes: u64,
    record_cache_auto_split: bool,
    checkpoint_on_read_pressure: bool,
    checkpoint_io_idle: bool,
    checkpoint_threads: usize,
    garbage_percent: u32,
    leaf_size_bytes: u64,
    node_size_bytes: u64,
    filter_bits_per_key: u32,
    direct_io: bool,
    wal_segment_size_bytes: u64,
    wal_recovery: WalRecovery,
    compression: Compression,
    value_separation_threshold_bytes: u64,
    value_file_min_live_percent: u32,
    value_file_size_bytes: u64,
}
