//! The public API: basic operations, bad input, locking, poisoning.

mod common;

use std::path::Path;

use common::{contents, file_names, open_fault, small_options};
use turtlekv::io::{CrashMode, Fault, FaultFs, FaultKind, FaultOn, FileSystem, Mappings};
use turtlekv::{Db, Error, MAX_KEY_SIZE, MAX_VALUE_SIZE, Options, WriteBatch, WriteOptions};

const SYNC: WriteOptions = WriteOptions::new().sync(true);

#[test]
fn put_get_delete_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"k1", b"v1").unwrap();
    db.put(b"k2", b"v2").unwrap();
    db.put(b"k1", b"v1b").unwrap();
    db.delete(b"k2").unwrap();
    db.delete(b"never-written").unwrap();
    assert_eq!(db.get(b"k1").unwrap().as_deref(), Some(&b"v1b"[..]));
    assert_eq!(db.get(b"k2").unwrap(), None);
    let stats = db.stats();
    assert_eq!((stats.puts, stats.deletes, stats.gets), (3, 2, 2));
    assert_eq!(stats.user_bytes_written, 4 + 4 + 5 + 2 + 13);
    // Segment header (48 bytes, naming the database) and its marker (a
    // record without updates: 12 bytes
    // of frame, 3 of payload header), then per record 12 bytes of frame
    // and 3 of payload header (sequence number, synced length and count,
    // one byte each here), 2 (put) or 1 (delete) of entry header, key
    // behind the default keyspace's one-byte tag, and value
    // (docs/format.md).
    assert_eq!(stats.wal_bytes_written, 48 + 15 + 22 + 22 + 23 + 19 + 30);
    assert_eq!(
        stats.wal_syncs, 1,
        "only the new segment's header and marker were synced"
    );
    db.flush_wal().unwrap();
    assert_eq!(db.stats().wal_syncs, 2);
    db.flush_wal().unwrap();
    assert_eq!(db.stats().wal_syncs, 2, "nothing new to sync");
    drop(db);

    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"k1").unwrap().as_deref(), Some(&b"v1b"[..]));
    assert_eq!(db.get(b"k2").unwrap(), None);
    assert_eq!(db.stats().wal_records_replayed, 5);
    assert_eq!(db.stats().last_sequence, 5);
}

#[test]
fn bad_input_is_rejected_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"a", b"1").unwrap();
    let before = db.stats();

    assert!(matches!(db.put(b"", b"x"), Err(Error::EmptyKey)));
    assert!(matches!(db.delete(b""), Err(Error::EmptyKey)));
    assert!(matches!(db.get(b""), Err(Error::EmptyKey)));
    let long_key = vec![b'k'; MAX_KEY_SIZE + 1];
    assert!(matches!(
        db.put(&long_key, b"x"),
        Err(Error::KeyTooLarge { len_bytes, max_bytes }) if len_bytes == MAX_KEY_SIZE + 1 && max_bytes == MAX_KEY_SIZE
    ));
    let long_value = vec![0u8; MAX_VALUE_SIZE + 1];
    assert!(matches!(
        db.put(b"b", &long_value),
        Err(Error::ValueTooLarge { .. })
    ));

    let mut batch = WriteBatch::new();
    batch
        .put(b"c", b"3")
        .delete(b"a")
        .put(&long_key, b"bad")
        .put(b"d", b"4");
    assert!(matches!(
        db.write(batch, &SYNC),
        Err(Error::KeyTooLarge { .. })
    ));

    assert_eq!(db.stats().last_sequence, before.last_sequence);
    assert_eq!(db.stats().wal_bytes_written, before.wal_bytes_written);
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"c").unwrap(), None);
    assert_eq!(db.get(b"d").unwrap(), None);

    // The limits themselves are accepted.
    db.put(vec![b'k'; MAX_KEY_SIZE], vec![7u8; MAX_VALUE_SIZE])
        .unwrap();
    assert_eq!(
        db.get(vec![b'k'; MAX_KEY_SIZE]).unwrap().unwrap().len(),
        MAX_VALUE_SIZE
    );
}

#[test]
fn invalid_options_are_rejected_before_touching_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut options = Options::default();
    options.node_size_bytes = 3000;
    assert!(matches!(
        Db::open(&path, options),
        Err(Error::InvalidOptions(_))
    ));
    assert!(!path.exists());
}

