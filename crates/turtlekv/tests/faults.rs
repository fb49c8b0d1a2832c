//! Promise 5 across the whole engine: `ENOSPC` and `EIO` injected into WAL
//! writes and syncs, page writes, page file syncs and superblock writes and
//! syncs (so most land inside checkpoints), once or for good, and a space
//! limit hit mid-checkpoint. Every time the engine turns fail-stop
//! (`Error::Poisoned` for every later write, reads still served and never
//! showing the failed write), acknowledged data is intact after a reopen and
//! after a power cut, and the reopened database takes writes again.
//! A close after a failed checkpoint still syncs the WAL. A failed read
//! anywhere under a scan or a get is an error, never wrong data.
//! The last two tests hit a real kernel error in a child process: `ENOSPC`
//! on a 1 MiB tmpfs (in a user and mount namespace) and `EFBIG` under a
//! file-size rlimit.

mod common;

use std::io::Write as _;
use std::process::Command;

use common::{Model, checkpointing_options, contents, open_fault};
use turtlekv::io::{CrashMode, Fault, FaultFs, FaultKind, FaultOn, Mappings};
use turtlekv::{Db, Error, Options, WriteBatch, WriteOptions};

const SYNC: WriteOptions = WriteOptions::new().sync(true);

/// Batch `i` of the workload: two keys, values of 150..250 bytes, so a
/// checkpoint comes every dozen batches.
fn batch(i: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..2)
        .map(|j| {
            let key = format!("key{:03}", (i * 7 + j * 131) % 400).into_bytes();
            (key, vec![(i + j) as u8; 150 + (i as usize * 13) % 100])
        })
        .collect()
}

fn write(db: &Db, i: u32) -> turtlekv::Result<()> {
    let mut wb = WriteBatch::new();
    for (k, v) in batch(i) {
        wb.put(k, v);
    }
    db.write(wb, &SYNC)
}

fn apply(model: &mut Model, i: u32) {
    for (k, v) in batch(i) {
        model.insert(k, v);
    }
}

#[derive(Debug, Default)]
struct Tally {
    scenarios: u64,
    /// One-shot faults that struck a step with a fallback: a WAL
    /// segment's storage reservation, after which the append is written
    /// instead of copied into the mapping. Nothing fails, nothing is lost.
    absorbed: u64,
    first_error_io: u64,
    first_error_poisoned: u64,
}

/// Writes until the armed fault strikes, then checks fail-stop, reads,
/// recovery after a power cut and recovery after the fault clears.
fn attack(name: &str, mappings: Mappings, arm: impl FnOnce(&FaultFs), tally: &mut Tally) {
    let fs = FaultFs::new();
    fs.set_mappings(mappings);
    attack_on(fs, name, arm, tally);
}

fn attack_on(fs: FaultFs, name: &str, arm: impl FnOnce(&FaultFs), tally: &mut Tally) {
    let db = open_fault(&fs, checkpointing_options()).unwrap();
    let mut acked = Model::new();
    for i in 0..30 {
        write(&db, i).unwrap();
        apply(&mut acked, i);
    }
    arm(&fs);
    let mut failed = None;
    for i in 30..600 {
        match write(&db, i) {
            Ok(()) => apply(&mut acked, i),
            Err(Error::Io(_)) => {
                tally.first_error_io += 1;
                failed = Some(i);
                break;
            }
            Err(Error::Poisoned { .. }) => {
                // A checkpoint failed in the background; this write did not happen.
                tally.first_error_poisoned += 1;
                failed = Some(i);
                break;
            }
            Err(e) => panic!("{name}: unexpected {e:?}"),
        }
    }
    tally.scenarios += 1;
    let Some(failed) = failed else {
        absorbed(&fs, db, name, &acked);
        tally.absorbed += 1;
        return;
    };

    // Fail-stop: no write gets through, even where the fault was one-shot.
    for r in [db.put(b"later", b"x"), write(&db, 9999), db.flush_wal()] {
        assert!(matches!(r, Err(Error::Poisoned { .. })), "{name}: {r:?}");
    }
    // Reads are served and never show the failed write.
    assert_eq!(contents(&db), acked, "{name}: reads after the fault");
    for (k, v) in acked.iter().step_by(17) {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(v.as_slice()), "{name}");
    }

    let mut with_failed = acked.clone();
    apply(&mut with_failed, failed);
    let recovered = |fs: &FaultFs, how: &str| {
        let db = open_fault(fs, checkpointing_options())
            .unwrap_or_else(|e| panic!("{name}: reopen {how}: {e}"));
        db.check()
            .unwrap_or_else(|e| panic!("{name}: check {how}: {e}"));
        let found = contents(&db);
        // The failed write may or may not have reached the disk.
        assert!(
            found == acked || found == with_failed,
            "{name}: state {how}"
        );
        db.put(b"after", b"reopen").unwrap();
        drop(db);
        let db = open_fault(fs, checkpointing_options()).unwrap();
        assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"reopen"[..]));
    };
    // A power cut now (every acknowledged write was synced)...
    let crashed = fs.crash(CrashMode::DropUnsynced);
    // ...or the disk recovers and the process reopens.
    drop(db);
    fs.clear_fault();
    fs.set_space_limit_bytes(None);
    recovered(&crashed, "after a power cut");
    recovered(&fs, "after the fault cleared");
}

