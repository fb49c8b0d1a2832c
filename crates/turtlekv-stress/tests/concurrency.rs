//! Concurrency stress in one process: writer threads (puts, deletes,
//! batches), reader threads (gets, forward and backward scans, snapshots)
//! and a thread that changes the checkpoint distance and cache size,
//! forces checkpoints and flushes the WAL, all at once for a few seconds.
//! Readers check that every value is one some write produced, that no read
//! is older than the last acknowledged write or newer than the last issued
//! one, that per-key reads of one thread never go back in time, and that
//! snapshots never change; at the end the database must match the
//! expected state exactly and pass `check()`.

use std::time::Duration;

use turtlekv_stress::run::{RunConfig, run};

#[test]
fn readers_writers_checkpoints_and_knob_changes_agree() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = RunConfig {
        root: dir.path().to_path_buf(),
        keys: 3000,
        writers: 3,
        readers: 3,
        duration: Duration::from_secs(6),
        seed: 11,
    };
    let first = run(&cfg).unwrap();
    // A second run reopens the same database and expected state.
    let second = run(&RunConfig { seed: 12, ..cfg }).unwrap();
    eprintln!("{first:?}\n{second:?}");
    for r in [first, second] {
        assert!(r.writes > 1000 && r.reads > 1000, "{r:?}");
        assert!(r.checkpoints >= 5, "{r:?}");
    }
}
