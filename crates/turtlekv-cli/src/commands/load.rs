//! `load`: records from a JSON Lines or CSV file into the database.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::time::Instant;

use anyhow::{Context as _, Result, anyhow};
use indicatif::{ProgressBar, ProgressStyle};
use turtlekv::{Db, Keyspace, WriteBatch, WriteOptions};

use crate::cli::LoadArgs;
use crate::db::{Create, check_entry, open};
use crate::keyspace::open_keyspace;
use crate::records::{detect_format, read_records};
use crate::size::format_size;

/// Records per write batch: one WAL record and one group commit each, so
/// the WAL is written in large pieces.
const BATCH_RECORDS: usize = 1024;
/// Key and value bytes per batch, so that batches of large values stay
/// far below the WAL's record limit.
const BATCH_BYTES: u64 = 4 << 20;

pub fn load(args: &LoadArgs, out: &mut dyn Write) -> Result<()> {
    let keyspace = args.keyspace.name()?;
    // The input first: a mistyped file name must not create an empty
    // database.
    let (reader, len): (Box<dyn Read>, Option<u64>) = if args.file == "-" {
        (Box::new(std::io::stdin().lock()), None)
    } else {
        let file = File::open(&args.file).with_context(|| format!("opening {}", args.file))?;
        let len = file.metadata().ok().map(|m| m.len());
        (Box::new(file), len)
    };
    let bar = progress_bar(len);
    let mut input = BufReader::with_capacity(1 << 16, bar.wrap_read(reader));
    let format = match args.format {
        Some(format) => format,
        None => detect_format(&args.file, &mut input)?,
    };
    let started = Instant::now();
    // The database is opened (created) only once the first record is known
    // good: a file that is not what it seems (a bad CSV header, a bad first
    // line) must not leave an empty database (or keyspace) behind either.
    let mut loader = Loader {
        db: None,
        db_path: &args.db,
        keyspace_name: keyspace,
        keyspace: None,
        batch: WriteBatch::new(),
        records: 0,
        bytes: 0,
    };
    let read = read_records(format, input, &mut |key, value, line| {
        check_entry(&key, Some(&value)).map_err(|e| anyhow!("line {line}: {e}"))?;
        // This database's own limits, lower with small pages: refused here,
        // with the line, rather than as a whole batch.
        loader
            .db()?
            .check_entry(&key, Some(&value))
            .map_err(|e| anyhow!("line {line}: {e}"))?;
        loader.add(&key, &value)
    })
    .and_then(|()| loader.write_batch())
    // An empty input loads into an empty database (`dump | load` of one),
    // or keyspace.
    .and_then(|()| loader.keyspace().map(drop));
    // What was written stays, so make it durable whether or not the input
    // ended well.
    let synced = match &loader.db {
        Some(db) => db.flush_wal().context("syncing the WAL"),
        None => Ok(()),
    };
    bar.finish_and_clear();
    let (records, bytes) = (loader.records, loader.bytes);
    let into = match keyspace {
        Some(name) => format!("keyspace {name:?} of {}", args.db.display()),
        None => args.db.display().to_string(),
    };
    read.with_context(|| {
        format!(
            "loading {} into {into} ({records} records were loaded before the error)",
            args.file,
        )
    })?;
    synced?;
    let elapsed = started.elapsed().as_secs_f64();
    let stats = loader.db()?.stats();
    writeln!(
        out,
        "loaded {records} records ({} of keys and values) into {into} in {elapsed:.2} s \
         ({:.0} records/s); write amplification of this load: {:.2}",
        format_size(bytes),
        records as f64 / elapsed.max(1e-9),
        stats.write_amplification(),
    )?;
    Ok(())
}

/// Gathers records into batches.
struct Loader<'a> {
    /// Opened at the first good record.
    db: Option<Db>,
    db_path: &'a std::path::Path,
    /// The keyspace to load into (`None`: the default one), and its
    /// handle, opened (created) with the first record it takes.
    keyspace_name: Option<&'a str>,
    keyspace: Option<Keyspace>,
    batch: WriteBatch,
    /// Records and key+value bytes written so far.
    records: u64,
    bytes: u64,
}

impl Loader<'_> {
    fn db(&mut self) -> Result<&Db> {
        if self.db.is_none() {
            self.db = Some(open(self.db_path, Create::IfMissing)?);
        }
        Ok(self.db.as_ref().expect("opened above"))
    }

    /// The named keyspace to load into, opened or created; `None` for the
    /// default keyspace.
    fn keyspace(&mut self) -> Result<Option<&Keyspace>> {
        let Some(name) = self.keyspace_name else {
            self.db()?;
            return Ok(None);
        };
        if self.keyspace.is_none() {
            let db_path = self.db_path;
            let keyspace = open_keyspace(self.db()?, db_path, Create::IfMissing, name)?;
            self.keyspace = Some(keyspace);
        }
        Ok(self.keyspace.as_ref())
    }

    fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.keyspace()?;
        match &self.keyspace {
            Some(keyspace) => self.batch.put_in(keyspace, key, value),
            None => self.batch.put(key, value),
        };
        if self.batch.len() >= BATCH_RECORDS || self.batch.user_bytes() >= BATCH_BYTES {
            self.write_batch()?;
        }
        Ok(())
    }

    fn write_batch(&mut self) -> Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        let (records, bytes) = (batch.len() as u64, batch.user_bytes());
        self.db()?
            .write(batch, &WriteOptions::default())
            .context("writing a batch")?;
        self.records += records;
        self.bytes += bytes;
        Ok(())
    }
}

/// Bytes read of a file, or a spinner for standard input; indicatif draws
/// nothing when standard error is not a terminal.
fn progress_bar(len: Option<u64>) -> ProgressBar {
    match len {
        Some(len) => ProgressBar::new(len).with_style(
            ProgressStyle::with_template(
                "loading [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .expect("the template is valid")
            .progress_chars("=> "),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} loading: {bytes} read, {bytes_per_sec}")
                .expect("the template is valid"),
        ),
    }
}
