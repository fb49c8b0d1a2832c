//! The checkpoint's threads run in the idle I/O class while nobody waits
//! for a checkpoint, and in the normal one as soon as anyone does
//! (`io::CheckpointIoPriority`). Linux only: elsewhere nothing changes.

use std::time::{Duration, Instant};

use crate::checkpoint::io_priority::class_of;
use crate::{Db, Options};

const CLASS_NONE: libc::c_long = 0;
const CLASS_IDLE: libc::c_long = 3;

fn options() -> Options {
    Options {
        checkpoint_io_idle: true,
        checkpoint_distance_bytes: 1 << 20,
        cache_capacity_bytes: 64 << 20,
        checkpoint_threads: 2,
        ..Options::default()
    }
}

/// Whether this kernel lets a thread set its own I/O class (a seccomp
/// filter may refuse `ioprio_set`; the engine then changes nothing).
fn kernel_sets_io_classes() -> bool {
    std::thread::spawn(|| {
        let io = crate::checkpoint::CheckpointIoPriority::default();
        io.set_idle(true);
        io.join_current_thread();
        io.thread_ids()
            .into_iter()
            .all(|t| class_of(t) == CLASS_IDLE)
    })
    .join()
    .unwrap()
}

/// The I/O class of every thread that runs checkpoints; all as expected
/// where the kernel refuses to set classes.
fn classes(db: &Db) -> Vec<libc::c_long> {
    if !kernel_sets_io_classes() {
        eprintln!("ioprio_set refused here: the I/O classes are not checked");
        let io = db.inner.checkpoints.idle_io().expect("turned on");
        let expected = if io.is_idle() { CLASS_IDLE } else { CLASS_NONE };
        return io.thread_ids().into_iter().map(|_| expected).collect();
    }
    let io = db.inner.checkpoints.idle_io().expect("turned on");
    io.thread_ids().into_iter().map(class_of).collect()
}

/// Writes until a checkpoint the writes started has been running long
/// enough to have set its class, and returns whether it went idle.
fn checkpoint_in_background_goes_idle(db: &Db) -> bool {
    let io = db.inner.checkpoints.idle_io().cloned().expect("turned on");
    let value = [7u8; 100];
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut i = 0u64;
    while Instant::now() < deadline {
        db.put(i.to_be_bytes(), value).unwrap();
        i += 1;
        if io.is_idle() {
            return true;
        }
    }
    false
}

#[test]
fn checkpoints_run_idle_unless_someone_waits() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    // The merge pool's threads and the checkpoint thread.
    let deadline = Instant::now() + Duration::from_secs(10);
    while classes(&db).len() < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(classes(&db).len(), 3);

    // A caller of `checkpoint_now` waits: its checkpoint runs normal.
    db.put(b"k", b"v").unwrap();
    db.checkpoint_now().unwrap();
    let io = db.inner.checkpoints.idle_io().cloned().unwrap();
    assert!(!io.is_idle());
    assert!(classes(&db).iter().all(|&c| c == CLASS_NONE));

    // Writes that fill MemTables start checkpoints nobody waits for.
    assert!(checkpoint_in_background_goes_idle(&db));
    assert!(classes(&db).iter().all(|&c| c == CLASS_IDLE));

    // Someone about to wait raises every thread at once.
    let waiting = db.inner.checkpoints.wait_on_checkpoints();
    assert!(!io.is_idle());
    assert!(classes(&db).iter().all(|&c| c == CLASS_NONE));
    drop(waiting);
    db.check().unwrap();
}

/// Closing waits for the running checkpoint (it joins the thread), so it
/// raises the class first, and a checkpoint starting after it stays
/// normal: otherwise the close would wait on a checkpoint in the idle
/// class, starved of I/O.
#[test]
fn closing_raises_the_checkpoint_out_of_the_idle_class() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    assert!(checkpoint_in_background_goes_idle(&db));
    let io = db.inner.checkpoints.idle_io().cloned().unwrap();
    drop(db);
    assert!(!io.is_idle());
}

#[test]
fn off_by_default_leaves_the_threads_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            checkpoint_io_idle: Options::default().checkpoint_io_idle,
            ..options()
        },
    )
    .unwrap();
    assert!(db.inner.checkpoints.idle_io().is_none());
    for i in 0..30_000u64 {
        db.put(i.to_be_bytes(), [1u8; 100]).unwrap();
    }
    db.checkpoint_now().unwrap();
    assert!(db.stats().checkpoints >= 2);
}
