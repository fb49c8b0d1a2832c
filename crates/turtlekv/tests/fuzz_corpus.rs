//! The fuzz targets of `fuzz/` on stable, as ordinary tests: each target's
//! checked-in corpus (`tests/corpus/<target>/`, real encodings and
//! mutations of them) plus deterministic mutations of every file made at
//! test time. A decoder must return `Ok` or `Err`, never panic or read out
//! of bounds; the API target panics when the engine and its `BTreeMap`
//! model disagree.
//!
//! `TURTLEKV_WRITE_CORPUS=1 cargo test --test fuzz_corpus` rewrites the
//! corpus from the seeds below.

mod common;

use std::path::{Path, PathBuf};

use common::{Rng, checkpointing_options, open_fault};
use turtlekv::io::{FaultFs, FileSystem, OpenOptions, read_all};
use turtlekv::{Compression, Options, WriteBatch, WriteOptions, fuzz};

type Decoder = fn(&[u8]) -> bool;

/// Target name and decoder (`true` when the input decodes; the API target
/// is `true` when it ran operations and agreed with its model).
const TARGETS: [(&str, Decoder); 5] = [
    ("wal_record", |b| fuzz::wal_record(b).is_ok()),
    ("leaf_page", |b| fuzz::leaf_page(b).is_ok()),
    ("node_page", |b| fuzz::node_page(b).is_ok()),
    ("superblock", |b| fuzz::superblock(b).is_ok()),
    ("api_ops", |b| fuzz::api_ops(b) > 0),
];

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(target)
}

/// One mutant of `input`: bit flips, overwritten bytes, a cut, an
/// extension, or a copied range (what libFuzzer's mutators do, roughly).
fn mutate(input: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.index(3) {
        match rng.index(5) {
            0 if !out.is_empty() => {
                let at = rng.index(out.len());
                out[at] ^= 1 << rng.index(8);
            }
            1 if !out.is_empty() => {
                let at = rng.index(out.len());
                out[at] = [0, 0xFF, 0x7F, 0x80, 1][rng.index(5)];
            }
            2 => out.truncate(rng.index(out.len() + 1)),
            3 => out.extend((0..1 + rng.index(16)).map(|_| rng.next() as u8)),
            _ if out.len() > 8 => {
                let (from, to, len) =
                    (rng.index(out.len()), rng.index(out.len()), 1 + rng.index(8));
                let chunk: Vec<u8> = out[from..(from + len).min(out.len())].to_vec();
                let end = (to + chunk.len()).min(out.len());
                out[to..end].copy_from_slice(&chunk[..end - to]);
            }
            _ => out.push(rng.next() as u8),
        }
    }
    out
}

fn read_corpus(target: &str) -> Vec<Vec<u8>> {
    let mut files: Vec<_> = std::fs::read_dir(corpus_dir(target))
        .unwrap_or_else(|e| panic!("corpus of {target}: {e}"))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

#[test]
fn every_target_survives_its_corpus_and_mutants() {
    let mut total = 0;
    for (target, decode) in TARGETS {
        let corpus = read_corpus(target);
        assert!(
            corpus.len() >= 10,
            "{target}: corpus of {} files",
            corpus.len()
        );
        // The API target opens a database per input: fewer mutants.
        let mutants = if target == "api_ops" { 10 } else { 1000 };
        let mut rng = Rng(0x0123_4567_89AB_CDEF ^ target.len() as u64);
        let mut ok = 0;
        for input in &corpus {
            ok += usize::from(decode(input));
            for _ in 0..mutants {
                decode(&mutate(input, &mut rng));
                total += 1;
            }
            total += 1;
        }
        // The corpus holds valid encodings, so the decoders' success paths
        // (and their re-encoding checks) run too.
        assert!(ok >= 3, "{target}: only {ok} corpus inputs decode");
    }
    eprintln!("ran {total} inputs through {} targets", TARGETS.len());
}

/// Valid encodings of each format, the seeds of the corpus.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let kv = |k: &str, v: Option<&[u8]>| (k.as_bytes().to_vec(), v.map(<[u8]>::to_vec));
    match target {
        "wal_record" => [2, 1]
            .into_iter()
            .flat_map(|version| {
                [
                    fuzz::seeds::wal_record(version, 1, &[kv("apple", Some(b"red"))]),
                    fuzz::seeds::wal_record(version, 7, &[kv("apple", None)]),
                    fuzz::seeds::wal_record(
                        version,
                        9,
                        &[kv("a", Some(b"")), kv("b", None), kv("c", Some(&[7; 300]))],
                    ),
                    fuzz::seeds::wal_record(
                        version,
                        1 << 40,
                        &[(vec![b'k'; 512], Some(vec![1; 2000]))],
                    ),
                ]
            })
            .collect(),
        "leaf_page" => {
            let items = |n: u32, tombstones: bool| -> Vec<_> {
                (0..n)
                    .map(|i| {
                        let v =
                            (!tombstones || i % 3 != 0).then(|| vec![i as u8; (i % 40) as usize]);
                        (format!("key{i:04}").into_bytes(), v)
                    })
                    .collect()
            };
            let mut leaves = vec![
                fuzz::seeds::leaf_page(2, &items(1, false), 256, 0),
                fuzz::seeds::leaf_page(2, &items(30, false), 256, 10),
                fuzz::seeds::leaf_page(2, &items(30, true), 256, 20),
                fuzz::seeds::leaf_page(2, &items(12, false), 128, 30),
                fuzz::seeds::leaf_page(2, &[kv("big", Some(&[3; 700]))], 256, 10),
                // Format version 1, which earlier builds wrote.
                fuzz::seeds::leaf_page(1, &items(30, true), 256, 20),
                fuzz::seeds::leaf_page(1, &[kv("big", Some(&[3; 700]))], 256, 10),
                // Compressed chunks (format version 3), small and spanning blocks.
                fuzz::seeds::compressed_leaf_page(Compression::Lz4, &items(60, true), 256, 10),
                fuzz::seeds::compressed_leaf_page(
                    Compression::Zstd { level: 3 },
                    &items(60, true),
                    256,
                    0,
                ),
                fuzz::seeds::compressed_leaf_page(
                    Compression::Lz4,
                    &[kv("big", Some(&[3; 2000])), kv("small", Some(b"v"))],
                    256,
                    10,
                ),
            ];
            leaves.extend(real_pages(false).into_iter().take(3));
            leaves
        }
        "node_page" => real_pages(true).into_iter().take(8).collect(),
        "superblock" => {
            let file = real_file("SUPERBLOCK");
            let (mut slot0_only, mut slot1_only) = (file.clone(), file.clone());
            slot0_only[4096..].fill(0);
            slot1_only[..4096].fill(0);
            let fresh = FaultFs::new();
            drop(open_fault(&fresh, real_options()).unwrap());
            let fresh = fresh
                .open(Path::new("/db/SUPERBLOCK"), OpenOptions::read_only())
                .unwrap();
            vec![
                file,
                slot0_only,
                slot1_only,
                read_all(fresh.as_ref()).unwrap(),
            ]
        }
        "api_ops" => {
            let mut rng = Rng(0xA91);
            let mut inputs: Vec<Vec<u8>> = (0..12)
                .map(|_| (0..40 + rng.index(400)).map(|_| rng.next() as u8).collect())
                .collect();
            // Puts of KiB-sized values (checkpoints), a forced checkpoint,
            // a snapshot, deletes, a reopen, a scan and a snapshot check.
            let mut crafted = Vec::new();
            for i in 0..30u8 {
                crafted.extend([0, i, i, 252, 1]);
            }
            crafted.extend([12, 10, 4, 3, 4, 5, 13, 9, 1, 2, 0, 11, 0, 0]);
            inputs.push(crafted);
            inputs
        }
        _ => unreachable!("unknown target {target}"),
    }
}

