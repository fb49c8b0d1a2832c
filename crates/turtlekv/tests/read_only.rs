//! Read-only handles (`Db::open_read_only`): they read a closed database,
//! a backup, or one another handle holds open, refuse every write, and
//! change nothing in the directory; reading a database whose owner
//! commits meanwhile fails with `Error::ChangedWhileReading` rather than
//! returning what may be reused pages.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use common::{
    WRITERS, all_contents, check_writer_state, checkpointing_options, no_create, write_step,
};
use turtlekv::io::FaultFs;
use turtlekv::{Db, Error, WriteBatch, WriteOptions};

/// Every file and directory under `dir`: path, length, modification time.
fn listing(dir: &Path) -> BTreeMap<PathBuf, (u64, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            out.insert(entry.path(), (meta.len(), meta.modified().unwrap()));
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    out
}

/// A closed database with checkpointed data, a WAL tail and a keyspace.
fn closed_db(path: &Path) {
    let db = Db::open(path, checkpointing_options()).unwrap();
    let ks = db.keyspace("ks").unwrap();
    for i in 0..800u64 {
        db.put(format!("k{i:05}"), format!("v{i}")).unwrap();
        ks.put(format!("k{i:05}"), b"ks").unwrap();
    }
    db.checkpoint_now().unwrap();
    for i in 0..100u64 {
        db.put(format!("tail{i:03}"), b"t").unwrap();
        db.delete(format!("k{i:05}")).unwrap();
    }
    db.close().unwrap();
}

/// Every write call of `db` fails with `Error::ReadOnly`.
fn assert_writes_refused(db: &Db) {
    let read_only = |r: turtlekv::Result<()>| {
        assert!(matches!(r, Err(Error::ReadOnly(_))), "{r:?}");
    };
    read_only(db.put("x", "y"));
    read_only(db.delete("k00500"));
    let mut batch = WriteBatch::new();
    batch.put("a", "b");
    read_only(db.write(batch, &WriteOptions::new().sync(true)));
    read_only(db.flush_wal());
    read_only(db.checkpoint_now());
    read_only(db.keyspace("new").map(drop));
    read_only(db.drop_keyspace("ks"));
    read_only(db.keyspace("ks").unwrap().put("x", "y"));
    let mut txn = db.transaction();
    txn.put("t", "t");
    read_only(txn.commit(&WriteOptions::default()).map(drop));
    read_only(
        db.backup(std::env::temp_dir().join("never-written"))
            .map(drop),
    );
}

#[test]
fn a_closed_database_opens_read_only_and_nothing_in_its_directory_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    closed_db(&path);
    let want = {
        let db = Db::open(&path, no_create(checkpointing_options())).unwrap();
        let want = all_contents(&db);
        db.close().unwrap();
        want
    };
    let before = listing(&path);
    // The clock moves, so a rewrite of any file would show in its time.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let db = Db::open_read_only(&path).unwrap();
    assert!(db.is_read_only());
    assert_eq!(all_contents(&db), want);
    assert_eq!(db.get("k00001").unwrap(), None);
    assert_eq!(&db.get("tail007").unwrap().unwrap()[..], b"t");
    assert_eq!(&db.get("k00700").unwrap().unwrap()[..], b"v700");
    let stats = db.stats();
    assert!(stats.memtable_entries > 0, "the WAL tail was replayed");
    db.check().unwrap();
    assert_writes_refused(&db);
    // A second read-only handle, and a writable one, open beside it.
    let second = Db::open_read_only(&path).unwrap();
    assert_eq!(all_contents(&second), want);
    db.close().unwrap();
    drop(second);
    assert_eq!(
        listing(&path),
        before,
        "a read-only handle changed the directory"
    );
}

#[test]
fn a_backup_opens_read_only_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    closed_db(&path);
    let db = Db::open(&path, no_create(checkpointing_options())).unwrap();
    let backup = dir.path().join("backup");
    db.backup(&backup).unwrap();
    let want = all_contents(&db);
    let before = listing(&backup);
    let copy = Db::open_read_only(&backup).unwrap();
    assert_eq!(all_contents(&copy), want);
    copy.check().unwrap();
    assert_writes_refused(&copy);
    drop(copy);
    assert_eq!(listing(&backup), before);
}

