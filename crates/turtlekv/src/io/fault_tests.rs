//! Tests of the fault-injecting file system.

use super::*;

fn setup() -> (FaultFs, Arc<dyn File>) {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new("/db")).unwrap();
    let f = fs
        .open(Path::new("/db/f"), OpenOptions::read_write_create())
        .unwrap();
    (fs, f)
}

fn contents(fs: &FaultFs) -> Option<Vec<u8>> {
    let f = fs.open(Path::new("/db/f"), OpenOptions::read_only()).ok()?;
    Some(super::super::read_all(&*f).unwrap())
}

#[test]
fn unsynced_new_file_vanishes_and_synced_data_stays() {
    let (fs, f) = setup();
    f.write_at(b"hello", 0).unwrap();
    f.sync_data().unwrap();
    assert_eq!(contents(&fs.crash(CrashMode::DropUnsynced)), None);
    fs.sync_dir(Path::new("/db")).unwrap();
    f.write_at(b" world", 5).unwrap();
    let after = fs.crash(CrashMode::DropUnsynced);
    assert_eq!(contents(&after).unwrap(), b"hello");
    let torn = fs.crash(CrashMode::TearLastWrite { seed: 1 });
    assert_eq!(contents(&torn).unwrap(), b"hello");
}

#[test]
fn torn_write_keeps_a_sector_aligned_prefix() {
    let (fs, f) = setup();
    fs.sync_dir(Path::new("/db")).unwrap();
    f.write_at(&[7u8; 2000], 100).unwrap();
    for seed in 0..20 {
        let c = contents(&fs.crash(CrashMode::TearLastWrite { seed })).unwrap();
        assert!(
            c.len().is_multiple_of(512) && c.len() > 100 && c.len() < 2100,
            "{}",
            c.len()
        );
    }
}

#[test]
fn faults_fire_on_schedule_and_persist() {
    let (fs, f) = setup();
    fs.inject(Fault {
        on: FaultOn::Sync,
        after: 1,
        kind: FaultKind::Eio,
        persistent: true,
        path_contains: None,
    });
    f.write_at(b"a", 0).unwrap();
    f.sync_data().unwrap();
    assert_eq!(f.sync_data().unwrap_err().raw_os_error(), Some(libc::EIO));
    assert!(f.sync_data().is_err());
    f.write_at(b"b", 1).unwrap();
    fs.clear_fault();
    f.sync_data().unwrap();
}

#[test]
fn space_limit_gives_enospc() {
    let (fs, f) = setup();
    fs.set_space_limit_bytes(Some(10));
    f.write_at(&[1u8; 10], 0).unwrap();
    let err = f.write_at(&[1u8; 1], 10).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    f.write_at(&[2u8; 5], 0).unwrap();
}

#[test]
fn punched_hole_reads_zero_frees_blocks_and_is_lost_unsynced() {
    let (fs, f) = setup();
    fs.sync_dir(Path::new("/db")).unwrap();
    f.write_at(&[5u8; 16384], 0).unwrap();
    f.sync_data().unwrap();
    assert_eq!(f.allocated_bytes().unwrap(), 16384);
    f.punch_hole(4096, 8192).unwrap();
    assert_eq!(f.len().unwrap(), 16384);
    assert_eq!(f.allocated_bytes().unwrap(), 8192);
    let now = contents(&fs).unwrap();
    assert!(now[4096..12288].iter().all(|&b| b == 0) && now[12288] == 5);
    let dropped = contents(&fs.crash(CrashMode::DropUnsynced)).unwrap();
    assert!(dropped.iter().all(|&b| b == 5));
    let kept = contents(&fs.crash(CrashMode::TearLastWrite { seed: 3 })).unwrap();
    assert_eq!(kept, now);
    f.sync_data().unwrap();
    assert_eq!(contents(&fs.crash(CrashMode::DropUnsynced)).unwrap(), now);
}

#[test]
fn direct_files_reject_unaligned_io() {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new("/db")).unwrap();
    let options = OpenOptions::read_write_create().with_direct(true);
    let f = fs.open(Path::new("/db/d"), options).unwrap();
    let einval = |r: io::Result<()>| r.unwrap_err().raw_os_error() == Some(libc::EINVAL);
    let buf = crate::io::AlignedBuf::zeroed(8192);
    assert!(einval(f.write_at(&buf[1..4097], 0)));
    assert!(einval(f.write_at(&buf, 512)));
    assert!(einval(f.write_at(&buf[..512], 0)));
    f.write_at(&buf[..4096], 4096).unwrap();
    assert_eq!(f.len().unwrap(), 8192);
    let mut back = crate::io::AlignedBuf::zeroed(4096);
    assert_eq!(f.read_at(&mut back, 4096).unwrap(), 4096);
}

