//! Entry points for fuzzing and for the corpus tests. **Not a stable API**:
//! behind the `sim` feature, and only here so that the cargo-fuzz targets in
//! `fuzz/` and `tests/fuzz_corpus.rs` reach decoders that are otherwise
//! private.
//!
//! Every decoder takes arbitrary bytes and returns `Ok` or `Err`; a panic
//! (including an out-of-bounds slice, i.e. an over-read) is a bug. Each one
//! decodes the input twice: as given, and with its checksums recomputed, so
//! that a fuzzer exercises the parsers behind the checksums too.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use crate::io::FaultFs;
use crate::store::superblock::{SLOT_BYTES, Slot};
use crate::{Db, Error, Options, Snapshot, WriteBatch, WriteOptions};

/// Decodes a WAL record frame (`docs/format.md`, "Record frame").
pub fn wal_record(bytes: &[u8]) -> Result<usize, String> {
    let fixed = crate::wal::fuzz_hook::with_valid_checksum(bytes);
    let _ = crate::wal::fuzz_hook::decode_record(&fixed);
    crate::wal::fuzz_hook::decode_record(bytes)
}

/// Decodes leaf page contents (`docs/format.md`, "Leaf pages"), and the
/// same bytes as one compressed chunk (a codec byte, a block size byte,
/// the chunk's blocks; "Compressed chunks"), so that the codecs' decoders
/// see arbitrary input too and not only what a page's checksums let through.
pub fn leaf_page(bytes: &[u8]) -> Result<usize, String> {
    let hook = &crate::tree::fuzz_hook::chunk_with_valid_lengths;
    let _ = crate::tree::fuzz_hook::decode_compressed_chunk(&hook(bytes));
    let _ = crate::tree::fuzz_hook::decode_compressed_chunk(bytes);
    let fixed = crate::tree::fuzz_hook::leaf_with_valid_checksums(bytes);
    let _ = crate::tree::fuzz_hook::decode_leaf(&fixed);
    crate::tree::fuzz_hook::decode_leaf(bytes)
}

/// Decodes node page contents (`docs/format.md`, node pages).
pub fn node_page(bytes: &[u8]) -> Result<usize, String> {
    let fixed = crate::tree::fuzz_hook::node_with_valid_checksum(bytes);
    let _ = crate::tree::fuzz_hook::decode_node(&fixed);
    crate::tree::fuzz_hook::decode_node(bytes)
}

/// Decodes a superblock file image of up to two slots and returns the
/// newest valid generation (`docs/format.md`, "Superblock").
pub fn superblock(bytes: &[u8]) -> Result<u64, String> {
    let mut fixed = bytes.to_vec();
    for slot in fixed.chunks_mut(SLOT_BYTES).take(2) {
        // Version 1 has its checksum at 72, later ones at 88.
        let checked = if slot.get(8..12) == Some(&1u32.to_le_bytes()[..]) {
            72
        } else {
            88
        };
        if slot.len() >= checked + 4 {
            let crc = crc32c::crc32c(&slot[..checked]);
            slot[checked..checked + 4].copy_from_slice(&crc.to_le_bytes());
        }
    }
    let _ = newest_slot(&fixed);
    newest_slot(bytes)
}

fn newest_slot(bytes: &[u8]) -> Result<u64, String> {
    let slots: Vec<_> = (0..2u64)
        .map(|i| {
            let start = (i as usize * SLOT_BYTES).min(bytes.len());
            Slot::decode(&bytes[start..], i)
        })
        .collect();
    slots
        .iter()
        .filter_map(|s| s.as_ref().ok())
        .map(|s| s.generation)
        .max()
        .ok_or_else(|| {
            format!(
                "no valid slot: {:?}",
                slots.iter().find_map(|s| s.as_ref().err())
            )
        })
}

/// Seeds: valid encodings of each format, for building corpora.
pub mod seeds {
    /// A valid WAL frame of `ops` (key, `None` for a delete), its payload
    /// in the layout of WAL format `version` (1 or 2, the current one).
    ///
    /// # Panics
    /// If `version` is neither.
    pub fn wal_record(version: u32, first_seq: u64, ops: &[(Vec<u8>, Option<Vec<u8>>)]) -> Vec<u8> {
        crate::wal::fuzz_hook::encode_record(version, first_seq, ops)
    }

