//! Disk space under overwrites and deletes (`docs/tuning.md`, "Disk
//! space"): garbage is reclaimed while writes come and after they stop,
//! and allocated blocks stay within a bound of the live data, on a real
//! file system (hole punching and `st_blocks`).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::{Db, Options, Stats};

const VALUE_BYTES: usize = 100;

fn key(i: u64) -> [u8; 8] {
    // Spread over the key space, as hashed keys are.
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

fn value(i: u64, round: u64) -> Vec<u8> {
    let mut v = vec![0u8; VALUE_BYTES];
    let mut x = i ^ (round << 40) ^ 0x5151_5151;
    for chunk in v.chunks_mut(8) {
        // Incompressible, so that compression does not hide garbage.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    v
}

/// The small configuration: 64 KiB leaves, a 256 KiB checkpoint
/// distance, a 4 MiB budget.
fn small() -> Options {
    Options {
        leaf_size_bytes: 64 * 1024,
        checkpoint_distance_bytes: 256 * 1024,
        cache_capacity_bytes: 4 << 20,
        ..Options::default()
    }
}

/// Allocated bytes of the page files (leaves and nodes).
fn page_file_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    ["leaves.pages", "nodes.pages"]
        .iter()
        .map(|f| std::fs::metadata(dir.join(f)).unwrap().blocks() * 512)
        .sum()
}

/// Checkpoints everything, then waits for the checkpoint thread's idle
/// reclamation to bring the garbage under the threshold (or to find
/// nothing more to do) and to punch what it freed (writes must have
/// stopped for a second); returns the stats then.
fn settle(db: &Db, garbage_percent: u32) -> Stats {
    db.checkpoint_now().unwrap();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(60);
    let mut last = (db.stats().reclaim_flushes, Instant::now());
    loop {
        let s = db.stats();
        let under = s.space_garbage_bytes * 100 <= s.space_live_bytes * u64::from(garbage_percent);
        if s.reclaim_flushes != last.0 {
            last = (s.reclaim_flushes, Instant::now());
        }
        let stalled = last.1.elapsed() > Duration::from_secs(3);
        let released = started.elapsed() > Duration::from_millis(1500);
        if (under && released) || stalled || Instant::now() > deadline {
            return db.stats();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Writes keys `0..n` `rounds` times, each round with new values; returns
/// what the database must hold.
fn overwrite(db: &Db, n: u64, rounds: u64) -> BTreeMap<[u8; 8], Vec<u8>> {
    let mut model = BTreeMap::new();
    for round in 0..rounds {
        for i in 0..n {
            let v = value(i, round);
            db.put(key(i), &v).unwrap();
            model.insert(key(i), v);
        }
    }
    model
}

fn check_reads(db: &Db, model: &BTreeMap<[u8; 8], Vec<u8>>, n: u64) {
    for i in 0..n {
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            model.get(&key(i)).map(Vec::as_slice),
            "key {i}"
        );
    }
    assert_eq!(db.range::<&[u8], _>(..).count(), model.len());
}

/// 150K records of 108 bytes written three times in the small
/// configuration: without reclamation the directory took 3.1 times the
/// live data after `checkpoint_now`; with it, under twice once the
/// checkpoint thread has reclaimed what the last checkpoint left.
#[test]
fn overwrites_in_a_small_configuration_stay_under_twice_the_live_data() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), small()).unwrap();
    let n = 150_000u64;
    let model = overwrite(&db, n, 3);
    // `checkpoint_now`, then what the checkpoint thread reclaims after it.
    let s = settle(&db, small().garbage_percent);
    let live = n * (8 + VALUE_BYTES as u64);
    let amplification = s.space_allocated_bytes as f64 / live as f64;
    eprintln!(
        "space amplification {amplification:.2}: {} allocated, leaves {} segments {} \
         reclaim flushes {}",
        s.space_allocated_bytes,
        s.tree_leaf_page_bytes,
        s.tree_segment_page_bytes,
        s.reclaim_flushes
    );
    assert!(amplification < 2.0, "{amplification:.2}: {s:?}");
    assert!(s.reclaim_flushes > 0);
    check_reads(&db, &model, n);
    db.check().unwrap();
}

