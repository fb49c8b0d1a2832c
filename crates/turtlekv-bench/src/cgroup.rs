//! `--memory-limit-bytes`: bounds an engine's whole process, page cache
//! included, with a cgroup v1 memory group, so that engines which read
//! through the OS page cache (fjall, redb, LMDB) cannot use the machine's
//! spare memory as an unbounded cache. Needs root and the v1 memory
//! controller at `/sys/fs/cgroup/memory`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result, bail};

const MEMORY_ROOT: &str = "/sys/fs/cgroup/memory";

/// A memory cgroup that is removed when dropped.
#[derive(Debug)]
pub struct MemoryCgroup {
    path: PathBuf,
}

impl MemoryCgroup {
    /// Creates `name` inside this process's own memory cgroup (so the new
    /// group is nested in, and limited by, whatever already contains us)
    /// and sets its limit.
    pub fn create(name: &str, limit_bytes: u64) -> Result<MemoryCgroup> {
        let cgroups =
            fs::read_to_string("/proc/self/cgroup").context("reading /proc/self/cgroup")?;
        let Some(own) = own_memory_group(&cgroups) else {
            bail!(
                "no cgroup v1 memory controller in /proc/self/cgroup; --memory-limit-bytes needs one"
            );
        };
        let path = Path::new(MEMORY_ROOT)
            .join(own.trim_start_matches('/'))
            .join(name);
        fs::create_dir(&path).with_context(|| format!("creating cgroup {}", path.display()))?;
        let group = MemoryCgroup { path };
        fs::write(
            group.path.join("memory.limit_in_bytes"),
            limit_bytes.to_string(),
        )
        .with_context(|| format!("setting the limit of {}", group.path.display()))?;
        Ok(group)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // The kernel may still hold the exited child's accounting for a
        // moment; retry briefly before giving up.
        for _ in 0..50 {
            match fs::remove_dir(&self.path) {
                Ok(()) => return,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return,
                Err(_) => thread::sleep(Duration::from_millis(20)),
            }
        }
        eprintln!(
            "warning: could not remove cgroup {}; remove it with rmdir",
            self.path.display()
        );
    }
}

/// Moves the calling process into the group at `path`.
pub fn join(path: &Path) -> Result<()> {
    fs::write(path.join("cgroup.procs"), std::process::id().to_string())
        .with_context(|| format!("joining cgroup {}", path.display()))
}

/// The memory controller's path in a `/proc/self/cgroup` listing.
fn own_memory_group(listing: &str) -> Option<&str> {
    listing.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then_some(path)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_memory_controller_line() {
        let listing = "9:name=systemd:/\n4:memory:/sandbox/abc\n1:cpu,cpuacct:/\n0::/\n";
        assert_eq!(own_memory_group(listing), Some("/sandbox/abc"));
        assert_eq!(own_memory_group("4:cpu,memory:/\n"), Some("/"));
        assert_eq!(own_memory_group("0::/user.slice\n"), None);
    }
}