#[test]
fn missing_database_without_create_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = Options::default();
    options.create_if_missing = false;
    let err = Db::open(dir.path().join("absent"), options).unwrap_err();
    assert!(
        matches!(err, Error::Io(ref e) if e.kind() == std::io::ErrorKind::NotFound),
        "{err}"
    );
}

/// An existing directory that holds no database (empty, or another
/// engine's files) is refused without `create_if_missing`, and nothing is
/// written to it, not even `LOCK` or `wal/`.
#[test]
fn an_existing_directory_without_a_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = Options::default();
    options.create_if_missing = false;
    for foreign in [None, Some("CURRENT")] {
        let path = dir.path().join(format!("{foreign:?}"));
        std::fs::create_dir(&path).unwrap();
        if let Some(name) = foreign {
            std::fs::write(path.join(name), b"MANIFEST-000001\n").unwrap();
        }
        let before = std::fs::read_dir(&path).unwrap().count();
        let err = Db::open(&path, options.clone()).unwrap_err();
        assert!(
            matches!(err, Error::Io(ref e) if e.kind() == std::io::ErrorKind::NotFound),
            "{err}"
        );
        assert_eq!(std::fs::read_dir(&path).unwrap().count(), before);
    }
    // A database still opens so.
    drop(Db::open(dir.path().join("db"), Options::default()).unwrap());
    drop(Db::open(dir.path().join("db"), options).unwrap());
}

#[test]
fn is_in_use_says_whether_an_open_would_be_locked_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    assert!(!Db::is_in_use(&path).unwrap(), "no database there");
    assert!(
        !Db::is_in_use(dir.path()).unwrap(),
        "a directory without one"
    );
    assert!(
        !dir.path().join(turtlekv::LOCK_FILE_NAME).exists(),
        "asking leaves no lock file behind"
    );
    let db = Db::open(&path, Options::default()).unwrap();
    assert!(Db::is_in_use(&path).unwrap());
    db.close().unwrap();
    assert!(!Db::is_in_use(&path).unwrap());
    // Asking holds the lock only while it asks.
    drop(Db::open(&path, Options::default()).unwrap());
}

#[test]
fn second_open_in_the_same_process_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let err = Db::open(dir.path(), Options::default()).unwrap_err();
    assert!(
        matches!(err, Error::Locked(ref p) if p == dir.path()),
        "{err}"
    );
    // A clone is the same handle and shares the lock.
    let clone = db.clone();
    drop(db);
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked(_))
    ));
    drop(clone);
    Db::open(dir.path(), Options::default()).unwrap();
}

/// The child side of `second_open_in_another_process_is_locked`.
#[test]
fn lock_holder_child() {
    let Ok(path) = std::env::var("TURTLEKV_LOCK_CHILD_DIR") else {
        return;
    };
    let _db = Db::open(&path, Options::default()).unwrap();
    println!("locked");
    std::thread::sleep(std::time::Duration::from_secs(60));
}

/// Removing `LOCK` while the database is open must not let a second open
/// in (it would lock the new file): the directory's lock keeps it out.
#[test]
fn removing_lock_does_not_let_a_second_open_in() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    let lock = dir.path().join(turtlekv::LOCK_FILE_NAME);
    std::fs::remove_file(&lock).unwrap();
    let err = Db::open(dir.path(), Options::default()).unwrap_err();
    assert!(matches!(err, Error::Locked(_)), "{err}");
    // Nor does a replaced one.
    std::fs::write(&lock, b"").unwrap();
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked(_))
    ));
    db.check().unwrap();
    drop(db);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

/// The child side of `removing_lock_does_not_let_another_process_in`:
/// writes synced keys 0, 1, 2, ... until it is killed.
#[test]
fn lock_writer_child() {
    let Ok(path) = std::env::var("TURTLEKV_LOCK_WRITER_DIR") else {
        return;
    };
    let db = Db::open(&path, Options::default()).unwrap();
    println!("locked");
    for i in 0u64.. {
        db.put_opt(
            i.to_be_bytes(),
            [7u8; 100],
            &WriteOptions::new().sync(i % 16 == 0),
        )
        .unwrap();
    }
}

