//! `tune`: knobs stored with the database and used by later opens.

use crate::{ok, path, run, temp_db};

#[test]
fn tuned_knobs_are_stored_and_used() {
    let (_dir, db) = temp_db();
    ok(&["put", path(&db), "k", "v"]);
    let said = ok(&[
        "tune",
        path(&db),
        "--checkpoint-distance",
        "32MiB",
        "--cache",
        "1.5GiB",
        "--filter-bits",
        "12",
        "--write-only-checkpoint-distance",
        "96MiB",
        "--garbage-percent",
        "10",
        "--compression",
        "zstd:5",
    ]);
    assert!(
        said.contains("garbage percent        10 (was 15)"),
        "{said}"
    );
    assert!(
        said.contains("compression            zstd:5 (was lz4)"),
        "{said}"
    );
    assert!(
        said.contains("cache                  1.5 GiB (was 256 MiB)"),
        "{said}"
    );
    assert!(db.join("OPTIONS").exists());
    let shown = ok(&["tune", path(&db)]);
    assert!(shown.contains("checkpoint distance    32 MiB\n"), "{shown}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["stats", path(&db), "--json"])).unwrap();
    assert_eq!(json["options"]["stored"], true);
    assert_eq!(json["options"]["checkpoint_distance_bytes"], 32 << 20);
    assert_eq!(
        json["options"]["write_only_checkpoint_distance_bytes"],
        96 << 20
    );
    assert_eq!(json["options"]["cache_capacity_bytes"], 3_u64 << 29);
    assert_eq!(json["options"]["filter_bits_per_key"], 12);
    assert_eq!(json["options"]["compression"], "zstd:5");
    // The open that stats made used them.
    assert_eq!(json["memtable"]["checkpoint_distance_bytes"], 32 << 20);
    assert_eq!(json["memory"]["budget_bytes"], 3_u64 << 29);
    let text = ok(&["stats", path(&db)]);
    assert!(text.contains("stored in OPTIONS"), "{text}");
    // The data is untouched.
    assert_eq!(ok(&["get", path(&db), "k"]), "v\n");
}

#[test]
fn bad_knobs_are_refused_and_nothing_is_stored() {
    let (_dir, db) = temp_db();
    ok(&["put", path(&db), "k", "v"]);
    for args in [
        ["--cache", "lots"],
        ["--cache", "12XB"],
        ["--checkpoint-distance", "-5"],
        // Parses, but below the engine's minimum.
        ["--checkpoint-distance", "1KiB"],
        ["--filter-bits", "99"],
        ["--garbage-percent", "5000"],
        ["--compression", "snappy"],
        ["--compression", "zstd:x"],
    ] {
        let mut all = vec!["tune", path(&db)];
        all.extend(args);
        let (code, _, stderr) = run(&all);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains("error"), "{stderr}");
    }
    assert!(!db.join("OPTIONS").exists());
    let (code, _, stderr) = run(&["tune", path(&db), "--cache", "lots"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("invalid size \"lots\""), "{stderr}");
}
