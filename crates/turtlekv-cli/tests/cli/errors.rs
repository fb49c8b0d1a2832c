//! Missing, foreign, locked databases; bad arguments; help; closed pipes.

use std::io::{BufRead as _, BufReader};
use std::process::Stdio;

use crate::{ok, path, run, temp_db, turtlekv};

const READERS: [&[&str]; 10] = [
    &["get", "k"],
    &["delete", "k"],
    &["delete-range", "a", "b"],
    &["scan"],
    &["dump"],
    &["keyspaces"],
    &["drop-keyspace", "ks"],
    &["stats"],
    &["check"],
    &["checkpoint"],
];

/// `turtlekv COMMAND DB REST...` for a command given as [COMMAND, REST...].
fn args_for<'a>(command: &[&'a str], db: &'a str) -> Vec<&'a str> {
    let mut args = vec![command[0], db];
    args.extend_from_slice(&command[1..]);
    args
}

#[test]
fn a_missing_database_is_not_created() {
    let (dir, db) = temp_db();
    for command in READERS.iter().chain([&["tune"][..]].iter()) {
        let (code, stdout, stderr) = run(&args_for(command, path(&db)));
        assert_eq!(code, 4, "{command:?}: {stderr}");
        assert_eq!(stdout, "");
        assert!(
            stderr.contains("no TurtleKV database at") && stderr.contains("no such directory"),
            "{command:?}: {stderr}"
        );
    }
    assert!(!db.exists());
    // An empty directory is no database either, and stays empty.
    std::fs::create_dir(&db).unwrap();
    let (code, _, stderr) = run(&["stats", path(&db)]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("no LOCK file"), "{stderr}");
    assert_eq!(std::fs::read_dir(&db).unwrap().count(), 0);
    // A file is not a database.
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let (code, _, stderr) = run(&["get", path(&file), "k"]);
    assert_eq!(code, 4);
    assert!(stderr.contains("not a directory"), "{stderr}");
    let (code, _, _) = run(&["put", path(&file), "k", "v"]);
    assert_eq!(code, 4);
}

#[test]
fn put_will_not_create_a_database_among_other_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let (code, _, stderr) = run(&["put", path(dir.path()), "k", "v"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("refusing to create one there"), "{stderr}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    // An existing empty directory is fine.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    ok(&["put", path(&empty), "k", "v"]);
    assert_eq!(ok(&["get", path(&empty), "k"]), "v\n");
}

/// A creation cut short leaves only the engine's own files, a store of
/// options cut short among them (its temporary file carries the writer's
/// process id): `put` goes on creating the database there.
#[test]
fn put_creates_a_database_among_its_own_leftover_files() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["LOCK", "OPTIONS.tmp.4242.0", "OPTIONS.tmp"] {
        std::fs::write(dir.path().join(name), "").unwrap();
    }
    ok(&["put", path(dir.path()), "k", "v"]);
    assert_eq!(ok(&["get", path(dir.path()), "k"]), "v\n");
    // A name that only starts like one is someone else's.
    let other = tempfile::tempdir().unwrap();
    for name in ["LOCK", "OPTIONS.tmpl"] {
        std::fs::write(other.path().join(name), "").unwrap();
    }
    let (code, _, stderr) = run(&["put", path(other.path()), "k", "v"]);
    assert_eq!(code, 4, "{stderr}");
}

#[test]
fn a_database_open_elsewhere_is_locked() {
    let (dir, db) = temp_db();
    ok(&["put", path(&db), "k", "v"]);
    let holder = turtlekv::Db::open(&db, turtlekv::Options::default()).unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "{\"key\":\"a\",\"value\":\"b\"}\n").unwrap();
    let input = path(&input);
    for command in READERS
        .iter()
        .chain([&["put", "k", "v"][..], &["load", input]].iter())
    {
        let (code, _, stderr) = run(&args_for(command, path(&db)));
        assert_eq!(code, 5, "{command:?}: {stderr}");
        assert!(stderr.contains("is locked by another handle"), "{stderr}");
    }
    // tune only writes the OPTIONS file, which is safe while the database
    // is open; it says that the running process keeps its settings.
    let said = ok(&["tune", path(&db), "--cache", "128MiB"]);
    assert!(said.contains("open in another process"), "{said}");
    drop(holder);
    // Other tests spawn processes from this one meanwhile; a child between
    // fork and exec briefly holds a copy of every descriptor, the LOCK
    // file's too, and so the flock. Give such a copy a moment to close.
    let mut attempt = 0;
    let released = loop {
        let (code, stdout, stderr) = run(&["get", path(&db), "k"]);
        attempt += 1;
        if code != 5 || attempt == 50 {
            break (code, stdout, stderr);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(released, (0, "v\n".to_string(), String::new()));
    let (code, _, _) = run(&["get", path(&db), "a"]);
    assert_eq!(code, 3, "the locked load wrote nothing");
}

#[test]
fn bad_arguments_exit_2_with_usage() {
    let (_dir, db) = temp_db();
    for args in [
        vec![],
        vec!["frobnicate"],
        vec!["get"],
        vec!["put", path(&db), "only-key"],
        vec!["scan", path(&db), "--limit", "ten"],
        vec!["scan", path(&db), "--prefix", "a", "--from", "b"],
        vec!["dump", path(&db), "--format", "xml"],
        vec!["bench", "--records", "0"],
    ] {
        let (code, _, stderr) = run(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(
            // Without any command clap prints the help instead.
            (stderr.contains("error") && stderr.contains("--help")) || stderr.contains("Usage:"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn every_command_has_help_with_an_example() {
    let top = ok(&["--help"]);
    let commands = [
        "put",
        "get",
        "delete",
        "scan",
        "load",
        "dump",
        "keyspaces",
        "drop-keyspace",
        "stats",
        "check",
        "checkpoint",
        "tune",
        "bench",
    ];
    for command in commands {
        assert!(top.contains(command), "{command} missing from\n{top}");
        let help = ok(&[command, "--help"]);
        assert!(help.contains("Example"), "{command}:\n{help}");
        assert!(
            help.contains(&format!("turtlekv {command}")),
            "{command}:\n{help}"
        );
    }
    assert!(top.contains("Exit codes"));
}

#[test]
fn a_closed_pipe_ends_output_quietly() {
    let (_dir, db) = temp_db();
    let mut input = String::new();
    for i in 0..5000 {
        input.push_str(&format!(
            "{{\"key\":\"k{i:05}\",\"value\":\"{}\"}}\n",
            "v".repeat(60)
        ));
    }
    turtlekv()
        .args(["load", path(&db), "-"])
        .write_stdin(input)
        .assert()
        .success();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("turtlekv"))
        .args(["scan", path(&db)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("k00000\t"));
    // The reader is gone; the rest of the output has nowhere to go.
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(stderr, "");
}
