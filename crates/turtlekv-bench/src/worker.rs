//! One benchmark thread: draws operations, runs them on the engine, times
//! only the engine calls, and checks every answer.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use hdrhistogram::Histogram;
use indicatif::ProgressBar;

use crate::engines::Engine;
use crate::generator::{InsertCounter, KeyChooser, scan_len};
use crate::rng::Rng;
use crate::runner::{PhaseSettings, new_histograms};
use crate::workload::{OpKind, Workload};

/// YCSB's default `maxscanlength`.
pub const MAX_SCAN_LEN: u64 = 100;

/// Progress is reported in steps of this many operations, so that threads
/// do not contend on the bar's counter.
const PROGRESS_STEP_OPS: u64 = 1024;

/// What one thread measured.
pub struct ThreadOutcome {
    pub ops_done: u64,
    /// Indexed by [`OpKind::index`].
    pub latencies_ns: Vec<Histogram<u64>>,
    pub user_bytes_written: u64,
    /// Commits of read-modify-write transactions that were refused and
    /// retried (`--rmw-transactions`).
    pub rmw_retries: u64,
}

/// One thread's state: its own generator streams and reused buffers.
pub struct Worker<'a> {
    engine: &'a dyn Engine,
    workload: Workload,
    settings: &'a PhaseSettings,
    counter: &'a InsertCounter,
    progress: &'a ProgressBar,
    rng: Rng,
    chooser: KeyChooser,
    key: Vec<u8>,
    value: Vec<u8>,
    read_buf: Vec<u8>,
    /// Keys and values a scan returned, back to back, checked after the
    /// scan's timer stops.
    scan_bytes: Vec<u8>,
    /// (key length, value length) of each scanned record in `scan_bytes`.
    scan_lens: Vec<(usize, usize)>,
    user_bytes_written: u64,
    rmw_retries: u64,
}

