//! Embeds what a results file needs to say which code it measured: the
//! git commit of the build (marked `-dirty` when tracked files differ from
//! it) and the versions of the engine crates in `Cargo.lock`. Each falls
//! back to "unknown" where git or the lock file is missing (a build from a
//! tarball), so the build never fails for it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Crates whose locked versions the benchmark reports.
const CRATES: [(&str, &str); 7] = [
    ("turtlekv", "TURTLEKV_BENCH_VERSION_TURTLEKV"),
    ("rocksdb", "TURTLEKV_BENCH_VERSION_ROCKSDB"),
    ("librocksdb-sys", "TURTLEKV_BENCH_VERSION_LIBROCKSDB_SYS"),
    ("fjall", "TURTLEKV_BENCH_VERSION_FJALL"),
    ("redb", "TURTLEKV_BENCH_VERSION_REDB"),
    ("heed", "TURTLEKV_BENCH_VERSION_HEED"),
    ("lmdb-master-sys", "TURTLEKV_BENCH_VERSION_LMDB_MASTER_SYS"),
];

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    println!("cargo::rerun-if-env-changed=TURTLEKV_BENCH_COMMIT");
    println!(
        "cargo::rustc-env=TURTLEKV_BENCH_COMMIT={}",
        commit(&manifest_dir)
    );

    let lock = find_upwards(&manifest_dir, "Cargo.lock");
    let text = lock
        .as_ref()
        .and_then(|path| std::fs::read_to_string(path).ok())
        .unwrap_or_default();
    if let Some(path) = &lock {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    for (name, var) in CRATES {
        let version = locked_version(&text, name).unwrap_or_else(|| "unknown".to_string());
        println!("cargo::rustc-env={var}={version}");
    }
}

/// `TURTLEKV_BENCH_COMMIT` if set (for builds outside git), else `git
/// rev-parse --short HEAD`, with `-dirty` when `git status` lists changed
/// tracked files; "unknown" without git.
fn commit(dir: &Path) -> String {
    if let Ok(commit) = std::env::var("TURTLEKV_BENCH_COMMIT")
        && !commit.is_empty()
    {
        return commit;
    }
    let Some(head) = git(dir, &["rev-parse", "--short", "HEAD"]) else {
        return "unknown".to_string();
    };
    // Run again when HEAD moves, the index changes (a commit, an add), or
    // a file of the workspace's crates changes (an edit makes it dirty).
    for git_path in ["HEAD", "index", "packed-refs"] {
        if let Some(path) = git(dir, &["rev-parse", "--git-path", git_path]) {
            println!("cargo::rerun-if-changed={}", absolute(dir, &path).display());
        }
    }
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git(dir, &["rev-parse", "--git-path", &branch])
    {
        println!("cargo::rerun-if-changed={}", absolute(dir, &path).display());
    }
    if let Some(crates) = dir.parent() {
        println!("cargo::rerun-if-changed={}", crates.display());
    }
    match git(dir, &["status", "--porcelain", "--untracked-files=no"]) {
        Some(changes) if changes.is_empty() => head,
        Some(_) => format!("{head}-dirty"),
        // Status failed: the commit is known, its cleanliness is not.
        None => format!("{head}-unknown-status"),
    }
}

/// The trimmed standard output of a successful git command.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn absolute(dir: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        dir.join(path)
    }
}

fn find_upwards(start: &Path, name: &str) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// The version of the first `[[package]]` named `name` in a Cargo.lock.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let wanted = format!("name = \"{name}\"");
    let mut lines = lock.lines().map(str::trim);
    while let Some(line) = lines.next() {
        if line == wanted {
            let version = lines.next()?.strip_prefix("version = \"")?;
            return Some(version.trim_end_matches('"').to_string());
        }
    }
    None
}
