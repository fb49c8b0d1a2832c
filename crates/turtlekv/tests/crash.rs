//! Crash recovery with the fault-injecting file layer: a crash at every
//! write, sync and store through the WAL's mapping of a workload, in each
//! crash mode, must recover a prefix of the acknowledged history that
//! includes every synced batch. Workloads over keyspaces check the same of
//! cross-keyspace batches, keyspace creates and drops, and that the
//! cleaner, resumed by the reopen, deletes every key of a dropped keyspace.

mod common;

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use common::{Model, Rng, checkpointing_options, contents, open_fault, small_options};
use turtlekv::io::{CrashMode, Fault, FaultFs};
use turtlekv::{Db, Error, Keyspace, Options, WriteBatch, WriteOptions};

type Entry = (Vec<u8>, Option<Vec<u8>>);

/// A deterministic workload: batches of puts and deletes over few keys, with
/// large values so segments rotate, every third batch synced.
fn workload() -> Vec<(Vec<Entry>, bool)> {
    workload_over(40, 16, 9000)
}

/// `batches` batches of 1 to 3 entries over `keys` keys with values of up
/// to `max_value_bytes`; a quarter of the entries are deletes.
fn workload_over(batches: u64, keys: u64, max_value_bytes: u64) -> Vec<(Vec<Entry>, bool)> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..batches)
        .map(|i| {
            let entries = (0..1 + next() % 3)
                .map(|_| {
                    let key = format!("key{:02}", next() % keys).into_bytes();
                    let value = (next() % 4 != 0)
                        .then(|| vec![i as u8; 1 + (next() % max_value_bytes) as usize]);
                    (key, value)
                })
                .collect();
            (entries, i % 3 == 2)
        })
        .collect()
}

