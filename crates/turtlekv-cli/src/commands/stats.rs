//! `stats`: what the database holds, where its bytes go, how it is tuned.

use std::io::Write;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result};
use serde::Serialize;
use turtlekv::{OPTIONS_FILE_NAME, Options, Stats};

use crate::cli::StatsArgs;
use crate::commands::tune::threads;
use crate::db::{Create, open_with_options};
use crate::size::format_size;

/// The `--json` document; the text output shows the same fields.
#[derive(Debug, Serialize)]
struct Report {
    path: String,
    tree: Tree,
    disk: Disk,
    /// From a scan of every record; absent with `--no-scan`.
    live: Option<Live>,
    /// `disk.bytes_on_disk / live.user_bytes`; absent without a scan or
    /// with no live data.
    space_amplification: Option<f64>,
    memtable: MemTable,
    memory: Memory,
    checkpoint: Checkpoint,
    options: StoredOptions,
    this_open: ThisOpen,
}

#[derive(Debug, Serialize)]
struct Tree {
    height: u64,
    node_pages: u64,
    leaf_pages: u64,
    buffer_segment_pages: u64,
    /// Updates waiting in node buffers.
    buffered_bytes: u64,
}

#[derive(Debug, Serialize)]
struct Disk {
    /// Allocated bytes (`st_blocks * 512`) of every file in the directory.
    bytes_on_disk: u64,
    files: Vec<FileUsage>,
    wal_segments: u64,
    wal_bytes_on_disk: u64,
}

#[derive(Debug, Serialize)]
struct FileUsage {
    name: String,
    bytes_on_disk: u64,
    /// Apparent size; larger than `bytes_on_disk` where freed pages were
    /// punched out.
    len_bytes: u64,
}

#[derive(Debug, Serialize)]
struct Live {
    keys: u64,
    /// Sum of key and value lengths.
    user_bytes: u64,
}

#[derive(Debug, Serialize)]
struct MemTable {
    bytes: u64,
    entries: u64,
    frozen: u64,
    checkpoint_distance_bytes: u64,
}

#[derive(Debug, Serialize)]
struct Memory {
    /// Shared by the MemTables and the page cache.
    budget_bytes: u64,
    cache_capacity_bytes: u64,
    cache_used_bytes: u64,
}

#[derive(Debug, Serialize)]
struct Checkpoint {
    /// The tree holds every write up to this sequence number.
    covered_sequence: u64,
    /// The newest write; those above `covered_sequence` are in the WAL.
    last_sequence: u64,
    /// When the superblock was last written, i.e. the last checkpoint
    /// committed (or the database created), in seconds since the epoch.
    committed_unix_secs: Option<u64>,
    committed_utc: Option<String>,
}

#[derive(Debug, Serialize)]
struct StoredOptions {
    /// Whether an OPTIONS file (from `turtlekv tune`) exists; without one
    /// the knobs are the defaults.
    stored: bool,
    leaf_size_bytes: u64,
    node_size_bytes: u64,
    checkpoint_distance_bytes: u64,
    cache_capacity_bytes: u64,
    checkpoint_threads: usize,
    filter_bits_per_key: u32,
    direct_io: bool,
    wal_segment_size_bytes: u64,
}

/// The engine counts writes per open handle, not over the database's
/// life: these are what this command's own open did (WAL replay, mostly).
#[derive(Debug, Serialize)]
struct ThisOpen {
    wal_records_replayed: u64,
    wal_tail_bytes_dropped: u64,
    user_bytes_written: u64,
    wal_bytes_written: u64,
    page_bytes_written: u64,
    /// `(wal + page bytes written) / user bytes written`; absent with no
    /// user writes.
    write_amplification: Option<f64>,
}

