//! One run of the stress workload: reopen, verify against the expected
//! state, then writers, readers and a knob-turning thread until the time is
//! up (or until the process is killed, which is the point).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use problems::Problems;
use turtlekv::{Db, Options, WriteBatch, WriteOptions};

use crate::expected::ExpectedState;
use crate::value::{Entry, decode_value, key, value};
use crate::verify::{Verified, next_entry, verify_and_resolve};

/// What a run does.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Holds `db/` and `expected.state`.
    pub root: PathBuf,
    pub keys: u32,
    pub writers: u32,
    pub readers: u32,
    /// How long to run before stopping cleanly.
    pub duration: Duration,
    pub seed: u64,
}

/// Counters of a finished run.
#[derive(Debug, Default, Clone, Copy)]
pub struct RunReport {
    pub at_start: Verified,
    pub writes: u64,
    pub reads: u64,
    pub checkpoints: u64,
}

/// Tiny pages and a small checkpoint distance, so checkpoints, flushes and
/// splits happen all the time.
pub fn options() -> Options {
    let mut o = Options::default();
    o.leaf_size_bytes = 32 * 1024;
    o.node_size_bytes = 2048;
    o.checkpoint_distance_bytes = 128 * 1024;
    o.cache_capacity_bytes = 1024 * 1024;
    o.wal_segment_size_bytes = 256 * 1024;
    o.checkpoint_threads = 1;
    o
}

/// Opens the database and the expected state, verifies and resolves.
pub fn open_and_verify(cfg: &RunConfig) -> Result<(Db, ExpectedState, Verified), String> {
    std::fs::create_dir_all(&cfg.root).map_err(|e| e.to_string())?;
    let db = Db::open(cfg.root.join("db"), options()).map_err(|e| format!("open: {e}"))?;
    let expected = ExpectedState::open(&cfg.root.join("expected.state"), cfg.keys)
        .map_err(|e| format!("expected state: {e}"))?;
    let verified = verify_and_resolve(&db, &expected)?;
    db.check().map_err(|e| format!("check: {e}"))?;
    Ok((db, expected, verified))
}

/// Number of acknowledged writes recorded in the expected state (each
/// write of a key raises its version by one).
pub fn acknowledged_writes(expected: &ExpectedState) -> u64 {
    (0..expected.keys())
        .map(|id| u64::from(expected.committed(id).version))
        .sum()
}

/// Verifies, prints `ready ...`, runs the workload for `cfg.duration`, and
/// verifies again.
pub fn run(cfg: &RunConfig) -> Result<RunReport, String> {
    let (db, expected, at_start) = open_and_verify(cfg)?;
    println!(
        "ready present={} applied={} lost={} acknowledged={}",
        at_start.present,
        at_start.in_flight_applied,
        at_start.in_flight_lost,
        acknowledged_writes(&expected)
    );
    use std::io::Write as _;
    std::io::stdout().flush().map_err(|e| e.to_string())?;

    let shared = Shared {
        db: &db,
        expected: &expected,
        cfg,
        stop: AtomicBool::new(false),
        problems: Problems::default(),
        writes: AtomicU64::new(0),
        reads: AtomicU64::new(0),
    };
    std::thread::scope(|s| {
        for w in 0..cfg.writers {
            let shared = &shared;
            s.spawn(move || shared.guard(|| shared.writer(w)));
        }
        for r in 0..cfg.readers {
            let shared = &shared;
            s.spawn(move || shared.guard(|| shared.reader(r)));
        }
        let shared = &shared;
        s.spawn(move || shared.guard(|| shared.knobs()));
        let end = Instant::now() + cfg.duration;
        while Instant::now() < end && !shared.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
        shared.stop.store(true, Ordering::Relaxed);
    });
    shared.problems.into_result()?;
    let at_end = verify_and_resolve(&db, &expected)?;
    if at_end.in_flight_applied + at_end.in_flight_lost != 0 {
        return Err("writes still in flight after every writer stopped".into());
    }
    db.check().map_err(|e| format!("check: {e}"))?;
    Ok(RunReport {
        at_start,
        writes: shared.writes.into_inner(),
        reads: shared.reads.into_inner(),
        checkpoints: db.stats().checkpoints,
    })
}

