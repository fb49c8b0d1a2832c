//! What a results file says about the run besides its measurements: the
//! settings, the build (commit, engine versions) and the host, so that a
//! figure can be traced to the code and the command that produced it.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::cli::{YcsbArgs, value_name};
use crate::engines::EngineKind;

/// The run as a whole. Every field but `settings` is informational; a
/// reader must not depend on any being present (`#[serde(default)]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMetadata {
    /// `git rev-parse --short HEAD` of the build, `-dirty` when tracked
    /// files differed from it, "unknown" for a build outside git.
    #[serde(default)]
    pub commit: String,
    /// When the run started, UTC, RFC 3339 (`2026-11-27T06:57:32Z`).
    #[serde(default)]
    pub started_at: String,
    /// `release` or `debug`: a debug build's figures mean little.
    #[serde(default)]
    pub build_profile: String,
    /// The Rust allocator of the process: `system` or `mimalloc`.
    #[serde(default)]
    pub allocator: String,
    /// Version of each engine the run used, by engine name.
    #[serde(default)]
    pub engine_versions: BTreeMap<String, String>,
    #[serde(default)]
    pub host: HostInfo,
    /// The command line, program name first.
    #[serde(default)]
    pub command: Vec<String>,
    pub settings: RunConfig,
}

/// Every setting of `turtlekv-bench ycsb` that a figure depends on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub engines: Vec<String>,
    pub workloads: Vec<String>,
    pub records: u64,
    pub ops: u64,
    pub threads: u16,
    pub value_size: u32,
    /// `--value-compressibility`: the share of each value LZ4 removes; 0
    /// for random values (and for files written before the option).
    #[serde(default)]
    pub value_compressibility: f64,
    /// `binary` or `ycsb`.
    pub key_format: String,
    /// `zipfian`, `zipfian-unscrambled` or `uniform`.
    pub distribution: String,
    pub seed: u64,
    pub cache_bytes: u64,
    pub direct_io: bool,
    pub sync: bool,
    pub settle: bool,
    pub warmup_ops: u64,
    pub warmup_every_phase: bool,
    pub memory_limit_bytes: Option<u64>,
    pub rocksdb_memory_in_cache: bool,
    /// `--peer-kv-separation`; `false` for files written before the option.
    #[serde(default)]
    pub peer_kv_separation: bool,
    /// `--rmw-transactions`; `false` for files written before the option.
    #[serde(default)]
    pub rmw_transactions: bool,
    /// TurtleKV's knobs given on the command line (`null`: its default).
    pub turtlekv: TurtlekvSettings,
}

/// The `--turtlekv-*` options of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurtlekvSettings {
    pub checkpoint_distance_bytes: Option<u64>,
    pub write_only_checkpoint_distance_bytes: Option<u64>,
    pub record_cache_bytes: Option<u64>,
    pub record_cache_auto_split: bool,
    pub checkpoint_io_idle: bool,
    pub leaf_size_bytes: Option<u64>,
    pub filter_bits_per_key: Option<u32>,
    pub checkpoint_threads: Option<u16>,
    #[serde(default)]
    pub garbage_percent: Option<u32>,
    #[serde(default)]
    pub value_separation_threshold_bytes: Option<u64>,
    #[serde(default)]
    pub value_file_min_live_percent: Option<u8>,
}

/// The machine, as far as Linux tells it cheaply; `None` where it does not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInfo {
    pub cpu_model: Option<String>,
    pub cpus: Option<usize>,
    pub memory_bytes: Option<u64>,
    pub kernel: Option<String>,
}

impl RunConfig {
    pub fn from_args(args: &YcsbArgs) -> RunConfig {
        RunConfig {
            engines: args.engines.iter().map(|e| e.name().to_string()).collect(),
            workloads: args.workloads.iter().map(value_name).collect(),
            records: args.records,
            ops: args.ops,
            threads: args.threads,
            value_size: args.value_size,
            value_compressibility: args.value_compressibility,
            key_format: value_name(&args.key_format),
            distribution: value_name(&args.distribution),
            seed: args.seed,
            cache_bytes: args.cache_bytes,
            direct_io: args.direct_io,
            sync: args.sync,
            settle: args.settle,
            warmup_ops: args.warmup_ops,
            warmup_every_phase: args.warmup_every_phase,
            memory_limit_bytes: args.memory_limit_bytes,
            rocksdb_memory_in_cache: args.rocksdb_memory_in_cache,
            peer_kv_separation: args.peer_kv_separation,
            rmw_transactions: args.rmw_transactions,
            turtlekv: TurtlekvSettings {
                checkpoint_distance_bytes: args.turtlekv_checkpoint_distance_bytes,
                write_only_checkpoint_distance_bytes: args
                    .turtlekv_write_only_checkpoint_distance_bytes,
                record_cache_bytes: args.turtlekv_record_cache_bytes,
                record_cache_auto_split: args.turtlekv_record_cache_auto_split,
                checkpoint_io_idle: args.turtlekv_checkpoint_io_idle,
                leaf_size_bytes: args.turtlekv_leaf_size_bytes,
                filter_bits_per_key: args.turtlekv_filter_bits_per_key,
                checkpoint_threads: args.turtlekv_checkpoint_threads,
                garbage_percent: args.turtlekv_garbage_percent,
                value_separation_threshold_bytes: args.turtlekv_value_separation_threshold_bytes,
                value_file_min_live_percent: args.turtlekv_value_file_min_live_percent,
            },
        }
    }
}

