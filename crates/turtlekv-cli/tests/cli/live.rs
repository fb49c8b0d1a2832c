//! Commands on a database another process holds open and writes to:
//! `backup` asks the holder through its control socket, `--read-only`
//! reads the last checkpoint and WAL tail without the lock.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use turtlekv::{Db, Options, WriteBatch, WriteOptions};

use crate::{ok, path, run};

const DB_VAR: &str = "TURTLEKV_CLI_HOLDER_DB";
const STOP_VAR: &str = "TURTLEKV_CLI_HOLDER_STOP";
/// The holder keeps the newest `WINDOW` keys of its sequence, in both
/// keyspaces.
const WINDOW: u64 = 10;

fn key(i: u64) -> String {
    format!("k{i:08}")
}

/// The holder: creates the database with tiny pages and MemTables (a
/// checkpoint every few dozen writes), then writes until the stop file
/// appears, and closes. Step `i` is one batch: `k<i>` in the default
/// keyspace and in `ks`, `progress` = i, and `k<i - WINDOW>` deleted from
/// both. Every fifth is synced. It reports each acknowledged step.
#[test]
fn live_holder_child() {
    let (Ok(dir), Ok(stop)) = (std::env::var(DB_VAR), std::env::var(STOP_VAR)) else {
        return;
    };
    let mut options = Options::default();
    options.leaf_size_bytes = 16 * 1024;
    options.node_size_bytes = 1024;
    options.checkpoint_distance_bytes = 4 * 1024;
    options.wal_segment_size_bytes = 64 * 1024;
    let db = Db::open(&dir, options).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let mut stdout = std::io::stdout().lock();
    let mut i = 0;
    while !Path::new(&stop).exists() {
        i += 1;
        let mut batch = WriteBatch::new();
        batch.put(key(i), i.to_string()).put_in(&ks, key(i), "ks");
        batch.put("progress", i.to_string());
        if i > WINDOW {
            batch
                .delete(key(i - WINDOW))
                .delete_in(&ks, key(i - WINDOW));
        }
        db.write(batch, &WriteOptions::new().sync(i % 5 == 0))
            .unwrap();
        writeln!(stdout, "ack {i}").unwrap();
        stdout.flush().unwrap();
    }
    db.close().unwrap();
}

/// The holder process, and the highest step it acknowledged so far.
struct Holder {
    child: Child,
    acked: Arc<AtomicU64>,
    stop: PathBuf,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Holder {
    fn start(db: &Path, stop: PathBuf) -> Holder {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["live::live_holder_child", "--exact", "--nocapture"])
            .env(DB_VAR, db)
            .env(STOP_VAR, &stop)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let acked = Arc::new(AtomicU64::new(0));
        let out = BufReader::new(child.stdout.take().unwrap());
        let seen = acked.clone();
        let reader = std::thread::spawn(move || {
            for line in out.lines() {
                if let Some(i) = line.unwrap().strip_prefix("ack ") {
                    seen.store(i.parse().unwrap(), Ordering::Release);
                }
            }
        });
        Holder {
            child,
            acked,
            stop,
            reader: Some(reader),
        }
    }

    fn wait_for(&self, step: u64) {
        while self.acked.load(Ordering::Acquire) < step {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    fn acked(&self) -> u64 {
        self.acked.load(Ordering::Acquire)
    }

    /// Asks the holder to close the database and waits for it.
    fn stop(mut self) {
        std::fs::write(&self.stop, b"").unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the holder failed: {status}");
        self.reader.take().unwrap().join().unwrap();
    }
}

/// Runs a `--read-only` command until it is not refused because the
/// holder committed meanwhile (exit code 8); returns its output.
fn read_only(args: &[&str]) -> String {
    for _ in 0..50 {
        let (code, stdout, stderr) = run(args);
        match code {
            0 => return stdout,
            8 => assert!(stderr.contains("changed while reading"), "{stderr}"),
            _ => panic!("turtlekv {args:?} failed with {code}:\n{stderr}"),
        }
    }
    panic!("turtlekv {args:?} was refused 50 times in a row");
}

/// Checks a `scan` output of one keyspace (`key<TAB>value` lines) holds
/// the holder's keys of exactly the step `p`: `k<p - WINDOW + 1>..=k<p>`.
fn check_window(scan: &str, p: u64) {
    let keys: Vec<&str> = scan
        .lines()
        .filter_map(|line| line.split('\t').next())
        .filter(|k| k.starts_with('k'))
        .collect();
    let want: Vec<String> = (p.saturating_sub(WINDOW - 1).max(1)..=p).map(key).collect();
    assert_eq!(keys, want, "at step {p}");
}

#[test]
fn backup_and_read_only_commands_work_while_another_process_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let holder = Holder::start(&db, dir.path().join("stop"));
    holder.wait_for(300);
    let socket = db.join(turtlekv::CONTROL_SOCKET_NAME);
    assert!(socket.exists(), "the holder serves its control socket");

    // Writing commands are refused; the message says what works.
    let (code, _, stderr) = run(&["put", path(&db), "x", "y"]);
    assert_eq!(code, 5, "{stderr}");
    assert!(stderr.contains("--read-only") && stderr.contains("turtlekv backup"));

    // A backup through the holder, while it writes.
    let before = holder.acked();
    let backup = dir.path().join("backup");
    let said = ok(&["backup", path(&db), path(&backup)]);
    let after = holder.acked();
    assert!(said.starts_with("backed up"), "{said}");
    // Again into the same place: refused as a bad argument.
    let (code, _, stderr) = run(&["backup", path(&db), path(&backup)]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not an empty directory"), "{stderr}");

    // Reading commands with --read-only, while it writes.
    // It sees every write the holder acknowledged before it opened.
    let got = read_only(&["get", path(&db), "--read-only", "progress"]);
    assert!(got.trim().parse::<u64>().unwrap() >= after, "{got}");
    let scan = read_only(&["scan", path(&db), "--read-only", "--keyspace", "ks"]);
    assert!(scan.lines().count() as u64 >= WINDOW, "{scan}");
    let dump = read_only(&["dump", path(&db), "--read-only"]);
    assert!(dump.contains("\"progress\""), "{dump}");
    let stats = read_only(&["stats", path(&db), "--read-only", "--json"]);
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert!(stats["keyspaces"].is_array(), "{stats}");
    read_only(&["check", path(&db), "--read-only"]);
    // Without --read-only they are refused.
    assert_eq!(run(&["get", path(&db), "progress"]).0, 5);

    holder.stop();
    assert!(!socket.exists(), "the socket goes with the holder");

    // The backup holds the database at one step of the holder, in both
    // keyspaces, no earlier than what was acknowledged before it began.
    ok(&["check", path(&backup)]);
    let progress: u64 = ok(&["get", path(&backup), "progress"])
        .trim()
        .parse()
        .unwrap();
    assert!(
        (before..=after).contains(&progress),
        "backup at step {progress}, acknowledged {before} before and {after} after"
    );
    check_window(&ok(&["scan", path(&backup)]), progress);
    check_window(&ok(&["scan", path(&backup), "--keyspace", "ks"]), progress);

    // A database no process holds is backed up by the command itself.
    let second = dir.path().join("second");
    ok(&["backup", path(&db), path(&second)]);
    let last: u64 = ok(&["get", path(&db), "progress"]).trim().parse().unwrap();
    assert_eq!(
        ok(&["get", path(&second), "progress"]).trim(),
        last.to_string()
    );
}
