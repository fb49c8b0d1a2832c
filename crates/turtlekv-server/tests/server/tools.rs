//! The stock Redis tools against the server: `redis-cli` (commands, mass
//! insertion through `--pipe`, `--scan`) and `redis-benchmark`.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::harness::{Server, have_tool};

fn cli(server: &Server, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &server.addr.port().to_string()])
        .args(args)
        .output()
        .expect("redis-cli runs");
    assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn redis_cli_runs_commands_mass_insertion_and_scan() {
    if !have_tool("redis-cli") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--sync", "everysec"]);
    assert_eq!(cli(&server, &["SET", "greeting", "hello"]), "OK");
    assert_eq!(cli(&server, &["GET", "greeting"]), "hello");
    assert_eq!(cli(&server, &["INCRBY", "n", "7"]), "7");
    assert!(cli(&server, &["NOSUCH"]).starts_with("ERR unknown command"));

    // Mass insertion: 20,000 SETs in the protocol, piped.
    let mut protocol = Vec::new();
    for i in 0..20_000 {
        let (key, value) = (format!("mass:{i:05}"), i.to_string());
        write!(
            protocol,
            "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
            key.len(),
            value.len()
        )
        .unwrap();
    }
    let mut child = Command::new("redis-cli")
        .args(["-p", &server.addr.port().to_string(), "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&protocol).unwrap();
    let out: Output = child.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}");
    assert!(report.contains("errors: 0, replies: 20000"), "{report}");

    let scanned = cli(&server, &["--scan", "--pattern", "mass:1*"]);
    assert_eq!(scanned.lines().count(), 10_000);
    assert_eq!(cli(&server, &["GET", "mass:19999"]), "19999");
    assert!(cli(&server, &["INFO", "turtlekv"]).contains("puts:"));
}

#[test]
fn redis_benchmark_completes_without_errors() {
    if !have_tool("redis-benchmark") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--sync", "everysec"]);
    let out = Command::new("redis-benchmark")
        .args(["-p", &server.addr.port().to_string()])
        .args([
            "-t",
            "ping,set,get,incr,mset",
            "-n",
            "20000",
            "-r",
            "100000",
        ])
        .args(["-c", "20", "-P", "16", "-q"])
        .output()
        .unwrap();
    let report =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{report}");
    for test in ["SET", "GET", "INCR", "MSET (10 keys)"] {
        let line = report
            .lines()
            .map(|l| l.rsplit('\r').next().unwrap_or(l))
            .find(|l| l.starts_with(&format!("{test}:")))
            .unwrap_or_else(|| panic!("no {test} result in {report}"));
        let rate: f64 = line
            .split_whitespace()
            .nth(if test.contains(' ') { 3 } else { 1 })
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("unreadable line {line:?}"));
        assert!(rate > 0.0, "{line}");
    }
    assert!(!report.to_lowercase().contains("error"), "{report}");
    let keys: i64 = cli(&server, &["DBSIZE"]).parse().unwrap();
    assert!(keys > 1000, "{keys}");
}
