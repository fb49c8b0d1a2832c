//! Process and file-system readings: device bytes written, bytes allocated
//! on disk, peak resident memory. All from Linux `/proc` and `stat`.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// Bytes this process caused to be written to the storage device, from the
/// `write_bytes` line of `/proc/self/io`. It counts page-cache writeback of
/// pages the process dirtied, and all of the process's threads, so an
/// engine's background flushes and compactions are included.
pub fn device_write_bytes() -> io::Result<u64> {
    let text = fs::read_to_string("/proc/self/io")?;
    field_value(&text, "write_bytes:")
        .ok_or_else(|| io::Error::other("no write_bytes in /proc/self/io"))
}

/// `cancelled_write_bytes` of `/proc/self/io`: dirtied bytes whose file was
/// truncated or deleted before writeback, so never written to the device.
pub fn device_cancelled_write_bytes() -> io::Result<u64> {
    let text = fs::read_to_string("/proc/self/io")?;
    field_value(&text, "cancelled_write_bytes:")
        .ok_or_else(|| io::Error::other("no cancelled_write_bytes in /proc/self/io"))
}

/// Bytes this process caused to be read from the storage device, from the
/// `read_bytes` line of `/proc/self/io`: direct reads and page-cache misses
/// of all its threads. Reads the OS page cache answers are not counted.
pub fn device_read_bytes() -> io::Result<u64> {
    let text = fs::read_to_string("/proc/self/io")?;
    field_value(&text, "read_bytes:")
        .ok_or_else(|| io::Error::other("no read_bytes in /proc/self/io"))
}

/// Bytes allocated on disk under `path` (`st_blocks * 512`, summed over all
/// files), which counts holes as free and preallocation as used.
pub fn allocated_bytes(path: &Path) -> io::Result<u64> {
    let meta = fs::symlink_metadata(path)?;
    let mut total = meta.blocks() * 512;
    if meta.is_dir() {
        for entry in fs::read_dir(path)? {
            total += allocated_bytes_if_present(&entry?.path())?;
        }
    }
    Ok(total)
}

/// `allocated_bytes` of a directory entry, 0 if it is gone: an engine's
/// background work (a compaction, a WAL trim) may delete a file between
/// listing the directory and reading the file's size, and a deleted file
/// takes no space.
fn allocated_bytes_if_present(path: &Path) -> io::Result<u64> {
    match allocated_bytes(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        other => other,
    }
}

/// Resets the kernel's peak-RSS mark (`VmHWM`) to the current RSS, so that
/// each phase reports its own peak. Writing 5 to `clear_refs` needs Linux
/// 4.0 or later; on failure the peak is the process's since it started.
pub fn reset_peak_rss() -> bool {
    fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Peak resident set size since the last reset, in bytes (`VmHWM`).
pub fn peak_rss_bytes() -> io::Result<u64> {
    let text = fs::read_to_string("/proc/self/status")?;
    status_bytes(&text, "VmHWM:")
}

/// Resident set size now, in bytes: `(anonymous, file-backed)` from
/// `RssAnon` and `RssFile`.
pub fn rss_bytes() -> io::Result<(u64, u64)> {
    let text = fs::read_to_string("/proc/self/status")?;
    Ok((
        status_bytes(&text, "RssAnon:")?,
        status_bytes(&text, "RssFile:")?,
    ))
}

/// A `/proc/self/status` size field (given in kB), in bytes.
fn status_bytes(text: &str, label: &str) -> io::Result<u64> {
    field_value(text, label)
        .map(|kib| kib * 1024)
        .ok_or_else(|| io::Error::other(format!("no {label} in /proc/self/status")))
}

/// CPU time this process has used so far, user and system, over all its
/// threads (`getrusage`). Across a phase it counts the engine's background
/// threads (checkpoints, compactions) with the clients.
pub fn process_cpu_time() -> io::Result<Duration> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole `rusage` to the pointer it is given,
    // which points at one.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: initialised by the successful call above (and zeroed before).
    let usage = unsafe { usage.assume_init() };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Ok(time(usage.ru_utime) + time(usage.ru_stime))
}

/// The C allocator's `(bytes in use, free bytes it keeps)` from `mallinfo2`:
/// in use is arena chunks handed out plus mmapped blocks; free is arena
/// chunks it holds for reuse. Set against RSS they separate live data from
/// allocator retention. `None` off glibc. With another global allocator
/// (the `mimalloc` feature) they cover only what still uses malloc.
pub fn malloc_bytes() -> Option<(u64, u64)> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 takes no arguments and only reads the
        // allocator's counters (under its arena locks).
        let info = unsafe { libc::mallinfo2() };
        Some(((info.uordblks + info.hblkhd) as u64, info.fordblks as u64))
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

/// The number after `label` on the line that starts with it.
fn field_value(text: &str, label: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn parses_proc_fields() {
        let io_text = "rchar: 10\nwchar: 20\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n";
        assert_eq!(field_value(io_text, "write_bytes:"), Some(4096));
        let status = "Name:\tx\nVmHWM:\t  1234 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(field_value(status, "VmHWM:"), Some(1234));
        assert_eq!(field_value(status, "VmSwap:"), None);
    }

    #[test]
    fn readings_on_this_process() {
        assert!(device_write_bytes().is_ok());
        assert!(device_read_bytes().is_ok());
        let before = peak_rss_bytes().unwrap();
        assert!(before > 0);
        let dir = tempfile::tempdir().unwrap();
        let mut file = fs::File::create(dir.path().join("f")).unwrap();
        file.write_all(&vec![1u8; 64 * 1024]).unwrap();
        file.sync_all().unwrap();
        let allocated = allocated_bytes(dir.path()).unwrap();
        assert!(allocated >= 64 * 1024, "{allocated}");
        // A file deleted while the directory is walked counts as 0; the
        // directory itself must exist.
        assert_eq!(
            allocated_bytes_if_present(&dir.path().join("gone")).unwrap(),
            0
        );
        assert!(allocated_bytes(&dir.path().join("gone")).is_err());
    }

    #[test]
    fn cpu_time_counts_work_done() {
        // Spins until the reading has grown by 20 ms: a reading that does
        // not follow the work never gets there. Wall time bounds the test,
        // not the reading, so a busy machine cannot fail it.
        let before = process_cpu_time().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut x = 0u64;
        while process_cpu_time().unwrap() < before + Duration::from_millis(20) {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            assert!(
                std::time::Instant::now() < deadline,
                "30 s of spinning raised the CPU time reading by less than 20 ms"
            );
        }
    }

    #[test]
    fn memory_readings_see_a_live_allocation() {
        let (anon, _file) = rss_bytes().unwrap();
        assert!(anon > 0);
        if malloc_bytes().is_none() {
            return; // not glibc: nothing to read
        }
        // 64 MiB, touched so that it is resident, counted as in use until
        // it is freed. Other tests allocate and free meanwhile, so only the
        // absolute figure is checked, not the change.
        // `black_box`: a release build would otherwise drop the unread block.
        let block = std::hint::black_box(vec![1u8; 64 << 20]);
        let (in_use, _) = malloc_bytes().unwrap();
        assert!(in_use >= 64 << 20, "{in_use}");
        assert!(rss_bytes().unwrap().0 >= 64 << 20);
        drop(block);
    }
}
