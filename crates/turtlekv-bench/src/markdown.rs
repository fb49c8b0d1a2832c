//! `turtlekv-bench report`: results files as the Markdown tables of
//! `docs/benchmarks.md`, so that a new run replaces them by a paste.

use std::fmt::Write as _;

use crate::meta::RunMetadata;
use crate::report::{
    LabelledRun, PhaseResult, ResultsFile, engine_title, grouped, with_columns, workload_columns,
    workload_title,
};

/// The runs' settings, a throughput table (ops/s, and each engine's ratio
/// to TurtleKV in the same run), and a table per phase of amplification,
/// memory, disk reads and tail latencies.
pub fn render(runs: &[LabelledRun]) -> String {
    let several = runs.len() > 1;
    let mut out = String::new();
    for run in runs {
        let settings = describe(&run.file);
        if several {
            writeln!(out, "- **{}**: {settings}", run.label)
        } else {
            writeln!(out, "{settings}")
        }
        .expect("writing to a String cannot fail");
    }
    out.push('\n');

    let columns = workload_columns(runs.iter().map(|run| run.file.results.as_slice()));
    let mut header: Vec<String> = Vec::new();
    if several {
        header.push("run".into());
    }
    header.push("engine".into());
    header.extend(columns.iter().map(|(name, nth)| workload_title(name, *nth)));
    let mut rows: Vec<Vec<String>> = Vec::new();
    for run in runs {
        let cells = with_columns(&run.file.results);
        let mut engines: Vec<&str> = Vec::new();
        for (_, row) in &cells {
            if !engines.contains(&row.engine.as_str()) {
                engines.push(&row.engine);
            }
        }
        for (i, engine) in engines.iter().enumerate() {
            let mut line = run_label(several, i == 0, &run.label);
            line.push(engine_title(engine));
            for column in &columns {
                let cell = cells
                    .iter()
                    .find(|(c, row)| c == column && row.engine == *engine)
                    .map_or_else(|| "-".to_string(), |(_, row)| throughput(row));
                line.push(cell);
            }
            rows.push(line);
        }
    }
    out.push_str(
        "Throughput, ops/s (in parentheses: the engine's ÷ TurtleKV's in the same run):\n\n",
    );
    let names = usize::from(several) + 1;
    table(&mut out, &header, &rows, &|c| c >= names);

    let mut header: Vec<String> = Vec::new();
    if several {
        header.push("run".into());
    }
    for title in [
        "engine",
        "workload",
        "write amp",
        "space amp",
        "peak RSS MiB",
        "read KiB/op",
        "p99 / p99.9 µs",
    ] {
        header.push(title.into());
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    for run in runs {
        let mut first = true;
        for ((name, nth), row) in with_columns(&run.file.results) {
            let mut line = run_label(several, first, &run.label);
            first = false;
            line.push(engine_title(&row.engine));
            line.push(workload_title(&name, nth));
            line.push(optional(row.write_amp, 2));
            line.push(optional(row.space_amp, 2));
            line.push(row.peak_rss_bytes.map_or_else(
                || "-".to_string(),
                |b| format!("{:.0}", b as f64 / f64::from(1u32 << 20)),
            ));
            line.push(optional(row.read_kib_per_op, 2));
            line.push(latencies(row));
            rows.push(line);
        }
    }
    out.push_str("\nPer phase (latencies per operation kind):\n\n");
    let names = usize::from(several) + 2;
    let last = header.len() - 1;
    table(&mut out, &header, &rows, &|c| c >= names && c < last);
    rmw_retries(&mut out, runs);
    out
}

/// A table of the read-modify-write transactions' retries, for the phases
/// that ran them (`--rmw-transactions`); nothing when none did.
fn rmw_retries(out: &mut String, runs: &[LabelledRun]) {
    let several = runs.len() > 1;
    let mut rows: Vec<Vec<String>> = Vec::new();
    for run in runs {
        let mut first = true;
        for ((name, nth), row) in with_columns(&run.file.results) {
            let Some(retries) = row.rmw_retries else {
                continue;
            };
            let mut line = run_label(several, first, &run.label);
            first = false;
            let transactions = row
                .per_op
                .iter()
                .find(|(op, _)| op == "rmw")
                .map_or(0, |(_, lat)| lat.count);
            line.push(engine_title(&row.engine));
            line.push(workload_title(&name, nth));
            line.push(grouped(transactions as f64));
            line.push(grouped(retries as f64));
            line.push(format!(
                "{:.3}%",
                100.0 * retries as f64 / transactions.max(1) as f64
            ));
            rows.push(line);
        }
    }
    if rows.is_empty() {
        return;
    }
    let mut header: Vec<String> = Vec::new();
    if several {
        header.push("run".into());
    }
    for title in [
        "engine",
        "workload",
        "rmw transactions",
        "retries",
        "retried",
    ] {
        header.push(title.into());
    }
    out.push_str("\nRead-modify-write transactions (commits refused and retried):\n\n");
    let names = usize::from(several) + 2;
    table(out, &header, &rows, &|c| c >= names);
}

/// "612,728", and for an engine other than TurtleKV "195,310 (0.32)".
fn throughput(row: &PhaseResult) -> String {
    let ops = grouped(row.ops_per_sec);
    match row.ratio_to_turtlekv {
        Some(ratio) if row.engine != "turtlekv" => format!("{ops} ({ratio:.2})"),
        _ => ops,
    }
}

/// "read 5.2 / 12.7; update 18.6 / 31.9".
fn latencies(row: &PhaseResult) -> String {
    row.per_op
        .iter()
        .map(|(op, lat)| {
            format!(
                "{op} {} / {}",
                one_decimal(lat.p99_us),
                one_decimal(lat.p999_us)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn one_decimal(value: f64) -> String {
    if value >= 1000.0 {
        grouped(value)
    } else {
        format!("{value:.1}")
    }
}

fn optional(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.decimals$}"))
}

/// One line on how a file's run was made, from its metadata, or from what
/// its rows say for files written before the metadata existed.
pub fn describe(file: &ResultsFile) -> String {
    let Some(meta) = &file.metadata else {
        let first = file.results.first();
        let mut text = String::from("(no metadata: written before the benchmark recorded it)");
        if let Some(row) = first {
            write!(
                text,
                " {} records, {} threads",
                grouped(row.records as f64),
                row.threads
            )
            .expect("writing to a String cannot fail");
            if let Some(s) = row.settings {
                write!(
                    text,
                    ", cache {} B{}{}{}",
                    grouped(s.cache_bytes as f64),
                    if s.direct_io { ", direct I/O" } else { "" },
                    if s.settle { ", settle" } else { "" },
                    warmup(s.warmup_ops, s.warmup_every_phase),
                )
                .expect("writing to a String cannot fail");
            }
        }
        return text;
    };
    describe_metadata(meta)
}

fn warmup(ops: u64, every_phase: bool) -> String {
    match (ops, every_phase) {
        (0, _) => String::new(),
        (ops, false) => format!(", warm-up {} reads", grouped(ops as f64)),
        (ops, true) => format!(", warm-up {} reads before every phase", grouped(ops as f64)),
    }
}

/// Nothing for random values; for compressible ones, how compressible, and
/// that the peers then compress.
fn compressibility(fraction: f64) -> String {
    if fraction > 0.0 {
        format!(" (compressibility {fraction}: RocksDB and fjall use LZ4)")
    } else {
        String::new()
    }
}

fn describe_metadata(meta: &RunMetadata) -> String {
    let s = &meta.settings;
    let mut text = format!(
        "commit `{}`, {}; {} records, {} ops per workload, {} threads, {}-byte values{}, {} keys, {}, seed {}; cache {} B",
        meta.commit,
        meta.started_at,
        grouped(s.records as f64),
        grouped(s.ops as f64),
        s.threads,
        s.value_size,
        compressibility(s.value_compressibility),
        s.key_format,
        s.distribution,
        s.seed,
        grouped(s.cache_bytes as f64),
    );
    let flags = [
        (s.direct_io, ", direct I/O".to_string()),
        (s.sync, ", fsync per write".to_string()),
        (s.settle, ", settle".to_string()),
        (s.warmup_ops > 0, warmup(s.warmup_ops, s.warmup_every_phase)),
        (
            s.memory_limit_bytes.is_some(),
            format!(
                ", memory limit {} B",
                grouped(s.memory_limit_bytes.unwrap_or(0) as f64)
            ),
        ),
        (
            s.rocksdb_memory_in_cache,
            ", RocksDB memory in its cache".to_string(),
        ),
        (
            s.peer_kv_separation,
            ", RocksDB blob files and fjall key-value separation".to_string(),
        ),
        (
            s.rmw_transactions,
            ", read-modify-writes as transactions".to_string(),
        ),
    ];
    for (on, flag) in flags {
        if on {
            text.push_str(&flag);
        }
    }
    if meta.build_profile != "release" && !meta.build_profile.is_empty() {
        write!(text, "; **{} build**", meta.build_profile)
            .expect("writing to a String cannot fail");
    }
    let versions: Vec<String> = meta
        .engine_versions
        .iter()
        .map(|(engine, version)| format!("{} {version}", engine_title(engine)))
        .collect();
    if !versions.is_empty() {
        write!(text, "; {}", versions.join(", ")).expect("writing to a String cannot fail");
    }
    text
}

/// A Markdown table, the columns `numeric` picks right-aligned.
fn table(
    out: &mut String,
    header: &[String],
    rows: &[Vec<String>],
    numeric: &dyn Fn(usize) -> bool,
) {
    let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
    out.push_str(&line(header));
    let rule: Vec<String> = (0..header.len())
        .map(|c| {
            if numeric(c) {
                "---:".into()
            } else {
                "---".into()
            }
        })
        .collect();
    out.push_str(&line(&rule));
    for row in rows {
        out.push_str(&line(row));
    }
}

/// The first cell of a row when the table holds several runs: the run's
/// label on its first row, empty on the others; no cell for one run.
fn run_label(several: bool, first: bool, label: &str) -> Vec<String> {
    match (several, first) {
        (false, _) => Vec::new(),
        (true, true) => vec![label.to_string()],
        (true, false) => vec![String::new()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Latency, compute_ratios};

    fn row(engine: &str, workload: &str, ops_per_sec: f64) -> PhaseResult {
        PhaseResult {
            engine: engine.into(),
            workload: workload.into(),
            records: 1000,
            ops: 100,
            threads: 2,
            ops_per_sec,
            p50_us: 1.0,
            p99_us: 2.0,
            p999_us: 3.0,
            write_amp: (workload != "c").then_some(3.5),
            space_amp: Some(1.33),
            peak_rss_bytes: Some(460 << 20),
            cpu_us_per_op: None,
            read_kib_per_op: Some(0.26),
            ratio_to_turtlekv: None,
            settings: None,
            rmw_retries: None,
            per_op: vec![
                (
                    "read".into(),
                    Latency {
                        count: 50,
                        p50_us: 1.0,
                        p99_us: 121.79,
                        p999_us: 1424.7,
                    },
                ),
                (
                    "update".into(),
                    Latency {
                        count: 50,
                        p50_us: 1.0,
                        p99_us: 14.1,
                        p999_us: 66.8,
                    },
                ),
            ],
        }
    }

    fn file(rows: Vec<PhaseResult>) -> ResultsFile {
        let mut rows = rows;
        compute_ratios(&mut rows);
        ResultsFile::new(None, rows)
    }

    #[test]
    fn one_run_gives_a_row_per_engine_and_a_column_per_workload() {
        let runs = [LabelledRun {
            label: "x".into(),
            file: file(vec![
                row("turtlekv", "load", 553_843.7),
                row("turtlekv", "c", 1000.0),
                row("rocksdb", "load", 197_505.2),
                row("rocksdb", "c", 500.0),
            ]),
        }];
        let text = render(&runs);
        assert!(
            text.contains("| engine | Load | C |\n| --- | ---: | ---: |\n"),
            "{text}"
        );
        assert!(text.contains("| TurtleKV | 553,844 | 1,000 |"), "{text}");
        assert!(
            text.contains("| RocksDB | 197,505 (0.36) | 500 (0.50) |"),
            "{text}"
        );
        // Per phase: write amplification only where the phase wrote.
        assert!(
            text.contains("| TurtleKV | Load | 3.50 | 1.33 | 460 | 0.26 | read 121.8 / 1,425; update 14.1 / 66.8 |"),
            "{text}"
        );
        assert!(text.contains("| RocksDB | C | - | 1.33 |"), "{text}");
        assert!(text.starts_with("(no metadata"), "{text}");
        assert!(!text.contains("| run |"), "{text}");
    }

    #[test]
    fn several_runs_are_told_apart_by_label() {
        let runs = [
            LabelledRun {
                label: "TurtleKV first".into(),
                file: file(vec![row("turtlekv", "a", 2.0), row("rocksdb", "a", 1.0)]),
            },
            LabelledRun {
                label: "all engines".into(),
                file: file(vec![row("turtlekv", "a", 4.0), row("fjall", "a", 1.0)]),
            },
        ];
        let text = render(&runs);
        assert!(text.contains("| run | engine | A |"), "{text}");
        assert!(text.contains("| TurtleKV first | TurtleKV | 2 |"), "{text}");
        assert!(text.contains("|  | RocksDB | 1 (0.50) |"), "{text}");
        assert!(text.contains("| all engines | TurtleKV | 4 |"), "{text}");
        assert!(text.contains("|  | fjall | 1 (0.25) |"), "{text}");
        assert!(text.contains("- **all engines**: (no metadata"), "{text}");
    }

    #[test]
    fn the_settings_line_names_compressible_values() {
        use crate::cli::{Cli, Command};
        use clap::Parser as _;
        let describe_run = |extra: &[&str]| {
            let mut argv = vec!["turtlekv-bench", "ycsb"];
            argv.extend_from_slice(extra);
            let Command::Ycsb(args) = Cli::try_parse_from(argv).unwrap().command else {
                panic!("not ycsb")
            };
            let meta = RunMetadata::for_run(&args, Vec::new());
            describe(&ResultsFile::new(Some(meta), Vec::new()))
        };
        let text = describe_run(&["--value-compressibility", "0.5"]);
        assert!(
            text.contains(
                "120-byte values (compressibility 0.5: RocksDB and fjall use LZ4), binary keys"
            ),
            "{text}"
        );
        let text = describe_run(&[]);
        assert!(text.contains("120-byte values, binary keys"), "{text}");
        assert!(!text.contains("compressib"), "{text}");
        assert!(!text.contains("transactions"), "{text}");
        let text = describe_run(&["--rmw-transactions"]);
        assert!(
            text.contains(", read-modify-writes as transactions"),
            "{text}"
        );
    }

    /// Phases run with `--rmw-transactions` get a table of their retries;
    /// a report without them gets none.
    #[test]
    fn read_modify_write_retries_get_a_table() {
        let plain = [LabelledRun {
            label: "x".into(),
            file: file(vec![row("turtlekv", "f", 10.0)]),
        }];
        assert!(!render(&plain).contains("Read-modify-write"));
        let mut f = row("rocksdb", "f", 10.0);
        f.per_op[1].0 = "rmw".into();
        f.rmw_retries = Some(5);
        let runs = [LabelledRun {
            label: "x".into(),
            file: file(vec![row("turtlekv", "f", 10.0), f]),
        }];
        let text = render(&runs);
        assert!(
            text.contains("| engine | workload | rmw transactions | retries | retried |"),
            "{text}"
        );
        assert!(
            text.contains("| RocksDB | F | 50 | 5 | 10.000% |"),
            "{text}"
        );
        assert!(!text.contains("| TurtleKV | F | 50"), "{text}");
    }
}