/// Half of the keys deleted, then checkpoints and the idle reclamation:
/// the page files shrink to within 1.4 times the remaining records with
/// the default page sizes, and within 1.75 with 64 KiB leaves (where each
/// leaf spends about a block on its head and filter, and half-empty
/// leaves are not joined: without reclamation, 2.75).
#[test]
fn deleting_half_of_the_keys_gives_their_space_back() {
    let default_sized = Options {
        cache_capacity_bytes: 16 << 20,
        ..Options::default()
    };
    for (o, n, bound) in [(small(), 100_000u64, 1.75), (default_sized, 200_000, 1.4)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let db = Db::open(&path, o.clone()).unwrap();
        let mut model = BTreeMap::new();
        for i in 0..n {
            let v = value(i, 0);
            db.put(key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        settle(&db, o.garbage_percent);
        let loaded = page_file_bytes(&path);
        for i in (0..n).step_by(2) {
            db.delete(key(i)).unwrap();
            model.remove(&key(i));
        }
        let s = settle(&db, o.garbage_percent);
        let remaining = (n / 2) * (8 + VALUE_BYTES as u64);
        let pages = page_file_bytes(&path);
        eprintln!(
            "leaf size {}: page files {loaded} after the load, {pages} after deleting half \
             ({:.2} of the remaining records); garbage {} live {} leaves {} ({:.2} full) \
             segments {}",
            o.leaf_size_bytes,
            pages as f64 / remaining as f64,
            s.space_garbage_bytes,
            s.space_live_bytes,
            s.tree_leaf_page_bytes,
            s.leaf_fill(),
            s.tree_segment_page_bytes,
        );
        assert!(
            pages as f64 <= remaining as f64 * bound,
            "leaf size {}: {pages} bytes for {remaining} bytes of records: {s:?}",
            o.leaf_size_bytes
        );
        check_reads(&db, &model, n);
        db.check().unwrap();
    }
}

/// Garbage left by the last checkpoint is reclaimed between checkpoints,
/// with no checkpoint to carry it.
#[test]
fn garbage_is_reclaimed_after_the_writes_stop() {
    // A threshold the last checkpoint leaves the garbage above.
    drains_at_rest(10, 10);
}

/// Once writes and reads stop, reclamation goes on down to a third of the
/// threshold (`store::space::Pace::Idle`): garbage the writes left under
/// `garbage_percent` but over a third of it is drained at rest.
#[test]
fn at_rest_garbage_goes_down_to_a_third_of_the_threshold() {
    drains_at_rest(30, 10);
}

/// Overwrites 60K keys twice at `garbage_percent`, checkpoints, lets the
/// database rest, and checks that reclamation between checkpoints (no
/// checkpoint runs) brought the garbage under `rest_percent` of the live
/// bytes, or to where what is left is mostly flushed items that segments
/// keep: less than half the threshold is data that buffered updates
/// shadow (`SpacePolicy::plan`). The values do not compress, so buffered
/// bytes are stored bytes.
fn drains_at_rest(garbage_percent: u32, rest_percent: u32) {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        garbage_percent,
        ..small()
    };
    let db = Db::open(dir.path().join("db"), options).unwrap();
    let n = 60_000u64;
    let model = overwrite(&db, n, 2);
    db.checkpoint_now().unwrap();
    let before = db.stats();
    if rest_percent < garbage_percent {
        assert!(
            before.space_garbage_bytes * 100 > before.space_live_bytes * u64::from(rest_percent),
            "the writes must leave more than the threshold at rest: {before:?}"
        );
    }
    let s = settle(&db, rest_percent);
    let allowed = s.space_live_bytes * u64::from(rest_percent) / 100;
    let flushed_kept = s
        .tree_segment_page_bytes
        .saturating_sub(s.tree_buffered_bytes);
    let shadowed = s.space_garbage_bytes.saturating_sub(flushed_kept);
    assert!(
        s.space_garbage_bytes <= allowed || shadowed * 2 <= allowed,
        "garbage {} of live {} at the last checkpoint, {} of {} at rest: {s:?}",
        before.space_garbage_bytes,
        before.space_live_bytes,
        s.space_garbage_bytes,
        s.space_live_bytes,
    );
    assert!(
        s.reclaim_flushes > before.reclaim_flushes,
        "nothing drained"
    );
    assert_eq!(s.checkpoints, before.checkpoints, "no write, no checkpoint");
    check_reads(&db, &model, n);
    db.check().unwrap();
}

/// With reclamation off, the same overwrites keep their garbage: the
/// option works, and the bound above is reclamation's doing.
#[test]
fn garbage_percent_zero_turns_reclamation_off() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options {
        garbage_percent: 0,
        ..small()
    };
    let db = Db::open(dir.path().join("db"), o).unwrap();
    for round in 0..2 {
        for i in 0..40_000 {
            db.put(key(i), value(i, round)).unwrap();
        }
    }
    db.checkpoint_now().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(db.stats().reclaim_flushes, 0);
}

