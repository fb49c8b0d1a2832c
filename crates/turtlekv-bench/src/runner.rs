//! Runs one phase (the load or a workload) on one engine with several
//! threads, timing every operation and checking every read.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use hdrhistogram::Histogram;
use indicatif::ProgressBar;

use crate::engines::Engine;
use crate::generator::{Distribution, InsertCounter, KeyChooser, scan_len};
use crate::keys::{KeyFormat, ValueCodec};
use crate::rng::Rng;
use crate::workload::{OpKind, Workload};

/// YCSB's default `maxscanlength`.
pub const MAX_SCAN_LEN: u64 = 100;

/// Progress is reported in steps of this many operations, so that threads
/// do not contend on the bar's counter.
const PROGRESS_STEP_OPS: u64 = 1024;

/// What every phase of a run shares.
#[derive(Debug, Clone, Copy)]
pub struct PhaseSettings {
    pub records: u64,
    pub ops: u64,
    pub threads: usize,
    pub seed: u64,
    pub distribution: Distribution,
    pub key_format: KeyFormat,
    pub codec: ValueCodec,
}

/// Latencies of one phase, per operation kind, in nanoseconds.
#[derive(Debug)]
pub struct PhaseOutcome {
    pub ops_done: u64,
    pub elapsed: Duration,
    /// Indexed by [`OpKind::index`].
    pub latencies_ns: Vec<Histogram<u64>>,
    /// User bytes (key + value) written by the phase.
    pub user_bytes_written: u64,
}

/// Longest latency kept exactly; slower operations count as this long.
const MAX_TRACKED_LATENCY_NS: u64 = 60 * 1_000_000_000;

/// A histogram of nanoseconds from 1 ns to a minute, 3 significant digits.
/// Fixed bounds: an auto-resizing histogram would saturate instead of grow
/// under `saturating_record`, and resizing in the timed loop costs time.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_TRACKED_LATENCY_NS, 3).expect("valid histogram bounds")
}

fn new_histograms() -> Vec<Histogram<u64>> {
    OpKind::ALL.iter().map(|_| latency_histogram()).collect()
}

/// Runs `workload` on `engine`. `counter` holds the records that exist
/// and persists across the phases of one engine.
pub fn run_phase(
    engine: &dyn Engine,
    workload: Workload,
    settings: &PhaseSettings,
    counter: &InsertCounter,
    progress: &ProgressBar,
) -> Result<PhaseOutcome> {
    let total_ops = if workload == Workload::Load {
        settings.records
    } else {
        settings.ops
    };
    let threads = settings.threads.max(1) as u64;
    let started = Instant::now();
    let per_thread: Vec<Result<ThreadOutcome>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let ops = total_ops / threads + u64::from(t < total_ops % threads);
                let worker = Worker::new(engine, workload, settings, counter, progress, t);
                scope.spawn(move || worker.run(ops))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| bail!("a benchmark thread panicked"))
            })
            .collect()
    });
    let elapsed = started.elapsed();
    let mut latencies_ns = new_histograms();
    let mut ops_done = 0;
    let mut user_bytes_written = 0;
    for outcome in per_thread {
        let outcome = outcome?;
        ops_done += outcome.ops_done;
        user_bytes_written += outcome.user_bytes_written;
        for (all, mine) in latencies_ns.iter_mut().zip(&outcome.latencies_ns) {
            all.add(mine).expect("histograms share bounds");
        }
    }
    Ok(PhaseOutcome {
        ops_done,
        elapsed,
        latencies_ns,
        user_bytes_written,
    })
}

struct ThreadOutcome {
    ops_done: u64,
    latencies_ns: Vec<Histogram<u64>>,
    user_bytes_written: u64,
}

/// One benchmark thread's state: its own generator streams and buffers.
struct Worker<'a> {
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
    user_bytes_written: u64,
}

