//! `check`: the engine's full integrity check, reported for people or
//! machines, with exit code 6 on corruption.

use std::io::Write;

use anyhow::{Context as _, Result, anyhow};
use serde::Serialize;
use turtlekv::CheckReport;

use crate::cli::CheckArgs;
use crate::db::open;
use crate::size::format_size;

#[derive(Debug, Serialize)]
struct Report {
    path: String,
    ok: bool,
    /// What was verified, when the check got through.
    verified: Option<Verified>,
    corruption: Option<Corruption>,
}

#[derive(Debug, Serialize)]
struct Verified {
    wal_segments: u64,
    wal_records: u64,
    wal_bytes: u64,
    memtable_keys: u64,
    tree_pages: u64,
    tree_keys: u64,
    /// Bytes of a torn WAL tail that this check's own open cut off (the end
    /// of the log's unsynced writes, torn by a crash, and any segment after
    /// it; nothing acknowledged as synced is lost): the evidence is gone
    /// afterwards, so the check says so.
    wal_tail_bytes_dropped: u64,
    /// WAL segments this check's own open found missing and opened
    /// without (only with `--wal-recovery point-in-time`).
    wal_missing_segments: u64,
    /// Bytes of WAL records after the last consistent point that this
    /// check's own open dropped (only with `--wal-recovery point-in-time`).
    wal_recovery_bytes_dropped: u64,
    /// Superblock slots that failed to validate at this check's own open
    /// (a commit torn by a crash, or damage), which the open rewrote.
    superblock_slots_damaged: u64,
    /// Both superblock slots were read and agree.
    superblock: bool,
    /// A stored `OPTIONS` file was read and its checksum held.
    options_file: bool,
}

#[derive(Debug, Serialize)]
struct Corruption {
    /// `open` (found while recovering: superblock, WAL replay, node pages)
    /// or `check` (found by the full check).
    found_during: &'static str,
    file: String,
    offset: u64,
    reason: String,
}

pub fn check(args: &CheckArgs, out: &mut dyn Write) -> Result<()> {
    let path = args.db.display().to_string();
    // Corruption can stop the open itself (a bad WAL record, superblock or
    // node page), so that is part of the check too.
    let (stage, outcome) = match open(&args.db, args.read_only.create()) {
        Ok(db) => {
            let recovered = db.stats();
            (
                "check",
                db.check()
                    .map(|r| (r, recovered))
                    .map_err(anyhow::Error::from),
            )
        }
        Err(err) if corruption(&err, "open").is_some() => ("open", Err(err)),
        Err(err) => return Err(err),
    };
    let report = match &outcome {
        Ok((r, recovered)) => Report {
            path: path.clone(),
            ok: true,
            verified: Some(verified(r, recovered)),
            corruption: None,
        },
        Err(err) => Report {
            path: path.clone(),
            ok: false,
            verified: None,
            // Anything but corruption (an I/O error, say) is no verdict on
            // the data: fail as such.
            corruption: Some(
                corruption(err, stage).ok_or_else(|| anyhow!("checking {path}: {err:#}"))?,
            ),
        },
    };
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        write_text(&report, out)?;
    }
    outcome
        .map(|_| ())
        .with_context(|| format!("the check of {path} found corruption"))
}

/// What the check verified, and what its own open recovered (`stats`
/// of the open handle).
fn verified(r: &CheckReport, recovered: &turtlekv::Stats) -> Verified {
    Verified {
        wal_segments: r.wal_segments,
        wal_records: r.wal_records,
        wal_bytes: r.wal_bytes,
        memtable_keys: r.memtable_keys,
        tree_pages: r.tree_pages,
        tree_keys: r.tree_keys,
        wal_tail_bytes_dropped: recovered.wal_tail_bytes_dropped,
        wal_missing_segments: recovered.wal_missing_segments,
        wal_recovery_bytes_dropped: recovered.wal_recovery_bytes_dropped,
        superblock_slots_damaged: recovered.superblock_slots_damaged,
        superblock: r.superblock,
        options_file: r.options_file,
    }
}

/// The engine's corruption error inside `err`, if that is what it is.
fn corruption(err: &anyhow::Error, found_during: &'static str) -> Option<Corruption> {
    err.chain()
        .filter_map(|c| c.downcast_ref::<turtlekv::Error>())
        .find_map(|e| match e {
            turtlekv::Error::Corruption {
                file,
                offset,
                reason,
            } => Some(Corruption {
                found_during,
                file: file.display().to_string(),
                offset: *offset,
                reason: reason.clone(),
            }),
            _ => None,
        })
}

fn write_text(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    if let Some(v) = &r.verified {
        writeln!(out, "{}: OK", r.path)?;
        writeln!(
            out,
            "  WAL        {} records in {} segments ({}) verified",
            v.wal_records,
            v.wal_segments,
            format_size(v.wal_bytes)
        )?;
        if v.wal_tail_bytes_dropped > 0 {
            writeln!(
                out,
                "  recovery   cut a torn WAL tail ({} bytes): unsynced writes a crash cut short",
                v.wal_tail_bytes_dropped
            )?;
        }
        if v.wal_missing_segments > 0 || v.wal_recovery_bytes_dropped > 0 {
            writeln!(
                out,
                "  recovery   point in time: {} missing WAL segments opened without, {} bytes of \
                 WAL records after the last consistent point dropped",
                v.wal_missing_segments, v.wal_recovery_bytes_dropped
            )?;
        }
        if v.superblock_slots_damaged > 0 {
            writeln!(
                out,
                "  recovery   {} superblock slot failed to validate (a commit torn by a crash, \
                 or damage); the open used the other and rewrote it",
                v.superblock_slots_damaged
            )?;
        }
        if v.superblock {
            writeln!(out, "  superblock both slots verified")?;
        }
        if v.options_file {
            writeln!(out, "  OPTIONS    checksum verified")?;
        }
        writeln!(out, "  MemTables  {} keys, in order", v.memtable_keys)?;
        writeln!(
            out,
            "  tree       {} pages verified (checksums and invariants), {} live keys",
            v.tree_pages, v.tree_keys
        )?;
    }
    if let Some(c) = &r.corruption {
        writeln!(out, "{}: CORRUPT", r.path)?;
        writeln!(out, "  file       {}", c.file)?;
        writeln!(out, "  offset     {}", c.offset)?;
        writeln!(out, "  problem    {}", c.reason)?;
        let during = if c.found_during == "open" {
            "opening the database (recovery reads the superblock, node pages and WAL)"
        } else {
            "the full check"
        };
        writeln!(out, "  found by   {during}")?;
    }
    Ok(())
}
