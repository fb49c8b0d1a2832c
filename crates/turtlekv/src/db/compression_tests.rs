//! Block compression end to end: every codec writes pages that every
//! other reads back (each chunk records its codec), `check()` verifies
//! them, and compressible values take less of the page file.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::io::FaultFs;
use crate::{Compression, Db, Options};

/// Text-like values: JSON-ish records from a small vocabulary.
fn value(i: u64) -> Vec<u8> {
    let words = [
        "alpha", "turtle", "shell", "river", "stone", "green", "slow", "tree",
    ];
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = format!("{{\"id\": {i}, \"tags\": [").into_bytes();
    for _ in 0..(8 + i % 24) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(format!("\"{}\", ", words[(x % 8) as usize]).as_bytes());
    }
    v.extend_from_slice(b"], \"ok\": true}");
    v
}

fn key(i: u64) -> Vec<u8> {
    format!("user{:010}", i * 7919 % 100_003).into_bytes()
}

const CODECS: [Compression; 3] = [
    Compression::None,
    Compression::Lz4,
    Compression::Zstd { level: 3 },
];

/// Writes with one codec, reopens with each other in turn and overwrites
/// a share: every value reads back through gets and scans, and `check()`
/// (which reads pages whole and decompresses every chunk) passes.
#[test]
fn every_codec_reads_what_every_other_wrote() {
    let fs = FaultFs::new();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for (round, compression) in CODECS.iter().chain(CODECS.iter()).enumerate() {
        let options = Options {
            compression: *compression,
            ..super::checkpointing_test_options()
        };
        let db = Db::open_with_fs("/db", options, Arc::new(fs.clone())).unwrap();
        for (k, v) in &model {
            assert_eq!(
                db.get(k).unwrap().as_deref(),
                Some(&v[..]),
                "{compression:?}"
            );
        }
        let round = round as u64;
        for i in (round * 300)..(round * 300 + 1500) {
            let v = value(i + round);
            db.put(key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        for i in (0..round * 300).step_by(11) {
            db.delete(key(i)).unwrap();
            model.remove(&key(i));
        }
        db.checkpoint_now().unwrap();
        db.check().unwrap();
        let stats = db.stats();
        assert!(stats.compression_input_bytes > 0);
        if *compression == Compression::None {
            assert_eq!(stats.compression_ratio(), 1.0);
        } else {
            assert!(
                stats.compression_ratio() > 1.5,
                "{compression:?}: {stats:?}"
            );
        }
        let scanned: Vec<(Vec<u8>, Vec<u8>)> = db
            .range::<&[u8], _>(..)
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<crate::Result<_>>()
            .unwrap();
        assert!(
            scanned.iter().map(|(k, v)| (k, v)).eq(model.iter()),
            "{compression:?}"
        );
        db.close().unwrap();
    }
}

/// Bytes the file at `path` takes on disk (its allocated blocks: punched
/// holes take none).
fn allocated_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// Text-like values take at most 60% of the leaf file's space with LZ4
/// that they take uncompressed; zstd less still.
#[test]
fn compressible_values_shrink_the_leaf_file() {
    let mut used = Vec::new();
    for compression in CODECS {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            compression,
            leaf_size_bytes: 256 * 1024,
            checkpoint_distance_bytes: 2 << 20,
            ..Options::default()
        };
        let db = Db::open(dir.path(), options).unwrap();
        for i in 0..40_000 {
            db.put(key(i), value(i)).unwrap();
        }
        db.checkpoint_now().unwrap();
        db.check().unwrap();
        let ratio = db.stats().compression_ratio();
        db.close().unwrap();
        let bytes = allocated_bytes(&dir.path().join("leaves.pages"));
        eprintln!("{compression}: leaves.pages takes {bytes} bytes, chunks {ratio:.2}x smaller");
        used.push(bytes);
    }
    let [none, lz4, zstd] = used[..] else {
        unreachable!()
    };
    assert!(
        lz4 * 10 <= none * 6,
        "LZ4 {lz4} against {none} uncompressed"
    );
    assert!(zstd <= lz4, "zstd {zstd} against LZ4 {lz4}");
}