/// A load of new keys: the chunks of segment pages that hold only flushed
/// items are punched out of the pages (`docs/format.md`, "Page files"), so
/// the page files stay close to the records; every read, forward and
/// reverse, and the deep check pass over the holes. A reopened handle,
/// which does not know which blocks were punched, reads, checks, writes
/// and punches on.
#[test]
fn a_load_keeps_few_flushed_items_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        leaf_size_bytes: 256 * 1024,
        checkpoint_distance_bytes: 1 << 20,
        cache_capacity_bytes: 16 << 20,
        ..Options::default()
    };
    let path = dir.path().join("db");
    let db = Db::open(&path, options.clone()).unwrap();
    let n = 300_000u64;
    let mut model = overwrite(&db, n, 1);
    let s = settle(&db, options.garbage_percent);
    let live = n * (8 + VALUE_BYTES as u64);
    let pages = page_file_bytes(&path);
    eprintln!(
        "page files {:.3} times the records; {} bytes punched; segments {} for {} buffered",
        pages as f64 / live as f64,
        s.page_bytes_punched,
        s.tree_segment_page_bytes,
        s.tree_buffered_bytes
    );
    assert!(s.page_bytes_punched > 0, "{s:?}");
    // Without punching chunks this load's page files take 1.39 times
    // its records; leaves are about 1.05 of theirs.
    assert!(
        pages as f64 <= live as f64 * 1.2,
        "{pages} for {live}: {s:?}"
    );
    check_reads(&db, &model, n);
    let reversed: Vec<_> = db
        .range::<&[u8], _>(..)
        .rev()
        .map(|kv| kv.unwrap().0)
        .collect();
    assert!(
        reversed
            .iter()
            .rev()
            .map(|k| &k[..])
            .eq(model.keys().map(|k| &k[..]))
    );
    db.check().unwrap();
    db.close().unwrap();

    let db = Db::open(&path, options.clone()).unwrap();
    db.check().unwrap();
    check_reads(&db, &model, n);
    for i in (0..n).step_by(3) {
        let v = value(i, 1);
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    let s = settle(&db, options.garbage_percent);
    assert!(s.page_bytes_punched > 0, "{s:?}");
    check_reads(&db, &model, n);
    let lo = key(7);
    let below: Vec<_> = db.range(..&lo[..]).rev().map(|kv| kv.unwrap().0).collect();
    assert!(
        below
            .iter()
            .rev()
            .map(|k| &k[..])
            .eq(model.range(..lo).map(|(k, _)| &k[..]))
    );
    db.check().unwrap();
}

/// Allocated bytes of the WAL's segments.
fn wal_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().blocks() * 512)
        .sum()
}

/// Once writes stop, the WAL gives back the storage it reserved ahead of
/// its appends (megabytes, whatever the database holds), and writes that
/// come later are reserved for and logged as before.
#[test]
fn an_idle_database_gives_back_the_wal_reserve() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path, Options::default()).unwrap();
    let mut model = BTreeMap::new();
    let mut write = |from: u64, to: u64| {
        for i in from..to {
            db.put(key(i), value(i, 0)).unwrap();
            model.insert(key(i), value(i, 0));
        }
    };
    write(0, 1_000);
    assert!(
        wal_bytes(&path) > 2 << 20,
        "reserved ahead while writes come"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while wal_bytes(&path) > 512 << 10 {
        assert!(Instant::now() < deadline, "{} bytes", wal_bytes(&path));
        std::thread::sleep(Duration::from_millis(50));
    }
    write(1_000, 20_000);
    assert!(wal_bytes(&path) > 2 << 20, "reserved again");
    drop(db);
    let db = Db::open(&path, Options::default()).unwrap();
    check_reads(&db, &model, 20_000);
}
