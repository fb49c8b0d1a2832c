//! Inputs at the edges of the documented behaviour (`docs/cli.md`): empty
//! input, duplicate fields, another engine's directory, a byte order mark,
//! keys too long for small nodes, a dump that fails or targets the
//! database's own directory (`docs/testing.md`, "Known bugs fixed").

use crate::{ok, path, run, temp_db, turtlekv};

/// Runs `turtlekv ARGS` with `input` on standard input.
fn run_with_stdin(args: &[&str], input: &[u8]) -> (i32, String, String) {
    let output = turtlekv().args(args).write_stdin(input).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr,
    )
}

/// `turtlekv dump ./old-db | turtlekv load ./new-db -` (docs/cli.md) on a
/// database with no records: dump writes nothing, and load must load
/// nothing rather than fail.
#[test]
fn an_empty_database_round_trips_through_a_pipe() {
    let (dir, db) = temp_db();
    ok(&["put", path(&db), "k", "v"]);
    ok(&["delete", path(&db), "k"]);
    let dumped = ok(&["dump", path(&db)]);
    assert_eq!(dumped, "");
    let copy = dir.path().join("copy");
    let (code, _, stderr) = run_with_stdin(&["load", path(&copy), "-"], dumped.as_bytes());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(ok(&["dump", path(&copy)]), "");
}

/// "one object per line with exactly one key field and one value field":
/// a line with two `key` fields is malformed, not "the last one wins".
#[test]
fn a_json_line_with_two_key_fields_is_refused() {
    let (_dir, db) = temp_db();
    let input = br#"{"key":"a","key":"b","value":"v"}
"#;
    let (code, _, stderr) = run_with_stdin(&["load", path(&db), "-"], input);
    assert_eq!(code, 1, "loaded a line with two key fields: {stderr}");
    assert!(stderr.contains("more than one key"), "{stderr}");
}

/// RocksDB and LevelDB directories have a `LOCK` file too. `put` must not
/// scatter TurtleKV's files among theirs, and a reading command must say
/// "no database" (exit 4) and leave the directory as it was.
#[test]
fn a_rocksdb_directory_is_not_a_turtlekv_database() {
    let dir = tempfile::tempdir().unwrap();
    let rocks = dir.path().join("rocks");
    std::fs::create_dir(&rocks).unwrap();
    let files = [
        "CURRENT",
        "LOCK",
        "MANIFEST-000001",
        "000003.log",
        "OPTIONS-000005",
    ];
    for name in files {
        std::fs::write(rocks.join(name), "").unwrap();
    }
    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(&rocks)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    let before = listing();
    let (code, _, stderr) = run(&["get", path(&rocks), "k"]);
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(listing(), before, "get changed a foreign directory");
    let (code, _, stderr) = run(&["put", path(&rocks), "k", "v"]);
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(listing(), before, "put wrote into a foreign directory");
}

/// The crash path of a creation is still allowed: a directory holding only
/// what TurtleKV itself creates is taken over.
#[test]
fn a_half_created_database_can_still_be_created() {
    let (_dir, db) = temp_db();
    std::fs::create_dir_all(db.join("wal")).unwrap();
    std::fs::write(db.join("LOCK"), "").unwrap();
    ok(&["put", path(&db), "k", "v"]);
    assert_eq!(ok(&["get", path(&db), "k"]), "v\n");
}

/// A JSON Lines file saved with a BOM (Windows editors) is still JSON
/// Lines, from a file or from standard input.
#[test]
fn a_json_lines_file_with_a_bom_loads() {
    let (dir, db) = temp_db();
    let input = "\u{feff}{\"key\":\"a\",\"value\":\"1\"}\n";
    let file = dir.path().join("bom.jsonl");
    std::fs::write(&file, input).unwrap();
    ok(&["load", path(&db), path(&file)]);
    let (code, _, stderr) = run_with_stdin(&["load", path(&db), "-"], input.as_bytes());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(ok(&["get", path(&db), "a"]), "1\n");
}