/// With another process writing, `rm DB/LOCK` and an open from here must
/// be refused: one that got in would replay and cut the writer's log
/// under it. The writer's data stays whole.
#[test]
fn removing_lock_does_not_let_another_process_in() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "lock_writer_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TURTLEKV_LOCK_WRITER_DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    for line in stdout.lines() {
        if line.unwrap().contains("locked") {
            break;
        }
    }
    std::fs::remove_file(dir.path().join(turtlekv::LOCK_FILE_NAME)).unwrap();
    let mut refused = 0;
    for _ in 0..10 {
        match Db::open(dir.path(), Options::default()) {
            Err(Error::Locked(_)) => refused += 1,
            other => panic!("an open got in beside the writer: {other:?}"),
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let still_running = child.try_wait().unwrap().is_none();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(refused, 10);
    assert!(still_running, "the writer died beside the refused opens");
    // What the writer wrote is a whole prefix of its keys.
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.check().unwrap();
    let keys: Vec<u64> = contents(&db)
        .keys()
        .map(|k| u64::from_be_bytes(k[..].try_into().unwrap()))
        .collect();
    assert!(!keys.is_empty());
    assert!(keys.iter().enumerate().all(|(i, &k)| k == i as u64));
}

/// `turtlekv put db/wal/x ...` must not create a database inside another
/// one's directory: creation anywhere below a database is refused, and
/// creates nothing; the outer database is untouched.
#[test]
fn creating_a_database_inside_another_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let outer = dir.path().join("outer");
    let db = Db::open(&outer, Options::default()).unwrap();
    db.put_opt(b"k", b"v", &WriteOptions::new().sync(true))
        .unwrap();
    drop(db);
    let (outer_files, wal_files) = (file_names(&outer), file_names(&outer.join("wal")));
    for inner in [
        outer.join("wal/x"),
        outer.join("wal"),
        outer.join("sub"),
        outer.join("sub/deeper/still"),
    ] {
        match Db::open(&inner, Options::default()) {
            Err(Error::NestedDatabase { path, outer: found }) => {
                assert_eq!(path, inner);
                assert_eq!(found, outer);
            }
            other => panic!("{}: {other:?}", inner.display()),
        }
    }
    assert_eq!(file_names(&outer), outer_files);
    assert_eq!(file_names(&outer.join("wal")), wal_files);
    // A sibling is no nesting; the outer database opens as before.
    drop(Db::open(dir.path().join("sibling"), Options::default()).unwrap());
    let db = Db::open(&outer, Options::default()).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

/// The child side of `a_relative_path_survives_a_change_of_directory`:
/// the working directory is the process's, so the test runs alone.
#[test]
fn relative_path_child() {
    let Ok(base) = std::env::var("TURTLEKV_RELATIVE_CHILD_DIR") else {
        return;
    };
    let base = Path::new(&base);
    std::env::set_current_dir(base).unwrap();
    let db = Db::open("db", common::checkpointing_options()).unwrap();
    db.put(b"before", b"1").unwrap();
    std::fs::create_dir("elsewhere").unwrap();
    std::env::set_current_dir(base.join("elsewhere")).unwrap();
    // Enough to rotate the WAL and write new page files after the move.
    for i in 0..2_000u32 {
        db.put(i.to_be_bytes(), [3u8; 100]).unwrap();
    }
    db.checkpoint_now().unwrap();
    assert_eq!(db.path(), base.join("db"));
    db.close().unwrap();
    assert_eq!(
        std::fs::read_dir(".").unwrap().count(),
        0,
        "wrote into the new cwd"
    );
    let db = Db::open(base.join("db"), common::checkpointing_options()).unwrap();
    assert_eq!(db.get(b"before").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(contents(&db).len(), 2_001);
    db.check().unwrap();
    println!("relative path ok");
}

/// A database opened by a relative path keeps working in its own
/// directory after the process changes its working directory: new WAL
/// segments and page files must not follow the new one.
#[test]
fn a_relative_path_survives_a_change_of_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["relative_path_child", "--exact", "--nocapture"])
        .env("TURTLEKV_RELATIVE_CHILD_DIR", dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("relative path ok"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn second_open_in_another_process_is_locked() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "lock_holder_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TURTLEKV_LOCK_CHILD_DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    for line in stdout.lines() {
        if line.unwrap().contains("locked") {
            break;
        }
    }
    let result = Db::open(dir.path(), Options::default());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(matches!(result, Err(Error::Locked(_))), "{result:?}");
    // The kernel drops the dead process's lock.
    Db::open(dir.path(), Options::default()).unwrap();
}

#[test]
fn failed_sync_poisons_writes_but_not_reads() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    db.put_opt(b"a", b"1", &SYNC).unwrap();
    fs.inject(Fault {
        on: FaultOn::Sync,
        after: 0,
        kind: FaultKind::Eio,
        persistent: false,
        path_contains: None,
    });
    let err = db.put_opt(b"b", b"2", &SYNC).unwrap_err();
    assert!(matches!(err, Error::Io(_)), "{err}");
    // The fault was one-shot, but the handle must not retry: fail-stop.
    assert!(matches!(db.put(b"c", b"3"), Err(Error::Poisoned { .. })));
    assert!(matches!(db.flush_wal(), Err(Error::Poisoned { .. })));
    assert!(matches!(
        db.write(WriteBatch::new(), &SYNC),
        Err(Error::Poisoned { .. })
    ));
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"b").unwrap(), None);
    drop(db);

    let db = open_fault(&fs.crash(CrashMode::DropUnsynced), small_options()).unwrap();
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    db.put(b"c", b"3").unwrap();
}

