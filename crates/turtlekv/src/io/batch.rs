//! Batched reads: several ranges, possibly of several files, read at once
//! by the calling thread through its own io_uring.
//!
//! Why: a scan needs the first chunk of every source on its path before it
//! can emit anything. The device serves several reads at once in little
//! more than the time of one, so those reads should overlap. Handing them to
//! a pool of threads overlaps them too, but the pool's threads cost CPU
//! (they spin before they sleep) and wake-ups; with io_uring the caller
//! submits every read in one system call and sleeps once until all are in.
//!
//! The ranges of files that give a descriptor ([`File::batch_fd`], the
//! real file system's) go through io_uring; each other file serves its own
//! ranges ([`File::read_batch`]: through `read_at` by default, which is
//! how a file system that injects faults takes part). Where the kernel has
//! no io_uring (old kernels, seccomp filters such as Docker's default), or
//! a file declines, the caller gets `None` and reads the ranges another
//! way.

use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

use io_uring::{IoUring, opcode, types};

use super::{File, RangeRead, read_exact_at};

/// Reads in flight at once per thread; longer batches go in turns.
pub(super) const RING_ENTRIES: usize = 64;

/// One range of a batch: fill all of `buf` from `offset` of `file`.
#[derive(Debug)]
pub struct BatchRead<'a> {
    pub file: &'a dyn File,
    pub buf: &'a mut [u8],
    pub offset: u64,
}

/// Reads every range of `reads` at once and returns one outcome per range,
/// in order: `Ok` when the whole buffer was filled, `UnexpectedEof` when the
/// file ended first, or the read's error. `None` when the batch cannot be
/// read so (see the module's comment); what the buffers hold is then
/// unspecified, and the caller reads every range another way.
pub fn read_exact_batch(reads: &mut [BatchRead<'_>]) -> Option<Vec<io::Result<()>>> {
    let fds: Vec<Option<RawFd>> = reads.iter().map(|r| r.file.batch_fd()).collect();
    let through_ring: Vec<usize> = (0..reads.len()).filter(|&i| fds[i].is_some()).collect();
    if !through_ring.is_empty() && UNAVAILABLE.load(Ordering::Relaxed) {
        return None;
    }
    let mut outcomes: Vec<io::Result<()>> = reads.iter().map(|_| Ok(())).collect();
    // The files that serve their own ranges go first: one may decline, and
    // then no read is left in flight.
    let mut served = vec![false; reads.len()];
    for first in 0..reads.len() {
        if fds[first].is_some() || served[first] {
            continue;
        }
        let file = reads[first].file;
        let same: Vec<usize> = (first..reads.len())
            .filter(|&i| fds[i].is_none() && std::ptr::addr_eq(reads[i].file, file))
            .collect();
        let mut ranges: Vec<RangeRead<'_>> = same
            .iter()
            .map(|&i| RangeRead {
                buf: std::mem::take(&mut reads[i].buf),
                offset: reads[i].offset,
            })
            .collect();
        let answer = file.read_batch(&mut ranges);
        for (&i, range) in same.iter().zip(ranges) {
            reads[i].buf = range.buf;
            served[i] = true;
        }
        let answer = answer?;
        assert_eq!(answer.len(), same.len(), "one outcome per range");
        for (&i, outcome) in same.iter().zip(answer) {
            outcomes[i] = outcome;
        }
    }
    if through_ring.is_empty() {
        return Some(outcomes);
    }
    let filled = with_ring(|ring| {
        let mut filled: Vec<io::Result<usize>> = reads.iter().map(|_| Ok(0)).collect();
        for turn in through_ring.chunks(RING_ENTRIES) {
            read_turn(ring, &fds, reads, turn, &mut filled)?;
        }
        Ok(filled)
    })?;
    // Short reads (at the end of a file) and reads the kernel asked to retry
    // are finished here with plain positioned reads.
    for (i, filled) in filled.into_iter().enumerate() {
        if fds[i].is_none() {
            continue;
        }
        let read = &mut reads[i];
        outcomes[i] = filled.and_then(|done| match done == read.buf.len() {
            true => Ok(()),
            false => read_exact_at(read.file, &mut read.buf[done..], read.offset + done as u64),
        });
    }
    Some(outcomes)
}

/// Whether io_uring failed to set up on some thread; then no thread tries
/// again.
static UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// Whether some thread failed to set up an io_uring.
pub(super) fn io_uring_unavailable() -> bool {
    UNAVAILABLE.load(Ordering::Relaxed)
}

/// Records that an io_uring could not be set up: no thread tries again.
pub(super) fn note_io_uring_unavailable() {
    UNAVAILABLE.store(true, Ordering::Relaxed);
}

thread_local! {
    static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
}

/// Runs `work` on this thread's ring, made on first use. `None` when there
/// is no ring, or when it failed before the kernel took any read (the ring
/// is then dropped and this thread's later batches return `None`).
fn with_ring<T>(work: impl FnOnce(&mut IoUring) -> io::Result<T>) -> Option<T> {
    if UNAVAILABLE.load(Ordering::Relaxed) {
        return None;
    }
    RING.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.is_none() {
            match IoUring::new(RING_ENTRIES as u32) {
                Ok(ring) => *slot = Some(ring),
                Err(_) => {
                    UNAVAILABLE.store(true, Ordering::Relaxed);
                    return None;
                }
            }
        }
        let ring = slot.as_mut()?;
        match work(ring) {
            Ok(value) => Some(value),
            Err(_) => {
                *slot = None;
                None
            }
        }
    })
}

