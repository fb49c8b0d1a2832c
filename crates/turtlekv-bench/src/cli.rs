//! Command line of `turtlekv-bench`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::engines::EngineKind;
use crate::generator::Distribution;
use crate::keys::{KeyFormat, VALUE_HEADER_BYTES};
use crate::workload::Workload;

#[derive(Debug, Parser)]
#[command(
    name = "turtlekv-bench",
    about = "Benchmarks for TurtleKV and its peers"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run YCSB core workloads on one or more engines and compare them.
    // Boxed: its options outweigh the other commands' many times.
    Ycsb(Box<YcsbArgs>),
    /// Draw the throughput of one or more results files (`ycsb --json`)
    /// as an SVG bar chart.
    Plot(PlotArgs),
    /// Print one or more results files as Markdown tables: throughput with
    /// ratios to TurtleKV, then amplification, memory and tail latencies.
    Report(ReportArgs),
}

/// `turtlekv-bench plot results.json --out results.svg`.
#[derive(Debug, Clone, Args)]
pub struct PlotArgs {
    /// Results files written by `ycsb --json`. With several, their bars
    /// stand side by side, each labelled with its file's label.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The SVG file to write.
    #[arg(long, value_parser = svg_path)]
    pub out: PathBuf,
    /// Chart title; default: the run's records, value size, cache and
    /// commit, from the first file's metadata.
    #[arg(long)]
    pub title: Option<String>,
    /// A label per input file, in order (repeat the option); default: the
    /// file's commit and date, or its name for older files.
    #[arg(long = "label")]
    pub labels: Vec<String>,
}

/// `turtlekv-bench report results.json`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Results files written by `ycsb --json`; several become one table
    /// with a column naming each row's file.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// A label per input file, in order (repeat the option); default: the
    /// file's commit and date, or its name for older files.
    #[arg(long = "label")]
    pub labels: Vec<String>,
}

/// Plots are SVG: a path that says otherwise is refused before a run
/// starts, not after it.
pub fn svg_path(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    let is_svg = path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("svg"));
    if is_svg {
        Ok(path)
    } else {
        Err(format!(
            "plots are SVG; name the file with .svg (got {text})"
        ))
    }
}

/// `--value-compressibility`: a fraction in [0, 1) (1 would leave no
/// random bytes to check a value by).
pub fn compressibility(text: &str) -> Result<f64, String> {
    let fraction: f64 = text.parse().map_err(|_| format!("not a number: {text}"))?;
    if (0.0..1.0).contains(&fraction) {
        Ok(fraction)
    } else {
        Err(format!("a fraction in [0, 1) is needed (got {text})"))
    }
}