#[test]
fn failed_wal_write_poisons_and_acknowledged_data_survives() {
    let fs = FaultFs::new();
    // Every append a `write`, so that the next one meets the fault: through
    // the WAL's mapping, appends into storage reserved ahead cannot fail
    // (the next test covers that path).
    fs.set_mappings(Mappings::Off);
    let db = open_fault(&fs, small_options()).unwrap();
    for i in 0..100u32 {
        db.put_opt(i.to_be_bytes(), b"v", &SYNC).unwrap();
    }
    fs.inject(Fault {
        on: FaultOn::Write,
        after: 0,
        kind: FaultKind::NoSpace,
        persistent: true,
        path_contains: Some("wal".into()),
    });
    let err = db.put(b"x", b"y").unwrap_err();
    assert!(
        matches!(err, Error::Io(ref e) if e.raw_os_error() == Some(libc_enospc())),
        "{err}"
    );
    assert!(matches!(db.put(b"x", b"y"), Err(Error::Poisoned { .. })));
    assert_eq!(contents(&db).len(), 100);
    drop(db);
    fs.clear_fault();
    let db = open_fault(&fs, small_options()).unwrap();
    assert_eq!(contents(&db).len(), 100);
    assert_eq!(db.get(b"x").unwrap(), None);
}

/// Through the WAL's mapping a full disk shows when the next step of
/// storage cannot be reserved: that append falls back to `write`, which
/// reports it, and the handle is poisoned as above.
#[test]
fn a_full_disk_under_the_wal_mapping_poisons_and_acknowledged_data_survives() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    // The first append reserves the segment's first step.
    db.put(b"first", b"x").unwrap();
    fs.inject(Fault {
        on: FaultOn::Write,
        after: 0,
        kind: FaultKind::NoSpace,
        persistent: true,
        path_contains: Some("wal".into()),
    });
    let mut acknowledged = 0u32;
    let err = loop {
        match db.put(acknowledged.to_be_bytes(), [5u8; 1000]) {
            Ok(()) => acknowledged += 1,
            Err(e) => break e,
        }
        assert!(acknowledged < 100_000, "the disk never filled");
    };
    assert!(
        matches!(err, Error::Io(ref e) if e.raw_os_error() == Some(libc_enospc())),
        "{err}"
    );
    assert!(acknowledged > 0, "appends into reserved storage succeed");
    assert!(matches!(db.put(b"x", b"y"), Err(Error::Poisoned { .. })));
    drop(db);
    fs.clear_fault();
    let db = open_fault(&fs, small_options()).unwrap();
    assert_eq!(contents(&db).len(), acknowledged as usize + 1);
}

fn libc_enospc() -> i32 {
    28
}