/// A one-shot fault that no write reported struck where the engine has a
/// fallback (a WAL storage reservation): every acknowledged write is
/// readable, the handle goes on writing, and a power cut keeps them all.
fn absorbed(fs: &FaultFs, db: Db, name: &str, acked: &Model) {
    assert!(fs.fault_fired(), "{name}: the fault never struck");
    assert_eq!(
        contents(&db),
        *acked,
        "{name}: reads after an absorbed fault"
    );
    db.put(b"later", b"x").unwrap();
    db.flush_wal().unwrap();
    let mut expected = acked.clone();
    expected.insert(b"later".to_vec(), b"x".to_vec());
    let crashed = fs.crash(CrashMode::DropUnsynced);
    drop(db);
    let db = open_fault(&crashed, checkpointing_options())
        .unwrap_or_else(|e| panic!("{name}: reopen after a power cut: {e}"));
    db.check()
        .unwrap_or_else(|e| panic!("{name}: check after a power cut: {e}"));
    assert_eq!(contents(&db), expected, "{name}: state after a power cut");
}

#[test]
fn io_errors_anywhere_make_the_engine_fail_stop_and_lose_nothing() {
    // The WAL appends through a shared mapping, as on a real file system,
    // where its writes are the segment header, the storage reservations
    // and the link; with mappings off every append is a write.
    let targets = [
        (FaultOn::Write, "wal", Mappings::Simulated),
        (FaultOn::Write, "wal", Mappings::Off),
        (FaultOn::Sync, "wal", Mappings::Simulated),
        (FaultOn::Write, "nodes.pages", Mappings::Simulated),
        (FaultOn::Write, "leaves.pages", Mappings::Simulated),
        (FaultOn::Sync, "nodes.pages", Mappings::Simulated),
        (FaultOn::Sync, "leaves.pages", Mappings::Simulated),
        (FaultOn::Write, "SUPERBLOCK", Mappings::Simulated),
        (FaultOn::Sync, "SUPERBLOCK", Mappings::Simulated),
    ];
    let mut tally = Tally::default();
    for (on, path, mappings) in targets {
        for kind in [FaultKind::Eio, FaultKind::NoSpace] {
            for after in [0, 3, 7] {
                for persistent in [false, true] {
                    let fault = Fault {
                        on,
                        after,
                        kind,
                        persistent,
                        path_contains: Some(path.into()),
                    };
                    let name = format!("{fault:?}, {mappings:?}");
                    let absorbed_before = tally.absorbed;
                    attack(&name, mappings, |fs| fs.inject(fault), &mut tally);
                    // Only a one-shot fault on a mapped WAL's writes can
                    // strike a reservation with a fallback.
                    let can_absorb = (on, path, mappings, persistent)
                        == (FaultOn::Write, "wal", Mappings::Simulated, false);
                    if tally.absorbed > absorbed_before {
                        assert!(can_absorb, "{name}: absorbed, not reported");
                    }
                }
            }
        }
    }
    eprintln!("{tally:?}");
    assert_eq!(tally.scenarios, 108);
    // Both ways of learning of a failure were exercised: the write's own
    // I/O, and a checkpoint failing in the background.
    assert!(
        tally.first_error_io > 0 && tally.first_error_poisoned > 0,
        "{tally:?}"
    );
}