/// The smallest pages there are, so a few writes make a tree of many nodes.
fn real_options() -> Options {
    let mut o = checkpointing_options();
    o.leaf_size_bytes = 4096;
    o.node_size_bytes = 512;
    o
}

/// A database on a [`FaultFs`] after enough writes for several checkpoints.
fn real_fs() -> FaultFs {
    let fs = FaultFs::new();
    let db = open_fault(&fs, real_options()).unwrap();
    for i in 0..1500u32 {
        let mut batch = WriteBatch::new();
        batch.put(
            format!("key{:04}", i * 7919 % 3000),
            vec![i as u8; (i % 150) as usize],
        );
        if i % 5 == 0 {
            batch.delete(format!("key{:04}", i * 31 % 3000));
        }
        db.write(batch, &WriteOptions::default()).unwrap();
    }
    db.checkpoint_now().unwrap();
    assert!(db.stats().checkpoints >= 5);
    fs
}

fn real_file(name: &str) -> Vec<u8> {
    let fs = real_fs();
    let file = fs
        .open(&Path::new("/db").join(name), OpenOptions::read_only())
        .unwrap();
    read_all(file.as_ref()).unwrap()
}

/// Page contents read from a real page file, parsed by its documented
/// layout (`docs/format.md`, "Blocks" and "Page payload").
fn real_pages(nodes: bool) -> Vec<Vec<u8>> {
    let options = real_options();
    let (name, slot) = if nodes {
        ("nodes.pages", options.node_size_bytes as usize)
    } else {
        ("leaves.pages", options.leaf_size_bytes as usize)
    };
    let file = real_file(name);
    let block = slot.min(4096);
    let mut pages = Vec::new();
    for image in file.chunks_exact(slot) {
        let payload = &image[..block - 8];
        if &payload[..4] != b"TKPG" {
            continue; // a free (punched or never written) slot
        }
        let len = u32::from_le_bytes(payload[4..8].try_into().unwrap()) as usize;
        let id = u64::from_le_bytes(payload[8..16].try_into().unwrap());
        let blocks = ((id >> 40) & 0xFFFF) as usize + 1;
        let stream: Vec<u8> = image
            .chunks_exact(block)
            .take(blocks)
            .flat_map(|b| {
                let used = u32::from_le_bytes(b[block - 8..block - 4].try_into().unwrap());
                b[..used as usize].to_vec()
            })
            .collect();
        pages.push(stream[16..16 + len].to_vec());
    }
    pages.sort_by_key(Vec::len);
    pages
}

#[test]
fn seeds_are_valid_encodings() {
    let write = std::env::var_os("TURTLEKV_WRITE_CORPUS").is_some();
    for (target, decode) in TARGETS {
        let seeds = seeds(target);
        assert!(seeds.len() >= 2, "{target}: {} seeds", seeds.len());
        for (i, seed) in seeds.iter().enumerate() {
            assert!(decode(seed), "{target}: seed {i} does not decode");
        }
        if write {
            write_corpus(target, &seeds);
        }
    }
}

/// Seeds plus three mutants each, named by index.
fn write_corpus(target: &str, seeds: &[Vec<u8>]) {
    let dir = corpus_dir(target);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng(0xC0FFEE);
    for (i, seed) in seeds.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:02}")), seed).unwrap();
        for m in 0..3 {
            std::fs::write(
                dir.join(format!("mutant-{i:02}-{m}")),
                mutate(seed, &mut rng),
            )
            .unwrap();
        }
    }
}