fn apply(model: &mut Model, entries: &[Entry]) {
    for (k, v) in entries {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

/// Runs the workload until the first error; returns (acknowledged batches,
/// batches that must be durable).
fn run_until_failure(db: &Db, work: &[(Vec<Entry>, bool)]) -> (usize, usize) {
    let mut durable = 0;
    for (i, (entries, sync)) in work.iter().enumerate() {
        let mut batch = WriteBatch::new();
        for (k, v) in entries {
            match v {
                Some(v) => batch.put(k, v),
                None => batch.delete(k),
            };
        }
        match db.write(batch, &WriteOptions::new().sync(*sync)) {
            Ok(()) if *sync => durable = i + 1,
            Ok(()) => {}
            Err(Error::Io(_) | Error::Poisoned { .. }) => return (i, durable),
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    (work.len(), durable)
}

/// Checks that `found` equals the model after some prefix of `work` of length
/// in `min..=max`, and returns that length.
fn matching_prefix(
    found: &Model,
    work: &[(Vec<Entry>, bool)],
    min: usize,
    max: usize,
) -> Option<usize> {
    let mut model = Model::new();
    for (i, (entries, _)) in work.iter().enumerate().take(max + 1) {
        if i >= min && &model == found {
            return Some(i);
        }
        if i < work.len() {
            apply(&mut model, entries);
        }
    }
    (max >= work.len() && &model == found).then_some(work.len())
}

/// A workload the crash-point harness runs and checks.
trait Workload {
    /// Runs the workload until the first error; returns (acknowledged
    /// steps, steps that must be durable).
    fn run(&self, db: &Db) -> (usize, usize);

    /// Steps in the workload.
    fn steps(&self) -> usize;

    /// Checks that the reopened `db` holds the state after some prefix of
    /// the workload of length in `min..=max`; `what` names the crash.
    fn verify(&self, db: &Db, min: usize, max: usize, what: &str);
}

impl Workload for [(Vec<Entry>, bool)] {
    fn run(&self, db: &Db) -> (usize, usize) {
        run_until_failure(db, self)
    }

    fn steps(&self) -> usize {
        self.len()
    }

    fn verify(&self, db: &Db, min: usize, max: usize, what: &str) {
        let found = contents(db);
        assert!(
            matching_prefix(&found, self, min, max).is_some(),
            "{what}: state is not a prefix in {min}..={max}"
        );
    }
}

/// The statistics of `work` run whole on a fresh database, without a
/// crash: what a test checks its workload reaches before crashing it.
fn stats_of_a_clean_run<W: Workload + ?Sized>(work: &W, options: &Options) -> turtlekv::Stats {
    let fs = FaultFs::new();
    let db = open_fault(&fs, options.clone()).unwrap();
    work.run(&db);
    db.stats()
}

fn total_ops<W: Workload + ?Sized>(work: &W, options: &Options) -> u64 {
    let fs = FaultFs::new();
    let db = open_fault(&fs, options.clone()).unwrap();
    work.run(&db);
    drop(db);
    let (writes, syncs) = fs.op_counts();
    // Appends are copies into the WAL's mapping, as on the real file
    // system: a crash can fall between any two of them too.
    assert!(fs.store_count() > 0, "no append went through the mapping");
    writes + syncs + fs.store_count()
}

/// Crashes the workload at every write and sync in each crash mode and
/// checks the recovered state; returns (operations, crash points tried).
fn crash_everywhere<W: Workload + ?Sized>(work: &W, options: &Options) -> (u64, u64) {
    crash_everywhere_with_seeds(work, options, 1, 1)
}

/// As [`crash_everywhere`], with `seeds` different random subsets and tear
/// positions per crash point, at one in `one_in` of the operations (a
/// fixed pseudo-random choice; 1 = every one).
fn crash_everywhere_with_seeds<W: Workload + ?Sized>(
    work: &W,
    options: &Options,
    seeds: u64,
    one_in: u64,
) -> (u64, u64) {
    let total = total_ops(work, options);
    let modes = |n: u64| {
        let mut modes = vec![CrashMode::DropUnsynced];
        for s in 0..seeds {
            let seed = n + s * 1_000_003;
            modes.push(CrashMode::KeepRandomSubset { seed });
            modes.push(CrashMode::TearLastWrite { seed });
        }
        modes
    };
    let mut crash_points = 0;
    let chosen = |n: u64| {
        n.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29)
            .is_multiple_of(one_in)
    };
    for n in (0..=total).filter(|&n| chosen(n)) {
        let fs = FaultFs::new();
        fs.inject(Fault::crash_after(n));
        let (acked, durable) = match open_fault(&fs, options.clone()) {
            Ok(db) => work.run(&db),
            Err(_) => (0, 0),
        };
        for mode in modes(n) {
            crash_points += 1;
            let crashed = fs.crash(mode);
            let db = open_fault(&crashed, options.clone())
                .unwrap_or_else(|e| panic!("reopen after crash at op {n} ({mode:?}): {e}"));
            db.check()
                .unwrap_or_else(|e| panic!("check after crash at op {n} ({mode:?}): {e}"));
            // The step that failed may or may not have reached the disk.
            let attempted = (acked + 1).min(work.steps());
            work.verify(
                &db,
                durable,
                attempted,
                &format!("crash at op {n} ({mode:?})"),
            );
            // The recovered database takes writes and reopens cleanly.
            db.put(b"after-crash", b"1").unwrap();
            drop(db);
            let db = open_fault(&crashed, options.clone()).unwrap();
            assert_eq!(db.get(b"after-crash").unwrap().as_deref(), Some(&b"1"[..]));
        }
    }
    (total, crash_points)
}

#[test]
fn crash_at_every_write_and_sync_recovers_a_durable_prefix() {
    let (total, crash_points) = crash_everywhere(&workload()[..], &small_options());
    assert!(total > 60, "workload too small: {total} ops");
    eprintln!("tried {crash_points} crash points ({total} ops x 3 modes)");
}

/// The same across checkpoints: crashes land in page writes, page syncs,
/// superblock commits and WAL trims as well as in WAL appends.
#[test]
fn crash_at_every_write_and_sync_across_checkpoints() {
    let work = workload_over(60, 200, 2500);
    let options = checkpointing_options();
    let fs = FaultFs::new();
    let db = open_fault(&fs, options.clone()).unwrap();
    run_until_failure(&db, &work);
    let (checkpoints, spills) = (db.stats().checkpoints, db.stats().checkpoint_spills);
    drop(db);
    assert!(checkpoints >= 8, "only {checkpoints} checkpoints");
    let (total, crash_points) = crash_everywhere(&work[..], &options);
    eprintln!(
        "tried {crash_points} crash points ({total} ops x 3 modes) over {checkpoints} checkpoints ({spills} spills)"
    );
}

/// One change of a batch in the range-deletion workload.
#[derive(Debug, Clone)]
enum Change {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// `delete_range(start, end)`.
    DeleteRange(Vec<u8>, Vec<u8>),
    /// `checkpoint_now`, alone in its step: everything before it is then
    /// durable.
    Checkpoint,
}

/// Batches of puts, deletes and range deletions, each synced or not.
struct RangeWorkload(Vec<(Vec<Change>, bool)>);

impl RangeWorkload {
    /// `batches` batches over `keys` keys with values of up to
    /// `max_value_bytes`; every fourth batch deletes a range of up to
    /// `1 / width_div` of the keys among its other changes, every third
    /// is synced. With `fill`, batches of 50 small puts first write every
    /// `fill`-th key, so that ranges find many keys in the tree.
    fn new(
        batches: u64,
        keys: u64,
        max_value_bytes: u64,
        width_div: u64,
        fill: Option<u64>,
    ) -> Self {
        let mut rng = Rng(0x5DEE_CE66_D1CE_4E5B);
        let key = |n: u64| format!("key{n:04}").into_bytes();
        let filled: Vec<u64> = fill.map_or(Vec::new(), |every| {
            (0..keys).step_by(every as usize).collect()
        });
        let fills = filled.chunks(50).map(|chunk| {
            let puts = chunk
                .iter()
                .map(|&n| Change::Put(key(n), vec![0xF; 16]))
                .collect();
            (puts, false)
        });
        let fills: Vec<(Vec<Change>, bool)> = fills.collect();
        let steps = (0..batches).map(|i| {
            let mut changes: Vec<Change> = (0..1 + rng.below(3))
                .map(|_| {
                    let k = key(rng.below(keys));
                    match rng.below(5) {
                        0 => Change::Delete(k),
                        _ => Change::Put(k, vec![i as u8; 1 + rng.below(max_value_bytes) as usize]),
                    }
                })
                .collect();
            if i % 4 == 3 {
                let start = rng.below(keys);
                let end = start + 1 + rng.below(keys / width_div);
                let at = rng.index(changes.len() + 1);
                changes.insert(at, Change::DeleteRange(key(start), key(end)));
            }
            (changes, i % 3 == 2)
        });
        RangeWorkload(fills.into_iter().chain(steps).collect())
    }

    /// 1,200 keys checkpointed into the tree, then one unsynced range
    /// deletion of 1,000 of them and a checkpoint that deletes them from
    /// the tree in steps: a crash after a step's commit must find the
    /// deletion in the WAL (the checkpoint synced it first), or the tree
    /// would miss some of the keys the replayed prefix still holds.
    fn bulk_deletion() -> Self {
        let key = |n: u64| format!("key{n:04}").into_bytes();
        let mut steps: Vec<(Vec<Change>, bool)> = (0..1200u64)
            .collect::<Vec<_>>()
            .chunks(100)
            .map(|c| {
                (
                    c.iter()
                        .map(|&n| Change::Put(key(n), vec![7; 16]))
                        .collect(),
                    false,
                )
            })
            .collect();
        steps.push((vec![Change::Checkpoint], false));
        let deletion = vec![
            Change::Put(key(5000), vec![1]),
            Change::DeleteRange(key(100), key(1100)),
        ];
        steps.push((deletion, false));
        steps.push((vec![Change::Put(key(6000), vec![2])], false));
        steps.push((vec![Change::Checkpoint], false));
        steps.push((vec![Change::Put(key(7000), vec![3])], true));
        RangeWorkload(steps)
    }

    fn apply(model: &mut Model, changes: &[Change]) {
        for change in changes {
            match change {
                Change::Put(k, v) => drop(model.insert(k.clone(), v.clone())),
                Change::Delete(k) => drop(model.remove(k)),
                Change::DeleteRange(s, e) => model.retain(|k, _| !(s <= k && k < e)),
                Change::Checkpoint => {}
            }
        }
    }
}

impl Workload for RangeWorkload {
    fn run(&self, db: &Db) -> (usize, usize) {
        let mut durable = 0;
        for (i, (changes, sync)) in self.0.iter().enumerate() {
            if matches!(changes[..], [Change::Checkpoint]) {
                // A checkpoint makes every write before it durable; one
                // that fails ends the run like a failed write.
                match db.checkpoint_now() {
                    Ok(()) => durable = i + 1,
                    Err(_) => return (i, durable),
                }
                continue;
            }
            let mut batch = WriteBatch::new();
            for change in changes {
                match change {
                    Change::Put(k, v) => batch.put(k, v),
                    Change::Delete(k) => batch.delete(k),
                    Change::DeleteRange(s, e) => batch.delete_range(s, e),
                    Change::Checkpoint => unreachable!("a checkpoint is a step of its own"),
                };
            }
            match db.write(batch, &WriteOptions::new().sync(*sync)) {
                Ok(()) if *sync => durable = i + 1,
                Ok(()) => {}
                Err(Error::Io(_) | Error::Poisoned { .. }) => return (i, durable),
                Err(e) => panic!("unexpected error {e}"),
            }
        }
        (self.0.len(), durable)
    }

    fn steps(&self) -> usize {
        self.0.len()
    }

    /// A prefix, so no deleted key comes back and no synced deletion is lost.
    fn verify(&self, db: &Db, min: usize, max: usize, what: &str) {
        let found = contents(db);
        let mut model = Model::new();
        for (i, (changes, _)) in self.0.iter().enumerate().take(max + 1) {
            if i >= min && model == found {
                return;
            }
            if i < self.0.len() {
                Self::apply(&mut model, changes);
            }
        }
        assert!(
            max >= self.0.len() && model == found,
            "{what}: state is not a prefix in {min}..={max}"
        );
    }
}

/// Range deletions across checkpoints: crashes land in the WAL appends of
/// range deletions, in the sync before a checkpoint that applies them, and
/// in the commits of the checkpoints that turn them into tombstones for
/// the tree's keys.
#[test]
fn crash_at_every_write_and_sync_across_range_deletions() {
    let work = RangeWorkload::new(60, 120, 2500, 10, None);
    let options = checkpointing_options();
    let stats = stats_of_a_clean_run(&work, &options);
    assert!(
        stats.checkpoints >= 8,
        "only {} checkpoints",
        stats.checkpoints
    );
    assert!(
        stats.range_deletes >= 10,
        "only {} range deletions",
        stats.range_deletes
    );
    assert!(
        stats.range_keys_deleted > 0,
        "no checkpoint deleted a tree key"
    );
    let (total, crash_points) = crash_everywhere(&work, &options);
    eprintln!(
        "tried {crash_points} crash points ({total} ops x 3 modes) over {} checkpoints, \
         {} range deletions deleting {} tree keys",
        stats.checkpoints, stats.range_deletes, stats.range_keys_deleted
    );
}

/// Range deletions wide enough that their checkpoints delete the tree's
/// keys in steps (16 KiB leaves: a step per 224 tombstones), each a
/// commit at the old coverage after the WAL sync that makes the deletion
/// durable first: crashes land before, between and after those commits,
/// and the recovered state must still be a prefix with every synced
/// batch, no deleted key back.
#[test]
fn crash_at_every_write_and_sync_across_range_deletion_steps() {
    let work = RangeWorkload::new(40, 1200, 200, 1, Some(1));
    let options = checkpointing_options();
    let stats = stats_of_a_clean_run(&work, &options);
    assert!(
        stats.range_deletion_steps >= 3,
        "only {} steps: {} range deletions deleted {} tree keys over {} checkpoints",
        stats.range_deletion_steps,
        stats.range_deletes,
        stats.range_keys_deleted,
        stats.checkpoints
    );
    let (total, crash_points) = crash_everywhere(&work, &options);
    eprintln!(
        "tried {crash_points} crash points ({total} ops x 3 modes) over {} \
         checkpoints, {} range deletions deleting {} tree keys in {} steps",
        stats.checkpoints,
        stats.range_deletes,
        stats.range_keys_deleted,
        stats.range_deletion_steps
    );
}

/// A crash at every write and sync of `RangeWorkload::bulk_deletion`: the
/// checkpoint of an unsynced range deletion of 1,000 tree keys commits
/// steps before its own commit, and a crash between them must recover
/// the deletion whole (from the WAL, which the checkpoint synced first).
#[test]
fn crash_between_the_steps_of_an_unsynced_range_deletion() {
    let work = RangeWorkload::bulk_deletion();
    let options = checkpointing_options();
    let stats = stats_of_a_clean_run(&work, &options);
    assert!(
        stats.range_deletion_steps >= 3,
        "only {} steps",
        stats.range_deletion_steps
    );
    assert_eq!(stats.range_keys_deleted, 1000);
    let (total, crash_points) = crash_everywhere(&work, &options);
    eprintln!(
        "tried {crash_points} crash points ({total} ops x 3 modes), {} steps",
        stats.range_deletion_steps
    );
}

/// The same with space reclamation at nearly every checkpoint (a 1%
/// garbage threshold over an overwrite-heavy workload): crashes land in
/// the drains' page writes and in the commits that follow them.
#[test]
fn crash_at_every_write_and_sync_across_reclaiming_checkpoints() {
    let work = workload_over(60, 30, 2500);
    let mut options = checkpointing_options();
    options.garbage_percent = 1;
    let fs = FaultFs::new();
    let db = open_fault(&fs, options.clone()).unwrap();
    run_until_failure(&db, &work);
    let (checkpoints, reclaims) = (db.stats().checkpoints, db.stats().reclaim_flushes);
    drop(db);
    assert!(reclaims >= 4, "only {reclaims} reclaim flushes");
    let (total, crash_points) = crash_everywhere(&work[..], &options);
    eprintln!(
        "tried {crash_points} crash points ({total} ops x 3 modes) over {checkpoints} checkpoints ({reclaims} reclaim flushes)"
    );
}

/// The same with separated values in small value files, which value
/// garbage collection judges, moves and removes while the workload runs:
/// crashes land in value-file appends and syncs, in the moves' copies
/// and commits, and around the removals.
#[test]
fn crash_at_every_write_and_sync_across_value_garbage_collection() {
    let work = workload_over(90, 6, 4000);
    let options = checkpointing_options()
        .value_separation_threshold_bytes(512)
        .value_file_size_bytes(8 * 1024);
    let fs = FaultFs::new();
    let db = open_fault(&fs, options.clone()).unwrap();
    run_until_failure(&db, &work);
    let deadline = Instant::now() + Duration::from_secs(30);
    while db.stats().value_files_removed < 2 {
        assert!(Instant::now() < deadline, "no collection: {:?}", db.stats());
        db.checkpoint_now().unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    let stats = db.stats();
    drop(db);
    let (total, crash_points) = crash_everywhere(&work[..], &options);
    eprintln!(
        "tried {crash_points} crash points ({total} ops x 3 modes); a clean run wrote {} value records, moved {} files",
        stats.value_records_written, stats.value_files_moved
    );
}

/// The same where checkpoints punch the flushed chunks of live segment
/// pages (64 KiB leaves, so that segments have chunks to spare): crashes
/// land before, between and after the punches, and every recovered root
/// reads whole and passes `check()`. One operation in four is a crash
/// point here (about 1,900 crash points); the ignored `_long` version
/// tries every one (7,563).
#[test]
fn crash_at_every_write_and_sync_across_punched_segment_chunks() {
    crash_across_punched_segment_chunks(4);
}

#[test]
#[ignore = "long: thousands of crash points"]
fn crash_at_every_write_and_sync_across_punched_segment_chunks_long() {
    crash_across_punched_segment_chunks(1);
}

fn crash_across_punched_segment_chunks(one_in: u64) {
    let work = workload_over(800, 3000, 4000);
    let mut options = checkpointing_options();
    options.leaf_size_bytes = 64 * 1024;
    options.node_size_bytes = 4096;
    options.checkpoint_distance_bytes = 32 * 1024;
    options.cache_capacity_bytes = 1 << 20;
    // The values repeat one byte: compressed, segments would be a chunk
    // or two.
    options.compression = turtlekv::Compression::None;
    let fs = FaultFs::new();
    let db = open_fault(&fs, options.clone()).unwrap();
    run_until_failure(&db, &work);
    db.checkpoint_now().unwrap();
    let punched = db.stats().dead_chunk_bytes_punched;
    drop(db);
    assert!(punched > 0, "no dead chunk punched");
    let (total, crash_points) = crash_everywhere_with_seeds(&work[..], &options, 1, one_in);
    eprintln!(
        "tried {crash_points} crash points ({total} ops, one in {one_in}, x 3 modes), \
         {punched} chunk bytes punched"
    );
}

#[test]
fn random_subset_crashes_without_faults_keep_synced_batches() {
    let work = workload();
    for seed in 0..50 {
        let fs = FaultFs::new();
        let db = open_fault(&fs, small_options()).unwrap();
        let cut = (seed as usize * 7) % work.len();
        let (acked, durable) = run_until_failure(&db, &work[..cut]);
        // The handle stays alive: this is a power cut, not a clean close.
        let crashed = fs.crash(CrashMode::KeepRandomSubset { seed });
        let found = contents(&open_fault(&crashed, small_options()).unwrap());
        assert!(
            matching_prefix(&found, &work, durable, acked).is_some(),
            "seed {seed}: not a prefix in {durable}..={acked}"
        );
        drop(db);
    }
}

/// The long version, for the figures in `docs/testing.md`:
/// `TURTLEKV_CRASH_BATCHES=400 TURTLEKV_CRASH_SEEDS=2 cargo test --release
/// --test crash -- --ignored --nocapture`.
#[test]
#[ignore = "long: thousands of crash points"]
fn crash_at_every_write_and_sync_across_checkpoints_long() {
    let var = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (batches, seeds) = (
        var("TURTLEKV_CRASH_BATCHES", 400),
        var("TURTLEKV_CRASH_SEEDS", 2),
    );
    let work = workload_over(batches, 300, 2500);
    let options = checkpointing_options();
    let fs = FaultFs::new();
    let db = open_fault(&fs, options.clone()).unwrap();
    run_until_failure(&db, &work);
    let (checkpoints, spills) = (db.stats().checkpoints, db.stats().checkpoint_spills);
    drop(db);
    let started = std::time::Instant::now();
    let (total, crash_points) = crash_everywhere_with_seeds(&work[..], &options, seeds, 1);
    eprintln!(
        "tried {crash_points} crash points ({total} ops x {} modes) over {checkpoints} checkpoints ({spills} spills) in {:?}",
        1 + 2 * seeds,
        started.elapsed()
    );
}

/// `kill -9` (the OS keeps the unsynced writes), reopen, a `sync: true`
/// write, then a power cut: the sync write promises every record before it
/// is durable, including the ones replay found only in the OS's cache.
#[test]
fn records_replayed_after_a_kill_survive_a_power_cut_after_a_sync_write() {
    let work = workload();
    for cut in [1usize, 5, 13, 27, 39] {
        let fs = FaultFs::new();
        let db = open_fault(&fs, small_options()).unwrap();
        for (entries, _) in &work[..cut] {
            let mut batch = WriteBatch::new();
            for (k, v) in entries {
                match v {
                    Some(v) => batch.put(k, v),
                    None => batch.delete(k),
                };
            }
            db.write(batch, &WriteOptions::new().sync(false)).unwrap();
        }
        let killed = fs.kill();
        drop(db); // the killed image no longer sees what this does
        let db = open_fault(&killed, small_options()).unwrap();
        db.put_opt(b"after-kill", b"1", &WriteOptions::new().sync(true))
            .unwrap();
        let after_cut = killed.crash(CrashMode::DropUnsynced);
        drop(db);
        let db = open_fault(&after_cut, small_options())
            .unwrap_or_else(|e| panic!("cut {cut}: reopen after the power cut: {e}"));
        let mut found = contents(&db);
        assert_eq!(
            found.remove(&b"after-kill"[..]).as_deref(),
            Some(&b"1"[..]),
            "cut {cut}"
        );
        let mut model = Model::new();
        for (entries, _) in &work[..cut] {
            apply(&mut model, entries);
        }
        assert!(
            found == model,
            "cut {cut}: records replayed after the kill were lost"
        );
    }
}

// Keyspaces: cross-keyspace batches, drops whose keys the cleaner deletes
// in the background, and a name created again after its drop.

/// The default keyspace's name in the models below (named keyspaces'
/// names are never empty).
const DEFAULT: &str = "";

/// One step of a workload over keyspaces.
#[derive(Debug, Clone)]
enum KsStep {
    /// `Db::keyspace(name)` of a keyspace that does not exist: a synced
    /// catalog batch creates it.
    Create(&'static str),
    /// One batch across keyspaces ([`DEFAULT`] for the default one),
    /// synced or not.
    Write(Vec<KsEntry>, bool),
    /// The same writes committed by a transaction (one batch), synced or
    /// not.
    Commit(Vec<KsEntry>, bool),
    /// `Db::drop_keyspace(name)`: a synced catalog batch, then the
    /// cleaner deletes the keys in the background.
    Drop(&'static str),
}

/// A put (`Some`) or delete (`None`) of a key in a keyspace.
type KsEntry = (&'static str, Vec<u8>, Option<Vec<u8>>);

/// What the public API shows of a database with keyspaces: each live
/// keyspace by name, the default one always.
type Spaces = BTreeMap<Vec<u8>, Model>;

/// The model of a database with keyspaces after some steps.
#[derive(Debug, Clone, PartialEq)]
struct KsModel {
    spaces: Spaces,
    /// Whether a keyspace was ever created (the catalog then holds its
    /// next-id key).
    created_any: bool,
}

impl KsModel {
    fn new() -> Self {
        KsModel {
            spaces: Spaces::from([(DEFAULT.as_bytes().to_vec(), Model::new())]),
            created_any: false,
        }
    }

    fn apply(&mut self, step: &KsStep) {
        match step {
            KsStep::Create(name) => {
                let fresh = self.spaces.insert(name.as_bytes().to_vec(), Model::new());
                assert!(fresh.is_none(), "the workload creates {name} twice");
                self.created_any = true;
            }
            KsStep::Write(entries, _) | KsStep::Commit(entries, _) => {
                for (name, k, v) in entries {
                    let space = self
                        .spaces
                        .get_mut(name.as_bytes())
                        .unwrap_or_else(|| panic!("the workload writes to {name}, not live"));
                    match v {
                        Some(v) => space.insert(k.clone(), v.clone()),
                        None => space.remove(k),
                    };
                }
            }
            KsStep::Drop(name) => {
                let dropped = self.spaces.remove(name.as_bytes());
                assert!(dropped.is_some(), "the workload drops {name}, not live");
            }
        }
    }

    /// Keys in the tree once every drop is cleaned and a checkpoint took
    /// everything: the live keys, one catalog name per named keyspace and
    /// the catalog's next id once any keyspace was created.
    fn tree_keys(&self) -> u64 {
        let live: usize = self.spaces.values().map(Model::len).sum();
        (live + (self.spaces.len() - 1) + usize::from(self.created_any)) as u64
    }
}

/// Every live keyspace of `db` and its contents, by name.
fn keyspace_contents(db: &Db) -> Spaces {
    let mut spaces = Spaces::from([(DEFAULT.as_bytes().to_vec(), contents(db))]);
    for name in db.keyspace_names().unwrap() {
        let keyspace = db.keyspace(&name).unwrap();
        let pairs = keyspace
            .range::<&[u8], _>(..)
            .map(|kv| {
                let (k, v) = kv.expect("scan failed");
                (k.to_vec(), v.to_vec())
            })
            .collect();
        spaces.insert(name, pairs);
    }
    spaces
}

/// A short description of `spaces` for failure messages: each keyspace's
/// name and key count.
fn describe(spaces: &Spaces) -> String {
    let parts: Vec<String> = spaces
        .iter()
        .map(|(name, m)| format!("{:?}: {} keys", String::from_utf8_lossy(name), m.len()))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

fn wait_for_cleaning(db: &Db, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while db.stats().keyspaces_dropping > 0 {
        assert!(
            Instant::now() < deadline,
            "{what}: the cleaner did not finish"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A keyspace workload with the model after each of its steps.
struct KsWorkload {
    steps: Vec<KsStep>,
    /// `models[i]`: the state after the first `i` steps.
    models: Vec<KsModel>,
    /// Reopens that found a drop not yet cleaned, so that their cleaner
    /// resumed it.
    resumed_cleanings: Cell<u64>,
}

impl KsWorkload {
    fn new(steps: Vec<KsStep>) -> Self {
        let mut model = KsModel::new();
        let mut models = vec![model.clone()];
        for step in &steps {
            model.apply(step);
            models.push(model.clone());
        }
        KsWorkload {
            steps,
            models,
            resumed_cleanings: Cell::new(0),
        }
    }
}

fn ks_batch(handles: &HashMap<&str, Keyspace>, entries: &[KsEntry]) -> WriteBatch {
    let mut batch = WriteBatch::new();
    for (name, k, v) in entries {
        match (*name, v) {
            (DEFAULT, Some(v)) => batch.put(k, v),
            (DEFAULT, None) => batch.delete(k),
            (name, Some(v)) => batch.put_in(&handles[name], k, v),
            (name, None) => batch.delete_in(&handles[name], k),
        };
    }
    batch
}

/// Commits `entries` in a transaction that first reads each key it
/// writes. Nothing else writes these keys, so the one cause of a conflict
/// is a checkpoint that committed after the transaction's start; the
/// commit is then retried with a new transaction.
fn ks_commit(
    db: &Db,
    handles: &HashMap<&str, Keyspace>,
    entries: &[KsEntry],
    sync: bool,
) -> turtlekv::Result<()> {
    for _ in 0..100 {
        let mut txn = db.transaction();
        let start = txn.sequence();
        for (name, k, v) in entries {
            if *name == DEFAULT {
                txn.get(k)?;
                match v {
                    Some(v) => txn.put(k, v),
                    None => txn.delete(k),
                }
            } else {
                let keyspace = &handles[name];
                txn.get_in(keyspace, k)?;
                match v {
                    Some(v) => txn.put_in(keyspace, k, v),
                    None => txn.delete_in(keyspace, k),
                }
            }
        }
        match txn.commit(&WriteOptions::new().sync(sync)) {
            Err(Error::Conflict(reason)) => assert!(
                db.stats().checkpoint_covered_sequence > start,
                "a conflict without a checkpoint since the start: {reason}"
            ),
            result => return result,
        }
    }
    panic!("100 commits in a row conflicted");
}

impl Workload for KsWorkload {
    fn run(&self, db: &Db) -> (usize, usize) {
        let mut handles: HashMap<&str, Keyspace> = HashMap::new();
        let mut durable = 0;
        for (i, step) in self.steps.iter().enumerate() {
            let (result, synced) = match step {
                KsStep::Create(name) => {
                    let result = db.keyspace(name).map(|keyspace| {
                        handles.insert(name, keyspace);
                    });
                    (result, true)
                }
                KsStep::Write(entries, sync) => {
                    let batch = ks_batch(&handles, entries);
                    (db.write(batch, &WriteOptions::new().sync(*sync)), *sync)
                }
                KsStep::Commit(entries, sync) => (ks_commit(db, &handles, entries, *sync), *sync),
                KsStep::Drop(name) => {
                    handles.remove(name);
                    (db.drop_keyspace(name), true)
                }
            };
            match result {
                Ok(()) if synced => durable = i + 1,
                Ok(()) => {}
                Err(Error::Io(_) | Error::Poisoned { .. }) => return (i, durable),
                Err(e) => panic!("unexpected error at step {i} ({step:?}): {e}"),
            }
        }
        (self.steps.len(), durable)
    }

    fn steps(&self) -> usize {
        self.steps.len()
    }

    /// The live keyspaces and their contents are the model's after some
    /// prefix (so each batch, commit, create and drop is all or nothing,
    /// and a name created again holds only what was written to it since);
    /// once the cleaner has finished the drops the reopen found, a
    /// checkpoint leaves in the tree only the live keys and the catalog's.
    fn verify(&self, db: &Db, min: usize, max: usize, what: &str) {
        if db.stats().keyspaces_dropping > 0 {
            self.resumed_cleanings.set(self.resumed_cleanings.get() + 1);
        }
        let found = keyspace_contents(db);
        let matching: Vec<usize> = (min..=max)
            .filter(|&i| self.models[i].spaces == found)
            .collect();
        assert!(
            !matching.is_empty(),
            "{what}: found {} is not the state after any prefix in {min}..={max} (after {min}: {}, after {max}: {})",
            describe(&found),
            describe(&self.models[min].spaces),
            describe(&self.models[max].spaces),
        );
        wait_for_cleaning(db, what);
        db.checkpoint_now().unwrap();
        let report = db
            .check()
            .unwrap_or_else(|e| panic!("{what}: check after cleaning: {e}"));
        let expected: Vec<u64> = matching
            .iter()
            .map(|&i| self.models[i].tree_keys())
            .collect();
        assert!(
            expected.contains(&report.tree_keys),
            "{what}: {} keys in the tree after cleaning, expected one of {expected:?} \
             (prefixes {matching:?}): a dropped keyspace's keys remain",
            report.tree_keys
        );
        assert_eq!(
            keyspace_contents(db),
            found,
            "{what}: cleaning changed live keys"
        );
    }
}

/// `count` batches of 1 to 4 entries over keys `k00`..`k15` of the
/// keyspaces `spaces` (each entry's keyspace drawn from them), values of
/// up to `max_value_bytes`, a quarter of the entries deletes; one batch in
/// three is synced, and one in five is a transaction's commit.
fn ks_batches(
    rng: &mut Rng,
    steps: &mut Vec<KsStep>,
    spaces: &[&'static str],
    count: usize,
    max_value_bytes: u64,
) {
    for _ in 0..count {
        let i = steps.len();
        let entries = (0..1 + rng.below(4))
            .map(|_| {
                let space = spaces[rng.index(spaces.len())];
                let key = format!("k{:02}", rng.below(16)).into_bytes();
                let value = (rng.below(4) != 0)
                    .then(|| vec![i as u8; 1 + rng.below(max_value_bytes) as usize]);
                (space, key, value)
            })
            .collect();
        let sync = i % 3 == 2;
        steps.push(if i % 5 == 4 {
            KsStep::Commit(entries, sync)
        } else {
            KsStep::Write(entries, sync)
        });
    }
}

/// Writes `keys` small keys into `space`, 500 to an unsynced batch.
fn ks_fill(steps: &mut Vec<KsStep>, space: &'static str, keys: u32) {
    for start in (0..keys).step_by(500) {
        let entries = (start..keys.min(start + 500))
            .map(|n| {
                (
                    space,
                    format!("fill{n:05}").into_bytes(),
                    Some(n.to_be_bytes().to_vec()),
                )
            })
            .collect();
        steps.push(KsStep::Write(entries, false));
    }
}

/// Creates keyspaces, writes batches across them (with the default one),
/// drops keyspaces that hold data (the first with `fill` keys more, so
/// the cleaner writes `fill / 4096 + 1` batches of tombstones), creates
/// names again after their drops and writes to them.
fn keyspace_workload(rounds: usize, fill: u32, max_value_bytes: u64) -> KsWorkload {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut steps = vec![KsStep::Create("a"), KsStep::Create("b")];
    let v = max_value_bytes;
    ks_batches(&mut rng, &mut steps, &[DEFAULT, "a", "b"], 2 * rounds, v);
    ks_fill(&mut steps, "b", fill);
    ks_batches(&mut rng, &mut steps, &[DEFAULT, "a", "b"], rounds, v);
    // Unsynced writes just before a drop: the drop's sync makes them
    // durable.
    steps.push(KsStep::Drop("b"));
    ks_batches(&mut rng, &mut steps, &[DEFAULT, "a"], rounds, v);
    steps.push(KsStep::Create("b"));
    ks_batches(&mut rng, &mut steps, &[DEFAULT, "a", "b"], rounds, v);
    steps.push(KsStep::Create("c"));
    ks_batches(&mut rng, &mut steps, &["a", "b", "c"], rounds, v);
    steps.push(KsStep::Drop("a"));
    ks_batches(&mut rng, &mut steps, &[DEFAULT, "b", "c"], rounds, v);
    steps.push(KsStep::Create("a"));
    ks_batches(&mut rng, &mut steps, &[DEFAULT, "a", "b", "c"], rounds, v);
    // Two drops in a row, then both names again.
    steps.push(KsStep::Drop("c"));
    steps.push(KsStep::Drop("b"));
    ks_batches(&mut rng, &mut steps, &[DEFAULT, "a"], rounds, v);
    steps.push(KsStep::Create("c"));
    steps.push(KsStep::Create("b"));
    ks_batches(&mut rng, &mut steps, &["a", "b", "c"], rounds, v);
    KsWorkload::new(steps)
}

/// The keyspace workload's options: checkpoints every few KiB, so crashes
/// fall in checkpoints of cross-keyspace data and of the cleaner's
/// tombstones too.
fn keyspace_options() -> Options {
    checkpointing_options()
}

fn crash_keyspace_workload(work: &KsWorkload, one_in: u64) {
    let options = keyspace_options();
    // The workload runs whole, and does what it is meant to.
    let fs = FaultFs::new();
    let db = open_fault(&fs, options.clone()).unwrap();
    assert_eq!(work.run(&db).0, work.steps.len());
    let want = work.models.last().unwrap();
    assert_eq!(&keyspace_contents(&db), &want.spaces);
    wait_for_cleaning(&db, "the run without crashes");
    let checkpoints = db.stats().checkpoints;
    assert!(checkpoints >= 8, "only {checkpoints} checkpoints");
    drop(db);
    let started = Instant::now();
    let (total, crash_points) = crash_everywhere_with_seeds(work, &options, 1, one_in);
    let resumed = work.resumed_cleanings.get();
    eprintln!(
        "tried {crash_points} crash points ({total} ops, one in {one_in}, x 3 modes) over \
         {} steps and {checkpoints} checkpoints in {:?}; {resumed} reopens resumed a cleaning",
        work.steps.len(),
        started.elapsed()
    );
    assert!(
        resumed > 0,
        "no crash left a drop to clean after the reopen"
    );
}

/// Crashes across keyspace creates, cross-keyspace batches and commits,
/// drops (with the cleaner's tombstones after them) and names created
/// again: every recovered state is the model's after a prefix that holds
/// every synced step, and the reopen's cleaner removes every key of the
/// drops it finds. One operation in two is a crash point (about 1,000
/// crash points, 20 s); the ignored `_long` version tries every one.
#[test]
fn crash_across_keyspace_batches_drops_and_cleaning() {
    crash_keyspace_workload(&keyspace_workload(6, 600, 2500), 2);
}

/// As above, crashing at every operation (about 3,600 crash points, 2
/// minutes), with more steps and a dropped keyspace of more than 4,096
/// keys, so that the cleaner writes two batches of tombstones.
#[test]
#[ignore = "long: thousands of crash points"]
fn crash_across_keyspace_batches_drops_and_cleaning_long() {
    crash_keyspace_workload(&keyspace_workload(10, 5000, 2500), 1);
}