#[test]
fn a_read_only_open_after_a_crash_writes_nothing() {
    let fs = FaultFs::new();
    let db = Db::open_with_fs("/db", checkpointing_options(), Arc::new(fs.clone())).unwrap();
    for i in 0..500u64 {
        db.put(format!("k{i:05}"), b"v").unwrap();
    }
    db.flush_wal().unwrap();
    db.put("unsynced", b"u").unwrap();
    // The process dies: a torn tail, covered segments, freed slots that a
    // writable open would clean up.
    let killed = fs.kill();
    drop(db);
    let ops = killed.op_counts();
    let ro = Db::open_read_only_with_fs("/db", Arc::new(killed.clone())).unwrap();
    assert_eq!(&ro.get("k00042").unwrap().unwrap()[..], b"v");
    assert_eq!(&ro.get("unsynced").unwrap().unwrap()[..], b"u");
    ro.check().unwrap();
    drop(ro);
    assert_eq!(killed.op_counts(), ops, "a read-only open wrote or synced");
}

#[test]
fn a_read_only_handle_of_a_held_database_fails_once_its_owner_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let owner = Db::open(&path, checkpointing_options()).unwrap();
    for i in 0..2_000u64 {
        owner.put(format!("k{i:05}"), vec![b'v'; 60]).unwrap();
    }
    owner.checkpoint_now().unwrap();
    owner.put("memtable", "m").unwrap();
    // The owner holds the lock; a read-only open does not need it.
    assert!(matches!(
        Db::open(&path, checkpointing_options()),
        Err(Error::Locked(_))
    ));
    let ro = Db::open_read_only(&path).unwrap();
    assert_eq!(&ro.get("memtable").unwrap().unwrap()[..], b"m");
    assert_eq!(ro.range::<&[u8], _>(..).count(), 2_001);
    // A checkpoint of the owner: every later read the cache cannot serve
    // fails instead of reading what may be reused pages.
    let fresh = Db::open_read_only(&path).unwrap();
    for i in 0..500u64 {
        owner.put(format!("k{i:05}"), vec![b'w'; 60]).unwrap();
    }
    owner.checkpoint_now().unwrap();
    let scanned: turtlekv::Result<Vec<_>> = fresh.range::<&[u8], _>(..).collect();
    assert!(
        matches!(scanned, Err(Error::ChangedWhileReading(_))),
        "{:?}",
        scanned.map(|v| v.len())
    );
    // Opened again, it reads the new checkpoint.
    let again = Db::open_read_only(&path).unwrap();
    assert_eq!(&again.get("k00001").unwrap().unwrap()[..], &[b'w'; 60][..]);
}

/// `all_contents`, returning a failed read instead of panicking.
fn try_all_contents(db: &Db) -> turtlekv::Result<BTreeMap<Vec<u8>, common::Model>> {
    let scan = |iter: turtlekv::Iter| -> turtlekv::Result<common::Model> {
        iter.map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect()
    };
    let mut all = BTreeMap::new();
    all.insert(Vec::new(), scan(db.range::<&[u8], _>(..))?);
    all.insert(
        b"mirror".to_vec(),
        scan(db.keyspace("mirror")?.range::<&[u8], _>(..))?,
    );
    Ok(all)
}

#[test]
fn read_only_readers_of_a_busy_database_see_one_point_or_fail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path, checkpointing_options()).unwrap();
    let mirror = db.keyspace("mirror").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (db, mirror, stop) = (db.clone(), mirror.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut s = 0;
                while !stop.load(Ordering::Relaxed) {
                    s += 1;
                    write_step(&db, &mirror, w, s, false);
                }
            })
        })
        .collect();
    let (mut whole, mut changed) = (0, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while std::time::Instant::now() < deadline || whole == 0 {
        let read = Db::open_read_only(&path).and_then(|ro| try_all_contents(&ro));
        match read {
            Ok(all) => {
                for w in 0..WRITERS {
                    check_writer_state(&all, w);
                }
                whole += 1;
            }
            Err(Error::ChangedWhileReading(_)) => changed += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    assert!(whole > 0, "{whole} whole reads, {changed} refused");
}