/// A database with 512-byte nodes takes keys of at most 91 bytes
/// (docs/tuning.md). The doc's exit-code table says an oversized key is a
/// bad command line (2), and `load` names the line of a bad record.
#[test]
fn a_key_too_large_for_small_nodes() {
    let (dir, db) = temp_db();
    let mut options = turtlekv::Options::default();
    options.node_size_bytes = 512;
    drop(turtlekv::Db::open(&db, options).unwrap());
    let key = "k".repeat(200);
    let (code, _, stderr) = run(&["put", path(&db), &key, "v"]);
    assert_eq!(code, 2, "put: {stderr}");
    let (code, _, stderr) = run(&["delete", path(&db), &key]);
    assert_eq!(code, 2, "delete: {stderr}");
    // No such key can be stored, so it is not found.
    let (code, _, stderr) = run(&["get", path(&db), &key]);
    assert_eq!(code, 3, "get: {stderr}");
    let file = dir.path().join("in.jsonl");
    std::fs::write(
        &file,
        format!("{{\"key\":\"a\",\"value\":\"1\"}}\n{{\"key\":\"{key}\",\"value\":\"1\"}}\n"),
    )
    .unwrap();
    let (code, _, stderr) = run(&["load", path(&db), path(&file)]);
    assert_eq!(code, 1, "load: {stderr}");
    assert!(stderr.contains("line 2"), "load names the line: {stderr}");
}

/// `dump -o FILE` that fails part way (here: a damaged leaf) must leave
/// the FILE that was there, not a truncated dump that loads without error.
#[test]
fn a_failed_dump_keeps_the_previous_file() {
    let (dir, db) = temp_db();
    let records: String = (0..3000)
        .map(|i| {
            format!(
                "{{\"key\":\"key{i:05}\",\"value\":\"{}\"}}\n",
                "v".repeat(2000)
            )
        })
        .collect();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, records).unwrap();
    // Chunks stored raw, so that the last key's bytes can be found in the
    // page file below.
    std::fs::create_dir_all(&db).unwrap();
    let mut raw = turtlekv::Options::default();
    raw.compression = turtlekv::Compression::None;
    raw.store(&db).unwrap();
    ok(&["load", path(&db), path(&input)]);
    ok(&["checkpoint", path(&db)]);
    let backup = dir.path().join("backup.jsonl");
    ok(&["dump", path(&db), "-o", path(&backup)]);
    let good = std::fs::read(&backup).unwrap();
    // Damage the page that holds the last key, so the dump fails after it
    // has written most records. (A fixed byte such as the file's middle one
    // can fall in the unused tail of a 2 MiB slot, which no page reads: the
    // dump would then succeed and the test fail.)
    let leaves = db.join("leaves.pages");
    let mut bytes = std::fs::read(&leaves).unwrap();
    let last_key = b"key02999";
    let copies: Vec<usize> = (0..bytes.len().saturating_sub(last_key.len()))
        .filter(|&at| bytes[at..].starts_with(last_key))
        .collect();
    assert!(!copies.is_empty(), "the last key is stored in plain bytes");
    for at in copies {
        bytes[at + last_key.len() - 1] ^= 0xff;
    }
    std::fs::write(&leaves, bytes).unwrap();
    let (code, _, stderr) = run(&["dump", path(&db), "-o", path(&backup)]);
    assert_eq!(code, 6, "{stderr}");
    assert!(
        std::fs::read(&backup).unwrap() == good,
        "the old backup was overwritten by a partial dump"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        3,
        "a temporary file was left"
    );
}

/// `dump -o` into the database's own directory would rename the dump over
/// the file it names there (`SUPERBLOCK`: the database is gone): refused
/// as a bad command line, and nothing changes.
#[test]
fn a_dump_into_the_database_directory_is_refused() {
    let (_dir, db) = temp_db();
    ok(&["put", path(&db), "k", "v"]);
    let superblock = db.join("SUPERBLOCK");
    let before = std::fs::read(&superblock).unwrap();
    for target in [superblock.clone(), db.join("dump.jsonl"), db.join("wal/x")] {
        let (code, _, stderr) = run(&["dump", path(&db), "-o", path(&target)]);
        assert_eq!(code, 2, "{}: {stderr}", target.display());
        assert!(stderr.contains("inside the database directory"), "{stderr}");
    }
    assert_eq!(std::fs::read(&superblock).unwrap(), before);
    assert!(!db.join("dump.jsonl").exists());
    assert_eq!(ok(&["get", path(&db), "k"]).trim(), "v");
}
