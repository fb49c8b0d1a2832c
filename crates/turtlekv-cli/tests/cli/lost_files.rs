//! Command sequences that lose or swap files of a database: each must be
//! reported (exit 6), never answered from an older state.

use std::path::{Path, PathBuf};

use crate::{ok, path, run, temp_db};

/// The WAL segments of `db`, oldest first.
fn segments(db: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(db.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    paths.sort();
    paths
}

/// `put r a 1; put r b 2; delete r a`.
fn three_commands(db: &Path) {
    ok(&["put", path(db), "a", "1"]);
    ok(&["put", path(db), "b", "2"]);
    ok(&["delete", path(db), "a"]);
}

/// Exit code 6 and a report of a missing segment, from `check` and from
/// the command that would have answered from an older state.
fn assert_missing_reported(db: &Path) {
    let (code, stdout, _) = run(&["check", path(db)]);
    assert_eq!(code, 6, "{stdout}");
    assert!(
        stdout.contains("CORRUPT") && stdout.contains("is missing"),
        "{stdout}"
    );
    let (code, stdout, stderr) = run(&["get", path(db), "a"]);
    assert_eq!((code, stdout.as_str()), (6, ""), "{stderr}");
    assert!(stderr.contains("is missing"), "{stderr}");
}

#[test]
fn removing_the_two_newest_segments_is_reported_and_recovery_is_explicit() {
    let (_dir, db) = temp_db();
    three_commands(&db);
    assert_eq!(ok(&["get", path(&db), "b"]), "2\n");
    let all = segments(&db);
    for segment in &all[all.len() - 2..] {
        std::fs::remove_file(segment).unwrap();
    }
    assert_missing_reported(&db);
    // Recovering is a choice, and the check says what it cost.
    let said = ok(&["check", "--wal-recovery", "point-in-time", path(&db)]);
    assert!(
        said.contains("OK") && said.contains("1 missing WAL segments"),
        "{said}"
    );
    let json = ok(&[
        "--wal-recovery",
        "point-in-time",
        "check",
        path(&db),
        "--json",
    ]);
    assert!(json.contains("\"wal_missing_segments\": 0"), "{json}");
    assert_eq!(ok(&["get", path(&db), "a"]), "1\n");
    ok(&["check", path(&db)]);
    let (code, _, stderr) = run(&["check", "--wal-recovery", "sometimes", path(&db)]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn removing_all_of_wal_on_a_checkpointed_database_is_reported() {
    let (_dir, db) = temp_db();
    ok(&["put", path(&db), "a", "1"]);
    ok(&["checkpoint", path(&db)]);
    ok(&["delete", path(&db), "a"]);
    std::fs::remove_dir_all(db.join("wal")).unwrap();
    assert_missing_reported(&db);
}

#[test]
fn deleting_the_last_segment_and_truncating_the_one_before_is_reported() {
    for eighths in [1, 4, 7] {
        let (_dir, db) = temp_db();
        three_commands(&db);
        let all = segments(&db);
        std::fs::remove_file(&all[2]).unwrap();
        let len = std::fs::metadata(&all[1]).unwrap().len();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&all[1])
            .unwrap();
        file.set_len(len * eighths / 8).unwrap();
        assert_missing_reported(&db);
    }
}

#[test]
fn a_segment_copied_from_another_database_is_refused() {
    let (_dir, ours) = temp_db();
    let (_other_dir, theirs) = temp_db();
    three_commands(&ours);
    three_commands(&theirs);
    let (mine, copied) = (segments(&ours), segments(&theirs));
    std::fs::copy(&copied[2], &mine[2]).unwrap();
    let (code, stdout, _) = run(&["check", path(&ours)]);
    assert_eq!(code, 6, "{stdout}");
    assert!(stdout.contains("another database"), "{stdout}");
}

#[test]
fn a_damaged_older_superblock_slot_is_reported_by_check() {
    let (_dir, db) = temp_db();
    ok(&["put", path(&db), "a", "1"]);
    ok(&["checkpoint", path(&db)]);
    let superblock = db.join("SUPERBLOCK");
    let bytes = std::fs::read(&superblock).unwrap();
    let generation = |at: usize| u64::from_le_bytes(bytes[at + 16..at + 24].try_into().unwrap());
    let older = if generation(0) > generation(4096) {
        4096
    } else {
        0
    };
    // Zeroed: never a crash's doing.
    let mut zeroed = bytes.clone();
    zeroed[older..older + 4096].fill(0);
    std::fs::write(&superblock, &zeroed).unwrap();
    let (code, stdout, _) = run(&["check", path(&db)]);
    assert_eq!(code, 6, "{stdout}");
    assert!(
        stdout.contains("SUPERBLOCK") && stdout.contains("zeroed"),
        "{stdout}"
    );
    // Garbage in its checksummed fields: possibly a torn commit, so the
    // open goes on, and the check says what it found.
    let mut damaged = bytes.clone();
    damaged[older + 20] ^= 0x5a;
    std::fs::write(&superblock, &damaged).unwrap();
    let said = ok(&["check", path(&db)]);
    assert!(
        said.contains("superblock slot failed to validate"),
        "{said}"
    );
    assert!(!ok(&["check", path(&db)]).contains("failed to validate"));
}

#[test]
fn creating_a_database_inside_another_is_refused() {
    let (_dir, db) = temp_db();
    ok(&["put", path(&db), "a", "1"]);
    let inner = db.join("wal").join("x");
    let (code, _, stderr) = run(&["put", path(&inner), "k", "v"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("inside the database at"), "{stderr}");
    assert!(!inner.exists());
    ok(&["check", path(&db)]);
}

/// The engine's I/O errors carry the operating system's text; printing
/// the error chain must not repeat it as the error's source.
#[test]
fn an_os_error_is_printed_once() {
    let (_dir, db) = temp_db();
    ok(&["put", path(&db), "a", "1"]);
    let nodes = db.join("nodes.pages");
    std::fs::remove_file(&nodes).unwrap();
    std::fs::create_dir(&nodes).unwrap();
    let (code, _, stderr) = run(&["get", path(&db), "a"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(stderr.matches("os error").count(), 1, "{stderr}");
}

#[test]
fn a_truncated_options_file_is_reported() {
    let (_dir, db) = temp_db();
    ok(&["put", path(&db), "a", "1"]);
    ok(&["tune", path(&db), "--wal-segment-size", "32MiB"]);
    let options = db.join("OPTIONS");
    let text = std::fs::read_to_string(&options).unwrap();
    std::fs::write(&options, &text[..text.len() - 6]).unwrap();
    let (code, stdout, _) = run(&["check", path(&db)]);
    assert_eq!(code, 6, "{stdout}");
    assert!(
        stdout.contains("OPTIONS") && stdout.contains("checksum"),
        "{stdout}"
    );
}