/// A checkpoint that fails on a page file poisons the handle, but the WAL
/// never failed: closing the handle still syncs it, so a power cut after
/// the close keeps every write acknowledged without `sync` (promise 3),
/// which a close that skipped the sync for any poison would lose.
///
/// Dropping the handle and `Db::close` must both do it; `close` returns
/// the checkpoint's failure, as RocksDB's `Close` returns its background
/// error.
#[test]
fn closing_after_a_failed_checkpoint_syncs_the_acknowledged_writes() {
    close_after_a_failed_checkpoint(drop);
    close_after_a_failed_checkpoint(|db| {
        let err = db.close().unwrap_err();
        assert!(matches!(err, Error::Poisoned { .. }), "{err}");
    });
}

fn close_after_a_failed_checkpoint(close: impl FnOnce(Db)) {
    let fs = FaultFs::new();
    let db = open_fault(&fs, checkpointing_options()).unwrap();
    fs.inject(Fault {
        on: FaultOn::Write,
        after: 0,
        kind: FaultKind::Eio,
        persistent: true,
        path_contains: Some(".pages".into()),
    });
    let mut acked = Vec::new();
    for i in 0..100_000u64 {
        match db.put(i.to_be_bytes(), [7u8; 100]) {
            Ok(()) => acked.push(i),
            Err(Error::Poisoned { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(acked.len() > 10 && acked.len() < 100_000, "{}", acked.len());
    close(db);
    fs.clear_fault();
    let db = open_fault(&fs.crash(CrashMode::DropUnsynced), checkpointing_options()).unwrap();
    let lost: Vec<u64> = acked
        .iter()
        .copied()
        .filter(|i| db.get(i.to_be_bytes()).unwrap().is_none())
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged writes lost after a clean close: {:?}",
        lost.len(),
        acked.len(),
        &lost[..lost.len().min(10)]
    );
    db.check().unwrap();
}

#[test]
fn a_full_disk_mid_checkpoint_makes_the_engine_fail_stop_and_lose_nothing() {
    let mut tally = Tally::default();
    for headroom_kib in [1, 4, 9, 16, 30, 50, 80] {
        let name = format!("{headroom_kib} KiB of space left");
        // The WAL's appends are writes here: through its mapping, the MiB of
        // storage it reserves at a time, given back at each rotation, would
        // decide where the disk fills, not the checkpoint. `tests/api.rs`
        // fills a disk under the mapping.
        let fs = FaultFs::new();
        fs.set_mappings(Mappings::Off);
        attack_on(
            fs,
            &name,
            |fs| fs.set_space_limit_bytes(Some(total_bytes(fs) + headroom_kib * 1024)),
            &mut tally,
        );
    }
    eprintln!("{tally:?}");
    assert_eq!(tally.scenarios, 7);
}

/// A read of a page file that fails, whichever read of a cold database's
/// scan or gets it is (page reads, and the prefetches that batch them), is
/// `Error::Io` for that call and never wrong data; nothing poisons, and
/// once the disk reads again the same handle returns everything right.
#[test]
fn read_errors_anywhere_are_errors_never_wrong_data() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, checkpointing_options()).unwrap();
    let mut model = Model::new();
    for i in 0..150 {
        write(&db, i).unwrap();
        apply(&mut model, i);
    }
    db.checkpoint_now().unwrap();
    drop(db);
    let gets: Vec<Vec<u8>> = model.keys().step_by(13).cloned().collect();
    let (mut scans_failed, mut gets_failed, mut points) = (0, 0, 0);
    for after in 0.. {
        points += 1;
        // Reopened each time, so that nothing is cached.
        let db = open_fault(&fs, checkpointing_options()).unwrap();
        fs.inject(Fault {
            on: FaultOn::Read,
            after,
            kind: FaultKind::Eio,
            persistent: false,
            path_contains: Some(".pages".into()),
        });
        let scan: turtlekv::Result<Model> = db
            .range::<&[u8], _>(..)
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect();
        match scan {
            Ok(found) => assert!(found == model, "read {after} failed: wrong data"),
            Err(Error::Io(e)) => {
                assert_eq!(e.raw_os_error(), Some(libc_eio()), "{e}");
                scans_failed += 1;
            }
            Err(e) => panic!("read {after} failed: {e}"),
        }
        for key in &gets {
            match db.get(key) {
                Ok(found) => assert_eq!(found.as_deref(), model.get(key).map(|v| &v[..])),
                Err(Error::Io(_)) => gets_failed += 1,
                Err(e) => panic!("read {after} failed: {e}"),
            }
        }
        let fired = fs.fault_fired();
        fs.clear_fault();
        assert!(
            contents(&db) == model,
            "read {after} failed, then the disk read: wrong data"
        );
        let key = format!("after {after}").into_bytes();
        db.put(&key, b"writes still work").unwrap();
        model.insert(key, b"writes still work".to_vec());
        drop(db);
        if !fired {
            break;
        }
    }
    eprintln!(
        "{points} passes, a read failing in all but the last: \
         {scans_failed} scans and {gets_failed} of {} gets failed",
        points * gets.len()
    );
    assert!(scans_failed > 10, "{scans_failed} scans failed");
}

fn libc_eio() -> i32 {
    5
}

/// Bytes held by every file of the database now.
fn total_bytes(fs: &FaultFs) -> u64 {
    use turtlekv::io::{FileSystem, OpenOptions};
    let mut total = 0;
    for dir in ["/db", "/db/wal"] {
        let dir = std::path::Path::new(dir);
        for name in fs.list_dir(dir).unwrap() {
            if let Ok(f) = fs.open(&dir.join(name), OpenOptions::read_only()) {
                total += f.len().unwrap();
            }
        }
    }
    total
}

const CHILD_DIR: &str = "TURTLEKV_FULL_DISK_DIR";
const CHILD_MODE: &str = "TURTLEKV_FULL_DISK_MODE";

/// Options small enough that a 1 MiB disk fills during checkpoints.
fn child_options() -> Options {
    let mut o = checkpointing_options();
    o.checkpoint_distance_bytes = 16 * 1024;
    o
}

/// The child: fills a real disk (or its file-size limit) with synced
/// writes until the kernel refuses, checks fail-stop and reads, frees the
/// space (or lifts the limit), reopens and checks every acknowledged write.
#[test]
fn full_disk_child() {
    let (Ok(dir), Ok(mode)) = (std::env::var(CHILD_DIR), std::env::var(CHILD_MODE)) else {
        return;
    };
    let dir = std::path::Path::new(&dir);
    let ballast = dir.join("ballast");
    if mode == "rlimit" {
        // SIGXFSZ would kill us at the limit; ignored, the write fails with EFBIG.
        // SAFETY: setting a signal to SIG_IGN and lowering our own limit
        // touch no memory; this process runs only this test.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: 192 * 1024,
                rlim_max: libc::RLIM_INFINITY,
            };
            assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
        }
    } else {
        // Keep some space back, to free once the disk is full.
        std::fs::write(&ballast, vec![1u8; 256 * 1024]).unwrap();
    }
    let db_dir = dir.join("db");
    let db = Db::open(&db_dir, child_options()).unwrap();
    let mut acked = Model::new();
    let mut error = None;
    for i in 0..100_000u32 {
        // New keys every time, so the data outgrows the disk.
        let (key, value) = (format!("fill{i:06}").into_bytes(), vec![i as u8; 200]);
        match db.put_opt(&key, &value, &SYNC) {
            Ok(()) => drop(acked.insert(key, value)),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let error = error.expect("the disk never filled");
    // The error, or the checkpoint failure that poisoned the handle,
    // names the OS error ("... (os error 28)").
    println!("first error: {error}");
    assert!(matches!(
        db.put(b"later", b"x"),
        Err(Error::Poisoned { .. })
    ));
    assert_eq!(contents(&db), acked);
    drop(db);
    if mode == "rlimit" {
        let limit = libc::rlimit {
            rlim_cur: libc::RLIM_INFINITY,
            rlim_max: libc::RLIM_INFINITY,
        };
        // SAFETY: raises our own limit back; no memory is touched.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &limit) }, 0);
    } else {
        std::fs::remove_file(&ballast).unwrap();
    }
    let db = Db::open(&db_dir, child_options()).unwrap();
    db.check().unwrap();
    let found = contents(&db);
    assert!(
        acked.iter().all(|(k, v)| found.get(k) == Some(v)),
        "lost an acknowledged write"
    );
    db.put(b"after", b"space came back").unwrap();
    println!("acknowledged {} keys, all recovered", acked.len());
    std::io::stdout().flush().unwrap();
}

fn run_child(mode: &str, wrap: Option<&[&str]>) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let test_args = [
        "full_disk_child",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ];
    let mut cmd = match wrap {
        Some(prefix) => {
            let mut c = Command::new(prefix[0]);
            c.args(&prefix[1..])
                .arg(dir.path())
                .arg(&exe)
                .args(test_args);
            c
        }
        None => {
            let mut c = Command::new(&exe);
            c.args(test_args);
            c
        }
    };
    cmd.env(CHILD_DIR, dir.path()).env(CHILD_MODE, mode);
    cmd.output().unwrap()
}

