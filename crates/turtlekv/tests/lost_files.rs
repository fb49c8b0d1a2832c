//! Lost WAL segments, files of another database and damaged superblock
//! slots or stored options are reported, never taken for a database that
//! simply ends earlier (`docs/durability.md`, promises 7 and 9). Each test
//! loses, swaps or damages files one way.

mod common;

use std::path::{Path, PathBuf};

use common::{Model, checkpointing_options, contents, open_fault, small_options};
use turtlekv::io::{FaultFs, FileSystem, OpenOptions, read_all};
use turtlekv::{Db, Error, Options, WalRecovery, WriteOptions};

const SYNC: WriteOptions = WriteOptions::new().sync(true);

/// The segment files of `wal_dir`, oldest first.
fn segments_in(list: Vec<String>, wal_dir: &Path) -> Vec<PathBuf> {
    let mut names: Vec<String> = list.into_iter().filter(|n| n.ends_with(".wal")).collect();
    names.sort();
    names.into_iter().map(|n| wal_dir.join(n)).collect()
}

fn real_segments(db_dir: &Path) -> Vec<PathBuf> {
    let wal = db_dir.join("wal");
    let names = std::fs::read_dir(&wal)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    segments_in(names, &wal)
}

fn fault_segments(fs: &FaultFs) -> Vec<PathBuf> {
    let wal = Path::new("/db/wal");
    segments_in(fs.list_dir(wal).unwrap(), wal)
}

/// Asserts `result` is the corruption of a missing WAL segment.
fn assert_missing_segment<T: std::fmt::Debug>(result: turtlekv::Result<T>) {
    match result {
        Err(Error::Corruption { reason, .. }) if reason.contains("is missing") => {}
        other => panic!("expected a missing WAL segment, got {other:?}"),
    }
}

fn with_recovery(mut options: Options, recovery: WalRecovery) -> Options {
    options.wal_recovery = recovery;
    options
}

/// `put r a 1; put r b 2; delete r a`, each its own open and a synced
/// write, as the command line tool runs them.
fn three_synced_commands(dir: &Path) {
    let db = Db::open(dir, Options::default()).unwrap();
    db.put_opt(b"a", b"1", &SYNC).unwrap();
    drop(db);
    let db = Db::open(dir, Options::default()).unwrap();
    db.put_opt(b"b", b"2", &SYNC).unwrap();
    drop(db);
    let db = Db::open(dir, Options::default()).unwrap();
    db.delete_opt(b"a", &SYNC).unwrap();
    drop(db);
}

/// After three synced commands, the two newest segments are removed: the
/// open must report it, not answer `a` from before the synced delete.
#[test]
fn removing_the_two_newest_segments_after_three_synced_commands_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    three_synced_commands(dir.path());
    let segments = real_segments(dir.path());
    assert_eq!(segments.len(), 3, "{segments:?}");
    for path in &segments[1..] {
        std::fs::remove_file(path).unwrap();
    }
    assert_missing_segment(Db::open(dir.path(), Options::default()));
    // Nothing was changed: the same answer again.
    assert_missing_segment(Db::open(dir.path(), Options::default()));
    assert_eq!(real_segments(dir.path()).len(), 1);

    // Opening anyway is explicit, and says what it did.
    let recovery = with_recovery(Options::default(), WalRecovery::PointInTime);
    let db = Db::open(dir.path(), recovery).unwrap();
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"b").unwrap(), None);
    assert_eq!(db.stats().wal_missing_segments, 1);
    db.check().unwrap();
    drop(db);
    // From then on the database is whole again.
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.stats().wal_missing_segments, 0);
    db.check().unwrap();
}

/// Removing all of `wal/`, before and after a checkpoint: the open must
/// not go back to the last checkpoint (or to nothing) silently.
#[test]
fn removing_all_of_wal_is_corruption_with_or_without_a_checkpoint() {
    for checkpoint in [false, true] {
        let fs = FaultFs::new();
        let db = open_fault(&fs, checkpointing_options()).unwrap();
        for i in 0..300u32 {
            db.put(i.to_be_bytes(), [5u8; 40]).unwrap();
        }
        if checkpoint {
            db.checkpoint_now().unwrap();
            assert!(db.stats().checkpoints > 0);
        }
        db.put_opt(b"last", b"synced", &SYNC).unwrap();
        drop(db);
        for path in fault_segments(&fs) {
            fs.remove_file(&path).unwrap();
        }
        assert_missing_segment(open_fault(&fs, checkpointing_options()));
        assert!(fault_segments(&fs).is_empty(), "nothing was created");
        let recovery = with_recovery(checkpointing_options(), WalRecovery::PointInTime);
        let db = open_fault(&fs, recovery).unwrap();
        assert_eq!(db.get(b"last").unwrap(), None, "checkpoint {checkpoint}");
        assert_eq!(db.stats().wal_missing_segments, 1);
        db.check().unwrap();
    }
}