mod problems {
    use std::sync::Mutex;

    /// Problems found by any thread.
    #[derive(Debug, Default)]
    pub struct Problems(Mutex<Vec<String>>);

    impl Problems {
        pub fn push(&self, p: String) {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(p);
        }

        pub fn into_result(self) -> Result<(), String> {
            let problems = self.0.into_inner().unwrap_or_else(|e| e.into_inner());
            if problems.is_empty() {
                Ok(())
            } else {
                Err(problems.join("\n"))
            }
        }
    }
}

struct Shared<'a> {
    db: &'a Db,
    expected: &'a ExpectedState,
    cfg: &'a RunConfig,
    stop: AtomicBool,
    problems: Problems,
    writes: AtomicU64,
    reads: AtomicU64,
}

/// xorshift64*: small, seeded, good enough to pick keys.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

impl Shared<'_> {
    /// Runs a thread's loop; a failure stops every thread.
    fn guard(&self, body: impl FnOnce() -> Result<(), String>) {
        if let Err(e) = body() {
            self.problems.push(e);
            self.stop.store(true, Ordering::Relaxed);
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Writer `w` owns the keys `w, w + writers, ...`: each key has one
    /// writer, so its versions rise one by one.
    fn writer(&self, w: u32) -> Result<(), String> {
        let mut rng = Rng::new(self.cfg.seed ^ (u64::from(w) << 40) ^ 0x00A1_1CE5);
        let owned = u64::from(self.cfg.keys.div_ceil(self.cfg.writers));
        let batch_id = w + 1;
        let io = |e: std::io::Error| format!("expected-state file: {e}");
        while !self.stopped() {
            let n = if rng.below(4) == 0 {
                2 + rng.below(5)
            } else {
                1
            };
            let mut ids: Vec<u32> = Vec::new();
            for _ in 0..n {
                let id = w + self.cfg.writers * rng.below(owned) as u32;
                if id < self.cfg.keys && !ids.contains(&id) {
                    ids.push(id);
                }
            }
            let mut batch = WriteBatch::new();
            for &id in &ids {
                let entry = next_entry(self.expected.committed(id), rng.below(5) != 0);
                self.expected
                    .mark_pending(id, entry, batch_id)
                    .map_err(io)?;
                if entry.present {
                    batch.put(key(id), value(id, entry.version));
                } else {
                    batch.delete(key(id));
                }
            }
            let sync = rng.below(16) == 0;
            self.db
                .write(batch, &WriteOptions::new().sync(sync))
                .map_err(|e| format!("writer {w}: write failed: {e}"))?;
            for &id in &ids {
                self.expected.commit(id).map_err(io)?;
            }
            self.writes.fetch_add(ids.len() as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    fn reader(&self, r: u32) -> Result<(), String> {
        let mut rng = Rng::new(self.cfg.seed ^ (u64::from(r) << 48) ^ 0x5EAD);
        let mut seen = HashMap::new();
        while !self.stopped() {
            match rng.below(100) {
                0..80 => {
                    let id = rng.below(u64::from(self.cfg.keys)) as u32;
                    let before = self.expected.committed(id);
                    let got = self.db.get(key(id)).map_err(|e| format!("get: {e}"))?;
                    self.check_read(id, before, got.as_deref(), &mut seen)?;
                }
                80..95 => self.check_range(&mut rng, &mut seen)?,
                _ => self.check_snapshot(&mut rng)?,
            }
            self.reads.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// A read of key `id` that returned `got`, where `before` was its
    /// acknowledged state just before the read: the value must be one that
    /// a write produced, no older than `before`, no newer than any write
    /// issued, and no older than what this thread saw before.
    fn check_read(
        &self,
        id: u32,
        before: Entry,
        got: Option<&[u8]>,
        seen: &mut HashMap<u32, u32>,
    ) -> Result<(), String> {
        let issued = self.expected.issued(id);
        match got {
            Some(bytes) => {
                let version = decode_value(id, bytes).map_err(|e| format!("key {id}: {e}"))?;
                let last = seen.insert(id, version).unwrap_or(0);
                if version < before.version || version > issued || version < last {
                    return Err(format!(
                        "key {id}: read version {version}; acknowledged {before:?}, \
                         issued up to {issued}, this thread saw {last}"
                    ));
                }
            }
            None if before.present && issued == before.version => {
                return Err(format!(
                    "key {id}: acknowledged {before:?} but read nothing"
                ));
            }
            None => {}
        }
        Ok(())
    }

    /// A scan of 64 consecutive keys, forward or backward.
    fn check_range(&self, rng: &mut Rng, seen: &mut HashMap<u32, u32>) -> Result<(), String> {
        let start = rng.below(u64::from(self.cfg.keys)) as u32;
        let end = (start + 64).min(self.cfg.keys);
        let before: Vec<Entry> = (start..end).map(|id| self.expected.committed(id)).collect();
        let iter = self.db.range(key(start)..key(end));
        let rev = rng.below(2) == 0;
        let items: Vec<_> = if rev {
            iter.rev().collect()
        } else {
            iter.collect()
        };
        let mut found = vec![None; (end - start) as usize];
        let mut last_key: Option<Vec<u8>> = None;
        for kv in items {
            let (k, v) = kv.map_err(|e| format!("scan: {e}"))?;
            let id = crate::value::key_id(&k)
                .filter(|id| (start..end).contains(id))
                .ok_or_else(|| format!("scan of {start}..{end} returned key {k:?}"))?;
            if let Some(last) = &last_key
                && (last.as_slice() < &k[..]) == rev
            {
                return Err(format!("scan out of order at key {id}"));
            }
            last_key = Some(k.to_vec());
            found[(id - start) as usize] = Some(v);
        }
        for (i, got) in found.iter().enumerate() {
            let id = start + i as u32;
            self.check_read(id, before[i], got.as_deref(), seen)?;
        }
        Ok(())
    }

    /// A snapshot reads the same before and after writers move on.
    fn check_snapshot(&self, rng: &mut Rng) -> Result<(), String> {
        let snapshot = self.db.snapshot();
        let start = rng.below(u64::from(self.cfg.keys)) as u32;
        let end = (start + 32).min(self.cfg.keys);
        let read = || -> Result<(Vec<_>, Vec<_>), String> {
            let scan: Result<Vec<_>, _> = snapshot.range(key(start)..key(end)).collect();
            let gets: Result<Vec<_>, _> = (start..end).map(|id| snapshot.get(key(id))).collect();
            Ok((
                scan.map_err(|e| format!("snapshot scan: {e}"))?,
                gets.map_err(|e| format!("snapshot get: {e}"))?,
            ))
        };
        let first = read()?;
        std::thread::sleep(Duration::from_millis(2));
        if read()? != first {
            return Err(format!("snapshot of keys {start}..{end} changed"));
        }
        Ok(())
    }

    /// Turns the memory knobs and forces checkpoints while the others work.
    fn knobs(&self) -> Result<(), String> {
        let mut rng = Rng::new(self.cfg.seed ^ 0x0B0B);
        while !self.stopped() {
            std::thread::sleep(Duration::from_millis(10 + rng.below(60)));
            let result = match rng.below(4) {
                0 => self
                    .db
                    .set_checkpoint_distance((16 + rng.below(496)) * 1024),
                1 => self
                    .db
                    .set_cache_capacity((256 + rng.below(8 * 1024)) * 1024),
                2 => self.db.checkpoint_now(),
                _ => self.db.flush_wal(),
            };
            result.map_err(|e| format!("knob: {e}"))?;
        }
        Ok(())
    }
}
