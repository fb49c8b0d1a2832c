//! The binary end to end: table on stdout, JSON and plot files, one child
//! process per engine, loud failures; plots and reports from saved JSON.

use std::process::Command;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_turtlekv-bench"))
}

/// `ycsb` with TurtleKV twice: the only engine every build has, run in two
/// child processes as a comparison of engines is.
fn turtlekv_twice(workloads: &str) -> Command {
    let mut command = bench();
    command.args([
        "ycsb",
        "--engines",
        "turtlekv,turtlekv",
        "--workloads",
        workloads,
    ]);
    command
}

#[test]
fn two_engine_run_writes_table_json_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let plot = dir.path().join("out.svg");
    // Also a check that the per-engine child processes are merged in order.
    let output = turtlekv_twice("load,b,e")
        .args(["--records", "3000", "--ops", "500", "--threads", "2"])
        .arg("--dir")
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .arg("--plot")
        .arg(&plot)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // Not a terminal: no progress bars.
    assert!(stderr.is_empty(), "{stderr}");
    let table = String::from_utf8(output.stdout).unwrap();
    assert!(table.starts_with("engine"), "{table}");
    assert_eq!(table.matches("turtlekv  load").count(), 2, "{table}");
    assert!(table.contains("scan"), "{table}");

    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = doc["results"].as_array().unwrap();
    let workloads: Vec<&str> = rows
        .iter()
        .map(|r| r["workload"].as_str().unwrap())
        .collect();
    assert_eq!(workloads, ["load", "b", "e", "load", "b", "e"]);
    for row in rows {
        assert_eq!(row["engine"], "turtlekv");
        assert_eq!(row["records"], 3000);
        assert_eq!(row["threads"], 2);
        assert!(row["ops_per_sec"].as_f64().unwrap() > 0.0);
        assert!(row["peak_rss_bytes"].as_u64().unwrap() > 0);
    }
    assert_eq!(rows[0]["ops"], 3000);
    assert_eq!(rows[1]["ops"], 500);
    assert!(rows[0]["write_amp"].as_f64().unwrap() > 0.0);
    assert!(rows[2]["write_amp"].is_number(), "workload e inserts");
    let svg = std::fs::read_to_string(&plot).unwrap();
    let texts = svg_texts(&svg);
    assert!(texts.iter().any(|t| t == "E"), "{texts:?}");
    // Only our outputs are left: every engine directory was removed.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn engine_missing_from_the_build_fails_with_the_fix() {
    if cfg!(feature = "redb") {
        return;
    }
    let output = bench()
        .args(["ycsb", "--engines", "turtlekv,redb"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--features redb"), "{stderr}");
}

#[test]
fn memory_limit_runs_the_engine_in_a_cgroup_that_is_removed() {
    // Needs root and the cgroup v1 memory controller; probe by creating one.
    let probe_name = format!("turtlekv-bench-probe-{}", std::process::id());
    let Ok(probe) = turtlekv_bench::cgroup::MemoryCgroup::create(&probe_name, 1 << 30) else {
        eprintln!("skipped: no writable cgroup v1 memory controller");
        return;
    };
    let groups_dir = probe.path().parent().unwrap().to_path_buf();
    drop(probe);
    let dir = tempfile::tempdir().unwrap();
    let child = bench()
        .args([
            "ycsb",
            "--records",
            "2000",
            "--ops",
            "200",
            "--workloads",
            "load,c",
        ])
        .args(["--memory-limit-bytes", "1000000000", "--dir"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let table = String::from_utf8(output.stdout).unwrap();
    assert!(table.contains("turtlekv  c"), "{table}");
    let group = groups_dir.join(format!("turtlekv-bench-{pid}-turtlekv"));
    assert!(!group.exists(), "{} left behind", group.display());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn an_engine_that_fails_does_not_stop_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    // A leaf size TurtleKV refuses: each engine's child fails as it opens
    // (as one killed at a memory limit would fail, only sooner).
    let output = turtlekv_twice("load")
        .args(["--records", "1000", "--turtlekv-leaf-size-bytes", "5000"])
        .arg("--dir")
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("leaf_size_bytes = 5000"), "{stderr}");
    assert_eq!(
        stderr.matches("the other engines go on").count(),
        2,
        "the second engine ran after the first failed: {stderr}"
    );
    assert!(stderr.contains("2 of the engines failed"), "{stderr}");
    // The results there are (none here) are still written.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["results"].as_array().unwrap().len(), 0);
    assert_eq!(doc["metadata"]["settings"]["engines"][1], "turtlekv");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "engine directories removed"
    );
}

/// The metadata says how the run was made, with which build, on what.
#[test]
fn json_records_the_settings_build_and_host() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let output = bench()
        .args([
            "ycsb",
            "--workloads",
            "load,c",
            "--records",
            "1500",
            "--ops",
            "300",
            "--threads",
            "1",
            "--value-size",
            "64",
            "--key-format",
            "ycsb",
            "--distribution",
            "zipfian-unscrambled",
            "--seed",
            "42",
            "--cache-bytes",
            "4000000",
            "--settle",
            "--warmup-ops",
            "100",
            "--warmup-every-phase",
            "--turtlekv-checkpoint-threads",
            "1",
        ])
        .arg("--dir")
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["format"], 2);
    let meta = &doc["metadata"];
    let settings = &meta["settings"];
    let expected = serde_json::json!({
        "engines": ["turtlekv"],
        "workloads": ["load", "c"],
        "records": 1500,
        "ops": 300,
        "threads": 1,
        "value_size": 64,
        "key_format": "ycsb",
        "distribution": "zipfian-unscrambled",
        "seed": 42,
        "cache_bytes": 4000000,
        "direct_io": false,
        "sync": false,
        "settle": true,
        "warmup_ops": 100,
        "warmup_every_phase": true,
        "memory_limit_bytes": null,
        "rocksdb_memory_in_cache": false,
    });
    for (key, value) in expected.as_object().unwrap() {
        assert_eq!(&settings[key], value, "settings.{key}");
    }
    assert_eq!(settings["turtlekv"]["checkpoint_threads"], 1);
    assert!(settings["turtlekv"]["leaf_size_bytes"].is_null());
    // The build: a short commit hash (perhaps marked dirty) or "unknown".
    let commit = meta["commit"].as_str().unwrap();
    let hash = commit.split('-').next().unwrap();
    assert!(
        commit == "unknown" || (hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit())),
        "{commit}"
    );
    assert_eq!(meta["engine_versions"].as_object().unwrap().len(), 1);
    assert!(
        meta["engine_versions"]["turtlekv"]
            .as_str()
            .unwrap()
            .starts_with("0.")
    );
    let started = meta["started_at"].as_str().unwrap();
    assert!(
        started.starts_with("20") && started.ends_with('Z') && started.len() == 20,
        "{started}"
    );
    assert!(["debug", "release"].contains(&meta["build_profile"].as_str().unwrap()));
    assert!(meta["host"]["cpus"].as_u64().unwrap() >= 1);
    assert_eq!(meta["command"][1], "ycsb");
    assert!(
        meta["command"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--seed")
    );
    // The rows keep the shape they had.
    assert_eq!(doc["results"][1]["workload"], "c");
    assert_eq!(doc["results"][1]["settings"]["warmup_ops"], 100);
}