/// Submits the reads `turn` (indices into `reads`) and waits for all of
/// them; records each one's bytes read (or error) in `filled`. An `Err`
/// means the kernel took none of them.
fn read_turn(
    ring: &mut IoUring,
    fds: &[Option<RawFd>],
    reads: &mut [BatchRead<'_>],
    turn: &[usize],
    filled: &mut [io::Result<usize>],
) -> io::Result<()> {
    {
        let mut queue = ring.submission();
        for &i in turn {
            let read = &mut reads[i];
            let len = u32::try_from(read.buf.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
            let fd = fds[i].expect("a read through the ring has a descriptor");
            let entry = opcode::Read::new(types::Fd(fd), read.buf.as_mut_ptr(), len)
                .offset(read.offset)
                .build()
                .user_data(i as u64);
            // SAFETY: the buffer and descriptor stay valid until this
            // function has reaped the entry's completion: it waits for every
            // submitted entry before it returns (see `wait_for`).
            unsafe { queue.push(&entry) }.map_err(|_| io::ErrorKind::OutOfMemory)?;
        }
    }
    wait_for(ring, turn.len(), filled)
}

/// Submits what is queued and reaps `count` completions into `filled`.
fn wait_for(ring: &mut IoUring, count: usize, filled: &mut [io::Result<usize>]) -> io::Result<()> {
    let mut pending = count;
    // Entries the kernel has taken so far: a call may take only some (it
    // ran short of request memory), and completions alone cannot tell.
    let mut submitted = 0;
    while pending > 0 {
        match ring.submit_and_wait(pending) {
            Ok(taken) => submitted += taken,
            Err(e) => {
                let transient = matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                );
                if !transient && submitted == 0 {
                    // Nothing was taken: the caller may drop the ring, which
                    // discards the queued entries unread.
                    return Err(e);
                }
                if !transient {
                    // The kernel may still be writing into buffers the caller
                    // is about to free or reuse; returning would corrupt memory.
                    eprintln!("turtlekv: io_uring wait failed with reads in flight: {e}");
                    std::process::abort();
                }
            }
        }
        for entry in ring.completion() {
            let i = entry.user_data() as usize;
            filled[i] = match entry.result() {
                // Asked to retry: `read_exact_batch` reads it again itself.
                n if n == -libc::EAGAIN || n == -libc::EINTR => Ok(0),
                n if n < 0 => Err(io::Error::from_raw_os_error(-n)),
                n => Ok(n as usize),
            };
            pending -= 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    use crate::io::{FaultFs, FileSystem, OpenOptions, RealFs};

    fn file_of(bytes: usize) -> (tempfile::TempDir, std::sync::Arc<dyn File>) {
        let dir = tempfile::tempdir().unwrap();
        let file = RealFs
            .open(&dir.path().join("f"), OpenOptions::read_write_create())
            .unwrap();
        let data: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
        file.write_at(&data, 0).unwrap();
        (dir, file)
    }

    fn expected(offset: usize, len: usize) -> Vec<u8> {
        (offset..offset + len).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn a_batch_longer_than_the_ring_reads_every_range() {
        let (_dir, file) = file_of(1 << 20);
        let ranges: Vec<(usize, usize)> =
            (0..150).map(|i| (i * 6_007 % 900_000, 700 + i)).collect();
        let mut bufs: Vec<Vec<u8>> = ranges.iter().map(|&(_, len)| vec![0; len]).collect();
        let mut reads: Vec<BatchRead<'_>> = bufs
            .iter_mut()
            .zip(&ranges)
            .map(|(buf, &(offset, _))| BatchRead {
                file: &*file,
                buf,
                offset: offset as u64,
            })
            .collect();
        let Some(outcomes) = read_exact_batch(&mut reads) else {
            // No io_uring here (a seccomp filter): then nothing is read.
            assert!(bufs.iter().all(|b| b.iter().all(|&x| x == 0)));
            return;
        };
        assert!(outcomes.iter().all(|o| o.is_ok()));
        for (buf, &(offset, len)) in bufs.iter().zip(&ranges) {
            assert_eq!(buf, &expected(offset, len));
        }
    }

    #[test]
    fn a_range_past_the_end_fails_alone() {
        let (_dir, file) = file_of(10_000);
        let (mut short, mut beyond, mut whole) = (vec![0; 100], vec![0; 100], vec![0; 100]);
        let mut reads = vec![
            BatchRead {
                file: &*file,
                buf: &mut short,
                offset: 9_950,
            },
            BatchRead {
                file: &*file,
                buf: &mut beyond,
                offset: 20_000,
            },
            BatchRead {
                file: &*file,
                buf: &mut whole,
                offset: 9_900,
            },
        ];
        let Some(outcomes) = read_exact_batch(&mut reads) else {
            assert!(
                [short, beyond, whole]
                    .iter()
                    .all(|b| b.iter().all(|&x| x == 0))
            );
            return;
        };
        let eof =
            |o: &io::Result<()>| o.as_ref().unwrap_err().kind() == io::ErrorKind::UnexpectedEof;
        assert!(eof(&outcomes[0]) && eof(&outcomes[1]), "{outcomes:?}");
        assert!(outcomes[2].is_ok());
        assert_eq!(whole, expected(9_900, 100));
        assert_eq!(&short[..50], &expected(9_950, 50)[..]);
    }

    fn fault_file(fs: &FaultFs, name: &str, bytes: usize) -> std::sync::Arc<dyn File> {
        fs.create_dir_all(Path::new("/d")).unwrap();
        let file = fs
            .open(
                &Path::new("/d").join(name),
                OpenOptions::read_write_create(),
            )
            .unwrap();
        let data: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
        file.write_at(&data, 0).unwrap();
        file
    }

    /// Files without a descriptor serve their own ranges, beside those the
    /// kernel reads, each outcome in its place; a read error stays with
    /// its range and fills no other.
    #[test]
    fn files_without_a_descriptor_serve_their_ranges_and_their_errors() {
        let fs = FaultFs::new();
        let fault = fault_file(&fs, "f", 20_000);
        let (_dir, real) = file_of(20_000);
        let mut bufs = [vec![0; 300], vec![0; 300], vec![0; 300], vec![0; 300]];
        let offsets = [100, 5_000, 19_900, 7_000];
        // The second read of the fault-injecting file fails.
        fs.inject(crate::io::Fault {
            on: crate::io::FaultOn::Read,
            after: 1,
            kind: crate::io::FaultKind::Eio,
            persistent: false,
            path_contains: None,
        });
        let files = [&*fault, &*real, &*fault, &*real];
        let mut reads: Vec<BatchRead<'_>> = bufs
            .iter_mut()
            .zip(files)
            .zip(offsets)
            .map(|((buf, file), offset)| BatchRead { file, buf, offset })
            .collect();
        let Some(outcomes) = read_exact_batch(&mut reads) else {
            // No io_uring here (a seccomp filter): the real file's ranges
            // cannot be batched, and the caller reads them all another way.
            return;
        };
        assert!(outcomes[0].is_ok() && outcomes[1].is_ok() && outcomes[3].is_ok());
        let err = outcomes[2].as_ref().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
        for i in [0, 1, 3] {
            assert_eq!(bufs[i], expected(offsets[i] as usize, 300), "range {i}");
        }
        assert_eq!(
            fs.read_count(),
            2,
            "one read_at per range of the fault file"
        );
    }

    #[test]
    fn a_file_that_declines_leaves_the_batch_to_the_caller() {
        let fs = FaultFs::new();
        let file = fault_file(&fs, "f", 8192);
        let mut buf = vec![0; 4096];
        let mut reads = vec![BatchRead {
            file: &*file,
            buf: &mut buf,
            offset: 0,
        }];
        assert!(
            read_exact_batch(&mut reads)
                .unwrap()
                .iter()
                .all(|o| o.is_ok())
        );
        assert_eq!(buf, expected(0, 4096));
        fs.set_batched_reads(false);
        let mut reads = vec![BatchRead {
            file: &*file,
            buf: &mut buf,
            offset: 4096,
        }];
        assert!(read_exact_batch(&mut reads).is_none());
    }
}
