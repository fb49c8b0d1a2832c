//! Promise 4 through the public API: random bit flips and overwritten
//! blocks in every file of a checkpointed database (superblock, node and
//! leaf page files, WAL segments, value files). After each, opening, every `get`, a full
//! scan and `check()` return the right data or `Error::Corruption`, never
//! wrong data and never a panic. The one documented exception is damage to
//! the last records of the newest WAL segment, which recovery cannot tell
//! from a torn write and drops as a tail: the state is then still a prefix
//! of the history, never a state with holes.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{Model, Rng, checkpointing_options, contents, open_fault};
use turtlekv::io::{CrashMode, FaultFs, FileSystem, OpenOptions};
use turtlekv::{Error, WriteBatch, WriteOptions};

type Batch = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// The history and the number of batches the last checkpoint covers.
struct Built {
    fs: FaultFs,
    history: Vec<Batch>,
    checkpointed: usize,
}

/// The checkpointing options, with values of 128 bytes and more stored in
/// a value file, so that damage to one is tried too.
fn options() -> turtlekv::Options {
    checkpointing_options().value_separation_threshold_bytes(128)
}

/// 500 batches with checkpoints every few KiB and a forced one after 400;
/// the last 100 stay in the WAL only. Everything is synced and closed.
fn build() -> Built {
    let fs = FaultFs::new();
    let db = open_fault(&fs, options()).unwrap();
    let mut rng = Rng(0xDEC0DE);
    let mut history = Vec::new();
    for i in 0..500 {
        if i == 400 {
            db.checkpoint_now().unwrap();
            // The rest stays in the WAL.
            db.set_checkpoint_distance(1 << 20).unwrap();
        }
        let batch: Batch = (0..1 + rng.below(3))
            .map(|_| {
                let key = format!("key{:03}", rng.below(300)).into_bytes();
                let value = (rng.below(5) != 0).then(|| vec![i as u8; 1 + rng.below(200) as usize]);
                (key, value)
            })
            .collect();
        let mut wb = WriteBatch::new();
        for (k, v) in &batch {
            match v {
                Some(v) => wb.put(k, v),
                None => wb.delete(k),
            };
        }
        // A few synced writes in the WAL tail: damage before them is
        // provably not a torn write.
        let sync = i > 400 && i % 25 == 0;
        db.write(wb, &WriteOptions::new().sync(sync)).unwrap();
        history.push(batch);
    }
    db.flush_wal().unwrap();
    assert!(db.stats().checkpoints >= 10, "{:?}", db.stats().checkpoints);
    drop(db);
    Built {
        fs,
        history,
        checkpointed: 400,
    }
}

