//! A miss that waits for the disk holds no lock that hits or other misses
//! need: reads of one block are held at a gate while others proceed.

use std::io;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::harness::{DIR, Version, commit, leaf_bytes, list_children, open_at, small_options};
use crate::io::WrapFs;
use crate::io::{FaultFs, File};
use crate::page::{CachePriority, PageIo};

/// Holds reads at one file offset until opened.
#[derive(Debug, Default)]
struct Gate {
    /// (offset to hold, a read is waiting there, gate open)
    state: Mutex<(Option<u64>, bool, bool)>,
    changed: Condvar,
}

#[derive(Debug)]
struct GateFile {
    inner: Arc<dyn File>,
    gate: Arc<Gate>,
}

impl File for GateFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut state = self.gate.state.lock().unwrap();
        if state.0 == Some(offset) {
            state.1 = true;
            self.gate.changed.notify_all();
            while !state.2 {
                state = self.gate.changed.wait(state).unwrap();
            }
        }
        drop(state);
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.punch_hole(offset, len)
    }
}

#[test]
fn a_slow_miss_blocks_neither_hits_nor_other_misses() {
    let gate = Arc::new(Gate::default());
    let file_gate = gate.clone();
    let fs = Arc::new(WrapFs {
        inner: Arc::new(FaultFs::new()),
        wrap: move |inner| -> Arc<dyn File> {
            Arc::new(GateFile {
                inner,
                gate: file_gate.clone(),
            })
        },
    });
    let store = open_at(fs, Path::new(DIR), &small_options(), 0, None).unwrap();
    let leaves: Vec<_> = (0..3)
        .map(|s| Version::new_leaf(&store, s, 20_000).unwrap())
        .collect();
    let v = Version::write(&store, leaves).unwrap();
    commit(&store, Some(v.root), &[]).unwrap();
    let store = Arc::new(store);
    let [(hot, hot_seed, _), (slow, _, _), (other, other_seed, _)] = v.leaves[..] else {
        unreachable!("three leaves")
    };
    store
        .read_range(hot, 5000, 100, CachePriority::LeafBlock)
        .unwrap();
    // Hold the read of block 1 of the slow leaf.
    gate.state.lock().unwrap().0 = Some(slow.slot() * 65536 + 4096);
    let slow_reader = {
        let store = store.clone();
        std::thread::spawn(move || store.read_range(slow, 5000, 100, CachePriority::LeafBlock))
    };
    let mut state = gate.state.lock().unwrap();
    while !state.1 {
        state = gate.changed.wait(state).unwrap();
    }
    drop(state);
    // The slow miss is now parked inside the file layer.
    let (done_tx, done_rx) = mpsc::channel();
    let fast = {
        let store = store.clone();
        std::thread::spawn(move || {
            let hot_data = leaf_bytes(hot_seed, 20_000);
            for _ in 0..1000 {
                let got = store
                    .read_range(hot, 5000, 100, CachePriority::LeafBlock)
                    .unwrap();
                assert_eq!(&got[..], &hot_data[5000..5100]);
            }
            let got = store
                .read_range(other, 9000, 50, CachePriority::LeafBlock)
                .unwrap();
            assert_eq!(&got[..], &leaf_bytes(other_seed, 20_000)[9000..9050]);
            done_tx.send(()).unwrap();
        })
    };
    let finished = done_rx.recv_timeout(Duration::from_secs(20));
    {
        let mut state = gate.state.lock().unwrap();
        state.2 = true;
        gate.changed.notify_all();
    }
    assert!(finished.is_ok(), "hits waited for a miss on another page");
    fast.join().unwrap();
    slow_reader.join().unwrap().unwrap();
    let stats = store.stats();
    assert!(stats.cache_hits >= 1000, "{stats:?}");
    store.check(&store.pin(), &list_children).unwrap();
}
