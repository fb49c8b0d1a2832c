//! `put`, `get`, `delete` and `scan`.

use crate::{ok, path, run, temp_db};

#[test]
fn put_get_delete_text() {
    let (_dir, db) = temp_db();
    let db = path(&db);
    // put creates the database.
    assert_eq!(ok(&["put", db, "apple", "red"]), "");
    assert_eq!(ok(&["get", db, "apple"]), "red\n");
    ok(&["put", db, "apple", "green"]);
    assert_eq!(ok(&["get", db, "apple"]), "green\n");
    ok(&["delete", db, "apple"]);
    let (code, stdout, stderr) = run(&["get", db, "apple"]);
    assert_eq!((code, stdout.as_str()), (3, ""));
    assert!(stderr.contains("key \"apple\" not found"), "{stderr}");
    // Deleting what is not there is fine.
    ok(&["delete", db, "apple"]);
    // Unicode and an empty value.
    ok(&["put", db, "ключ", ""]);
    assert_eq!(ok(&["get", db, "ключ"]), "\n");
}

#[test]
fn binary_keys_in_hex_and_base64() {
    let (_dir, db) = temp_db();
    let db = path(&db);
    ok(&["put", db, "--hex", "00ff", "0102"]);
    ok(&["put", db, "--base64", "/wA=", "AAAA"]);
    assert_eq!(ok(&["get", db, "--hex", "00FF"]), "0102\n");
    assert_eq!(ok(&["get", db, "--base64", "AP8="]), "AQI=\n");
    assert_eq!(ok(&["get", db, "--hex", "0xff00"]), "000000\n");
    assert_eq!(ok(&["scan", db, "--hex"]), "00ff\t0102\nff00\t000000\n");
    assert_eq!(
        ok(&["scan", db, "--json"]),
        "{\"key_base64\":\"AP8=\",\"value\":\"\\u0001\\u0002\"}\n\
         {\"key_base64\":\"/wA=\",\"value\":\"\\u0000\\u0000\\u0000\"}\n"
    );
    // Printing bytes as text would change them: refused, with a hint.
    let (code, _, stderr) = run(&["scan", db]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("key 00ff is not UTF-8") && stderr.contains("--hex"),
        "{stderr}"
    );
    let (code, _, stderr) = run(&["get", db, "--hex", "00ff", "--base64"]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn scan_bounds_order_and_limits() {
    let (_dir, db) = temp_db();
    let db = path(&db);
    for key in ["b2", "a1", "c1", "b1", "a2"] {
        ok(&["put", db, key, &format!("v-{key}")]);
    }
    let lines = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["scan", db];
        all.extend_from_slice(args);
        ok(&all).lines().map(str::to_string).collect()
    };
    assert_eq!(
        lines(&[]),
        ["a1\tv-a1", "a2\tv-a2", "b1\tv-b1", "b2\tv-b2", "c1\tv-c1"]
    );
    assert_eq!(
        lines(&["--keys-only", "--reverse"]),
        ["c1", "b2", "b1", "a2", "a1"]
    );
    assert_eq!(lines(&["--keys-only", "--limit", "2"]), ["a1", "a2"]);
    assert_eq!(
        lines(&["--keys-only", "--limit", "2", "--reverse"]),
        ["c1", "b2"]
    );
    assert_eq!(lines(&["--prefix", "b"]), ["b1\tv-b1", "b2\tv-b2"]);
    assert_eq!(
        lines(&["--prefix", "b", "--reverse", "--keys-only"]),
        ["b2", "b1"]
    );
    // --from is inclusive, --to exclusive.
    assert_eq!(
        lines(&["--from", "a2", "--to", "c1", "--keys-only"]),
        ["a2", "b1", "b2"]
    );
    assert_eq!(
        lines(&["--from", "b", "--keys-only", "--reverse"]),
        ["c1", "b2", "b1"]
    );
    assert_eq!(
        lines(&["--prefix", "6231", "--hex", "--keys-only"]),
        ["6231"]
    );
    assert_eq!(lines(&["--prefix", "zz"]), Vec::<String>::new());
    assert_eq!(
        lines(&["--prefix", "c", "--json"]),
        [r#"{"key":"c1","value":"v-c1"}"#]
    );
}

#[test]
fn bad_keys_are_usage_errors() {
    let (_dir, db) = temp_db();
    let db = path(&db);
    let long = "k".repeat(513);
    for args in [
        vec!["put", db, "", "v"],
        vec!["put", db, &long, "v"],
        vec!["put", db, "--hex", "abc", "00"],
        vec!["put", db, "--hex", "00", "zz"],
        vec!["put", db, "--base64", "***", "AA=="],
    ] {
        let (code, _, stderr) = run(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
    }
    // Nothing was created by the refused commands.
    assert!(!std::path::Path::new(db).exists());
}

#[test]
fn delete_range_removes_the_keys_from_start_to_before_end() {
    let (_dir, db) = temp_db();
    let db = path(&db);
    for key in ["log:1", "log:2", "log;", "m", "a"] {
        ok(&["put", db, key, "v"]);
    }
    assert_eq!(ok(&["delete-range", db, "log:", "log;"]), "");
    assert_eq!(ok(&["scan", db, "--keys-only"]), "a\nlog;\nm\n");
    // Bounds not in order: a usage error, and nothing changes.
    let (code, _, stderr) = run(&["delete-range", db, "m", "a"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("invalid range"), "{stderr}");
    let (code, _, stderr) = run(&["delete-range", db, "m", "m"]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(ok(&["scan", db, "--keys-only"]), "a\nlog;\nm\n");
    // Binary bounds, and the range survives a reopen (each command is one).
    ok(&["put", db, "--hex", "00ff", "00"]);
    ok(&["delete-range", db, "--hex", "00", "01"]);
    assert_eq!(ok(&["scan", db, "--keys-only"]), "a\nlog;\nm\n");
    // In a named keyspace only.
    ok(&["put", db, "--keyspace", "users", "alice", "x"]);
    ok(&["delete-range", db, "--keyspace", "users", "a", "b"]);
    assert_eq!(ok(&["scan", db, "--keyspace", "users"]), "");
    assert_eq!(ok(&["scan", db, "--keys-only"]), "a\nlog;\nm\n");
    let (code, _, _) = run(&["delete-range", db, "--keyspace", "nope", "a", "b"]);
    assert_eq!(code, 7);
}
