//! `bench`: a real, if tiny, YCSB run.

use crate::ok;

#[test]
fn a_small_benchmark_runs_and_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let json = dir.path().join("results.json");
    let table = ok(&[
        "bench",
        "--records",
        "2000",
        "--ops",
        "500",
        "--workloads",
        "load,a,e",
        "--dir",
        scratch.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(table.contains("2000 records, 500 operations"), "{table}");
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("turtlekv"))
        .collect();
    assert_eq!(rows.len(), 3, "{table}");
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // The run's metadata names the engine and the settings it ran with.
    let metadata = &file["metadata"];
    assert!(
        metadata["engine_versions"]["turtlekv"].is_string(),
        "{file}"
    );
    assert_eq!(metadata["settings"]["records"], 2000, "{file}");
    let results = file["results"].as_array().unwrap();
    let workloads: Vec<&str> = results
        .iter()
        .map(|r| r["workload"].as_str().unwrap())
        .collect();
    assert_eq!(workloads, ["load", "a", "e"]);
    for r in results {
        assert!(r["ops_per_sec"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert_eq!(results[1]["ops"], 500);
    // The temporary database is gone.
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
}