/// Deleting the last segment and truncating the one before, at 15 cuts
/// across it: every one is reported.
#[test]
fn deleting_the_last_segment_and_truncating_the_one_before_is_corruption_at_every_cut() {
    let build = || {
        let fs = FaultFs::new();
        for command in 0..3u32 {
            let db = open_fault(&fs, small_options()).unwrap();
            for i in 0..10u32 {
                db.put_opt((command * 100 + i).to_be_bytes(), [7u8; 30], &SYNC)
                    .unwrap();
            }
            drop(db);
        }
        fs
    };
    let segments = fault_segments(&build());
    assert_eq!(segments.len(), 3);
    let len = |fs: &FaultFs, path: &Path| {
        fs.open(path, OpenOptions::read_only())
            .unwrap()
            .len()
            .unwrap()
    };
    let full = len(&build(), &segments[1]);
    for trial in 0..15u64 {
        let fs = build();
        fs.remove_file(&segments[2]).unwrap();
        let cut = full * trial / 15;
        fs.open(&segments[1], OpenOptions::read_write_create())
            .unwrap()
            .set_len(cut)
            .unwrap();
        assert_missing_segment(open_fault(&fs, small_options()));
    }
}

/// Two databases with the same history write byte-identical segments but
/// for their identities: a segment copied from one into the other is
/// refused, and left as it is.
#[test]
fn a_segment_of_another_database_with_the_same_history_is_refused() {
    let history = || {
        let fs = FaultFs::new();
        let db = open_fault(&fs, small_options()).unwrap();
        for i in 0..20u32 {
            db.put_opt(i.to_be_bytes(), b"same", &SYNC).unwrap();
        }
        drop(db);
        fs
    };
    let (ours, theirs) = (history(), history());
    let path = fault_segments(&ours).pop().unwrap();
    let foreign = read_all(&*theirs.open(&path, OpenOptions::read_only()).unwrap()).unwrap();
    let file = ours.open(&path, OpenOptions::read_write_create()).unwrap();
    file.set_len(0).unwrap();
    file.write_at(&foreign, 0).unwrap();
    for recovery in [WalRecovery::Strict, WalRecovery::PointInTime] {
        match open_fault(&ours, with_recovery(small_options(), recovery)) {
            Err(Error::Corruption { file, reason, .. }) => {
                assert_eq!(file, path);
                assert!(reason.contains("another database"), "{reason}");
            }
            other => panic!("{recovery:?}: {other:?}"),
        }
    }
    let kept = read_all(&*ours.open(&path, OpenOptions::read_only()).unwrap()).unwrap();
    assert_eq!(kept, foreign);
}

/// Writes enough synced records through one handle to rotate the log a
/// few times (64 KiB segments), and closes it.
fn rotated_log(fs: &FaultFs, sync: bool) -> Model {
    let db = open_fault(fs, small_options()).unwrap();
    let mut model = Model::new();
    let options = WriteOptions::new().sync(sync);
    for i in 0..2_000u32 {
        let value = vec![(i % 251) as u8; 100];
        db.put_opt(i.to_be_bytes(), &value, &options).unwrap();
        model.insert(i.to_be_bytes().to_vec(), value);
    }
    assert!(fault_segments(fs).len() >= 4, "{:?}", fault_segments(fs));
    if sync {
        drop(db);
    } else {
        // As a `kill -9` leaves it: everything written is readable.
        std::mem::forget(db);
    }
    model
}

