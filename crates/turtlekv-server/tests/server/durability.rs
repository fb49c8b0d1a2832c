//! What survives `kill -9`, SIGTERM and SHUTDOWN.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use redis::cmd;

use crate::harness::Server;

/// Acknowledged writes of one client: its keys and its counter's value.
#[derive(Debug, Default)]
struct Acked {
    keys: Vec<String>,
    counter: i64,
    pairs: usize,
}

/// Writers that record what the server acknowledged until told to stop.
fn start_writers(server: &Server, stop: &Arc<AtomicBool>) -> Vec<thread::JoinHandle<Acked>> {
    (0..8)
        .map(|t| {
            let url = server.url();
            let stop = stop.clone();
            thread::spawn(move || {
                let mut acked = Acked::default();
                let Ok(mut c) = redis::Client::open(url).unwrap().get_connection() else {
                    return acked;
                };
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let key = format!("w{t}:{i}");
                    if cmd("SET").arg(&key).arg(i).exec(&mut c).is_err() {
                        break;
                    }
                    acked.keys.push(key);
                    match cmd("INCR").arg(format!("counter{t}")).query::<i64>(&mut c) {
                        Ok(n) => acked.counter = n,
                        Err(_) => break,
                    }
                    let pair = [
                        format!("p{t}:{i}:a"),
                        i.to_string(),
                        format!("p{t}:{i}:b"),
                        i.to_string(),
                    ];
                    if cmd("MSET").arg(&pair).exec(&mut c).is_err() {
                        break;
                    }
                    acked.pairs += 1;
                }
                acked
            })
        })
        .collect()
}

fn check_acknowledged(server: &Server, writers: Vec<thread::JoinHandle<Acked>>) -> usize {
    let mut c = server.client();
    let mut total = 0;
    for (t, w) in writers.into_iter().enumerate() {
        let acked = w.join().unwrap();
        total += acked.keys.len();
        for chunk in acked.keys.chunks(500) {
            let values: Vec<Option<i64>> = cmd("MGET").arg(chunk).query(&mut c).unwrap();
            for (key, value) in chunk.iter().zip(values) {
                let i: i64 = key.rsplit(':').next().unwrap().parse().unwrap();
                assert_eq!(value, Some(i), "acknowledged {key} lost");
            }
        }
        let counter: i64 = cmd("GET")
            .arg(format!("counter{t}"))
            .query(&mut c)
            .unwrap_or(0);
        // A write in flight at the kill may have landed without its ack.
        assert!(
            counter >= acked.counter,
            "counter{t}: {counter} < {}",
            acked.counter
        );
        for i in 0..acked.pairs + 1 {
            let both: Vec<Option<String>> = cmd("MGET")
                .arg(format!("p{t}:{i}:a"))
                .arg(format!("p{t}:{i}:b"))
                .query(&mut c)
                .unwrap();
            let expected_present = i < acked.pairs;
            assert!(
                both[0].is_some() == both[1].is_some(),
                "MSET {t}:{i} half applied"
            );
            if expected_present {
                assert!(both[0].is_some(), "acknowledged MSET {t}:{i} lost");
            }
        }
    }
    total
}

#[test]
fn kill9_with_sync_always_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--sync", "always"]);
    let stop = Arc::new(AtomicBool::new(false));
    let writers = start_writers(&server, &stop);
    thread::sleep(Duration::from_millis(1500));
    server.kill9();
    stop.store(true, Ordering::Relaxed);
    let server = Server::start(dir.path(), &["--sync", "always"]);
    let total = check_acknowledged(&server, writers);
    assert!(
        total > 100,
        "the writers wrote too little to test anything: {total}"
    );
}

#[test]
fn kill9_with_sync_everysec_keeps_writes_older_than_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--sync", "everysec"]);
    let stop = Arc::new(AtomicBool::new(false));
    let writers = start_writers(&server, &stop);
    thread::sleep(Duration::from_millis(800));
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<Acked> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    // Past the next background sync.
    thread::sleep(Duration::from_millis(1500));
    server.kill9();
    let server = Server::start(dir.path(), &[]);
    let replay: Vec<_> = acked
        .into_iter()
        .map(|a| thread::spawn(move || a))
        .collect();
    assert!(check_acknowledged(&server, replay) > 100);
}

#[test]
fn sigterm_and_shutdown_close_the_database_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--sync", "no"]);
    let mut c = server.client();
    for i in 0..1000 {
        cmd("SET").arg(format!("k{i}")).arg(i).exec(&mut c).unwrap();
    }
    drop(c);
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    // Closed: the engine opens it at once (no lock held) and finds it all.
    {
        let db = turtlekv::Db::open(dir.path(), turtlekv::Options::new()).unwrap();
        assert_eq!(db.get("k999").unwrap().as_deref(), Some(&b"999"[..]));
        db.close().unwrap();
    }
    let mut server = Server::start(dir.path(), &["--sync", "no"]);
    let mut c = server.client();
    assert_eq!(cmd("GET").arg("k0").query::<i64>(&mut c).unwrap(), 0);
    cmd("SET")
        .arg("after")
        .arg("shutdown")
        .exec(&mut c)
        .unwrap();
    // SHUTDOWN closes the connection without a reply.
    assert!(cmd("SHUTDOWN").query::<redis::Value>(&mut c).is_err());
    let status = server.wait_exit();
    assert!(status.success(), "{status:?}");
    let db = turtlekv::Db::open(dir.path(), turtlekv::Options::new()).unwrap();
    assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"shutdown"[..]));
    db.close().unwrap();
}

#[test]
fn a_backup_of_a_running_server_serves_as_a_standby() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--sync", "always"]);
    let mut c = server.client();
    for i in 0..500 {
        cmd("SET").arg(format!("k{i}")).arg(i).exec(&mut c).unwrap();
    }
    // What `turtlekv backup DIR DEST` does: the running server copies
    // itself through its control socket, consistently, while it serves.
    let standby_dir = tempfile::tempdir().unwrap();
    let dest = standby_dir.path().join("copy");
    turtlekv::Db::backup_at(dir.path(), &dest).unwrap();
    cmd("SET")
        .arg("after-backup")
        .arg("x")
        .exec(&mut c)
        .unwrap();

    let standby = Server::start(&dest, &[]);
    let mut s = standby.client();
    let values: Vec<Option<i64>> = cmd("MGET").arg(&["k0", "k499"]).query(&mut s).unwrap();
    assert_eq!(values, [Some(0), Some(499)]);
    // A copy is of its moment: later writes are not in it.
    assert_eq!(
        cmd("EXISTS")
            .arg("after-backup")
            .query::<i64>(&mut s)
            .unwrap(),
        0
    );
}
