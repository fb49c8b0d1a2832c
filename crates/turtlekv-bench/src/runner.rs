//! Runs one phase (the load or a workload) on one engine with several
//! threads, timing every operation and checking every read.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use hdrhistogram::Histogram;
use indicatif::ProgressBar;

use crate::engines::Engine;
use crate::generator::{Distribution, InsertCounter};
use crate::keys::{KeyFormat, ValueCodec};
use crate::worker::{ThreadOutcome, Worker};
use crate::workload::{OpKind, Workload};

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
    /// Read-modify-writes as one engine transaction each
    /// (`--rmw-transactions`), not a get and then a put.
    pub rmw_transactions: bool,
}

impl PhaseSettings {
    /// Settings for the `repeat`-th run of a workload within one benchmark
    /// (0 for its first): a repeated phase draws new requests, not the
    /// same ones again, which a cache would serve from what the first run
    /// admitted. The first run keeps the run's seed, so single phases stay
    /// reproducible from `--seed`.
    pub fn for_repeat(&self, repeat: u64) -> PhaseSettings {
        PhaseSettings {
            seed: self.seed ^ repeat.wrapping_mul(0xD1B5_4A32_D192_ED03),
            ..*self
        }
    }
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
    /// Read-modify-write commits refused and retried.
    pub rmw_retries: u64,
}

/// Longest latency kept exactly; slower operations count as this long.
const MAX_TRACKED_LATENCY_NS: u64 = 60 * 1_000_000_000;

/// A histogram of nanoseconds from 1 ns to a minute, 3 significant digits.
/// Fixed bounds: an auto-resizing histogram would saturate instead of grow
/// under `saturating_record`, and resizing in the timed loop costs time.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_TRACKED_LATENCY_NS, 3).expect("valid histogram bounds")
}