/// The newest segments one handle rotated to, lost: no open started them,
/// so only the links of the segments before them tell.
#[test]
fn losing_the_newest_segments_a_handle_rotated_to_is_corruption() {
    let fs = FaultFs::new();
    let model = rotated_log(&fs, true);
    let segments = fault_segments(&fs);
    for path in &segments[segments.len() - 2..] {
        fs.remove_file(path).unwrap();
    }
    assert_missing_segment(open_fault(&fs, small_options()));
    let recovery = with_recovery(small_options(), WalRecovery::PointInTime);
    let db = open_fault(&fs, recovery).unwrap();
    let found = contents(&db);
    assert!(found.len() < model.len());
    assert!(found.iter().all(|(k, v)| model.get(k) == Some(v)));
    assert_eq!(db.stats().wal_missing_segments, 1);
}

/// A middle segment lost after a kill, with nothing synced after it to
/// prove it was durable: the link in front of the gap names it.
#[test]
fn losing_a_middle_segment_is_corruption_even_after_unsynced_writes() {
    let fs = FaultFs::new();
    rotated_log(&fs, false);
    let fs = fs.kill();
    let segments = fault_segments(&fs);
    fs.remove_file(&segments[1]).unwrap();
    let err = open_fault(&fs, small_options()).unwrap_err();
    assert!(
        matches!(&err, Error::Corruption { reason, .. } if reason.contains("gone")),
        "{err}"
    );
    assert_eq!(
        fault_segments(&fs).len(),
        segments.len() - 1,
        "nothing removed"
    );
}

/// A live segment removed while the database is open is reported by
/// `check()`, not skipped as if a checkpoint had trimmed it.
#[test]
fn a_live_segment_removed_while_open_is_reported_by_check() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    for i in 0..2_000u32 {
        db.put(i.to_be_bytes(), [1u8; 100]).unwrap();
    }
    db.check().unwrap();
    let segments = fault_segments(&fs);
    fs.remove_file(&segments[1]).unwrap();
    assert_missing_segment(db.check());
}

