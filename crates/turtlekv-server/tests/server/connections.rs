//! The network side: protocol errors, request limits, half-closed and slow
//! clients, pipelining, many connections.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use redis::cmd;

use crate::harness::Server;

fn try_send_and_read_to_end(server: &Server, bytes: &[u8]) -> std::io::Result<String> {
    let mut s = TcpStream::connect(server.addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.write_all(bytes)?;
    let mut out = Vec::new();
    // The server closes the connection after the error: end of stream.
    s.read_to_end(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn send_and_read_to_end(server: &Server, bytes: &[u8]) -> String {
    try_send_and_read_to_end(server, bytes).expect("the exchange completes")
}

#[test]
fn protocol_errors_and_oversized_requests_close_only_that_connection() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path(),
        &["--max-bulk-len", "1KiB", "--max-multibulk-len", "100"],
    );
    let cases: [&[u8]; 5] = [
        b"*1\r\n$-5\r\n",
        b"*2\r\n$4\r\nPING\r\n:1\r\n",
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000\r\n",
        b"*101\r\n",
        b"*1\r\n$4\r\nPINGxx",
    ];
    for case in cases {
        let reply = send_and_read_to_end(&server, case);
        assert!(
            reply.starts_with("-ERR Protocol error"),
            "{case:?}: {reply}"
        );
    }
    // A request within the limits still works, on a new connection.
    let reply = send_and_read_to_end(
        &server,
        b"*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\n*1\r\n$4\r\nQUIT\r\n",
    );
    assert_eq!(reply, "$3\r\nabc\r\n+OK\r\n");
}

#[test]
fn a_half_closed_client_gets_every_reply() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(b"SET k v\r\nGET k\r\n*1\r\n$4\r\nPING\r\n")
        .unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert_eq!(out, "+OK\r\n$1\r\nv\r\n+PONG\r\n");
}

#[test]
fn idle_and_slow_clients_do_not_stall_pipelined_ones() {
    let dir = tempfile::tempdir().unwrap();
    // This process holds the idle connections too: lift its own limit (a
    // fresh machine often starts processes at 1,024 descriptors).
    turtlekv_server::server::raise_open_files_limit(8192);
    let server = Server::start(dir.path(), &["--sync", "no"]);
    let idle: Vec<TcpStream> = (0..2000)
        .map(|_| TcpStream::connect(server.addr).unwrap())
        .collect();

    let mut c = server.client();
    cmd("SET")
        .arg("big")
        .arg(vec![b'x'; 16 * 1024])
        .exec(&mut c)
        .unwrap();
    // Asks for 32 MiB of replies and never reads them.
    let mut slow = TcpStream::connect(server.addr).unwrap();
    let request = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n".repeat(2000);
    let writer = thread::spawn(move || {
        // Blocks once both sides' buffers are full; that is the point.
        let _ = slow.write_all(&request);
        slow
    });

    let started = Instant::now();
    let workers: Vec<_> = (0..200)
        .map(|t| {
            let url = server.url();
            thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                for round in 0..4 {
                    let mut pipe = redis::pipe();
                    for i in 0..100 {
                        pipe.set(format!("k{t}:{round}:{i}"), i).ignore();
                    }
                    for i in 0..100 {
                        pipe.get(format!("k{t}:{round}:{i}"));
                    }
                    let got: Vec<i64> = pipe.query(&mut c).unwrap();
                    assert_eq!(got, (0..100).collect::<Vec<_>>());
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    let info: String = cmd("INFO").arg("clients").query(&mut c).unwrap();
    let connected: usize = info
        .lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    assert!(connected > 2000, "{info}");
    drop(idle);
    drop(writer);
}

#[test]
fn connections_beyond_max_clients_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--max-clients", "3"]);
    let mut held: Vec<redis::Connection> = (0..3).map(|_| server.client()).collect();
    for c in &mut held {
        cmd("PING").exec(c).unwrap();
    }
    // Sends nothing: the refusal is written and the connection closed
    // before any request is read.
    let mut refused = TcpStream::connect(server.addr).unwrap();
    let mut reply = String::new();
    refused.read_to_string(&mut reply).unwrap();
    assert_eq!(reply, "-ERR max number of clients reached\r\n");
    drop(held.pop());
    // The slot frees once the server sees the close.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // Refused connections may be reset while the request is sent.
        let reply = try_send_and_read_to_end(&server, b"PING\r\nQUIT\r\n");
        if reply.as_ref().is_ok_and(|r| r == "+PONG\r\n+OK\r\n") {
            break;
        }
        assert!(Instant::now() < deadline, "{reply:?}");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn pipelined_sets_and_gets_run_together_but_reply_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--sync", "always"]);
    let long_key = "k".repeat(600);
    let mut request = Vec::new();
    for (key, value) in [
        ("a", "1"),
        ("", "x"),
        ("a", "2"),
        (long_key.as_str(), "y"),
        ("b", "3"),
    ] {
        request.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
                key.len(),
                value.len()
            )
            .as_bytes(),
        );
    }
    // Pipelined GETs are read together: each still gets its own reply.
    for key in ["a", long_key.as_str(), "nope", "b"] {
        request.extend_from_slice(
            format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len()).as_bytes(),
        );
    }
    request.extend_from_slice(b"*1\r\n$4\r\nQUIT\r\n");
    let reply = send_and_read_to_end(&server, &request);
    let lines: Vec<&str> = reply.split("\r\n").collect();
    assert_eq!(lines[0], "+OK");
    assert!(lines[1].starts_with("-ERR empty keys"), "{reply}");
    assert_eq!(lines[2], "+OK");
    assert!(lines[3].starts_with("-ERR key of 600 bytes"), "{reply}");
    assert_eq!(lines[4], "+OK");
    assert_eq!(&lines[5..7], ["$1", "2"]);
    assert!(lines[7].starts_with("-ERR key of 600 bytes"), "{reply}");
    assert_eq!(&lines[8..12], ["$-1", "$1", "3", "+OK"]);
}

#[test]
fn pipelined_counters_sharing_a_transaction_reply_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let reply = send_and_read_to_end(
        &server,
        b"SET s abc\r\nINCR n\r\nINCR s\r\nINCRBY n 5\r\nAPPEND s d\r\nDECRBY n x\r\nDECR n\r\nGET s\r\nQUIT\r\n",
    );
    let lines: Vec<&str> = reply.split("\r\n").collect();
    assert_eq!(lines[..2], ["+OK", ":1"]);
    assert!(
        lines[2].starts_with("-ERR value is not an integer"),
        "{reply}"
    );
    assert_eq!(lines[3..5], [":6", ":4"]);
    assert!(
        lines[5].starts_with("-ERR value is not an integer"),
        "{reply}"
    );
    assert_eq!(lines[6..10], [":5", "$4", "abcd", "+OK"]);
}
