//! Results: one row per (engine, workload), printed as a table, written as
//! JSON, and compared with TurtleKV.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::meta::RunMetadata;
use crate::workload::OpKind;

/// Latency percentiles of one operation kind, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub count: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
}

impl Latency {
    /// Percentiles of a histogram of nanoseconds; `None` when empty.
    pub fn from_nanos(histogram: &Histogram<u64>) -> Option<Latency> {
        if histogram.is_empty() {
            return None;
        }
        let us = |q: f64| histogram.value_at_quantile(q) as f64 / 1000.0;
        Some(Latency {
            count: histogram.len(),
            p50_us: us(0.50),
            p99_us: us(0.99),
            p999_us: us(0.999),
        })
    }
}

/// The measurements of one workload on one engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    pub engine: String,
    pub workload: String,
    /// Records loaded before the workloads.
    pub records: u64,
    /// Operations performed in this phase.
    pub ops: u64,
    pub threads: usize,
    pub ops_per_sec: f64,
    /// Percentiles over all operations of the phase.
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    /// Device bytes written / user bytes written; `None` for phases that
    /// write nothing.
    pub write_amp: Option<f64>,
    /// Bytes allocated on disk / user bytes of live records.
    pub space_amp: Option<f64>,
    pub peak_rss_bytes: Option<u64>,
    /// Process CPU time (all threads, user and system) per operation, in
    /// microseconds; `None` where it could not be read. Older result files
    /// lack it.
    #[serde(default)]
    pub cpu_us_per_op: Option<f64>,
    /// Device bytes read per operation, in KiB (`/proc/self/io`), which
    /// shows how often each engine's cache missed. Older result files lack
    /// it.
    #[serde(default)]
    pub read_kib_per_op: Option<f64>,
    /// This engine's throughput over TurtleKV's on the same workload.
    pub ratio_to_turtlekv: Option<f64>,
    /// How the run was set up beyond the table's columns, so that a
    /// results file says what it measured. Older result files lack it.
    #[serde(default)]
    pub settings: Option<RunSettings>,
    /// Read-modify-write commits refused and retried, in a phase with
    /// read-modify-writes run as transactions (`--rmw-transactions`);
    /// `None` otherwise, and in older result files.
    #[serde(default)]
    pub rmw_retries: Option<u64>,
    /// Percentiles per operation kind (name, latency).
    pub per_op: Vec<(String, Latency)>,
}

/// The settings a phase's figures depend on besides records, ops and
/// threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSettings {
    pub cache_bytes: u64,
    pub direct_io: bool,
    pub settle: bool,
    pub warmup_ops: u64,
    /// The warm-up ran before every workload (`--warmup-every-phase`).
    #[serde(default)]
    pub warmup_every_phase: bool,
    /// Read-modify-writes ran as transactions (`--rmw-transactions`).
    #[serde(default)]
    pub rmw_transactions: bool,
}

/// Fills in `ratio_to_turtlekv` for every row whose workload TurtleKV ran:
/// an engine's `n`-th run of a workload against TurtleKV's `n`-th (a list
/// such as `c,c` runs it twice).
pub fn compute_ratios(results: &mut [PhaseResult]) {
    let baseline: Vec<(String, f64)> = results
        .iter()
        .filter(|r| r.engine == "turtlekv")
        .map(|r| (r.workload.clone(), r.ops_per_sec))
        .collect();
    let mut seen: std::collections::HashMap<(String, String), usize> = Default::default();
    for row in results.iter_mut() {
        let nth = seen
            .entry((row.engine.clone(), row.workload.clone()))
            .or_default();
        row.ratio_to_turtlekv = baseline
            .iter()
            .filter(|(w, _)| *w == row.workload)
            .nth(*nth)
            .filter(|(_, base)| *base > 0.0)
            .map(|(_, base)| row.ops_per_sec / base);
        *nth += 1;
    }
}

