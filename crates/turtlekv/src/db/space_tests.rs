//! Page lifetimes through whole checkpoints: nothing leaks (the page
//! counts are exact after each one), readers opened before many
//! checkpoints read their version, and space stays bounded.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::io::{FaultFs, FileSystem, OpenOptions};
use crate::{Db, Options};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn open(fs: &FaultFs, o: Options) -> Db {
    Db::open_with_fs("/db", o, Arc::new(fs.clone())).unwrap()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// (allocated node, allocated leaf, pending, reachable pages, pinned)
fn accounting(db: &Db) -> (u64, u64, u64, u64, u64) {
    let t = db.inner.versions.trees().unwrap();
    t.reclaim().unwrap();
    let s = t.stats();
    let reach = s.shape.node_pages + s.shape.leaf_pages + s.shape.segment_pages;
    (
        s.pages.live_node_pages,
        s.pages.live_leaf_pages,
        s.pages.pending_free_pages,
        reach,
        s.pages.pinned_readers,
    )
}

fn file_len(fs: &FaultFs, name: &str) -> u64 {
    fs.open(&Path::new("/db").join(name), OpenOptions::read_only())
        .unwrap()
        .len()
        .unwrap()
}

fn churn(db: &Db, model: &mut Model, rng: &mut Rng, ops: usize, keys: u64, delete_pct: u64) {
    for _ in 0..ops {
        let x = rng.next();
        let k = format!("key{:06}", x % keys).into_bytes();
        if (x >> 40) % 100 < delete_pct {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let len = 20 + (x >> 20) as usize % 300;
            let v = vec![(x >> 8) as u8; len];
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
}

/// With no reader, every allocated page is reachable from the newest root
/// after each checkpoint: nothing leaks.
#[test]
fn no_page_leaks_across_many_checkpoints() {
    for seed in [1u64, 7, 99, 12345] {
        let fs = FaultFs::new();
        let db = open(&fs, super::checkpointing_test_options());
        let mut model = Model::new();
        let mut rng = Rng((seed * 2654435761) | 1);
        let mut worst = 0i64;
        for round in 0..60 {
            let delete_pct = if round % 10 >= 7 { 70 } else { 20 };
            churn(&db, &mut model, &mut rng, 300, 2000, delete_pct);
            db.checkpoint_now().unwrap();
            let (n, l, pending, reach, pins) = accounting(&db);
            let leaked = (n + l) as i64 - reach as i64;
            worst = worst.max(leaked);
            assert!(
                leaked == 0 && pending == 0 && pins == 1,
                "seed {seed} round {round}: allocated {n}+{l}, reachable {reach}, pending {pending}, pins {pins}"
            );
        }
        db.check().unwrap();
        let expect: Model = db
            .range::<&[u8], _>(..)
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect();
        assert_eq!(expect, model);
        eprintln!(
            "seed {seed}: stats {:?} nodes.pages {} leaves.pages {}",
            accounting(&db),
            file_len(&fs, "nodes.pages"),
            file_len(&fs, "leaves.pages")
        );
        // delete everything
        for k in model.keys() {
            db.delete(k).unwrap();
        }
        db.checkpoint_now().unwrap();
        let (n, l, pending, reach, pins) = accounting(&db);
        eprintln!("after deleting all: {n} {l} {pending} {reach} {pins}");
        assert_eq!(
            (n + l, pending),
            (reach, 0),
            "leak after deleting everything"
        );
        for round in 0..30 {
            churn(&db, &mut model, &mut rng, 300, 2000, 50);
            db.checkpoint_now().unwrap();
            let (n, l, pending, reach, pins) = accounting(&db);
            assert_eq!(
                (n + l, pending, pins),
                (reach, 0, 1),
                "seed {seed} round {round} second phase"
            );
        }
        db.check().unwrap();
    }
}

/// Larger trees: node splits with shared segments, joins, spills.
#[test]
fn no_page_leaks_in_deep_trees() {
    for (seed, node, distance, keys) in [
        (3u64, 512u64, 64 * 1024u64, 20_000u64),
        (5, 1024, 32 * 1024, 50_000),
        (11, 512, 16 * 1024, 5_000),
    ] {
        let mut o = super::checkpointing_test_options();
        o.node_size_bytes = node;
        o.checkpoint_distance_bytes = distance;
        let fs = FaultFs::new();
        let db = open(&fs, o);
        let mut model = Model::new();
        let mut rng = Rng((seed * 2654435761) | 1);
        for round in 0..40 {
            let delete_pct = match round % 8 {
                5 | 6 => 80,
                _ => 15,
            };
            churn(&db, &mut model, &mut rng, 1500, keys, delete_pct);
            db.checkpoint_now().unwrap();
            let (n, l, pending, reach, pins) = accounting(&db);
            assert_eq!(
                (n + l, pending, pins),
                (reach, 0, 1),
                "seed {seed} round {round}: allocated {n}+{l}"
            );
        }
        // Shrink: delete most keys, range by range, with a few overwrites.
        let all: Vec<Vec<u8>> = model.keys().cloned().collect();
        for (round, chunk) in all.chunks(all.len() / 12 + 1).enumerate() {
            for k in chunk.iter().filter(|k| k.last().unwrap() % 10 != 0) {
                db.delete(k).unwrap();
                model.remove(k);
            }
            churn(&db, &mut model, &mut rng, 100, keys, 0);
            db.checkpoint_now().unwrap();
            let (n, l, pending, reach, pins) = accounting(&db);
            assert_eq!(
                (n + l, pending, pins),
                (reach, 0, 1),
                "seed {seed} shrink round {round}: allocated {n}+{l}"
            );
        }
        db.check().unwrap();
        let w = db.inner.versions.trees().unwrap().stats();
        eprintln!(
            "seed {seed}: {:?} shape {:?} splits {} joins {} leafjoins {} shared_dropped {} spills {} lmw {}",
            accounting(&db),
            w.shape,
            w.written.node_splits,
            w.written.node_joins,
            w.written.leaf_joins,
            w.written.shared_segments_dropped,
            w.written.spills,
            w.written.level_merge_writes
        );
        let got: Model = db
            .range::<&[u8], _>(..)
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect();
        assert_eq!(got, model);
    }
}

/// An iterator and a snapshot opened before many checkpoints that rewrite
/// every key read exactly what was there when they started, step by step;
/// their pages are freed once they go.
#[test]
fn long_lived_readers_across_many_checkpoints() {
    let mut o = super::checkpointing_test_options();
    o.node_size_bytes = 512;
    o.checkpoint_distance_bytes = 16 * 1024;
    let fs = FaultFs::new();
    let db = open(&fs, o);
    let mut model = Model::new();
    let mut rng = Rng(77);
    churn(&db, &mut model, &mut rng, 6000, 3000, 10);
    db.checkpoint_now().unwrap();
    // Leave part of the state in the MemTable too.
    churn(&db, &mut model, &mut rng, 50, 3000, 10);
    let frozen = model.clone();
    let snap = db.snapshot();
    let mut fwd = db.range::<&[u8], _>(..);
    let mut back = db.range::<&[u8], _>(..).rev();
    let mut expect_fwd = frozen.iter();
    let mut expect_back = frozen.iter().rev();
    let keys: Vec<Vec<u8>> = frozen.keys().cloned().collect();
    let mut max_pending = 0;
    for round in 0..25 {
        // Rewrite everything with other values, delete some.
        churn(&db, &mut model, &mut rng, 1500, 3000, 30);
        db.checkpoint_now().unwrap();
        let (_, _, pending, _, pins) = accounting(&db);
        max_pending = max_pending.max(pending);
        assert!(pins >= 2, "round {round}: readers pin their version");
        for _ in 0..10 {
            match (fwd.next(), expect_fwd.next()) {
                (Some(got), Some((k, v))) => {
                    let (gk, gv) = got.unwrap_or_else(|e| panic!("round {round}: {e}"));
                    assert_eq!((&gk[..], &gv[..]), (&k[..], &v[..]), "round {round} fwd");
                }
                (None, None) => {}
                (a, b) => panic!("round {round}: {a:?} vs {b:?}"),
            }
            match (back.next(), expect_back.next()) {
                (Some(got), Some((k, v))) => {
                    let (gk, gv) = got.unwrap_or_else(|e| panic!("round {round}: {e}"));
                    assert_eq!((&gk[..], &gv[..]), (&k[..], &v[..]), "round {round} back");
                }
                (None, None) => {}
                (a, b) => panic!("round {round}: {a:?} vs {b:?}"),
            }
        }
        let k = &keys[(rng.next() % keys.len() as u64) as usize];
        assert_eq!(
            snap.get(k).unwrap().as_deref(),
            frozen.get(k).map(|v| &v[..]),
            "round {round}"
        );
    }
    let seen: Model = snap
        .range::<&[u8], _>(..)
        .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert_eq!(seen, frozen);
    db.check().unwrap();
    eprintln!("max pending {max_pending}, {:?}", accounting(&db));
    drop((snap, fwd, back));
    db.checkpoint_now().unwrap();
    churn(&db, &mut model, &mut rng, 1500, 3000, 30);
    db.checkpoint_now().unwrap();
    let (n, l, pending, reach, pins) = accounting(&db);
    assert_eq!((n + l, pending, pins), (reach, 0, 1));
    let got: Model = db
        .range::<&[u8], _>(..)
        .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert_eq!(got, model);
    eprintln!(
        "after: nodes.pages {} leaves.pages {}",
        file_len(&fs, "nodes.pages"),
        file_len(&fs, "leaves.pages")
    );
}

fn allocated(fs: &FaultFs, name: &str) -> u64 {
    fs.open(&Path::new("/db").join(name), OpenOptions::read_only())
        .unwrap()
        .allocated_bytes()
        .unwrap()
}

/// Overwrites of a fixed key set over many checkpoints, a snapshot held
/// across some of them: space stays bounded and comes back after the
/// snapshot goes.
#[test]
fn space_stays_bounded_over_many_checkpoints() {
    let fs = FaultFs::new();
    let db = open(&fs, super::checkpointing_test_options());
    let mut model = Model::new();
    let mut rng = Rng(4242);
    let mut samples = Vec::new();
    for round in 0..150 {
        let snap = (round % 30 == 10).then(|| db.snapshot());
        churn(&db, &mut model, &mut rng, 400, 1500, 15);
        db.checkpoint_now().unwrap();
        churn(&db, &mut model, &mut rng, 400, 1500, 15);
        db.checkpoint_now().unwrap();
        drop(snap);
        db.checkpoint_now().unwrap();
        churn(&db, &mut model, &mut rng, 10, 1500, 15);
        db.checkpoint_now().unwrap();
        let (n, l, pending, reach, _) = accounting(&db);
        assert_eq!((n + l, pending), (reach, 0), "round {round}");
        samples.push((
            file_len(&fs, "leaves.pages"),
            allocated(&fs, "leaves.pages"),
            file_len(&fs, "nodes.pages"),
            l,
        ));
    }
    eprintln!("round 20: {:?}\nround 149: {:?}", samples[20], samples[149]);
    let early = samples[20..40].iter().map(|s| s.1).max().unwrap();
    let late = samples[130..150].iter().map(|s| s.1).max().unwrap();
    assert!(
        late <= early * 3 / 2,
        "allocated leaf bytes grew from {early} to {late}"
    );
    let early_len = samples[20..40].iter().map(|s| s.0).max().unwrap();
    let late_len = samples[130..150].iter().map(|s| s.0).max().unwrap();
    assert!(
        late_len <= early_len * 2,
        "leaf file grew from {early_len} to {late_len}"
    );
    db.check().unwrap();
}
