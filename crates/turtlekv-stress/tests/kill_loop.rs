//! Promise 3 under load: the stress binary, with writer, reader and
//! knob-turning threads and checkpoints every few hundred writes, is killed
//! with SIGKILL at random moments; each restart verifies the database
//! against the expected-state file (every acknowledged write present, no
//! batch half applied, nothing stray) and continues.

use std::time::Duration;

use turtlekv_stress::kill_loop::KillLoop;

fn kill_loop(root: &std::path::Path, cycles: u64, minutes: f64) -> KillLoop {
    KillLoop {
        exe: env!("CARGO_BIN_EXE_turtlekv-stress").into(),
        root: root.to_path_buf(),
        cycles,
        max_duration: Duration::from_secs_f64(60.0 * minutes),
        max_run: Duration::from_millis(400),
        keys: 2000,
        writers: 3,
        readers: 2,
        seed: 0x5EED_2024,
    }
}

#[test]
fn kill9_loop_with_checkpoints_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let r = kill_loop(dir.path(), 25, 5.0).run().unwrap();
    eprintln!("{r:?}");
    assert_eq!(r.kills, 25);
    assert!(
        r.acknowledged > 1000,
        "the runs wrote almost nothing: {r:?}"
    );
}

/// The long version: `TURTLEKV_KILL_MINUTES=20 cargo test --release -p
/// turtlekv-stress -- --ignored` (figures in `docs/testing.md`).
#[test]
#[ignore = "long: minutes of kill cycles"]
fn kill9_loop_long() {
    let minutes = std::env::var("TURTLEKV_KILL_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(20.0);
    let dir = tempfile::tempdir().unwrap();
    let mut l = kill_loop(dir.path(), u64::MAX, minutes);
    l.keys = 20_000;
    l.max_run = Duration::from_millis(3000);
    let r = l.run().unwrap();
    eprintln!("{r:?}");
    assert!(r.kills > 0);
}
