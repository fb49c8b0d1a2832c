//! Command line of the stress tool; see the crate docs and `docs/testing.md`.
//!
//! ```text
//! turtlekv-stress run       --dir D [--seconds S] [--keys N] [--writers W] [--readers R] [--seed N]
//! turtlekv-stress verify    --dir D [--keys N]
//! turtlekv-stress kill-loop --dir D [--cycles N] [--minutes M] [--max-run-ms M] [--keys N] ...
//! ```
//! Exit status 2 means the database did not match the expected state.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use turtlekv_stress::kill_loop::KillLoop;
use turtlekv_stress::run::{RunConfig, acknowledged_writes, open_and_verify, run};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dispatch(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("turtlekv-stress: {e}");
            ExitCode::from(2)
        }
    }
}

fn flag<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} needs a value")),
    }
}

fn dispatch(args: &[String]) -> Result<(), String> {
    let mode = args.first().map(String::as_str).unwrap_or("");
    let root: PathBuf = flag(args, "--dir", PathBuf::new())?;
    if root.as_os_str().is_empty() {
        return Err("usage: turtlekv-stress run|verify|kill-loop --dir DIR [options]".into());
    }
    let cfg = RunConfig {
        root,
        keys: flag(args, "--keys", 4000)?,
        writers: flag(args, "--writers", 3)?,
        readers: flag(args, "--readers", 2)?,
        duration: Duration::from_secs_f64(flag(args, "--seconds", 10.0)?),
        seed: flag(args, "--seed", 1)?,
    };
    match mode {
        "run" => {
            let r = run(&cfg)?;
            println!(
                "done writes={} reads={} checkpoints={}",
                r.writes, r.reads, r.checkpoints
            );
        }
        "verify" => {
            let (_db, expected, v) = open_and_verify(&cfg)?;
            println!(
                "ready present={} applied={} lost={} acknowledged={}",
                v.present,
                v.in_flight_applied,
                v.in_flight_lost,
                acknowledged_writes(&expected)
            );
        }
        "kill-loop" => {
            let r = KillLoop {
                exe: std::env::current_exe().map_err(|e| e.to_string())?,
                root: cfg.root,
                cycles: flag(args, "--cycles", u64::MAX)?,
                max_duration: Duration::from_secs_f64(60.0 * flag(args, "--minutes", 1.0)?),
                max_run: Duration::from_millis(flag(args, "--max-run-ms", 1000)?),
                keys: cfg.keys,
                writers: cfg.writers,
                readers: cfg.readers,
                seed: cfg.seed,
            }
            .run()?;
            println!(
                "kills={} in_flight_applied={} in_flight_lost={} acknowledged={} seconds={:.0}",
                r.kills,
                r.in_flight_applied,
                r.in_flight_lost,
                r.acknowledged,
                r.elapsed.as_secs_f64()
            );
        }
        other => return Err(format!("unknown mode {other:?}")),
    }
    Ok(())
}