/// The defaults finish in about a minute for TurtleKV alone on two cores.
#[derive(Debug, Clone, Args)]
pub struct YcsbArgs {
    /// Engines to run, in order; peers need their cargo feature.
    #[arg(long, value_delimiter = ',', default_value = "turtlekv")]
    pub engines: Vec<EngineKind>,
    /// Phases to run after the load (the load always runs; list `load` to
    /// report it).
    #[arg(long, value_delimiter = ',', default_value = "load,a,b,c,d,e,f")]
    pub workloads: Vec<Workload>,
    /// Records inserted by the load (at least 1: workloads pick among them).
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub records: u64,
    /// Operations per workload (a to f).
    #[arg(long, default_value_t = 200_000)]
    pub ops: u64,
    /// Client threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: u16,
    /// Bytes per value (at least 8: values carry a write nonce for checking).
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u32).range(VALUE_HEADER_BYTES as i64..=(256 * 1024)))]
    pub value_size: u32,
    /// Share of each value's bytes LZ4 removes, in [0, 1): above 0, values
    /// are random text repeated so that LZ4 keeps about (1 - FRACTION) of
    /// them, and RocksDB and fjall compress with LZ4. 0: random bytes, and
    /// no peer compresses.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0, value_parser = compressibility)]
    pub value_compressibility: f64,
    /// Cache budget given to every engine, in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub cache_bytes: u64,
    /// TurtleKV only: its MemTable capacity (checkpoint distance) in bytes;
    /// default: the engine's own default.
    #[arg(long)]
    pub turtlekv_checkpoint_distance_bytes: Option<u64>,
    /// TurtleKV only: its MemTable capacity while writes come alone, as in
    /// the load (`Options::write_only_checkpoint_distance_bytes`; at or
    /// below the checkpoint distance turns it off); default: the engine's.
    #[arg(long)]
    pub turtlekv_write_only_checkpoint_distance_bytes: Option<u64>,
    /// TurtleKV only: bytes of the memory budget given to its hot-record
    /// cache (0 turns it off); default: the engine's own default.
    #[arg(long)]
    pub turtlekv_record_cache_bytes: Option<u64>,
    /// TurtleKV only: let the engine move memory between its record cache
    /// and page cache as reads show (`Options::record_cache_auto_split`).
    #[arg(long)]
    pub turtlekv_record_cache_auto_split: bool,
    /// TurtleKV only: run checkpoints in the idle I/O class while nobody
    /// waits for one (`Options::checkpoint_io_idle`).
    #[arg(long)]
    pub turtlekv_checkpoint_io_idle: bool,
    /// TurtleKV only: leaf and buffer-segment page size in bytes; default:
    /// the engine's own default.
    #[arg(long)]
    pub turtlekv_leaf_size_bytes: Option<u64>,
    /// TurtleKV only: filter bits per key (0 turns filters off); default:
    /// the engine's own default.
    #[arg(long)]
    pub turtlekv_filter_bits_per_key: Option<u32>,
    /// TurtleKV only: garbage its tree may hold, in percent of its live
    /// bytes, before checkpoints reclaim it (`Options::garbage_percent`);
    /// default: the engine's own default.
    #[arg(long)]
    pub turtlekv_garbage_percent: Option<u32>,
    /// TurtleKV only: values at least this long go to value files
    /// (`Options::value_separation_threshold_bytes`); default: the
    /// engine's own default.
    #[arg(long)]
    pub turtlekv_value_separation_threshold_bytes: Option<u64>,
    /// TurtleKV only: value files whose live records hold less than this
    /// percent of their bytes are collected (`Options::
    /// value_file_min_live_percent`, 0 turns collection off); default:
    /// the engine's own default.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub turtlekv_value_file_min_live_percent: Option<u8>,
    /// TurtleKV only: threads of the checkpoint pool (`Options::
    /// checkpoint_threads`); default: the engine's own default.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub turtlekv_checkpoint_threads: Option<u16>,
    /// RocksDB only: charge its MemTables (a write buffer manager) and its
    /// index and filter blocks to the block cache, so that `--cache-bytes`
    /// bounds them all, as TurtleKV's budget does. Default: the paper's
    /// setting, where only data blocks count against the cache.
    #[arg(long)]
    pub rocksdb_memory_in_cache: bool,
    /// RocksDB and fjall: store values apart from the tree, as TurtleKV
    /// does from 1 KiB: RocksDB's integrated BlobDB (`enable_blob_files`,
    /// values of 1 KiB and more, blob garbage collection on) and fjall's
    /// key-value separation (its defaults). Off: both keep values inline.
    #[arg(long)]
    pub peer_kv_separation: bool,
    /// Bypass the OS page cache (engines that support it: turtlekv, rocksdb).
    #[arg(long)]
    pub direct_io: bool,
    /// After the load, run this many read-only operations (workload C's
    /// distribution, fresh requests) unreported, so that every engine starts
    /// A with a cache warmed by reads, not only by what its load wrote.
    #[arg(long, default_value_t = 0)]
    pub warmup_ops: u64,
    /// Run the `--warmup-ops` reads before every workload, not only the
    /// first: a settle that compacts (RocksDB writes compaction output past
    /// its block cache) would otherwise leave the next phase cold.
    #[arg(long)]
    pub warmup_every_phase: bool,
    /// End every phase by finishing its background work (flushes,
    /// compactions, checkpoints) untimed, before the disk readings: each
    /// phase's write amplification is then its own.
    #[arg(long)]
    pub settle: bool,
    /// fsync every write (default: the log is written, not fsynced).
    #[arg(long)]
    pub sync: bool,
    /// Run workload F's read-modify-writes as one transaction each (read,
    /// write, commit, retried while the commit is refused) instead of a
    /// get and then a put: TurtleKV's `Db::transaction`, RocksDB as an
    /// `OptimisticTransactionDB`, fjall as an `OptimisticTxDatabase` (its
    /// plain puts then being transactions too), and a write transaction
    /// in redb and LMDB. The retries are reported per phase.
    #[arg(long)]
    pub rmw_transactions: bool,
    /// Request distribution of reads, updates and scan starts.
    #[arg(long, value_enum, default_value_t = Distribution::Zipfian)]
    pub distribution: Distribution,
    /// `binary`: 8-byte big-endian hashes; `ycsb`: `user<digits>` strings.
    #[arg(long, value_enum, default_value_t = KeyFormat::Binary)]
    pub key_format: KeyFormat,
    /// Seed of every generator; the same seed gives the same requests.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory in which each engine gets a fresh subdirectory, removed
    /// afterwards (default: the system temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw throughput per workload and engine to this SVG file (the same
    /// chart as `turtlekv-bench plot` draws from the JSON).
    #[arg(long, value_parser = svg_path)]
    pub plot: Option<PathBuf>,
    /// Bound each engine's process, OS page cache included, to this many
    /// bytes with a cgroup v1 memory group (root only; the group is removed
    /// afterwards). Each engine then runs in its own child process.
    #[arg(long)]
    pub memory_limit_bytes: Option<u64>,
    /// Set by the parent process on the per-engine child it starts: print
    /// no table, just write the JSON.
    #[arg(long, hide = true)]
    pub child: bool,
    /// Set by the parent: the cgroup the child moves itself into first.
    #[arg(long, hide = true)]
    pub cgroup: Option<PathBuf>,
}