pub(crate) fn new_histograms() -> Vec<Histogram<u64>> {
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
    let mut rmw_retries = 0;
    for outcome in per_thread {
        let outcome = outcome?;
        ops_done += outcome.ops_done;
        user_bytes_written += outcome.user_bytes_written;
        rmw_retries += outcome.rmw_retries;
        for (all, mine) in latencies_ns.iter_mut().zip(&outcome.latencies_ns) {
            all.add(mine).expect("histograms share bounds");
        }
    }
    Ok(PhaseOutcome {
        ops_done,
        elapsed,
        latencies_ns,
        user_bytes_written,
        rmw_retries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::{EngineConfig, EngineKind, RmwOutcome};

    fn settings(records: u64, ops: u64) -> PhaseSettings {
        PhaseSettings {
            records,
            ops,
            threads: 2,
            seed: 3,
            distribution: Distribution::Zipfian,
            key_format: KeyFormat::Binary,
            codec: ValueCodec::new(3, 32),
            rmw_transactions: false,
        }
    }

    fn open_turtlekv(dir: &std::path::Path) -> Box<dyn Engine> {
        let config = EngineConfig {
            cache_bytes: 8 << 20,
            direct_io: false,
            sync: false,
            threads: 2,
            turtlekv: crate::engines::TurtlekvKnobs::default(),
            rocksdb_memory_in_cache: false,
            peer_kv_separation: false,
            value_compressibility: 0.0,
            rmw_transactions: false,
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

    /// Logs every call, for checking which keys operations touch.
    struct Recording {
        inner: Box<dyn Engine>,
        log: std::sync::Mutex<Vec<(&'static str, Vec<u8>)>>,
    }

    impl Engine for Recording {
        fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
            self.log.lock().unwrap().push(("put", key.to_vec()));
            self.inner.put(key, value)
        }
        fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
            self.log.lock().unwrap().push(("get", key.to_vec()));
            self.inner.get(key, out)
        }
        fn scan(
            &self,
            start: &[u8],
            count: usize,
            visit: &mut dyn FnMut(&[u8], &[u8]),
        ) -> Result<usize> {
            self.inner.scan(start, count, visit)
        }
        /// Logged as "rmw"; reports one retry more than the engine made,
        /// so that the count can be followed to the phase's total.
        fn read_modify_write(
            &self,
            key: &[u8],
            value: &[u8],
            out: &mut Vec<u8>,
        ) -> Result<RmwOutcome> {
            self.log.lock().unwrap().push(("rmw", key.to_vec()));
            let outcome = self.inner.read_modify_write(key, value, out)?;
            Ok(RmwOutcome {
                retries: outcome.retries + 1,
                ..outcome
            })
        }
        fn persist(&self) -> Result<()> {
            self.inner.persist()
        }
    }

    /// A recording TurtleKV loaded with `records` by one thread, its log
    /// cleared; the settings run `ops` operations a phase on one thread.
    fn loaded_recording(
        dir: &std::path::Path,
        records: u64,
        ops: u64,
    ) -> (Recording, PhaseSettings, InsertCounter) {
        let engine = Recording {
            inner: open_turtlekv(dir),
            log: Default::default(),
        };
        let settings = PhaseSettings {
            threads: 1,
            ..settings(records, ops)
        };
        let counter = InsertCounter::new(0);
        let hidden = ProgressBar::hidden();
        run_phase(&engine, Workload::Load, &settings, &counter, &hidden).unwrap();
        engine.log.lock().unwrap().clear();
        (engine, settings, counter)
    }

    #[test]
    fn read_modify_write_writes_back_the_record_it_read() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, settings, counter) = loaded_recording(dir.path(), 1_000, 2_000);
        let hidden = ProgressBar::hidden();
        let outcome = run_phase(&engine, Workload::F, &settings, &counter, &hidden).unwrap();
        let rmws = outcome.latencies_ns[OpKind::ReadModifyWrite.index()].len();
        assert!(rmws > 800, "{rmws}");
        let log = engine.log.lock().unwrap();
        // F only reads, or reads then writes: every put follows a get of
        // the same key.
        let puts = log.iter().filter(|(op, _)| *op == "put").count();
        assert_eq!(puts as u64, rmws);
        for pair in log.windows(2) {
            if pair[1].0 == "put" {
                assert_eq!(pair[0], ("get", pair[1].1.clone()));
            }
        }
        assert_eq!(outcome.rmw_retries, 0);
    }

    /// With `--rmw-transactions` each read-modify-write is one engine
    /// call, checked and timed as one operation, and its retries add up
    /// to the phase's.
    #[test]
    fn read_modify_writes_as_transactions_are_one_call_each() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, settings, counter) = loaded_recording(dir.path(), 1_000, 2_000);
        let settings = PhaseSettings {
            rmw_transactions: true,
            ..settings
        };
        let hidden = ProgressBar::hidden();
        let outcome = run_phase(&engine, Workload::F, &settings, &counter, &hidden).unwrap();
        let rmws = outcome.latencies_ns[OpKind::ReadModifyWrite.index()].len();
        let reads = outcome.latencies_ns[OpKind::Read.index()].len();
        assert!(rmws > 800, "{rmws}");
        assert_eq!(rmws + reads, 2_000);
        let log = engine.log.lock().unwrap();
        let count = |op: &str| log.iter().filter(|(o, _)| *o == op).count() as u64;
        assert_eq!((count("rmw"), count("put"), count("get")), (rmws, 0, reads));
        // The recording engine adds one retry to each.
        assert_eq!(outcome.rmw_retries, rmws);
        // Every write of the phase is counted.
        assert_eq!(outcome.user_bytes_written, rmws * (8 + 32));
    }

    #[test]
    fn a_repeated_phase_draws_new_requests() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, settings, counter) = loaded_recording(dir.path(), 1_000, 500);
        let hidden = ProgressBar::hidden();
        let gets_of = |settings: &PhaseSettings| {
            engine.log.lock().unwrap().clear();
            run_phase(&engine, Workload::C, settings, &counter, &hidden).unwrap();
            std::mem::take(&mut *engine.log.lock().unwrap())
        };
        let first = gets_of(&settings.for_repeat(0));
        let again = gets_of(&settings.for_repeat(0));
        let second = gets_of(&settings.for_repeat(1));
        assert_eq!(first.len(), 500);
        assert_eq!(first, again, "the same seed gives the same requests");
        let same = first.iter().zip(&second).filter(|(a, b)| a == b).count();
        assert!(same < 100, "{same} of 500 requests repeated in order");
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
