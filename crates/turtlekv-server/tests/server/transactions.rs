//! Atomic commands under concurrency, and WATCH/MULTI/EXEC.

use std::thread;

use redis::{Value, cmd};

use crate::harness::Server;

#[test]
fn concurrent_read_modify_writes_lose_no_update() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--sync", "no"]);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let url = server.url();
            thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                for _ in 0..250 {
                    cmd("INCR").arg("counter").exec(&mut c).unwrap();
                    cmd("APPEND").arg("log").arg("x").exec(&mut c).unwrap();
                }
                cmd("SET")
                    .arg("lock")
                    .arg(t)
                    .arg("NX")
                    .query::<Value>(&mut c)
                    .unwrap()
            })
        })
        .collect();
    let winners = threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .filter(|v| *v == Value::Okay)
        .count();
    assert_eq!(winners, 1, "exactly one SET NX wins");
    let mut c = server.client();
    assert_eq!(
        cmd("GET").arg("counter").query::<i64>(&mut c).unwrap(),
        2000
    );
    assert_eq!(cmd("STRLEN").arg("log").query::<i64>(&mut c).unwrap(), 2000);
}

#[test]
fn multi_exec_runs_atomically_and_watch_aborts_on_change() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--sync", "always"]);
    let mut c1 = server.client();
    let mut c2 = server.client();

    let (a, n, got): (String, i64, String) = redis::pipe()
        .atomic()
        .set("a", "1")
        .incr("n", 5)
        .get("a")
        .query(&mut c1)
        .unwrap();
    assert_eq!((a.as_str(), n, got.as_str()), ("OK", 5, "1"));

    cmd("WATCH").arg("w").exec(&mut c1).unwrap();
    cmd("SET").arg("w").arg("theirs").exec(&mut c2).unwrap();
    cmd("MULTI").exec(&mut c1).unwrap();
    cmd("SET").arg("w").arg("mine").exec(&mut c1).unwrap();
    assert_eq!(cmd("EXEC").query::<Value>(&mut c1).unwrap(), Value::Nil);
    assert_eq!(
        cmd("GET").arg("w").query::<String>(&mut c1).unwrap(),
        "theirs"
    );

    cmd("WATCH").arg("w").exec(&mut c1).unwrap();
    cmd("MULTI").exec(&mut c1).unwrap();
    cmd("SET").arg("w").arg("mine").exec(&mut c1).unwrap();
    let done: Vec<Value> = cmd("EXEC").query(&mut c1).unwrap();
    assert_eq!(done, [Value::Okay]);

    cmd("MULTI").exec(&mut c1).unwrap();
    assert!(cmd("NOSUCH").query::<Value>(&mut c1).is_err());
    assert!(cmd("FLUSHDB").query::<Value>(&mut c1).is_err());
    let aborted = cmd("EXEC").query::<Value>(&mut c1).unwrap_err();
    assert!(aborted.to_string().contains("discarded"), "{aborted}");
    assert!(
        cmd("EXEC").query::<Value>(&mut c1).is_err(),
        "no MULTI left"
    );

    // SELECT inside MULTI applies to the commands after it.
    let _: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("SELECT")
        .arg(2)
        .set("in2", "yes")
        .query(&mut c1)
        .unwrap();
    assert_eq!(
        cmd("GET").arg("in2").query::<String>(&mut c1).unwrap(),
        "yes"
    );
    cmd("SELECT").arg(0).exec(&mut c1).unwrap();
    assert_eq!(cmd("EXISTS").arg("in2").query::<i64>(&mut c1).unwrap(), 0);

    cmd("MULTI").exec(&mut c1).unwrap();
    cmd("SET").arg("discarded").arg("1").exec(&mut c1).unwrap();
    cmd("DISCARD").exec(&mut c1).unwrap();
    assert_eq!(
        cmd("EXISTS")
            .arg("discarded")
            .query::<i64>(&mut c1)
            .unwrap(),
        0
    );
}

#[test]
fn optimistic_watch_loops_from_many_clients_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--sync", "no"]);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let url = server.url();
            thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                for _ in 0..50 {
                    let key = "balance";
                    let _: () = redis::transaction(&mut c, &[key], |c, pipe| {
                        let now: Option<i64> = cmd("GET").arg(key).query(c)?;
                        pipe.set(key, now.unwrap_or(0) + 1).ignore().query(c)
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = server.client();
    assert_eq!(cmd("GET").arg("balance").query::<i64>(&mut c).unwrap(), 200);
}
