//! `stats`, `checkpoint` and `check`, on healthy and corrupted databases.

use std::path::Path;

use crate::{ok, path, run, temp_db, turtlekv};

/// A database with `n` records, all in the tree after a checkpoint.
fn checkpointed_db(db: &Path, n: usize) {
    let mut input = String::new();
    for i in 0..n {
        input.push_str(&format!(
            "{{\"key\":\"key{i:06}\",\"value\":\"value {i} {}\"}}\n",
            "x".repeat(40)
        ));
    }
    turtlekv()
        .args(["load", path(db), "-"])
        .write_stdin(input)
        .assert()
        .success();
    let said = ok(&["checkpoint", path(db)]);
    assert!(
        said.contains(&format!("covers sequence numbers up to {n}")),
        "{said}"
    );
}

fn flip_byte(file: &Path, offset: u64) {
    let mut bytes = std::fs::read(file).unwrap();
    bytes[usize::try_from(offset).unwrap()] ^= 0x5a;
    std::fs::write(file, bytes).unwrap();
}

#[test]
fn stats_text_and_json() {
    let (_dir, db) = temp_db();
    checkpointed_db(&db, 2000);
    ok(&["put", path(&db), "after", "checkpoint"]);
    let text = ok(&["stats", path(&db)]);
    // The value printed after a label, in the text output.
    let field = |label: &str| -> String {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("  {label} ")))
            .unwrap_or_else(|| panic!("no {label:?} in\n{text}"))
            .trim()
            .to_string()
    };
    assert_eq!(field("height"), "1");
    assert_eq!(field("keys"), "2001");
    assert_eq!(
        field("covers sequence numbers"),
        "up to 2000 of 2001 (1 writes only in the WAL)"
    );
    assert_eq!(field("WAL records replayed"), "1");
    assert!(field("leaves.pages").ends_with("KiB"), "{text}");
    assert!(field("space amplification").contains("bytes on disk / live"));
    assert!(text.contains("this open (the engine counts per open handle"));
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["stats", path(&db), "--json"])).unwrap();
    assert_eq!(json["tree"]["height"], 1);
    assert!(json["tree"]["leaf_pages"].as_u64().unwrap() >= 1);
    assert_eq!(json["live"]["keys"], 2001);
    let live = json["live"]["user_bytes"].as_u64().unwrap();
    let on_disk = json["disk"]["bytes_on_disk"].as_u64().unwrap();
    assert!(on_disk > live, "{json}");
    let amp = json["space_amplification"].as_f64().unwrap();
    assert!((amp - on_disk as f64 / live as f64).abs() < 1e-9, "{json}");
    assert_eq!(json["checkpoint"]["covered_sequence"], 2000);
    assert_eq!(json["checkpoint"]["last_sequence"], 2001);
    assert!(
        json["checkpoint"]["committed_utc"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert_eq!(json["memtable"]["entries"], 1);
    assert_eq!(json["options"]["stored"], false);
    assert_eq!(
        json["this_open"]["write_amplification"],
        serde_json::Value::Null
    );
    assert!(json["disk"]["wal_segments"].as_u64().unwrap() >= 1);
    // --no-scan leaves out what needs one.
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["stats", path(&db), "--json", "--no-scan"])).unwrap();
    assert_eq!(json["live"], serde_json::Value::Null);
    assert_eq!(json["space_amplification"], serde_json::Value::Null);
}

#[test]
fn check_passes_on_a_healthy_database() {
    let (_dir, db) = temp_db();
    checkpointed_db(&db, 500);
    ok(&["put", path(&db), "in", "wal"]);
    let text = ok(&["check", path(&db)]);
    assert!(text.contains(": OK"), "{text}");
    assert!(text.contains("500 live keys"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["check", path(&db), "--json"])).unwrap();
    assert_eq!(json["ok"], true);
    assert_eq!(json["verified"]["tree_keys"], 500);
    assert_eq!(json["verified"]["memtable_keys"], 1);
    assert_eq!(json["corruption"], serde_json::Value::Null);
}

