//! `dump`: every record, in key order, in a format `load` reads back.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context as _, Result};
use indicatif::{ProgressBar, ProgressStyle};
use turtlekv::Snapshot;

use crate::cli::DumpArgs;
use crate::encoding::Encoding;
use crate::error::usage;
use crate::keyspace::Target;
use crate::records::{CsvWriter, Format, json_line};

pub fn dump(args: &DumpArgs, stdout: &mut dyn Write) -> Result<()> {
    let keyspace = args.keyspace.name()?;
    let encoding = args.encoding.encoding();
    if let Some(path) = &args.output {
        refuse_output_inside(&args.db, path)?;
    }
    let target = Target::open(&args.db, args.read_only.create(), keyspace)?;
    // One point in time for the whole dump (and both CSV passes).
    let view = Records {
        snapshot: target.db().snapshot(),
        target: &target,
    };
    let Some(path) = &args.output else {
        write_records(&view, args.format, encoding, stdout, &ProgressBar::hidden())?;
        return Ok(());
    };
    // Into a temporary file renamed over FILE at the end: a dump that
    // fails (corruption, a full disk) must not leave a truncated FILE that
    // loads without error in place of an older, complete one.
    let mut temp_name = path.file_name().unwrap_or_default().to_os_string();
    temp_name.push(format!(".{}.tmp", std::process::id()));
    let temp = path.with_file_name(temp_name);
    let file = File::create(&temp).with_context(|| format!("creating {}", temp.display()))?;
    let mut file = BufWriter::new(file);
    // A bar only when the records go to a file: on a terminal it would
    // mix with them.
    let bar = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} dumping: {pos} records, {per_sec}")
            .expect("the template is valid"),
    );
    let records = write_records(&view, args.format, encoding, &mut file, &bar);
    bar.finish_and_clear();
    let written = records.and_then(|records| {
        let file = file.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        Ok(records)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    let records = written.with_context(|| format!("writing {}", path.display()))?;
    writeln!(stdout, "dumped {records} records to {}", path.display())?;
    Ok(())
}

/// A dump written into the database's own directory would be renamed over
/// whatever file it names there (`-o ./db/SUPERBLOCK` destroys the
/// database): refused before anything is opened.
fn refuse_output_inside(db: &Path, output: &Path) -> Result<()> {
    let parent = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // Paths that do not resolve are left to the open and the create,
    // which report them.
    let (Ok(db), Ok(parent)) = (std::fs::canonicalize(db), std::fs::canonicalize(parent)) else {
        return Ok(());
    };
    if parent.starts_with(&db) {
        return Err(usage(format!(
            "refusing to write the dump inside the database directory {}",
            db.display()
        )));
    }
    Ok(())
}

/// The records of one keyspace at one point in time.
struct Records<'a> {
    snapshot: Snapshot,
    target: &'a Target,
}

impl Records<'_> {
    fn iter(&self) -> turtlekv::Iter {
        self.target.all_in(&self.snapshot)
    }
}

fn write_records(
    view: &Records<'_>,
    format: Format,
    encoding: Encoding,
    out: &mut dyn Write,
    bar: &ProgressBar,
) -> Result<u64> {
    let mut records = 0;
    match format {
        Format::Jsonl => {
            for item in view.iter() {
                let (key, value) = item.context("reading the database")?;
                writeln!(out, "{}", json_line(&key, &value, encoding))?;
                records += 1;
                bar.inc(1);
            }
        }
        Format::Csv => {
            // A CSV column has one encoding, named in the header, so find
            // out first whether every key (value) can be text.
            let (mut utf8_keys, mut utf8_values) = (true, true);
            if encoding == Encoding::Utf8 {
                for item in view.iter() {
                    let (key, value) = item.context("reading the database")?;
                    utf8_keys &= std::str::from_utf8(&key).is_ok();
                    utf8_values &= std::str::from_utf8(&value).is_ok();
                    if !utf8_keys && !utf8_values {
                        break;
                    }
                }
            }
            let mut writer = CsvWriter::new(out, encoding, utf8_keys, utf8_values)?;
            for item in view.iter() {
                let (key, value) = item.context("reading the database")?;
                writer.write(&key, &value)?;
                records += 1;
                bar.inc(1);
            }
            writer.finish()?;
        }
    }
    Ok(records)
}
