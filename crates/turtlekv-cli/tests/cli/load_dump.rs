//! `load` and `dump`: exact round trips of arbitrary bytes, both formats.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::{ok, path, run, temp_db, turtlekv};

type Records = BTreeMap<Vec<u8>, Vec<u8>>;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Binary keys and values from a fixed-seed generator, and text that is
/// hard on both formats.
fn awkward_records() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut records = Vec::new();
    for _ in 0..600 {
        let key: Vec<u8> = (0..1 + next() % 24).map(|_| next() as u8).collect();
        let value: Vec<u8> = (0..next() % 64).map(|_| next() as u8).collect();
        records.push((key, value));
    }
    for (key, value) in [
        ("tab\tcomma, \"quote\"\nnewline\r\n", "ünïcødé ✓"),
        ("nul\0inside", ""),
        ("=spreadsheet", "{\"json\": [1]}"),
        ("k", "last write wins: first"),
        ("k", "last write wins: second"),
    ] {
        records.push((key.as_bytes().to_vec(), value.as_bytes().to_vec()));
    }
    records.push((vec![0xff; 512], vec![0; 1000]));
    records
}

/// The input as JSON Lines, mixing every field encoding.
fn to_json_lines(records: &[(Vec<u8>, Vec<u8>)]) -> String {
    let mut text = String::new();
    for (i, (key, value)) in records.iter().enumerate() {
        let key = match (i % 3, std::str::from_utf8(key)) {
            (0, Ok(t)) => format!("\"key\":{}", serde_json::to_string(t).unwrap()),
            (1, _) => format!("\"key_hex\":\"{}\"", hex(key)),
            _ => format!("\"key_base64\":\"{}\"", STANDARD.encode(key)),
        };
        let value = match i % 2 {
            0 => format!("\"value_base64\":\"{}\"", STANDARD.encode(value)),
            _ => format!("\"value_hex\":\"{}\"", hex(value)),
        };
        text.push_str(&format!("{{{key},{value}}}\n"));
        if i % 100 == 0 {
            text.push('\n'); // blank lines are skipped
        }
    }
    text
}

/// Parses dump output back with an independent decoder.
fn parse_dump(text: &str) -> Records {
    let mut records = Records::new();
    for line in text.lines() {
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(line).unwrap();
        assert_eq!(object.len(), 2, "{line}");
        let field = |base: &str| -> Vec<u8> {
            if let Some(text) = object.get(base) {
                return text.as_str().unwrap().as_bytes().to_vec();
            }
            let encoded = object[&format!("{base}_base64")].as_str().unwrap();
            STANDARD.decode(encoded).unwrap()
        };
        records.insert(field("key"), field("value"));
    }
    records
}

