//! `backup`: a consistent copy of a database, in use or not.

use std::io::Write;

use anyhow::{Context as _, Result};
use serde::Serialize;
use turtlekv::Db;

use crate::cli::BackupArgs;
use crate::db::require_database;

#[derive(Debug, Serialize)]
struct Report {
    source: String,
    destination: String,
    /// The sequence number the copy holds the database at.
    sequence: u64,
    pages: u64,
    page_bytes: u64,
    log_entries: u64,
    value_files: u64,
    value_file_bytes: u64,
}

pub fn backup(args: &BackupArgs, out: &mut dyn Write) -> Result<()> {
    require_database(&args.db)?;
    // Opens the database here, or asks the process holding it.
    let r = Db::backup_at(&args.db, &args.dest).with_context(|| {
        format!(
            "backing up {} to {}",
            args.db.display(),
            args.dest.display()
        )
    })?;
    let report = Report {
        source: args.db.display().to_string(),
        destination: args.dest.display().to_string(),
        sequence: r.sequence,
        pages: r.pages,
        page_bytes: r.page_bytes,
        log_entries: r.log_entries,
        value_files: r.value_files,
        value_file_bytes: r.value_file_bytes,
    };
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "backed up {} to {} at sequence number {}: {} pages ({} bytes), {} logged entries and {} value files ({} bytes)",
            report.source,
            report.destination,
            report.sequence,
            report.pages,
            report.page_bytes,
            report.log_entries,
            report.value_files,
            report.value_file_bytes
        )?;
    }
    Ok(())
}