impl RunMetadata {
    /// The metadata of a run of `args` started now, by `command`.
    pub fn for_run(args: &YcsbArgs, command: Vec<String>) -> RunMetadata {
        let mut engine_versions = BTreeMap::new();
        for engine in &args.engines {
            engine_versions.insert(engine.name().to_string(), engine_version(*engine));
        }
        RunMetadata {
            commit: build_commit().to_string(),
            started_at: rfc3339_utc(SystemTime::now()),
            build_profile: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
            .to_string(),
            allocator: if cfg!(feature = "mimalloc") {
                "mimalloc"
            } else {
                "system"
            }
            .to_string(),
            engine_versions,
            host: HostInfo::probe(),
            command,
            settings: RunConfig::from_args(args),
        }
    }
}

/// The commit this binary was built from (see `build.rs`).
pub fn build_commit() -> &'static str {
    env!("TURTLEKV_BENCH_COMMIT")
}

/// What version of `engine` this binary runs: the crate versions from
/// `Cargo.lock`, and the C or C++ library's where it is known.
pub fn engine_version(engine: EngineKind) -> String {
    match engine {
        EngineKind::Turtlekv => env!("TURTLEKV_BENCH_VERSION_TURTLEKV").to_string(),
        EngineKind::Rocksdb => {
            let sys = env!("TURTLEKV_BENCH_VERSION_LIBROCKSDB_SYS");
            // librocksdb-sys carries the RocksDB release it compiles as
            // build metadata: `0.19.0+11.8.1` builds RocksDB 11.8.1.
            let library = sys
                .split_once('+')
                .map(|(_, rocksdb)| format!(" (RocksDB {rocksdb})"))
                .unwrap_or_default();
            format!(
                "rocksdb {}, librocksdb-sys {sys}{library}",
                env!("TURTLEKV_BENCH_VERSION_ROCKSDB")
            )
        }
        EngineKind::Fjall => env!("TURTLEKV_BENCH_VERSION_FJALL").to_string(),
        EngineKind::Redb => env!("TURTLEKV_BENCH_VERSION_REDB").to_string(),
        EngineKind::Lmdb => {
            let library = crate::engines::lmdb_library_version()
                .map(|v| format!(" ({v})"))
                .unwrap_or_default();
            format!(
                "heed {}, lmdb-master-sys {}{library}",
                env!("TURTLEKV_BENCH_VERSION_HEED"),
                env!("TURTLEKV_BENCH_VERSION_LMDB_MASTER_SYS")
            )
        }
    }
}

impl HostInfo {
    pub fn probe() -> HostInfo {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        HostInfo {
            cpu_model: cpuinfo
                .lines()
                .find_map(|line| line.strip_prefix("model name"))
                .and_then(|rest| rest.split_once(':'))
                .map(|(_, model)| model.trim().to_string()),
            cpus: std::thread::available_parallelism().ok().map(usize::from),
            memory_bytes: meminfo
                .lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|rest| rest.trim().strip_suffix("kB"))
                .and_then(|kib| kib.trim().parse::<u64>().ok())
                .map(|kib| kib * 1024),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .ok()
                .map(|release| release.trim().to_string()),
        }
    }
}

/// `time` as `YYYY-MM-DDThh:mm:ssZ`.
pub fn rfc3339_utc(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_are_utc_calendar_dates() {
        let at = |secs: u64| rfc3339_utc(UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        // 2000-02-29 (a leap day of a century leap year), 12:34:56.
        assert_eq!(at(951_827_696), "2000-02-29T12:34:56Z");
        assert_eq!(at(1_798_761_599), "2026-12-31T23:59:59Z");
        assert_eq!(at(1_798_761_600), "2027-01-01T00:00:00Z");
    }

    #[test]
    fn the_build_knows_its_commit_and_versions() {
        let commit = build_commit();
        assert!(!commit.is_empty());
        // A short hash (with `-dirty` perhaps), or the documented fallback.
        let hash = commit.split('-').next().unwrap();
        assert!(
            commit == "unknown" || (hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit())),
            "{commit}"
        );
        // Cargo.lock's version of the turtlekv crate: `x.y.z`.
        let turtlekv = engine_version(EngineKind::Turtlekv);
        let parts: Vec<&str> = turtlekv.split('.').collect();
        assert_eq!(parts.len(), 3, "{turtlekv}");
        assert!(parts.iter().all(|p| p.parse::<u32>().is_ok()), "{turtlekv}");
        let rocksdb = engine_version(EngineKind::Rocksdb);
        assert!(rocksdb.starts_with("rocksdb 0."), "{rocksdb}");
        assert!(rocksdb.contains("(RocksDB 1"), "{rocksdb}");
    }

    /// The results say which values a run wrote; files written before the
    /// option read as random values, which is what those runs wrote.
    #[test]
    fn compressibility_is_recorded_and_old_files_read_as_random_values() {
        use crate::cli::{Cli, Command};
        use clap::Parser as _;
        let argv = ["turtlekv-bench", "ycsb", "--value-compressibility", "0.5"];
        let Command::Ycsb(args) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not ycsb")
        };
        let meta = RunMetadata::for_run(&args, Vec::new());
        assert_eq!(meta.settings.value_compressibility, 0.5);
        let mut json = serde_json::to_value(&meta).unwrap();
        assert_eq!(json["settings"]["value_compressibility"], 0.5);
        let back: RunMetadata = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, meta);
        json["settings"]
            .as_object_mut()
            .unwrap()
            .remove("value_compressibility");
        let old: RunMetadata = serde_json::from_value(json).unwrap();
        assert_eq!(old.settings.value_compressibility, 0.0);
    }
}