#[test]
fn binary_records_round_trip_through_json_lines_and_csv() {
    let (dir, db) = temp_db();
    let records = awkward_records();
    let expected: Records = records.iter().cloned().collect();
    let input = dir.path().join("in.data"); // no extension: detected by content
    std::fs::write(&input, to_json_lines(&records)).unwrap();

    let loaded = ok(&["load", path(&db), path(&input)]);
    assert!(
        loaded.starts_with(&format!("loaded {} records", records.len())),
        "{loaded}"
    );
    let dump = ok(&["dump", path(&db)]);
    assert_eq!(parse_dump(&dump), expected);
    // Text stays readable; only what is not UTF-8 is base64.
    assert!(dump.contains(r#"{"key":"k","value":"last write wins: second"}"#));
    assert!(dump.contains(r#""key":"nul\u0000inside""#));

    // dump | load gives the same database: JSON Lines, through stdin.
    let copy = dir.path().join("copy-jsonl");
    turtlekv()
        .args(["load", path(&copy), "-"])
        .write_stdin(dump.clone())
        .assert()
        .success();
    assert_eq!(ok(&["dump", path(&copy)]), dump);

    // CSV, to a file and back.
    let csv = dir.path().join("out.csv");
    let said = ok(&["dump", path(&db), "--format", "csv", "-o", path(&csv)]);
    assert_eq!(
        said,
        format!("dumped {} records to {}\n", expected.len(), path(&csv))
    );
    let csv_text = std::fs::read(&csv).unwrap();
    assert!(csv_text.starts_with(b"key_base64,value_base64\n"));
    let copy = dir.path().join("copy-csv");
    ok(&["load", path(&copy), path(&csv)]);
    assert_eq!(ok(&["dump", path(&copy)]), dump);

    // Forced hex, both formats.
    for format in ["jsonl", "csv"] {
        let file = dir.path().join(format!("hex.{format}"));
        ok(&[
            "dump",
            path(&db),
            "--hex",
            "--format",
            format,
            "-o",
            path(&file),
        ]);
        let copy = dir.path().join(format!("copy-hex-{format}"));
        ok(&["load", path(&copy), path(&file)]);
        assert_eq!(ok(&["dump", path(&copy)]), dump, "{format}");
    }
}

#[test]
fn text_csv_written_by_hand_loads_and_dumps_as_text() {
    let (dir, db) = temp_db();
    let input = dir.path().join("fruit.csv");
    std::fs::write(
        &input,
        "value,key\nred,apple\n\"yellow, curved\",banana\n\"two\nlines\",cherry\n,empty\n",
    )
    .unwrap();
    ok(&["load", path(&db), path(&input)]);
    assert_eq!(ok(&["get", path(&db), "banana"]), "yellow, curved\n");
    assert_eq!(ok(&["get", path(&db), "empty"]), "\n");
    let csv = ok(&["dump", path(&db), "--format", "csv"]);
    assert_eq!(
        csv,
        "key,value\napple,red\nbanana,\"yellow, curved\"\ncherry,\"two\nlines\"\nempty,\n"
    );
}

#[test]
fn bad_input_is_reported_with_its_line() {
    let (dir, db) = temp_db();
    // A missing file creates no database.
    let (code, _, stderr) = run(&["load", path(&db), path(&dir.path().join("nope.jsonl"))]);
    assert_eq!(code, 1);
    assert!(stderr.contains("nope.jsonl"), "{stderr}");
    assert!(!db.exists());
    // Nor does a file whose first record is bad, or a CSV file without
    // its header (the database is created only once the first record is
    // known good).
    for (name, text) in [
        ("bad.jsonl", "{\"key\":\"\",\"value\":\"x\"}\n"),
        ("notes.txt", "some notes, not records\n"),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        let (code, _, stderr) = run(&["load", path(&db), path(&file)]);
        assert_eq!(code, 1, "{name}: {stderr}");
        assert!(!db.exists(), "{name}: {stderr}");
    }

    for (text, expected) in [
        (
            "{\"key\":\"a\",\"value\":\"1\"}\n{\"key_hex\":\"zz\",\"value\":\"\"}\n",
            "line 2",
        ),
        ("{\"key\":\"a\"}\n", "no value field"),
        ("{\"key\":\"\",\"value\":\"x\"}\n", "keys must not be empty"),
        (
            "{\"key\":\"a\",\"value\":\"1\"}\nnot json\n",
            "line 2: not a JSON object",
        ),
    ] {
        let input = dir.path().join("bad.jsonl");
        std::fs::write(&input, text).unwrap();
        let (code, _, stderr) = run(&["load", path(&db), path(&input)]);
        assert_eq!(code, 1, "{text}");
        assert!(stderr.contains(expected), "{text}: {stderr}");
        assert!(
            stderr.contains("records were loaded before the error"),
            "{stderr}"
        );
    }
    let input = dir.path().join("bad.csv");
    std::fs::write(&input, "apple,red\n").unwrap();
    let (code, _, stderr) = run(&["load", path(&db), path(&input)]);
    assert_eq!(code, 1);
    assert!(stderr.contains("header"), "{stderr}");
    std::fs::write(&input, "key_hex,value\n00,a\n0g,b\n").unwrap();
    let (code, _, stderr) = run(&["load", path(&db), path(&input)]);
    assert_eq!(code, 1);
    assert!(stderr.contains("line 3: key column"), "{stderr}");
}
