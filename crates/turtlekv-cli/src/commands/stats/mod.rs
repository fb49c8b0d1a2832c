//! `stats`: what the database holds, where its bytes go, how it is tuned.

use std::io::Write;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::UNIX_EPOCH;

use anyhow::{Context as _, Result};
use serde::Serialize;
use turtlekv::{Db, Iter, OPTIONS_FILE_NAME, Options, Stats};

mod text;

use crate::cli::StatsArgs;
use crate::db::open_with_options;
use crate::encoding::encode_base64;

/// The `--json` document; the text output shows the same fields.
#[derive(Debug, Serialize)]
struct Report {
    path: String,
    tree: Tree,
    disk: Disk,
    /// From a scan of every record of every keyspace; absent with
    /// `--no-scan`.
    live: Option<Live>,
    /// `disk.bytes_on_disk / live.user_bytes`; absent without a scan or
    /// with no live data.
    space_amplification: Option<f64>,
    /// The default keyspace first (its name empty), then the named ones in
    /// name order.
    keyspaces: Vec<KeyspaceReport>,
    /// Dropped keyspaces whose records are still being deleted.
    keyspaces_dropping: u64,
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
    /// Bytes the leaf pages occupy on disk.
    leaf_page_bytes: u64,
    /// `leaf_page_bytes` over what full leaf slots would occupy.
    leaf_fill: f64,
    /// Bytes the buffer segment pages occupy on disk.
    buffer_segment_page_bytes: u64,
    /// The engine's estimate of the tree's live bytes, as stored.
    estimated_live_bytes: u64,
    /// The engine's estimate of the tree's garbage: flushed items segment
    /// pages keep, leaf data that buffered updates make dead.
    estimated_garbage_bytes: u64,
}

#[derive(Debug, Serialize)]
struct Disk {
    /// Allocated bytes (`st_blocks * 512`) of every file in the directory.
    bytes_on_disk: u64,
    files: Vec<FileUsage>,
    wal_segments: u64,
    wal_bytes_on_disk: u64,
    /// Value files (`values/`: large values stored once).
    value_files: u64,
    value_bytes_on_disk: u64,
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

/// One keyspace: what it holds and what this open did to it.
#[derive(Debug, Serialize)]
struct KeyspaceReport {
    /// The name, when it is UTF-8 (empty for the default keyspace).
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    /// The name in base64, when it is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    name_base64: Option<String>,
    /// From the scan; absent with `--no-scan`.
    live: Option<Live>,
    /// Operations since this command's open (the engine counts per open
    /// handle): put and delete entries committed, gets, scans started.
    puts: u64,
    deletes: u64,
    gets: u64,
    scans: u64,
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
    write_only_checkpoint_distance_bytes: u64,
    cache_capacity_bytes: u64,
    checkpoint_threads: usize,
    filter_bits_per_key: u32,
    direct_io: bool,
    wal_segment_size_bytes: u64,
    /// `none`, `lz4` or `zstd:<level>`.
    compression: String,
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
    /// Item bytes of the leaf chunks checkpoints wrote, and what they took
    /// as stored, compressed or not.
    compression_input_bytes: u64,
    compression_output_bytes: u64,
    /// Input over output; absent when no checkpoint wrote a leaf.
    compression_ratio: Option<f64>,
}

pub fn stats(args: &StatsArgs, out: &mut dyn Write) -> Result<()> {
    let (db, options) = open_with_options(&args.db, args.read_only.create())?;
    // Counters first, so that the scan below does not show in the cache
    // (nor in the keyspaces' scan counts).
    let stats = db.stats();
    let mut keyspaces = Vec::with_capacity(stats.keyspaces.len());
    for counts in &stats.keyspaces {
        let live = if args.no_scan {
            None
        } else {
            Some(scan_keyspace(&db, &counts.name)?)
        };
        let (name, name_base64) = match String::from_utf8(counts.name.clone()) {
            Ok(name) => (Some(name), None),
            Err(_) => (None, Some(encode_base64(&counts.name))),
        };
        keyspaces.push(KeyspaceReport {
            name,
            name_base64,
            live,
            puts: counts.puts,
            deletes: counts.deletes,
            gets: counts.gets,
            scans: counts.scans,
        });
    }
    let live = (!args.no_scan).then(|| Live {
        keys: keyspaces
            .iter()
            .filter_map(|k| k.live.as_ref())
            .map(|l| l.keys)
            .sum(),
        user_bytes: keyspaces
            .iter()
            .filter_map(|k| k.live.as_ref())
            .map(|l| l.user_bytes)
            .sum(),
    });
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
        keyspaces,
        keyspaces_dropping: stats.keyspaces_dropping,
        disk,
        tree: Tree {
            height: stats.tree_height,
            node_pages: stats.tree_node_pages,
            leaf_pages: stats.tree_leaf_pages,
            buffer_segment_pages: stats.tree_segment_pages,
            buffered_bytes: stats.tree_buffered_bytes,
            leaf_page_bytes: stats.tree_leaf_page_bytes,
            leaf_fill: stats.leaf_fill(),
            buffer_segment_page_bytes: stats.tree_segment_page_bytes,
            estimated_live_bytes: stats.space_live_bytes,
            estimated_garbage_bytes: stats.space_garbage_bytes,
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
            committed_utc: committed.map(text::utc),
        },
        options: stored_options(&args.db, &options),
        this_open: this_open(&stats),
    };
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        text::write_text(&report, out)?;
    }
    Ok(())
}

