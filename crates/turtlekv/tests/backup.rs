//! Online backups (`Db::backup`): taken while writers run, they hold the
//! database at one point; a backup cut short by an error or a crash is
//! refused by every open; a corrupt source page fails the backup; a bad
//! destination is refused before anything is written.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::{
    WRITERS, all_contents, check_writer_state, checkpointing_options, file_names, no_create,
    write_step,
};
use turtlekv::io::{CrashMode, Fault, FaultFs, FileSystem};
use turtlekv::{Db, Error};

#[test]
fn a_backup_taken_while_writers_run_holds_the_database_at_one_point() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path, checkpointing_options()).unwrap();
    let mirror = db.keyspace("mirror").unwrap();
    // Data before the backup, synced: in the tree and in the MemTables.
    for i in 0..2_000u64 {
        db.put(format!("base{i:05}"), vec![b'b'; (i % 50) as usize + 1])
            .unwrap();
        mirror.put(format!("base{i:05}"), b"m").unwrap();
    }
    db.flush_wal().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged: Arc<Vec<AtomicU64>> =
        Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (db, mirror) = (db.clone(), mirror.clone());
            let (stop, acknowledged) = (stop.clone(), acknowledged.clone());
            std::thread::spawn(move || {
                let mut s = 0;
                while !stop.load(Ordering::Relaxed) {
                    s += 1;
                    write_step(&db, &mirror, w, s, s % 7 == 0);
                    acknowledged[w as usize].store(s, Ordering::Release);
                }
            })
        })
        .collect();
    // Let them write through a few checkpoints first.
    while acknowledged.iter().any(|a| a.load(Ordering::Acquire) < 300) {
        std::thread::yield_now();
    }
    let before: Vec<u64> = acknowledged
        .iter()
        .map(|a| a.load(Ordering::Acquire))
        .collect();
    let backup_dir = dir.path().join("backup");
    let report = db.backup(&backup_dir).unwrap();
    let after: Vec<u64> = acknowledged
        .iter()
        .map(|a| a.load(Ordering::Acquire))
        .collect();
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    assert!(report.pages > 0, "{report:?}");

    let copy = Db::open(&backup_dir, no_create(checkpointing_options())).unwrap();
    copy.check().unwrap();
    let all = all_contents(&copy);
    for w in 0..WRITERS {
        let p = check_writer_state(&all, w);
        assert!(
            (before[w as usize]..=after[w as usize]).contains(&p),
            "writer {w}: backup at step {p}, acknowledged {} before and {} after",
            before[w as usize],
            after[w as usize]
        );
    }
    for i in (0..2_000u64).step_by(97) {
        let key = format!("base{i:05}");
        assert_eq!(
            copy.get(&key).unwrap().unwrap().len(),
            (i % 50) as usize + 1
        );
        assert_eq!(
            &copy.keyspace("mirror").unwrap().get(&key).unwrap().unwrap()[..],
            b"m"
        );
    }
    // The backup is a database of its own: it takes writes and reopens.
    copy.put("after", "backup").unwrap();
    copy.close().unwrap();
    let copy = Db::open(&backup_dir, no_create(checkpointing_options())).unwrap();
    assert_eq!(&copy.get("after").unwrap().unwrap()[..], b"backup");
    drop(copy);

    // With the writers stopped, a backup equals the database exactly.
    let quiet_dir = dir.path().join("quiet");
    db.backup(&quiet_dir).unwrap();
    let quiet = Db::open(&quiet_dir, no_create(checkpointing_options())).unwrap();
    assert_eq!(all_contents(&quiet), all_contents(&db));
    quiet.check().unwrap();
}

#[test]
fn a_bad_destination_is_refused_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path, checkpointing_options()).unwrap();
    db.put("k", "v").unwrap();
    let source_files = file_names(&path);

    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("keep"), b"x").unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let inside = path.join("nested");
    let cases = [
        (full.clone(), "not an empty directory"),
        (file.clone(), "not a directory"),
        (inside.clone(), "inside the database"),
        (path.clone(), "inside the database"),
        (dir.path().to_path_buf(), "lies inside it"),
    ];
    for (dest, why) in cases {
        match db.backup(&dest) {
            Err(Error::BackupTarget { reason, .. }) => {
                assert!(reason.contains(why), "{}: {reason}", dest.display());
            }
            other => panic!("{}: {other:?}", dest.display()),
        }
    }
    assert_eq!(file_names(&full), vec![std::ffi::OsString::from("keep")]);
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
    assert!(!inside.exists());
    assert_eq!(file_names(&path), source_files);
    // A symbolic link into the database is seen through.
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    assert!(matches!(
        db.backup(link.join("sub")),
        Err(Error::BackupTarget { .. })
    ));
    assert!(!path.join("sub").exists());
    // An empty directory is taken.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    db.backup(&empty).unwrap();
    let copy = Db::open(&empty, no_create(checkpointing_options())).unwrap();
    assert_eq!(&copy.get("k").unwrap().unwrap()[..], b"v");
}

