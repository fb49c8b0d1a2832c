//! A child process writing is killed with SIGKILL at random moments; after
//! each kill, every acknowledged write is present and the state is a prefix
//! of the history with every batch whole.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use turtlekv::{Db, Options, WriteBatch, WriteOptions};

const DIR_VAR: &str = "TURTLEKV_KILL9_DIR";
const START_VAR: &str = "TURTLEKV_KILL9_START";

fn key(prefix: char, i: u64) -> Vec<u8> {
    format!("{prefix}{i:010}").into_bytes()
}

/// The child: writes batch after batch and reports each acknowledgement.
/// Every other batch is synced; `kill -9` must lose neither kind.
#[test]
fn kill9_child_writer() {
    let (Ok(dir), Ok(start)) = (std::env::var(DIR_VAR), std::env::var(START_VAR)) else {
        return;
    };
    let db = Db::open(&dir, Options::default()).unwrap();
    let mut stdout = std::io::stdout().lock();
    for i in start.parse::<u64>().unwrap()..u64::MAX {
        let mut batch = WriteBatch::new();
        batch
            .put(key('k', i), i.to_be_bytes())
            .put(key('m', i), vec![i as u8; 300]);
        db.write(batch, &WriteOptions { sync: i % 2 == 0 }).unwrap();
        writeln!(stdout, "ack {i}").unwrap();
        stdout.flush().unwrap();
    }
}

/// Runs the child until it has acknowledged `stop_after` more batches past
/// `start`, kills it with SIGKILL, and returns the highest acknowledged index.
fn run_child_and_kill(dir: &std::path::Path, start: u64, stop_after: u64) -> Option<u64> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "kill9_child_writer",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DIR_VAR, dir)
        .env(START_VAR, start.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut last_ack = None;
    // The pipe stays open until the child is dead: a closed pipe would make
    // the child panic on its next write and close the database cleanly.
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while {
        line.clear();
        reader.read_line(&mut line).unwrap() > 0
    } {
        if let Some(i) = line.trim_end().strip_prefix("ack ") {
            let i: u64 = i.parse().unwrap();
            last_ack = Some(i);
            if i + 1 >= start + stop_after {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL, to this child's pid only
    let status = child.wait().unwrap();
    drop(reader);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(9),
        "the child must die by SIGKILL, not on its own"
    );
    last_ack
}

/// The number of whole batches present; panics on a hole or a half batch.
fn verify_prefix(db: &Db) -> u64 {
    let mut n = 0;
    for kv in db.prefix(b"k") {
        let (k, v) = kv.unwrap();
        assert_eq!(
            &k[..],
            &key('k', n)[..],
            "hole in the history before batch {n}"
        );
        assert_eq!(&v[..], &n.to_be_bytes());
        let m = db.get(key('m', n)).unwrap().expect("half a batch");
        assert_eq!(&m[..], &vec![n as u8; 300][..]);
        n += 1;
    }
    assert_eq!(db.prefix(b"m").count() as u64, n, "half a batch");
    n
}

#[test]
fn kill9_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut next = 0u64;
    let mut rng = 0x9E37_79B9u64;
    for cycle in 0..8 {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let stop_after = 1 + (rng >> 33) % 400;
        let last_ack = run_child_and_kill(dir.path(), next, stop_after);
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let present = verify_prefix(&db);
        if let Some(last) = last_ack {
            assert!(
                present > last,
                "cycle {cycle}: acknowledged batch {last} lost ({present} present)"
            );
        }
        next = present;
    }
    assert!(next > 8, "the children wrote almost nothing: {next}");
}