/// Live records and their key + value bytes in the keyspace `name` (the
/// default one when empty).
fn scan_keyspace(db: &Db, name: &[u8]) -> Result<Live> {
    let describe = || {
        if name.is_empty() {
            "scanning the default keyspace".to_string()
        } else {
            format!("scanning keyspace {:?}", String::from_utf8_lossy(name))
        }
    };
    let iter: Iter = if name.is_empty() {
        db.range::<&[u8], _>(..)
    } else {
        // The name comes from the catalog of this open, which no other
        // handle changes, so this opens the keyspace and creates nothing.
        db.keyspace(name)
            .with_context(describe)?
            .range::<&[u8], _>(..)
    };
    let mut live = Live {
        keys: 0,
        user_bytes: 0,
    };
    for item in iter {
        let (key, value) = item.with_context(describe)?;
        live.keys += 1;
        live.user_bytes += (key.len() + value.len()) as u64;
    }
    Ok(live)
}

fn stored_options(path: &Path, o: &Options) -> StoredOptions {
    StoredOptions {
        stored: path.join(OPTIONS_FILE_NAME).exists(),
        leaf_size_bytes: o.leaf_size_bytes,
        node_size_bytes: o.node_size_bytes,
        checkpoint_distance_bytes: o.checkpoint_distance_bytes,
        write_only_checkpoint_distance_bytes: o.write_only_checkpoint_distance_bytes,
        cache_capacity_bytes: o.cache_capacity_bytes,
        checkpoint_threads: o.checkpoint_threads,
        filter_bits_per_key: o.filter_bits_per_key,
        direct_io: o.direct_io,
        wal_segment_size_bytes: o.wal_segment_size_bytes,
        compression: o.compression.to_string(),
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
        compression_input_bytes: stats.compression_input_bytes,
        compression_output_bytes: stats.compression_output_bytes,
        compression_ratio: (stats.compression_output_bytes > 0).then(|| stats.compression_ratio()),
    }
}

/// Allocated bytes of the files in `dir`, the WAL directory summed up.
fn disk_usage(dir: &Path) -> Result<Disk> {
    let mut disk = Disk {
        bytes_on_disk: 0,
        files: Vec::new(),
        wal_segments: 0,
        wal_bytes_on_disk: 0,
        value_files: 0,
        value_bytes_on_disk: 0,
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
            if name == "values" {
                disk.value_files += files;
                disk.value_bytes_on_disk += bytes;
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