/// A database on `fs` at `/db` with a few checkpoints and MemTable data
/// in two keyspaces.
fn fault_db(fs: &FaultFs) -> Db {
    let db = Db::open_with_fs("/db", checkpointing_options(), Arc::new(fs.clone())).unwrap();
    let other = db.keyspace("other").unwrap();
    for i in 0..600u64 {
        db.put(format!("k{i:05}"), vec![b'v'; (i % 40) as usize + 1])
            .unwrap();
        if i % 3 == 0 {
            other.put(format!("o{i:05}"), b"o").unwrap();
        }
        if i % 5 == 0 {
            db.delete(format!("k{:05}", i / 2)).unwrap();
        }
    }
    db.checkpoint_now().unwrap();
    for i in 0..50u64 {
        db.put(format!("late{i:03}"), b"l").unwrap();
    }
    db
}

fn open_on(fs: &FaultFs, path: &str) -> turtlekv::Result<Db> {
    Db::open_with_fs(
        path,
        no_create(checkpointing_options()),
        Arc::new(fs.clone()),
    )
}

#[test]
fn a_backup_cut_short_by_a_crash_is_refused_at_open() {
    let fs = FaultFs::new();
    let db = fault_db(&fs);
    let want = all_contents(&db);
    // The process dies after `n` writes and syncs under the backup's
    // directory, for every `n` until the backup gets through.
    let mut n = 0;
    let dest = loop {
        let dest = format!("/bk{n}");
        fs.inject(Fault {
            path_contains: Some(dest.clone()),
            ..Fault::crash_after(n)
        });
        let result = db.backup(&dest);
        fs.clear_fault();
        if result.is_ok() {
            break dest;
        }
        for mode in [
            CrashMode::DropUnsynced,
            CrashMode::KeepRandomSubset { seed: n },
            CrashMode::TearLastWrite { seed: n },
        ] {
            let crashed = fs.crash(mode);
            let opened = open_on(&crashed, &dest);
            assert!(
                opened.is_err(),
                "crash after {n} operations ({mode:?}) opened"
            );
            assert!(Db::open_read_only_with_fs(&dest, Arc::new(crashed)).is_err());
        }
        n += 1;
    };
    assert!(n > 10, "a backup made only {n} writes and syncs");
    // The whole backup, crashed right after: it opens with every key.
    let crashed = fs.crash(CrashMode::DropUnsynced);
    let copy = open_on(&crashed, &dest).unwrap();
    assert_eq!(all_contents(&copy), want);
    copy.check().unwrap();
}

#[test]
fn a_corrupt_source_page_fails_the_backup_and_leaves_nothing_that_opens() {
    let fs = FaultFs::new();
    let db = fault_db(&fs);
    let leaves = Path::new("/db/leaves.pages");
    let len = fs
        .open(leaves, turtlekv::io::OpenOptions::read_only())
        .unwrap()
        .len()
        .unwrap();
    // Flip a bit in each block in turn until one the tree reaches fails.
    let mut found = None;
    for block in 0..len / 4096 {
        let bit = (block * 4096 + 100) * 8;
        fs.flip_bit(leaves, bit).unwrap();
        let dest = format!("/bk{block}");
        match db.backup(&dest) {
            Err(Error::Corruption { file, .. }) => {
                assert_eq!(file, leaves);
                found = Some(dest);
                break;
            }
            Ok(_) => fs.flip_bit(leaves, bit).unwrap(),
            Err(e) => panic!("{e}"),
        }
    }
    let dest = found.expect("some block is one the tree reaches");
    assert!(
        fs.list_dir(Path::new(&dest)).is_err(),
        "the failed backup's directory is gone"
    );
    assert!(open_on(&fs, &dest).is_err());
    let crashed = fs.crash(CrashMode::KeepRandomSubset { seed: 7 });
    assert!(open_on(&crashed, &dest).is_err());
}

/// A range deletion still in a MemTable hides keys the backup's tree
/// holds: the backup must hide them too, and keep what was written into
/// the range after it.
#[test]
fn a_backup_keeps_the_range_deletions_its_point_sees() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path, checkpointing_options()).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let key = |i: u32| format!("k{i:05}");
    for i in 0..1_000 {
        db.put(key(i), b"tree").unwrap();
        ks.put(key(i), b"tree").unwrap();
    }
    db.checkpoint_now().unwrap();
    for i in 0..1_000 {
        if i % 3 == 0 {
            db.put(key(i), b"memtable").unwrap();
        }
    }
    db.delete_range(key(100), key(600)).unwrap();
    ks.delete_range(key(900), key(950)).unwrap();
    db.put(key(300), b"after").unwrap();
    let expected = all_contents(&db);
    db.backup(dir.path().join("backup")).unwrap();
    db.delete_range(key(0), key(1_000)).unwrap();
    let backup = Db::open(dir.path().join("backup"), checkpointing_options()).unwrap();
    assert_eq!(all_contents(&backup), expected);
    assert_eq!(
        backup.get(key(300)).unwrap().as_deref(),
        Some(&b"after"[..])
    );
    assert_eq!(backup.get(key(301)).unwrap(), None);
    assert_eq!(backup.iter().count(), 1_000 - 500 + 1);
    assert_eq!(backup.keyspace("ks").unwrap().iter().count(), 1_000 - 50);
    backup.check().unwrap();
}