/// Per-kind latencies of a phase, kinds that did not occur left out.
pub fn per_op_latencies(histograms: &[Histogram<u64>]) -> Vec<(String, Latency)> {
    OpKind::ALL
        .iter()
        .filter_map(|kind| {
            Latency::from_nanos(&histograms[kind.index()]).map(|l| (kind.name().to_string(), l))
        })
        .collect()
}

/// The version of the JSON document `--json` writes. Version 1 (no
/// `format` field) was a bare array of rows.
pub const FORMAT_VERSION: u32 = 2;

/// A results file: the run's metadata, then one row per (engine, phase).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultsFile {
    pub format: u32,
    /// `None` for files written before the metadata existed.
    pub metadata: Option<RunMetadata>,
    pub results: Vec<PhaseResult>,
}

impl ResultsFile {
    pub fn new(metadata: Option<RunMetadata>, results: Vec<PhaseResult>) -> ResultsFile {
        ResultsFile {
            format: FORMAT_VERSION,
            metadata,
            results,
        }
    }

    /// Reads a results file of either format: the current document, or
    /// the bare array of rows that earlier builds wrote.
    pub fn parse(text: &str) -> Result<ResultsFile> {
        let value: serde_json::Value = serde_json::from_str(text).context("not JSON")?;
        if value.is_array() {
            let results = serde_json::from_value(value).context("reading the rows")?;
            return Ok(ResultsFile {
                format: 1,
                metadata: None,
                results,
            });
        }
        let file: ResultsFile =
            serde_json::from_value(value).context("reading the results document")?;
        if file.format > FORMAT_VERSION {
            bail!(
                "results format {} is newer than this build reads ({FORMAT_VERSION})",
                file.format
            );
        }
        Ok(file)
    }

    pub fn read(path: &Path) -> Result<ResultsFile> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        ResultsFile::parse(&text).with_context(|| format!("parsing {}", path.display()))
    }

    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string_pretty(self)
    }
}

/// A results file and the label its rows carry in a report or plot.
#[derive(Debug, Clone)]
pub struct LabelledRun {
    pub label: String,
    pub file: ResultsFile,
}

/// Reads `inputs`, labelled by `labels` (one per input, or none: then each
/// file's commit and date, or its file name when it has no metadata).
pub fn load_runs(inputs: &[std::path::PathBuf], labels: &[String]) -> Result<Vec<LabelledRun>> {
    if !labels.is_empty() && labels.len() != inputs.len() {
        bail!(
            "{} labels for {} files: give one --label per file, or none",
            labels.len(),
            inputs.len()
        );
    }
    inputs
        .iter()
        .enumerate()
        .map(|(i, path)| {
            let file = ResultsFile::read(path)?;
            let label = match (labels.get(i), &file.metadata) {
                (Some(label), _) => label.clone(),
                (None, Some(meta)) => {
                    let date = meta.started_at.get(..10).unwrap_or("");
                    format!("{} {date}", meta.commit).trim().to_string()
                }
                (None, None) => path.file_stem().map_or_else(
                    || path.display().to_string(),
                    |s| s.to_string_lossy().into(),
                ),
            };
            Ok(LabelledRun { label, file })
        })
        .collect()
}

/// The workloads of the files' rows as columns: (name, repeat) in YCSB
/// order, a workload run twice in one file (`c,c`) giving two columns.
pub fn workload_columns<'a>(
    files: impl IntoIterator<Item = &'a [PhaseResult]>,
) -> Vec<(String, usize)> {
    let mut columns: Vec<(String, usize)> = Vec::new();
    for rows in files {
        for (column, _) in with_columns(rows) {
            if !columns.contains(&column) {
                columns.push(column);
            }
        }
    }
    let rank = |name: &str| {
        use clap::ValueEnum as _;
        crate::workload::Workload::from_str(name, true).map_or(usize::MAX, |w| w as usize)
    };
    columns.sort_by_key(|(name, nth)| (rank(name), *nth));
    columns
}