    /// Valid leaf contents of sorted, unique `items` (`None`: tombstone)
    /// in leaf format `version` (1, 2 or 3, the current one), no chunk
    /// compressed.
    ///
    /// # Panics
    /// If `version` is none of those.
    pub fn leaf_page(
        version: u16,
        items: &[(Vec<u8>, Option<Vec<u8>>)],
        block_size: usize,
        filter_bits_per_key: u32,
    ) -> Vec<u8> {
        crate::tree::fuzz_hook::encode_leaf(version, items, block_size, filter_bits_per_key)
    }

    /// Valid leaf contents of sorted, unique `items` in the current leaf
    /// format, chunks compressed as `compression` says where that pays.
    pub fn compressed_leaf_page(
        compression: crate::Compression,
        items: &[(Vec<u8>, Option<Vec<u8>>)],
        block_size: usize,
        filter_bits_per_key: u32,
    ) -> Vec<u8> {
        crate::tree::fuzz_hook::encode_compressed_leaf(
            compression,
            items,
            block_size,
            filter_bits_per_key,
        )
    }
}

/// Runs the operations that `bytes` encode against a database on a
/// [`FaultFs`] with tiny pages (so checkpoints, flushes and splits happen
/// within a few operations) and against a `BTreeMap`, and panics at the
/// first difference. Returns the number of operations run.
pub fn api_ops(bytes: &[u8]) -> usize {
    let mut run = ApiRun::new();
    let mut input = Input { bytes, at: 0 };
    let mut ops = 0;
    while let Some(op) = input.byte() {
        if ops == MAX_OPS {
            break;
        }
        run.step(op, &mut input);
        ops += 1;
    }
    run.finish();
    ops
}

/// Keeps one input's run short, so a fuzzer tries many inputs.
const MAX_OPS: usize = 300;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = self.bytes.get(self.at).copied();
        self.at += 1;
        b
    }

    /// Past the end, inputs read as zeros: every prefix is a valid program.
    fn next(&mut self) -> u8 {
        self.byte().unwrap_or(0)
    }

    fn key(&mut self) -> Vec<u8> {
        let b = self.next();
        // Mostly 40 short keys (so writes collide), sometimes long ones, up
        // to 205 bytes: 1 KiB nodes take keys up to 219.
        if b >= 240 {
            vec![b'L'; 100 + usize::from(b - 240) * 7]
        } else {
            format!("k{:02}", b % 40).into_bytes()
        }
    }

    fn value(&mut self) -> Vec<u8> {
        let (fill, size) = (self.next(), self.next());
        // Now and then a value of a few KiB, to fill the MemTable quickly.
        let len = if size >= 250 {
            1024 * usize::from(size - 249)
        } else {
            usize::from(size % 48)
        };
        vec![fill; len]
    }

    fn bound(&mut self) -> Bound<Vec<u8>> {
        let b = self.next();
        let key = format!("k{:02}", (b >> 2) % 40).into_bytes();
        match b % 3 {
            0 => Bound::Unbounded,
            1 => Bound::Included(key),
            _ => Bound::Excluded(key),
        }
    }
}

struct ApiRun {
    fs: FaultFs,
    db: Option<Db>,
    model: Model,
    snapshots: Vec<(Snapshot, Model)>,
}

fn options() -> Options {
    Options {
        wal_segment_size_bytes: 64 * 1024,
        leaf_size_bytes: 16 * 1024,
        node_size_bytes: 1024,
        checkpoint_distance_bytes: 4 * 1024,
        cache_capacity_bytes: 64 * 1024,
        checkpoint_threads: 1,
        ..Options::default()
    }
}

