//! `--keyspace` on the data commands, `keyspaces`, `drop-keyspace`, and
//! the keyspaces in `stats`.

use std::path::Path;

use crate::{ok, path, run, temp_db, turtlekv};

/// The named keyspaces, as `turtlekv keyspaces` lists them.
fn names(db: &Path) -> Vec<String> {
    ok(&["keyspaces", path(db)])
        .lines()
        .map(str::to_string)
        .collect()
}

fn stats_json(db: &Path) -> serde_json::Value {
    serde_json::from_str(&ok(&["stats", path(db), "--json"])).unwrap()
}

#[test]
fn put_get_delete_and_scan_keep_keyspaces_apart() {
    let (_dir, db) = temp_db();
    let db = path(&db);
    ok(&["put", db, "k", "default"]);
    // put creates the keyspace (and would create the database).
    ok(&["put", db, "--keyspace", "one", "k", "in one"]);
    ok(&["put", db, "k", "in two", "--keyspace", "two"]);
    ok(&["put", db, "--keyspace", "two", "--hex", "00ff", "0102"]);
    assert_eq!(ok(&["get", db, "k"]), "default\n");
    assert_eq!(ok(&["get", db, "--keyspace", "one", "k"]), "in one\n");
    assert_eq!(ok(&["get", db, "--keyspace", "two", "k"]), "in two\n");
    assert_eq!(
        ok(&["get", db, "--keyspace", "two", "--hex", "00ff"]),
        "0102\n"
    );
    let (code, _, stderr) = run(&["get", db, "--keyspace", "one", "--hex", "00ff"]);
    assert_eq!(code, 3, "{stderr}");

    assert_eq!(ok(&["scan", db]), "k\tdefault\n");
    assert_eq!(ok(&["scan", db, "--keyspace", "one"]), "k\tin one\n");
    assert_eq!(
        ok(&["scan", db, "--keyspace", "two", "--hex", "--keys-only"]),
        "00ff\n6b\n"
    );
    assert_eq!(
        ok(&["scan", db, "--keyspace", "two", "--prefix", "k", "--json"]),
        "{\"key\":\"k\",\"value\":\"in two\"}\n"
    );
    assert_eq!(
        ok(&[
            "scan",
            db,
            "--keyspace",
            "two",
            "--from",
            "a",
            "--reverse",
            "--keys-only"
        ]),
        "k\n"
    );

    // A delete in one keyspace leaves the others alone.
    ok(&["delete", db, "--keyspace", "one", "k"]);
    let (code, _, _) = run(&["get", db, "--keyspace", "one", "k"]);
    assert_eq!(code, 3);
    assert_eq!(ok(&["get", db, "k"]), "default\n");
    assert_eq!(ok(&["get", db, "--keyspace", "two", "k"]), "in two\n");
    assert_eq!(ok(&["scan", db, "--keyspace", "one"]), "");
    // Emptied, the keyspace is still there.
    assert_eq!(names(Path::new(db)), ["one", "two"]);
}

