//! Starting the real `turtlekv-server` binary for a test, and stopping it
//! by its own pid (never by name: other servers may run on the machine).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const SERVER: &str = env!("CARGO_BIN_EXE_turtlekv-server");

#[derive(Debug)]
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
}

impl Server {
    /// Starts a server on a free loopback port over `dir`, with `extra`
    /// arguments, and waits until it listens.
    pub fn start(dir: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(SERVER)
            .arg("--dir")
            .arg(dir)
            .args(["--bind", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the server starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the server prints its address");
        let addr = line
            .trim()
            .rsplit(' ')
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"));
        Server { child, addr }
    }

    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .expect("valid url")
            .get_connection()
            .expect("connects")
    }

    /// `kill -9` of this server's process.
    pub fn kill9(mut self) {
        self.child.kill().expect("the server can be killed");
        let _ = self.child.wait();
    }

    /// Sends SIGTERM to this server's process and waits for its exit.
    pub fn terminate(mut self) -> ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        self.wait_exit()
    }

    /// Waits (up to a minute) for the process to exit on its own.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait works") {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Whether a Debian `redis-tools` program is installed. `.ci/run`
/// installs them and sets `TURTLEKV_REQUIRE_REDIS_TOOLS=1`, which turns a
/// missing program into a failure rather than a skipped test.
pub fn have_tool(name: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os("TURTLEKV_REQUIRE_REDIS_TOOLS").is_none(),
            "{name} is not installed (apt-get install -y redis-tools nutcracker)"
        );
        eprintln!("skipping: {name} is not installed (apt-get install -y redis-tools nutcracker)");
    }
    found
}
