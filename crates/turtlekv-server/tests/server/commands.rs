//! Each command's replies and errors, as a Redis client sees them.

use std::collections::BTreeSet;

use redis::{Commands, Value, cmd};

use crate::harness::Server;

fn error_of(result: redis::RedisResult<Value>) -> String {
    match result {
        Err(e) => e.to_string(),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}

#[test]
fn string_commands_behave_as_in_redis() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--sync", "no"]);
    let mut c = server.client();
    let q = |c: &mut redis::Connection, args: &[&str]| -> redis::RedisResult<Value> {
        let mut command = cmd(args[0]);
        for a in &args[1..] {
            command.arg(*a);
        }
        command.query(c)
    };
    assert_eq!(
        q(&mut c, &["PING"]).unwrap(),
        Value::SimpleString("PONG".into())
    );
    assert_eq!(
        q(&mut c, &["ECHO", "hi"]).unwrap(),
        Value::BulkString(b"hi".to_vec())
    );
    assert_eq!(q(&mut c, &["SET", "k", "v1"]).unwrap(), Value::Okay);
    assert_eq!(
        q(&mut c, &["GET", "k"]).unwrap(),
        Value::BulkString(b"v1".to_vec())
    );
    assert_eq!(q(&mut c, &["GET", "missing"]).unwrap(), Value::Nil);
    assert_eq!(
        q(&mut c, &["GETSET", "k", "v2"]).unwrap(),
        Value::BulkString(b"v1".to_vec())
    );
    assert_eq!(
        q(&mut c, &["SET", "k", "v3", "GET"]).unwrap(),
        Value::BulkString(b"v2".to_vec())
    );
    assert_eq!(q(&mut c, &["SET", "k", "x", "NX"]).unwrap(), Value::Nil);
    assert_eq!(q(&mut c, &["SET", "new", "x", "XX"]).unwrap(), Value::Nil);
    assert_eq!(q(&mut c, &["SET", "new", "x", "NX"]).unwrap(), Value::Okay);
    assert_eq!(q(&mut c, &["SET", "new", "y", "XX"]).unwrap(), Value::Okay);
    assert_eq!(q(&mut c, &["SETNX", "new", "z"]).unwrap(), Value::Int(0));
    assert_eq!(q(&mut c, &["APPEND", "new", "yy"]).unwrap(), Value::Int(3));
    assert_eq!(q(&mut c, &["STRLEN", "new"]).unwrap(), Value::Int(3));
    assert_eq!(q(&mut c, &["STRLEN", "missing"]).unwrap(), Value::Int(0));
    assert_eq!(q(&mut c, &["INCR", "n"]).unwrap(), Value::Int(1));
    assert_eq!(q(&mut c, &["INCRBY", "n", "41"]).unwrap(), Value::Int(42));
    assert_eq!(q(&mut c, &["DECR", "n"]).unwrap(), Value::Int(41));
    assert_eq!(q(&mut c, &["DECRBY", "n", "-9"]).unwrap(), Value::Int(50));
    assert_eq!(
        q(&mut c, &["GET", "n"]).unwrap(),
        Value::BulkString(b"50".to_vec())
    );
    assert_eq!(
        q(&mut c, &["MSET", "a", "1", "b", "2", "c", "3"]).unwrap(),
        Value::Okay
    );
    assert_eq!(
        q(&mut c, &["MGET", "a", "nope", "c"]).unwrap(),
        Value::Array(vec![
            Value::BulkString(b"1".to_vec()),
            Value::Nil,
            Value::BulkString(b"3".to_vec())
        ])
    );
    assert_eq!(
        q(&mut c, &["MSETNX", "c", "9", "d", "9"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        q(&mut c, &["EXISTS", "a", "a", "d", "b"]).unwrap(),
        Value::Int(3)
    );
    assert_eq!(
        q(&mut c, &["DEL", "a", "b", "a", "nope"]).unwrap(),
        Value::Int(2)
    );
    assert_eq!(
        q(&mut c, &["GETDEL", "c"]).unwrap(),
        Value::BulkString(b"3".to_vec())
    );
    assert_eq!(
        q(&mut c, &["TYPE", "new"]).unwrap(),
        Value::SimpleString("string".into())
    );
    assert_eq!(q(&mut c, &["TTL", "new"]).unwrap(), Value::Int(-1));
    assert_eq!(q(&mut c, &["TTL", "c"]).unwrap(), Value::Int(-2));
    // k, new, n remain.
    assert_eq!(q(&mut c, &["DBSIZE"]).unwrap(), Value::Int(3));

    let errors = [
        (&["NOSUCH", "x"][..], "unknown command 'NOSUCH'"),
        (&["GET"][..], "wrong number of arguments for 'get' command"),
        (
            &["MSET", "a", "1", "b"][..],
            "wrong number of arguments for 'mset' command",
        ),
        (&["INCR", "new"][..], "not an integer"),
        (&["INCRBY", "n", "1x"][..], "not an integer"),
        (
            &["SET", "x", "1", "EX", "10"][..],
            "does not support key expiry",
        ),
        (&["SET", "x", "1", "NX", "XX"][..], "syntax error"),
        (&["SET", "", "1"][..], "empty keys"),
        (&["SELECT", "99"][..], "out of range"),
    ];
    for (args, expected) in errors {
        let message = error_of(q(&mut c, args));
        assert!(message.contains(expected), "{args:?}: {message}");
    }
    q(&mut c, &["SET", "max", &i64::MAX.to_string()]).unwrap();
    assert!(error_of(q(&mut c, &["INCR", "max"])).contains("overflow"));
    let long_key = "k".repeat(600);
    assert!(error_of(q(&mut c, &["SET", &long_key, "v"])).contains("longer than the limit"));
    // The connection is still usable after every error.
    assert_eq!(
        q(&mut c, &["GET", "new"]).unwrap(),
        Value::BulkString(b"yyy".to_vec())
    );
}

#[test]
fn select_reaches_separate_keyspaces_and_flush_clears_one_or_all() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--sync", "no"]);
    let mut c = server.client();
    cmd("SET").arg("k").arg("zero").exec(&mut c).unwrap();
    cmd("SELECT").arg(5).exec(&mut c).unwrap();
    assert_eq!(
        cmd("GET").arg("k").query::<Option<String>>(&mut c).unwrap(),
        None
    );
    cmd("MSET")
        .arg(&["k", "five", "j", "five"])
        .exec(&mut c)
        .unwrap();
    cmd("FLUSHDB").exec(&mut c).unwrap();
    assert_eq!(cmd("DBSIZE").query::<i64>(&mut c).unwrap(), 0);
    cmd("SET").arg("k").arg("five").exec(&mut c).unwrap();
    cmd("SELECT").arg(0).exec(&mut c).unwrap();
    assert_eq!(cmd("GET").arg("k").query::<String>(&mut c).unwrap(), "zero");
    let info: String = cmd("INFO").arg("keyspace").query(&mut c).unwrap();
    assert!(
        info.contains("db0:keys=1") && info.contains("db5:keys=1"),
        "{info}"
    );
    cmd("FLUSHALL").exec(&mut c).unwrap();
    assert_eq!(cmd("DBSIZE").query::<i64>(&mut c).unwrap(), 0);
    cmd("SELECT").arg(5).exec(&mut c).unwrap();
    assert_eq!(cmd("DBSIZE").query::<i64>(&mut c).unwrap(), 0);
    // The largest key survives neither.
    let biggest = vec![0xffu8; 512];
    cmd("SET").arg(&biggest).arg("v").exec(&mut c).unwrap();
    cmd("FLUSHDB").exec(&mut c).unwrap();
    assert_eq!(cmd("EXISTS").arg(&biggest).query::<i64>(&mut c).unwrap(), 0);
}

#[test]
fn scan_returns_every_key_exactly_once_in_key_order() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--sync", "no"]);
    let mut c = server.client();
    let mut expected = BTreeSet::new();
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        let key = format!("{}:{i:04}", if i % 3 == 0 { "user" } else { "item" });
        pipe.set(&key, i).ignore();
        expected.insert(key);
    }
    pipe.exec(&mut c).unwrap();

    let scan_all = |c: &mut redis::Connection, pattern: &str| {
        let mut cursor = 0u64;
        let mut keys = Vec::new();
        loop {
            let (next, batch): (u64, Vec<String>) = cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(37)
                .query(c)
                .unwrap();
            keys.extend(batch);
            if next == 0 {
                return keys;
            }
            cursor = next;
        }
    };
    let all = scan_all(&mut c, "*");
    assert_eq!(all, expected.iter().cloned().collect::<Vec<_>>());
    let users = scan_all(&mut c, "user:*");
    let expected_users: Vec<String> = expected
        .iter()
        .filter(|k| k.starts_with("user:"))
        .cloned()
        .collect();
    assert_eq!(users, expected_users);
    let nines = scan_all(&mut c, "*9");
    assert_eq!(
        nines.len(),
        expected.iter().filter(|k| k.ends_with('9')).count()
    );
    // The redis crate's own iterator reads the same cursors.
    let via_iter: BTreeSet<String> = c
        .scan_match::<_, String>("item:*")
        .unwrap()
        .map(|k| k.unwrap())
        .collect();
    assert_eq!(via_iter.len(), 1000 - expected_users.len());
    let mut keys: Vec<String> = cmd("KEYS").arg("user:000*").query(&mut c).unwrap();
    keys.sort();
    assert_eq!(keys, ["user:0000", "user:0003", "user:0006", "user:0009"]);
    let bad = cmd("SCAN").arg(123_456_789).query::<Value>(&mut c);
    assert!(error_of(bad).contains("invalid cursor"));
}