/// The page files of a database with the same history (the same pages,
/// the same slots) are refused: their block checksums name the other
/// database.
#[test]
fn page_files_of_another_database_are_refused() {
    let history = || {
        let fs = FaultFs::new();
        let db = open_fault(&fs, checkpointing_options()).unwrap();
        for i in 0..400u32 {
            db.put(i.to_be_bytes(), [9u8; 40]).unwrap();
        }
        db.checkpoint_now().unwrap();
        drop(db);
        fs
    };
    for name in ["nodes.pages", "leaves.pages"] {
        let (ours, theirs) = (history(), history());
        let path = Path::new("/db").join(name);
        let foreign = read_all(&*theirs.open(&path, OpenOptions::read_only()).unwrap()).unwrap();
        ours.open(&path, OpenOptions::read_write_create())
            .unwrap()
            .write_at(&foreign, 0)
            .unwrap();
        let outcome = open_fault(&ours, checkpointing_options()).and_then(|db| db.check());
        match outcome {
            Err(Error::Corruption { file, reason, .. }) => {
                assert_eq!(file, path, "{reason}");
                assert!(reason.contains("checksum mismatch"), "{reason}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

fn superblock(fs: &FaultFs) -> Vec<u8> {
    read_all(
        &*fs.open(Path::new("/db/SUPERBLOCK"), OpenOptions::read_only())
            .unwrap(),
    )
    .unwrap()
}

/// Offset of the slot that does not hold the newest generation.
fn older_slot(fs: &FaultFs) -> u64 {
    let bytes = superblock(fs);
    let generation =
        |slot: usize| u64::from_le_bytes(bytes[slot + 16..slot + 24].try_into().unwrap());
    if generation(0) > generation(4096) {
        4096
    } else {
        0
    }
}

/// A damaged older slot is reported by `check()` while the database is
/// open, and counted by the open that finds it (which may be a torn
/// commit's, and rewrites it).
#[test]
fn check_reports_a_damaged_older_superblock_slot() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, checkpointing_options()).unwrap();
    for i in 0..200u32 {
        db.put(i.to_be_bytes(), [3u8; 40]).unwrap();
    }
    db.checkpoint_now().unwrap();
    db.check().unwrap();
    let older = older_slot(&fs);
    fs.flip_bit(Path::new("/db/SUPERBLOCK"), (older + 20) * 8)
        .unwrap();
    match db.check() {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, Path::new("/db/SUPERBLOCK"));
            assert_eq!(offset, older);
        }
        other => panic!("{other:?}"),
    }
    let model = contents(&db);
    drop(db);
    // The open cannot tell it from a torn commit: it counts it.
    let db = open_fault(&fs, checkpointing_options()).unwrap();
    assert_eq!(db.stats().superblock_slots_damaged, 1);
    assert_eq!(contents(&db), model);
    db.check().unwrap();
}

/// A zeroed older slot is never a crash's work once a later generation
/// was committed: the open reports it.
#[test]
fn a_zeroed_older_superblock_slot_is_corruption() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, checkpointing_options()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.checkpoint_now().unwrap();
    drop(db);
    let older = older_slot(&fs);
    fs.open(
        Path::new("/db/SUPERBLOCK"),
        OpenOptions::read_write_create(),
    )
    .unwrap()
    .write_at(&[0u8; 4096], older)
    .unwrap();
    match open_fault(&fs, checkpointing_options()) {
        Err(Error::Corruption {
            file,
            offset,
            reason,
        }) => {
            assert_eq!(file, Path::new("/db/SUPERBLOCK"));
            assert_eq!(offset, older, "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

/// The newest slot rots after its checkpoint trimmed the WAL: the older
/// slot's checkpoint is short of the log, and what is reported is the
/// damaged superblock slot, not a WAL sequence gap.
#[test]
fn a_rotten_newest_slot_is_reported_as_superblock_damage() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, checkpointing_options()).unwrap();
    for i in 0..300u32 {
        db.put_opt(i.to_be_bytes(), [4u8; 40], &SYNC).unwrap();
    }
    db.checkpoint_now().unwrap();
    drop(db);
    let newest = 4096 - older_slot(&fs);
    fs.flip_bit(Path::new("/db/SUPERBLOCK"), (newest + 48) * 8)
        .unwrap();
    match open_fault(&fs, checkpointing_options()) {
        Err(Error::Corruption {
            file,
            offset,
            reason,
        }) => {
            assert_eq!(file, Path::new("/db/SUPERBLOCK"), "{reason}");
            assert_eq!(offset, newest, "{reason}");
            assert!(reason.contains("WAL"), "{reason}");
        }
        Err(e) => panic!("{e}"),
        Ok(db) => panic!("opened at an older state: {} keys", contents(&db).len()),
    }
}

/// A stored `OPTIONS` cut so that a valid number remains must not change
/// a knob silently: its checksum tells. One copied from another database
/// is refused too.
#[test]
fn a_truncated_or_foreign_options_file_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    drop(Db::open(dir.path(), Options::default()).unwrap());
    let mut tuned = Options::default();
    tuned.wal_segment_size_bytes = 32 << 20;
    tuned.store(dir.path()).unwrap();
    assert_eq!(
        Options::load(dir.path()).unwrap().wal_segment_size_bytes,
        32 << 20
    );
    let path = dir.path().join(turtlekv::OPTIONS_FILE_NAME);
    let text = std::fs::read_to_string(&path).unwrap();
    // `wal_segment_size_bytes = 33554432` is the last line: cut it to
    // `= 335`, and to the line before it.
    let last_line = text.trim_end().rfind('\n').unwrap() + 1;
    for cut in [text.len() - 6, last_line, text.find('\n').unwrap() + 1, 5] {
        std::fs::write(&path, &text[..cut]).unwrap();
        match Options::load(dir.path()) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, path),
            other => panic!("cut at {cut}: {other:?}"),
        }
        let db = Db::open(dir.path(), Options::default()).unwrap();
        assert!(
            matches!(db.check(), Err(Error::Corruption { .. })),
            "cut at {cut}"
        );
    }
    // Another database's file, whole.
    let other = tempfile::tempdir().unwrap();
    drop(Db::open(other.path(), Options::default()).unwrap());
    tuned.store(other.path()).unwrap();
    std::fs::copy(other.path().join(turtlekv::OPTIONS_FILE_NAME), &path).unwrap();
    match Options::load(dir.path()) {
        Err(Error::Corruption { reason, .. }) => {
            assert!(reason.contains("another database"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // A file an earlier build wrote (no version line) still loads; one cut
    // inside a line does not.
    let legacy = "# TurtleKV stored options\nwal_segment_size_bytes = 33554432\n";
    std::fs::write(&path, legacy).unwrap();
    assert_eq!(
        Options::load(dir.path()).unwrap().wal_segment_size_bytes,
        32 << 20
    );
    std::fs::write(&path, &legacy[..legacy.len() - 4]).unwrap();
    assert!(matches!(
        Options::load(dir.path()),
        Err(Error::Corruption { .. })
    ));
}