#[test]
fn ranges_prefixes_and_reverse() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for k in ["a", "ab", "abc", "abd", "b", "ba", "c"] {
        db.put(k, k.to_uppercase()).unwrap();
    }
    db.delete("abd").unwrap();
    fn keys(
        it: impl Iterator<Item = turtlekv::Result<(turtlekv::Bytes, turtlekv::Bytes)>>,
    ) -> Vec<String> {
        it.map(|kv| String::from_utf8(kv.unwrap().0.to_vec()).unwrap())
            .collect()
    }
    assert_eq!(keys(db.prefix("ab")), ["ab", "abc"]);
    assert_eq!(keys(db.prefix("ab").rev()), ["abc", "ab"]);
    assert_eq!(keys(db.range("ab".."b")), ["ab", "abc"]);
    assert_eq!(keys(db.range("ab"..="ba").rev()), ["ba", "b", "abc", "ab"]);
    assert_eq!(keys(db.range::<&str, _>(..)).len(), 6);
    assert_eq!(keys(db.range("c".."a")), Vec::<String>::new());
    assert_eq!(keys(db.range("b".."b")), Vec::<String>::new());

    // Both ends of one iterator meet without overlap.
    let mut it = db.range::<&str, _>(..);
    let mut seen = Vec::new();
    loop {
        match (it.next(), it.next_back()) {
            (Some(a), Some(b)) => {
                seen.push(a.unwrap().0);
                seen.push(b.unwrap().0);
            }
            (Some(a), None) | (None, Some(a)) => seen.push(a.unwrap().0),
            (None, None) => break,
        }
    }
    seen.sort();
    assert_eq!(seen.len(), 6);
    seen.dedup();
    assert_eq!(seen.len(), 6);
}

#[test]
fn wal_rotates_into_segments_and_replays_them_all() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    for i in 0..2_000u32 {
        db.put(i.to_be_bytes(), [i as u8; 100]).unwrap();
    }
    drop(db);
    let segments = turtlekv::io::FileSystem::list_dir(&fs, Path::new("/db/wal")).unwrap();
    assert!(segments.len() > 3, "{segments:?}");
    let db = open_fault(&fs, small_options()).unwrap();
    assert_eq!(contents(&db).len(), 2_000);
    assert_eq!(
        db.get(1999u32.to_be_bytes()).unwrap().unwrap()[0],
        1999u32 as u8
    );
}

#[test]
fn check_verifies_the_wal_and_memtable_and_reports_corruption() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    for i in 0..300u32 {
        db.put(i.to_be_bytes(), [3u8; 300]).unwrap();
    }
    db.delete(7u32.to_be_bytes()).unwrap();
    let report = db.check().unwrap();
    assert_eq!(report.wal_records, 301);
    assert!(report.wal_segments >= 2, "{report:?}");
    // The tombstone of key 7 is a MemTable key too.
    assert_eq!(report.memtable_keys, 300);
    // Damage inside the first segment: the live handle notices.
    fs.flip_bit(Path::new("/db/wal/00000000000000000001.wal"), 8 * 1000 + 2)
        .unwrap();
    let err = db.check().unwrap_err();
    assert!(
        matches!(err, Error::Corruption { offset, .. } if offset <= 1000),
        "{err}"
    );
}

/// Long scans refill each source many times, with growing fetches: over a
/// tree and a MemTable that hold interleaved keys, tombstones and newer
/// versions, every prefix of a scan, forward and reverse, and both ends of
/// one iterator, match a model.
#[test]
fn long_scans_over_tree_and_memtable_match_a_model() {
    use std::collections::BTreeMap;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let mut model = BTreeMap::new();
    let key = |i: u32| (i * 2).to_be_bytes().to_vec();
    for i in 0..1_500u32 {
        db.put(key(i), b"tree").unwrap();
        model.insert(key(i), b"tree".to_vec());
    }
    db.checkpoint_now().unwrap();
    for i in (0..1_500u32).step_by(3) {
        db.put(key(i), b"newer").unwrap();
        model.insert(key(i), b"newer".to_vec());
        let odd = (i * 2 + 1).to_be_bytes().to_vec();
        db.put(&odd, b"memtable").unwrap();
        model.insert(odd, b"memtable".to_vec());
    }
    for i in (0..1_500u32).step_by(7) {
        db.delete(key(i)).unwrap();
        model.remove(&key(i));
    }
    let all = |rev: bool| -> Vec<Vec<u8>> {
        let pairs: Vec<_> = if rev {
            db.range::<&[u8], _>(..).rev().collect()
        } else {
            db.range::<&[u8], _>(..).collect()
        };
        pairs.into_iter().map(|kv| kv.unwrap().0.to_vec()).collect()
    };
    let want: Vec<Vec<u8>> = model.keys().cloned().collect();
    assert_eq!(all(false), want);
    assert_eq!(all(true), want.iter().rev().cloned().collect::<Vec<_>>());
    // Short scans from many starts stop mid-fetch; their values are right.
    for start in (0..3_000u32).step_by(97) {
        let from = start.to_be_bytes().to_vec();
        let got: Vec<_> = db
            .range(from.clone()..)
            .take(20)
            .map(|kv| kv.unwrap())
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        let want: Vec<_> = model
            .range(from..)
            .take(20)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(got, want);
    }
    // Both ends of one iterator meet without overlap or gap.
    let mut it = db.range::<&[u8], _>(..);
    let (mut front, mut back) = (Vec::new(), Vec::new());
    loop {
        match (it.next(), it.next_back()) {
            (None, None) => break,
            (a, b) => {
                front.extend(a.map(|kv| kv.unwrap().0.to_vec()));
                back.extend(b.map(|kv| kv.unwrap().0.to_vec()));
            }
        }
    }
    back.reverse();
    front.extend(back);
    assert_eq!(front, model.keys().cloned().collect::<Vec<_>>());
}