fn assert_child_passed(out: &std::process::Output, expected_errno: i32) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("(os error {expected_errno})")),
        "{stdout}"
    );
    assert!(stdout.contains("all recovered"), "{stdout}");
    for line in stdout
        .lines()
        .filter(|l| l.starts_with("first error") || l.contains("recovered"))
    {
        eprintln!("child: {line}");
    }
}

/// A real `ENOSPC` from the kernel: a 1 MiB tmpfs mounted in a private user
/// and mount namespace (`unshare -rm`, no privileges needed where user
/// namespaces are enabled; without them the test reports and passes on the
/// rlimit test below alone).
#[test]
fn real_enospc_on_a_tiny_tmpfs() {
    let probe = Command::new("unshare").args(["-rm", "true"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("user namespaces unavailable: real ENOSPC covered by the rlimit test only");
        return;
    }
    let mount = [
        "unshare",
        "-rm",
        "sh",
        "-c",
        r#"mount -t tmpfs -o size=1m tmpfs "$0" && exec "$@""#,
    ];
    let out = run_child("tmpfs", Some(&mount));
    assert_child_passed(&out, libc::ENOSPC);
}

/// A real kernel write error without any privilege: `EFBIG` from a
/// file-size rlimit (`RLIMIT_FSIZE`) set in a child process, so the limit
/// never reaches the test harness.
#[test]
fn real_efbig_under_a_file_size_rlimit() {
    let out = run_child("rlimit", None);
    assert_child_passed(&out, libc::EFBIG);
}

/// A superblock sync fails after its slot was written: the OS's cache holds
/// the new slot, nothing says it is durable. Reopened without a power cut,
/// the store reads that slot as the newest. Were it to free every page
/// only the older, durable slot reaches, its next checkpoint would reuse
/// and sync those slots, and a power cut before that checkpoint's own
/// superblock would leave the durable slot naming overwritten pages: the
/// database would not open. So open writes and syncs the newest slot
/// before it frees anything.
#[test]
fn reopening_after_a_failed_superblock_sync_keeps_the_durable_root() {
    let overwrite = |db: &Db, model: &mut Model, from: u64| -> turtlekv::Result<()> {
        for i in from..from + 1_500 {
            let key = format!("key{:05}", i * 37 % 600).into_bytes();
            let value = vec![(i % 251) as u8; 100 + (i as usize * 7) % 150];
            db.put(&key, &value)?;
            model.insert(key, value);
        }
        Ok(())
    };
    let fs = FaultFs::new();
    let db = open_fault(&fs, checkpointing_options()).unwrap();
    let mut model = Model::new();
    overwrite(&db, &mut model, 0).unwrap();
    db.checkpoint_now().unwrap();
    db.flush_wal().unwrap();
    let durable = model.clone();
    fs.inject(Fault {
        on: FaultOn::Sync,
        after: 0,
        kind: FaultKind::Eio,
        persistent: false,
        path_contains: Some("SUPERBLOCK".into()),
    });
    let failed = overwrite(&db, &mut model, 5_000).and_then(|()| db.checkpoint_now());
    assert!(failed.is_err() && fs.fault_fired(), "{failed:?}");
    drop(db);
    fs.clear_fault();

    // The same boot: the unsynced slot is what reads see.
    let db = open_fault(&fs, checkpointing_options()).unwrap();
    fs.inject(Fault {
        on: FaultOn::Write,
        after: 0,
        kind: FaultKind::Eio,
        persistent: true,
        path_contains: Some("SUPERBLOCK".into()),
    });
    let _ = overwrite(&db, &mut model, 9_000).and_then(|()| db.checkpoint_now());
    let crashed = fs.crash(CrashMode::DropUnsynced);
    drop(db);

    let db = open_fault(&crashed, checkpointing_options()).unwrap();
    let found = contents(&db);
    for key in durable.keys() {
        assert!(
            found.contains_key(key),
            "lost {}",
            String::from_utf8_lossy(key)
        );
    }
    db.check().unwrap();
}