impl<'a> Worker<'a> {
    pub fn new(
        engine: &'a dyn Engine,
        workload: Workload,
        settings: &'a PhaseSettings,
        counter: &'a InsertCounter,
        progress: &'a ProgressBar,
        thread: u64,
    ) -> Worker<'a> {
        let mix = workload.mix();
        let existing = counter.limit();
        // As YCSB: scrambled domains leave room for twice the expected
        // inserts, so new records can become hot too.
        let expected_inserts = (settings.ops as f64 * mix.insert_fraction() * 2.0) as u64;
        let items = if workload.reads_latest() {
            existing
        } else {
            existing + expected_inserts
        };
        let stream = (workload as u64) << 32 | thread;
        Worker {
            engine,
            workload,
            settings,
            counter,
            progress,
            rng: Rng::derive(settings.seed, stream),
            chooser: KeyChooser::new(settings.distribution, workload.reads_latest(), items),
            key: Vec::new(),
            value: Vec::new(),
            read_buf: Vec::new(),
            scan_bytes: Vec::new(),
            scan_lens: Vec::new(),
            user_bytes_written: 0,
            rmw_retries: 0,
        }
    }

    /// Performs `ops` operations of the workload's mix.
    pub fn run(mut self, ops: u64) -> Result<ThreadOutcome> {
        let mix = self.workload.mix();
        let mut latencies_ns = new_histograms();
        for done in 1..=ops {
            let kind = mix.choose(&mut self.rng);
            let engine_time = match kind {
                OpKind::Insert => self.insert()?,
                OpKind::Read => {
                    let record = self.pick();
                    self.read(record)?
                }
                OpKind::Update => {
                    let record = self.pick();
                    self.write(record)?
                }
                OpKind::Scan => self.scan()?,
                OpKind::ReadModifyWrite if self.settings.rmw_transactions => {
                    let record = self.pick();
                    self.read_modify_write(record)?
                }
                OpKind::ReadModifyWrite => {
                    let record = self.pick();
                    self.read(record)? + self.write(record)?
                }
            };
            let nanos = u64::try_from(engine_time.as_nanos()).unwrap_or(u64::MAX);
            latencies_ns[kind.index()].saturating_record(nanos.max(1));
            if done % PROGRESS_STEP_OPS == 0 {
                self.progress.inc(PROGRESS_STEP_OPS);
            }
        }
        self.progress.inc(ops % PROGRESS_STEP_OPS);
        Ok(ThreadOutcome {
            ops_done: ops,
            latencies_ns,
            user_bytes_written: self.user_bytes_written,
            rmw_retries: self.rmw_retries,
        })
    }

    fn pick(&mut self) -> u64 {
        let limit = self.counter.limit();
        self.chooser.next(&mut self.rng, limit)
    }

    /// Inserts the next new record; readers may pick it once it is done.
    fn insert(&mut self) -> Result<Duration> {
        let record = self.counter.reserve();
        let took = self.write(record)?;
        self.counter.acknowledge(record);
        Ok(took)
    }

    /// Puts `record`'s key and a fresh value for it in the buffers.
    fn encode_fresh(&mut self, record: u64) {
        self.settings.key_format.encode(record, &mut self.key);
        let nonce = self.rng.next_u64();
        self.settings
            .codec
            .encode(&self.key, nonce, &mut self.value);
    }

    /// Writes a fresh value to `record`; returns the engine's time.
    fn write(&mut self, record: u64) -> Result<Duration> {
        self.encode_fresh(record);
        let started = Instant::now();
        self.engine.put(&self.key, &self.value)?;
        let took = started.elapsed();
        self.user_bytes_written += (self.key.len() + self.value.len()) as u64;
        Ok(took)
    }

    /// Reads `record` and writes a fresh value to it in one transaction
    /// (`--rmw-transactions`), retries included; the read is checked as
    /// [`Worker::read`] checks it. Returns the engine's time.
    fn read_modify_write(&mut self, record: u64) -> Result<Duration> {
        self.encode_fresh(record);
        let started = Instant::now();
        let outcome = self
            .engine
            .read_modify_write(&self.key, &self.value, &mut self.read_buf)?;
        let took = started.elapsed();
        self.user_bytes_written += (self.key.len() + self.value.len()) as u64;
        self.rmw_retries += outcome.retries;
        self.check_read(record, outcome.found)?;
        Ok(took)
    }

    /// Reads `record`, which exists; it must be found with a value written
    /// for its key. Returns the engine's time.
    fn read(&mut self, record: u64) -> Result<Duration> {
        self.settings.key_format.encode(record, &mut self.key);
        let started = Instant::now();
        let found = self.engine.get(&self.key, &mut self.read_buf)?;
        let took = started.elapsed();
        self.check_read(record, found)?;
        Ok(took)
    }

    /// Whether the read of `record` into `read_buf` found a value written
    /// for its key.
    fn check_read(&self, record: u64, found: bool) -> Result<()> {
        if !found {
            bail!(
                "verification failed in workload {}: record {record} (key {}) was written but \
                 the read found nothing",
                self.workload,
                hex(&self.key)
            );
        }
        if !self.settings.codec.verify(&self.key, &self.read_buf) {
            bail!(
                "verification failed in workload {}: the value read for record {record} (key {}) \
                 is not one written for that key",
                self.workload,
                hex(&self.key)
            );
        }
        Ok(())
    }

    /// Scans from an existing record. Keys must ascend from the start key,
    /// every value must belong to its key, and at least the start record
    /// must come back. Returns the engine's time.
    fn scan(&mut self) -> Result<Duration> {
        let record = self.pick();
        self.settings.key_format.encode(record, &mut self.key);
        let len = scan_len(&mut self.rng, MAX_SCAN_LEN) as usize;
        self.scan_bytes.clear();
        self.scan_lens.clear();
        let (bytes, lens) = (&mut self.scan_bytes, &mut self.scan_lens);
        let started = Instant::now();
        let visited = self.engine.scan(&self.key, len, &mut |key, value| {
            bytes.extend_from_slice(key);
            bytes.extend_from_slice(value);
            lens.push((key.len(), value.len()));
        })?;
        let took = started.elapsed();
        if let Some(problem) = self.scan_problem(len, visited) {
            bail!(
                "verification failed in workload {}: scan of {len} from key {}: {problem}",
                self.workload,
                hex(&self.key)
            );
        }
        Ok(took)
    }

    fn scan_problem(&self, len: usize, visited: usize) -> Option<String> {
        if visited == 0 || visited > len || visited != self.scan_lens.len() {
            return Some(format!(
                "{visited} records reported, {} visited (the start key exists)",
                self.scan_lens.len()
            ));
        }
        let mut previous: &[u8] = &self.key;
        let mut offset = 0;
        for (i, &(key_len, value_len)) in self.scan_lens.iter().enumerate() {
            let key = &self.scan_bytes[offset..offset + key_len];
            let value = &self.scan_bytes[offset + key_len..offset + key_len + value_len];
            offset += key_len + value_len;
            // The first key may equal the start key; later ones must grow.
            let in_order = if i == 0 {
                key >= previous
            } else {
                key > previous
            };
            if !in_order {
                return Some(format!("key {} out of order", hex(key)));
            }
            if !self.settings.codec.verify(key, value) {
                return Some(format!(
                    "value of key {} is not one written for it",
                    hex(key)
                ));
            }
            previous = key;
        }
        None
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
