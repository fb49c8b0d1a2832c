//! The `ycsb` command: every engine, in a fresh directory, through the
//! load and the chosen workloads; then the table, JSON and plot.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::YcsbArgs;
use crate::engines::{EngineConfig, EngineKind};
use crate::generator::InsertCounter;
use crate::keys::ValueCodec;
use crate::measure;
use crate::report::{self, PhaseResult};
use crate::runner::{self, PhaseSettings};
use crate::workload::Workload;
use crate::{cgroup, isolate};

/// What a comparison produced: the results of the engines that finished,
/// and why each of the others did not.
#[derive(Debug)]
pub struct Comparison {
    pub results: Vec<PhaseResult>,
    /// One line per engine whose child process failed (killed at the
    /// memory limit, say); the engines after it still ran.
    pub failures: Vec<String>,
}

/// Runs the benchmark and returns one result per (engine, reported phase);
/// fails if any engine failed.
pub fn run(args: &YcsbArgs) -> Result<Vec<PhaseResult>> {
    let comparison = run_all(args)?;
    if let Some(failure) = comparison.failures.first() {
        anyhow::bail!("{failure}");
    }
    Ok(comparison.results)
}

/// Runs the benchmark. An engine that runs in a child process and fails
/// does not stop the others: one engine killed at a memory limit should
/// not cost the results of the rest. An engine run in this process stops
/// the run with its error.
pub fn run_all(args: &YcsbArgs) -> Result<Comparison> {
    let settings = PhaseSettings {
        records: args.records,
        ops: args.ops,
        threads: usize::from(args.threads),
        seed: args.seed,
        distribution: args.distribution,
        key_format: args.key_format,
        codec: ValueCodec::with_compressibility(
            args.seed,
            args.value_size as usize,
            args.value_compressibility,
        ),
        rmw_transactions: args.rmw_transactions,
    };
    let config = EngineConfig {
        cache_bytes: args.cache_bytes,
        direct_io: args.direct_io,
        sync: args.sync,
        threads: usize::from(args.threads),
        turtlekv: crate::engines::TurtlekvKnobs {
            checkpoint_distance_bytes: args.turtlekv_checkpoint_distance_bytes,
            write_only_checkpoint_distance_bytes: args
                .turtlekv_write_only_checkpoint_distance_bytes,
            record_cache_bytes: args.turtlekv_record_cache_bytes,
            leaf_size_bytes: args.turtlekv_leaf_size_bytes,
            filter_bits_per_key: args.turtlekv_filter_bits_per_key,
            garbage_percent: args.turtlekv_garbage_percent,
            value_separation_threshold_bytes: args.turtlekv_value_separation_threshold_bytes,
            value_file_min_live_percent: args.turtlekv_value_file_min_live_percent,
            checkpoint_threads: args.turtlekv_checkpoint_threads.map(usize::from),
            record_cache_auto_split: args.turtlekv_record_cache_auto_split,
            checkpoint_io_idle: args.turtlekv_checkpoint_io_idle,
        },
        rocksdb_memory_in_cache: args.rocksdb_memory_in_cache,
        peer_kv_separation: args.peer_kv_separation,
        value_compressibility: args.value_compressibility,
        rmw_transactions: args.rmw_transactions,
    };
    // Fail before any work if an engine was left out of the build.
    for engine in &args.engines {
        engine.ensure_built()?;
    }
    if let Some(cgroup) = &args.cgroup {
        // First, before the engine allocates anything.
        cgroup::join(cgroup)?;
    }
    let parent = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut results = Vec::new();
    let mut failures = Vec::new();
    // One process per engine: peak RSS and /proc/self/io then measure that
    // engine alone, not memory an earlier engine left behind; and a memory
    // limit binds the engine's process, not the parent that removes it.
    let in_children = !args.child && (args.engines.len() > 1 || args.memory_limit_bytes.is_some());
    for &engine in &args.engines {
        if in_children {
            match isolate::run_in_child(args, engine) {
                Ok(engine_results) => results.extend(engine_results),
                Err(error) => {
                    eprintln!("{error:#}; the other engines go on");
                    failures.push(format!("{error:#}"));
                }
            }
        } else {
            results.extend(run_engine(engine, args, &settings, &config, &parent)?);
        }
    }
    report::compute_ratios(&mut results);
    Ok(Comparison { results, failures })
}