#[test]
fn dump_and_load_one_keyspace_at_a_time() {
    let (dir, db) = temp_db();
    let users = dir.path().join("users.jsonl");
    std::fs::write(
        &users,
        "{\"key\":\"alice\",\"value\":\"admin\"}\n{\"key_hex\":\"00ff\",\"value_base64\":\"AAE=\"}\n",
    )
    .unwrap();
    // load creates the database and the keyspace.
    let said = ok(&["load", path(&db), "--keyspace", "users", path(&users)]);
    assert!(
        said.starts_with(&format!(
            "loaded 2 records (14 B of keys and values) into keyspace \"users\" of {}",
            path(&db)
        )),
        "{said}"
    );
    turtlekv()
        .args(["load", path(&db), "-"])
        .write_stdin("{\"key\":\"alice\",\"value\":\"default\"}\n")
        .assert()
        .success();
    assert_eq!(names(&db), ["users"]);
    assert_eq!(
        ok(&["dump", path(&db)]),
        "{\"key\":\"alice\",\"value\":\"default\"}\n"
    );
    let dump = ok(&["dump", path(&db), "--keyspace", "users"]);
    assert_eq!(
        dump,
        "{\"key_base64\":\"AP8=\",\"value\":\"\\u0000\\u0001\"}\n\
         {\"key\":\"alice\",\"value\":\"admin\"}\n"
    );
    // To a file and in CSV too.
    let csv = dir.path().join("users.csv");
    ok(&[
        "dump",
        path(&db),
        "--keyspace",
        "users",
        "--format",
        "csv",
        "-o",
        path(&csv),
    ]);
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap(),
        "key_base64,value\nAP8=,\0\u{1}\nYWxpY2U=,admin\n"
    );

    // One keyspace's dump loads into another keyspace, of another database
    // or of the same one.
    let copy = dir.path().join("copy");
    turtlekv()
        .args(["load", path(&copy), "--keyspace", "people", "-"])
        .write_stdin(dump.clone())
        .assert()
        .success();
    assert_eq!(ok(&["dump", path(&copy), "--keyspace", "people"]), dump);
    assert_eq!(ok(&["dump", path(&copy)]), "");
    ok(&["load", path(&db), "--keyspace", "again", path(&csv)]);
    assert_eq!(ok(&["dump", path(&db), "--keyspace", "again"]), dump);
    assert_eq!(names(&db), ["again", "users"]);
}

#[test]
fn reading_a_missing_keyspace_fails_and_creates_nothing() {
    let (dir, db) = temp_db();
    ok(&["put", path(&db), "k", "v"]);
    ok(&["put", path(&db), "--keyspace", "there", "k", "v"]);
    let out = dir.path().join("out.jsonl");
    for args in [
        vec!["get", "k"],
        vec!["delete", "k"],
        vec!["scan"],
        vec!["scan", "--prefix", "k"],
        vec!["dump"],
        vec!["dump", "-o", path(&out)],
    ] {
        let mut all = vec![args[0], path(&db), "--keyspace", "nope"];
        all.extend_from_slice(&args[1..]);
        let (code, stdout, stderr) = run(&all);
        assert_eq!(code, 7, "{args:?}: {stderr}");
        assert_eq!(stdout, "", "{args:?}");
        assert!(
            stderr.contains("no keyspace named \"nope\"") && stderr.contains("turtlekv keyspaces"),
            "{args:?}: {stderr}"
        );
    }
    assert!(!out.exists());
    assert_eq!(names(&db), ["there"]);
    let json = stats_json(&db);
    assert_eq!(json["keyspaces"].as_array().unwrap().len(), 2);
    // A load whose input is bad from its first line creates no keyspace
    // either.
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"key\":\"\",\"value\":\"x\"}\n").unwrap();
    let (code, _, stderr) = run(&["load", path(&db), "--keyspace", "nope", path(&bad)]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(names(&db), ["there"]);
}

#[test]
fn keyspaces_are_listed_and_dropped() {
    let (_dir, db) = temp_db();
    ok(&["put", path(&db), "k", "v"]);
    assert_eq!(ok(&["keyspaces", path(&db)]), "");
    for name in ["b", "ключ", "a", "a b"] {
        ok(&["put", path(&db), "--keyspace", name, "k", name]);
    }
    // In byte order; the default keyspace has no name and is not listed.
    assert_eq!(names(&db), ["a", "a b", "b", "ключ"]);
    assert_eq!(
        ok(&["keyspaces", path(&db), "--hex"]),
        "61\n612062\n62\nd0bad0bbd18ed187\n"
    );

    let said = ok(&["drop-keyspace", path(&db), "b"]);
    assert!(said.starts_with("dropped keyspace \"b\""), "{said}");
    assert_eq!(names(&db), ["a", "a b", "ключ"]);
    for args in [
        vec!["drop-keyspace", path(&db), "b"],
        vec!["get", path(&db), "--keyspace", "b", "k"],
    ] {
        let (code, _, stderr) = run(&args);
        assert_eq!(code, 7, "{args:?}: {stderr}");
        assert!(stderr.contains("no keyspace named"), "{stderr}");
    }
    // The others keep their records; a keyspace made again under the
    // dropped name starts empty.
    assert_eq!(ok(&["get", path(&db), "--keyspace", "a", "k"]), "a\n");
    assert_eq!(ok(&["get", path(&db), "k"]), "v\n");
    ok(&["put", path(&db), "--keyspace", "b", "other", "new"]);
    assert_eq!(ok(&["scan", path(&db), "--keyspace", "b"]), "other\tnew\n");
    ok(&["drop-keyspace", path(&db), "ключ"]);
    assert_eq!(names(&db), ["a", "a b", "b"]);
}