/// Two small results files, one of them in the first format (a bare
/// array of rows without metadata), as `ycsb --json` wrote them.
fn write_results(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let row = |engine: &str, workload: &str, ops: f64, ratio: f64| {
        serde_json::json!({
            "engine": engine, "workload": workload, "records": 1000, "ops": 1000,
            "threads": 2, "ops_per_sec": ops, "p50_us": 1.0, "p99_us": 9.0,
            "p999_us": 30.0, "write_amp": 3.5, "space_amp": 1.3,
            "peak_rss_bytes": 100 << 20, "ratio_to_turtlekv": ratio,
            "per_op": [["read", {"count": 1000, "p50_us": 1.0, "p99_us": 9.0, "p999_us": 30.0}]],
        })
    };
    let old = dir.join("old.json");
    let rows = serde_json::json!([
        row("turtlekv", "load", 500_000.0, 1.0),
        row("turtlekv", "e", 90_000.0, 1.0),
        row("rocksdb", "load", 200_000.0, 0.4),
        row("rocksdb", "e", 100_000.0, 1.11),
    ]);
    std::fs::write(&old, rows.to_string()).unwrap();
    let new = dir.join("new.json");
    let doc = serde_json::json!({
        "format": 2,
        "metadata": {
            "commit": "abc1234", "started_at": "2026-11-27T06:57:32Z",
            "engine_versions": {"turtlekv": "0.1.0", "fjall": "3.1.13"},
            "settings": {
                "engines": ["turtlekv", "fjall"], "workloads": ["load"], "records": 1000,
                "ops": 1000, "threads": 2, "value_size": 120, "key_format": "binary",
                "distribution": "zipfian", "seed": 1, "cache_bytes": 2147483648u64,
                "direct_io": true, "sync": false, "settle": false, "warmup_ops": 0,
                "warmup_every_phase": false, "memory_limit_bytes": null,
                "rocksdb_memory_in_cache": false,
                "turtlekv": {
                    "checkpoint_distance_bytes": null, "write_only_checkpoint_distance_bytes": null,
                    "record_cache_bytes": null, "record_cache_auto_split": false,
                    "checkpoint_io_idle": false, "leaf_size_bytes": null,
                    "filter_bits_per_key": null, "checkpoint_threads": null
                }
            }
        },
        "results": [row("turtlekv", "load", 600_000.0, 1.0), row("fjall", "load", 200_000.0, 0.33)],
    });
    std::fs::write(&new, doc.to_string()).unwrap();
    (old, new)
}

