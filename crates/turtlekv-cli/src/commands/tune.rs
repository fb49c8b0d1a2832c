//! `tune`: the memory knobs stored with the database (its `OPTIONS` file),
//! which every later open through `Options::load` uses.

use std::io::Write;

use anyhow::{Context as _, Result};
use turtlekv::{Db, OPTIONS_FILE_NAME, Options};

use crate::cli::TuneArgs;
use crate::db::require_database;
use crate::error::usage;
use crate::size::format_size;

pub fn tune(args: &TuneArgs, out: &mut dyn Write) -> Result<()> {
    require_database(&args.db)?;
    let before = Options::load(&args.db)
        .with_context(|| format!("reading the stored options of {}", args.db.display()))?;
    let mut after = before.clone();
    let mut changed = false;
    let mut set = |field: &mut u64, value: Option<u64>| {
        if let Some(v) = value {
            *field = v;
            changed = true;
        }
    };
    set(
        &mut after.checkpoint_distance_bytes,
        args.checkpoint_distance,
    );
    set(
        &mut after.write_only_checkpoint_distance_bytes,
        args.write_only_checkpoint_distance,
    );
    set(&mut after.cache_capacity_bytes, args.cache);
    set(&mut after.wal_segment_size_bytes, args.wal_segment_size);
    if let Some(threads) = args.checkpoint_threads {
        after.checkpoint_threads = threads;
        changed = true;
    }
    if let Some(bits) = args.filter_bits {
        after.filter_bits_per_key = bits;
        changed = true;
    }
    if let Some(direct) = args.direct_io {
        after.direct_io = direct;
        changed = true;
    }
    if let Some(percent) = args.garbage_percent {
        after.garbage_percent = percent;
        changed = true;
    }
    if let Some(compression) = args.compression {
        after.compression = compression;
        changed = true;
    }
    if !changed {
        let origin = if args.db.join(OPTIONS_FILE_NAME).exists() {
            format!("stored in {}", args.db.join(OPTIONS_FILE_NAME).display())
        } else {
            "defaults: nothing stored yet".to_string()
        };
        writeln!(out, "options of {} ({origin}):", args.db.display())?;
        return write_knobs(&before, &before, out);
    }
    // Values out of range came from the command line.
    after.validate().map_err(|e| usage(e.to_string()))?;
    // Storing is safe while another process has the database open (the
    // file is replaced atomically and read only at open), but that process
    // keeps its settings until it reopens: say so.
    let in_use = Db::is_in_use(&args.db)
        .with_context(|| format!("checking whether {} is open", args.db.display()))?;
    after
        .store(&args.db)
        .with_context(|| format!("storing options in {}", args.db.display()))?;
    writeln!(
        out,
        "stored in {}; every later turtlekv command uses them (applications: Options::load):",
        args.db.join(OPTIONS_FILE_NAME).display()
    )?;
    write_knobs(&before, &after, out)?;
    if in_use {
        writeln!(
            out,
            "note: the database is open in another process, which keeps its current settings \
             until it reopens the database"
        )?;
    }
    Ok(())
}

/// The stored knobs, marking those that changed.
fn write_knobs(before: &Options, after: &Options, out: &mut dyn Write) -> Result<()> {
    let rows = [
        (
            "checkpoint distance",
            format_size(before.checkpoint_distance_bytes),
            format_size(after.checkpoint_distance_bytes),
        ),
        (
            "write-only distance",
            format_size(before.write_only_checkpoint_distance_bytes),
            format_size(after.write_only_checkpoint_distance_bytes),
        ),
        (
            "cache",
            format_size(before.cache_capacity_bytes),
            format_size(after.cache_capacity_bytes),
        ),
        (
            "checkpoint threads",
            threads(before.checkpoint_threads),
            threads(after.checkpoint_threads),
        ),
        (
            "filter bits per key",
            before.filter_bits_per_key.to_string(),
            after.filter_bits_per_key.to_string(),
        ),
        (
            "direct I/O",
            before.direct_io.to_string(),
            after.direct_io.to_string(),
        ),
        (
            "WAL segment size",
            format_size(before.wal_segment_size_bytes),
            format_size(after.wal_segment_size_bytes),
        ),
        (
            "garbage percent",
            before.garbage_percent.to_string(),
            after.garbage_percent.to_string(),
        ),
        (
            "compression",
            before.compression.to_string(),
            after.compression.to_string(),
        ),
    ];
    for (name, old, new) in rows {
        if old == new {
            writeln!(out, "  {name:<22} {new}")?;
        } else {
            writeln!(out, "  {name:<22} {new} (was {old})")?;
        }
    }
    Ok(())
}

/// Checkpoint threads as people read them.
pub fn threads(n: usize) -> String {
    if n == 0 {
        "one per core".to_string()
    } else {
        n.to_string()
    }
}