/// Names made through the library need not be UTF-8; the command line
/// shows them without changing their bytes.
#[test]
fn names_that_are_not_utf8() {
    let (_dir, db) = temp_db();
    ok(&["put", path(&db), "k", "v"]);
    {
        let handle = turtlekv::Db::open(&db, turtlekv::Options::default()).unwrap();
        handle
            .keyspace([0xff, 0x00])
            .unwrap()
            .put("k", "v")
            .unwrap();
        handle.close().unwrap();
    }
    let (code, stdout, stderr) = run(&["keyspaces", path(&db)]);
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    assert!(
        stderr.contains("keyspace name ff00 is not UTF-8") && stderr.contains("--hex"),
        "{stderr}"
    );
    assert_eq!(ok(&["keyspaces", path(&db), "--hex"]), "ff00\n");
    let json = stats_json(&db);
    let named = &json["keyspaces"][1];
    assert_eq!(named["name_base64"], "/wA=");
    assert!(named.get("name").is_none(), "{named}");
    assert_eq!(named["live"]["keys"], 1);
    let text = ok(&["stats", path(&db)]);
    assert!(text.contains("  (base64) /wA= "), "{text}");
}

#[test]
fn stats_shows_each_keyspace() {
    let (_dir, db) = temp_db();
    for (keyspace, keys) in [(None, 3), (Some("users"), 2), (Some("archive"), 1)] {
        for i in 0..keys {
            let mut args = vec!["put", path(&db)];
            if let Some(name) = keyspace {
                args.extend(["--keyspace", name]);
            }
            let key = format!("key{i}");
            args.extend([key.as_str(), "value"]);
            ok(&args);
        }
    }
    let json = stats_json(&db);
    let keyspaces = json["keyspaces"].as_array().unwrap();
    let rows: Vec<(&str, u64)> = keyspaces
        .iter()
        .map(|k| {
            (
                k["name"].as_str().unwrap(),
                k["live"]["keys"].as_u64().unwrap(),
            )
        })
        .collect();
    // The default keyspace first, then the named ones in name order.
    assert_eq!(rows, [("", 3), ("archive", 1), ("users", 2)]);
    assert_eq!(keyspaces[2]["live"]["user_bytes"], 2 * (4 + 5));
    // The engine counts operations per open: this open only scanned, and
    // the counts are read before its scan.
    for k in keyspaces {
        for count in ["puts", "deletes", "gets", "scans"] {
            assert_eq!(k[count], 0, "{count} of {k}");
        }
    }
    assert_eq!(json["keyspaces_dropping"], 0);
    // Live data covers every keyspace.
    assert_eq!(json["live"]["keys"], 6);

    let text = ok(&["stats", path(&db)]);
    let field = |label: &str| -> String {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("  {label} ")))
            .unwrap_or_else(|| panic!("no {label:?} in\n{text}"))
            .trim()
            .to_string()
    };
    assert!(
        text.contains("\nkeyspaces (operations counted since this open"),
        "{text}"
    );
    assert_eq!(field("drops still cleaning"), "0");
    assert_eq!(
        field("default"),
        "3 keys, 27 B; 0 puts, 0 deletes, 0 gets, 0 scans"
    );
    assert_eq!(
        field("\"users\""),
        "2 keys, 18 B; 0 puts, 0 deletes, 0 gets, 0 scans"
    );
    assert_eq!(field("keys"), "6");

    let json: serde_json::Value =
        serde_json::from_str(&ok(&["stats", path(&db), "--json", "--no-scan"])).unwrap();
    assert!(json["keyspaces"][1]["live"].is_null(), "{json}");
    assert_eq!(json["keyspaces"][1]["name"], "archive");
    let text = ok(&["stats", path(&db), "--no-scan"]);
    assert!(
        text.contains("  \"users\"                      keys not counted; 0 puts"),
        "{text}"
    );

    // A drop: the keyspace leaves the list; its records are deleted in the
    // background, counted as a drop still cleaning until they all are.
    ok(&["drop-keyspace", path(&db), "users"]);
    let json = stats_json(&db);
    let names: Vec<&str> = json["keyspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["", "archive"]);
    assert!(json["keyspaces_dropping"].as_u64().unwrap() <= 1, "{json}");
    assert_eq!(json["live"]["keys"], 4);
    {
        // Let the cleaning finish, through the library.
        let handle = turtlekv::Db::open(&db, turtlekv::Options::default()).unwrap();
        let started = std::time::Instant::now();
        while handle.stats().keyspaces_dropping > 0 {
            assert!(started.elapsed().as_secs() < 60, "the drop never cleaned");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        handle.close().unwrap();
    }
    assert_eq!(stats_json(&db)["keyspaces_dropping"], 0);
}

#[test]
fn bad_keyspace_names_are_usage_errors() {
    let (dir, db) = temp_db();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "{\"key\":\"k\",\"value\":\"v\"}\n").unwrap();
    let long = "n".repeat(256);
    // 128 two-byte characters: the limit is in bytes.
    let wide = "é".repeat(128);
    for name in ["", long.as_str(), wide.as_str()] {
        for args in [
            vec!["put", path(&db), "--keyspace", name, "k", "v"],
            vec!["load", path(&db), "--keyspace", name, path(&input)],
            vec!["get", path(&db), "--keyspace", name, "k"],
            vec!["delete", path(&db), "--keyspace", name, "k"],
            vec!["scan", path(&db), "--keyspace", name],
            vec!["dump", path(&db), "--keyspace", name],
            vec!["drop-keyspace", path(&db), name],
        ] {
            let (code, _, stderr) = run(&args);
            assert_eq!(code, 2, "{:?}: {stderr}", &args[..2]);
            assert!(
                stderr.contains("error: keyspace names are 1 to 255 bytes"),
                "{stderr}"
            );
            if name.is_empty() {
                assert!(stderr.contains("the name given is empty"), "{stderr}");
            } else {
                assert!(stderr.contains("has 256"), "{stderr}");
            }
        }
    }
    // Refused before anything was opened: no database was created.
    assert!(!db.exists());
    // 255 bytes is fine.
    let longest = "n".repeat(255);
    ok(&["put", path(&db), "--keyspace", &longest, "k", "v"]);
    assert_eq!(names(&db), [longest]);
}

