//! The binary end to end: table on stdout, JSON and plot files, one child
//! process per engine, loud failures.

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
    let plot = dir.path().join("out.png");
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

    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = rows.as_array().unwrap();
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
    assert!(std::fs::metadata(&plot).unwrap().len() > 1000);
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
    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 0);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "engine directories removed"
    );
}