/// Each row with its column: the `nth` run of its workload by its engine
/// within `rows`.
pub fn with_columns(rows: &[PhaseResult]) -> Vec<((String, usize), &PhaseResult)> {
    let mut seen: std::collections::HashMap<(&str, &str), usize> = Default::default();
    rows.iter()
        .map(|row| {
            let nth = seen.entry((&row.engine, &row.workload)).or_default();
            let column = (row.workload.clone(), *nth);
            *nth += 1;
            (column, row)
        })
        .collect()
}

/// `load` as "Load", `c` as "C", its second run as "C (2)".
pub fn workload_title(name: &str, nth: usize) -> String {
    let base = if name == "load" {
        "Load".to_string()
    } else {
        name.to_uppercase()
    };
    if nth == 0 {
        base
    } else {
        format!("{base} ({})", nth + 1)
    }
}

/// How an engine is written in reports: `rocksdb` as "RocksDB".
pub fn engine_title(name: &str) -> String {
    match name {
        "turtlekv" => "TurtleKV".to_string(),
        "rocksdb" => "RocksDB".to_string(),
        "lmdb" => "LMDB".to_string(),
        other => other.to_string(),
    }
}

/// The JSON document of a run: `metadata` (settings, commit, engine
/// versions, host) and `results`, an array of rows.
pub fn to_json(
    metadata: Option<&RunMetadata>,
    results: &[PhaseResult],
) -> serde_json::Result<String> {
    ResultsFile::new(metadata.cloned(), results.to_vec()).to_json()
}

fn optional(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.decimals$}"))
}

fn mebibytes(bytes: Option<u64>) -> String {
    bytes.map_or_else(
        || "-".to_string(),
        |b| format!("{:.0}", b as f64 / (1 << 20) as f64),
    )
}

