//! Scale-out: three shards behind twemproxy (`deploy/cluster.sh`). 100,000
//! keys are written and read through the proxy, the keys must spread over
//! the shards, and a shard killed with `kill -9` and restarted must still
//! hold every key it acknowledged.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redis::{IntoConnectionInfo, cmd};

use crate::harness::{SERVER, have_tool};

const KEYS: usize = 100_000;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/cluster.sh")
}

/// Ports free at the moment of the call (the listeners are closed again).
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// A connection that sends nothing but the test's commands: twemproxy
/// closes a connection on a command it does not proxy, such as the
/// `CLIENT SETINFO` the `redis` crate sends by default.
fn connect_plain(port: u16) -> redis::Connection {
    let info = format!("redis://127.0.0.1:{port}/")
        .into_connection_info()
        .unwrap();
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    redis::Client::open(info.set_redis_settings(settings))
        .unwrap()
        .get_connection()
        .unwrap()
}

/// `deploy/cluster.sh` with this test's ports, stopped when dropped.
struct Cluster {
    data: tempfile::TempDir,
    shard_ports: Vec<u16>,
    proxy_port: u16,
    stats_port: u16,
}

impl Cluster {
    fn run(&self, args: &[&str]) {
        let ports: Vec<String> = self.shard_ports.iter().map(u16::to_string).collect();
        let status = Command::new("bash")
            .arg(script())
            .args(args)
            .env("SHARD_PORTS", ports.join(" "))
            .env("PROXY_PORT", self.proxy_port.to_string())
            .env("STATS_PORT", self.stats_port.to_string())
            .env("TURTLEKV_SERVER", SERVER)
            .env("SYNC", "always")
            .status()
            .expect("bash runs the script");
        assert!(status.success(), "cluster.sh {args:?} failed");
    }

    fn data(&self) -> &str {
        self.data.path().to_str().unwrap()
    }

    fn shard_pid(&self, i: usize) -> u32 {
        let file = self.data.path().join(format!("shard{i}.pid"));
        std::fs::read_to_string(file)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    fn connect(&self, port: u16) -> redis::Connection {
        connect_plain(port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data().to_string();
        self.run(&["stop", &data]);
    }
}

/// Reads `keys` through the proxy and checks each holds its own index,
/// retrying while the proxy reconnects to a restarted shard.
fn verify(c: &mut redis::Connection, keys: &[String]) {
    for chunk in keys.chunks(1000) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let values: Vec<Option<i64>> = loop {
            match cmd("MGET").arg(chunk).query(c) {
                Ok(v) => break v,
                Err(e) => {
                    assert!(Instant::now() < deadline, "MGET through the proxy: {e}");
                    thread::sleep(Duration::from_millis(100));
                }
            }
        };
        for (key, value) in chunk.iter().zip(values) {
            let i: i64 = key.rsplit(':').next().unwrap().parse().unwrap();
            assert_eq!(value, Some(i), "{key}");
        }
    }
}

#[test]
fn twemproxy_spreads_keys_and_a_killed_shard_keeps_acknowledged_ones() {
    if !have_tool("nutcracker") || !have_tool("redis-benchmark") {
        return;
    }
    let ports = free_ports(5);
    let cluster = Cluster {
        data: tempfile::tempdir().unwrap(),
        shard_ports: ports[..3].to_vec(),
        proxy_port: ports[3],
        stats_port: ports[4],
    };
    let data = cluster.data().to_string();
    cluster.run(&["start", &data]);

    let mut proxy = cluster.connect(cluster.proxy_port);
    let keys: Vec<String> = (0..KEYS).map(|i| format!("key:{i}")).collect();
    for (n, chunk) in keys.chunks(1000).enumerate() {
        let mut pipe = redis::pipe();
        for (i, key) in chunk.iter().enumerate() {
            pipe.set(key, n * 1000 + i).ignore();
        }
        pipe.exec(&mut proxy).unwrap();
    }
    verify(&mut proxy, &keys);

    // Every shard holds a fair share (ketama over 3 equal shards).
    for &port in &cluster.shard_ports {
        let held: usize = cmd("DBSIZE").query(&mut cluster.connect(port)).unwrap();
        assert!(
            held > KEYS / 6 && held < KEYS / 2,
            "shard on {port} holds {held} keys"
        );
    }

    // redis-benchmark through the proxy.
    let out = Command::new("redis-benchmark")
        .args(["-p", &cluster.proxy_port.to_string()])
        .args([
            "-t", "set,get", "-n", "20000", "-r", "1000000", "-c", "20", "-P", "16", "-q",
        ])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && report.contains("GET:"), "{report}");

    // Writers through the proxy while shard 1 dies and comes back.
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let stop = stop.clone();
            let port = cluster.proxy_port;
            thread::spawn(move || {
                let mut c = connect_plain(port);
                let mut acked = Vec::new();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let key = format!("late{t}:{i}");
                    if cmd("SET").arg(&key).arg(i).exec(&mut c).is_ok() {
                        acked.push(key);
                    }
                }
                acked
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    let pid = cluster.shard_pid(1);
    let killed = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    thread::sleep(Duration::from_millis(500));
    cluster.run(&["start-shard", &data, "1"]);
    thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<String> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert!(
        acked.len() > 100,
        "too few writes acknowledged: {}",
        acked.len()
    );

    let mut proxy = cluster.connect(cluster.proxy_port);
    verify(&mut proxy, &keys);
    verify(&mut proxy, &acked);
}
