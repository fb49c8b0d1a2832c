//! Handing the C allocator's free memory back to the kernel.
//!
//! A checkpoint allocates and frees up to a few hundred MiB (decoded spans
//! of segments, merged runs, output leaves) on its own threads. glibc keeps
//! what they free in those threads' arenas, where the client threads, which
//! fill the caches, cannot reuse it: out of cache that free memory was
//! 190-270 MiB of the process's resident set, on top of the memory budget
//! (`docs/benchmarks.md`, "Handing free memory back after checkpoints").
//! After each checkpoint the checkpoint thread asks glibc to return the
//! whole pages inside its free chunks (`malloc_trim`). Elsewhere (another
//! C library, or a global allocator other than the system's) this does
//! nothing: those allocators return memory on their own terms.

/// Returns the C allocator's free pages to the kernel, where that is
/// possible; cheap when it holds little free memory.
pub(crate) fn release_free_heap_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes the allocator's own locks and only releases
    // pages no allocation uses; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A size field of `/proc/self/status` (`label` with its colon, such as
/// `"RssAnon:"`), in bytes: tests that measure what memory the process
/// holds.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn process_status_bytes(label: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("procfs");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {label} in /proc/self/status"));
    kib * 1024
}

#[cfg(test)]
mod tests {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    use super::*;

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn freed_heap_pages_leave_the_resident_set() {
        // RssAnon is the whole process's: other tests of this binary,
        // allocating at the same time, can hide the drop in one attempt, so
        // the trim must show it in one of three.
        let mut drops = Vec::new();
        for _ in 0..3 {
            let (before, after) = trim_after_freeing_256_mib();
            if after + (128 << 20) <= before {
                return;
            }
            drops.push((before, after));
        }
        panic!("resident anonymous memory (before, after) the trim, in bytes: {drops:?}");
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn trim_after_freeing_256_mib() -> (u64, u64) {
        // Blocks below the mmap threshold, so they live in an arena and
        // stay there when freed; a live neighbour after each keeps glibc
        // from shrinking the arena from its top on its own.
        let mut freed: Vec<Vec<u8>> = Vec::new();
        let mut kept: Vec<Vec<u8>> = Vec::new();
        for _ in 0..4096 {
            freed.push(vec![1u8; 64 * 1024]);
            kept.push(vec![1u8; 64]);
        }
        drop(freed);
        let before = process_status_bytes("RssAnon:");
        release_free_heap_memory();
        let after = process_status_bytes("RssAnon:");
        assert!(kept.iter().all(|k| k[0] == 1));
        (before, after)
    }
}