pub fn stats(args: &StatsArgs, out: &mut dyn Write) -> Result<()> {
    let (db, options) = open_with_options(&args.db, Create::No)?;
    // Counters first, so that the scan below does not show in the cache.
    let stats = db.stats();
    let live = if args.no_scan {
        None
    } else {
        let mut live = Live {
            keys: 0,
            user_bytes: 0,
        };
        for item in db.range::<&[u8], _>(..) {
            let (key, value) = item.context("scanning the database")?;
            live.keys += 1;
            live.user_bytes += (key.len() + value.len()) as u64;
        }
        Some(live)
    };
    let disk = disk_usage(&args.db)?;
    let committed = std::fs::metadata(args.db.join("SUPERBLOCK"))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs());
    let report = Report {
        path: args.db.display().to_string(),
        space_amplification: live
            .as_ref()
            .filter(|l| l.user_bytes > 0)
            .map(|l| disk.bytes_on_disk as f64 / l.user_bytes as f64),
        live,
        disk,
        tree: Tree {
            height: stats.tree_height,
            node_pages: stats.tree_node_pages,
            leaf_pages: stats.tree_leaf_pages,
            buffer_segment_pages: stats.tree_segment_pages,
            buffered_bytes: stats.tree_buffered_bytes,
        },
        memtable: MemTable {
            bytes: stats.memtable_bytes,
            entries: stats.memtable_entries,
            frozen: stats.frozen_memtables,
            checkpoint_distance_bytes: stats.checkpoint_distance_bytes,
        },
        memory: Memory {
            budget_bytes: stats.memory_budget_bytes,
            cache_capacity_bytes: stats.cache_capacity_bytes,
            cache_used_bytes: stats.cache_used_bytes,
        },
        checkpoint: Checkpoint {
            covered_sequence: stats.checkpoint_covered_sequence,
            last_sequence: stats.last_sequence,
            committed_unix_secs: committed,
            committed_utc: committed.map(utc),
        },
        options: stored_options(&args.db, &options),
        this_open: this_open(&stats),
    };
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        write_text(&report, out)?;
    }
    Ok(())
}

fn stored_options(path: &Path, o: &Options) -> StoredOptions {
    StoredOptions {
        stored: path.join(OPTIONS_FILE_NAME).exists(),
        leaf_size_bytes: o.leaf_size_bytes,
        node_size_bytes: o.node_size_bytes,
        checkpoint_distance_bytes: o.checkpoint_distance_bytes,
        cache_capacity_bytes: o.cache_capacity_bytes,
        checkpoint_threads: o.checkpoint_threads,
        filter_bits_per_key: o.filter_bits_per_key,
        direct_io: o.direct_io,
        wal_segment_size_bytes: o.wal_segment_size_bytes,
    }
}

fn this_open(stats: &Stats) -> ThisOpen {
    ThisOpen {
        wal_records_replayed: stats.wal_records_replayed,
        wal_tail_bytes_dropped: stats.wal_tail_bytes_dropped,
        user_bytes_written: stats.user_bytes_written,
        wal_bytes_written: stats.wal_bytes_written,
        page_bytes_written: stats.page_bytes_written,
        write_amplification: (stats.user_bytes_written > 0).then(|| stats.write_amplification()),
    }
}

