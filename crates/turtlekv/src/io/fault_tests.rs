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

/// A file with a durable entry, 16 KiB reserved for it and mapped.
fn mapped() -> (FaultFs, Arc<dyn File>, WriteMapping) {
    let (fs, f) = setup();
    fs.sync_dir(Path::new("/db")).unwrap();
    f.allocate(0, 16384).unwrap();
    f.sync_data().unwrap();
    let map = f.map_for_writes(16384).unwrap().expect("FaultFs maps");
    (fs, f, map)
}

#[test]
fn stores_through_a_mapping_are_read_at_once_and_durable_after_a_sync() {
    let (fs, f, mut map) = mapped();
    map.write(100, b"first");
    map.write(5000, &[9; 3000]);
    let now = contents(&fs).unwrap();
    assert_eq!(&now[100..105], b"first");
    assert!(now[5000..8000].iter().all(|&b| b == 9));
    // Not durable yet: a power cut may drop them all.
    let dropped = contents(&fs.crash(CrashMode::DropUnsynced)).unwrap();
    assert_eq!(dropped, vec![0; 16384]);
    // A kill keeps them, and the power cut after it may still drop them.
    assert_eq!(contents(&fs.kill()).unwrap(), now);
    let killed_then_cut = fs.kill().crash(CrashMode::DropUnsynced);
    assert_eq!(contents(&killed_then_cut).unwrap(), vec![0; 16384]);
    f.sync_data().unwrap();
    for mode in [
        CrashMode::DropUnsynced,
        CrashMode::KeepRandomSubset { seed: 1 },
        CrashMode::TearLastWrite { seed: 1 },
    ] {
        assert_eq!(contents(&fs.crash(mode)).unwrap(), now, "{mode:?}");
    }
    assert_eq!(
        fs.op_counts(),
        (1, 3),
        "stores are neither writes nor syncs"
    );
}

#[test]
fn a_power_cut_keeps_or_drops_each_mapped_page_whole() {
    let (fs, _f, mut map) = mapped();
    // Every byte of the four pages, one store per 512 bytes.
    for at in (0..16384).step_by(512) {
        map.write(at, &[at as u8 / 2 + 1; 512]);
    }
    let now = contents(&fs).unwrap();
    let mut kept_counts = [0; 4];
    for seed in 0..40 {
        let after = contents(&fs.crash(CrashMode::KeepRandomSubset { seed })).unwrap();
        for (page, bytes) in after.chunks(4096).enumerate() {
            let whole = &now[page * 4096..(page + 1) * 4096];
            if bytes == whole {
                kept_counts[page] += 1;
            } else {
                assert!(
                    bytes.iter().all(|&b| b == 0),
                    "seed {seed}: page {page} in part"
                );
            }
        }
    }
    assert!(
        kept_counts.iter().all(|&n| n > 5 && n < 35),
        "pages kept in {kept_counts:?} of 40 crashes"
    );
}

#[test]
fn a_torn_power_cut_tears_the_last_store_at_a_sector_boundary() {
    let (fs, _f, mut map) = mapped();
    map.write(0, &[1; 700]);
    map.write(700, &[2; 3000]);
    for seed in 0..20 {
        let after = contents(&fs.crash(CrashMode::TearLastWrite { seed })).unwrap();
        assert!(
            after[..700].iter().all(|&b| b == 1),
            "the earlier store stays"
        );
        let kept = after[700..3700].iter().take_while(|&&b| b == 2).count();
        assert!(
            (700 + kept).is_multiple_of(512) && kept < 3000,
            "seed {seed}: {kept} bytes of the last store"
        );
        assert!(after[700 + kept..].iter().all(|&b| b == 0));
    }
    // A later write, not the store, is the one torn then.
    let file = fs
        .open(Path::new("/db/g"), OpenOptions::read_write_create())
        .unwrap();
    file.write_at(&[3; 10], 0).unwrap();
    let after = contents(&fs.crash(CrashMode::TearLastWrite { seed: 0 })).unwrap();
    assert_eq!(&after[..3700], &contents(&fs).unwrap()[..3700]);
}

