//! Streamed reads: reads started one by one through an io_uring and
//! reported one by one as each completes.
//!
//! Why: a batched lookup (`Db::multi_get`) finds the chunk each key needs
//! by a walk of its own, and some keys need a second read after their
//! first (a filter's false positive). Reading all of a batch's chunks at
//! once and waiting for all (`read_exact_batch`) leaves the device idle
//! while the walks run and while the slowest read of the batch is still
//! out, and makes a second read wait for every first one. Here each read
//! starts as soon as its walk ends, and its key is answered as soon as it
//! is in, while the others are still in flight.
//!
//! The ring is the thread's spare one (made on first use, given back when
//! the `ReadRing` drops), not the one `read_exact_batch` uses: that one
//! may run while reads of this one are in flight, and must not reap them.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;

use io_uring::{IoUring, opcode, types};

use super::batch::{RING_ENTRIES, io_uring_unavailable, note_io_uring_unavailable};

thread_local! {
    static SPARE_RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
}

/// A completed read: its tag and the bytes read (or the error). `Ok(n)`
/// with `n` short of the length asked for is a read the caller finishes
/// itself (the end of a file, or a read the kernel asked to retry).
pub type Completion = (u64, io::Result<usize>);

/// Reads in flight through one io_uring. Dropping it waits until every
/// read it started is done: their buffers may be freed after that.
pub struct ReadRing {
    ring: Option<IoUring>,
    /// Entries pushed and not yet reaped.
    in_flight: usize,
    /// Entries the kernel has taken (`submit` counts them): entries pushed
    /// but never taken leave no read behind.
    taken: usize,
    reaped: usize,
    done: VecDeque<Completion>,
}

impl ReadRing {
    /// This thread's spare ring, or a new one; `None` where the kernel
    /// gives no io_uring.
    pub fn new() -> Option<ReadRing> {
        if io_uring_unavailable() {
            return None;
        }
        let spare = SPARE_RING.with(|slot| slot.borrow_mut().take());
        let ring = match spare {
            Some(ring) => ring,
            None => match IoUring::new(RING_ENTRIES as u32) {
                Ok(ring) => ring,
                Err(_) => {
                    note_io_uring_unavailable();
                    return None;
                }
            },
        };
        Some(ReadRing {
            ring: Some(ring),
            in_flight: 0,
            taken: 0,
            reaped: 0,
            done: VecDeque::new(),
        })
    }