/// Thousands separators make ops/s columns readable at a glance.
pub fn grouped(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The text table: one line per (engine, workload, operation kind); the
/// phase-wide columns appear on the phase's first line.
pub fn render_table(results: &[PhaseResult]) -> String {
    let header = [
        "engine",
        "workload",
        "ops/s",
        "vs turtlekv",
        "op",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "write amp",
        "space amp",
        "peak RSS MiB",
        "cpu us/op",
        "read KiB/op",
    ];
    let mut rows: Vec<[String; 13]> = Vec::new();
    for r in results {
        for (i, (op, lat)) in r.per_op.iter().enumerate() {
            let first = i == 0;
            let phase = |s: String| if first { s } else { String::new() };
            rows.push([
                phase(r.engine.clone()),
                phase(r.workload.clone()),
                phase(grouped(r.ops_per_sec)),
                phase(optional(r.ratio_to_turtlekv, 2)),
                op.clone(),
                format!("{:.1}", lat.p50_us),
                format!("{:.1}", lat.p99_us),
                format!("{:.1}", lat.p999_us),
                phase(optional(r.write_amp, 2)),
                phase(optional(r.space_amp, 2)),
                phase(mebibytes(r.peak_rss_bytes)),
                phase(optional(r.cpu_us_per_op, 1)),
                phase(optional(r.read_kib_per_op, 2)),
            ]);
        }
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .map(|row| row[c].len())
                .chain([header[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let text: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                // Names left-aligned, numbers right-aligned.
                if c < 2 || c == 4 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        writeln!(out, "{}", text.join("  ").trim_end()).expect("writing to a String cannot fail");
    };
    line(header.to_vec());
    line(
        widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str)
            .collect(),
    );
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    for r in results {
        if let Some(retries) = r.rmw_retries {
            writeln!(out, "{}", rmw_retries_line(r, retries))
                .expect("writing to a String cannot fail");
        }
    }
    out
}

/// "turtlekv f: 12 retries of 500,000 read-modify-write transactions
/// (0.0024%)".
pub fn rmw_retries_line(row: &PhaseResult, retries: u64) -> String {
    let rmws = row
        .per_op
        .iter()
        .find(|(op, _)| op == OpKind::ReadModifyWrite.name())
        .map_or(0, |(_, lat)| lat.count);
    format!(
        "{} {}: {} retries of {} read-modify-write transactions ({:.4}%)",
        row.engine,
        row.workload,
        grouped(retries as f64),
        grouped(rmws as f64),
        100.0 * retries as f64 / rmws.max(1) as f64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(engine: &str, workload: &str, ops_per_sec: f64) -> PhaseResult {
        PhaseResult {
            engine: engine.into(),
            workload: workload.into(),
            records: 1000,
            ops: 500,
            threads: 2,
            ops_per_sec,
            p50_us: 1.0,
            p99_us: 2.0,
            p999_us: 3.0,
            write_amp: (workload == "load").then_some(1.5),
            space_amp: Some(1.25),
            peak_rss_bytes: Some(3 << 20),
            cpu_us_per_op: Some(7.25),
            read_kib_per_op: Some(0.5),
            ratio_to_turtlekv: None,
            settings: None,
            rmw_retries: None,
            per_op: vec![
                (
                    "read".into(),
                    Latency {
                        count: 250,
                        p50_us: 1.0,
                        p99_us: 2.0,
                        p999_us: 3.0,
                    },
                ),
                (
                    "update".into(),
                    Latency {
                        count: 250,
                        p50_us: 4.0,
                        p99_us: 5.0,
                        p999_us: 6.5,
                    },
                ),
            ],
        }
    }

    #[test]
    fn ratios_are_relative_to_turtlekv_per_workload() {
        let mut results = vec![
            row("turtlekv", "load", 1000.0),
            row("turtlekv", "a", 400.0),
            row("fjall", "load", 500.0),
            row("fjall", "a", 800.0),
            row("redb", "c", 10.0),
        ];
        compute_ratios(&mut results);
        let ratios: Vec<Option<f64>> = results.iter().map(|r| r.ratio_to_turtlekv).collect();
        assert_eq!(
            ratios,
            vec![Some(1.0), Some(1.0), Some(0.5), Some(2.0), None]
        );
    }

    /// A workload listed twice (`c,c`) compares each run with TurtleKV's
    /// run in the same place, not both with its first.
    #[test]
    fn a_repeated_workload_compares_like_with_like() {
        let mut results = vec![
            row("turtlekv", "c", 100.0),
            row("turtlekv", "c", 200.0),
            row("rocksdb", "c", 100.0),
            row("rocksdb", "c", 100.0),
        ];
        compute_ratios(&mut results);
        let ratios: Vec<Option<f64>> = results.iter().map(|r| r.ratio_to_turtlekv).collect();
        assert_eq!(ratios, vec![Some(1.0), Some(1.0), Some(1.0), Some(0.5)]);
    }

    #[test]
    fn percentiles_come_from_the_histogram_in_microseconds() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for ns in 1..=1000u64 {
            h.record(ns * 1000).unwrap();
        }
        let lat = Latency::from_nanos(&h).unwrap();
        assert_eq!(lat.count, 1000);
        assert!((lat.p50_us - 500.0).abs() <= 1.0, "{}", lat.p50_us);
        assert!((lat.p99_us - 990.0).abs() <= 1.0, "{}", lat.p99_us);
        assert!((lat.p999_us - 999.0).abs() <= 1.0, "{}", lat.p999_us);
        assert_eq!(
            Latency::from_nanos(&Histogram::<u64>::new(3).unwrap()),
            None
        );
        let mut hists: Vec<_> = OpKind::ALL
            .iter()
            .map(|_| Histogram::<u64>::new(3).unwrap())
            .collect();
        hists[OpKind::Scan.index()] = h;
        let per_op = per_op_latencies(&hists);
        assert_eq!(per_op.len(), 1);
        assert_eq!(per_op[0].0, "scan");
    }

    #[test]
    fn json_has_the_documented_fields() {
        let mut results = vec![row("turtlekv", "load", 1234.5)];
        compute_ratios(&mut results);
        let json: serde_json::Value =
            serde_json::from_str(&to_json(None, &results).unwrap()).unwrap();
        assert_eq!(json["format"], FORMAT_VERSION);
        let obj = &json["results"][0];
        for field in [
            "engine",
            "workload",
            "records",
            "ops",
            "threads",
            "ops_per_sec",
            "p50_us",
            "p99_us",
            "p999_us",
            "write_amp",
            "space_amp",
            "peak_rss_bytes",
            "cpu_us_per_op",
            "read_kib_per_op",
        ] {
            assert!(obj.get(field).is_some(), "missing {field}");
        }
        assert_eq!(obj["engine"], "turtlekv");
        assert_eq!(obj["ops_per_sec"], 1234.5);
        assert_eq!(obj["write_amp"], 1.5);
        assert_eq!(obj["peak_rss_bytes"], 3 << 20);
        assert_eq!(obj["cpu_us_per_op"], 7.25);
        // Result files written before the field existed still load.
        let mut old = obj.clone();
        old.as_object_mut().unwrap().remove("cpu_us_per_op");
        old.as_object_mut().unwrap().remove("read_kib_per_op");
        let back: PhaseResult = serde_json::from_value(old).unwrap();
        assert_eq!(back.cpu_us_per_op, None);
        assert_eq!(back.read_kib_per_op, None);
    }

    /// Files of the first format, a bare array of rows, still read; a
    /// document from a newer build is refused by name.
    #[test]
    fn both_formats_read_back() {
        let mut results = vec![row("turtlekv", "a", 10.0), row("fjall", "a", 5.0)];
        compute_ratios(&mut results);
        let current = ResultsFile::parse(&to_json(None, &results).unwrap()).unwrap();
        assert_eq!(current.format, FORMAT_VERSION);
        assert_eq!(current.results, results);
        let old = ResultsFile::parse(&serde_json::to_string(&results).unwrap()).unwrap();
        assert_eq!((old.format, old.metadata), (1, None));
        assert_eq!(old.results, results);
        let future = r#"{"format": 99, "metadata": null, "results": []}"#;
        let err = ResultsFile::parse(future).unwrap_err();
        assert!(format!("{err:#}").contains("newer"), "{err:#}");
        assert!(ResultsFile::parse("{").is_err());
    }

    #[test]
    fn table_lists_every_operation_with_phase_columns_once() {
        let mut results = vec![
            row("turtlekv", "load", 1_234_567.0),
            row("fjall", "a", 99.0),
        ];
        compute_ratios(&mut results);
        let table = render_table(&results);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2 + 4, "{table}");
        assert!(lines[0].starts_with("engine"));
        assert!(lines[2].contains("turtlekv") && lines[2].contains("1,234,567"));
        assert!(lines[0].ends_with("cpu us/op  read KiB/op"), "{}", lines[0]);
        assert!(
            lines[2].ends_with("7.2         0.50") || lines[2].ends_with("7.3         0.50"),
            "{}",
            lines[2]
        );
        assert!(
            lines[2].contains("1.50") && lines[2].contains("1.00"),
            "{}",
            lines[2]
        );
        assert!(lines[3].contains("update") && !lines[3].contains("turtlekv"));
        // fjall ran no workload TurtleKV ran: no ratio.
        assert!(
            lines[4].contains("fjall") && lines[4].contains(" - "),
            "{}",
            lines[4]
        );
        assert_eq!(grouped(999.0), "999");
        assert_eq!(grouped(1000.0), "1,000");
    }

    /// A phase run with `--rmw-transactions` adds a line of its retries
    /// under the table.
    #[test]
    fn table_names_read_modify_write_retries() {
        let mut f = row("rocksdb", "f", 10.0);
        f.per_op[1] = (
            "rmw".into(),
            Latency {
                count: 2_000,
                p50_us: 4.0,
                p99_us: 5.0,
                p999_us: 6.5,
            },
        );
        f.rmw_retries = Some(3);
        let table = render_table(&[row("turtlekv", "a", 10.0), f]);
        let last = table.lines().last().unwrap();
        assert_eq!(
            last,
            "rocksdb f: 3 retries of 2,000 read-modify-write transactions (0.1500%)"
        );
        assert_eq!(table.lines().count(), 2 + 4 + 1, "{table}");
    }
}