/// The command-line spelling of a value (`zipfian-unscrambled`).
pub fn value_name(value: &impl ValueEnum) -> String {
    value
        .to_possible_value()
        .expect("no variant is skipped")
        .get_name()
        .to_string()
}

impl YcsbArgs {
    /// The command line of a child process that runs only `engine` with
    /// these settings and writes its results to `json`.
    pub fn child_args(
        &self,
        engine: EngineKind,
        json: &Path,
        cgroup: Option<&Path>,
    ) -> Vec<OsString> {
        let workloads: Vec<String> = self.workloads.iter().map(value_name).collect();
        let mut args: Vec<OsString> = [
            "ycsb".to_string(),
            "--child".into(),
            format!("--engines={}", value_name(&engine)),
            format!("--workloads={}", workloads.join(",")),
            format!("--records={}", self.records),
            format!("--ops={}", self.ops),
            format!("--threads={}", self.threads),
            format!("--value-size={}", self.value_size),
            format!("--value-compressibility={}", self.value_compressibility),
            format!("--cache-bytes={}", self.cache_bytes),
            format!("--distribution={}", value_name(&self.distribution)),
            format!("--key-format={}", value_name(&self.key_format)),
            format!("--seed={}", self.seed),
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        if self.direct_io {
            args.push("--direct-io".into());
        }
        if let Some(bytes) = self.turtlekv_checkpoint_distance_bytes {
            args.push(format!("--turtlekv-checkpoint-distance-bytes={bytes}").into());
        }
        if let Some(bytes) = self.turtlekv_write_only_checkpoint_distance_bytes {
            args.push(format!("--turtlekv-write-only-checkpoint-distance-bytes={bytes}").into());
        }
        if let Some(bytes) = self.turtlekv_record_cache_bytes {
            args.push(format!("--turtlekv-record-cache-bytes={bytes}").into());
        }
        if self.turtlekv_record_cache_auto_split {
            args.push("--turtlekv-record-cache-auto-split".into());
        }
        if self.turtlekv_checkpoint_io_idle {
            args.push("--turtlekv-checkpoint-io-idle".into());
        }
        if let Some(bytes) = self.turtlekv_leaf_size_bytes {
            args.push(format!("--turtlekv-leaf-size-bytes={bytes}").into());
        }
        if let Some(bits) = self.turtlekv_filter_bits_per_key {
            args.push(format!("--turtlekv-filter-bits-per-key={bits}").into());
        }
        if let Some(percent) = self.turtlekv_garbage_percent {
            args.push(format!("--turtlekv-garbage-percent={percent}").into());
        }
        if let Some(bytes) = self.turtlekv_value_separation_threshold_bytes {
            args.push(format!("--turtlekv-value-separation-threshold-bytes={bytes}").into());
        }
        if let Some(percent) = self.turtlekv_value_file_min_live_percent {
            args.push(format!("--turtlekv-value-file-min-live-percent={percent}").into());
        }
        if let Some(threads) = self.turtlekv_checkpoint_threads {
            args.push(format!("--turtlekv-checkpoint-threads={threads}").into());
        }
        if self.rocksdb_memory_in_cache {
            args.push("--rocksdb-memory-in-cache".into());
        }
        if self.peer_kv_separation {
            args.push("--peer-kv-separation".into());
        }
        if self.sync {
            args.push("--sync".into());
        }
        if self.rmw_transactions {
            args.push("--rmw-transactions".into());
        }
        if self.settle {
            args.push("--settle".into());
        }
        if self.warmup_ops > 0 {
            args.push(format!("--warmup-ops={}", self.warmup_ops).into());
        }
        if self.warmup_every_phase {
            args.push("--warmup-every-phase".into());
        }
        if let Some(dir) = &self.dir {
            args.push("--dir".into());
            args.push(dir.into());
        }
        if let Some(limit) = self.memory_limit_bytes {
            args.push(format!("--memory-limit-bytes={limit}").into());
        }
        if let Some(cgroup) = cgroup {
            args.push("--cgroup".into());
            args.push(cgroup.into());
        }
        args.push("--json".into());
        args.push(json.into());
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_command_line() {
        let cli = Cli::try_parse_from(
            "turtlekv-bench ycsb --engines turtlekv,rocksdb,fjall,redb,lmdb \
             --workloads load,a,e --records 1000 --ops 50 --threads 4 --value-size \
             100 --cache-bytes 1048576 --direct-io --sync --distribution uniform \
             --key-format ycsb --seed 9 --json out.json --plot out.svg"
                .split_whitespace(),
        )
        .unwrap();
        let Command::Ycsb(args) = cli.command else {
            panic!("not ycsb")
        };
        assert_eq!(args.engines.len(), 5);
        assert_eq!(
            args.workloads,
            vec![Workload::Load, Workload::A, Workload::E]
        );
        assert_eq!(
            (args.records, args.ops, args.threads, args.value_size),
            (1000, 50, 4, 100)
        );
        assert!(args.direct_io && args.sync);
        assert_eq!(args.distribution, Distribution::Uniform);
        assert_eq!(args.key_format, KeyFormat::Ycsb);
        assert_eq!(args.plot, Some(PathBuf::from("out.svg")));
    }

    #[test]
    fn child_args_reproduce_the_settings_for_one_engine() {
        let cli = Cli::try_parse_from(
            "turtlekv-bench ycsb --engines turtlekv,fjall --workloads load,d \
             --records 77 --ops 5 --threads 3 --value-size 64 --cache-bytes 99999 \
             --sync --distribution uniform --key-format ycsb --seed 4 --dir /tmp/x \
             --plot p.svg --memory-limit-bytes 1000000 --turtlekv-record-cache-auto-split \
             --turtlekv-checkpoint-io-idle --turtlekv-checkpoint-threads 3 \
             --turtlekv-write-only-checkpoint-distance-bytes 8192 --rocksdb-memory-in-cache \
             --value-compressibility 0.35 --rmw-transactions"
                .split_whitespace(),
        )
        .unwrap();
        let Command::Ycsb(parent) = cli.command else {
            panic!("not ycsb")
        };
        let mut argv = vec![OsString::from("turtlekv-bench")];
        argv.extend(parent.child_args(
            EngineKind::Fjall,
            Path::new("/tmp/r.json"),
            Some(Path::new("/cg")),
        ));
        let Command::Ycsb(child) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not ycsb")
        };
        assert!(child.child);
        assert_eq!(child.engines, vec![EngineKind::Fjall]);
        assert_eq!(child.workloads, parent.workloads);
        assert_eq!(
            (
                child.records,
                child.ops,
                child.threads,
                child.value_size,
                child.cache_bytes,
                child.seed
            ),
            (77, 5, 3, 64, 99999, 4)
        );
        assert!(child.sync && !child.direct_io && child.turtlekv_record_cache_auto_split);
        assert!(child.turtlekv_checkpoint_io_idle && child.rocksdb_memory_in_cache);
        assert!(child.rmw_transactions);
        assert_eq!(child.turtlekv_checkpoint_threads, Some(3));
        assert_eq!(
            child.turtlekv_write_only_checkpoint_distance_bytes,
            Some(8192)
        );
        assert_eq!(child.value_compressibility, 0.35);
        assert_eq!(child.distribution, Distribution::Uniform);
        assert_eq!(child.key_format, KeyFormat::Ycsb);
        assert_eq!(child.dir, parent.dir);
        assert_eq!(child.json, Some(PathBuf::from("/tmp/r.json")));
        assert_eq!(child.memory_limit_bytes, Some(1_000_000));
        assert_eq!(child.cgroup, Some(PathBuf::from("/cg")));
        // The parent draws the plot, from every engine's results.
        assert_eq!(child.plot, None);
    }

    #[test]
    fn defaults_and_rejections() {
        let Command::Ycsb(args) = Cli::try_parse_from(["turtlekv-bench", "ycsb"])
            .unwrap()
            .command
        else {
            panic!("not ycsb")
        };
        assert_eq!(args.engines, vec![EngineKind::Turtlekv]);
        assert_eq!(args.workloads.len(), 7);
        assert_eq!(args.value_size, 120);
        assert_eq!(args.value_compressibility, 0.0);
        assert_eq!(args.distribution, Distribution::Zipfian);
        assert!(Cli::try_parse_from(["turtlekv-bench", "ycsb", "--engines", "sqlite"]).is_err());
        assert!(Cli::try_parse_from(["turtlekv-bench", "ycsb", "--threads", "0"]).is_err());
        assert!(Cli::try_parse_from(["turtlekv-bench", "ycsb", "--records", "0"]).is_err());
        assert!(Cli::try_parse_from(["turtlekv-bench", "ycsb", "--value-size", "4"]).is_err());
        for fraction in ["1", "1.5", "-0.1", "NaN", "half"] {
            let argv = [
                "turtlekv-bench",
                "ycsb",
                "--value-compressibility",
                fraction,
            ];
            assert!(Cli::try_parse_from(argv).is_err(), "{fraction}");
        }
        let argv = ["turtlekv-bench", "ycsb", "--value-compressibility", "0.5"];
        let Command::Ycsb(half) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not ycsb")
        };
        assert_eq!(half.value_compressibility, 0.5);
        // 0 would mean "one per core" to the engine: say that by leaving it out.
        let zero_threads = [
            "turtlekv-bench",
            "ycsb",
            "--turtlekv-checkpoint-threads",
            "0",
        ];
        assert!(Cli::try_parse_from(zero_threads).is_err());
        // A plot that could not be written as asked fails before the run.
        let png = ["turtlekv-bench", "ycsb", "--plot", "out.png"];
        let err = Cli::try_parse_from(png).unwrap_err().to_string();
        assert!(err.contains("plots are SVG"), "{err}");
    }

    #[test]
    fn plot_and_report_take_files_and_labels() {
        let cli = Cli::try_parse_from([
            "turtlekv-bench",
            "plot",
            "a.json",
            "b.json",
            "--out",
            "x.SVG",
            "--label",
            "first, with a comma",
            "--label",
            "second",
        ])
        .unwrap();
        let Command::Plot(plot) = cli.command else {
            panic!("not plot")
        };
        assert_eq!(plot.inputs.len(), 2);
        assert_eq!(plot.labels, ["first, with a comma", "second"]);
        assert_eq!(plot.out, PathBuf::from("x.SVG"));
        assert!(Cli::try_parse_from(["turtlekv-bench", "plot", "a.json"]).is_err());
        assert!(Cli::try_parse_from(["turtlekv-bench", "report"]).is_err());
        let Command::Report(report) = Cli::try_parse_from(["turtlekv-bench", "report", "r.json"])
            .unwrap()
            .command
        else {
            panic!("not report")
        };
        assert_eq!(report.inputs, [PathBuf::from("r.json")]);
    }
}
