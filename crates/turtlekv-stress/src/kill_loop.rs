//! The kill -9 loop: start a run, let it work for a random moment, kill it
//! with SIGKILL, and start again; every start verifies what the last one
//! left. The process killed is always the child started here, by its pid.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the loop does.
#[derive(Debug, Clone)]
pub struct KillLoop {
    /// The `turtlekv-stress` binary.
    pub exe: PathBuf,
    pub root: PathBuf,
    /// Stop after this many kills...
    pub cycles: u64,
    /// ...or once this much time has passed, whichever comes first.
    pub max_duration: Duration,
    /// Longest time a child runs after it verified, before the kill.
    pub max_run: Duration,
    pub keys: u32,
    pub writers: u32,
    pub readers: u32,
    pub seed: u64,
}

/// Figures of a finished loop.
#[derive(Debug, Default, Clone, Copy)]
pub struct KillReport {
    pub kills: u64,
    /// Writes in flight at a kill that recovery held, and that it did not.
    pub in_flight_applied: u64,
    pub in_flight_lost: u64,
    /// Acknowledged writes recorded in the expected state at the end.
    pub acknowledged: u64,
    pub elapsed: Duration,
}

impl KillLoop {
    fn command(&self, mode: &str, seed: u64) -> Command {
        let mut c = Command::new(&self.exe);
        c.arg(mode)
            .arg("--dir")
            .arg(&self.root)
            .args(["--keys", &self.keys.to_string()])
            .args(["--writers", &self.writers.to_string()])
            .args(["--readers", &self.readers.to_string()])
            .args(["--seed", &seed.to_string()])
            .args(["--seconds", "100000"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        c
    }

    /// Runs the loop, then a final verification.
    pub fn run(&self) -> Result<KillReport, String> {
        let started = Instant::now();
        let mut report = KillReport::default();
        let mut rng = self.seed | 1;
        while report.kills < self.cycles && started.elapsed() < self.max_duration {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let mut child = self
                .command("run", rng)
                .spawn()
                .map_err(|e| format!("spawn: {e}"))?;
            // Keep the pipe open until the child is dead: a closed pipe
            // would make it fail on its next print instead of being killed.
            let mut out = BufReader::new(child.stdout.take().expect("piped"));
            let ready = read_ready(&mut out);
            let Some(ready) = ready else {
                let status = child.wait().map_err(|e| e.to_string())?;
                return Err(format!(
                    "cycle {}: the child stopped before verifying: {status}",
                    report.kills
                ));
            };
            report.in_flight_applied += field(&ready, "applied");
            report.in_flight_lost += field(&ready, "lost");
            let max_ms = self.max_run.as_millis().max(2) as u64;
            std::thread::sleep(Duration::from_millis(1 + rng % max_ms));
            child.kill().map_err(|e| e.to_string())?; // SIGKILL, this pid only
            let status = child.wait().map_err(|e| e.to_string())?;
            drop(out);
            if status.signal() != Some(libc_sigkill()) {
                return Err(format!(
                    "cycle {}: the child ended on its own ({status}) instead of by SIGKILL",
                    report.kills
                ));
            }
            report.kills += 1;
        }
        let mut verify = self
            .command("verify", 0)
            .spawn()
            .map_err(|e| format!("spawn: {e}"))?;
        let mut out = BufReader::new(verify.stdout.take().expect("piped"));
        let ready = read_ready(&mut out);
        let status = verify.wait().map_err(|e| e.to_string())?;
        let ready = ready
            .filter(|_| status.success())
            .ok_or_else(|| format!("final verification failed: {status}"))?;
        report.in_flight_applied += field(&ready, "applied");
        report.in_flight_lost += field(&ready, "lost");
        report.acknowledged = field(&ready, "acknowledged");
        report.elapsed = started.elapsed();
        Ok(report)
    }
}

const fn libc_sigkill() -> i32 {
    9
}

/// The child's `ready ...` line, or `None` if it ended first.
fn read_ready(out: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line.starts_with("ready ") {
            return Some(line.trim_end().to_string());
        }
    }
}

/// `name=N` from a `ready` line.
fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