/// An iterator keeps its database open, as a snapshot does: another handle
/// would rebuild free space from its own root and reuse pages the
/// iterator still reads (the old iterator would then report a checksum
/// mismatch on a healthy database).
#[test]
fn an_iterator_outliving_its_handle_keeps_the_database_open() {
    let fs = FaultFs::new();
    let options = common::checkpointing_options();
    let db = open_fault(&fs, options.clone()).unwrap();
    let value = |k: u32| vec![1u8; 20 + k as usize % 50];
    for k in 0..2_000u32 {
        db.put(format!("k{k:05}"), value(k)).unwrap();
    }
    db.checkpoint_now().unwrap();
    let mut iter = db.range::<&[u8], _>(..);
    assert_eq!(&iter.next().unwrap().unwrap().0[..], b"k00000");
    drop(db);
    let refused = open_fault(&fs, options.clone());
    assert!(matches!(refused, Err(Error::Locked(_))), "{refused:?}");
    let rest: Vec<_> = iter.by_ref().map(Result::unwrap).collect();
    assert_eq!(rest.len(), 1_999);
    for (i, (k, v)) in rest.iter().enumerate() {
        let i = i as u32 + 1;
        assert_eq!(
            (&k[..], &v[..]),
            (format!("k{i:05}").as_bytes(), &value(i)[..])
        );
    }
    drop(iter);
    let db = open_fault(&fs, options).unwrap();
    assert_eq!(contents(&db).len(), 2_000);
}

/// Dropping the last `Db` handle makes acknowledged writes durable even
/// while a snapshot or an iterator keeps the database open: the sync does
/// not wait for them to go.
#[test]
fn dropping_the_last_handle_syncs_while_a_snapshot_or_iterator_lives() {
    for keep in ["snapshot", "iterator"] {
        let fs = FaultFs::new();
        let db = open_fault(&fs, small_options()).unwrap();
        db.put(b"k", b"v").unwrap();
        let snapshot = db.snapshot();
        let iter = db.range::<&[u8], _>(..);
        let kept: Box<dyn std::any::Any> = if keep == "snapshot" {
            drop(iter);
            Box::new(snapshot)
        } else {
            drop(snapshot);
            Box::new(iter)
        };
        drop(db);
        let after = fs.crash(CrashMode::DropUnsynced);
        drop(kept);
        let db = open_fault(&after, small_options()).unwrap();
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]), "{keep}");
    }
}

/// `Db::close` on the last handle makes unsynced writes durable, seals the
/// WAL and frees the directory at once; on a handle with open clones it
/// only syncs, and the database stays open through them.
#[test]
fn close_syncs_and_frees_the_directory_and_spares_other_clones() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    db.put(b"a", b"1").unwrap();
    let other = db.clone();
    let syncs_before = db.stats().wal_syncs;
    db.close().unwrap();
    assert!(other.stats().wal_syncs > syncs_before, "the close synced");
    other.put(b"b", b"2").unwrap();
    assert_eq!(other.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    let snapshot = other.snapshot();
    other.close().unwrap();
    // The close made `b` durable although a snapshot still holds the
    // database open; the lock goes with the snapshot.
    let after = fs.crash(CrashMode::DropUnsynced);
    assert!(matches!(
        open_fault(&fs, small_options()),
        Err(Error::Locked(_))
    ));
    drop(snapshot);
    let db = open_fault(&after, small_options()).unwrap();
    assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
    db.close().unwrap();
    let db = open_fault(&after, small_options()).unwrap();
    let report = db.check().unwrap();
    assert_eq!(contents(&db).len(), 2, "{report:?}");
}

