//! Runs the real `turtlekv` binary against temporary databases. One test
//! binary with a module per area, so that it is linked once.

mod bench;
mod errors;
mod inspect;
mod keyspaces;
mod kv;
mod live;
mod load_dump;
mod lost_files;
mod regressions;
mod tune;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use tempfile::TempDir;

/// The binary, with backtraces asked for: a user error must still show
/// none.
pub fn turtlekv() -> Command {
    let mut cmd = assert_cmd::cargo::cargo_bin_cmd!("turtlekv");
    cmd.env("RUST_BACKTRACE", "1");
    cmd
}

/// A temporary directory and the database path inside it (not created).
pub fn temp_db() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    (dir, db)
}

/// Runs `turtlekv ARGS...` and returns (exit code, stdout, stderr), after
/// checking that nothing panicked.
pub fn run(args: &[&str]) -> (i32, String, String) {
    let output = turtlekv().args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !stderr.contains("panicked") && !stderr.contains("stack backtrace"),
        "turtlekv {args:?} panicked:\n{stderr}"
    );
    (output.status.code().unwrap_or(-1), stdout, stderr)
}

/// Runs a command that must succeed and returns its stdout.
pub fn ok(args: &[&str]) -> String {
    let (code, stdout, stderr) = run(args);
    assert_eq!(code, 0, "turtlekv {args:?} failed:\n{stderr}");
    stdout
}

pub fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}
