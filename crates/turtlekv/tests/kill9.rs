//! A child process writing is killed with SIGKILL at random moments; after
//! each kill, every acknowledged write is present and the state is a prefix
//! of the history with every batch whole, across keyspaces, and with every
//! drop of a keyspace all or nothing and its keys deleted after the
//! reopen.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use turtlekv::{Db, Options, WriteBatch, WriteOptions};

const DIR_VAR: &str = "TURTLEKV_KILL9_DIR";
const START_VAR: &str = "TURTLEKV_KILL9_START";

fn key(prefix: char, i: u64) -> Vec<u8> {
    format!("{prefix}{i:010}").into_bytes()
}

/// Batches between two drops of the keyspace `tmp`.
const TMP_EVERY: u64 = 50;

/// The child: writes batch after batch and reports each acknowledgement.
/// Each batch puts a key in the default keyspace, one in the keyspace
/// `ks` and one in the keyspace `tmp`, which is dropped (with its keys,
/// which the cleaner then deletes) and created again before every
/// `TMP_EVERY`-th batch. Every other batch is synced; `kill -9` must lose
/// neither kind.
#[test]
fn kill9_child_writer() {
    let (Ok(dir), Ok(start)) = (std::env::var(DIR_VAR), std::env::var(START_VAR)) else {
        return;
    };
    let db = Db::open(&dir, Options::default()).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let mut tmp = None;
    let mut stdout = std::io::stdout().lock();
    for i in start.parse::<u64>().unwrap()..u64::MAX {
        if i % TMP_EVERY == 0 && db.keyspace_names().unwrap().contains(&b"tmp".to_vec()) {
            tmp = None;
            db.drop_keyspace("tmp").unwrap();
        }
        let tmp = match &mut tmp {
            Some(tmp) => tmp,
            None => tmp.insert(db.keyspace("tmp").unwrap()),
        };
        let mut batch = WriteBatch::new();
        batch
            .put(key('k', i), i.to_be_bytes())
            .put_in(&ks, key('m', i), vec![i as u8; 300])
            .put_in(tmp, key('t', i), i.to_le_bytes());
        db.write(batch, &WriteOptions::new().sync(i % 2 == 0))
            .unwrap();
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

/// The number of whole batches present; panics on a hole, a half batch
/// or a drop of `tmp` that is not all or nothing. Then waits for the
/// cleaner to delete the keys of the drops it found and checks that a
/// checkpoint leaves only the live keys and the catalog's in the tree.
fn verify_prefix(db: &Db) -> u64 {
    let ks = db.keyspace("ks").unwrap();
    let mut n = 0;
    for kv in db.prefix(b"k") {
        let (k, v) = kv.unwrap();
        assert_eq!(
            &k[..],
            &key('k', n)[..],
            "hole in the history before batch {n}"
        );
        assert_eq!(&v[..], &n.to_be_bytes());
        let m = ks.get(key('m', n)).unwrap().expect("half a batch");
        assert_eq!(&m[..], &vec![n as u8; 300][..]);
        n += 1;
    }
    assert_eq!(ks.prefix(b"m").count() as u64, n, "half a batch");
    assert_eq!(ks.range::<&[u8], _>(..).count() as u64, n);
    // `tmp` holds the batches since its last creation, before batch
    // `first`; when batch `n` would have dropped it first, the kill may
    // have come before the drop, between the drop and the creation, or
    // after both.
    let first = n.saturating_sub(1) / TMP_EVERY * TMP_EVERY;
    let names = db.keyspace_names().unwrap();
    let tmp_keys = if names.contains(&b"tmp".to_vec()) {
        let tmp = db.keyspace("tmp").unwrap();
        let found: Vec<u64> = tmp
            .range::<&[u8], _>(..)
            .map(|kv| {
                let (k, v) = kv.unwrap();
                let i = u64::from_le_bytes(v[..].try_into().unwrap());
                assert_eq!(&k[..], &key('t', i)[..]);
                i
            })
            .collect();
        let whole: Vec<u64> = (first..n).collect();
        assert!(
            found == whole || (n.is_multiple_of(TMP_EVERY) && found.is_empty()),
            "{n} batches: tmp holds {found:?}, not batches {first}..{n}"
        );
        found.len() as u64
    } else {
        assert!(
            n.is_multiple_of(TMP_EVERY),
            "{n} batches: tmp is missing in the middle of its batches"
        );
        0
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while db.stats().keyspaces_dropping > 0 {
        assert!(Instant::now() < deadline, "the cleaner did not finish");
        std::thread::sleep(Duration::from_millis(5));
    }
    db.checkpoint_now().unwrap();
    // Catalog: a name per live keyspace and the next id.
    let catalog = names.len() as u64 + 1;
    assert_eq!(
        db.check().unwrap().tree_keys,
        2 * n + tmp_keys + catalog,
        "a dropped tmp's keys remain after cleaning"
    );
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