fn apply(model: &mut Model, batch: &Batch) {
    for (k, v) in batch {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

/// The states after each prefix of the history from `min` batches on.
fn allowed_states(built: &Built, min: usize) -> Vec<Model> {
    let mut model = Model::new();
    let mut states = Vec::new();
    for (i, batch) in built.history.iter().enumerate() {
        if i >= min {
            states.push(model.clone());
        }
        apply(&mut model, batch);
    }
    states.push(model);
    states
}

fn files(fs: &FaultFs) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["/db", "/db/wal", "/db/values"] {
        for name in fs.list_dir(Path::new(dir)).unwrap() {
            let path = Path::new(dir).join(&name);
            if name != "wal" && name != "values" && name != "LOCK" {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn file_len(fs: &FaultFs, path: &Path) -> u64 {
    fs.open(path, OpenOptions::read_only())
        .unwrap()
        .len()
        .unwrap()
}

/// Damages `path` in a copy of the database: a few flipped bits, or one
/// 512-byte block overwritten with random bytes or zeros.
fn damage(fs: &FaultFs, path: &Path, rng: &mut Rng) -> String {
    let len = file_len(fs, path);
    if path.ends_with("SUPERBLOCK") {
        // Past byte 92 a slot is unchecked zero padding: aim at the fields.
        let bit = rng.below(2) * 4096 * 8 + rng.below(92 * 8);
        fs.flip_bit(path, bit).unwrap();
        return format!("bit {bit} of {}", path.display());
    }
    if rng.below(2) == 0 {
        let bits: Vec<u64> = (0..1 + rng.below(4)).map(|_| rng.below(len * 8)).collect();
        for &bit in &bits {
            fs.flip_bit(path, bit).unwrap();
        }
        format!("bits {bits:?} of {}", path.display())
    } else {
        let block = rng.below(len.div_ceil(512)) * 512;
        let zeros = rng.below(3) == 0;
        let bytes: Vec<u8> = (0..512.min(len - block))
            .map(|_| if zeros { 0 } else { rng.next() as u8 })
            .collect();
        let write = OpenOptions {
            write: true,
            ..OpenOptions::default()
        };
        let file = fs.open(path, write).unwrap();
        file.write_at(&bytes, block).unwrap();
        format!(
            "block at {block} of {} ({})",
            path.display(),
            if zeros { "zeros" } else { "random" }
        )
    }
}

#[derive(Debug, Default)]
struct Outcomes {
    trials: u64,
    open_refused: u64,
    reads_refused: u64,
    check_refused: u64,
    unnoticed: u64,
    /// Of those, damage the open found and counted: a superblock slot
    /// that failed to validate, which it cannot tell from a torn commit.
    counted_at_open: u64,
    tail_dropped: u64,
}

fn is_corruption<T>(r: &turtlekv::Result<T>) -> bool {
    matches!(r, Err(Error::Corruption { .. }))
}

/// Opens the damaged copy and checks every answer; returns what noticed.
fn judge(fs: &FaultFs, built: &Built, wal_damaged: bool, what: &str, out: &mut Outcomes) {
    out.trials += 1;
    let db = match open_fault(fs, options()) {
        Ok(db) => db,
        Err(Error::Corruption { .. }) => {
            out.open_refused += 1;
            return;
        }
        Err(e) => panic!("{what}: open failed with {e:?}, not Corruption"),
    };
    // Only damage to the WAL may lose records, and only as a tail.
    let states = if wal_damaged {
        allowed_states(built, built.checkpointed)
    } else {
        allowed_states(built, built.history.len())
    };
    let scan: turtlekv::Result<Model> = db
        .range::<&[u8], _>(..)
        .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect();
    let mut refused = false;
    let candidates: Vec<&Model> = match &scan {
        Ok(found) => {
            let i = states
                .iter()
                .position(|s| s == found)
                .unwrap_or_else(|| panic!("{what}: the scan returned a state no prefix had"));
            vec![&states[i]]
        }
        Err(Error::Corruption { .. }) => {
            refused = true;
            states.iter().collect()
        }
        Err(e) => panic!("{what}: scan failed with {e:?}"),
    };
    let keys: Vec<Vec<u8>> = (0..300)
        .map(|i| format!("key{i:03}").into_bytes())
        .collect();
    for key in &keys {
        let got = db.get(key);
        if is_corruption(&got) {
            refused = true;
            continue;
        }
        let got = got.unwrap_or_else(|e| panic!("{what}: get failed with {e:?}"));
        assert!(
            candidates
                .iter()
                .any(|s| s.get(key).map(Vec::as_slice) == got.as_deref()),
            "{what}: get({:?}) returned {got:?}, which no allowed state holds",
            String::from_utf8_lossy(key)
        );
    }
    let check = db.check();
    match &check {
        Ok(_) => {}
        Err(Error::Corruption { .. }) => out.check_refused += 1,
        Err(e) => panic!("{what}: check failed with {e:?}"),
    }
    if refused {
        out.reads_refused += 1;
    } else if check.is_ok() {
        if contents(&db) == *states.last().unwrap() {
            out.unnoticed += 1; // damage in bytes nothing reads
            out.counted_at_open += u64::from(db.stats().superblock_slots_damaged > 0);
        } else {
            out.tail_dropped += 1;
        }
    }
}

#[test]
fn damage_anywhere_in_a_checkpointed_database_is_corruption_never_wrong_data() {
    let built = build();
    let files = files(&built.fs);
    assert!(files.len() >= 4, "{files:?}");
    let mut by_file: BTreeMap<String, Outcomes> = BTreeMap::new();
    let mut rng = Rng(0xBAD_F11E);
    // Longer runs: TURTLEKV_CORRUPTION_TRIALS=5000 (per file).
    let trials_per_file = std::env::var("TURTLEKV_CORRUPTION_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150);
    for path in &files {
        let kind = if path.starts_with("/db/wal") {
            "wal segment".to_string()
        } else if path.starts_with("/db/values") {
            "value file".to_string()
        } else {
            path.display().to_string()
        };
        for _ in 0..trials_per_file {
            let copy = built.fs.crash(CrashMode::DropUnsynced);
            let what = damage(&copy, path, &mut rng);
            let out = by_file.entry(kind.clone()).or_default();
            judge(&copy, &built, path.starts_with("/db/wal"), &what, out);
        }
    }
    for (kind, out) in &by_file {
        eprintln!("{kind}: {out:?}");
    }
    // The damage was noticed somewhere in each page file and value file.
    assert!(by_file.contains_key("value file"), "{files:?}");
    for name in ["/db/nodes.pages", "/db/leaves.pages", "value file"] {
        let out = &by_file[name];
        assert!(
            out.open_refused + out.reads_refused + out.check_refused > 0,
            "{name}: {out:?}"
        );
    }
}

/// A database whose every write is synced, checkpointed often.
fn synced_database(fs: &FaultFs, batches: u32) -> Model {
    let db = open_fault(fs, checkpointing_options()).unwrap();
    let mut model = Model::new();
    for i in 0..batches {
        let key = format!("key{:03}", i * 37 % 200).into_bytes();
        let value = vec![i as u8; 50 + (i % 100) as usize];
        db.put_opt(&key, &value, &WriteOptions::new().sync(true))
            .unwrap();
        model.insert(key, value);
    }
    model
}

/// The newest valid superblock generation's slot offset.
fn newest_slot(fs: &FaultFs) -> u64 {
    let file = fs
        .open(Path::new("/db/SUPERBLOCK"), OpenOptions::read_only())
        .unwrap();
    let mut generations = [0u64; 2];
    for (slot, g) in generations.iter_mut().enumerate() {
        let mut buf = [0u8; 8];
        file.read_at(&mut buf, slot as u64 * 4096 + 16).unwrap();
        *g = u64::from_le_bytes(buf);
    }
    if generations[1] > generations[0] {
        4096
    } else {
        0
    }
}

/// A crash while a checkpoint writes its superblock slot leaves the slot
/// torn; recovery must use the other slot and replay the WAL, which the
/// unfinished checkpoint had not trimmed. A 512-byte tear keeps the
/// checksummed first 92 bytes whole, so the test also tears inside them.
#[test]
fn torn_superblock_slot_falls_back_to_older_slot() {
    let mut fell_back = 0;
    for seed in 0..8u64 {
        let fs = FaultFs::new();
        let model = synced_database(&fs, 150);
        // The next superblock sync fails: the checkpoint that wrote the
        // slot never commits, and the handle is poisoned.
        fs.inject(turtlekv::io::Fault {
            on: turtlekv::io::FaultOn::Sync,
            // The open's own syncs of the superblock (the newest slot
            // again, then the commit of its WAL floor) succeed.
            after: 2,
            kind: turtlekv::io::FaultKind::Eio,
            persistent: true,
            path_contains: Some("SUPERBLOCK".into()),
        });
        let db = open_fault(&fs, checkpointing_options()).unwrap();
        let mut acked = model.clone();
        // Enough writes for several checkpoints (MemTable entries of a few
        // dozen bytes; 4 KiB distance): the loop ends at the poisoning.
        for i in 0..1000u32 {
            let key = format!("more{i:03}").into_bytes();
            match db.put_opt(&key, b"v", &WriteOptions::new().sync(true)) {
                Ok(()) => acked.insert(key, b"v".to_vec()),
                Err(Error::Poisoned { .. } | Error::Io(_)) => break,
                Err(e) => panic!("{e:?}"),
            };
        }
        assert!(fs.fault_fired(), "no checkpoint reached its superblock");
        let crashed = fs.crash(CrashMode::TearLastWrite { seed });
        drop(db);
        if seed % 2 == 1 {
            // Tear inside the checksummed fields of the slot being written.
            let slot = newest_slot(&crashed);
            for byte in 40 + seed * 3..92 {
                crashed
                    .flip_bit(Path::new("/db/SUPERBLOCK"), (slot + byte) * 8)
                    .unwrap();
            }
            fell_back += 1;
        }
        let db = open_fault(&crashed, checkpointing_options())
            .unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
        db.check().unwrap();
        if seed % 2 == 1 {
            // The older slot's generation: the WAL replayed what it lacked.
            assert!(db.stats().wal_records_replayed > 0, "seed {seed}");
        }
        let found = contents(&db);
        for (k, v) in &acked {
            assert_eq!(found.get(k), Some(v), "seed {seed}: lost a synced write");
        }
    }
    assert_eq!(fell_back, 4);
}

/// The newest slot rots after its checkpoint trimmed the WAL: falling back
/// to the older slot would silently return an older state, so it must be
/// reported instead (or the data must still be right).
#[test]
fn rotten_newest_superblock_slot_is_never_an_older_state() {
    for bit in [16 * 8, 40 * 8 + 3, 48 * 8, 72 * 8 + 1] {
        let fs = FaultFs::new();
        let model = synced_database(&fs, 150);
        let db = open_fault(&fs, checkpointing_options()).unwrap();
        db.checkpoint_now().unwrap();
        drop(db);
        let slot = newest_slot(&fs);
        fs.flip_bit(Path::new("/db/SUPERBLOCK"), slot * 8 + bit)
            .unwrap();
        match open_fault(&fs, checkpointing_options()) {
            Err(Error::Corruption { .. }) => {}
            Err(e) => panic!("bit {bit}: {e:?}"),
            Ok(db) => assert_eq!(contents(&db), model, "bit {bit}: an older state"),
        }
    }
}