#[test]
fn auth_hello_command_and_config_answer_clients() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--requirepass", "s3cret"]);
    let mut c = server.client();
    assert!(error_of(cmd("GET").arg("k").query(&mut c)).contains("NOAUTH"));
    assert!(error_of(cmd("AUTH").arg("wrong").query(&mut c)).contains("WRONGPASS"));
    assert_eq!(
        cmd("AUTH").arg("s3cret").query::<Value>(&mut c).unwrap(),
        Value::Okay
    );
    cmd("SET").arg("k").arg("v").exec(&mut c).unwrap();

    let mut authed = redis::Client::open(format!("redis://:s3cret@{}/", server.addr))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(
        cmd("GET").arg("k").query::<String>(&mut authed).unwrap(),
        "v"
    );

    let mut c3 = server.client();
    let hello = cmd("HELLO")
        .arg(3)
        .arg("AUTH")
        .arg("default")
        .arg("s3cret")
        .query::<Value>(&mut c3)
        .unwrap();
    let Value::Map(fields) = hello else {
        panic!("HELLO 3 answers a map, got {hello:?}")
    };
    assert!(fields.contains(&(Value::BulkString(b"proto".to_vec()), Value::Int(3))));
    // RESP3 null.
    assert_eq!(
        cmd("GET").arg("missing").query::<Value>(&mut c3).unwrap(),
        Value::Nil
    );

    let count: i64 = cmd("COMMAND").arg("COUNT").query(&mut c).unwrap();
    let all: Vec<Value> = cmd("COMMAND").query(&mut c).unwrap();
    assert_eq!(usize::try_from(count).unwrap(), all.len());
    let config: Vec<String> = cmd("CONFIG")
        .arg("GET")
        .arg("append*")
        .query(&mut c)
        .unwrap();
    assert_eq!(config, ["appendonly", "yes", "appendfsync", "everysec"]);
}

#[test]
fn a_public_bind_without_password_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(crate::harness::SERVER)
        .arg("--dir")
        .arg(dir.path())
        .args(["--bind", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--allow-unauthenticated"), "{stderr}");
}