impl ApiRun {
    fn new() -> Self {
        let fs = FaultFs::new();
        let db = Db::open_with_fs("/db", options(), Arc::new(fs.clone())).expect("open");
        ApiRun {
            fs,
            db: Some(db),
            model: Model::new(),
            snapshots: Vec::new(),
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().expect("open")
    }

    fn step(&mut self, op: u8, input: &mut Input<'_>) {
        match op % 16 {
            0..=3 => {
                let (k, v) = (input.key(), input.value());
                let sync = input.next().is_multiple_of(8);
                self.db()
                    .put_opt(&k, &v, &WriteOptions::new().sync(sync))
                    .expect("put");
                self.model.insert(k, v);
            }
            4 | 5 => {
                let k = input.key();
                self.db().delete(&k).expect("delete");
                self.model.remove(&k);
            }
            6 => self.batch(input),
            7 | 8 => {
                let k = input.key();
                let got = self.db().get(&k).expect("get");
                assert_eq!(got.as_deref(), self.model.get(&k).map(Vec::as_slice), "get");
            }
            9 => {
                let (lo, hi, rev) = (input.bound(), input.bound(), input.next() & 1 == 1);
                let got = collect(self.db().range((lo.clone(), hi.clone())), rev);
                assert_eq!(got, model_range(&self.model, lo, hi, rev), "range");
            }
            10 => {
                if self.snapshots.len() == 4 {
                    self.snapshots.remove(0);
                }
                self.snapshots
                    .push((self.db().snapshot(), self.model.clone()));
            }
            11 => {
                let i = usize::from(input.next());
                if let Some((snapshot, model)) = self.snapshots.get(i % self.snapshots.len().max(1))
                {
                    let rev = input.next() & 1 == 1;
                    let got = collect(snapshot.range::<&[u8], _>(..), rev);
                    let want = model_range(model, Bound::Unbounded, Bound::Unbounded, rev);
                    assert_eq!(got, want, "snapshot changed");
                }
            }
            12 => self.db().checkpoint_now().expect("checkpoint_now"),
            13 => self.reopen(),
            14 => {
                let b = u64::from(input.next());
                if b & 1 == 0 {
                    self.db()
                        .set_checkpoint_distance(4096 + b * 512)
                        .expect("set_checkpoint_distance");
                } else {
                    self.db()
                        .set_cache_capacity(64 * 1024 + b * 4096)
                        .expect("set_cache_capacity");
                }
            }
            _ => self.bad_input(input.next()),
        }
    }

    fn batch(&mut self, input: &mut Input<'_>) {
        let mut batch = WriteBatch::new();
        let mut after = self.model.clone();
        for _ in 0..1 + input.next() % 5 {
            let k = input.key();
            if input.next().is_multiple_of(3) {
                batch.delete(&k);
                after.remove(&k);
            } else {
                let v = input.value();
                batch.put(&k, &v);
                after.insert(k, v);
            }
        }
        let sync = input.next().is_multiple_of(8);
        self.db()
            .write(batch, &WriteOptions::new().sync(sync))
            .expect("write batch");
        self.model = after;
    }

    /// A bad entry makes the call fail with a typed error and change nothing.
    fn bad_input(&mut self, b: u8) {
        let long_key = vec![b'x'; crate::MAX_KEY_SIZE + 1];
        let mut batch = WriteBatch::new();
        batch.put(b"k00", b"half of a bad batch");
        let result = match b % 4 {
            0 => self.db().put(b"", b"v"),
            1 => self.db().put(&long_key, b"v"),
            2 => self.db().delete(b""),
            _ => {
                batch.put(&long_key, b"v");
                self.db().write(batch, &WriteOptions::default())
            }
        };
        assert!(
            matches!(result, Err(Error::EmptyKey | Error::KeyTooLarge { .. })),
            "bad input accepted: {result:?}"
        );
        self.check_all();
    }

    fn reopen(&mut self) {
        self.snapshots.clear();
        drop(self.db.take());
        let db = Db::open_with_fs("/db", options(), Arc::new(self.fs.clone())).expect("reopen");
        self.db = Some(db);
        self.check_all();
    }

    fn check_all(&self) {
        let got = collect(self.db().range::<&[u8], _>(..), false);
        assert_eq!(
            got,
            model_range(&self.model, Bound::Unbounded, Bound::Unbounded, false),
            "full scan"
        );
    }

    fn finish(self) {
        self.check_all();
        self.db().check().expect("check");
        for (snapshot, model) in &self.snapshots {
            let got = collect(snapshot.range::<&[u8], _>(..), false);
            assert_eq!(
                got,
                model_range(model, Bound::Unbounded, Bound::Unbounded, false),
                "snapshot"
            );
        }
    }
}

fn collect(iter: crate::Iter, rev: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let kv = |r: crate::Result<(bytes::Bytes, bytes::Bytes)>| {
        let (k, v) = r.expect("scan");
        (k.to_vec(), v.to_vec())
    };
    if rev {
        iter.rev().map(kv).collect()
    } else {
        iter.map(kv).collect()
    }
}

fn model_range(
    model: &Model,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    rev: bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    // BTreeMap::range panics on inverted or equal-excluded bounds; the engine
    // returns nothing for them.
    let empty = match (&lo, &hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
        _ => false,
    };
    if empty {
        return Vec::new();
    }
    let items = model.range((lo, hi)).map(|(k, v)| (k.clone(), v.clone()));
    if rev {
        items.rev().collect()
    } else {
        items.collect()
    }
}