    /// Starts reading `len` bytes at `offset` of `fd` into `buf`; the read
    /// comes back from `next_done` with `tag`. When the ring is full this
    /// first waits for a read to complete (kept for `next_done`).
    ///
    /// # Safety
    ///
    /// `buf` must be valid for writes of `len` bytes, and neither read nor
    /// written nor freed by anyone else, until `next_done` has returned
    /// this read or the `ReadRing` has been dropped; `fd` must stay open
    /// as long.
    pub unsafe fn start(
        &mut self,
        fd: RawFd,
        buf: *mut u8,
        len: u32,
        offset: u64,
        tag: u64,
    ) -> io::Result<()> {
        while self.in_flight >= RING_ENTRIES {
            self.reap(1)?;
        }
        let entry = opcode::Read::new(types::Fd(fd), buf, len)
            .offset(offset)
            .build()
            .user_data(tag);
        let ring = self.ring.as_mut().expect("the ring lives until drop");
        // SAFETY: the caller keeps `buf` and `fd` valid until the read is
        // reaped, and `drop` reaps every read before the ring goes.
        unsafe { ring.submission().push(&entry) }.map_err(|_| io::ErrorKind::OutOfMemory)?;
        self.in_flight += 1;
        match ring.submit() {
            Ok(taken) => self.taken += taken,
            // Not taken yet: the next submit or wait takes it.
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// The next completed read, waiting for one if none is in; `None` when
    /// no read is in flight.
    pub fn next_done(&mut self) -> io::Result<Option<Completion>> {
        if self.done.is_empty() && self.in_flight > 0 {
            self.reap(1)?;
        }
        Ok(self.done.pop_front())
    }

    /// Reads started and not yet returned by `next_done`.
    #[cfg(test)]
    pub fn outstanding(&self) -> usize {
        self.in_flight + self.done.len()
    }

    /// Waits until at least `want` reads are in, and moves every completed
    /// one to `done`.
    fn reap(&mut self, want: usize) -> io::Result<()> {
        let ring = self.ring.as_mut().expect("the ring lives until drop");
        loop {
            match ring.submit_and_wait(want) {
                Ok(taken) => {
                    self.taken += taken;
                    break;
                }
                Err(e) if is_transient(&e) => {
                    if ring.completion().is_empty() {
                        continue;
                    }
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        for entry in ring.completion() {
            let outcome = match entry.result() {
                n if n == -libc::EAGAIN || n == -libc::EINTR => Ok(0),
                n if n < 0 => Err(io::Error::from_raw_os_error(-n)),
                n => Ok(n as usize),
            };
            self.done.push_back((entry.user_data(), outcome));
            self.in_flight -= 1;
            self.reaped += 1;
        }
        Ok(())
    }
}

impl Drop for ReadRing {
    fn drop(&mut self) {
        while self.in_flight > 0 {
            if let Err(e) = self.reap(self.in_flight) {
                if self.taken > self.reaped {
                    // The kernel may still write into buffers the owner is
                    // about to free: going on would corrupt memory.
                    eprintln!("turtlekv: io_uring wait failed with reads in flight: {e}");
                    std::process::abort();
                }
                // Nothing of it reached the kernel: the ring is dropped
                // with the entries unread, and not kept for reuse.
                return;
            }
        }
        let ring = self.ring.take();
        SPARE_RING.with(|slot| {
            let mut slot = slot.borrow_mut();
            if slot.is_none() {
                *slot = ring;
            }
        });
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
    )
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd as _;

    use super::*;
    use crate::io::AlignedBuf;

    fn file_of(bytes: usize) -> (tempfile::TempDir, std::fs::File) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, data).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        (dir, file)
    }

    fn expected(offset: usize, len: usize) -> Vec<u8> {
        (offset..offset + len).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn more_reads_than_the_ring_holds_all_come_back_with_their_tags() {
        let (_dir, file) = file_of(1 << 20);
        let Some(mut ring) = ReadRing::new() else {
            return; // no io_uring here (a seccomp filter)
        };
        let reads: Vec<(usize, usize)> = (0..150).map(|i| (i * 6_007 % 900_000, 4096)).collect();
        let mut bufs: Vec<AlignedBuf> = reads.iter().map(|&(_, l)| AlignedBuf::zeroed(l)).collect();
        for (tag, (buf, &(offset, len))) in bufs.iter_mut().zip(&reads).enumerate() {
            // SAFETY: the buffers outlive the ring's reads: every one is
            // reaped below before they are read or dropped.
            unsafe {
                ring.start(
                    file.as_raw_fd(),
                    buf.as_mut_ptr(),
                    len as u32,
                    offset as u64,
                    tag as u64,
                )
            }
            .unwrap();
        }
        let mut seen = vec![false; reads.len()];
        while let Some((tag, outcome)) = ring.next_done().unwrap() {
            assert_eq!(outcome.unwrap(), 4096);
            assert!(!std::mem::replace(&mut seen[tag as usize], true));
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(ring.outstanding(), 0);
        drop(ring);
        for (buf, &(offset, len)) in bufs.iter().zip(&reads) {
            assert_eq!(&buf[..], &expected(offset, len)[..]);
        }
    }

    #[test]
    fn dropping_the_ring_waits_for_its_reads() {
        let (_dir, file) = file_of(1 << 20);
        let mut bufs: Vec<AlignedBuf> = (0..32).map(|_| AlignedBuf::zeroed(8192)).collect();
        {
            let Some(mut ring) = ReadRing::new() else {
                return;
            };
            for (tag, buf) in bufs.iter_mut().enumerate() {
                // SAFETY: the ring is dropped, waiting for every read,
                // before the buffers are read.
                unsafe {
                    ring.start(
                        file.as_raw_fd(),
                        buf.as_mut_ptr(),
                        8192,
                        tag as u64 * 8192,
                        0,
                    )
                }
                .unwrap();
            }
        }
        for (i, buf) in bufs.iter().enumerate() {
            assert_eq!(&buf[..], &expected(i * 8192, 8192)[..]);
        }
    }

    #[test]
    fn a_read_past_the_end_comes_back_short() {
        let (_dir, file) = file_of(10_000);
        let Some(mut ring) = ReadRing::new() else {
            return;
        };
        let mut buf = AlignedBuf::zeroed(8192);
        // SAFETY: reaped below, before `buf` is read or dropped.
        unsafe { ring.start(file.as_raw_fd(), buf.as_mut_ptr(), 8192, 8192, 7) }.unwrap();
        let (tag, outcome) = ring.next_done().unwrap().unwrap();
        assert_eq!((tag, outcome.unwrap()), (7, 10_000 - 8192));
        assert!(ring.next_done().unwrap().is_none());
    }
}