fn run_engine(
    kind: EngineKind,
    args: &YcsbArgs,
    settings: &PhaseSettings,
    config: &EngineConfig,
    parent: &Path,
) -> Result<Vec<PhaseResult>> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("turtlekv-bench-{kind}-"))
        .tempdir_in(parent)
        .with_context(|| format!("creating a directory in {}", parent.display()))?;
    let engine = kind.open(dir.path(), config)?;
    let counter = InsertCounter::new(0);
    let key_bytes = args.key_format.average_len_bytes(args.records);
    let record_bytes = key_bytes + f64::from(args.value_size);

    // The load always runs first: the workloads read what it wrote.
    let mut phases = vec![Workload::Load];
    phases.extend(args.workloads.iter().filter(|w| **w != Workload::Load));
    let mut results = Vec::new();
    for (index, &workload) in phases.iter().enumerate() {
        let repeat = phases[..index].iter().filter(|&&w| w == workload).count();
        let settings = &settings.for_repeat(repeat as u64);
        let total = if workload == Workload::Load {
            args.records
        } else {
            args.ops
        };
        let warm_up_now = index == 1 || (index > 1 && args.warmup_every_phase);
        if warm_up_now && args.warmup_ops > 0 {
            // Untimed, before this phase's readings start.
            let warmup = PhaseSettings {
                ops: args.warmup_ops,
                ..settings.for_repeat(u64::MAX)
            };
            runner::run_phase(
                engine.as_ref(),
                Workload::C,
                &warmup,
                &counter,
                &indicatif::ProgressBar::hidden(),
            )
            .with_context(|| format!("{kind}, warm-up"))?;
        }
        let progress = progress_bar(kind, workload, total);
        let rss_reset = measure::reset_peak_rss();
        let written_before = measure::device_write_bytes().ok();
        let cancelled_before = measure::device_cancelled_write_bytes().ok();
        let read_before = measure::device_read_bytes().ok();
        let cpu_before = measure::process_cpu_time().ok();
        let outcome = runner::run_phase(engine.as_ref(), workload, settings, &counter, &progress)
            .with_context(|| format!("{kind}, workload {workload}"))?;
        let cpu_spent = cpu_before
            .zip(measure::process_cpu_time().ok())
            .map(|(before, after)| after.saturating_sub(before));
        // Taken before `persist`, whose checkpoint reads are not the phase's.
        let read = read_before
            .zip(measure::device_read_bytes().ok())
            .map(|(before, after)| after.saturating_sub(before));
        // Durable before measuring, so every engine pays for its log.
        engine
            .persist()
            .with_context(|| format!("{kind}: persisting after {workload}"))?;
        if args.settle {
            engine
                .settle()
                .with_context(|| format!("{kind}: settling after {workload}"))?;
        }
        progress.finish_and_clear();
        if let Some(report) = engine.phase_report() {
            eprintln!("{kind} after {workload}: {report}");
        }
        if !args.workloads.contains(&workload) {
            continue;
        }
        // `write_bytes` counts pages when they are dirtied; pages of files
        // deleted or truncated before writeback (a WAL dropped after its
        // MemTable's flush) never reach the device and are counted again
        // in `cancelled_write_bytes`.
        let cancelled = cancelled_before
            .zip(measure::device_cancelled_write_bytes().ok())
            .map(|(before, after)| after.saturating_sub(before))
            .unwrap_or(0);
        let written = written_before
            .zip(measure::device_write_bytes().ok())
            .map(|(before, after)| after.saturating_sub(before).saturating_sub(cancelled));
        let live_bytes = counter.limit() as f64 * record_bytes;
        let allocated = measure::allocated_bytes(dir.path()).ok();
        let overall = merged(&outcome.latencies_ns);
        let overall = report::Latency::from_nanos(&overall);
        results.push(PhaseResult {
            engine: kind.name().to_string(),
            workload: workload.name().to_string(),
            records: args.records,
            ops: outcome.ops_done,
            threads: settings.threads,
            ops_per_sec: outcome.ops_done as f64
                / outcome.elapsed.max(Duration::from_nanos(1)).as_secs_f64(),
            p50_us: overall.map_or(0.0, |l| l.p50_us),
            p99_us: overall.map_or(0.0, |l| l.p99_us),
            p999_us: overall.map_or(0.0, |l| l.p999_us),
            write_amp: written
                .filter(|_| outcome.user_bytes_written > 0)
                .map(|w| w as f64 / outcome.user_bytes_written as f64),
            space_amp: allocated.map(|a| a as f64 / live_bytes),
            peak_rss_bytes: if rss_reset {
                measure::peak_rss_bytes().ok()
            } else {
                None
            },
            cpu_us_per_op: cpu_spent
                .filter(|_| outcome.ops_done > 0)
                .map(|cpu| cpu.as_secs_f64() * 1e6 / outcome.ops_done as f64),
            read_kib_per_op: read
                .filter(|_| outcome.ops_done > 0)
                .map(|r| r as f64 / 1024.0 / outcome.ops_done as f64),
            ratio_to_turtlekv: None,
            settings: Some(report::RunSettings {
                cache_bytes: args.cache_bytes,
                direct_io: args.direct_io,
                settle: args.settle,
                warmup_ops: args.warmup_ops,
                warmup_every_phase: args.warmup_every_phase,
                rmw_transactions: args.rmw_transactions,
            }),
            rmw_retries: (args.rmw_transactions && workload.mix().rmw_percent > 0)
                .then_some(outcome.rmw_retries),
            per_op: report::per_op_latencies(&outcome.latencies_ns),
        });
    }
    drop(engine);
    dir.close()
        .with_context(|| format!("removing the {kind} directory"))?;
    Ok(results)
}