#[test]
fn check_reports_a_damaged_leaf_page() {
    let (_dir, db) = temp_db();
    checkpointed_db(&db, 2000);
    let leaves = db.join("leaves.pages");
    let len = std::fs::metadata(&leaves).unwrap().len();
    assert!(len > 8192, "{len}");
    flip_byte(&leaves, len / 2);
    let (code, stdout, stderr) = run(&["check", path(&db)]);
    assert_eq!(code, 6, "{stdout}{stderr}");
    assert!(
        stdout.contains("CORRUPT") && stdout.contains("leaves.pages"),
        "{stdout}"
    );
    assert!(stderr.contains("found corruption"), "{stderr}");
    let (code, stdout, _) = run(&["check", path(&db), "--json"]);
    assert_eq!(code, 6);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["ok"], false);
    assert!(
        json["corruption"]["file"]
            .as_str()
            .unwrap()
            .ends_with("leaves.pages")
    );
    assert!(
        json["corruption"]["reason"]
            .as_str()
            .unwrap()
            .contains("checksum")
    );
}

/// Bytes of a segment header and its marker (docs/format.md): a segment
/// this long holds no record.
const SEGMENT_START_BYTES: u64 = 32 + 15;

/// The database's WAL segments that hold records, oldest first.
fn wal_segments_with_records(db: &Path) -> Vec<std::path::PathBuf> {
    let mut segments: Vec<_> = std::fs::read_dir(db.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| std::fs::metadata(p).unwrap().len() > SEGMENT_START_BYTES)
        .collect();
    segments.sort();
    segments
}

#[test]
fn check_reports_a_damaged_wal_record() {
    let (_dir, db) = temp_db();
    checkpointed_db(&db, 100);
    // Synced writes after the checkpoint, so that the damaged record is
    // not a torn tail that recovery may drop.
    for key in ["a", "b", "c"] {
        ok(&["put", path(&db), key, "value"]);
    }
    let segments = wal_segments_with_records(&db);
    // Inside the payload of the first record after the header and marker.
    flip_byte(&segments[0], SEGMENT_START_BYTES + 12 + 4);
    let (code, stdout, stderr) = run(&["check", path(&db)]);
    assert_eq!(code, 6, "{stdout}{stderr}");
    assert!(
        stdout.contains("CORRUPT") && stdout.contains(".wal"),
        "{stdout}"
    );
    assert!(
        stdout.contains("found by   opening the database"),
        "{stdout}"
    );
    // Every other command refuses the database the same way.
    let (code, _, stderr) = run(&["get", path(&db), "a"]);
    assert_eq!(code, 6);
    assert!(
        stderr.contains("corruption in") && stderr.contains(".wal"),
        "{stderr}"
    );
}

/// A crash that cut the last WAL record short leaves a torn tail; the
/// check's own open cuts it off, which removes the evidence, so the check
/// says what it cut, not just OK.
#[test]
fn check_says_when_its_open_cut_a_torn_wal_tail() {
    let (_dir, db) = temp_db();
    ok(&["put", path(&db), "a", "value"]);
    let segments = wal_segments_with_records(&db);
    // A process killed while copying a record: half of one more record.
    let newest = segments.last().unwrap();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(newest)
        .unwrap();
    std::io::Write::write_all(&mut file, b"TKWL\x09\x00\x00\x00abcd").unwrap();
    drop(file);
    let text = ok(&["check", path(&db)]);
    assert!(
        text.contains(": OK") && text.contains("torn WAL tail"),
        "{text}"
    );
    let (_dir2, db2) = temp_db();
    ok(&["put", path(&db2), "a", "value"]);
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["check", path(&db2), "--json"])).unwrap();
    assert_eq!(json["verified"]["wal_tail_bytes_dropped"], 0);
    assert_eq!(ok(&["get", path(&db), "a"]).trim(), "value");
}
