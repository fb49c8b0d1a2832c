//! Crash recovery with the fault-injecting file layer: a crash at every
//! write, sync and store through the WAL's mapping of a workload, in each
//! crash mode, must recover a prefix of the acknowledged history that
//! includes every synced batch.

mod common;

use common::{Model, checkpointing_options, contents, open_fault, small_options};
use turtlekv::io::{CrashMode, Fault, FaultFs};
use turtlekv::{Db, Error, Options, WriteBatch, WriteOptions};

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
        match db.write(batch, &WriteOptions { sync: *sync }) {
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

fn total_ops(work: &[(Vec<Entry>, bool)], options: &Options) -> u64 {
    let fs = FaultFs::new();
    let db = open_fault(&fs, options.clone()).unwrap();
    run_until_failure(&db, work);
    drop(db);
    let (writes, syncs) = fs.op_counts();
    // Appends are copies into the WAL's mapping, as on the real file
    // system: a crash can fall between any two of them too.
    assert!(fs.store_count() > 0, "no append went through the mapping");
    writes + syncs + fs.store_count()
}

/// Crashes the workload at every write and sync in each crash mode and
/// checks the recovered state; returns (operations, crash points tried).
fn crash_everywhere(work: &[(Vec<Entry>, bool)], options: &Options) -> (u64, u64) {
    crash_everywhere_with_seeds(work, options, 1, 1)
}

/// As [`crash_everywhere`], with `seeds` different random subsets and tear
/// positions per crash point, at one in `one_in` of the operations (a
/// fixed pseudo-random choice; 1 = every one).
fn crash_everywhere_with_seeds(
    work: &[(Vec<Entry>, bool)],
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
            Ok(db) => run_until_failure(&db, work),
            Err(_) => (0, 0),
        };
        for mode in modes(n) {
            crash_points += 1;
            let crashed = fs.crash(mode);
            let db = open_fault(&crashed, options.clone())
                .unwrap_or_else(|e| panic!("reopen after crash at op {n} ({mode:?}): {e}"));
            db.check()
                .unwrap_or_else(|e| panic!("check after crash at op {n} ({mode:?}): {e}"));
            let found = contents(&db);
            // The batch that failed may or may not have reached the disk.
            let attempted = (acked + 1).min(work.len());
            assert!(
                matching_prefix(&found, work, durable, attempted).is_some(),
                "crash at op {n} ({mode:?}): state is not a prefix in {durable}..={attempted}"
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
    let (total, crash_points) = crash_everywhere(&workload(), &small_options());
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
    let (total, crash_points) = crash_everywhere(&work, &options);
    eprintln!(
        "tried {crash_points} crash points ({total} ops x 3 modes) over {checkpoints} checkpoints ({spills} spills)"
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
    let (total, crash_points) = crash_everywhere(&work, &options);
    eprintln!(
        "tried {crash_points} crash points ({total} ops x 3 modes) over {checkpoints} checkpoints ({reclaims} reclaim flushes)"
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
    let (total, crash_points) = crash_everywhere_with_seeds(&work, &options, 1, one_in);
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
    let (total, crash_points) = crash_everywhere_with_seeds(&work, &options, seeds, 1);
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
            db.write(batch, &WriteOptions { sync: false }).unwrap();
        }
        let killed = fs.kill();
        drop(db); // the killed image no longer sees what this does
        let db = open_fault(&killed, small_options()).unwrap();
        db.put_opt(b"after-kill", b"1", &WriteOptions { sync: true })
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