/// Allocated bytes of the files in `dir`, the WAL directory summed up.
fn disk_usage(dir: &Path) -> Result<Disk> {
    let mut disk = Disk {
        bytes_on_disk: 0,
        files: Vec::new(),
        wal_segments: 0,
        wal_bytes_on_disk: 0,
    };
    let entries = std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let meta = entry
            .metadata()
            .with_context(|| format!("reading {}", entry.path().display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if meta.is_dir() {
            // wal/ is the only directory the engine makes.
            let (files, bytes) = directory_blocks(&entry.path())?;
            if name == "wal" {
                disk.wal_segments += files;
                disk.wal_bytes_on_disk += bytes;
            }
            disk.bytes_on_disk += bytes;
            continue;
        }
        let bytes = meta.blocks() * 512;
        disk.bytes_on_disk += bytes;
        disk.files.push(FileUsage {
            name,
            bytes_on_disk: bytes,
            len_bytes: meta.len(),
        });
    }
    disk.files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(disk)
}

/// Files in and allocated bytes under a directory, recursively.
fn directory_blocks(dir: &Path) -> Result<(u64, u64)> {
    let (mut files, mut bytes) = (0, 0);
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry
            .with_context(|| format!("listing {}", dir.display()))?
            .path();
        let meta = std::fs::symlink_metadata(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        if meta.is_dir() {
            let (f, b) = directory_blocks(&path)?;
            files += f;
            bytes += b;
        } else {
            files += 1;
            bytes += meta.blocks() * 512;
        }
    }
    Ok((files, bytes))
}

fn write_text(r: &Report, out: &mut dyn Write) -> Result<()> {
    let line = |out: &mut dyn Write, label: &str, value: String| -> std::io::Result<()> {
        writeln!(out, "  {label:<28} {value}")
    };
    writeln!(out, "database {}", r.path)?;
    writeln!(out, "tree")?;
    line(out, "height", r.tree.height.to_string())?;
    line(out, "node pages", r.tree.node_pages.to_string())?;
    line(out, "leaf pages", r.tree.leaf_pages.to_string())?;
    line(
        out,
        "buffer segment pages",
        r.tree.buffer_segment_pages.to_string(),
    )?;
    line(out, "buffered in nodes", format_size(r.tree.buffered_bytes))?;
    writeln!(out, "disk (allocated blocks)")?;
    line(out, "total", format_size(r.disk.bytes_on_disk))?;
    for file in &r.disk.files {
        let apparent = if file.len_bytes == file.bytes_on_disk {
            String::new()
        } else {
            format!(" (size {})", format_size(file.len_bytes))
        };
        line(
            out,
            &file.name,
            format!("{}{apparent}", format_size(file.bytes_on_disk)),
        )?;
    }
    line(
        out,
        "wal/",
        format!(
            "{} in {} segments",
            format_size(r.disk.wal_bytes_on_disk),
            r.disk.wal_segments
        ),
    )?;
    writeln!(out, "live data")?;
    match &r.live {
        Some(live) => {
            line(out, "keys", live.keys.to_string())?;
            line(out, "keys + values", format_size(live.user_bytes))?;
        }
        None => line(out, "keys", "not counted (--no-scan)".to_string())?,
    }
    line(
        out,
        "space amplification",
        r.space_amplification.map_or_else(
            || "n/a (no live data counted)".to_string(),
            |a| format!("{a:.2} (bytes on disk / live key + value bytes)"),
        ),
    )?;
    writeln!(out, "memtable")?;
    line(
        out,
        "size",
        format!(
            "{} in {} entries, of {} checkpoint distance",
            format_size(r.memtable.bytes),
            r.memtable.entries,
            format_size(r.memtable.checkpoint_distance_bytes)
        ),
    )?;
    line(
        out,
        "frozen, awaiting checkpoint",
        r.memtable.frozen.to_string(),
    )?;
    writeln!(out, "memory")?;
    line(out, "budget", format_size(r.memory.budget_bytes))?;
    line(
        out,
        "page cache",
        format!(
            "{} used of {}",
            format_size(r.memory.cache_used_bytes),
            format_size(r.memory.cache_capacity_bytes)
        ),
    )?;
    writeln!(out, "last checkpoint")?;
    line(
        out,
        "covers sequence numbers",
        format!(
            "up to {} of {} ({} writes only in the WAL)",
            r.checkpoint.covered_sequence,
            r.checkpoint.last_sequence,
            r.checkpoint
                .last_sequence
                .saturating_sub(r.checkpoint.covered_sequence)
        ),
    )?;
    line(
        out,
        "committed at",
        r.checkpoint
            .committed_unix_secs
            .map_or_else(|| "unknown".to_string(), when),
    )?;
    let o = &r.options;
    writeln!(
        out,
        "options ({})",
        if o.stored {
            "stored in OPTIONS by `turtlekv tune`"
        } else {
            "defaults: no OPTIONS file"
        }
    )?;
    line(
        out,
        "checkpoint distance",
        format_size(o.checkpoint_distance_bytes),
    )?;
    line(out, "cache", format_size(o.cache_capacity_bytes))?;
    line(out, "checkpoint threads", threads(o.checkpoint_threads))?;
    line(
        out,
        "filter bits per key",
        o.filter_bits_per_key.to_string(),
    )?;
    line(out, "direct I/O", o.direct_io.to_string())?;
    line(
        out,
        "WAL segment size",
        format_size(o.wal_segment_size_bytes),
    )?;
    line(out, "leaf page size", format_size(o.leaf_size_bytes))?;
    line(out, "node page size", format_size(o.node_size_bytes))?;
    let t = &r.this_open;
    writeln!(
        out,
        "this open (the engine counts per open handle, not over the database's life)"
    )?;
    line(
        out,
        "WAL records replayed",
        t.wal_records_replayed.to_string(),
    )?;
    line(
        out,
        "torn WAL tail dropped",
        format_size(t.wal_tail_bytes_dropped),
    )?;
    line(out, "user bytes written", format_size(t.user_bytes_written))?;
    line(
        out,
        "write amplification",
        t.write_amplification.map_or_else(
            || "n/a: nothing written since this open (`load` reports its own)".to_string(),
            |w| format!("{w:.2}"),
        ),
    )?;
    Ok(())
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc(secs: u64) -> String {
    let days = secs / 86_400;
    let rest = secs % 86_400;
    // Howard Hinnant's civil_from_days, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// `secs` since the epoch as a date and how long ago that was.
fn when(secs: u64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let ago = now.saturating_sub(secs);
    let ago = match ago {
        0..120 => format!("{ago} s"),
        120..7200 => format!("{} min", ago / 60),
        7200..172_800 => format!("{} h", ago / 3600),
        _ => format!("{} days", ago / 86_400),
    };
    format!("{} ({ago} ago)", utc(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_700_000_000), "2023-11-14T22:13:20Z");
    }
}