#[test]
fn mapped_pages_reach_only_as_far_as_the_file_after_a_power_cut() {
    let (fs, f) = setup();
    fs.sync_dir(Path::new("/db")).unwrap();
    f.write_at(&[1; 100], 0).unwrap();
    f.sync_data().unwrap();
    // The reservation that lengthens the file is not durable either.
    f.allocate(100, 8192).unwrap();
    let mut map = f.map_for_writes(8292).unwrap().unwrap();
    map.write(100, &[2; 5000]);
    let mut lengths = HashSet::new();
    for seed in 0..20 {
        let after = contents(&fs.crash(CrashMode::KeepRandomSubset { seed })).unwrap();
        lengths.insert(after.len());
        assert_eq!(&after[..100], &[1; 100]);
        if after.len() == 100 {
            continue;
        }
        assert_eq!(after.len(), 8292);
        for part in [&after[100..4096], &after[4096..5100]] {
            assert!(
                part.iter().all(|&b| b == 2) || part.iter().all(|&b| b == 0),
                "seed {seed}: a page in part"
            );
        }
        assert!(after[5100..].iter().all(|&b| b == 0));
    }
    assert_eq!(lengths.len(), 2, "the length is kept in some crashes only");
}

#[test]
fn mappings_can_be_turned_off() {
    let (fs, f) = setup();
    fs.set_mappings(Mappings::Off);
    assert!(f.map_for_writes(4096).unwrap().is_none());
    fs.set_mappings(Mappings::Simulated);
    let map = f.map_for_writes(4096).unwrap().unwrap();
    assert!(map.populater().is_none(), "no worker unless asked for");
    fs.set_mappings(Mappings::SimulatedWithWorker);
    let map = f.map_for_writes(4096).unwrap().unwrap();
    assert!(map.populater().is_some());
    // Crashes and kills keep the setting.
    fs.set_mappings(Mappings::Off);
    for after in [fs.crash(CrashMode::DropUnsynced), fs.kill()] {
        let f = after
            .open(Path::new("/db/g"), OpenOptions::read_write_create())
            .unwrap();
        assert!(f.map_for_writes(4096).unwrap().is_none());
    }
}

#[test]
fn reads_fail_on_schedule_and_are_not_writes() {
    let (fs, f) = setup();
    f.write_at(b"abc", 0).unwrap();
    fs.inject(Fault {
        on: FaultOn::Read,
        after: 1,
        kind: FaultKind::Eio,
        persistent: false,
        path_contains: None,
    });
    let mut buf = [0; 3];
    f.read_at(&mut buf, 0).unwrap();
    assert_eq!(
        f.read_at(&mut buf, 0).unwrap_err().raw_os_error(),
        Some(libc::EIO)
    );
    f.read_at(&mut buf, 0).unwrap();
    f.write_at(b"d", 3).unwrap();
    assert_eq!((fs.op_counts(), fs.read_count()), ((2, 0), 3));
}

/// The child of `a_store_where_the_file_has_no_storage_aborts`.
const STORE_CHILD: &str = "TURTLEKV_FAULT_FS_UNBACKED_STORE";

/// A real mapping answers a store into bytes the file does not back with
/// `SIGBUS`; the simulation aborts, in a child process here.
#[test]
fn a_store_where_the_file_has_no_storage_aborts() {
    if std::env::var_os(STORE_CHILD).is_some() {
        let (_fs, f, mut map) = mapped();
        // Cut off the reserve behind the mapping's back, then store past it.
        f.set_len(4096).unwrap();
        map.write(4000, &[1; 200]);
        unreachable!("the store aborts");
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "io::fault::tests::a_store_where_the_file_has_no_storage_aborts",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(STORE_CHILD, "1")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(output.status.signal(), Some(libc::SIGABRT), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bytes 4000..4200 of /db/f") && stderr.contains("SIGBUS"),
        "{stderr}"
    );
}

#[test]
fn storage_is_what_was_written_or_reserved_and_not_cut_or_punched() {
    // As `write_at(0, 10 bytes)`, `set_len(8192)`, `allocate(4096, 4096)`,
    // `punch_hole(6000, 100)` and `set_len(7000)` leave it.
    let mut backed = Extents::default();
    backed.add(0..10);
    backed.add(4096..8192);
    backed.add(8000..8100);
    backed.remove(6000..6100);
    backed.remove(7000..u64::MAX);
    assert_eq!(backed.0, vec![0..10, 4096..6000, 6100..7000]);
    assert!(backed.covers(4096..6000) && !backed.covers(5999..6001));
    assert!(backed.covers(0..0) && !backed.covers(10..11));
    backed.add(10..4096);
    assert_eq!(backed.0, vec![0..6000, 6100..7000], "adjacent ranges merge");
}