/// Every `<text>` of an SVG, after checking that it parses as XML with an
/// `svg` root in the SVG namespace.
fn svg_texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect()
}

#[test]
fn plot_draws_an_svg_from_saved_json() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = write_results(dir.path());
    let svg_path = dir.path().join("chart.svg");
    let output = bench()
        .arg("plot")
        .arg(&old)
        .arg(&new)
        .args(["--label", "two engines", "--label", "all engines", "--out"])
        .arg(&svg_path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let texts = svg_texts(&svg);
    for expected in [
        "throughput, ops/s (log scale)",
        "YCSB workload",
        "Load",
        "E",
        "TurtleKV (two engines)",
        "TurtleKV (all engines)",
        "RocksDB (two engines)",
        "fjall (all engines)",
        "E: 95% scan (1-100), 5% insert",
    ] {
        assert!(
            texts.iter().any(|t| t == expected),
            "no {expected:?} in {texts:?}"
        );
    }
    // Powers of ten label the log axis: 10k up to 1M.
    assert!(texts.iter().any(|t| t == "100k"), "{texts:?}");
    // Six bars (four from the old file, two from the new) above the white
    // background and the legend's five swatches.
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let filled_rects = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect"))
        .filter(|n| {
            n.attribute("fill")
                .is_some_and(|f| f != "#FFFFFF" && f != "none")
        })
        .count();
    assert_eq!(filled_rects, 6 + 4, "{svg}");

    // One file, the title from its metadata; PNG is refused.
    let one = dir.path().join("one.svg");
    let output = bench()
        .arg("plot")
        .arg(&new)
        .arg("--out")
        .arg(&one)
        .output()
        .unwrap();
    assert!(output.status.success());
    let texts = svg_texts(&std::fs::read_to_string(&one).unwrap());
    assert!(
        texts
            .iter()
            .any(|t| t.contains("commit abc1234 2026-11-27") && t.contains("2.0 GiB cache")),
        "{texts:?}"
    );
    let output = bench()
        .arg("plot")
        .arg(&new)
        .args(["--out", "chart.png"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("plots are SVG"));
}

#[test]
fn report_prints_markdown_tables_from_saved_json() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = write_results(dir.path());
    let output = bench().arg("report").arg(&old).arg(&new).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("| run | engine | Load | E |"), "{text}");
    assert!(
        text.contains("| old | TurtleKV | 500,000 | 90,000 |"),
        "{text}"
    );
    assert!(
        text.contains("|  | RocksDB | 200,000 (0.40) | 100,000 (1.11) |"),
        "{text}"
    );
    assert!(
        text.contains("| abc1234 2026-11-27 | TurtleKV | 600,000 | - |"),
        "{text}"
    );
    assert!(text.contains("fjall 3.1.13"), "{text}");
    assert!(text.contains("cache 2,147,483,648 B, direct I/O"), "{text}");
    let output = bench()
        .arg("report")
        .arg(&old)
        .args(["--label", "a", "--label", "b"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("2 labels for 1 files"));
}