fn fail_every_sync(fs: &FaultFs) {
    fs.inject(Fault {
        on: FaultOn::Sync,
        after: 0,
        kind: FaultKind::Eio,
        persistent: true,
        path_contains: None,
    });
}

/// A failed last sync, which a drop has to swallow, is `close`'s error,
/// and the handle is poisoned by it like by any failed sync: on the last
/// handle, and on a clone, whose close syncs as `flush_wal` does.
#[test]
fn close_returns_a_failed_last_sync() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    db.put(b"a", b"1").unwrap();
    fail_every_sync(&fs);
    let err = db.close().unwrap_err();
    assert!(matches!(err, Error::Io(_)), "{err}");
    fs.clear_fault();
    // The close released the directory although it failed.
    open_fault(&fs, small_options()).unwrap().close().unwrap();

    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    db.put(b"a", b"1").unwrap();
    let other = db.clone();
    fail_every_sync(&fs);
    let err = db.close().unwrap_err();
    assert!(matches!(err, Error::Io(_)), "{err}");
    assert!(matches!(other.put(b"b", b"2"), Err(Error::Poisoned { .. })));
    // The WAL failed, so the last close cannot seal it either.
    assert!(other.close().is_err());
    fs.clear_fault();
    let db = open_fault(&fs, small_options()).unwrap();
    assert_eq!(db.get(b"b").unwrap(), None, "refused writes stay undone");
    db.close().unwrap();
}

/// A memory budget or a checkpoint distance far beyond the machine's
/// memory is a bound, not an allocation: the MemTable's key filter and the
/// record cache's frequency sketch are sized for at most a few GiB of
/// entries (sized from the budget alone, `open` would abort allocating
/// 2.7 TB).
#[test]
fn budgets_far_beyond_memory_are_bounds_not_allocations() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = Options::default();
    options.cache_capacity_bytes = 1 << 50;
    options.checkpoint_distance_bytes = 1 << 48;
    let db = Db::open(dir.path(), options).unwrap();
    db.put(b"a", b"1").unwrap();
    db.set_cache_capacity(u64::MAX).unwrap();
    db.set_checkpoint_distance(u64::MAX).unwrap();
    db.set_record_cache_capacity(u64::MAX);
    // Freezing makes a MemTable of the new distance.
    db.checkpoint_now().unwrap();
    db.put(b"b", b"2").unwrap();
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
}

/// Direct I/O needs 4 KiB node pages; `validate` says so, and `open`
/// refuses before it creates anything.
#[test]
fn direct_io_with_small_nodes_is_refused_before_anything_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut options = Options::default();
    options.node_size_bytes = 1024;
    options.direct_io = true;
    assert!(matches!(options.validate(), Err(Error::InvalidOptions(_))));
    let opened = Db::open(&path, options);
    assert!(
        matches!(opened, Err(Error::InvalidOptions(_))),
        "{opened:?}"
    );
    assert!(!path.exists());
}

/// Creating a database syncs the directory each new directory was created
/// in, so that a power cut cannot lose the database's entry after writes
/// were acknowledged as synced (`/data` and `/data/dbs` are new here; `/`
/// was there). Opening it again creates nothing and syncs no parent.
#[test]
fn creating_a_database_makes_its_directory_entry_durable() {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new("/")).unwrap();
    let db = Db::open_with_fs(
        "/data/dbs/new",
        small_options(),
        std::sync::Arc::new(fs.clone()),
    )
    .unwrap();
    let synced = fs.synced_dirs();
    for parent in ["/", "/data", "/data/dbs"] {
        assert!(
            synced.iter().any(|d| d == Path::new(parent)),
            "{parent}: {synced:?}"
        );
    }
    drop(db);
    let before = fs.synced_dirs().len();
    drop(
        Db::open_with_fs(
            "/data/dbs/new",
            small_options(),
            std::sync::Arc::new(fs.clone()),
        )
        .unwrap(),
    );
    let reopened: Vec<_> = fs.synced_dirs().split_off(before);
    assert!(
        reopened.iter().all(|d| d.starts_with("/data/dbs/new")),
        "{reopened:?}"
    );
}