fn merged(histograms: &[hdrhistogram::Histogram<u64>]) -> hdrhistogram::Histogram<u64> {
    let mut all = runner::latency_histogram();
    for h in histograms {
        all.add(h).expect("histograms share bounds");
    }
    all
}

/// A bar on a terminal; indicatif draws nothing when stderr is not one.
fn progress_bar(kind: EngineKind, workload: Workload, total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{prefix:>16} [{bar:40}] {pos}/{len} ops  {per_sec}  eta {eta}",
    )
    .expect("the template is valid")
    .progress_chars("=> ");
    bar.set_style(style);
    bar.set_prefix(format!("{kind} {workload}"));
    bar
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser as _;

    #[test]
    fn small_run_reports_every_requested_phase() {
        let dir = tempfile::tempdir().unwrap();
        let results = small_run(dir.path(), "a,e", &["--key-format", "ycsb"]);
        let names: Vec<&str> = results.iter().map(|r| r.workload.as_str()).collect();
        assert_eq!(names, vec!["a", "e"]);
        for r in &results {
            assert_eq!(r.ops, 600);
            assert!(r.ops_per_sec > 0.0);
            assert_eq!(r.ratio_to_turtlekv, Some(1.0));
            assert!(r.p50_us <= r.p99_us && r.p99_us <= r.p999_us);
            assert!(r.space_amp.is_some_and(|s| s > 0.0));
        }
        // A writes (updates); the load was run but not reported.
        assert!(results[0].write_amp.is_some());
        // The engine's directory was removed.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// 3,000 records and 600 operations per workload of `workloads`, the
    /// engines' directories under `dir`.
    fn small_run(dir: &std::path::Path, workloads: &str, extra: &[&str]) -> Vec<PhaseResult> {
        let mut argv = vec![
            "turtlekv-bench",
            "ycsb",
            "--records",
            "3000",
            "--ops",
            "600",
            "--workloads",
            workloads,
            "--dir",
            dir.to_str().unwrap(),
        ];
        argv.extend_from_slice(extra);
        let Command::Ycsb(args) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not ycsb")
        };
        run(&args).unwrap()
    }

    fn load_and_c(extra: &[&str]) -> Vec<PhaseResult> {
        small_run(tempfile::tempdir().unwrap().path(), "load,c", extra)
    }

    /// `--settle` and `--warmup-ops` run, the warm-up's reads are not
    /// reported, and the results say how they were run. (What settling
    /// writes is not compared here: device writes are the whole process's,
    /// and other tests write at the same time.)
    #[test]
    fn settling_and_warm_up_run_unreported_and_are_recorded() {
        let plain = load_and_c(&[]);
        let settled = load_and_c(&["--settle", "--warmup-ops", "500"]);
        for results in [&plain, &settled] {
            let names: Vec<&str> = results.iter().map(|r| r.workload.as_str()).collect();
            assert_eq!(names, vec!["load", "c"]);
            assert_eq!(results[1].ops, 600);
        }
        let settings = settled[1].settings.expect("results say how they were run");
        assert!(settings.settle && settings.warmup_ops == 500 && !settings.direct_io);
        assert!(!settings.warmup_every_phase);
        assert!(!plain[1].settings.expect("settings").settle);
    }

    /// `--warmup-every-phase` warms up before each workload and says so;
    /// the reported phases are the same.
    #[test]
    fn a_warm_up_before_every_phase_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let extra = ["--settle", "--warmup-ops", "300", "--warmup-every-phase"];
        let results = small_run(dir.path(), "load,c,a", &extra);
        let names: Vec<&str> = results.iter().map(|r| r.workload.as_str()).collect();
        assert_eq!(names, vec!["load", "c", "a"]);
        for row in &results[1..] {
            let settings = row.settings.expect("settings");
            assert!(settings.warmup_every_phase && settings.warmup_ops == 300);
            assert_eq!(row.ops, 600);
        }
    }

    /// Compressible values pass the same checks on the way back: reads
    /// and scans verify every value.
    #[test]
    fn compressible_values_verify_through_the_engine() {
        let dir = tempfile::tempdir().unwrap();
        let extra = ["--value-compressibility", "0.5", "--value-size", "300"];
        let results = small_run(dir.path(), "a,e,f", &extra);
        let names: Vec<&str> = results.iter().map(|r| r.workload.as_str()).collect();
        assert_eq!(names, vec!["a", "e", "f"]);
        assert!(results.iter().all(|r| r.ops == 600));
        assert!(results.iter().all(|r| r.rmw_retries.is_none()));
    }

    /// `--rmw-transactions` runs F's read-modify-writes as transactions,
    /// verified as before. F's row carries their retries (how many depends
    /// on the two threads' timing and on checkpoints, so only that the
    /// count is there is checked) and says how it ran; A's has none.
    #[test]
    fn read_modify_write_transactions_are_reported_on_f() {
        let dir = tempfile::tempdir().unwrap();
        let results = small_run(dir.path(), "a,f", &["--rmw-transactions"]);
        let names: Vec<&str> = results.iter().map(|r| r.workload.as_str()).collect();
        assert_eq!(names, vec!["a", "f"]);
        assert_eq!(results[0].rmw_retries, None);
        assert!(results[1].rmw_retries.is_some());
        assert!(results[1].settings.expect("settings").rmw_transactions);
        assert!(results[1].per_op.iter().any(|(op, _)| op == "rmw"));
    }
}