impl<'a> Worker<'a> {
    fn new(
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
            user_bytes_written: 0,
        }
    }

    fn run(mut self, ops: u64) -> Result<ThreadOutcome> {
        let mix = self.workload.mix();
        let mut latencies_ns = new_histograms();
        let mut ops_done = 0;
        while ops_done < ops {
            let kind = mix.choose(&mut self.rng);
            let started = Instant::now();
            match kind {
                OpKind::Insert => {
                    if !self.insert()? {
                        break;
                    }
                }
                OpKind::Read => self.read()?,
                OpKind::Update => self.update()?,
                OpKind::Scan => self.scan()?,
                OpKind::ReadModifyWrite => {
                    self.read()?;
                    self.update()?;
                }
            }
            let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            latencies_ns[kind.index()].saturating_record(nanos.max(1));
            ops_done += 1;
            if ops_done % PROGRESS_STEP_OPS == 0 {
                self.progress.inc(PROGRESS_STEP_OPS);
            }
        }
        self.progress.inc(ops_done % PROGRESS_STEP_OPS);
        Ok(ThreadOutcome {
            ops_done,
            latencies_ns,
            user_bytes_written: self.user_bytes_written,
        })
    }

    /// Inserts the next new record; `false` once the load has inserted all
    /// records.
    fn insert(&mut self) -> Result<bool> {
        let record = self.counter.reserve();
        if self.workload == Workload::Load && record >= self.settings.records {
            return Ok(false);
        }
        self.write(record)?;
        self.counter.acknowledge(record);
        Ok(true)
    }

    fn update(&mut self) -> Result<()> {
        let record = self.pick();
        self.write(record)
    }

    fn write(&mut self, record: u64) -> Result<()> {
        self.settings.key_format.encode(record, &mut self.key);
        let nonce = self.rng.next_u64();
        self.settings
            .codec
            .encode(&self.key, nonce, &mut self.value);
        self.engine.put(&self.key, &self.value)?;
        self.user_bytes_written += (self.key.len() + self.value.len()) as u64;
        Ok(())
    }

    fn pick(&mut self) -> u64 {
        let limit = self.counter.limit();
        self.chooser.next(&mut self.rng, limit)
    }

    /// Reads an existing record; it must be there with a value written
    /// for its key.
    fn read(&mut self) -> Result<()> {
        let record = self.pick();
        self.settings.key_format.encode(record, &mut self.key);
        if !self.engine.get(&self.key, &mut self.read_buf)? {
            bail!(
                "verification failed in workload {}: record {record} (key {}) was written but the read found nothing",
                self.workload,
                hex(&self.key)
            );
        }
        if !self.settings.codec.verify(&self.key, &self.read_buf) {
            bail!(
                "verification failed in workload {}: the value read for record {record} (key {}) is not one written for that key",
                self.workload,
                hex(&self.key)
            );
        }
        Ok(())
    }

    /// Scans from an existing record; keys must ascend from the start key
    /// and every value must belong to its key.
    fn scan(&mut self) -> Result<()> {
        let record = self.pick();
        self.settings.key_format.encode(record, &mut self.key);
        let len = scan_len(&mut self.rng, MAX_SCAN_LEN) as usize;
        let codec = self.settings.codec;
        let start = self.key.as_slice();
        let mut previous: Option<Vec<u8>> = None;
        let mut problem: Option<String> = None;
        let visited = self.engine.scan(start, len, &mut |key, value| {
            if problem.is_some() {
                return;
            }
            let in_order = match &previous {
                Some(p) => p.as_slice() < key,
                None => key >= start,
            };
            if !in_order {
                problem = Some(format!("key {} out of order", hex(key)));
            } else if !codec.verify(key, value) {
                problem = Some(format!(
                    "value of key {} is not one written for it",
                    hex(key)
                ));
            }
            let buf = previous.get_or_insert_with(Vec::new);
            buf.clear();
            buf.extend_from_slice(key);
        })?;
        if let Some(problem) = problem {
            bail!(
                "verification failed in workload {}: scan from key {}: {problem}",
                self.workload,
                hex(start)
            );
        }
        // The start key exists, so a scan returns at least it.
        if visited == 0 || visited > len {
            bail!(
                "verification failed in workload {}: scan of {len} from existing key {} returned {visited} records",
                self.workload,
                hex(start)
            );
        }
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::{EngineConfig, EngineKind};

    fn settings(records: u64, ops: u64) -> PhaseSettings {
        PhaseSettings {
            records,
            ops,
            threads: 2,
            seed: 3,
            distribution: Distribution::Zipfian,
            key_format: KeyFormat::Binary,
            codec: ValueCodec::new(3, 32),
        }
    }

    fn open_turtlekv(dir: &std::path::Path) -> Box<dyn Engine> {
        let config = EngineConfig {
            cache_bytes: 8 << 20,
            direct_io: false,
            sync: false,
            threads: 2,
        };
        EngineKind::Turtlekv.open(dir, &config).unwrap()
    }

    #[test]
    fn every_workload_runs_and_counts_its_operations() {
        let dir = tempfile::tempdir().unwrap();
        let engine = open_turtlekv(dir.path());
        let settings = settings(2_000, 1_000);
        let counter = InsertCounter::new(0);
        let hidden = ProgressBar::hidden();
        let load = run_phase(
            engine.as_ref(),
            Workload::Load,
            &settings,
            &counter,
            &hidden,
        )
        .unwrap();
        assert_eq!(load.ops_done, 2_000);
        assert_eq!(counter.limit(), 2_000);
        assert_eq!(load.latencies_ns[OpKind::Insert.index()].len(), 2_000);
        assert_eq!(load.user_bytes_written, 2_000 * (8 + 32));
        // Latencies are real durations, not clipped to the histogram's
        // lowest bucket: a put takes more than 10 ns.
        let inserts = &load.latencies_ns[OpKind::Insert.index()];
        assert!(
            inserts.value_at_quantile(0.5) > 10,
            "{}",
            inserts.value_at_quantile(0.5)
        );
        for workload in &Workload::ALL[1..] {
            let outcome =
                run_phase(engine.as_ref(), *workload, &settings, &counter, &hidden).unwrap();
            assert_eq!(outcome.ops_done, 1_000, "{workload}");
            let recorded: u64 = outcome.latencies_ns.iter().map(|h| h.len()).sum();
            assert_eq!(recorded, 1_000, "{workload}");
        }
        // D and E inserted about 5% of their operations each.
        assert!(
            counter.limit() > 2_050 && counter.limit() < 2_200,
            "{}",
            counter.limit()
        );
    }

    /// An engine that loses every write: the driver must notice.
    struct Forgetful;

    impl Engine for Forgetful {
        fn put(&self, _: &[u8], _: &[u8]) -> Result<()> {
            Ok(())
        }
        fn get(&self, _: &[u8], _: &mut Vec<u8>) -> Result<bool> {
            Ok(false)
        }
        fn scan(&self, _: &[u8], _: usize, _: &mut dyn FnMut(&[u8], &[u8])) -> Result<usize> {
            Ok(0)
        }
        fn persist(&self) -> Result<()> {
            Ok(())
        }
    }

    /// An engine that returns records out of order and with foreign values.
    struct Scrambling(Box<dyn Engine>);

    impl Engine for Scrambling {
        fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
            self.0.put(key, value)
        }
        fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
            self.0.get(key, out)
        }
        fn scan(
            &self,
            start: &[u8],
            count: usize,
            visit: &mut dyn FnMut(&[u8], &[u8]),
        ) -> Result<usize> {
            let mut items = Vec::new();
            self.0.scan(start, count, &mut |k, v| {
                items.push((k.to_vec(), v.to_vec()))
            })?;
            items.reverse();
            for (k, v) in &items {
                visit(k, v);
            }
            Ok(items.len())
        }
        fn persist(&self) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lost_writes_fail_loudly() {
        let settings = settings(100, 100);
        let counter = InsertCounter::new(0);
        let hidden = ProgressBar::hidden();
        run_phase(&Forgetful, Workload::Load, &settings, &counter, &hidden).unwrap();
        let err = run_phase(&Forgetful, Workload::C, &settings, &counter, &hidden).unwrap_err();
        assert!(err.to_string().contains("found nothing"), "{err}");
    }

    #[test]
    fn unordered_scans_fail_loudly() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Scrambling(open_turtlekv(dir.path()));
        let settings = settings(500, 200);
        let counter = InsertCounter::new(0);
        let hidden = ProgressBar::hidden();
        run_phase(&engine, Workload::Load, &settings, &counter, &hidden).unwrap();
        let err = run_phase(&engine, Workload::E, &settings, &counter, &hidden).unwrap_err();
        assert!(err.to_string().contains("out of order"), "{err}");
    }
}