#[test]
fn lock_is_exclusive_until_dropped() {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new("/db")).unwrap();
    let guard = fs.lock(Path::new("/db/LOCK")).unwrap();
    assert!(guard.is_some());
    assert!(fs.lock(Path::new("/db/LOCK")).unwrap().is_none());
    drop(guard);
    assert!(fs.lock(Path::new("/db/LOCK")).unwrap().is_some());
}

/// `/db/f` holding `kept`, durable with its entry, then removed.
fn durable_file_removed() -> (FaultFs, Arc<dyn File>) {
    let (fs, f) = setup();
    f.write_at(b"kept", 0).unwrap();
    f.sync_data().unwrap();
    fs.sync_dir(Path::new("/db")).unwrap();
    fs.remove_file(Path::new("/db/f")).unwrap();
    (fs, f)
}

#[test]
fn a_removal_is_undone_by_a_crash_until_its_directory_is_synced() {
    let (fs, _f) = durable_file_removed();
    assert_eq!(contents(&fs), None, "gone for readers at once");
    assert_eq!(
        contents(&fs.crash(CrashMode::DropUnsynced)).unwrap(),
        b"kept"
    );
    // A kill keeps the removal pending for a later power cut.
    assert_eq!(
        contents(&fs.kill().crash(CrashMode::DropUnsynced)).unwrap(),
        b"kept"
    );
    fs.sync_dir(Path::new("/db")).unwrap();
    assert_eq!(contents(&fs.crash(CrashMode::DropUnsynced)), None);
}

#[test]
fn a_file_never_durable_does_not_come_back_after_its_removal() {
    let (fs, f) = setup();
    f.write_at(b"x", 0).unwrap();
    f.sync_data().unwrap();
    fs.remove_file(Path::new("/db/f")).unwrap();
    assert_eq!(contents(&fs.crash(CrashMode::DropUnsynced)), None);
}

#[test]
fn a_killed_process_handle_does_not_change_a_removed_file_it_held() {
    let (fs, f) = durable_file_removed();
    let killed = fs.kill();
    // The dead process's handle: its writes go nowhere the new one sees.
    f.write_at(b"gone", 0).unwrap();
    f.sync_data().unwrap();
    assert_eq!(
        contents(&killed.crash(CrashMode::DropUnsynced)).unwrap(),
        b"kept"
    );
}

#[test]
fn a_torn_crash_tears_the_last_write_even_in_a_file_it_brings_back() {
    let (fs, a) = setup();
    let g = fs
        .open(Path::new("/db/g"), OpenOptions::read_write_create())
        .unwrap();
    fs.sync_dir(Path::new("/db")).unwrap();
    a.write_at(&[1; 2000], 0).unwrap();
    g.write_at(&[2; 2000], 0).unwrap();
    fs.remove_file(Path::new("/db/g")).unwrap();
    for seed in 0..20 {
        let after = fs.crash(CrashMode::TearLastWrite { seed });
        assert_eq!(
            contents(&after).unwrap().len(),
            2000,
            "seed {seed}: an earlier write was torn"
        );
    }
}

/// A rename not yet made durable by a directory sync is undone by a
/// crash: the old name comes back, and so does the file the new name
/// replaced; after the sync the rename holds.
#[test]
fn a_rename_is_undone_by_a_crash_until_its_directory_is_synced() {
    let fs = FaultFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir).unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let f = fs
            .open(&dir.join(name), OpenOptions::read_write_create())
            .unwrap();
        f.write_at(bytes, 0).unwrap();
        f.sync_data().unwrap();
    };
    write("target", b"old");
    write("temp", b"new");
    fs.sync_dir(dir).unwrap();
    fs.rename(&dir.join("temp"), &dir.join("target")).unwrap();
    let read = |fs: &FaultFs, name: &str| {
        let f = fs.open(&dir.join(name), OpenOptions::read_only()).ok()?;
        Some(super::super::read_all(&*f).unwrap())
    };
    assert_eq!(read(&fs, "target").as_deref(), Some(&b"new"[..]));
    assert_eq!(read(&fs, "temp"), None);
    let undone = fs.crash(CrashMode::DropUnsynced);
    assert_eq!(read(&undone, "target").as_deref(), Some(&b"old"[..]));
    assert_eq!(read(&undone, "temp").as_deref(), Some(&b"new"[..]));
    fs.sync_dir(dir).unwrap();
    let done = fs.crash(CrashMode::DropUnsynced);
    assert_eq!(read(&done, "target").as_deref(), Some(&b"new"[..]));
    assert_eq!(read(&done, "temp"), None);
}