/// The real file system, but refusing `O_DIRECT` as tmpfs before Linux 6.6
/// and some FUSE and network file systems do (`EINVAL` at open).
#[derive(Debug)]
struct NoDirectFs;

impl FileSystem for NoDirectFs {
    fn create_dir_all(&self, path: &Path) -> std::io::Result<()> {
        turtlekv::io::RealFs.create_dir_all(path)
    }
    fn open(
        &self,
        path: &Path,
        options: turtlekv::io::OpenOptions,
    ) -> std::io::Result<std::sync::Arc<dyn turtlekv::io::File>> {
        if options.direct {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        turtlekv::io::RealFs.open(path, options)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        turtlekv::io::RealFs.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> std::io::Result<()> {
        turtlekv::io::RealFs.remove_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        turtlekv::io::RealFs.rename(from, to)
    }
    fn list_dir(&self, path: &Path) -> std::io::Result<Vec<String>> {
        turtlekv::io::RealFs.list_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> std::io::Result<()> {
        turtlekv::io::RealFs.sync_dir(path)
    }
    fn lock(&self, path: &Path) -> std::io::Result<Option<Box<dyn turtlekv::io::LockGuard>>> {
        turtlekv::io::RealFs.lock(path)
    }
}

/// `direct_io` on a file system that refuses `O_DIRECT` is an options
/// error that names the option; the same directory opens without it.
#[test]
fn direct_io_on_a_file_system_without_it_names_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let fs = std::sync::Arc::new(NoDirectFs);
    let options = Options::new().direct_io(true);
    match Db::open_with_fs(&path, options, fs.clone()) {
        Err(Error::InvalidOptions(message)) => {
            assert!(message.contains("direct_io"), "{message}");
            assert!(message.contains("O_DIRECT"), "{message}");
        }
        other => panic!("expected InvalidOptions, got {other:?}"),
    }
    let db = Db::open_with_fs(&path, Options::new(), fs).unwrap();
    db.put(b"k", b"v").unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

/// The length of the newest WAL segment of the database at `/db` on `fs`.
fn newest_segment_len(fs: &FaultFs) -> u64 {
    let mut names = fs.list_dir(Path::new("/db/wal")).unwrap();
    names.sort();
    let newest = Path::new("/db/wal").join(names.last().expect("a segment"));
    let options = turtlekv::io::OpenOptions {
        create: false,
        create_new: false,
        write: false,
        direct: false,
    };
    fs.open(&newest, options).unwrap().len().unwrap()
}

/// Once writes stop, the checkpoint thread cuts the newest segment's
/// reserve; the writes after it are logged into the same segment, and a
/// power cut (only synced data kept, or a random part of the rest) keeps
/// every synced write from before and after the cut.
#[test]
fn synced_writes_around_the_idle_wal_release_survive_a_power_cut() {
    for mode in [
        CrashMode::DropUnsynced,
        CrashMode::KeepRandomSubset { seed: 7 },
    ] {
        let fs = FaultFs::new();
        let db = open_fault(&fs, Options::default()).unwrap();
        for i in 0..300u32 {
            db.put_opt(i.to_be_bytes(), b"before", &SYNC).unwrap();
        }
        let reserved = newest_segment_len(&fs);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while newest_segment_len(&fs) >= reserved {
            assert!(std::time::Instant::now() < deadline, "never released");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        for i in 300..600u32 {
            db.put_opt(i.to_be_bytes(), b"after", &SYNC).unwrap();
        }
        db.put(b"unsynced", b"x").unwrap();
        // The power cut comes while the handle is open: no close syncs.
        let after = fs.crash(mode);
        drop(db);
        let db = open_fault(&after, Options::default()).unwrap();
        for i in 0..600u32 {
            let want: &[u8] = if i < 300 { b"before" } else { b"after" };
            assert_eq!(
                db.get(i.to_be_bytes()).unwrap().as_deref(),
                Some(want),
                "{i}"
            );
        }
        db.check().unwrap();
    }
}