/// A record this database refuses (a key too long for its 512-byte nodes)
/// creates no keyspace for it.
#[test]
fn a_refused_record_creates_no_keyspace() {
    let (dir, db) = temp_db();
    let mut options = turtlekv::Options::default();
    options.node_size_bytes = 512;
    turtlekv::Db::open(&db, options).unwrap().close().unwrap();
    let key = "k".repeat(200);
    let (code, _, stderr) = run(&["put", path(&db), "--keyspace", "ks", &key, "v"]);
    assert_eq!(code, 2, "put: {stderr}");
    let file = dir.path().join("in.jsonl");
    std::fs::write(&file, format!("{{\"key\":\"{key}\",\"value\":\"1\"}}\n")).unwrap();
    let (code, _, stderr) = run(&["load", path(&db), "--keyspace", "ks", path(&file)]);
    assert_eq!(code, 1, "load: {stderr}");
    assert!(stderr.contains("line 1"), "{stderr}");
    assert_eq!(names(&db), Vec::<String>::new());
    // An empty input loads into an empty keyspace, as into an empty
    // database.
    std::fs::write(&file, "").unwrap();
    ok(&["load", path(&db), "--keyspace", "ks", path(&file)]);
    assert_eq!(names(&db), ["ks"]);
    assert_eq!(ok(&["dump", path(&db), "--keyspace", "ks"]), "");
}
